// Reviewer QA: per queue, a share of completed tasks is sampled (keyed hash of the task id) into a QA
// queue for a blind second review; completing a QA or golden task records agreement or accuracy and
// resumes no run. Settings are per queue (admin). Figures are in qa-figures.ts, golden items in golden.ts.
import { auditStatement, canonicalJson } from "../../audit";
import { reviewerLabel, type Actor } from "../../auth";
import { AppError, conflict, notFound } from "../../errors";
import { newId } from "../../lib/crypto";
import { getQueueRow } from "../queues/queues";
import { responseSchemaStatement, responseSchemaValuesSql, SEALED_CONTEXT, TASK_COMPLETED_BY_SQL } from "../queues/task-records";
import { openPersonalData, sealPersonalData } from "../reports/report-crypto";
import { answerLabel, DEFAULT_COMPARE_FIELD, isSampled, qaSamplingKey } from "./qa-sampling";
import type { TaskRow } from "../queues/tasks";
import { reviewerAuditId, taskResponseDigest } from "../../lib/person-keys";

export const TASK_ORIGINS = ["workflow", "qa", "golden"] as const;
export type TaskOrigin = (typeof TASK_ORIGINS)[number];

interface SettingsRow {
  queueId: string;
  qaQueueId: string;
  rate: number;
  compareField: string;
  createdAt: string;
  updatedAt: string;
}

const SETTINGS_COLUMNS = `queue_id AS queueId, qa_queue_id AS qaQueueId, rate, compare_field AS compareField, created_at AS createdAt, updated_at AS updatedAt`;

/** SQL: the QA settings of the task row `task` names (its installation and queue), as JSON (null when none), to read beside the task. */
export const qaSettingsJsonSql = (task: string) =>
  `(SELECT json_object('queueId', queue_id, 'qaQueueId', qa_queue_id, 'rate', rate, 'compareField', compare_field, 'createdAt', created_at, 'updatedAt', updated_at)
    FROM qa_settings WHERE installation_id = ${task}.installation_id AND queue_id = ${task}.queue_id)`;

function settingsRow(db: D1Database, installationId: string, queueId: string): Promise<SettingsRow | null> {
  return db.prepare(`SELECT ${SETTINGS_COLUMNS} FROM qa_settings WHERE installation_id = ?1 AND queue_id = ?2`).bind(installationId, queueId).first<SettingsRow>();
}

/** A queue's QA settings; a queue without any samples nothing (rate 0). Another installation's queue is a 404. */
export async function getQaSettings(env: Env, actor: Actor, queueId: string) {
  const queue = await getQueueRow(env.DB, actor.installationId, queueId);
  if (!queue) throw notFound("queue");
  const row = await settingsRow(env.DB, actor.installationId, queueId);
  return row ?? { queueId, qaQueueId: null, rate: 0, compareField: DEFAULT_COMPARE_FIELD, createdAt: null, updatedAt: null };
}

/** Sets (replaces) a queue's QA settings, audited. The QA queue is another queue of the installation. */
export async function setQaSettings(env: Env, actor: Actor, queueId: string, input: { qaQueueId: string; rate: number; compareField?: string }) {
  const [queue, qaQueue] = await Promise.all([getQueueRow(env.DB, actor.installationId, queueId), getQueueRow(env.DB, actor.installationId, input.qaQueueId)]);
  if (!queue) throw notFound("queue");
  if (!qaQueue) throw notFound("queue");
  if (qaQueue.id === queue.id) throw new AppError("qa.same_queue", "QA reviews go to another queue than the one they sample; name a separate QA queue.", { status: 422 });
  const at = new Date().toISOString();
  const compareField = input.compareField ?? DEFAULT_COMPARE_FIELD;
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO qa_settings (installation_id, queue_id, qa_queue_id, rate, compare_field, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
      ON CONFLICT (installation_id, queue_id) DO UPDATE SET qa_queue_id = excluded.qa_queue_id, rate = excluded.rate, compare_field = excluded.compare_field, updated_at = excluded.updated_at
    `).bind(actor.installationId, queueId, qaQueue.id, input.rate, compareField, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `queue:${queueId}:qa_settings:${at}`,
      action: "queue.qa_settings_changed",
      actor: actor.audit,
      target: { type: "queue", id: queueId },
      details: { queueName: queue.name, qaQueueId: qaQueue.id, qaQueueName: qaQueue.name, rate: input.rate, compareField },
      at,
    }),
  ]);
  return (await settingsRow(env.DB, actor.installationId, queueId))!;
}

export async function listQaSettings(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${SETTINGS_COLUMNS} FROM qa_settings WHERE installation_id = ?1 ORDER BY queue_id LIMIT 500`).bind(actor.installationId).all<SettingsRow>();
  return results;
}

