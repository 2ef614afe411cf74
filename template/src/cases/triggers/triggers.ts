// Triggers: map report and appeal events to workflow versions with a CEL condition and an
// authority mode. A matching event starts one run per trigger (idempotent per trigger and subject).
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, errorCode, notFound } from "../../errors";
import { newId } from "../../lib/crypto";
import { assertComplaintReview } from "../appeals/complaints-review";
import type { TriggerEvent } from "../taxonomy";
import {
  categoryLiteralProblems,
  compileExpression,
  createRun,
  evaluateWorkflowExpression,
  type ExpressionSemantics,
  getVersionRow,
  type JsonValue,
  type ReadVersion,
  semanticsOf,
  versionJsonSql,
  type WorkflowAuthorityMode,
} from "../../workflows";

export interface TriggerInput {
  name?: string;
  event: TriggerEvent;
  when?: string;
  workflowVersionId: string;
  authorityMode: WorkflowAuthorityMode;
  enabled?: boolean;
}

interface TriggerRow {
  id: string;
  name: string;
  event: TriggerEvent;
  whenExpression: string;
  workflowVersionId: string;
  authorityMode: WorkflowAuthorityMode;
  enabled: number;
  createdAt: string;
  updatedAt: string;
  /** When a promotion or a demotion last changed the mode (promotion/promotion.ts); null before. */
  authorityChangedAt: string | null;
  /** Read with the enabled triggers: the semantics of the version it starts (null: `cel`). */
  expressionSemantics?: ExpressionSemantics | null;
  /** Read with the enabled triggers: the version it starts, as createRun reads it (versionJsonSql; null: none). */
  versionJson?: string | null;
}

export interface TriggeredRun {
  triggerId: string;
  runId?: string;
  state?: string;
  error?: string;
}

const COLUMNS = `id, name, event, when_expression AS whenExpression, workflow_version_id AS workflowVersionId,
  authority_mode AS authorityMode, enabled, created_at AS createdAt, updated_at AS updatedAt, authority_changed_at AS authorityChangedAt`;

export function serialize(row: TriggerRow) {
  return { ...row, when: row.whenExpression, whenExpression: undefined, enabled: row.enabled === 1 };
}

// A trigger's `when` is CEL under the expression semantics of the version it starts, so it keeps
// its meaning as long as that (immutable) version does (docs/graph-format.md).
export async function createTrigger(env: Env, actor: Actor, input: TriggerInput) {
  const when = input.when ?? "true";
  if (/\bcontent\b/u.test(when)) {
    throw new AppError(
      "trigger.when_invalid",
      "when: content_not_readable_here — a trigger sees the report's summary (report.category, report.subject…), never its content; read content in an enrichment or ai_proposal node of the workflow.",
      {
        status: 422,
        details: [{ path: "$.when", code: "content_not_readable_here" }],
      },
    );
  }
  const version = await getVersionRow(env.DB, actor.installationId, input.workflowVersionId);
  if (!version) throw notFound("workflow_version");
  if (version.retiredAt) throw new AppError("workflow_version.retired", "The workflow version is retired.", { status: 409 });
  if (input.event === "appeal.created") await assertComplaintReview(env.DB, actor.installationId, version);
  const semantics = semanticsOf(JSON.parse(version.graphJson) as { expressionSemantics?: unknown });
  try {
    compileExpression(when, semantics);
  } catch (error) {
    const code = errorCode(error);
    if (code === "expression.too_costly" || code === "expression.nesting_too_deep") {
      const details = [{ path: "$.when", code, message: (error as Error).message, ...((error as AppError).details as object) }];
      throw new AppError("trigger.when_too_costly", `when may cost too much to evaluate on every report: ${(error as Error).message}`, { status: 422, details });
    }
    throw new AppError("trigger.when_invalid", `when is not a valid CEL expression: ${(error as Error).message}`, { status: 422 });
  }
  const never = categoryLiteralProblems(when, semantics);
  if (never.length > 0) {
    throw new AppError("trigger.when_invalid", `when can never match: ${never[0]!.message}`, {
      status: 422,
      details: never.map((problem) => ({ path: "$.when", code: "category_never_stored", message: problem.message, instead: problem.instead })),
    });
  }
  const id = newId("trg");
  const at = new Date().toISOString();
  const name = input.name ?? `${version.workflowName} v${version.version}`;
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO triggers (id, installation_id, name, event, when_expression, workflow_version_id, authority_mode, enabled, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)`).bind(id, actor.installationId, name, input.event, when, input.workflowVersionId, input.authorityMode, input.enabled === false ? 0 : 1, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `trigger:${id}:created`,
      action: "trigger.created",
      actor: actor.audit,
      target: { type: "trigger", id },
      details: { name, event: input.event, when, workflowVersionId: input.workflowVersionId, authorityMode: input.authorityMode },
      at,
    }),
  ]);
  return serialize((await getTrigger(env.DB, actor.installationId, id))!);
}

export function getTrigger(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT ${COLUMNS} FROM triggers WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<TriggerRow>();
}

export async function listTriggers(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM triggers WHERE installation_id = ?1 ORDER BY created_at DESC LIMIT 500`).bind(actor.installationId).all<TriggerRow>();
  return results.map(serialize);
}

