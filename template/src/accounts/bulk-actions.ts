// Bulk actions (POST /bulk-actions): one action type over up to 10,000 subjects, from an id list or
// a search's reports. A dry run counts and writes nothing. Otherwise the items are recorded, and
// each gets a run of the action type's carrier workflow (`bulk-action:<key>:decision:<digest>`), so
// approval rules, delivery and its record are the action machinery's own, and once its action is
// applied each subject gets its decision through the carrier's decision node (a decision not to act:
// only a subject with a report): the single-decision path (statement of reasons, the affected user's
// statement, the Transparency Database queue, the strike), one per subject, never twice (a decision
// is keyed by its step); an unreported subject is decided on decision.policyCategory, then required. In assisted mode (the strike policy's,
// assisted unless set) a person approves the whole first; its runs then act autonomously (an
// action type still assisted waits for its own approval). Runs start a slice at a time: one in the
// request, then a background drain at BULK_RUNS_PER_SECOND, then the schedule's sweep for what
// is left (a drain cut short, a paused action resumed later); every run's Idempotency-Key
// is `bulk_action:<id>:<position>`, so a slice killed halfway and resumed replays the runs it had
// started instead of starting (and delivering) them twice. Each item started is audited.
import { auditStatement, canonicalJson } from "../audit";
import { actsAsPerson, type Actor } from "../auth";
import { AppError, conflict, errorCode, notFound } from "../errors";
import { restrictsAnything } from "../lib/dsa-vocabulary";
import { newId } from "../lib/crypto";
import { createRun } from "../workflows";
import { type BulkActionInput, bulkDecisionConfig, invalid, MAX_BULK_SUBJECTS, subjectsOf } from "./bulk-action-input";
import { carrierVersionId, readStrikePolicy } from "./strike-policy";

/** Runs started per slice: in the request that starts (or approves) the bulk action, and per sweep. */
export const BULK_SLICE = 5;
const SWEEP_SLICES = 20;
/** The rate runs start at after the request (rate-limited delivery: each run delivers one action). */
export const BULK_RUNS_PER_SECOND = 50;
/** How long the request's background drain goes on (within waitUntil's limit); the sweep takes what is left. */
const DRAIN_MS = 20_000;
const DRAIN_SLICE = 25;

