// The workflows domain's sweeps (on the schedule, src/schedule.ts): waits whose deadline the engine
// missed, and runs that stopped making progress. Each is bounded (a LIMIT per run, oldest first)
// and idempotent (what it writes is keyed, and each write holds only on the state it read).
import { auditStatement, canonicalJson } from "../audit";
import { errorCode } from "../errors";
import { signalRunEvent } from "./runs";
import { deadlineEventId } from "./runs-queries";
import type { WorkflowGraphV1 } from "./types";

/** The sweeps' selections, exported for the bench's query plans. Waits past a cutoff (?1), ?2 at most. */
export const EXPIRED_WAITS_SQL = `SELECT w.id, w.run_id AS runId, r.installation_id AS installationId, w.signal_type AS signalType, w.deadline_at AS deadlineAt
  FROM workflow_waits w JOIN workflow_runs r ON r.id = w.run_id
  WHERE w.state = 'waiting' AND w.deadline_at < ?1 AND w.wait_type IN ('event', 'human_task')
  AND r.state IN ('queued', 'running', 'waiting')
  AND NOT EXISTS (SELECT 1 FROM workflow_events e WHERE e.id = w.id || ':deadline')
  ORDER BY w.deadline_at LIMIT ?2`;
/** Live runs whose last update is before ?1 and not yet flagged for it. */
export const STALLED_LIVE_SQL = `SELECT r.id, r.installation_id AS installationId, r.state, r.current_node_id AS currentNodeId, r.updated_at AS updatedAt,
  r.workflow_version_id AS workflowVersionId, v.graph_json AS graphJson
  FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id
  WHERE r.state IN ('queued', 'running') AND r.updated_at < ?1 AND r.stalled_at IS NOT r.updated_at
  ORDER BY r.updated_at LIMIT ?2`;
/** Waiting runs whose wait got its deadline event before ?1 and is still open (a run with two such waits comes twice; the second flag is a no-op). */
export const STALLED_WAITING_SQL = `SELECT r.id, r.installation_id AS installationId, r.state, r.current_node_id AS currentNodeId, r.updated_at AS updatedAt,
  r.workflow_version_id AS workflowVersionId, '' AS graphJson
  FROM workflow_waits w JOIN workflow_runs r ON r.id = w.run_id
  WHERE w.state = 'waiting' AND w.deadline_at < ?1 AND r.state = 'waiting' AND r.stalled_at IS NOT r.updated_at
  AND EXISTS (SELECT 1 FROM workflow_events e WHERE e.id = w.id || ':deadline' AND e.created_at < ?1)
  ORDER BY w.deadline_at LIMIT ?2`;

/** The engine's own timer gets this long past a deadline before the sweep steps in. */
export const WAIT_DEADLINE_GRACE_MS = 60_000;
/** A step's timeout when its node names none (the kernel's default). */
const DEFAULT_STEP_TIMEOUT_SECONDS = 300;
const DEFAULT_STEP_RETRIES = 2;
const SCHEDULE_ACTOR = { type: "system", id: "schedule" } as const;

/**
 * Waits past their deadline (sweep; bounded, idempotent). A wait still `waiting` more than a minute
 * after its deadline was missed by the engine (e.g. a local restart lost its timer): the sweep
 * records the deadline as the wait's event (`<waitId>:deadline`, once) with a
 * `workflow.wait_deadline_passed` audit event, and signals the run, whose completeWait then closes
 * the wait as timed out (its task expired) and leaves by the node's `timeout` port — the same
 * statements as an engine timeout. A wait already given its deadline event is not signalled again.
 */
