// Starting a run's Workflows instance: dispatch (bounded, "already exists" counts as started),
// admission at Workflows' creation rate (a refused create is deferred with a backoff and tried
// again from the RUN_OPERATIONS queue), and the sweep that dispatches runs left pending.
import { auditStatement } from "../audit";
import { AppError, errorCode } from "../errors";
import { withDeadline } from "../lib/queue-work";
import { isCreateRateLimited, isInstanceAlreadyExists } from "../lib/workflows";
import { startDynamicWorkflow } from "./loader";
import { getRunRow, type RunRow } from "./runs-queries";
import type { WorkflowAuthorityMode } from "./types";

/** How long starting an instance may take (sandbox load, its start(), the Workflows create). */
export const DISPATCH_DEADLINE_MS = 30_000;

/**
 * Creates the run's current instance (`instance_id`, set at creation and by each repair), then
 * marks it queued. The start is bounded: past DISPATCH_DEADLINE_MS the run stays `dispatch_pending`
 * and the caller gets the retryable `run.dispatch_failed` (a repeat, or the dispatch sweep, finds
 * the instance if it did start: its id is fixed, and "already exists" counts as started).
 * A create refused for Workflows' creation rate or an overload is not a failure: the run stays
 * `dispatch_pending` and is admitted later (deferDispatch), and dispatchRun returns "deferred". A
 * run that moved on since the caller read it (startInstance) is "moved_on", and nothing is written.
 */
export async function dispatchRun(env: Env, ctx: ExecutionContext, run: RunRow, start: StartInstance = startDynamicWorkflow): Promise<"started" | "exists" | "deferred" | "moved_on"> {
  const outcome = await startInstance(env, ctx, run, start);
  if (outcome !== "started" && outcome !== "exists") return outcome;
  await env.DB.prepare(`UPDATE workflow_runs SET state = 'queued', updated_at = ?2, revision = revision + 1
    WHERE id = ?1 AND state IN ('created', 'dispatch_pending') AND COALESCE(instance_id, id) = ?3`)
    .bind(run.id, new Date().toISOString(), run.instanceId)
    .run();
  return outcome;
}

/**
 * Creates the run's current instance, bounded, and writes nothing when it started: "already exists"
 * counts as started, a create refused for the rate is deferred (deferDispatch), a create the
 * sandbox's binding refused because the run is no longer dispatching (its instance took its first
 * step, or the run ended, since the caller read it) is "moved_on", any other failure is the
 * retryable 503 `run.dispatch_failed`; an instance found already there is "exists". The run stays
 * `dispatch_pending` until its instance's first step moves it on (to `running`), or the dispatch
 * sweep, finding it there after its grace, starts it again (an instance found there is marked
 * queued, not counted or audited as redispatched: it was slow to start, not lost): createRun starts a new
 * run so, with no statement of its own after the create. `versionLive`: the caller read in this
 * request that the run's version is live and names the run's artifact (createRun), so the
 * artifact's row may come from the isolate.
 */
export async function startInstance(env: Env, ctx: ExecutionContext, run: RunRow, start: StartInstance = startDynamicWorkflow, versionLive = false): Promise<"started" | "exists" | "deferred" | "moved_on"> {
  try {
    await withDeadline(
      start(env, ctx, {
        artifactId: run.artifactId,
        workflowVersionId: run.workflowVersionId,
        instanceId: run.instanceId,
        runId: run.id,
        authorityMode: run.authorityMode as WorkflowAuthorityMode,
        ...(versionLive ? { live: { installationId: run.installationId } } : {}),
      }),
      DISPATCH_DEADLINE_MS,
      () => new Error(`the instance did not start within ${DISPATCH_DEADLINE_MS} ms`),
    );
  } catch (error) {
    // A replay after a lost response (or a sweep after a slow first step) finds the instance already there: that is a success.
    if (isInstanceAlreadyExists(error)) return "exists";
    if (error instanceof AppError) throw error;
    if (isCreateRateLimited(error)) {
      await deferDispatch(env, run);
      return "deferred";
    }
    if (errorCode(error) === "runtime.instance_denied" && !(await stillDispatching(env.DB, run))) return "moved_on";
    console.error("run_dispatch_failed", run.id, error instanceof Error ? error.message.slice(0, 300) : typeof error);
    throw new AppError("run.dispatch_failed", "The run was recorded but could not be started; retry with the same Idempotency-Key.", { status: 503, retryable: true });
  }
  return "started";
}

/** Whether the run is still where a dispatch finds it: created or dispatch_pending, with this instance. */
async function stillDispatching(db: D1Database, run: RunRow): Promise<boolean> {
  const row = await db.prepare(`SELECT 1 AS x FROM workflow_runs WHERE id = ?1 AND state IN ('created', 'dispatch_pending') AND COALESCE(instance_id, id) = ?2`).bind(run.id, run.instanceId).first();
  return row !== null;
}

/** What starts a run's Workflows instance (the sandbox's kernel, through the loader); a parameter so admission can be tested with a refusing one. */
export type StartInstance = typeof startDynamicWorkflow;

/** The first wait after a refused create, doubled per refusal up to DISPATCH_BACKOFF_MAX_S. */
export const DISPATCH_BACKOFF_BASE_S = 1;
export const DISPATCH_BACKOFF_MAX_S = 300;

/** The backoff before try `attempts + 1`: base × 2^attempts, capped, with up to a quarter of jitter so a storm spreads out. */
export function dispatchBackoffSeconds(attempts: number): number {
  const base = Math.min(DISPATCH_BACKOFF_MAX_S, DISPATCH_BACKOFF_BASE_S * 2 ** Math.min(attempts, 16));
  return Math.ceil(base + Math.random() * base * 0.25);
}

