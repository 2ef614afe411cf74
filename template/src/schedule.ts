// The Worker looks after itself: one Cron Trigger (wrangler.jsonc `triggers.crons`, every minute)
// calls `runSchedule`, which runs every sweep listed in SWEEPS. Locally, where Miniflare fires no
// crons, scripts/local-cron.mjs calls the same handler every minute (npm start, the smoke harness,
// the bench); tests call the Worker's `scheduled` handler directly.
//
// Adding a sweep: export an async function `(env, now, ctx?) => summary` from your domain's index.ts and
// add one entry below. A sweep must be bounded (a fixed amount of work per call, a slice) and
// idempotent (running it twice, or concurrently, does no harm). A sweep whose backlog can outgrow
// one slice a minute says so (`more`): after every sweep ran once, the schedule runs those with
// more again, in turn, while the invocation's time budget lasts (see runSchedule), so the work
// done per minute grows with the backlog instead of staying at one slice. Its summary is a small
// object of counts: it is logged as is, so it must never hold secrets or personal data. Each run's
// results are recorded in sweep_runs (operations/sweep-runs.ts), where the metrics read them.
import { sweepAccountLadders, sweepBulkActions } from "./accounts";
// Not through accounts/index.ts: the notices reach enforcement (deliveries), which imports it.
import { sweepAccountNotices } from "./accounts/notices";
import { sweepAuditChains, sweepAuditSegments } from "./audit";
import { sweepLostBacktestChunks } from "./automation";
import { sealLegacyTaskContexts, sweepLapsedLeases } from "./cases";
// Not through cases/index.ts: the demotion sweep reaches enforcement and automation, which import it.
import { sweepAutomaticDemotions } from "./cases/promotion/promotion-sweep";
// Not through cases/index.ts either: retention reaches enforcement and workflows, which import it.
import { queueCaseArchive } from "./cases/archive/case-archive";
import { sweepRetention } from "./cases/retention/retention";
import { indexPersonKeys } from "./cases/retention/retention-people";
import { sweepExposureFolds } from "./cases/wellness/exposure-fold";
import { sweepUnlistedTerms } from "./cases/search/terms-listing";
import { sweepExpiredLabels, sweepOldSamples } from "./detection";
import { sweepComplaintOutcomes, sweepCyberTipline, sweepDeliveryArchive, sweepErasingDeliveries, sweepPendingDeliveries, sweepTransparencyDb } from "./enforcement";
import { errorCode } from "./errors";
import { countingD1 } from "./lib/d1-count";
import { yieldToRuntime } from "./lib/queue-work";
import { sweepHashExchanges } from "./media";
import { sweepMetricRollups, sweepTransparencyRollups } from "./metrics";
import { recordSweepRuns, sweepAlerts } from "./operations";
import { getStorageSettings, redispatchPendingRuns, sealLegacyStepOutputs, sweepExpiredWaits, queueRunArchive, sweepStalledRuns } from "./workflows";

export interface Sweep {
  /** `domain.what`, as it appears in the run summary. */
  name: string;
  /** `ctx` is the scheduled event's (absent when a test calls runSchedule without one). */
  run(env: Env, now: Date, ctx?: ExecutionContext): Promise<Record<string, number>>;
  /**
   * Whether a slice's summary says work is left that another slice would take now. Absent: the
   * summary's own `more` (1 when the slice stopped at its bound). A sweep is repeated only if it has this.
   */
  more?: (summary: Record<string, number>) => boolean;
}

const summaryMore = (summary: Record<string, number>) => summary.more === 1;