interface BulkRow {
  id: string;
  actionTypeKey: string;
  reason: string;
  state: string;
  total: number;
  started: number;
  createdBy: string;
  approvedBy: string | null;
  decisionJson: string | null;
  workflowVersionId: string | null;
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = `id, action_type_key AS actionTypeKey, reason, state, total, started, created_by AS createdBy, approved_by AS approvedBy, decision_json AS decisionJson,
  workflow_version_id AS workflowVersionId, created_at AS createdAt, updated_at AS updatedAt`;

/** A dry run's counts, or the bulk action recorded (and its first slice started unless it waits for approval). */
export async function createBulkAction(env: Env, ctx: ExecutionContext, actor: Actor, input: BulkActionInput) {
  const type = await env.DB.prepare(`SELECT 1 AS x FROM action_types WHERE installation_id = ?1 AND key = ?2`).bind(actor.installationId, input.actionType).first();
  if (!type) throw new AppError("action_type.not_found", "This installation has no such action type; create it first (POST /action-types).", { status: 404 });
  const subjects = await subjectsOf(env, actor, input);
  if (subjects.length === 0) throw invalid("No subject to act on: the list is empty, the search matched nothing or the accounts have no reported subject.", input.subjects ? "$.subjects" : input.accounts ? "$.accounts" : "$.search");
  if (subjects.length > MAX_BULK_SUBJECTS) throw invalid(`At most ${MAX_BULK_SUBJECTS} subjects per bulk action.`, "$.subjects");
  const decision = bulkDecisionConfig(actor, input);
  const policy = await readStrikePolicy(env.DB, actor.installationId);
  const authorityMode = policy?.authorityMode ?? "assisted";
  const known = await env.DB.prepare(`SELECT COUNT(*) AS n FROM json_each(?2) s JOIN cases c ON c.installation_id = ?1 AND c.subject_kind = json_extract(s.value, '$.kind') AND c.subject_id = json_extract(s.value, '$.id')`)
    .bind(actor.installationId, JSON.stringify(subjects))
    .first<{ n: number }>();
  const counts = { subjects: subjects.length, withCase: Number(known?.n ?? 0), withoutCase: subjects.length - Number(known?.n ?? 0) };
  const restricts = restrictsAnything(decision.restrictions);
  // A restriction is decided for every subject (its statement of reasons, DSA Art. 17); one nobody
  // reported has no report to take the category from, so the decision names it.
  if (restricts && counts.withoutCase > 0 && decision.policy_category === undefined) {
    const message = `${counts.withoutCase} of the subjects ${counts.withoutCase === 1 ? "has" : "have"} no report here, and a restriction is decided for each with its statement of reasons: give the decision's category (decision.policyCategory, a DSA statement category such as scams_and_fraud).`;
    throw new AppError("bulk_action.policy_category_required", message, { status: 422, details: [{ path: "$.decision.policyCategory", code: "required", message }] });
  }
  const decides = { outcome: decision.outcome, restricts, subjects: restricts ? counts.subjects : counts.withCase };
  if (input.dryRun) return { dryRun: true, actionType: input.actionType, authorityMode, approvalRequired: authorityMode === "assisted", ...counts, decisions: decides };
  // The carrier is fixed now: a bulk action resumed later acts (and decides) as it was created and approved.
  const workflowVersionId = await carrierVersionId(env, actor, input.actionType, { purpose: "bulk", decision });
  const id = newId("blk");
  const at = new Date().toISOString();
  const state = authorityMode === "assisted" ? "approval_required" : "running";
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO bulk_actions (id, installation_id, action_type_key, reason, state, total, started, created_by, created_at, updated_at, decision_json, workflow_version_id)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, ?8, ?9, ?10)`).bind(id, actor.installationId, input.actionType, input.reason, state, subjects.length, actor.audit.id, at, canonicalJson(decision), workflowVersionId),
    // Each item with its subject's latest report, found through the subject's case (the action's delivery names it).
    env.DB.prepare(`INSERT INTO bulk_action_items (bulk_action_id, position, subject_kind, subject_id, report_id)
      SELECT ?1, CAST(s.key AS INTEGER), json_extract(s.value, '$.kind'), json_extract(s.value, '$.id'),
        (SELECT r.id FROM cases c JOIN reports r ON r.case_id = c.id WHERE c.installation_id = ?2 AND c.subject_kind = json_extract(s.value, '$.kind') AND c.subject_id = json_extract(s.value, '$.id') ORDER BY r.created_at DESC LIMIT 1)
      FROM json_each(?3) s`).bind(id, actor.installationId, JSON.stringify(subjects)),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `bulk_action:${id}:created`,
      action: "bulk_action.created",
      actor: actor.audit,
      target: { type: "bulk_action", id },
      details: { actionType: input.actionType, reason: input.reason, ...counts, state, decision: { outcome: decision.outcome, restrictions: decision.restrictions, ground: decision.ground } },
      at,
    }),
  ]);
  if (state === "running") {
    await advanceBulkAction(env, ctx, actor.installationId, id, BULK_SLICE);
    ctx.waitUntil(drainBulkAction(env, ctx, actor.installationId, id));
  }
  return getBulkAction(env, actor, id);
}

async function bulkRow(env: Env, installationId: string, id: string): Promise<BulkRow> {
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM bulk_actions WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<BulkRow>();
  if (!row) throw notFound("bulk_action");
  return row;
}

/**
 * A bulk action and its progress: how many runs started, where they are (by run state), how many
 * decisions they recorded and how many of those are queued for (or went to) the Transparency
 * Database. Read from the items' runs (at most 10,000; one seek each).
 */
export async function getBulkAction(env: Env, actor: Actor, id: string) {
  const { decisionJson, workflowVersionId, ...row } = await bulkRow(env, actor.installationId, id);
  const [runs, decided] = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(`SELECT w.state, COUNT(*) AS n FROM bulk_action_items i JOIN workflow_runs w ON w.id = i.run_id AND w.installation_id = ?2 WHERE i.bulk_action_id = ?1 GROUP BY w.state`).bind(id, actor.installationId),
    env.DB.prepare(`SELECT COUNT(d.id) AS decisions, COUNT(t.decision_id) AS statements FROM bulk_action_items i
        JOIN decisions d ON d.run_id = i.run_id AND d.installation_id = ?2 LEFT JOIN tdb_submissions t ON t.decision_id = d.id
      WHERE i.bulk_action_id = ?1`).bind(id, actor.installationId),
  ]);
  const byState = Object.fromEntries(runs!.results.map((r) => [String(r.state), Number(r.n)]));
  const counts = decided!.results[0] as { decisions: number; statements: number } | undefined;
  return {
    ...row,
    decision: decisionJson ? (JSON.parse(decisionJson) as Record<string, unknown>) : null,
    workflowVersionId,
    progress: row.total === 0 ? 1 : row.started / row.total,
    runs: byState,
    decisions: Number(counts?.decisions ?? 0),
    transparencyDbStatements: Number(counts?.statements ?? 0),
  };
}

const TRANSITIONS: Record<"approve" | "pause" | "resume" | "cancel", { from: string[]; to: string; event: string }> = {
  approve: { from: ["approval_required"], to: "running", event: "bulk_action.approved" },
  pause: { from: ["running"], to: "paused", event: "bulk_action.paused" },
  resume: { from: ["paused"], to: "running", event: "bulk_action.resumed" },
  cancel: { from: ["approval_required", "running", "paused"], to: "cancelled", event: "bulk_action.cancelled" },
};

/**
 * Assisted mode is four eyes: a person approves (a console user or a reviewer's key; an automation
 * key, which any admin can mint, is no second pair of eyes), and not the creator's person: neither
 * the creating principal itself nor another key or sign-in of the same person (a reviewer's key
 * names its person; a console user is their email). 403 otherwise.
 */
async function assertFourEyes(env: Env, actor: Actor, createdBy: string): Promise<void> {
  const self = () => new AppError("bulk_action.self_approval", "The bulk action's creator cannot approve it, under this or any other key or sign-in of theirs; another person must approve it.", { status: 403 });
  if (createdBy === actor.audit.id) throw self();
  if (!actsAsPerson(actor)) {
    throw new AppError("bulk_action.approver_not_person", "A person approves a bulk action: sign in to the console, or use a reviewer's API key (one made with `reviewer`), not an automation key.", { status: 403 });
  }
  // The creator's person: the reviewer its key was made for, or the console user's email.
  const creator = await env.DB.prepare(`SELECT (SELECT reviewer FROM api_keys WHERE installation_id = ?1 AND id = ?2) AS reviewer, (SELECT email FROM console_users WHERE installation_id = ?1 AND id = ?2) AS email`)
    .bind(actor.installationId, createdBy)
    .first<{ reviewer: string | null; email: string | null }>();
  const person = (name: string | null | undefined) => name?.trim().toLowerCase() || null;
  const creatorPerson = person(creator?.email) ?? person(creator?.reviewer);
  const approverPersons = [person(actor.user?.email), person(actor.reviewer)].filter((name) => name !== null);
  if (creatorPerson !== null && approverPersons.includes(creatorPerson)) throw self();
}

/** Approve (assisted), pause, resume or cancel; a bulk action not in a state the move starts from is a 409. Runs already started go on. */
export async function moveBulkAction(env: Env, ctx: ExecutionContext, actor: Actor, id: string, move: keyof typeof TRANSITIONS) {
  const row = await bulkRow(env, actor.installationId, id);
  const { from, to, event } = TRANSITIONS[move];
  if (!from.includes(row.state)) throw conflict("bulk_action.state_conflict", `The bulk action is ${row.state}; ${move} needs it ${from.join(" or ")}.`);
  if (move === "approve") await assertFourEyes(env, actor, row.createdBy);
  const at = new Date().toISOString();
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE bulk_actions SET state = ?3, updated_at = ?4${move === "approve" ? ", approved_by = ?5" : ""} WHERE installation_id = ?1 AND id = ?2 AND state = ?6`).bind(
      actor.installationId,
      id,
      to,
      at,
      actor.audit.id,
      row.state,
    ),
    auditStatement(
      env.DB,
      { installationId: actor.installationId, idempotencyKey: `bulk_action:${id}:${move}:${at}`, action: event, actor: actor.audit, target: { type: "bulk_action", id }, details: { from: row.state, to }, at },
      { table: "bulk_actions", id, where: { state: to, updated_at: at } },
    ),
  ]);
  if ((update!.meta.changes ?? 0) === 0) throw conflict("bulk_action.state_conflict", "The bulk action changed state concurrently; read it again.");
  if (to === "running") {
    await advanceBulkAction(env, ctx, actor.installationId, id, BULK_SLICE);
    ctx.waitUntil(drainBulkAction(env, ctx, actor.installationId, id));
  }
  return getBulkAction(env, actor, id);
}

