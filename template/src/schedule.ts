// The Worker looks after itself: one Cron Trigger (wrangler.jsonc `triggers.crons`, every minute)
// calls `runSchedule`, which runs every sweep listed in SWEEPS. Locally, where Miniflare fires no
// crons, scripts/local-cron.mjs calls the same handler every minute (npm start, the smoke harness,
// the bench); tests call the Worker's `scheduled` handler directly.
//
// Adding a sweep: export an async function `(env, now) => summary` from your domain's index.ts and
// add one entry below. A sweep must be bounded (a fixed amount of work per run; the next run goes
// on) and idempotent (running it twice, or concurrently, does no harm). Its summary is a small
// object of counts: it is logged as is, so it must never hold secrets or personal data.
import { sweepAuditChains } from "./audit";
import { sealLegacyTaskContexts } from "./cases";
import { sweepPendingDeliveries } from "./enforcement";
import { errorCode } from "./errors";
import { sweepMetricRollups } from "./metrics";
import { sealLegacyStepOutputs } from "./workflows";

export interface Sweep {
  /** `domain.what`, as it appears in the run summary. */
  name: string;
  run(env: Env, now: Date): Promise<Record<string, number>>;
}

/** THE list of sweeps, run in this order on every scheduled event. */
export const SWEEPS: readonly Sweep[] = [
  { name: "enforcement.outbox", run: (env, now) => sweepPendingDeliveries(env, now) },
  { name: "audit.seal_and_verify", run: async (env) => ({ ...(await sweepAuditChains(env)) }) },
  // Migration 0007: rows written in plaintext before content sealing (a no-op once none are left).
  { name: "cases.seal_legacy_task_contexts", run: (env) => sealLegacyTaskContexts(env, 200) },
  { name: "workflows.seal_legacy_step_outputs", run: (env) => sealLegacyStepOutputs(env, 200) },
  // Issue 13 §5: the complete hours not yet rolled up (at most 48 per run), last so it sees what the others did.
  { name: "metrics.rollup", run: (env, now) => sweepMetricRollups(env, now) },
];

export interface SweepResult {
  name: string;
  ok: boolean;
  ms: number;
  summary?: Record<string, number>;
  error?: string;
}

export interface ScheduleRun {
  cron: string;
  scheduledTime: string;
  ok: boolean;
  sweeps: SweepResult[];
}

/**
 * Runs every sweep, one after the other; one that throws is recorded (its error code only) and
 * the others still run. Logs one `schedule.run` line with the summary.
 */
export async function runSchedule(env: Env, event: { cron: string; scheduledTime: number }, sweeps: readonly Sweep[] = SWEEPS): Promise<ScheduleRun> {
  const now = new Date(event.scheduledTime);
  const results: SweepResult[] = [];
  for (const sweep of sweeps) {
    const started = Date.now();
    try {
      const summary = await sweep.run(env, now);
      results.push({ name: sweep.name, ok: true, ms: Date.now() - started, summary });
    } catch (error) {
      results.push({ name: sweep.name, ok: false, ms: Date.now() - started, error: errorCode(error) });
    }
  }
  const run: ScheduleRun = { cron: event.cron, scheduledTime: now.toISOString(), ok: results.every((r) => r.ok), sweeps: results };
  (run.ok ? console.log : console.error)(JSON.stringify({ event: "schedule.run", ...run }));
  return run;
}
