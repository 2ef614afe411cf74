// Rule sets: create, publish immutable versions (every rule's `when` compiled, its counters read
// out, its outcome checked; the rules stored as canonical JSON with their sha256 digest), deploy a
// version in an authority mode; what intake loads of them is deployed-versions.ts.
import { auditStatement, canonicalJson } from "../audit";
import type { Actor } from "../auth";
import { normalizeCategory } from "../cases";
import { AppError, conflict, type ErrorDetail, errorCode, notFound } from "../errors";
import { newId, sha256HexSync } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";
import { EXPRESSION_SEMANTICS, type ExpressionSemantics, getVersionRow, type WorkflowAuthorityMode } from "../workflows";
import { forgetDeployed } from "./deployed-cache";
import { checkAutonomousGate, evaluateRuleSetPromotion, type RuleSetGate, ruleSetGateOf, ruleSetGateStatements } from "./rule-set-gates";
import { compileRule, type CounterSpec, ENTITY_KIND, OUTCOME_ENTITY_KINDS } from "./rules-language";

export { OUTCOME_ENTITY_KINDS } from "./rules-language";

/** Rules a version may hold. */
export const MAX_RULES = 200;
/** Distinct counters a version's rules may read: each is a counter op per event that names its entity. */
export const MAX_COUNTERS_PER_VERSION = 64;
/** Rules deployed (in a mode other than off) across an installation's rule sets: every event runs them all. */
export const MAX_DEPLOYED_RULES = 500;
/** What a version gets when it names no semantics: the current default for new rules (JSON numbers meet CEL ints). */
export const RULE_SEMANTICS_DEFAULT: ExpressionSemantics = "json-numbers-1";
const RULE_ID = /^[A-Za-z0-9_.-]{1,64}$/u;
const LABEL_VALUE = /^[a-z0-9][a-z0-9_.:!-]{0,63}$/u;

export type RuleOutcome =
  | { label: { entity: string; value: string; expiresIn?: string } }
  | { report: { entity: string; category: string; description?: string } }
  | { run: { workflowVersionId: string; entity?: string } }
  | { action: Record<string, unknown> };

export interface Rule {
  id: string;
  when: string;
  outcome: RuleOutcome;
}

export interface StoredRules {
  schemaVersion: 1;
  expressionSemantics: ExpressionSemantics;
  rules: Rule[];
}

/** A deployed version as intake runs it: rules compiled, counters read out. */
export interface LoadedVersion {
  ruleSetId: string;
  versionId: string;
  authorityMode: WorkflowAuthorityMode;
  semantics: ExpressionSemantics;
  rules: Array<Rule & { counters: CounterSpec[]; bounded: boolean }>;
  readsLabels: boolean;
}

const RULE_SET_COLUMNS = `id, name, deployed_version_id AS deployedVersionId, authority_mode AS authorityMode, deployed_at AS deployedAt, gate_json AS gateJson, created_at AS createdAt, updated_at AS updatedAt`;

interface RuleSetRow {
  id: string;
  name: string;
  deployedVersionId: string | null;
  authorityMode: WorkflowAuthorityMode;
  deployedAt: string | null;
  gateJson: string | null;
  createdAt: string;
  updatedAt: string;
}

interface VersionRow {
  id: string;
  ruleSetId: string;
  version: number;
  rulesJson: string;
  rulesDigest: string;
  createdAt: string;
}

export function getRuleSetRow(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT ${RULE_SET_COLUMNS} FROM rule_sets WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<RuleSetRow>();
}

export function getRuleSetVersionRow(db: D1Database, installationId: string, id: string) {
  return db
    .prepare(`SELECT id, rule_set_id AS ruleSetId, version, rules_json AS rulesJson, rules_digest AS rulesDigest, created_at AS createdAt FROM rule_set_versions WHERE installation_id = ?1 AND id = ?2`)
    .bind(installationId, id)
    .first<VersionRow>();
}