export async function setTriggerEnabled(env: Env, actor: Actor, id: string, enabled: boolean) {
  const row = await getTrigger(env.DB, actor.installationId, id);
  if (!row) throw notFound("trigger");
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE triggers SET enabled = ?3, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id, enabled ? 1 : 0, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `trigger:${id}:${enabled ? "enabled" : "disabled"}:${at}`,
      action: enabled ? "trigger.enabled" : "trigger.disabled",
      actor: actor.audit,
      target: { type: "trigger", id },
      details: { name: row.name },
      at,
    }),
  ]);
  return serialize((await getTrigger(env.DB, actor.installationId, id))!);
}

/**
 * The enabled triggers of installation `installation` for event `event` (two SQL expressions), each
 * with the semantics and the version (versionJsonSql) it starts, oldest first: the one query of
 * them, whether run alone (enabledTriggersStatement) or folded into another statement as one JSON
 * value (enabledTriggersJsonSql).
 */
function enabledTriggersSql(installation: string, event: string): string {
  return `SELECT ${COLUMNS}, (SELECT json_extract(v.graph_json, '$.expressionSemantics') FROM workflow_versions v
      WHERE v.installation_id = triggers.installation_id AND v.id = triggers.workflow_version_id) AS expressionSemantics,
      ${versionJsonSql("triggers.installation_id", "triggers.workflow_version_id")} AS versionJson
      FROM triggers WHERE installation_id = ${installation} AND event = ${event} AND enabled = 1 ORDER BY created_at`;
}

/** The enabled triggers of an event, as a statement (so a caller can read them in a batch of its own). */
export function enabledTriggersStatement(db: D1Database, installationId: string, event: TriggerEvent): D1PreparedStatement {
  return db.prepare(enabledTriggersSql("?1", "?2")).bind(installationId, event);
}

/**
 * The enabled triggers of an event as ONE SQL value (a JSON list of TriggerRow, oldest first), for
 * a statement that reads them beside what it answers anyway (intake's case upsert); read it with
 * triggerRowsOf. `installation` and `event` are SQL expressions (placeholders of that statement).
 */
export function enabledTriggersJsonSql(installation: string, event: string): string {
  const fields = ["id", "name", "event", "whenExpression", "workflowVersionId", "authorityMode", "enabled", "createdAt", "updatedAt", "authorityChangedAt", "expressionSemantics", "versionJson"];
  return `(SELECT json_group_array(json_object(${fields.map((field) => `'${field}', t.${field}`).join(", ")})) FROM (${enabledTriggersSql(installation, event)}) AS t)`;
}