/**
 * A create refused for the rate: the run stays `dispatch_pending`, its refusals are counted and its
 * next try is due after the backoff (`dispatch_after`); a RUN_OPERATIONS message delayed by the
 * backoff carries the try (consumeRunOperations → admitDeferredRun). Should the message be lost, the
 * dispatch sweep takes the run once it is due. Logged as `run.dispatch_deferred` (ids and counts).
 */
async function deferDispatch(env: Env, run: RunRow): Promise<void> {
  const row = await env.DB.prepare(`SELECT dispatch_attempts AS attempts FROM workflow_runs WHERE id = ?1`).bind(run.id).first<{ attempts: number }>();
  const attempts = row?.attempts ?? 0;
  const delaySeconds = dispatchBackoffSeconds(attempts);
  const after = new Date(Date.now() + delaySeconds * 1000).toISOString();
  await env.DB.prepare(`UPDATE workflow_runs SET dispatch_attempts = dispatch_attempts + 1, dispatch_after = ?2
    WHERE id = ?1 AND state IN ('created', 'dispatch_pending') AND COALESCE(instance_id, id) = ?3`)
    .bind(run.id, after, run.instanceId)
    .run();
  console.log(JSON.stringify({ event: "run.dispatch_deferred", runId: run.id, attempts: attempts + 1, delaySeconds }));
  await env.RUN_OPERATIONS.send({ dispatchRunId: run.id, installationId: run.installationId }, { delaySeconds });
}

/**
 * A deferred run's try (the RUN_OPERATIONS message deferDispatch sent): dispatched if it is still
 * pending and due; a message overtaken by a later refusal (the run not due yet) or by a start
 * (no longer pending) does nothing. Returns what it did.
 */
export async function admitDeferredRun(env: Env, ctx: ExecutionContext, installationId: string, runId: string, start: StartInstance = startDynamicWorkflow): Promise<"started" | "deferred" | "not_due" | "not_pending"> {
  const run = await getRunRow(env.DB, installationId, runId);
  if (run?.state !== "dispatch_pending" && run?.state !== "created") return "not_pending";
  const due = await env.DB.prepare(`SELECT dispatch_after AS after FROM workflow_runs WHERE id = ?1`).bind(runId).first<{ after: string | null }>();
  // A second of slack: a queue delay is whole seconds, the backoff was rounded up to them.
  if (due?.after && due.after > new Date(Date.now() + 1_000).toISOString()) return "not_due";
  const outcome = await dispatchRun(env, ctx, run, start);
  return outcome === "moved_on" ? "not_pending" : outcome === "exists" ? "started" : outcome;
}

/**
 * The dispatch sweep's selection (?1 cutoff, ?2 limit); exported for the bench's query plan. A run
 * deferred for the creation rate is taken only once due, with the same grace (its queue message
 * normally admits it first).
 */
export const PENDING_DISPATCH_SQL = `SELECT id, installation_id AS installationId FROM workflow_runs
  WHERE state IN ('created', 'dispatch_pending') AND updated_at < ?1 AND (dispatch_after IS NULL OR dispatch_after < ?1) ORDER BY updated_at LIMIT ?2`;

/** A dispatch younger than this may still be in flight in its request; the sweep leaves it alone. */
export const REDISPATCH_GRACE_MS = 60_000;

/**
 * The dispatch sweep (on the schedule; bounded, idempotent): runs left `dispatch_pending` (their
 * instance failed to start and nobody repeated the request) are dispatched again, oldest first,
 * through the same `dispatchRun` as createRun. An instance that already exists counts as started,
 * so a run dispatched twice has one instance; a run that fails again stays pending for the next run.
 */
export async function redispatchPendingRuns(
  env: Env,
  ctx: ExecutionContext,
  now: Date = new Date(),
  limit = 25,
  start: StartInstance = startDynamicWorkflow,
): Promise<{ redispatched: number; failed: number; deferred: number; more: number }> {
  const { results } = await env.DB.prepare(PENDING_DISPATCH_SQL)
    .bind(new Date(now.getTime() - REDISPATCH_GRACE_MS).toISOString(), limit)
    .all<{ id: string; installationId: string }>();
  const summary = { redispatched: 0, failed: 0, deferred: 0, more: results.length === limit ? 1 : 0 };
  for (const { id, installationId } of results) {
    const run = await getRunRow(env.DB, installationId, id);
    if (run?.state !== "dispatch_pending" && run?.state !== "created") continue;
    const at = new Date().toISOString();
    try {
      const outcome = await dispatchRun(env, ctx, run, start);
      if (outcome === "deferred") {
        // Refused for the rate: its backoff and queue message are set; the rest of this run (and further slices) would be refused too.
        summary.deferred += 1;
        summary.more = 0;
        break;
      }
      // Its instance took its first step (or the run ended) since it was read, or it was there all
      // along and has not taken its first step yet (a slow start, marked queued): nothing was dispatched.
      if (outcome === "moved_on" || outcome === "exists") continue;
      summary.redispatched += 1;
      await auditStatement(env.DB, {
        installationId,
        idempotencyKey: `run:${id}:redispatched`,
        action: "workflow.run_redispatched",
        actor: { type: "system", id: "schedule" },
        target: { type: "workflow_run", id },
        details: { pendingSince: run.updatedAt },
        at,
      }).run();
    } catch (error) {
      summary.failed += 1;
      // To the back of the line, so runs that keep failing do not hold up the others.
      console.error(JSON.stringify({ event: "run.redispatch_failed", runId: id, code: errorCode(error) }));
      await env.DB.prepare(`UPDATE workflow_runs SET updated_at = ?2 WHERE id = ?1 AND state IN ('created', 'dispatch_pending')`).bind(id, at).run();
    }
  }
  return summary;
}
