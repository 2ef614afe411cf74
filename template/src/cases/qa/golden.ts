// Golden items: a lead takes a task whose right answer is known, writes that answer (and, if they
// like, the context shown), and a copy of the task goes into a queue like any other. Reviewers cannot
// tell: the task API shows it with the source task's run, report, type and schema, an id of the same
// form, and no marker. Its completion scores the reviewer's accuracy (qa.ts), resumes no run, and is
// left out of the metrics rollups.
import { auditStatement, canonicalJson } from "../../audit";
import { reviewerLabel, type Actor } from "../../auth";
import { AppError, conflict, notFound } from "../../errors";
import { newId, sha256Hex } from "../../lib/crypto";
import { isUniqueViolation } from "../../lib/d1";
import { getQueueRow } from "../queues/queues";
import { responseSchemaStatement, responseSchemaValuesSql, SEALED_CONTEXT, TASK_RESPONSE_SCHEMA_SQL } from "../queues/task-records";
import { answerLabel, DEFAULT_COMPARE_FIELD, labelName } from "./qa-sampling";
import { reportCategoryUnsafe, taskContextUnsafe } from "./qa";
import { sealPersonalData } from "../reports/report-crypto";
import { responseProblems, type TaskRow } from "../queues/tasks";
import { taskStepSql } from "../queues/task-ids";

const SOURCE_COLUMNS = `id, queue_id AS queueId, run_id AS runId, ${taskStepSql()} AS stepRunId, report_id AS reportId, appeal_id AS appealId, task_type AS taskType,
  state, priority, context_json AS contextJson, context_sealed AS contextSealed, ${TASK_RESPONSE_SCHEMA_SQL()} AS responseSchemaJson,
  expires_at AS expiresAt, created_at AS createdAt, origin`;

type SourceRow = Pick<TaskRow, "id" | "queueId" | "runId" | "stepRunId" | "reportId" | "appealId" | "taskType" | "state" | "priority" | "contextJson" | "contextSealed" | "responseSchemaJson" | "expiresAt" | "createdAt" | "origin">;

/**
 * The id of the n-th golden copy of a task: the form every workflow task id has
 * (`<run>:<node>:<branch>:<attempt>:task`), with a later attempt than the source's.
 */
function goldenTaskId(source: SourceRow, copy: number): string {
  const match = /^(.*):(\d+):task$/u.exec(source.id);
  return match ? `${match[1]}:${Number(match[2]) + copy}:task` : `${newId("run")}:review:main:1:task`;
}

/**
 * Writes a golden item from a workflow task (`sourceTaskId`): the known `answer` (checked against the
 * task's response schema), an optional `context` replacing the source's, and the queue it goes to
 * (default the source's). The golden task and the item land in one batch, audited
 * (`golden_item.created`, which names the item and queue, not the task).
 */
