// The installation's strike policy (PUT/GET /strike-policy): points per policy category, how long a
// strike counts, and the ladder of thresholds whose actions an account reaches. Each rung's action
// goes out through an action type like any action: the policy publishes, per action type, a small
// workflow (start → action → end) whose runs carry it, so approval (assisted), promotion gates,
// delivery and its record are the action machinery's own.
import { auditStatement, canonicalJson } from "../audit";
import type { Actor } from "../auth";
import { normalizeCategory } from "../cases";
import { AppError } from "../errors";
import { restrictsAnything } from "../lib/dsa-vocabulary";
import { sha256HexSync } from "../lib/crypto";
import { createWorkflow, publishVersion } from "../workflows";

export const SANCTION_KINDS = ["warning", "restriction", "suspension", "termination"] as const;
export type SanctionKind = (typeof SANCTION_KINDS)[number];
export const LADDER_AUTHORITY_MODES = ["assisted", "autonomous"] as const;

export interface LadderRung {
  points: number;
  actionType: string;
  kind: SanctionKind;
  /** The ladder workflow's version that carries this rung's action (published with the policy). */
  workflowVersionId: string;
}

export interface StrikePolicy {
  categories: Record<string, { points: number; manifestlyIllegal?: boolean }>;
  expiryDays: number;
  /** DSA Art. 23(1)'s "reasonable period": how long a warning must stand before a suspension for manifestly illegal content. */
  warningPeriodHours: number;
  authorityMode: (typeof LADDER_AUTHORITY_MODES)[number];
  ladder: LadderRung[];
}

export interface StrikePolicyInput {
  categories: Record<string, { points: number; manifestlyIllegal?: boolean }>;
  expiryDays: number;
  warningPeriodHours?: number;
  authorityMode?: (typeof LADDER_AUTHORITY_MODES)[number];
  ladder: Array<{ points: number; actionType: string; kind?: SanctionKind }>;
}

/** What a rung does when the policy does not say: read from the action type's key (warn…, suspend…, ban/terminate…), else a restriction. */
export function kindOf(actionType: string): SanctionKind {
  if (/warn/iu.test(actionType)) return "warning";
  if (/suspend/iu.test(actionType)) return "suspension";
  if (/ban|terminat|delete_account/iu.test(actionType)) return "termination";
  return "restriction";
}

/** What a carrier workflow's action node passes on: a ladder's sanction on an account, or one subject of a bulk action. */
const CARRIER_PARAMS = {
  ladder: { scope: "'account'", kind: "input.kind", points: "input.points", threshold: "input.threshold", art23: "input.art23", decisionId: "input.decisionId", sanctionId: "input.sanctionId" },
  bulk: { scope: "'subject'", subject: "input.subject", bulkActionId: "input.bulkActionId", reason: "input.reason" },
} as const;
export type CarrierPurpose = keyof typeof CARRIER_PARAMS;

/**
 * Which carrier: its purpose, and for a ladder's suspension or termination its kind and whether it
 * is an Art. 23(1) suspension; for a bulk action, the decision each subject's run records once its
 * action is applied (a decision node's config; its statement is the bulk action's reason).
 */
export interface Carrier {
  purpose: CarrierPurpose;
  kind?: SanctionKind;
  art23?: boolean;
  decision?: Record<string, unknown>;
}

/** Whether the carrier records the account's restriction as a decision once its action is applied (a suspension or a termination). */
const decides = (carrier: Carrier) => carrier.purpose === "ladder" && (carrier.kind === "suspension" || carrier.kind === "termination");

/**
 * The graph of the workflow that carries one action type's actions (start → action → an end per
 * port). A suspension or termination, once its action is applied, is recorded as a decision
 * restricting the account (restrictions.account), so it has its statement of reasons to the user
 * (DSA Art. 17) and in the Transparency Database like any decision; an Art. 23(1) suspension's
 * ground is illegal content. Such a decision gives no strike (strikes.ts).
 */
