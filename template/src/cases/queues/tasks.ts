// Human review tasks: SLA-ordered listing with a cursor, responses checked against the task's
// JSON Schema, and completion that resumes the waiting run. Leases (claim, next, release): task-leases.ts.
import { Validator, type Schema } from "@cfworker/json-schema";
import { auditStatement, canonicalJson } from "../../audit";
import { actsAsPerson, canReadPersonalData, canSeeQueue, reviewerIdentity, reviewerLabel, type Actor } from "../../auth";
import { AppError, conflict, notFound } from "../../errors";
import { decodeCursor, encodeCursor } from "../../lib/cursor";
import { newId } from "../../lib/crypto";
import { completeHandoffStatements, sendComplaintOutcome } from "../../enforcement";
import { settleOverturnedDecision, strikeReversalStatement } from "../../accounts";
import { firstEventOfWaitUnsafe, runEventStatement, signalRunEvent, waitOfStepJsonSql } from "../../workflows";
import { appealDecisionId, decisionReversalStatements, proposedOutcomeStatements } from "../appeals/complaints";
import { assertAutomatedComplaints } from "../appeals/appeals";
import { getQueueRow } from "./queues";
import { completeReviewCopyTask, qaSampleStatements, qaSettingsJsonSql, reviewerPrincipal, type TaskOrigin } from "../qa/qa";
import { openPersonalDataOr } from "../reports/report-crypto";
import { APPEAL_OUTCOMES } from "../taxonomy";
import { reviewerAuditId, taskResponseDigest } from "../../lib/person-keys";
import { hotOrArchived } from "../archive/case-rehydrate";
import { taskDisplay } from "../wellness/wellness";
import { taskStepSql } from "./task-ids";

export const DEFAULT_LEASE_SECONDS = 900;
export const MAX_LEASE_SECONDS = 3_600;
export const TASK_STATES = ["open", "claimed", "completed", "expired", "cancelled"] as const;

export interface TaskRow {
  id: string;
  queueId: string | null;
  runId: string | null;
  stepRunId: string | null;
  reportId: string | null;
  appealId: string | null;
  taskType: string;
  state: string;
  priority: number;
  contextJson: string;
  contextSealed: string | null;
  responseSchemaJson: string;
  responseJson: string | null;
  dueAt: string;
  expiresAt: string | null;
  claimedBy: string | null;
  claimedAt: string | null;
  leaseExpiresAt: string | null;
  completedBy: string | null;
  completedAt: string | null;
  createdAt: string;
  /** Never shown by the API: a golden task looks like any other. */
  origin: TaskOrigin;
  /** The task's queue's wellness profile, when the statement answering the row read it too (TASK_QUEUE_WELLNESS_SQL). */
  queueWellness?: string | null;
}

/** The task's queue's wellness profile, as one more column of a statement over human_tasks (a claim's or a completion's RETURNING): presentTask then needs no read of it. */
export const TASK_QUEUE_WELLNESS_SQL = `(SELECT q.wellness FROM queues q WHERE q.installation_id = human_tasks.installation_id AND q.id = human_tasks.queue_id) AS queueWellness`;

/**
 * A task's columns as TaskRow, for a statement over human_tasks (not aliased). The step, the response
 * schema and the completer are read in both forms (taskStepSql in task-ids.ts, TASK_RESPONSE_SCHEMA_SQL
 * and TASK_COMPLETED_BY_SQL in task-records.ts, spelled out here: bench/worker.ts copies this text to
 * show the listing's plan; test/task-step.test.ts checks the step's against taskStepSql).
 */
export const TASK_COLUMNS = `id, queue_id AS queueId, run_id AS runId, COALESCE(human_tasks.step_run_id, CASE WHEN human_tasks.origin = 'workflow' THEN substr(human_tasks.id, 1, length(human_tasks.id) - 5) END) AS stepRunId, report_id AS reportId, appeal_id AS appealId,
  task_type AS taskType, state, priority, context_json AS contextJson, context_sealed AS contextSealed,
  COALESCE((SELECT s.schema_json FROM task_response_schemas s WHERE s.installation_id = human_tasks.installation_id AND s.number = human_tasks.response_schema_number), human_tasks.response_schema_json) AS responseSchemaJson,
  response_json AS responseJson, due_at AS dueAt, expires_at AS expiresAt, claimed_by AS claimedBy, claimed_at AS claimedAt,
  lease_expires_at AS leaseExpiresAt, (CASE human_tasks.completed_by WHEN '' THEN human_tasks.claimed_by ELSE human_tasks.completed_by END) AS completedBy,
  completed_at AS completedAt, created_at AS createdAt, origin`;

