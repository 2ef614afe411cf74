// The BACKTESTS queue consumer: a durable backtest's chunk of reports becomes shadow runs.
import type { Actor } from "../auth";
import { getReportRow, reportSummary } from "../cases";
import { errorCode } from "../errors";
import { createRun } from "../workflows";

const BACKTEST_PARALLEL = 5;

/** Queue consumer: starts the shadow runs of one chunk (idempotent per backtest and report). */
export async function consumeBacktests(batch: MessageBatch<{ backtestId: string; installationId: string; actorKeyId: string; reportIds: string[] }>, env: Env, ctx: ExecutionContext): Promise<void> {
  for (const message of batch.messages) {
    const { backtestId, installationId, actorKeyId, reportIds } = message.body;
    const backtest = await env.DB.prepare(`SELECT workflow_version_id AS versionId FROM backtests WHERE id = ?1 AND installation_id = ?2`).bind(backtestId, installationId).first<{ versionId: string }>();
    if (!backtest) {
      message.ack();
      continue;
    }
    const actor: Actor = { installationId, scopes: [], audit: { type: "api_key", id: actorKeyId } };
    let failed = false;
    // A few runs at a time: dispatching loads the version's sandbox and creates a Workflows instance.
    for (let i = 0; i < reportIds.length; i += BACKTEST_PARALLEL) {
      await Promise.all(
        reportIds.slice(i, i + BACKTEST_PARALLEL).map(async (reportId) => {
          const row = await getReportRow(env.DB, installationId, reportId);
          if (!row) return;
          const { caseReportCount: _count, ...report } = reportSummary(row);
          try {
            await createRun(env, ctx, actor, {
              workflowVersionId: backtest.versionId,
              authorityMode: "shadow",
              input: { report },
              reportId,
              backtestId,
              idempotencyKey: `backtest:${backtestId}:${reportId}`,
            });
          } catch (error) {
            console.error("backtest_run_failed", errorCode(error));
            failed = true;
          }
        }),
      );
    }
    if (failed) message.retry({ delaySeconds: 5 });
    else message.ack();
  }
}