export async function createRuleSet(env: Env, actor: Actor, input: { name: string }) {
  const id = newId("rls");
  const at = new Date().toISOString();
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO rule_sets (id, installation_id, name, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)`).bind(id, actor.installationId, input.name, at),
      auditStatement(env.DB, { installationId: actor.installationId, idempotencyKey: `rule_set:${id}:created`, action: "rule_set.created", actor: actor.audit, target: { type: "rule_set", id }, details: { name: input.name }, at }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("rule_set.name_taken", "A rule set with this name already exists; pick another name.");
    throw error;
  }
  return serializeRuleSet((await getRuleSetRow(env.DB, actor.installationId, id))!);
}

export async function getRuleSet(env: Env, actor: Actor, id: string) {
  const row = await getRuleSetRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("rule_set");
  const { results } = await env.DB.prepare(`SELECT id, version, rules_digest AS rulesDigest, created_at AS createdAt FROM rule_set_versions WHERE installation_id = ?1 AND rule_set_id = ?2 ORDER BY version DESC LIMIT 100`)
    .bind(actor.installationId, id)
    .all<{ id: string; version: number; rulesDigest: string; createdAt: string }>();
  return { ...serializeRuleSet(row), versions: results };
}

export async function listRuleSets(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${RULE_SET_COLUMNS} FROM rule_sets WHERE installation_id = ?1 ORDER BY created_at DESC LIMIT 500`).bind(actor.installationId).all<RuleSetRow>();
  return { items: results.map(serializeRuleSet) };
}

/**
 * A rule set's gate and, for a version (default: the deployed one), per rule its hits, hit rate and
 * shadow agreement, and where the version stands against the gate for autonomous.
 */
export async function getRuleSetGate(env: Env, actor: Actor, ruleSetId: string, versionId?: string) {
  const ruleSet = await getRuleSetRow(env.DB, actor.installationId, ruleSetId);
  if (!ruleSet) throw notFound("rule_set");
  const { gate, source } = ruleSetGateOf(ruleSet.gateJson);
  const id = versionId ?? ruleSet.deployedVersionId;
  if (!id) return { ruleSetId, gate, source, version: null };
  const version = await getRuleSetVersionRow(env.DB, actor.installationId, id);
  if (!version || version.ruleSetId !== ruleSetId) throw new AppError("rule_set_version.not_found", "No version with this id in this rule set.", { status: 404 });
  const evaluation = await evaluateRuleSetPromotion(env, actor.installationId, { gateJson: ruleSet.gateJson, versionId: id, ruleIds: (JSON.parse(version.rulesJson) as StoredRules).rules.map((rule) => rule.id) });
  return { ruleSetId, gate, source, version: { id, version: version.version, rules: evaluation.rules, autonomous: { requirements: evaluation.requirements, met: evaluation.met } } };
}

/** Sets the rule set's gate (fields left out keep their value); audited. */
export async function putRuleSetGate(env: Env, actor: Actor, ruleSetId: string, input: Partial<RuleSetGate>) {
  const ruleSet = await getRuleSetRow(env.DB, actor.installationId, ruleSetId);
  if (!ruleSet) throw notFound("rule_set");
  const gate: RuleSetGate = { ...ruleSetGateOf(ruleSet.gateJson).gate, ...input };
  await env.DB.batch(ruleSetGateStatements(env.DB, actor, ruleSet, gate, new Date().toISOString()));
  return getRuleSetGate(env, actor, ruleSetId);
}

function serializeRuleSet(row: RuleSetRow) {
  return { id: row.id, name: row.name, deployment: row.deployedVersionId ? { versionId: row.deployedVersionId, authorityMode: row.authorityMode, deployedAt: row.deployedAt } : null, createdAt: row.createdAt, updatedAt: row.updatedAt };
}

