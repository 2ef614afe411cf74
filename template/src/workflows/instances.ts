// A run's Workflows instance. A run may live through several instances (each repair starts a new
// one, `<run id>-r<n>`), so the run row records the current one and this module is the only place
// that finds it: every signal to a run (events, approvals, deliveries) and every stop goes here.
import { isInstanceNotLive } from "../lib/workflows";

/** Host-internal: the run's current instance id (null for an unknown run). */
export async function runInstanceIdUnsafe(db: D1Database, runId: string): Promise<string | null> {
  const row = await db.prepare(`SELECT instance_id AS instanceId FROM workflow_runs WHERE id = ?1`).bind(runId).first<{ instanceId: string | null }>();
  return row ? (row.instanceId ?? runId) : null;
}

/**
 * Signals the run's current instance. Returns false when that instance is not live (the run is in
 * repair, finished, or not dispatched yet): the signal's record in D1 is read when the run resumes
 * (a repair re-signals the waits whose event was recorded).
 */
export async function signalRun(env: Env, runId: string, event: { type: string; payload: Record<string, unknown> }, knownInstanceId?: string): Promise<boolean> {
  const instanceId = knownInstanceId ?? (await runInstanceIdUnsafe(env.DB, runId));
  if (!instanceId) return false;
  try {
    await (await env.WORKFLOWS.get(instanceId)).sendEvent(event);
    return true;
  } catch (error) {
    if (isInstanceNotLive(error)) return false;
    throw error;
  }
}

/** Stops an instance; one that already ended, errored or never started is fine (the run row is authoritative). */
export async function stopInstance(env: Env, instanceId: string): Promise<void> {
  try {
    const instance = await env.WORKFLOWS.get(instanceId);
    const { status } = await instance.status();
    if (status === "complete" || status === "errored" || status === "terminated") return;
    await instance.terminate();
  } catch (error) {
    if (!isInstanceNotLive(error)) throw error;
  }
}

/** Stops the run's current instance. */
export async function stopRunInstance(env: Env, runId: string): Promise<void> {
  const instanceId = await runInstanceIdUnsafe(env.DB, runId);
  if (instanceId) await stopInstance(env, instanceId);
}
