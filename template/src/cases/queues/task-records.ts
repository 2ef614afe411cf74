// Statement builders for human_tasks, for the workflow runtime and enforcement to put in their
// own batches. Cases owns that table: every write to it is here or in tasks.ts.
import { auditStatement, canonicalJson, RUNTIME_ACTOR, type AuditEventInput } from "../../audit";
import { sealPersonalData } from "../reports/report-crypto";
import { reviewerAuditId } from "../../lib/person-keys";
import { taskIdOf } from "./task-ids";

/**
 * `context_digest` of a task whose context is sealed: empty, since the sealed text authenticates
 * itself (its AES-GCM tag) and no digest of it is kept. Rows written before hold `sealed` or
 * `sealed:sha256:<hex>`; an erased context says `erased`. Nothing reads it but erasure's
 * "not erased yet" (migration 0064).
 */
export const SEALED_CONTEXT = "";

/**
 * SQL: who completed task `t` (an alias of human_tasks, or the table's name). A completion writes ''
 * in completed_by, meaning the claimant (only the reviewer holding the lease completes, and a
 * completed task keeps claimed_by); rows completed before name the completer; NULL: the run closed
 * the task without an answer (migration 0064).
 */
export const TASK_COMPLETED_BY_SQL = (t = "human_tasks") => `(CASE ${t}.completed_by WHEN '' THEN ${t}.claimed_by ELSE ${t}.completed_by END)`;

/**
 * SQL: the response schema of task `t` (an alias of human_tasks, or the table's name): the
 * installation's numbered schema (task_response_schemas) when the row names one, else the schema
 * the row holds itself (rows written before migration 0064, and rows brought back from an archive
 * of that time).
 */
export const TASK_RESPONSE_SCHEMA_SQL = (t = "human_tasks") =>
  `COALESCE((SELECT s.schema_json FROM task_response_schemas s WHERE s.installation_id = ${t}.installation_id AND s.number = ${t}.response_schema_number), ${t}.response_schema_json)`;

/**
 * For a batch that then writes a task with this response schema (canonical JSON): records the
 * schema as the installation's next numbered one unless it is there already. Idempotent; the
 * numbers are per installation, so concurrent batches (D1 runs one at a time) never share one.
 */
export function responseSchemaStatement(db: D1Database, input: { installationId: string; schemaJson: string; at: string }): D1PreparedStatement {
  return db
    .prepare(`
    INSERT INTO task_response_schemas (installation_id, number, schema_json, created_at)
    SELECT ?1, n, ?2, ?3 FROM (SELECT COALESCE(MAX(number), 0) + 1 AS n FROM task_response_schemas WHERE installation_id = ?1)
    WHERE NOT EXISTS (SELECT 1 FROM task_response_schemas WHERE installation_id = ?1 AND schema_json = ?2)
    ON CONFLICT DO NOTHING
  `)
    .bind(input.installationId, input.schemaJson, input.at);
}

/** Installation and schema pairs this isolate has put in a batch to record: their tasks skip the statement. */
const recordedSchemas = new Set<string>();
const RECORDED_SCHEMAS_MAX = 1_000;

/**
 * responseSchemaStatement, unless this isolate already sent it for the pair (a statement per task
 * saved). Should that batch have failed, a task of the schema holds the schema itself
 * (responseSchemaValuesSql), which reads the same; a new isolate records it again.
 */
function responseSchemaStatements(db: D1Database, input: { installationId: string; schemaJson: string; at: string }): D1PreparedStatement[] {
  const key = `${input.installationId}\n${input.schemaJson}`;
  if (recordedSchemas.has(key)) return [];
  if (recordedSchemas.size >= RECORDED_SCHEMAS_MAX) recordedSchemas.clear();
  recordedSchemas.add(key);
  return [responseSchemaStatement(db, input)];
}

/**
 * SQL for a task INSERT after responseSchemaStatement in the same batch: the values of
 * (response_schema_number, response_schema_json) for the schema bound at `schema` in installation
 * `installation` (SQL expressions): its number and '', or (if it were not recorded) no number and
 * the schema itself, which reads the same.
 */
export const responseSchemaValuesSql = (installation: string, schema: string) => {
  const number = `(SELECT number FROM task_response_schemas WHERE installation_id = ${installation} AND schema_json = ${schema})`;
  return `${number}, CASE WHEN ${number} IS NULL THEN ${schema} ELSE '' END`;
};

/**
 * Opens the task of a step (a human_task node, or a handoff to a queue): due by the queue's SLA,
 * taking report and appeal from the run. The context (what the reviewer sees, which may quote the
 * reported content) is sealed; `context_json` stays `{}`. The response schema is the installation's
 * numbered one (recorded by a first statement the first time this isolate opens a task of it). A
 * repeat for the same step writes nothing.
 *
 * The row stores no step_run_id: its id (`taskId`, always `<stepId>:task`, task-ids.ts) names the
 * step, so the step's row is not kept in D1 as an anchor once the run is archived. The id is a
 * function of the step, so its primary key keeps one task per step, a row of the earlier form
 * (step_run_id set, same id) included: the insert conflicts on the id.
 */
