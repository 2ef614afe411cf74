// The BACKTESTS queue consumer: a durable backtest's chunk of reports becomes shadow runs.
import type { Actor } from "../auth";
import { getReportRow, reportSummary } from "../cases";
import { errorCode } from "../errors";
import { markChunkDone, startChunk } from "./backtest-chunks";
import { forEachBounded, withDeadline, yieldToRuntime } from "../lib/queue-work";
import { createRun } from "../workflows";

/** Runs dispatched at once: each loads the version's sandbox and creates a Workflows instance. */
const BACKTEST_PARALLEL = 4;
/** One run's creation and dispatch; past it the message is retried (creation is idempotent per report). */
const RUN_DEADLINE_MS = 60_000;

export interface BacktestMessage {
  backtestId: string;
  installationId: string;
  actorKeyId: string;
  reportIds: string[];
  /** The chunk's row in backtest_chunks (absent in messages queued before migration 0029). */
  seq?: number;
}

/**
 * Queue consumer: starts the shadow runs of each chunk (idempotent per backtest and report), a few
 * at a time, and acks or retries each message as soon as its chunk is done. Every run is bounded
 * by a deadline and followed by a yield to the runtime (src/lib/queue-work.ts says why: a consumer
 * that chained all of its runs without one starved `wrangler dev`'s event loop for the whole
 * invocation, which held API requests back and, through Miniflare's broker, stopped the queue for
 * good: a 400-report backtest stopped at 200).
 */
export async function consumeBacktests(batch: MessageBatch<BacktestMessage>, env: Env, ctx: ExecutionContext): Promise<void> {
  for (const message of batch.messages) {
    const { backtestId, installationId, actorKeyId, reportIds } = message.body;
    const backtest = await env.DB.prepare(`SELECT workflow_version_id AS versionId FROM backtests WHERE id = ?1 AND installation_id = ?2`).bind(backtestId, installationId).first<{ versionId: string }>();
    if (!backtest) {
      message.ack();
      continue;
    }
    const actor: Actor = { installationId, scopes: [], audit: { type: "api_key", id: actorKeyId } };
    let failed = false;
    const { beat } = await startChunk(env, message.body);
    await forEachBounded(reportIds, BACKTEST_PARALLEL, async (reportId) => {
      try {
        await withDeadline(startShadowRun(env, ctx, actor, backtest.versionId, backtestId, reportId), RUN_DEADLINE_MS);
      } catch (error) {
        console.error("backtest_run_failed", errorCode(error));
        failed = true;
      }
      await beat();
    });
    // A repeat redoes nothing: each run is keyed by backtest and report.
    if (failed) message.retry({ delaySeconds: 5 });
    else {
      await markChunkDone(env, message.body);
      message.ack();
    }
  }
  // The loop drains once more before the batch is reported done.
  await yieldToRuntime();
}

async function startShadowRun(env: Env, ctx: ExecutionContext, actor: Actor, workflowVersionId: string, backtestId: string, reportId: string): Promise<void> {
  const row = await getReportRow(env.DB, actor.installationId, reportId);
  if (!row) return;
  const { caseReportCount: _count, ...report } = reportSummary(row);
  await createRun(env, ctx, actor, {
    workflowVersionId,
    authorityMode: "shadow",
    input: { report },
    reportId,
    backtestId,
    idempotencyKey: `backtest:${backtestId}:${reportId}`,
  });
}