/** THE list of sweeps, run in this order on every scheduled event. */
export const SWEEPS: readonly Sweep[] = [
  // Lapsed leases back in their queue: state open, no claimant (task.lease_lapsed).
  { name: "cases.lapsed_leases", run: (env, now) => sweepLapsedLeases(env, now) },
  // Entity labels past their expiry (reads already ignore them), deleted a slice at a time.
  { name: "detection.expired_labels", run: (env, now) => sweepExpiredLabels(env, now), more: summaryMore },
  // Sampled events past their 30 days, deleted a slice per installation at a time.
  { name: "detection.old_samples", run: (env, now) => sweepOldSamples(env, now), more: summaryMore },
  // Runs left dispatch_pending are dispatched again (starting an instance needs the event's ctx).
  // Repeated while a full slice left more (a slice stops at the first create refused for the rate).
  { name: "workflows.redispatch", run: async (env, now, ctx) => (ctx ? redispatchPendingRuns(env, ctx, now) : { redispatched: 0, failed: 0, skipped: 1 }), more: summaryMore },
  // Waits past their deadline that the engine missed: the deadline recorded, the run signalled.
  // Backtest chunks whose queue message was lost, sent again (a running backtest never waits on a message that is gone).
  { name: "automation.backtest_chunks", run: (env, now) => sweepLostBacktestChunks(env, now) },
  { name: "workflows.expired_waits", run: (env, now) => sweepExpiredWaits(env, now) },
  // Runs with no progress past their node's timeout (or their wait's deadline): workflow.run_stalled.
  { name: "workflows.stalled_runs", run: (env, now) => sweepStalledRuns(env, now) },
  // DSA Art. 20(5): decided appeals whose outcome message was lost after the decision (before the outbox, which sends it).
  { name: "enforcement.complaint_outcomes", run: (env, now) => sweepComplaintOutcomes(env, now) },
  { name: "enforcement.outbox", run: (env, now) => sweepPendingDeliveries(env, now) },
  // Settled deliveries past their hour (at once with a 0-day window): sealed payload and attempts
  // into one R2 object each, out of D1 (50 a slice; repeated while the backlog lasts).
  { name: "enforcement.delivery_archive", run: (env, now) => sweepDeliveryArchive(env, now), more: summaryMore },
  // Moved deliveries an erasure marked and did not finish (the step after its batch failed): their objects get the tombstone.
  { name: "enforcement.delivery_erasures", run: async (env) => ({ ...(await sweepErasingDeliveries(env)) }), more: summaryMore },
  // Accounts whose strikes changed without a settle (workflow decisions, appeals decided in review
  // tasks): their ladder settled; sanctions reached but not started get their action's run (needs ctx).
  { name: "accounts.ladders", run: (env, now, ctx) => sweepAccountLadders(env, now, ctx), more: summaryMore },
  // Sanctions walked back and strikes expired: account.sanction_reversed / account.strike_expired to the product.
  { name: "accounts.notices", run: (env, now) => sweepAccountNotices(env, now), more: summaryMore },
  // Running bulk actions: the next slice of each one's runs (rate-limited by the slice; resumable, a started run replays).
  { name: "accounts.bulk_actions", run: (env, now, ctx) => sweepBulkActions(env, now, ctx), more: summaryMore },
  // Restricting decisions' statements of reasons to the DSA Transparency Database (5 batches of 100 per run).
  { name: "enforcement.transparency_db", run: (env, now) => sweepTransparencyDb(env, now), more: summaryMore },
  // CyberTipline submissions whose pass failed, resumed where they stopped once their backoff ends (10 a run);
  // the preserved files of those whose preservation hold is over (ran out, or released by an admin) erased.
  { name: "enforcement.cybertipline", run: (env, now) => sweepCyberTipline(env, now), more: summaryMore },
  // Also the one writer of each installation's R2 anchor (the seals after writes only mark it due).
  { name: "audit.seal_and_verify", run: async (env) => ({ ...(await sweepAuditChains(env)) }), more: summaryMore },
  // Sealed, checkpointed events older than the hot window out of D1 into R2 segments (20,000 a run).
  // Each installation's hot window (PUT /storage/settings; 7 days unless set) holds its audit events in D1 too.
  { name: "audit.segments", run: async (env, now) => ({ ...(await sweepAuditSegments(env, now, { hotDaysFor: async (id) => (await getStorageSettings(env.DB, id)).hotDays })) }), more: summaryMore },
  // Hash banks following an exchange: due follows pulled a few pages each from their cursors, and
  // the index rows of ended follows deleted a slice at a time. Repeated while pages or follows are left.
  { name: "media.hash_exchanges", run: (env, now) => sweepHashExchanges(env, now), more: summaryMore },
  // After the audit sweep, so a broken chain it found is alerted in the same run.
  { name: "operations.alerts", run: (env, now) => sweepAlerts(env, now) },
  // Autonomous triggers whose live overturn rate passed their limit drop to assisted (automation.demoted).
  { name: "cases.automatic_demotions", run: (env, now) => sweepAutomaticDemotions(env, now) },
  // Migration 0007: rows written in plaintext before content sealing (a no-op once none are left).
  { name: "cases.seal_legacy_task_contexts", run: (env) => sealLegacyTaskContexts(env, 200) },
  { name: "workflows.seal_legacy_step_outputs", run: (env) => sealLegacyStepOutputs(env, 200) },
  // The personal data of closed cases past the installation's retention period (retention.personal_data_erased),
  // and the person index of rows written before it (a no-op once none are left).
  // Its summary has no `more`: another slice is worth it while the last one erased something (the one after the backlog erases nothing).
  { name: "cases.retention", run: (env, now) => sweepRetention(env, now), more: (summary) => (summary.installations ?? 0) > 0 },
  { name: "cases.index_person_keys", run: async (env) => ({ ...(await indexPersonKeys(env, 200)) }) },
  // Reports a worker older than reports.search_terms wrote after its migration: their lists of terms (a no-op once none are left).
  // Reviewers' claims that ended with their task, folded into the task's row (500 tasks a slice).
  { name: "cases.fold_exposure", run: async (env, now) => ({ ...(await sweepExposureFolds(env, now)) }), more: summaryMore },
  { name: "cases.list_search_terms", run: async (env) => ({ ...(await sweepUnlistedTerms(env)) }), more: summaryMore },
  // Ended runs past their installation's hot window: handed to the RUN_OPERATIONS queue (500 a run), whose
  // consumer moves each one's child rows into one R2 object and out of D1.
  { name: "workflows.archive_runs", run: (env, now) => queueRunArchive(env, now), more: summaryMore },
  // The complete hours not yet rolled up (at most 48 per run), last so it sees what the others did.
  { name: "metrics.rollup", run: (env, now) => sweepMetricRollups(env, now), more: summaryMore },
  // The complete days not yet rolled up for the transparency report (30 per run), from each installation's creation on.
  { name: "metrics.transparency_rollup", run: (env, now) => sweepTransparencyRollups(env, now), more: summaryMore },
  // Closed cases past their installation's hot window whose runs are archived: handed to the
  // RUN_OPERATIONS queue (500 a run), whose consumer moves every row of each into one R2 object and
  // out of D1. After the rollups, which must have counted them first.
  { name: "cases.archive", run: (env, now) => queueCaseArchive(env, now), more: summaryMore },
];