export async function openTaskStatements(
  env: Env,
  input: {
    installationId: string;
    taskId: string;
    stepId: string;
    runId: string;
    taskType: string;
    queue: { id: string; slaSeconds: number };
    priority: number;
    context: unknown;
    responseSchema: unknown;
    at: string;
    expiresAt: string | null;
  },
): Promise<D1PreparedStatement[]> {
  // Readers find the step from the id alone: a task whose id did not name its step would lose it.
  if (input.taskId !== taskIdOf(input.stepId)) throw new Error(`A step's task is ${taskIdOf(input.stepId)}, not ${input.taskId}.`);
  const { sealed } = await sealPersonalData(env, input.installationId, `task:${input.taskId}`, input.context ?? null);
  const dueAt = new Date(Date.parse(input.at) + input.queue.slaSeconds * 1_000).toISOString();
  const schemaJson = canonicalJson(input.responseSchema);
  return [
    ...responseSchemaStatements(env.DB, { installationId: input.installationId, schemaJson, at: input.at }),
    env.DB.prepare(`
    INSERT INTO human_tasks (
      id, installation_id, report_id, appeal_id, run_id, task_type, state, queue_id, priority,
      context_json, context_sealed, context_digest, response_schema_number, response_schema_json, due_at, expires_at, created_at, updated_at, priority_lane
    ) SELECT ?1, r.installation_id, r.report_id, r.appeal_id, r.id, ?3, 'open', ?4, ?5, '{}', ?6, ?7, ${responseSchemaValuesSql("r.installation_id", "?8")}, ?9, ?10, ?11, ?11,
      -- A trusted flagger's notice (DSA Art. 22) takes the priority lane /next serves first (not its appeals).
      CASE WHEN r.appeal_id IS NULL AND EXISTS (SELECT 1 FROM reports p WHERE p.id = r.report_id AND p.installation_id = r.installation_id AND p.source = 'trusted_flagger') THEN 'trusted_flagger' END
    FROM workflow_runs r WHERE r.id = ?12 AND r.installation_id = ?13
    ON CONFLICT(id) DO NOTHING
  `).bind(input.taskId, input.stepId, input.taskType, input.queue.id, input.priority, sealed, SEALED_CONTEXT, schemaJson, dueAt, input.expiresAt, input.at, input.runId, input.installationId),
  ];
}

/**
 * Closes the open task of a step when its wait ends: `expired` on timeout, else `completed`. The
 * task is found by its primary key (the step's task id, which rows of either form have).
 */
export function closeStepTaskStatement(db: D1Database, input: { runId: string; stepId: string; timedOut: boolean; at: string }): D1PreparedStatement {
  return db.prepare(CLOSE_STEP_TASK_SQL).bind(taskIdOf(input.stepId), input.timedOut ? 1 : 0, input.at, input.runId);
}

/**
 * closeStepTaskStatement's update (?1 the task's id, ?2 timed out, ?3 the time, ?4 the step's run;
 * exported for the plan tests). Only the run's own task: a row of that id under another run (a
 * restored file's, say) is never closed for it.
 */
export const CLOSE_STEP_TASK_SQL = `
    UPDATE human_tasks SET state = CASE WHEN ?2 = 1 THEN 'expired' ELSE 'completed' END, completed_at = ?3, updated_at = ?3
    WHERE id = ?1 AND run_id = ?4 AND state IN ('open', 'claimed')
  `;

/**
 * A task that a handoff put in a queue: it belongs to that queue, not to the run that handed off.
 * Nor does a golden task, which only borrows its source task's run (migration 0017).
 */
const NOT_HANDOFF = "human_tasks.origin = 'workflow' AND NOT EXISTS (SELECT 1 FROM handoffs h WHERE h.task_id = human_tasks.id)";

/** The tasks a run's end cancels (?1 the run): what runEndTaskStatements reads when not given `ids`. */
export const RUN_END_TASKS_SQL = `SELECT id FROM human_tasks WHERE run_id = ?1 AND state IN ('open', 'claimed') AND ${NOT_HANDOFF}`;

/**
 * For the batch that ends a run (after its state change): every open or claimed task the run is
 * waiting on (its human_task nodes) is cancelled, each with a `task.cancelled` audit event. Tasks
 * handed off to a queue are not: the handoff node already left, and the receiving queue works
 * them whatever became of the run. The update holds only once the run is terminal in the batch.
 */
