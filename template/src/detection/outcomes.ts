// What a rule's hit does, by its rule set's authority mode:
// - shadow: nothing; the hit is recorded with what it would have done (applied = 0).
// - assisted: reports are opened and runs started (in assisted mode, so their actions wait for a
//   person); labels, which act without a person, are recorded but not applied.
// - autonomous: every outcome is applied.
// Every hit is a rule_hits row, the same row for a retried event; reports and runs take an
// idempotency key derived from (version, rule, event), labels are an upsert, so a retry repeats
// nothing. Reports go through report intake (cases/reports/reports.ts: sealed, deduplicated by
// subject, triggers fired); runs through createRun.
import type { Actor } from "../auth";
import { intakeReport } from "../cases/reports/reports";
import { AppError, errorCode } from "../errors";
import { createRun, type JsonValue, modeUnderTriggers, type WorkflowAuthorityMode } from "../workflows";
import type { ProductEvent } from "./events";
import { enqueueWritten, labelChangeDeliveries, labelEndpoints } from "./label-webhooks";
import { labelSubject, ruleLabelStatement } from "./labels";
import { type LoadedVersion, OUTCOME_ENTITY_KINDS, parseDuration, type Rule } from "./rule-sets";

export interface Hit {
  event: ProductEvent;
  version: LoadedVersion;
  rule: LoadedVersion["rules"][number];
  resultIndex: number;
}

/**
 * Reports opened and runs started per request at most: each is a write path of its own (report
 * intake, a workflow run), so one batch of events cannot fan out into unbounded work. Hits past
 * the cap are recorded, not applied, with `rule.outcomes_capped` as their result; the client
 * resends those events in a later batch (a retried event's applied outcomes repeat nothing).
 */
export const MAX_APPLIED_OUTCOMES_PER_REQUEST = 50;

function applies(mode: string, outcome: Rule["outcome"]): boolean {
  if (mode === "autonomous") return true;
  if (mode === "assisted") return !("label" in outcome);
  return false;
}

/**
 * Records every hit and applies those its mode allows; answers, per hit, whether it was applied.
 * `extra`: statements for the same batch (the sampled events).
 */