/** Checks every rule (all problems at once); throws `rule_set.invalid` (422) with their paths. */
export async function checkRules(env: Env, installationId: string, rules: Rule[], semantics: ExpressionSemantics): Promise<void> {
  const problems: ErrorDetail[] = [];
  const ids = new Set<string>();
  const workflowVersions = new Set<string>();
  const counters = new Set<string>();
  rules.forEach((rule, index) => {
    const path = `$.rules[${index}]`;
    if (!RULE_ID.test(rule.id)) problems.push({ path: `${path}.id`, code: "rule_id_invalid", message: "A rule id is 1 to 64 letters, digits, '_', '.' or '-'." });
    else if (ids.has(rule.id)) problems.push({ path: `${path}.id`, code: "rule_id_duplicate", message: "Rule ids are unique within a version." });
    ids.add(rule.id);
    try {
      for (const counter of compileRule(rule.when, semantics).counters) counters.add(JSON.stringify(counter));
    } catch (error) {
      problems.push({ path: `${path}.when`, code: errorCode(error), message: (error as Error).message });
    }
    const outcome = rule.outcome as Record<string, Record<string, unknown>>;
    const kinds = Object.keys(outcome);
    if (kinds.length !== 1) {
      problems.push({ path: `${path}.outcome`, code: "outcome_invalid", message: "An outcome names exactly one of label, report, run or action." });
      return;
    }
    const entity = outcome[kinds[0]!]!.entity;
    if (entity !== undefined && (typeof entity !== "string" || !ENTITY_KIND.test(entity)))
      problems.push({ path: `${path}.outcome.${kinds[0]}.entity`, code: "entity_kind_invalid", message: "entity is an entity kind of the event, e.g. account." });
    if ("label" in outcome) {
      const label = outcome.label!;
      if (typeof label.value !== "string" || !LABEL_VALUE.test(label.value))
        problems.push({ path: `${path}.outcome.label.value`, code: "label_value_invalid", message: "A label value is 1 to 64 lowercase letters, digits and _ . : ! -, starting with a letter or digit." });
      if (label.expiresIn !== undefined && (typeof label.expiresIn !== "string" || parseDuration(label.expiresIn) === null))
        problems.push({ path: `${path}.outcome.label.expiresIn`, code: "duration_invalid", message: "expiresIn is a duration such as '30m', '24h' or '90d' (at most 365 days)." });
    } else if ("report" in outcome) {
      const report = outcome.report!;
      if (typeof report.category !== "string" || !normalizeCategory(report.category))
        problems.push({ path: `${path}.outcome.report.category`, code: "category_unknown", message: "Use a DSA statement category (e.g. scams_and_fraud) or an ATProto reason type." });
      if (typeof report.entity !== "string") problems.push({ path: `${path}.outcome.report.entity`, code: "entity_required", message: "A report outcome names the entity it reports (its subject), e.g. account." });
      else if (!Object.hasOwn(OUTCOME_ENTITY_KINDS, report.entity)) problems.push(personalEntity(path, "report", rule.id, report.entity));
    } else if ("run" in outcome) {
      const run = outcome.run!;
      if (typeof run.workflowVersionId !== "string") problems.push({ path: `${path}.outcome.run.workflowVersionId`, code: "workflow_version_required", message: "A run outcome names the workflow version it starts." });
      else workflowVersions.add(run.workflowVersionId);
      if (typeof run.entity === "string" && !Object.hasOwn(OUTCOME_ENTITY_KINDS, run.entity)) problems.push(personalEntity(path, "run", rule.id, run.entity));
    } else if ("action" in outcome) {
      problems.push({
        path: `${path}.outcome.action`,
        code: "rule_set.outcome_unsupported",
        message: "A rule cannot propose an action directly yet; use a run outcome whose workflow proposes it (its approvals and authority mode then apply).",
      });
    } else problems.push({ path: `${path}.outcome`, code: "outcome_invalid", message: "An outcome names exactly one of label, report, run or action." });
  });
  if (counters.size > MAX_COUNTERS_PER_VERSION)
    problems.push({ path: "$.rules", code: "rule_set.too_many_counters", message: `The rules read ${counters.size} distinct counters; a version reads at most ${MAX_COUNTERS_PER_VERSION}. Share windows and event types between rules.` });
  for (const versionId of workflowVersions) {
    const version = await getVersionRow(env.DB, installationId, versionId);
    const path = `$.rules[${rules.findIndex((rule) => (rule.outcome as { run?: { workflowVersionId?: string } }).run?.workflowVersionId === versionId)}].outcome.run.workflowVersionId`;
    if (!version) problems.push({ path, code: "workflow_version.not_found", message: "No workflow version with this id in this installation." });
    else if (version.retiredAt) problems.push({ path, code: "workflow_version.retired", message: "The workflow version is retired; name a live one." });
  }
  if (problems.length > 0) throw new AppError("rule_set.invalid", `The rules have ${problems.length} problem(s); see details.`, { status: 422, details: problems });
}