export async function runEndTaskStatements(db: D1Database, input: { installationId: string; runId: string; runState: string; at: string; actor?: AuditEventInput["actor"]; ids?: string[] }): Promise<D1PreparedStatement[]> {
  const results = input.ids ? input.ids.map((id) => ({ id })) : (await db.prepare(RUN_END_TASKS_SQL).bind(input.runId).all<{ id: string }>()).results;
  if (results.length === 0) return [];
  return [
    db
      .prepare(`UPDATE human_tasks SET state = 'cancelled', lease_expires_at = NULL, updated_at = ?2
        WHERE run_id = ?1 AND state IN ('open', 'claimed') AND ${NOT_HANDOFF}
          AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND state IN ('succeeded', 'failed', 'terminated', 'superseded'))`)
      .bind(input.runId, input.at),
    ...results.map((row) =>
      auditStatement(
        db,
        {
          installationId: input.installationId,
          idempotencyKey: `task:${row.id}:cancelled`,
          action: "task.cancelled",
          actor: input.actor ?? RUNTIME_ACTOR,
          target: { type: "task", id: row.id },
          details: { runId: input.runId, reason: `run_${input.runState}` },
          at: input.at,
        },
        { table: "human_tasks", id: row.id, where: { state: "cancelled", updated_at: input.at } },
      ),
    ),
  ];
}

/**
 * Seals task contexts written in plaintext before contexts were sealed (migration 0007), a bounded
 * batch at a time; idempotent (a row is rewritten only while its context is still plaintext).
 */
export async function sealLegacyTaskContexts(env: Env, limit = 100): Promise<{ sealed: number }> {
  const { results } = await env.DB.prepare(`SELECT id, installation_id AS installationId, context_json AS contextJson FROM human_tasks WHERE context_sealed IS NULL ORDER BY created_at LIMIT ?1`)
    .bind(limit)
    .all<{ id: string; installationId: string; contextJson: string }>();
  const statements: D1PreparedStatement[] = [];
  for (const row of results) {
    const { sealed } = await sealPersonalData(env, row.installationId, `task:${row.id}`, JSON.parse(row.contextJson) as unknown);
    statements.push(env.DB.prepare(`UPDATE human_tasks SET context_sealed = ?2, context_json = '{}', context_digest = ?3 WHERE id = ?1 AND context_sealed IS NULL`).bind(row.id, sealed, SEALED_CONTEXT));
  }
  if (statements.length > 0) await env.DB.batch(statements);
  return { sealed: statements.length };
}

/** The lease sweep's selection (?1 now, ?2 limit); exported for the bench's query plan. */
export const LAPSED_LEASES_SQL = `SELECT id, installation_id AS installationId, queue_id AS queueId, claimed_by AS claimedBy, lease_expires_at AS leaseExpiresAt
  FROM human_tasks WHERE state = 'claimed' AND lease_expires_at <= ?1 ORDER BY lease_expires_at LIMIT ?2`;

/** Lapsed leases the schedule clears per run (the rest at the next run). */
const LEASE_SWEEP_LIMIT = 200;

/**
 * The lease sweep (on the schedule; bounded, idempotent). A claimed task whose lease lapsed is
 * already served again by `/next` and listed as open; this makes the row say so: state `open`, no
 * claimant, no lease, with a `task.lease_lapsed` audit event naming who held it. Each update holds
 * only while the row still has the lease it was read with, so a reviewer who claims it in between
 * keeps their claim, and a second run finds nothing.
 */
export async function sweepLapsedLeases(env: Env, now: Date = new Date(), limit = LEASE_SWEEP_LIMIT): Promise<{ released: number }> {
  const at = now.toISOString();
  const { results } = await env.DB.prepare(LAPSED_LEASES_SQL).bind(at, limit).all<{ id: string; installationId: string; queueId: string | null; claimedBy: string | null; leaseExpiresAt: string }>();
  if (results.length === 0) return { released: 0 };
  const statements = results.flatMap((row) => [
    env.DB.prepare(`UPDATE human_tasks SET state = 'open', claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, updated_at = ?3
      WHERE id = ?1 AND state = 'claimed' AND lease_expires_at = ?2`).bind(row.id, row.leaseExpiresAt, at),
    auditStatement(
      env.DB,
      {
        installationId: row.installationId,
        idempotencyKey: `task:${row.id}:lease_lapsed:${row.leaseExpiresAt}`,
        action: "task.lease_lapsed",
        actor: { type: "system", id: "schedule" },
        target: { type: "task", id: row.id },
        details: { reviewerId: reviewerAuditId(row.installationId, row.claimedBy), queueId: row.queueId, leaseExpiresAt: row.leaseExpiresAt },
        at,
      },
      { table: "human_tasks", id: row.id, where: { state: "open", updated_at: at } },
    ),
  ]);
  const written = await env.DB.batch(statements);
  return { released: written.filter((result, index) => index % 2 === 0 && result.meta.changes === 1).length };
}