export function getTaskRow(db: D1Database, installationId: string, taskId: string): Promise<TaskRow | null> {
  return db.prepare(`SELECT ${TASK_COLUMNS} FROM human_tasks WHERE installation_id = ?1 AND id = ?2`).bind(installationId, taskId).first<TaskRow>();
}

/**
 * A task as the API shows it. The context (what the workflow shows the reviewer, possibly quoting
 * the reported content) is sealed: it is opened by `getTask` for a caller allowed to read personal
 * data (and that read is audited); listings carry `context: null, contextSealed: true`.
 */
export function serializeTask(row: TaskRow, now = new Date().toISOString(), context: unknown = row.contextSealed ? null : (JSON.parse(row.contextJson) as unknown)) {
  const leaseLive = row.state === "claimed" && row.leaseExpiresAt !== null && row.leaseExpiresAt > now;
  return {
    id: row.id,
    queueId: row.queueId,
    runId: row.runId,
    reportId: row.reportId,
    appealId: row.appealId,
    taskType: row.taskType,
    // A claimed task whose lease lapsed is claimable again, so it shows as open.
    state: row.state === "claimed" && !leaseLive ? "open" : row.state,
    priority: row.priority,
    context,
    contextSealed: row.contextSealed !== null,
    responseSchema: JSON.parse(row.responseSchemaJson) as unknown,
    response: row.responseJson ? (JSON.parse(row.responseJson) as unknown) : null,
    dueAt: row.dueAt,
    slaBreached: (row.state === "open" || row.state === "claimed") && row.dueAt < now,
    expiresAt: row.expiresAt,
    claim: leaseLive ? { reviewer: reviewerLabel(row.claimedBy), claimedAt: row.claimedAt, leaseExpiresAt: row.leaseExpiresAt } : null,
    completedBy: reviewerLabel(row.completedBy),
    completedAt: row.completedAt,
    createdAt: row.createdAt,
  };
}

export async function getTask(env: Env, actor: Actor, taskId: string) {
  return presentTask(env, actor, await hotOrArchived(env, actor.installationId, "task", taskId, () => getTaskRow(env.DB, actor.installationId, taskId)));
}

/** A task row the caller read (or wrote and got back) of its installation, as getTask answers it. */
export async function presentTask(env: Env, actor: Actor, row: TaskRow | null | undefined) {
  if (!row || !canSeeQueue(actor, row.queueId)) throw notFound("task");
  const display = await taskDisplay(env.DB, actor.installationId, row.queueId, row.queueWellness);
  if (!row.contextSealed || !canReadPersonalData(actor)) return { ...serializeTask(row), display };
  const context = await openPersonalDataOr<unknown>(env, actor.installationId, `task:${row.id}`, row.contextSealed, null);
  // One event per task and reader: who has seen what this task showed.
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `task:${row.id}:content_viewed:${actor.audit.type}:${actor.audit.id}`,
    action: "task.content_viewed",
    actor: actor.audit,
    target: { type: "task", id: row.id },
    details: { reportId: row.reportId, appealId: row.appealId, queueId: row.queueId },
    at: new Date().toISOString(),
  }).run();
  return { ...serializeTask(row, undefined, context), display };
}