export async function applyHits(env: Env, ctx: ExecutionContext, actor: Actor, input: { hits: Hit[]; keyOf: (kind: string, value: string) => string; at: string; extra: D1PreparedStatement[] }): Promise<boolean[]> {
  const statements: D1PreparedStatement[] = [...input.extra];
  const applied: boolean[] = [];
  let budget = MAX_APPLIED_OUTCOMES_PER_REQUEST;
  // Label changes go out as webhooks (label-webhooks.ts): the subscribed endpoints, read once when any label may be applied.
  const labelling = input.hits.some((hit) => "label" in hit.rule.outcome && applies(hit.version.authorityMode, hit.rule.outcome));
  const endpoints = labelling ? await labelEndpoints(env.DB, actor.installationId, "applied") : [];
  const deliveries: Array<{ id: string; index: number }> = [];
  // One delivery per entity and value per request: later hits on it in the batch only refresh it.
  const announced = new Set<string>();
  // The mode a run outcome starts its workflow in, read once per version and mode in this request.
  const runModes = new Map<string, Promise<WorkflowAuthorityMode>>();
  const runMode = (workflowVersionId: string, mode: WorkflowAuthorityMode) => {
    const key = `${workflowVersionId}\u0000${mode}`;
    let read = runModes.get(key);
    if (!read) {
      read = modeUnderTriggers(env.DB, actor.installationId, workflowVersionId, mode);
      runModes.set(key, read);
    }
    return read;
  };
  for (const hit of input.hits) {
    const { event, version, rule } = hit;
    const outcome = rule.outcome;
    const source = `${version.versionId}/${rule.id}`;
    const idempotencyKey = `rule:${version.versionId}:${rule.id}:${event.id}`;
    let result: Record<string, JsonValue> | null = null;
    let done = false;
    const entityOf = (kind: string | undefined) => (kind === undefined ? undefined : event.entities[kind]);
    const costly = "report" in outcome || "run" in outcome;
    // The entity the outcome names, by key: what a person's later decision about it is compared with (shadow agreement).
    const outcomeKind = "label" in outcome ? outcome.label.entity : "report" in outcome ? outcome.report.entity : undefined;
    const outcomeValue = entityOf(outcomeKind);
    const outcomeKey = outcomeKind !== undefined && outcomeValue !== undefined ? input.keyOf(outcomeKind, outcomeValue) : null;
    if (costly && applies(version.authorityMode, outcome) && budget <= 0) result = { error: "rule.outcomes_capped" };
    else if (applies(version.authorityMode, outcome)) {
      if (costly) budget -= 1;
      const ruleActor: Actor = { installationId: actor.installationId, scopes: actor.scopes, audit: { type: "system", id: `rule:${source}` } };
      try {
        if ("label" in outcome) {
          const value = entityOf(outcome.label.entity);
          if (value === undefined) result = { error: "rule.entity_missing" };
          else {
            const ttl = outcome.label.expiresIn === undefined ? null : parseDuration(outcome.label.expiresIn);
            const entityKey = input.keyOf(outcome.label.entity, value);
            // A rule's label lasts from the event it was drawn from.
            const expiresAt = ttl === null ? null : new Date(event.at + ttl).toISOString();
            statements.push(
              ruleLabelStatement(env.DB, {
                installationId: actor.installationId,
                entityKey,
                kind: outcome.label.entity,
                value: outcome.label.value,
                sourceId: source,
                at: input.at,
                expiresAt,
                subject: labelSubject(outcome.label.entity, value),
              }),
            );
            const announce = `${entityKey}\u0000${outcome.label.value}`;
            const made = announced.has(announce)
              ? []
              : await labelChangeDeliveries(
                  env,
                  endpoints,
                  {
                    installationId: actor.installationId,
                    change: "applied",
                    entityKind: outcome.label.entity,
                    entityKey,
                    entityId: value,
                    label: outcome.label.value,
                    source: `rule:${source}`,
                    createdAt: input.at,
                    expiresAt,
                    changeKey: `${entityKey}\u0000${outcome.label.value}\u0000${input.at}`,
                    at: input.at,
                  },
                  // Only a label this write created (or revived after its expiry): a refresh keeps its created_at.
                  { table: "entity_labels", where: { installation_id: actor.installationId, entity_key: entityKey, value: outcome.label.value, created_at: input.at, source_type: "rule", negated: 0 } },
                );
            announced.add(announce);
            for (const delivery of made) {
              deliveries.push({ id: delivery.id, index: statements.length });
              statements.push(delivery.statement);
            }
            done = true;
          }
        } else if ("report" in outcome) {
          const value = entityOf(outcome.report.entity);
          const subjectKind = OUTCOME_ENTITY_KINDS[outcome.report.entity];
          // Publish refuses personal kinds; a version stored before that check is refused here too.
          if (!subjectKind || !Object.hasOwn(OUTCOME_ENTITY_KINDS, outcome.report.entity)) result = { error: "rule_set.entity_personal" };
          else if (value === undefined) result = { error: "rule.entity_missing" };
          else {
            const { report } = await intakeReport(
              env,
              ctx,
              ruleActor,
              {
                // An account is its own owner, so the report's strikes accrue to it.
                subject: { kind: subjectKind, id: value, ...(subjectKind === "account" ? { ownerId: value } : {}) },
                category: outcome.report.category,
                source: "voluntary",
                description: outcome.report.description ?? `Rule ${rule.id} matched event ${event.type} ${event.id}.`,
              },
              idempotencyKey,
            );
            result = { reportId: report.id };
            done = true;
          }
        } else if ("run" in outcome) {
          const value = entityOf(outcome.run.entity);
          if (outcome.run.entity !== undefined && !Object.hasOwn(OUTCOME_ENTITY_KINDS, outcome.run.entity)) throw new AppError("rule_set.entity_personal", "A run outcome passes only account or content entities.", { status: 422 });
          // The rule set's mode, never above what the workflow's own triggers have earned.
          const mode = await runMode(outcome.run.workflowVersionId, version.authorityMode);
          const { run } = await createRun(env, ctx, ruleActor, {
            workflowVersionId: outcome.run.workflowVersionId,
            authorityMode: mode,
            input: {
              event: { id: event.id, type: event.type, occurredAt: event.occurredAt },
              rule: { ruleSetId: version.ruleSetId, versionId: version.versionId, ruleId: rule.id },
              ...(outcome.run.entity && value !== undefined ? { subject: { kind: outcome.run.entity, id: value } } : {}),
            },
            idempotencyKey,
          });
          result = { runId: run.id };
          done = true;
        }
      } catch (error) {
        result = { error: errorCode(error) };
      }
    }
    applied.push(done);
    statements.push(
      env.DB.prepare(`
        INSERT INTO rule_hits (installation_id, rule_set_version_id, rule_id, event_id, rule_set_id, event_type, authority_mode, applied, outcome_json, result_json, occurred_at, created_at, entity_key)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
        ON CONFLICT DO UPDATE SET applied = MAX(applied, excluded.applied), result_json = COALESCE(excluded.result_json, result_json)`).bind(
        actor.installationId,
        version.versionId,
        rule.id,
        event.id,
        version.ruleSetId,
        event.type,
        version.authorityMode,
        done ? 1 : 0,
        JSON.stringify(outcome),
        result === null ? null : JSON.stringify(result),
        event.occurredAt,
        input.at,
        outcomeKey,
      ),
    );
  }
  const results: D1Result[] = [];
  for (let i = 0; i < statements.length; i += 500) results.push(...(await env.DB.batch(statements.slice(i, i + 500))));
  await enqueueWritten(env, deliveries, results);
  return applied;
}