/** A task's context as stored: opened when sealed (for a copy to be sealed again under its own id). */
export async function taskContextUnsafe(env: Env, installationId: string, row: Pick<TaskRow, "id" | "contextJson" | "contextSealed">): Promise<unknown> {
  return row.contextSealed ? openPersonalData<unknown>(env, installationId, `task:${row.id}`, row.contextSealed) : (JSON.parse(row.contextJson) as unknown);
}

export async function reportCategoryUnsafe(db: D1Database, installationId: string, reportId: string | null): Promise<string | null> {
  if (!reportId) return null;
  const row = await db.prepare(`SELECT category FROM reports WHERE installation_id = ?1 AND id = ?2`).bind(installationId, reportId).first<{ category: string }>();
  return row?.category ?? null;
}

/**
 * For the batch that completes a workflow task: when the task's queue samples it (keyed hash of the
 * task id below rate·2^32), a QA task in the QA queue with the same type, schema and context (sealed
 * again under its own id) but no run, report, answer or reviewer, and its qa_reviews row. Every
 * statement holds only if the completion in the same batch did (the task completed by `who` at `at`)
 * and the task was not sampled before. Nothing for QA or golden tasks, or unsampled ones.
 */
export async function qaSampleStatements(env: Env, installationId: string, row: TaskRow & { qaSettingsJson?: string | null }, input: { who: string; principal: string; responseJson: string; at: string }): Promise<D1PreparedStatement[]> {
  if (row.origin !== "workflow" || !row.queueId) return [];
  // Read with the task (qaSettingsJsonSql) when its reader asked for them.
  const settings = row.qaSettingsJson !== undefined ? (row.qaSettingsJson === null ? null : (JSON.parse(row.qaSettingsJson) as SettingsRow)) : await settingsRow(env.DB, installationId, row.queueId);
  if (!settings || settings.rate <= 0 || !isSampled(qaSamplingKey(env), row.id, settings.rate)) return [];
  const qaQueue = await getQueueRow(env.DB, installationId, settings.qaQueueId);
  if (!qaQueue) return [];
  const qaTaskId = `${newId("qa")}:task`;
  const context = await taskContextUnsafe(env, installationId, row);
  const { sealed } = await sealPersonalData(env, installationId, `task:${qaTaskId}`, context ?? null);
  const label = await answerLabel(JSON.parse(input.responseJson) as unknown, settings.compareField);
  const category = await reportCategoryUnsafe(env.DB, installationId, row.reportId);
  // Blind: the QA task's times do not point at the original's completion (a reviewer could match
  // them against the original queue's completed tasks): it shows as made up to an hour before.
  const shownAt = blindTime(input.at);
  const dueAt = new Date(Date.parse(shownAt) + qaQueue.slaSeconds * 1_000).toISOString();
  const completed = `EXISTS (SELECT 1 FROM human_tasks WHERE installation_id = ?2 AND id = ?3 AND state = 'completed' AND ${TASK_COMPLETED_BY_SQL()} = ?4 AND completed_at = ?5)
    AND NOT EXISTS (SELECT 1 FROM qa_reviews WHERE original_task_id = ?3)`;
  return [
    responseSchemaStatement(env.DB, { installationId, schemaJson: row.responseSchemaJson, at: input.at }),
    env.DB.prepare(`
      INSERT INTO human_tasks (id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, priority,
        context_json, context_sealed, context_digest, response_schema_number, response_schema_json, due_at, expires_at, created_at, updated_at, origin)
      SELECT ?1, ?2, NULL, NULL, NULL, NULL, ?6, 'open', ?7, ?8, '{}', ?9, ?10, ${responseSchemaValuesSql("?2", "?11")}, ?12, NULL, ?13, ?13, 'qa' WHERE ${completed}
    `).bind(qaTaskId, installationId, row.id, input.who, input.at, row.taskType, qaQueue.id, row.priority, sealed, SEALED_CONTEXT, row.responseSchemaJson, dueAt, shownAt),
    env.DB.prepare(`
      INSERT INTO qa_reviews (qa_task_id, installation_id, original_task_id, queue_id, category, compare_field, original_reviewer, original_label, original_completed_at, created_at, original_principal)
      SELECT ?1, ?2, ?3, ?6, ?7, ?8, ?4, ?9, ?5, ?5, ?10 WHERE EXISTS (SELECT 1 FROM human_tasks WHERE id = ?1 AND origin = 'qa')
    `).bind(qaTaskId, installationId, row.id, reviewerLabel(input.who), input.at, row.queueId, category, settings.compareField, label, input.principal),
    // Names neither the original task nor its reviewer: the QA reviewer may read the audit trail.
    auditStatement(
      env.DB,
      {
        installationId,
        idempotencyKey: `task:${qaTaskId}:qa_sampled`,
        action: "task.qa_sampled",
        actor: { type: "system", id: "reviewer-qa" },
        target: { type: "task", id: qaTaskId },
        details: { queueId: row.queueId, qaQueueId: qaQueue.id, rate: settings.rate },
        at: input.at,
      },
      { table: "human_tasks", id: qaTaskId, where: { installation_id: installationId, origin: "qa" } },
    ),
  ];
}