/** A console user limited to some queues sees other queues' tasks as not found. */
export async function assertTaskVisible(env: Env, actor: Actor, taskId: string): Promise<void> {
  if (!actor.user?.queueIds) return;
  const row = await env.DB.prepare(`SELECT queue_id AS queueId FROM human_tasks WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, taskId).first<{ queueId: string | null }>();
  if (!row || !canSeeQueue(actor, row.queueId)) throw notFound("task");
}

export async function visibleQueue(env: Env, actor: Actor, queueId: string) {
  const queue = await getQueueRow(env.DB, actor.installationId, queueId);
  if (!queue || !canSeeQueue(actor, queue.id)) throw notFound("queue");
  return queue;
}

/**
 * The listing's statement (?1 installation, ?2 queue, ?3 state, ?4-?6 the cursor's due date,
 * priority and id, ?7 the page's size + 1, ?8 now). A claimed task whose lease lapsed is open again,
 * at its place in due order (the second arm, merged with the first in index order: no sort);
 * `claimed` lists live leases only.
 */
export const QUEUE_LISTING_SQL = `
    SELECT ${TASK_COLUMNS} FROM human_tasks
    WHERE installation_id = ?1 AND queue_id = ?2 AND state = ?3 AND (?3 <> 'claimed' OR lease_expires_at > ?8)
      AND due_at >= ?4 AND (due_at > ?4 OR (due_at = ?4 AND (priority < ?5 OR (priority = ?5 AND id > ?6))))
    UNION ALL
    SELECT ${TASK_COLUMNS} FROM human_tasks
    WHERE installation_id = ?1 AND queue_id = ?2 AND state = 'claimed' AND ?3 = 'open' AND lease_expires_at <= ?8
      AND due_at >= ?4 AND (due_at > ?4 OR (due_at = ?4 AND (priority < ?5 OR (priority = ?5 AND id > ?6))))
    ORDER BY dueAt, priority DESC, id LIMIT ?7
  `;

/** Tasks of a queue in SLA order (due date, then priority, then id), one page after `cursor`. */
export async function listQueueTasks(env: Env, actor: Actor, queueId: string, options: { state?: string; limit?: number; cursor?: string }) {
  if (!canSeeQueue(actor, queueId)) throw notFound("queue");
  const state = options.state ?? "open";
  const limit = Math.min(Math.max(options.limit ?? 50, 1), 200);
  let cursor: Array<string | number> | null;
  try {
    if (!(TASK_STATES as readonly string[]).includes(state)) throw new AppError("request.invalid_state", "Unknown task state filter.", { status: 400 });
    cursor = decodeCursor(options.cursor, ["string", "integer", "string"]);
  } catch (error) {
    // An unknown queue is a 404 before a bad filter or cursor is a 400.
    await visibleQueue(env, actor, queueId);
    throw error;
  }
  const after = cursor ? { dueAt: String(cursor[0]), priority: Number(cursor[1]), id: String(cursor[2]) } : null;
  const now = new Date().toISOString();
  const { results } = await env.DB.prepare(QUEUE_LISTING_SQL)
    .bind(actor.installationId, queueId, state, after?.dueAt ?? "", after?.priority ?? 101, after?.id ?? "", limit + 1, now)
    .all<TaskRow>();
  // A task of the queue proves the queue (tasks are made in an existing queue, and queues are never
  // deleted but with their installation): only an empty page reads the queue, to tell 404 from none.
  if (results.length === 0) await visibleQueue(env, actor, queueId);
  const page = results.slice(0, limit);
  const last = page.at(-1);
  // How the queue's tasks are shown (its wellness profile): the same on every view of a task.
  const display = await taskDisplay(env.DB, actor.installationId, queueId);
  return {
    items: page.map((row) => ({ ...serializeTask(row, now), display })),
    nextCursor: results.length > limit && last ? encodeCursor([last.dueAt, last.priority, last.id]) : null,
  };
}

/** Who holds a lease: the console user, or the API key (with the reviewer name its tool gives as a label): `reviewerIdentity`. */
export function claimant(actor: Actor, reviewer: string | undefined): string {
  return reviewerIdentity(actor, reviewer);
}

const validators = new Map<string, Validator>();

/** Where a response fails a task's response schema (empty when it matches); golden answers are checked with it too. */
export function responseProblems(schemaJson: string, response: unknown) {
  let validator = validators.get(schemaJson);
  if (!validator) {
    validator = new Validator(JSON.parse(schemaJson) as Schema, "2020-12", false);
    if (validators.size > 500) validators.clear();
    validators.set(schemaJson, validator);
  }
  const result = validator.validate(response);
  return result.valid
    ? []
    : result.errors
        .filter((error) => error.keyword !== "properties" && error.keyword !== "$ref")
        .slice(0, 50)
        .map((error) => ({ path: error.instanceLocation.replace(/^#/u, "$").replace(/\//gu, "."), code: error.keyword, message: error.error }));
}

/**
 * Completes a claimed task: the response must match the task's `response_schema` (422 with every
 * failing path, and nothing changes). The completion event is recorded with the task in one batch,
 * then sent to the waiting run, which resumes through its `completed` port. Repeating the same
 * completion re-sends the recorded event (so a lost signal can be retried) and changes nothing.
 */
export async function completeTask(env: Env, actor: Actor, taskId: string, input: { reviewer?: string; response: unknown }) {
  const who = claimant(actor, input.reviewer);
  // The task, the wait of its step and its queue's QA settings, in one statement.
  const row = await env.DB.prepare(
    `SELECT ${TASK_COLUMNS}, ${waitOfStepJsonSql(taskStepSql(), "human_tasks.run_id")} AS waitJson, ${qaSettingsJsonSql("human_tasks")} AS qaSettingsJson FROM human_tasks WHERE installation_id = ?1 AND id = ?2`,
  )
    .bind(actor.installationId, taskId)
    .first<TaskRow & { waitJson: string | null; qaSettingsJson: string | null }>();
  if (!row || !canSeeQueue(actor, row.queueId)) throw notFound("task");
  // A QA or golden task: its answer is compared (qa/qa.ts); no run waits for it.
  if (row.origin !== "workflow" || !row.stepRunId || !row.runId) {
    await completeReviewCopyTask(env, actor, row, { who, response: input.response, problems: () => responseProblems(row.responseSchemaJson, input.response) });
    return getTask(env, actor, taskId);
  }
  const responseJson = canonicalJson(input.response ?? null);
  const wait = row.waitJson ? (JSON.parse(row.waitJson) as { id: string; state: string; signalType: string; deadlineAt: string }) : null;
  // A task a handoff put in this queue: no run waits for it (the handoff node already left).
  const handoff = wait ? null : await env.DB.prepare(`SELECT id FROM handoffs WHERE installation_id = ?1 AND task_id = ?2`).bind(actor.installationId, taskId).first<{ id: string }>();
  if (row.state === "completed" && row.completedBy === who && row.responseJson === responseJson && (wait || handoff)) {
    if (wait) {
      const recorded = await firstEventOfWaitUnsafe(env.DB, wait.id);
      if (recorded && wait.state === "waiting") await signalRunEvent(env, row.runId, wait.signalType, recorded.id);
    }
    return getTask(env, actor, taskId);
  }
  const now = new Date().toISOString();
  if (row.state !== "claimed" || row.claimedBy !== who || (row.leaseExpiresAt ?? "") <= now) {
    throw conflict("task.lease_required", "Claim the task (and hold a live lease) before completing it.");
  }
  const problems = responseProblems(row.responseSchemaJson, input.response);
  if (problems.length > 0) throw new AppError("task.response_invalid", "The response does not match the task's response schema.", { status: 422, details: problems });
  if (handoff) return completeHandoffTask(env, actor, row, { who, responseJson, handoffId: handoff.id });
  if (wait?.state !== "waiting") throw conflict("task.not_claimable", "The run is no longer waiting for this task.");
  const eventId = newId("evt");
  const outcome =
    row.appealId && typeof (input.response as { outcome?: unknown })?.outcome === "string" && (APPEAL_OUTCOMES as readonly string[]).includes((input.response as { outcome: string }).outcome)
      ? (input.response as { outcome: string }).outcome
      : null;
  // An appeal's outcome from automation (a key that is not a reviewer's) is only a proposal a person
  // confirms, and only where the installation allows it (DSA Art. 20(6)).
  const person = actsAsPerson(actor);
  if (outcome && row.appealId && !person) await assertAutomatedComplaints(env, actor.installationId);
  const payload = canonicalJson({ taskId, reviewer: reviewerLabel(who), response: input.response ?? null });
  const statements = [
    // The lease is checked once, by the task's update; the event is recorded only if that completed the task.
    // The update answers the completed task and its run's current instance, which the signal goes
    // to (no read after the batch).
    env.DB.prepare(`
      UPDATE human_tasks SET state = 'completed', response_json = ?4, completed_by = '', completed_at = ?5, updated_at = ?5, lease_expires_at = NULL, completed_by_person = ?6
      WHERE installation_id = ?1 AND id = ?2 AND state = 'claimed' AND claimed_by = ?3 AND lease_expires_at > ?5
      RETURNING ${TASK_COLUMNS}, (SELECT COALESCE(r.instance_id, r.id) FROM workflow_runs r WHERE r.id = human_tasks.run_id) AS instanceId, ${TASK_QUEUE_WELLNESS_SQL}
    `).bind(actor.installationId, taskId, who, responseJson, now, person ? 1 : 0),
    runEventStatement(
      env.DB,
      { id: eventId, installationId: actor.installationId, runId: row.runId, waitId: wait.id, type: "task.completed", payloadJson: payload, at: now },
      { table: "human_tasks", id: taskId, where: { state: "completed", completed_by: "", claimed_by: who, completed_at: now } },
    ),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `task:${taskId}:completed`,
        action: "task.completed",
        actor: actor.audit,
        target: { type: "task", id: taskId },
        details: { reviewerId: reviewerAuditId(actor.installationId, who), runId: row.runId, responseDigest: taskResponseDigest(actor.installationId, taskId, responseJson) },
        at: now,
      },
      { table: "workflow_events", id: eventId },
    ),
  ];
  if (outcome && row.appealId && !person) {
    statements.push(...proposedOutcomeStatements(env.DB, { installationId: actor.installationId, appealId: row.appealId, outcome, reason: null, proposedBy: who, at: now, actor: actor.audit, eventId, taskId }));
  } else if (outcome && row.appealId) {
    statements.push(
      env.DB.prepare(`UPDATE appeals SET state = ?3, decided_by = ?4, decided_at = ?5, updated_at = ?5, resolved_by_automation = 0 WHERE installation_id = ?1 AND id = ?2 AND state = 'open'
        AND EXISTS (SELECT 1 FROM workflow_events WHERE installation_id = ?1 AND id = ?6)`).bind(actor.installationId, row.appealId, outcome, who, now, eventId),
      auditStatement(
        env.DB,
        {
          installationId: actor.installationId,
          idempotencyKey: `appeal:${row.appealId}:decided`,
          action: `appeal.${outcome}`,
          actor: actor.audit,
          target: { type: "appeal", id: row.appealId },
          details: { reviewerId: reviewerAuditId(actor.installationId, who), taskId },
          at: now,
        },
        { table: "workflow_events", id: eventId },
      ),
      ...decisionReversalStatements(env.DB, { installationId: actor.installationId, appealId: row.appealId, decisionId: await appealDecisionId(env.DB, actor.installationId, row.appealId), at: now, actor: actor.audit }),
      // An overturned decision's strike is reversed with it; the account's ladder walks back on settle.
      strikeReversalStatement(env.DB, { installationId: actor.installationId, appealId: row.appealId, at: now }),
    );
  }
  statements.push(...(await qaSampleStatements(env, actor.installationId, row, { who, principal: reviewerPrincipal(actor), responseJson, at: now })));
  const results = await env.DB.batch<TaskRow & { instanceId: string | null }>(statements);
  const completed = results[0]!.results[0];
  if (!completed) throw conflict("task.lease_required", "The lease changed while completing; claim the task again.");
  await signalRunEvent(env, row.runId, wait.signalType, eventId, completed.instanceId ?? undefined);
  // DSA Art. 20(5): the appellant is told the outcome (the schedule retries if this is lost).
  if (outcome && row.appealId && person) {
    await sendComplaintOutcome(env, actor.installationId, row.appealId);
    if (outcome === "overturned") await settleOverturnedDecision(env, actor.installationId, await appealDecisionId(env.DB, actor.installationId, row.appealId));
  }
  return presentTask(env, actor, completed);
}

/**
 * Completes a task a handoff put in this queue: the task records the response (audited,
 * `task.completed`) and the handoff its outcome (`handoff.completed`), in one batch. No run is
 * signalled: the run that handed off went on without waiting. An appeal on the task is not decided
 * here; the appeal's own review (a human_task, or POST /appeals/:id/resolve) does that.
 */
async function completeHandoffTask(env: Env, actor: Actor, row: TaskRow, input: { who: string; responseJson: string; handoffId: string }) {
  const now = new Date().toISOString();
  const responseDigest = taskResponseDigest(actor.installationId, row.id, input.responseJson);
  const response = JSON.parse(input.responseJson) as { outcome?: unknown } | null;
  const outcome = typeof response?.outcome === "string" ? response.outcome.slice(0, 100) : null;
  const [update] = await env.DB.batch([
    env.DB.prepare(`
      UPDATE human_tasks SET state = 'completed', response_json = ?4, completed_by = '', completed_at = ?5, updated_at = ?5, lease_expires_at = NULL, completed_by_person = ?6
      WHERE installation_id = ?1 AND id = ?2 AND state = 'claimed' AND claimed_by = ?3 AND lease_expires_at > ?5
    `).bind(actor.installationId, row.id, input.who, input.responseJson, now, actsAsPerson(actor) ? 1 : 0),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `task:${row.id}:completed`,
        action: "task.completed",
        actor: actor.audit,
        target: { type: "task", id: row.id },
        details: { reviewerId: reviewerAuditId(actor.installationId, input.who), runId: row.runId, handoffId: input.handoffId, responseDigest },
        at: now,
      },
      { table: "human_tasks", id: row.id, where: { state: "completed", completed_by: "", claimed_by: input.who, completed_at: now } },
    ),
    ...completeHandoffStatements(env.DB, { installationId: actor.installationId, handoffId: input.handoffId, taskId: row.id, completedBy: input.who, outcome, responseDigest, at: now, actor: actor.audit }),
    ...(await qaSampleStatements(env, actor.installationId, row, { who: input.who, principal: reviewerPrincipal(actor), responseJson: input.responseJson, at: now })),
  ]);
  if ((update!.meta.changes ?? 0) === 0) throw conflict("task.lease_required", "The lease changed while completing; claim the task again.");
  return getTask(env, actor, row.id);
}
