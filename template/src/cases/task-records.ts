// Statement builders for human_tasks, for the workflow runtime and enforcement to put in their
// own batches. Cases owns that table: every write to it is here or in tasks.ts.
import { canonicalJson } from "../audit";
import { sha256Hex } from "../lib/crypto";

/**
 * Opens the task of a step (a human_task node, or a handoff to a queue): due by the queue's SLA,
 * taking report and appeal from the run. A repeat for the same step writes nothing.
 */
export async function openTaskStatement(
  db: D1Database,
  input: {
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
): Promise<D1PreparedStatement> {
  const context = canonicalJson(input.context);
  const dueAt = new Date(Date.parse(input.at) + input.queue.slaSeconds * 1_000).toISOString();
  return db
    .prepare(`
    INSERT INTO human_tasks (
      id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, priority,
      context_json, context_digest, response_schema_json, due_at, expires_at, created_at, updated_at
    ) SELECT ?1, r.installation_id, r.report_id, r.appeal_id, r.id, ?2, ?3, 'open', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11
    FROM workflow_runs r WHERE r.id = ?12
    ON CONFLICT(step_run_id) DO NOTHING
  `)
    .bind(input.taskId, input.stepId, input.taskType, input.queue.id, input.priority, context, `sha256:${await sha256Hex(context)}`, canonicalJson(input.responseSchema), dueAt, input.expiresAt, input.at, input.runId);
}

/** Closes the open task of a step when its wait ends: `expired` on timeout, else `completed`. */
export function closeStepTaskStatement(db: D1Database, input: { stepId: string; timedOut: boolean; at: string }): D1PreparedStatement {
  return db
    .prepare(`
    UPDATE human_tasks SET state = CASE WHEN ?2 = 1 THEN 'expired' ELSE 'completed' END, completed_at = ?3, updated_at = ?3
    WHERE step_run_id = ?1 AND state IN ('open', 'claimed')
  `)
    .bind(input.stepId, input.timedOut ? 1 : 0, input.at);
}

/** Cancels every open or claimed task of a run (the run was terminated). */
export function cancelRunTasksStatement(db: D1Database, input: { runId: string; at: string }): D1PreparedStatement {
  return db.prepare(`UPDATE human_tasks SET state = 'cancelled', updated_at = ?2 WHERE run_id = ?1 AND state IN ('open', 'claimed')`).bind(input.runId, input.at);
}