export interface SweepResult {
  name: string;
  ok: boolean;
  ms: number;
  /** The slices' summaries added up; a repeatable sweep's also carries `slices` and `more` (of its last slice). */
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
 * Wall-clock time one scheduled invocation spends on further slices of sweeps with a backlog:
 * the cron fires every minute, so half of it leaves the next invocation a quiet start.
 */
export const SCHEDULE_BUDGET_MS = 30_000;
/** At most this many slices of one sweep per invocation (keeps its subrequests bounded). */
export const MAX_SLICES = 10;
/**
 * D1 queries (lib/d1-count.ts) past which no further slice starts: Workers Paid allows 1,000 per
 * invocation, and the first pass over every sweep is not held back, so this leaves it room.
 */
export const SCHEDULE_QUERY_BUDGET = 700;

function addSummary(into: Record<string, number>, slice: Record<string, number>): void {
  for (const [key, value] of Object.entries(slice)) into[key] = key === "more" ? value : (into[key] ?? 0) + value;
}

/**
 * Runs every sweep once, one after the other; one that throws is recorded (its error code only)
 * and the others still run. Then, while `budgetMs` from the start lasts, it runs again, in turn,
 * each repeatable sweep whose last slice left more (and that did not throw), up to MAX_SLICES
 * each; a slice is not started unless one as long as the sweep's longest so far still fits in
 * the time, and one with as many D1 queries as its largest so far in the query budget.
 * Logs one `schedule.run` line with the summary.
 */
export async function runSchedule(env: Env, event: { cron: string; scheduledTime: number }, sweeps: readonly Sweep[] = SWEEPS, ctx?: ExecutionContext, options: { budgetMs?: number; queryBudget?: number } = {}): Promise<ScheduleRun> {
  const now = new Date(event.scheduledTime);
  const deadline = Date.now() + (options.budgetMs ?? SCHEDULE_BUDGET_MS);
  const queryBudget = options.queryBudget ?? SCHEDULE_QUERY_BUDGET;
  const used = { queries: 0 };
  const counted: Env = { ...env, DB: countingD1(env.DB, used) };
  const results: SweepResult[] = [];
  const slices = new Map<Sweep, { result: SweepResult; count: number; longest: number; queries: number; more: boolean }>();
  const runSlice = async (sweep: Sweep, result?: SweepResult): Promise<SweepResult> => {
    const started = Date.now();
    const queriesBefore = used.queries;
    let outcome: SweepResult;
    try {
      const summary = await sweep.run(counted, now, ctx);
      if (!result) outcome = { name: sweep.name, ok: true, ms: Date.now() - started, summary: { ...summary } };
      else {
        outcome = result;
        addSummary(outcome.summary!, summary);
        outcome.ms += Date.now() - started;
      }
      if (sweep.more) {
        const state = slices.get(sweep) ?? { result: outcome, count: 0, longest: 0, queries: 0, more: false };
        state.count += 1;
        state.longest = Math.max(state.longest, Date.now() - started);
        state.queries = Math.max(state.queries, used.queries - queriesBefore);
        state.more = sweep.more(summary);
        slices.set(sweep, state);
        outcome.summary!.slices = state.count;
        outcome.summary!.more = state.more ? 1 : 0;
      }
    } catch (error) {
      if (result) {
        // A later slice failed: what the earlier ones did stands; no more slices of it this run.
        result.ok = false;
        result.error = errorCode(error);
        result.ms += Date.now() - started;
        const state = slices.get(sweep);
        if (state) state.more = false;
        outcome = result;
      } else outcome = { name: sweep.name, ok: false, ms: Date.now() - started, error: errorCode(error) };
    }
    // Between sweeps the runtime reads its sockets (lib/queue-work.ts says why): the schedule's
    // chain of in-process D1 calls must not hold requests back for its whole run.
    await yieldToRuntime();
    return outcome;
  };
  for (const sweep of sweeps) results.push(await runSlice(sweep));
  // The backlog pass: round-robin over the sweeps that left more, while the budget lasts.
  for (;;) {
    let ran = false;
    for (const [sweep, state] of slices) {
      if (!state.more || state.count >= MAX_SLICES || Date.now() + state.longest > deadline || used.queries + state.queries > queryBudget) continue;
      await runSlice(sweep, state.result);
      ran = true;
    }
    if (!ran) break;
  }
  try {
    await recordSweepRuns(env, now, results);
  } catch (error) {
    results.push({ name: "operations.record_sweep_runs", ok: false, ms: 0, error: errorCode(error) });
  }
  const run: ScheduleRun = { cron: event.cron, scheduledTime: now.toISOString(), ok: results.every((r) => r.ok), sweeps: results };
  (run.ok ? console.log : console.error)(JSON.stringify({ event: "schedule.run", ...run }));
  return run;
}