function personalEntity(path: string, outcome: "report" | "run", ruleId: string, entity: string): ErrorDetail {
  return {
    path: `${path}.outcome.${outcome}.entity`,
    code: "rule_set.entity_personal",
    message: `Rule '${ruleId}': a ${outcome} outcome stores its entity in plaintext, so it names one of ${Object.keys(OUTCOME_ENTITY_KINDS).join(", ")}; '${entity}' may be counted or labelled but not ${outcome === "report" ? "reported" : "passed to a run"}.`,
  };
}

/** A duration such as `30m`, `24h`, `90d` in ms (at most 365 days), or null. */
export function parseDuration(text: string): number | null {
  const match = /^([1-9][0-9]{0,5})([smhd])$/u.exec(text);
  if (!match) return null;
  const ms = Number(match[1]) * { s: 1000, m: 60_000, h: 3600_000, d: 86_400_000 }[match[2] as "s"];
  return ms <= 365 * 86_400_000 ? ms : null;
}

/** Publishes an immutable version; 422 `rule_set.invalid` with every problem when a rule is wrong. */
export async function publishRuleSetVersion(env: Env, actor: Actor, ruleSetId: string, input: { rules: Rule[]; expressionSemantics?: ExpressionSemantics }) {
  const ruleSet = await getRuleSetRow(env.DB, actor.installationId, ruleSetId);
  if (!ruleSet) throw notFound("rule_set");
  const semantics = input.expressionSemantics ?? RULE_SEMANTICS_DEFAULT;
  if (!(EXPRESSION_SEMANTICS as readonly string[]).includes(semantics)) throw new AppError("rule_set.invalid", `expressionSemantics is one of ${EXPRESSION_SEMANTICS.join(", ")}.`, { status: 422 });
  if (input.rules.length > MAX_RULES) throw new AppError("rule_set.invalid", `A version holds at most ${MAX_RULES} rules.`, { status: 422 });
  await checkRules(env, actor.installationId, input.rules, semantics);
  const stored: StoredRules = { schemaVersion: 1, expressionSemantics: semantics, rules: input.rules };
  const rulesJson = canonicalJson(stored);
  const digest = `sha256:${sha256HexSync(rulesJson)}`;
  const id = newId("rsv");
  const at = new Date().toISOString();
  try {
    await env.DB.batch([
      env.DB.prepare(`
        INSERT INTO rule_set_versions (id, installation_id, rule_set_id, version, rules_json, rules_digest, created_at)
        SELECT ?1, ?2, ?3, COALESCE(MAX(version), 0) + 1, ?4, ?5, ?6 FROM rule_set_versions WHERE installation_id = ?2 AND rule_set_id = ?3
      `).bind(id, actor.installationId, ruleSetId, rulesJson, digest, at),
      env.DB.prepare(`UPDATE rule_sets SET updated_at = ?3 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, ruleSetId, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `rule_set_version:${id}:published`,
        action: "rule_set.version_published",
        actor: actor.audit,
        target: { type: "rule_set_version", id },
        details: { ruleSetId, ruleSetName: ruleSet.name, rules: input.rules.length, digest },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError("rule_set_version.conflict", "Another version was published at the same moment; retry.", { status: 409, retryable: true });
    throw error;
  }
  return serializeVersion((await getRuleSetVersionRow(env.DB, actor.installationId, id))!);
}

export async function getRuleSetVersion(env: Env, actor: Actor, id: string) {
  const row = await getRuleSetVersionRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("rule_set_version");
  return serializeVersion(row);
}

function serializeVersion(row: VersionRow) {
  const stored = JSON.parse(row.rulesJson) as StoredRules;
  return { id: row.id, ruleSetId: row.ruleSetId, version: row.version, expressionSemantics: stored.expressionSemantics, rules: stored.rules, digest: row.rulesDigest, createdAt: row.createdAt };
}

/** Deploys a version of the rule set (or stops it: mode `off`); the change is audited. */
export async function deployRuleSet(env: Env, actor: Actor, ruleSetId: string, input: { versionId: string; authorityMode: WorkflowAuthorityMode }) {
  const ruleSet = await getRuleSetRow(env.DB, actor.installationId, ruleSetId);
  if (!ruleSet) throw notFound("rule_set");
  const version = await getRuleSetVersionRow(env.DB, actor.installationId, input.versionId);
  if (!version || version.ruleSetId !== ruleSetId) throw new AppError("rule_set_version.not_found", "No version with this id in this rule set.", { status: 404 });
  if (input.authorityMode !== "off") {
    const others = await env.DB.prepare(`
        SELECT COALESCE(SUM(json_array_length(v.rules_json, '$.rules')), 0) AS n
        FROM rule_sets s JOIN rule_set_versions v ON v.installation_id = s.installation_id AND v.id = s.deployed_version_id
        WHERE s.installation_id = ?1 AND s.authority_mode != 'off' AND s.id != ?2`)
      .bind(actor.installationId, ruleSetId)
      .first<{ n: number }>();
    const total = (others?.n ?? 0) + ((JSON.parse(version.rulesJson) as StoredRules).rules?.length ?? 0);
    if (total > MAX_DEPLOYED_RULES)
      throw new AppError("rule_set.too_many_deployed_rules", `Deploying this version would run ${total} rules on every event; an installation deploys at most ${MAX_DEPLOYED_RULES}. Set another rule set's mode to off, or merge rules.`, {
        status: 422,
      });
  }
  // Autonomous acts without a person: a version earns it through the rule set's gate (rule-set-gates.ts).
  const promotion =
    input.authorityMode === "autonomous" && !(ruleSet.authorityMode === "autonomous" && ruleSet.deployedVersionId === input.versionId)
      ? await checkAutonomousGate(
          env,
          actor.installationId,
          ruleSet,
          input.versionId,
          (JSON.parse(version.rulesJson) as StoredRules).rules.map((rule) => rule.id),
        )
      : null;
  const at = new Date().toISOString();
  // A promotion is a compare-and-set on what the gate was evaluated against (mode, version, gate),
  // and its audit event is written only if the change took.
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE rule_sets SET deployed_version_id = ?3, authority_mode = ?4, deployed_at = ?5, updated_at = ?5
      WHERE installation_id = ?1 AND id = ?2 AND (?6 = 0 OR (authority_mode = ?7 AND deployed_version_id IS ?8 AND gate_json IS ?9))`).bind(
      actor.installationId,
      ruleSetId,
      input.versionId,
      input.authorityMode,
      at,
      promotion ? 1 : 0,
      ruleSet.authorityMode,
      ruleSet.deployedVersionId,
      ruleSet.gateJson,
    ),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `rule_set:${ruleSetId}:deployed:${at}:${input.versionId}`,
        action: "rule_set.deployed",
        actor: actor.audit,
        target: { type: "rule_set", id: ruleSetId },
        details: {
          name: ruleSet.name,
          versionId: input.versionId,
          version: version.version,
          authorityMode: input.authorityMode,
          previous: ruleSet.deployedVersionId ? { versionId: ruleSet.deployedVersionId, authorityMode: ruleSet.authorityMode } : null,
          ...(promotion ? { digest: promotion.digest, evidence: promotion.evidence } : {}),
        },
        at,
      },
      { table: "rule_sets", id: ruleSetId, where: { deployed_version_id: input.versionId, authority_mode: input.authorityMode, deployed_at: at } },
    ),
  ]);
  if ((update?.meta.changes ?? 0) === 0) throw new AppError("promotion.not_next_mode", `Rule set ${ruleSet.name} changed while its gate was evaluated; read it and deploy again.`, { status: 409 });
  forgetDeployed(actor.installationId);
  return serializeRuleSet((await getRuleSetRow(env.DB, actor.installationId, ruleSetId))!);
}

/** Sets the share of events kept as a sealed sample (0 keeps none). */
export async function putEventSettings(env: Env, actor: Actor, input: { sampleRate: number }) {
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO event_settings (installation_id, sample_rate, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT (installation_id) DO UPDATE SET sample_rate = excluded.sample_rate, updated_at = excluded.updated_at`).bind(
      actor.installationId,
      input.sampleRate,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `event_settings:${at}`,
      action: "event_settings.updated",
      actor: actor.audit,
      target: { type: "installation", id: actor.installationId },
      details: { sampleRate: input.sampleRate },
      at,
    }),
  ]);
  forgetDeployed(actor.installationId);
  return { sampleRate: input.sampleRate, updatedAt: at };
}