function carrierGraph(actionType: string, carrier: Carrier) {
  const edge = (from: string, port: string, to: string) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
  if (carrier.purpose === "bulk" && carrier.decision) return bulkDecisionGraph(actionType, carrier.decision, edge);
  const decision = decides(carrier)
    ? {
        id: "decide",
        kind: "decision",
        config: {
          outcome: carrier.kind === "suspension" ? "account_suspended" : "account_terminated",
          restrictions: { account: carrier.kind === "suspension" ? "suspended" : "terminated" },
          statement: "{{reason}}",
          ground: carrier.art23 ? "illegal_content" : "incompatible_content",
          ...(carrier.art23 ? { legal_ground: "Regulation (EU) 2022/2065 (DSA) Art. 23(1): frequent provision of manifestly illegal content, after a prior warning" } : {}),
        },
        inputMapping: { reason: "input.reason" },
      }
    : null;
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "act", kind: "action", errorPort: "failed", config: { action_type: actionType, approval_timeout_seconds: 7 * 86_400 }, inputMapping: CARRIER_PARAMS[carrier.purpose] },
      ...(decision ? [decision] : []),
      { id: "applied", kind: "end", config: { terminal_code: "applied" } },
      { id: "rejected", kind: "end", config: { terminal_code: "rejected" } },
      { id: "expired", kind: "end", config: { terminal_code: "expired" } },
      { id: "failed", kind: "end", config: { terminal_code: "failed" } },
    ],
    edges: [
      edge("start", "success", "act"),
      ...(decision ? [edge("act", "applied", "decide"), edge("decide", "recorded", "applied")] : [edge("act", "applied", "applied")]),
      edge("act", "rejected", "rejected"),
      edge("act", "expired", "expired"),
      edge("act", "failed", "failed"),
    ],
  };
}

/**
 * A bulk action's carrier with its decision: start → action → (applied) the decision node, which
 * records the decision with its statement of reasons (DSA Art. 17), queues it for the Transparency
 * Database and gives its strike, exactly as any decision node does (enforcement/decisions.ts). A
 * decision that restricts is recorded for every subject acted on, reported or not (a restriction
 * always owes its statement of reasons): a subject without a report is decided on the decision's
 * own category (`policy_category`, required at creation then) and named from the run's input. A
 * decision not to act (a warning) is recorded only where a report asked for one.
 */
function bulkDecisionGraph(actionType: string, decision: Record<string, unknown>, edge: (from: string, port: string, to: string) => unknown) {
  const everySubject = restrictsAnything(decision.restrictions);
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "act", kind: "action", errorPort: "failed", config: { action_type: actionType, approval_timeout_seconds: 7 * 86_400 }, inputMapping: CARRIER_PARAMS.bulk },
      ...(everySubject ? [] : [{ id: "reported", kind: "condition", config: { cases: [{ port: "decide", when: "report != null" }], case_ports: ["decide"], default_port: "unreported" } }]),
      { id: "decide", kind: "decision", config: { ...decision, statement: "{{reason}}" }, inputMapping: { reason: "input.reason", subject_kind: "input.subject.kind", subject_id: "input.subject.id" } },
      { id: "applied", kind: "end", config: { terminal_code: "applied" } },
      ...(everySubject ? [] : [{ id: "unreported", kind: "end", config: { terminal_code: "applied_without_decision" } }]),
      { id: "rejected", kind: "end", config: { terminal_code: "rejected" } },
      { id: "expired", kind: "end", config: { terminal_code: "expired" } },
      { id: "failed", kind: "end", config: { terminal_code: "failed" } },
    ],
    edges: [
      edge("start", "success", "act"),
      ...(everySubject ? [edge("act", "applied", "decide")] : [edge("act", "applied", "reported"), edge("reported", "decide", "decide"), edge("reported", "unreported", "unreported")]),
      edge("decide", "recorded", "applied"),
      edge("act", "rejected", "rejected"),
      edge("act", "expired", "expired"),
      edge("act", "failed", "failed"),
    ],
  };
}

/** Bumped when a bulk carrier's graph changes, so a decision's carrier published before is not reused for it. */
const BULK_CARRIER_REVISION = 2;

/**
 * The live version of the workflow carrying the action type's actions (`strike-ladder:<key>`,
 * `strike-ladder:<key>:suspension[:art23]`, `bulk-action:<key>`…), published with its workflow on first use.
 */
export async function carrierVersionId(env: Env, actor: Actor, actionType: string, carrier: Carrier = { purpose: "ladder" }): Promise<string> {
  // A bulk carrier with a decision is one workflow per decision (its digest in the name).
  const decisionTag = carrier.purpose === "bulk" && carrier.decision ? `:decision:${sha256HexSync(canonicalJson({ decision: carrier.decision, revision: BULK_CARRIER_REVISION })).slice(0, 16)}` : "";
  const name = carrier.purpose === "bulk" ? `bulk-action:${actionType}${decisionTag}` : decides(carrier) ? `strike-ladder:${actionType}:${carrier.kind}${carrier.art23 ? ":art23" : ""}` : `strike-ladder:${actionType}`;
  const found = await env.DB.prepare(`SELECT w.id, (SELECT v.id FROM workflow_versions v WHERE v.workflow_id = w.id AND v.installation_id = w.installation_id AND v.retired_at IS NULL ORDER BY v.version DESC LIMIT 1) AS versionId
      FROM workflows w WHERE w.installation_id = ?1 AND w.name = ?2`)
    .bind(actor.installationId, name)
    .first<{ id: string; versionId: string | null }>();
  if (found?.versionId) return found.versionId;
  const workflowId = found?.id ?? (await createWorkflow(env, actor, { name, description: `Carries the ${carrier.purpose === "ladder" ? "strike ladder's" : "bulk actions'"} ${actionType} actions (published on first use).` })).id;
  return (await publishVersion(env, actor, workflowId, carrierGraph(actionType, carrier))).id;
}

