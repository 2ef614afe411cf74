// A fused group's records on the host: what each node's step leaves (NodeRecord), the group's
// batch with the run moved once (groupBatch), and the write guards that fail such a batch whole
// when a step it records finished meanwhile or its run is no longer live. Shared by the fused
// groups (runtime-fused.ts) and the walks past a wait or an action (runtime-ahead.ts).
import type { AuthorizedRun } from "./runtime-authorize";
import { stepUpsert, type StepUpsertInput } from "./runtime-records";
import type { StepUpsertGuard } from "./step-upserts";
import type { WorkflowNodeV1 } from "./types";

/** The run's latest event (the `event` a node reads) as one JSON value over the run ?1, folded into the run's own statement. */
export const LATEST_EVENT_JSON_SQL = `(SELECT json_object('id', e.id, 'type', e.type, 'payloadJson', e.payload_json, 'createdAt', e.created_at)
  FROM workflow_events e WHERE e.run_id = ?1 ORDER BY e.created_at DESC LIMIT 1)`;

export type EventRow = { id: string; type: string; payloadJson: string; createdAt: string };

/** One node's records, in the order recordStepResult writes them; the run's progress goes in once per batch. */
export interface NodeRecord {
  node: WorkflowNodeV1;
  stepId: string;
  at: string;
  /** GroupStart's priorSteps. */
  priorSteps: number;
  /** The node's step row with its output (its upsert heads the record; the group's first carries the write guard). */
  step: StepUpsertInput;
  tail: D1PreparedStatement[];
}

/**
 * The group's batch. One step per node moves the run on once per node (state, node, revision);
 * here that is one statement with the same final effect, where the last node's would be.
 */
export function groupBatch(db: D1Database, run: AuthorizedRun, records: NodeRecord[], options: { progress?: boolean; guard?: boolean } = {}): D1PreparedStatement[] {
  if (records.length === 0) return [];
  const last = records.at(-1)!;
  const progress = db
    .prepare(`
    UPDATE workflow_runs SET state = 'running', current_node_id = ?2, started_at = COALESCE(started_at, ?3), waiting_at = NULL,
      updated_at = ?4, revision = revision + ?5
    WHERE id = ?1 AND state IN ('created', 'dispatch_pending', 'queued', 'running', 'waiting')`)
    .bind(run.id, last.node.id, records[0]!.at, last.at, last.priorSteps + records.length);
  // The first statement (the first node's step row) evaluates the write guard before it writes,
  // unless the caller put it on a step row written ahead of the group's (groupGuard).
  const guard = options.guard === false ? undefined : groupGuard(run, records);
  // An end node's own update moves the run (to succeeded, started_at included): no progress before it.
  // A wait prepared after the group in the same batch moves the run instead (runtime-ahead.ts).
  const moves = last.node.kind === "end" || options.progress === false ? [] : [progress];
  return records.flatMap((record, index) => {
    const step = stepUpsert(db, record.step, index === 0 ? guard : undefined);
    return record === last ? [step, ...moves, ...record.tail] : [step, ...record.tail];
  });
}

/**
 * The group's write guard, for the first step row of its batch: none of its steps (and of
 * `also`, steps recorded ahead of the group in the same batch) finished meanwhile
 * (fusedWriteGuard), and the run still live. A run terminated (or ended) after the group was read
 * gets none of the batch — no step row, and no wait, task or proposal prepared after it that its
 * end could no longer cancel; the call fails, and its retry is refused as the run's other calls are.
 */
export function groupGuard(run: AuthorizedRun, records: readonly NodeRecord[], also: readonly string[] = []): StepUpsertGuard {
  return stepsGuard(run.id, [...also, ...records.map((record) => record.stepId)]);
}

/** Raises (SQLite's json() on malformed text) if a step named in `param`'s `steps` finished or, when it names a `run`, that run is no longer live; else true. */
const STEPS_GUARD_SQL = (param: string) => `(SELECT CASE WHEN EXISTS (SELECT 1 FROM workflow_step_runs WHERE id IN (SELECT value FROM json_each(${param}, '$.steps')) AND state IN ('succeeded', 'failed', 'timed_out'))
        OR (${param} ->> '$.run' IS NOT NULL AND NOT EXISTS (SELECT 1 FROM workflow_runs WHERE id = ${param} ->> '$.run' AND state IN ('created', 'dispatch_pending', 'queued', 'running', 'waiting')))
      THEN json('runtime.fused_group_conflict') ELSE 1 END)`;

/** A step row's guard (stepUpsert, bound as ?12): none of `stepIds` finished and (with `runId`) the run is live. */
export function stepsGuard(runId: string | null, stepIds: readonly string[]): StepUpsertGuard {
  return { sql: STEPS_GUARD_SQL("?12"), bind: JSON.stringify({ run: runId, steps: stepIds }) };
}

/**
 * The group's records are computed from what was recorded when the group was read; if any of its
 * steps finished meanwhile (a concurrent failFused or executeFused of the same group, which only an
 * untrusted sandbox would send), the guard fails the batch — SQLite's json() on malformed text
 * raises, and D1 rolls the whole batch back — so a finished step is never rewritten and a group
 * never records two outcomes. The call then fails, and its retry answers from the records. The
 * group's batch evaluates it in its first statement (groupBatch); this is the guard on its own.
 */
export function fusedWriteGuard(db: D1Database, stepIds: readonly string[]): D1PreparedStatement {
  return db.prepare(`SELECT ${STEPS_GUARD_SQL("?1")} AS conflict`).bind(JSON.stringify({ run: null, steps: stepIds }));
}