/** A random whole second from one hour to one second before `at`: never `at` itself, nor a fixed offset from it. */
function blindTime(at: string): string {
  const [draw] = crypto.getRandomValues(new Uint32Array(1));
  return new Date(Math.floor(Date.parse(at) / 1_000) * 1_000 - (1 + (draw! % 3_600)) * 1_000).toISOString();
}

/**
 * SQL condition (for a query over human_tasks) that a task is not the QA task of an original the
 * caller answered: the same authenticated principal (`principalParam`: an API key or console user,
 * whatever reviewer name its client gives), or the same reviewer name (`whoParam`; rows written
 * before principals were kept have only that). `/next` skips those, and a claim of one is refused.
 */
export const notOwnQaTaskSql = (whoParam: string, principalParam: string, table = "human_tasks") =>
  `NOT EXISTS (SELECT 1 FROM qa_reviews qr WHERE qr.qa_task_id = ${table}.id AND (qr.original_principal = ${principalParam} OR qr.original_reviewer = ${whoParam}))`;

/** Refuses a claim of the QA task of the caller's own answer (checked before the claim's update). */
/**
 * The authenticated principal behind a review: `api_key:<id>` or `user:<id>` (never a name a client
 * sends). Rules about who may review whose work (QA of one's own answer) compare principals.
 */
export function reviewerPrincipal(actor: Actor): string {
  return `${actor.audit.type}:${actor.audit.id}`;
}

export async function assertNotOwnQaTask(db: D1Database, installationId: string, taskId: string, who: string, principal: string): Promise<void> {
  const own = await db.prepare(`SELECT 1 AS x WHERE ${OWN_QA_TASK_SQL}`).bind(installationId, taskId, reviewerLabel(who), principal).first();
  if (own) throw ownQaTaskError();
}

/** assertNotOwnQaTask's rule as an SQL condition over ?1 installation, ?2 task, ?3 reviewer label, ?4 principal (true: the caller's own answer's QA task). */
export const OWN_QA_TASK_SQL = `EXISTS (SELECT 1 FROM qa_reviews WHERE installation_id = ?1 AND qa_task_id = ?2 AND (original_principal = ?4 OR original_reviewer = ?3))`;

/** The refusal of a claim of the QA task of the caller's own answer. */
export function ownQaTaskError(): AppError {
  return new AppError("qa.own_task", "This QA task reviews an answer you (this API key or console user) gave; another reviewer takes it.", { status: 403 });
}

export type ResponseProblems = () => Array<{ path: string; code: string; message: string }>;

/**
 * Completes a QA or golden task: the lease and the response schema are checked as for any task; the
 * task, its comparison (qa_reviews agreement, or golden_items correctness) and the `task.completed`
 * event land in one batch. No run is signalled and nothing is sampled. Repeating the same completion
 * changes nothing.
 */