export async function createGoldenItem(env: Env, actor: Actor, input: { sourceTaskId: string; queueId?: string; context?: unknown; answer: unknown }) {
  const source = await env.DB.prepare(`SELECT ${SOURCE_COLUMNS} FROM human_tasks WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, input.sourceTaskId).first<SourceRow>();
  if (!source) throw notFound("task");
  if (source.origin !== "workflow") throw new AppError("golden.source_invalid", "A golden item copies a task a workflow created, not a QA or golden task.", { status: 422 });
  const queueId = input.queueId ?? source.queueId;
  const queue = queueId ? await getQueueRow(env.DB, actor.installationId, queueId) : null;
  if (!queue) throw notFound("queue");
  const problems = responseProblems(source.responseSchemaJson, input.answer);
  if (problems.length > 0) throw new AppError("golden.answer_invalid", "The known answer does not match the task's response schema.", { status: 422, details: problems });
  const copies = await env.DB.prepare(`SELECT COUNT(*) AS n FROM golden_items WHERE installation_id = ?1 AND source_task_id = ?2`).bind(actor.installationId, source.id).first<{ n: number }>();
  const id = newId("gold");
  const taskId = goldenTaskId(source, (copies?.n ?? 0) + 1);
  const context = input.context !== undefined ? input.context : await taskContextUnsafe(env, actor.installationId, source);
  const { sealed } = await sealPersonalData(env, actor.installationId, `task:${taskId}`, context ?? null);
  const settings = await env.DB.prepare(`SELECT compare_field AS f FROM qa_settings WHERE installation_id = ?1 AND queue_id = ?2`).bind(actor.installationId, queue.id).first<{ f: string }>();
  const answerJson = canonicalJson(input.answer ?? null);
  const compareField = settings?.f ?? DEFAULT_COMPARE_FIELD;
  const label = await answerLabel(input.answer ?? null, compareField);
  const category = await reportCategoryUnsafe(env.DB, actor.installationId, source.reportId);
  const at = new Date().toISOString();
  const dueAt = new Date(Date.parse(at) + queue.slaSeconds * 1_000).toISOString();
  // A source with a timeout gives its copy the same span, so the copy's expiresAt looks like any other's.
  const expiresAt = source.expiresAt ? new Date(Date.parse(at) + Math.max(0, Date.parse(source.expiresAt) - Date.parse(source.createdAt))).toISOString() : null;
  const statements = [
    responseSchemaStatement(env.DB, { installationId: actor.installationId, schemaJson: source.responseSchemaJson, at }),
    env.DB.prepare(`
      INSERT INTO human_tasks (id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, priority,
        context_json, context_sealed, context_digest, response_schema_number, response_schema_json, due_at, expires_at, created_at, updated_at, origin)
      VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, 'open', ?7, ?8, '{}', ?9, ?10, ${responseSchemaValuesSql("?2", "?11")}, ?12, ?13, ?14, ?14, 'golden')
    `).bind(taskId, actor.installationId, source.reportId, source.appealId, source.runId, source.taskType, queue.id, source.priority, sealed, SEALED_CONTEXT, source.responseSchemaJson, dueAt, expiresAt, at),
    env.DB.prepare(`
      INSERT INTO golden_items (id, installation_id, queue_id, task_id, source_task_id, category, compare_field, answer_json, answer_label, created_by, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
    `).bind(id, actor.installationId, queue.id, taskId, source.id, category, compareField, answerJson, label, actor.audit.id, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `golden_item:${id}:created`,
      action: "golden_item.created",
      actor: actor.audit,
      target: { type: "golden_item", id },
      details: { queueId: queue.id, queueName: queue.name, answerDigest: `sha256:${await sha256Hex(answerJson)}` },
      at,
    }),
  ];
  try {
    await env.DB.batch(statements);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("golden.concurrent", "Another golden item was written from this task at the same moment; retry.");
    throw error;
  }
  return (await listGoldenItems(env, actor, { id }))[0]!;
}

interface GoldenRow {
  id: string;
  queueId: string;
  taskId: string;
  sourceTaskId: string;
  category: string | null;
  answerJson: string;
  answerLabel: string;
  createdBy: string;
  createdAt: string;
  completedBy: string | null;
  responseLabel: string | null;
  correct: number | null;
  completedAt: string | null;
  taskState: string | null;
}

/** Golden items (admin only: this is the one place that says which tasks are golden), newest first. */
export async function listGoldenItems(env: Env, actor: Actor, options: { id?: string; queueId?: string } = {}) {
  const { results } = await env.DB.prepare(`
    SELECT g.id, g.queue_id AS queueId, g.task_id AS taskId, g.source_task_id AS sourceTaskId, g.category, g.answer_json AS answerJson, g.answer_label AS answerLabel,
      g.created_by AS createdBy, g.created_at AS createdAt, g.completed_by AS completedBy, g.response_label AS responseLabel, g.correct, g.completed_at AS completedAt, t.state AS taskState
    FROM golden_items g LEFT JOIN human_tasks t ON t.id = g.task_id AND t.installation_id = g.installation_id
    WHERE g.installation_id = ?1 AND (?2 IS NULL OR g.id = ?2) AND (?3 IS NULL OR g.queue_id = ?3)
    ORDER BY g.created_at DESC, g.id LIMIT 500
  `)
    .bind(actor.installationId, options.id ?? null, options.queueId ?? null)
    .all<GoldenRow>();
  return results.map((row) => ({
    id: row.id,
    queueId: row.queueId,
    taskId: row.taskId,
    sourceTaskId: row.sourceTaskId,
    category: row.category,
    answer: JSON.parse(row.answerJson) as unknown,
    comparedOn: labelName(row.answerLabel),
    taskState: row.taskState,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    result: row.completedAt ? { reviewer: reviewerLabel(row.completedBy), answered: row.responseLabel ? labelName(row.responseLabel) : null, correct: row.correct === 1, completedAt: row.completedAt } : null,
  }));
}
