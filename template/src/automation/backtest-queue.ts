// The BACKTESTS queue: fast chunks go to the host walker (backtest-fast.ts), durable ones to the
// consumer that starts shadow runs (backtest-consumer.ts). A cancelled backtest's chunks are dropped.
import { auditStatement } from "../audit";
import { errorCode } from "../errors";
import { markChunkDone, startChunk } from "./backtest-chunks";
import { type BacktestMessage, consumeBacktests } from "./backtest-consumer";
import { consumeFastChunk, type FastChunk } from "./backtest-fast";

/** A fast chunk that failed this often marks its backtest failed (its results so far are kept). */
const FAST_MAX_ATTEMPTS = 5;

export async function consumeBacktestQueue(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
  const durable: Array<Message<BacktestMessage>> = [];
  for (const message of batch.messages) {
    const body = message.body as Partial<FastChunk & BacktestMessage> | null;
    if (!body || typeof body.backtestId !== "string" || typeof body.installationId !== "string" || !Array.isArray(body.reportIds)) {
      message.ack();
      continue;
    }
    if (body.engine !== "fast") {
      const row = await env.DB.prepare(`SELECT state FROM backtests WHERE id = ?1 AND installation_id = ?2`).bind(body.backtestId, body.installationId).first<{ state: string }>();
      if (row?.state === "running") durable.push(message as Message<BacktestMessage>);
      else message.ack();
      continue;
    }
    try {
      const { beat } = await startChunk(env, body as FastChunk);
      await consumeFastChunk(env, ctx, body as FastChunk, beat);
      await markChunkDone(env, body as FastChunk);
      message.ack();
    } catch (error) {
      const code = errorCode(error);
      console.error(JSON.stringify({ event: "backtest.chunk_failed", backtestId: body.backtestId, attempts: message.attempts, code }));
      if (message.attempts >= FAST_MAX_ATTEMPTS) {
        await markFailed(env, body as FastChunk, code);
        message.ack();
      } else {
        message.retry({ delaySeconds: 2 * message.attempts });
      }
    }
  }
  if (durable.length > 0)
    await consumeBacktests(
      {
        queue: batch.queue,
        messages: durable,
        ackAll: () => {
          for (const m of durable) m.ack();
        },
        retryAll: () => {
          for (const m of durable) m.retry();
        },
      } as unknown as MessageBatch<BacktestMessage>,
      env,
      ctx,
    );
}

async function markFailed(env: Env, chunk: FastChunk, code: string): Promise<void> {
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE backtests SET state = 'failed', error_code = ?3, finished_at = ?4, updated_at = ?4 WHERE id = ?1 AND installation_id = ?2 AND state = 'running'`).bind(chunk.backtestId, chunk.installationId, code, at),
    auditStatement(env.DB, {
      installationId: chunk.installationId,
      idempotencyKey: `backtest:${chunk.backtestId}:failed`,
      action: "backtest.failed",
      actor: { type: "system", id: "backtests" },
      target: { type: "backtest", id: chunk.backtestId },
      details: { errorCode: code },
      at,
    }),
  ]);
}