export async function completeReviewCopyTask(env: Env, actor: Actor, row: TaskRow, input: { who: string; response: unknown; problems: ResponseProblems }): Promise<void> {
  const responseJson = canonicalJson(input.response ?? null);
  if (row.state === "completed" && row.completedBy === input.who && row.responseJson === responseJson) return;
  const now = new Date().toISOString();
  // The claim checked who claims; the completion checks who completes (a first reviewer's key is
  // told why it may not complete a QA task of its own answer, before the lease says it is not its).
  if (row.origin === "qa") await assertNotOwnQaTask(env.DB, actor.installationId, row.id, input.who, reviewerPrincipal(actor));
  if (row.state !== "claimed" || row.claimedBy !== input.who || (row.leaseExpiresAt ?? "") <= now) {
    throw conflict("task.lease_required", "Claim the task (and hold a live lease) before completing it.");
  }
  const problems = input.problems();
  if (problems.length > 0) throw new AppError("task.response_invalid", "The response does not match the task's response schema.", { status: 422, details: problems });
  // Compared on the field fixed when the QA task or golden item was written (settings may change since).
  const table = row.origin === "qa" ? "qa_reviews WHERE installation_id = ?1 AND qa_task_id = ?2" : "golden_items WHERE installation_id = ?1 AND task_id = ?2";
  const compareField = (await env.DB.prepare(`SELECT compare_field AS f FROM ${table}`).bind(actor.installationId, row.id).first<{ f: string }>())?.f ?? DEFAULT_COMPARE_FIELD;
  const label = await answerLabel(input.response ?? null, compareField);
  const done = `EXISTS (SELECT 1 FROM human_tasks WHERE installation_id = ?1 AND id = ?2 AND state = 'completed' AND ${TASK_COMPLETED_BY_SQL()} = ?3 AND completed_at = ?4)`;
  const [update] = await env.DB.batch([
    env.DB.prepare(`
      UPDATE human_tasks SET state = 'completed', response_json = ?4, completed_by = '', completed_at = ?5, updated_at = ?5, lease_expires_at = NULL
      WHERE installation_id = ?1 AND id = ?2 AND state = 'claimed' AND claimed_by = ?3 AND lease_expires_at > ?5
    `).bind(actor.installationId, row.id, input.who, responseJson, now),
    row.origin === "qa"
      ? env.DB.prepare(`UPDATE qa_reviews SET qa_reviewer = ?3, qa_label = ?5, agreed = CASE WHEN original_label = ?5 THEN 1 ELSE 0 END, qa_completed_at = ?4
          WHERE installation_id = ?1 AND qa_task_id = ?2 AND qa_completed_at IS NULL AND ${done}`).bind(actor.installationId, row.id, input.who, now, label)
      : env.DB.prepare(`UPDATE golden_items SET completed_by = ?3, response_label = ?5, correct = CASE WHEN answer_label = ?5 THEN 1 ELSE 0 END, completed_at = ?4
          WHERE installation_id = ?1 AND task_id = ?2 AND completed_at IS NULL AND ${done}`).bind(actor.installationId, row.id, input.who, now, label),
    // A golden task's event has the shape of any task's (reviewers may read the audit trail).
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `task:${row.id}:completed`,
        action: "task.completed",
        actor: actor.audit,
        target: { type: "task", id: row.id },
        details: { reviewerId: reviewerAuditId(actor.installationId, input.who), runId: row.runId, responseDigest: taskResponseDigest(actor.installationId, row.id, responseJson), ...(row.origin === "qa" ? { qaReview: true } : {}) },
        at: now,
      },
      { table: "human_tasks", id: row.id, where: { state: "completed", completed_by: "", claimed_by: input.who, completed_at: now } },
    ),
  ]);
  if ((update!.meta.changes ?? 0) === 0) throw conflict("task.lease_required", "The lease changed while completing; claim the task again.");
}

export interface QaDisagreementRow {
  workflowVersionId: string;
  /** The trigger whose run created the task (null for runs started through POST /runs). */
  triggerId: string | null;
  authorityMode: string;
  reviews: number;
  disagreements: number;
}

/**
 * For automatic demotion: QA reviews done since `since` of tasks that workflow runs created, and how
 * many disagreed with the original answer, per workflow version, trigger and authority mode (a
 * trigger's runs carry `trigger:<id>:` in their idempotency key). Golden items are not QA reviews and
 * are not counted. Every query is scoped to `installationId`.
 */
export async function qaDisagreements(env: Env, installationId: string, since: string): Promise<QaDisagreementRow[]> {
  const { results } = await env.DB.prepare(`
    SELECT r.workflow_version_id AS workflowVersionId,
      CASE WHEN r.idempotency_key LIKE 'trigger:%:%' THEN substr(r.idempotency_key, 9, instr(substr(r.idempotency_key, 9), ':') - 1) END AS triggerId,
      r.authority_mode AS authorityMode, COUNT(*) AS reviews, SUM(q.agreed = 0) AS disagreements
    FROM qa_reviews q
      JOIN human_tasks t ON t.id = q.original_task_id AND t.installation_id = q.installation_id
      JOIN workflow_runs r ON r.id = t.run_id AND r.installation_id = q.installation_id
    WHERE q.installation_id = ?1 AND q.qa_completed_at >= ?2 AND q.agreed IS NOT NULL
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  `)
    .bind(installationId, since)
    .all<QaDisagreementRow>();
  return results;
}