/** The triggers enabledTriggersJsonSql read, as enabledTriggersStatement answers them (null: none read). */
export function triggerRowsOf(json: unknown): TriggerRow[] | undefined {
  if (typeof json !== "string") return undefined;
  const rows = JSON.parse(json) as Array<Omit<TriggerRow, "versionJson"> & { versionJson?: unknown }>;
  // Oldest first, as the statement reads them, whatever order the aggregate kept.
  rows.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  return rows.map((row) => ({
    ...row,
    // The version's JSON comes as text or, should SQLite keep its JSON subtype through the subquery, as the object itself.
    versionJson: row.versionJson === null || row.versionJson === undefined ? null : typeof row.versionJson === "string" ? row.versionJson : JSON.stringify(row.versionJson),
  }));
}

export type { TriggerRow };

/**
 * Evaluates every enabled trigger of `event` and starts a run for each match. A trigger that
 * fails to evaluate or to start is reported (and audited), never fatal to the intake: the event
 * is already recorded, and repeating the request with its Idempotency-Key retries the start.
 */
export async function fireTriggers(
  env: Env,
  ctx: ExecutionContext,
  actor: Actor,
  input: { event: TriggerEvent; report: Record<string, unknown> | null; appeal?: Record<string, unknown>; subjectKey: string; triggers?: TriggerRow[] },
): Promise<TriggeredRun[]> {
  const results = input.triggers ?? (await enabledTriggersStatement(env.DB, actor.installationId, input.event).all<TriggerRow>()).results;
  // Triggers read in intake's batch come with their version, and the run's report is the one that
  // batch wrote or read in D1: createRun needs no statement of its own to read them. (An appeal's
  // report may be read from the archive, so its runs read their references as any run does.)
  const readVersion = (trigger: TriggerRow): { version?: ReadVersion } => (input.triggers && !input.appeal && trigger.versionJson ? { version: JSON.parse(trigger.versionJson) as ReadVersion } : {});
  // The run's input holds only what never changes about the event, so a replay asks for the same run.
  const { caseReportCount: _count, ...stableReport } = input.report ?? {};
  const payload = { report: (input.report ? stableReport : null) as JsonValue, ...(input.appeal ? { appeal: input.appeal as JsonValue } : {}) };
  const outcomes: TriggeredRun[] = [];
  for (const trigger of results) {
    let matched: JsonValue;
    try {
      matched = evaluateWorkflowExpression(trigger.whenExpression, {
        input: payload,
        report: (input.report ?? null) as JsonValue,
        run: null,
        steps: {},
        event: { type: input.event },
        semantics: semanticsOf(trigger),
      });
    } catch (error) {
      matched = null;
      outcomes.push({ triggerId: trigger.id, error: errorCode(error) });
      await auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `trigger:${trigger.id}:${input.subjectKey}:evaluation_failed`,
        action: "trigger.evaluation_failed",
        actor: { type: "system", id: "triggers" },
        target: { type: "trigger", id: trigger.id },
        details: { subject: input.subjectKey, errorCode: errorCode(error) },
        at: new Date().toISOString(),
      }).run();
      continue;
    }
    if (matched !== true) continue;
    try {
      const reportId = typeof input.report?.id === "string" ? input.report.id : undefined;
      const appealId = typeof input.appeal?.id === "string" ? input.appeal.id : undefined;
      const { run } = await createRun(
        env,
        ctx,
        actor,
        {
          workflowVersionId: trigger.workflowVersionId,
          authorityMode: trigger.authorityMode,
          input: payload,
          ...(reportId ? { reportId } : {}),
          ...(appealId ? { appealId } : {}),
          idempotencyKey: `trigger:${trigger.id}:${input.subjectKey}`,
        },
        readVersion(trigger),
      );
      outcomes.push({ triggerId: trigger.id, runId: run.id, state: run.state });
    } catch (error) {
      outcomes.push({ triggerId: trigger.id, error: errorCode(error) });
    }
  }
  return outcomes;
}