/**
 * A rule set's hits, newest first, and per version, rule, mode and applied the number of hits
 * since `since` (default: the last 24 hours): its hit rate and, in shadow, what it would have done.
 */
export async function listRuleHits(env: Env, actor: Actor, ruleSetId: string, options: { limit: number; since?: string }) {
  const ruleSet = await getRuleSetRow(env.DB, actor.installationId, ruleSetId);
  if (!ruleSet) throw notFound("rule_set");
  const since = options.since ?? new Date(Date.now() - 86_400_000).toISOString();
  if (Number.isNaN(Date.parse(since))) throw new AppError("rule_hits.since_invalid", "since is an ISO 8601 time, e.g. 2026-01-01T00:00:00Z.", { status: 400 });
  const [items, totals] = await env.DB.batch([
    env.DB.prepare(`
      SELECT rule_set_version_id AS versionId, rule_id AS ruleId, event_id AS eventId, event_type AS eventType, authority_mode AS authorityMode, applied,
        outcome_json AS outcomeJson, result_json AS resultJson, occurred_at AS occurredAt, created_at AS createdAt
      FROM rule_hits WHERE installation_id = ?1 AND rule_set_id = ?2 ORDER BY created_at DESC LIMIT ?3`).bind(actor.installationId, ruleSetId, options.limit),
    env.DB.prepare(`
      SELECT rule_set_version_id AS versionId, rule_id AS ruleId, authority_mode AS authorityMode, applied, COUNT(*) AS hits
      FROM rule_hits WHERE installation_id = ?1 AND rule_set_id = ?2 AND created_at >= ?3
      GROUP BY rule_set_version_id, rule_id, authority_mode, applied ORDER BY hits DESC LIMIT 500`).bind(actor.installationId, ruleSetId, since),
  ]);
  type HitRow = { versionId: string; ruleId: string; eventId: string; eventType: string; authorityMode: string; applied: number; outcomeJson: string; resultJson: string | null; occurredAt: string; createdAt: string };
  return {
    since,
    totals: (totals!.results as Array<{ versionId: string; ruleId: string; authorityMode: string; applied: number; hits: number }>).map((row) => ({ ...row, applied: row.applied === 1 })),
    items: (items!.results as HitRow[]).map(({ outcomeJson, resultJson, applied, ...row }) => ({
      ...row,
      applied: applied === 1,
      outcome: JSON.parse(outcomeJson) as unknown,
      result: resultJson === null ? null : (JSON.parse(resultJson) as unknown),
    })),
  };
}