export async function sweepExpiredWaits(env: Env, now: Date = new Date(), limit = 100): Promise<{ closed: number; failed: number }> {
  const cutoff = new Date(now.getTime() - WAIT_DEADLINE_GRACE_MS).toISOString();
  const { results } = await env.DB.prepare(EXPIRED_WAITS_SQL).bind(cutoff, limit).all<{ id: string; runId: string; installationId: string; signalType: string; deadlineAt: string }>();
  const summary = { closed: 0, failed: 0 };
  const at = now.toISOString();
  for (const wait of results) {
    const eventId = deadlineEventId(wait.id);
    const [recorded] = await env.DB.batch([
      env.DB.prepare(`INSERT INTO workflow_events (id, installation_id, run_id, wait_id, type, payload_json, created_at)
        SELECT ?1, ?2, ?3, ?4, 'workflow.wait_deadline', ?5, ?6
        WHERE NOT EXISTS (SELECT 1 FROM workflow_events WHERE id = ?1) AND EXISTS (SELECT 1 FROM workflow_waits WHERE id = ?4 AND state = 'waiting')`).bind(
        eventId,
        wait.installationId,
        wait.runId,
        wait.id,
        canonicalJson({ deadlineAt: wait.deadlineAt }),
        at,
      ),
      auditStatement(
        env.DB,
        {
          installationId: wait.installationId,
          idempotencyKey: `wait:${wait.id}:deadline_passed`,
          action: "workflow.wait_deadline_passed",
          actor: SCHEDULE_ACTOR,
          target: { type: "workflow_run", id: wait.runId },
          details: { waitId: wait.id, deadlineAt: wait.deadlineAt },
          at,
        },
        { table: "workflow_events", id: eventId },
      ),
    ]);
    if (recorded?.meta.changes !== 1) continue; // another run of the sweep, or the wait just closed
    try {
      await signalRunEvent(env, wait.runId, wait.signalType, eventId);
      summary.closed += 1;
    } catch (error) {
      // The event stays recorded: a later signal (or the run's own timer) still finds it.
      summary.failed += 1;
      console.error(JSON.stringify({ event: "wait.deadline_signal_failed", runId: wait.runId, code: errorCode(error) }));
    }
  }
  return summary;
}

interface StallCandidate {
  id: string;
  installationId: string;
  state: string;
  currentNodeId: string | null;
  updatedAt: string;
  workflowVersionId: string;
  graphJson: string;
}

/** How long a node may go without progress: its timeout times its attempts (the kernel's defaults otherwise). */
function allowanceMs(graphJson: string, nodeId: string | null, cache: Map<string, WorkflowGraphV1>): number {
  let graph = cache.get(graphJson);
  if (!graph) {
    graph = JSON.parse(graphJson) as WorkflowGraphV1;
    cache.set(graphJson, graph);
  }
  const policy = graph.nodes.find((node) => node.id === nodeId)?.timeoutPolicy ?? {};
  return (policy.timeout_seconds ?? DEFAULT_STEP_TIMEOUT_SECONDS) * (1 + (policy.retries ?? DEFAULT_STEP_RETRIES)) * 1_000;
}

/**
 * Runs with no progress (sweep; bounded, idempotent): a `queued` or `running` run whose last
 * update is older than its current node's allowance (timeout × attempts; 300 s × 3 by default), or
 * a `waiting` run whose wait is still open more than a minute past its deadline after the deadline
 * sweep signalled it (the instance is gone or stuck). Each is flagged once per stall: `stalled_at`
 * takes the run's `updated_at` and a `workflow.run_stalled` audit event is written; a run that moves
 * and stalls again is flagged again. A repair (POST /runs/:id/repair) is what resumes it.
 */
export async function sweepStalledRuns(env: Env, now: Date = new Date(), limit = 100): Promise<{ stalled: number; checked: number }> {
  const minimum = new Date(now.getTime() - DEFAULT_STEP_TIMEOUT_SECONDS * 1_000).toISOString();
  const deadline = new Date(now.getTime() - 2 * WAIT_DEADLINE_GRACE_MS).toISOString();
  const [live, waiting] = await env.DB.batch<StallCandidate>([env.DB.prepare(STALLED_LIVE_SQL).bind(minimum, limit), env.DB.prepare(STALLED_WAITING_SQL).bind(deadline, limit)]);
  const cache = new Map<string, WorkflowGraphV1>();
  const stalled = [...(live?.results ?? []).filter((run) => Date.parse(run.updatedAt) + allowanceMs(run.graphJson, run.currentNodeId, cache) < now.getTime()), ...(waiting?.results ?? [])];
  const at = now.toISOString();
  let flagged = 0;
  for (const run of stalled) {
    const [update] = await env.DB.batch([
      env.DB.prepare(`UPDATE workflow_runs SET stalled_at = updated_at WHERE id = ?1 AND updated_at = ?2 AND state = ?3 AND stalled_at IS NOT updated_at`).bind(run.id, run.updatedAt, run.state),
      auditStatement(
        env.DB,
        {
          installationId: run.installationId,
          idempotencyKey: `run:${run.id}:stalled:${run.updatedAt}`,
          action: "workflow.run_stalled",
          actor: SCHEDULE_ACTOR,
          target: { type: "workflow_run", id: run.id },
          details: { state: run.state, nodeId: run.currentNodeId, lastProgressAt: run.updatedAt },
          at,
        },
        { table: "workflow_runs", id: run.id, where: { stalled_at: run.updatedAt } },
      ),
    ]);
    if (update?.meta.changes === 1) flagged += 1;
  }
  return { stalled: flagged, checked: (live?.results.length ?? 0) + (waiting?.results.length ?? 0) };
}