/**
 * Starts the runs of up to `limit` items not started yet, in order, while the bulk action is
 * running; completes it when none is left. Safe to repeat or to run concurrently: a run's
 * Idempotency-Key is the item's, so an item started twice has one run (and one delivery).
 */
export async function advanceBulkAction(env: Env, ctx: ExecutionContext, installationId: string, id: string, limit: number): Promise<number> {
  const row = await bulkRow(env, installationId, id);
  if (row.state !== "running") return 0;
  const { results: items } = await env.DB.prepare(`SELECT position, subject_kind AS kind, subject_id AS subjectId, report_id AS reportId FROM bulk_action_items WHERE bulk_action_id = ?1 AND run_id IS NULL ORDER BY position LIMIT ?2`)
    .bind(id, limit)
    .all<{ position: number; kind: string; subjectId: string; reportId: string | null }>();
  const actor: Actor = { installationId, scopes: [], audit: { type: "system", id: "bulk-actions" } };
  // Approved as a whole (assisted) or autonomous from the start: each run acts autonomously, on the
  // carrier fixed at creation (bulk actions from before it: the action-only carrier).
  const versionId = items.length > 0 ? (row.workflowVersionId ?? (await carrierVersionId(env, actor, row.actionTypeKey, { purpose: "bulk" }))) : null;
  let started = 0;
  for (const item of items) {
    const { run } = await createRun(env, ctx, actor, {
      workflowVersionId: versionId!,
      authorityMode: "autonomous",
      input: { subject: { kind: item.kind, id: item.subjectId }, bulkActionId: id, reason: row.reason },
      ...(item.reportId ? { reportId: item.reportId } : {}),
      idempotencyKey: `bulk_action:${id}:${item.position}`,
    });
    const at = new Date().toISOString();
    const [recorded] = await env.DB.batch([
      env.DB.prepare(`UPDATE bulk_action_items SET run_id = ?3 WHERE bulk_action_id = ?1 AND position = ?2 AND run_id IS NULL`).bind(id, item.position, run.id),
      auditStatement(env.DB, {
        installationId,
        idempotencyKey: `bulk_action:${id}:${item.position}:started`,
        action: "bulk_action.item_started",
        actor: actor.audit,
        target: { type: "bulk_action", id },
        details: { position: item.position, subject: { kind: item.kind, id: item.subjectId }, runId: run.id, actionType: row.actionTypeKey },
        at,
      }),
    ]);
    started += recorded!.meta.changes ?? 0;
  }
  // Progress from the items themselves (a concurrent slice may have started some); completed once none is left.
  await env.DB.prepare(`UPDATE bulk_actions SET started = (SELECT COUNT(*) FROM bulk_action_items WHERE bulk_action_id = ?2 AND run_id IS NOT NULL), updated_at = ?3,
      state = CASE WHEN state = 'running' AND NOT EXISTS (SELECT 1 FROM bulk_action_items WHERE bulk_action_id = ?2 AND run_id IS NULL) THEN 'completed' ELSE state END
    WHERE installation_id = ?1 AND id = ?2`)
    .bind(installationId, id, new Date().toISOString())
    .run();
  return started;
}