export async function readStrikePolicy(db: D1Database, installationId: string): Promise<StrikePolicy | null> {
  const row = await db.prepare(`SELECT policy_json AS policyJson FROM strike_policies WHERE installation_id = ?1`).bind(installationId).first<{ policyJson: string }>();
  return row ? (JSON.parse(row.policyJson) as StrikePolicy) : null;
}

function invalid(path: string, message: string): AppError {
  return new AppError("strike_policy.invalid", message, { status: 422, details: [{ path, code: "invalid", message }] });
}

/** Sets the policy (validated; every rung's action type must exist); strikes already given keep their points. */
export async function putStrikePolicy(env: Env, actor: Actor, input: StrikePolicyInput) {
  const categories: StrikePolicy["categories"] = {};
  for (const [name, entry] of Object.entries(input.categories)) {
    const category = normalizeCategory(name);
    if (!category) throw invalid(`$.categories.${name}`, `Unknown category ${JSON.stringify(name).slice(0, 80)}; use a DSA statement category (e.g. scams_and_fraud).`);
    categories[category] = { points: entry.points, ...(entry.manifestlyIllegal === undefined ? {} : { manifestlyIllegal: entry.manifestlyIllegal }) };
  }
  const rungs = [...input.ladder].sort((a, b) => a.points - b.points);
  for (let i = 1; i < rungs.length; i++) if (rungs[i]!.points === rungs[i - 1]!.points) throw invalid("$.ladder", "Two rungs of the ladder have the same points; give each threshold one action.");
  const keys = [...new Set(rungs.map((rung) => rung.actionType))];
  const { results } = await env.DB.prepare(`SELECT key FROM action_types WHERE installation_id = ?1 AND key IN (SELECT value FROM json_each(?2))`).bind(actor.installationId, JSON.stringify(keys)).all<{ key: string }>();
  const missing = keys.filter((key) => !results.some((row) => row.key === key));
  if (missing.length > 0) {
    throw new AppError("strike_policy.action_type_unknown", `The ladder names action types this installation does not have (${missing.join(", ").slice(0, 200)}); create them first (POST /action-types).`, {
      status: 422,
      details: missing.map((key) => ({ path: "$.ladder", code: "action_type_unknown", actionType: key })),
    });
  }
  const versions = new Map<string, string>();
  for (const rung of rungs) {
    const kind = rung.kind ?? kindOf(rung.actionType);
    if (!versions.has(`${rung.actionType}:${kind}`)) versions.set(`${rung.actionType}:${kind}`, await carrierVersionId(env, actor, rung.actionType, { purpose: "ladder", kind }));
  }
  const policy: StrikePolicy = {
    categories,
    expiryDays: input.expiryDays,
    warningPeriodHours: input.warningPeriodHours ?? 0,
    authorityMode: input.authorityMode ?? "assisted",
    ladder: rungs.map((rung) => ({ points: rung.points, actionType: rung.actionType, kind: rung.kind ?? kindOf(rung.actionType), workflowVersionId: versions.get(`${rung.actionType}:${rung.kind ?? kindOf(rung.actionType)}`)! })),
  };
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO strike_policies (installation_id, policy_json, updated_at) VALUES (?1, ?2, ?3)
      ON CONFLICT(installation_id) DO UPDATE SET policy_json = excluded.policy_json, updated_at = excluded.updated_at`).bind(actor.installationId, canonicalJson(policy), at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `strike_policy:${actor.installationId}:${at}:${crypto.randomUUID()}`,
      action: "strike_policy.updated",
      actor: actor.audit,
      target: { type: "strike_policy", id: actor.installationId },
      details: { categories: Object.keys(categories).length, expiryDays: policy.expiryDays, authorityMode: policy.authorityMode, ladder: policy.ladder.map(({ points, actionType, kind }) => ({ points, actionType, kind })) },
      at,
    }),
  ]);
  return { ...policy, updatedAt: at };
}

export async function getStrikePolicy(env: Env, actor: Actor) {
  const policy = await readStrikePolicy(env.DB, actor.installationId);
  if (!policy) throw new AppError("strike_policy.not_found", "This installation has no strike policy yet; PUT /strike-policy sets one.", { status: 404 });
  return policy;
}