/**
 * After the request: slices of the bulk action's runs at BULK_RUNS_PER_SECOND, for up to DRAIN_MS
 * or until none is left or it is no longer running (paused, cancelled). A drain that dies leaves
 * the rest to the sweep; one running beside the sweep starts nothing twice (advanceBulkAction).
 */
export async function drainBulkAction(env: Env, ctx: ExecutionContext, installationId: string, id: string): Promise<void> {
  const began = Date.now();
  let started = 0;
  try {
    for (;;) {
      const slice = await advanceBulkAction(env, ctx, installationId, id, DRAIN_SLICE);
      started += slice;
      if (slice === 0 || Date.now() - began > DRAIN_MS) return;
      const due = began + (started / BULK_RUNS_PER_SECOND) * 1_000;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    }
  } catch (error) {
    // The sweep resumes where this stopped (started runs replay); said once, with the code only.
    console.warn(JSON.stringify({ event: "bulk_action.drain_stopped", bulkActionId: id, code: errorCode(error) }));
  }
}

/** The schedule's sweep: running bulk actions, least recently advanced first, a slice each (at most 20 slices a run). */
export async function sweepBulkActions(env: Env, _now: Date, ctx?: ExecutionContext): Promise<Record<string, number>> {
  if (!ctx) return { started: 0, skipped: 1 };
  const { results } = await env.DB.prepare(`SELECT id, installation_id AS installationId FROM bulk_actions WHERE state = 'running' ORDER BY updated_at LIMIT ${SWEEP_SLICES}`).all<{ id: string; installationId: string }>();
  let started = 0;
  let failed = 0;
  for (const row of results) {
    try {
      started += await advanceBulkAction(env, ctx, row.installationId, row.id, BULK_SLICE * 4);
    } catch (error) {
      // Left running: the next slice resumes where this one stopped (started runs replay).
      failed += 1;
      console.warn(JSON.stringify({ sweep: "accounts.bulk_actions", bulkActionId: row.id, code: errorCode(error) }));
    }
  }
  return { started, failed, more: results.length === SWEEP_SLICES ? 1 : 0 };
}
