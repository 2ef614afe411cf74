// The outbox of a backtest's chunks (migration 0029). startBacktest records every chunk in the
// same batch as the backtest and then queues them; a consumer marks a chunk done once it acked it.
// The schedule's sweep sends again the chunks of a running backtest that has made no progress for
// CHUNK_LOST_AFTER_MS: their messages were lost (a local runtime that died took its in-memory queue
// with it; on Cloudflare, a message past its retries). Consumers are idempotent per backtest and
// report, so a chunk that was only slow costs a repeat, never a double count. A chunk sent again
// MAX_REQUEUES times fails its backtest (backtest.chunk_lost) instead of leaving it running.
import { auditStatement } from "../audit";

/** Chunks per INSERT: a bound parameter holds at most 2 MB on D1 (250 ids of ~35 bytes per chunk). */
const CHUNKS_PER_STATEMENT = 40;
/** A running backtest none of whose chunks finished for this long has its pending chunks sent again. */
export const CHUNK_LOST_AFTER_MS = 2 * 60_000;
/** Chunks sent again per scheduled run (the next run goes on). */
const REQUEUES_PER_RUN = 100;
/** A chunk lost this many times fails its backtest. */
const MAX_REQUEUES = 10;

export interface BacktestChunkMessage {
  backtestId: string;
  installationId: string;
  reportIds: string[];
  /** The chunk's row in backtest_chunks (absent in messages queued before migration 0029). */
  seq?: number;
  /** Fast chunks only. */
  engine?: "fast";
  /** Durable chunks only: the key that started the backtest. */
  actorKeyId?: string;
}

/** The message of chunk `seq` of a backtest, as startBacktest and the sweep queue it. */
export function chunkMessage(engine: "fast" | "durable", backtestId: string, installationId: string, actorKeyId: string, seq: number, reportIds: string[]): BacktestChunkMessage {
  return engine === "fast" ? { backtestId, installationId, engine, reportIds, seq } : { backtestId, installationId, actorKeyId, reportIds, seq };
}

/** The statements that record a new backtest's chunks (run in the batch that inserts the backtest). */
export function chunkInsertStatements(db: D1Database, backtestId: string, installationId: string, actorKeyId: string, chunks: string[][], at: string): D1PreparedStatement[] {
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < chunks.length; i += CHUNKS_PER_STATEMENT) {
    const rows = chunks.slice(i, i + CHUNKS_PER_STATEMENT).map((ids, j) => ({ seq: i + j, ids }));
    statements.push(
      db
        .prepare(`INSERT INTO backtest_chunks (backtest_id, seq, installation_id, report_ids_json, actor_key_id, queued_at)
          SELECT ?1, json_extract(value, '$.seq'), ?2, json_extract(value, '$.ids'), ?3, ?4 FROM json_each(?5)`)
        .bind(backtestId, installationId, actorKeyId, at, JSON.stringify(rows)),
    );
  }
  return statements;
}

/** Marks a consumed chunk done. Best effort: a chunk left pending is at worst evaluated again. */
export async function markChunkDone(env: Env, message: Pick<BacktestChunkMessage, "backtestId" | "seq">): Promise<void> {
  if (typeof message.seq !== "number") return;
  try {
    await env.DB.prepare(`UPDATE backtest_chunks SET done_at = ?3 WHERE backtest_id = ?1 AND seq = ?2 AND done_at IS NULL`).bind(message.backtestId, message.seq, new Date().toISOString()).run();
  } catch (error) {
    console.error(JSON.stringify({ event: "backtest.chunk_mark_failed", backtestId: message.backtestId, seq: message.seq, error: error instanceof Error ? error.name : "error" }));
  }
}

interface PendingChunk {
  backtestId: string;
  seq: number;
  installationId: string;
  reportIdsJson: string;
  actorKeyId: string;
  requeues: number;
  engine: "fast" | "durable";
}

/** The schedule's sweep (automation.backtest_chunks): lost chunks of stalled backtests queued again. */
export async function sweepLostBacktestChunks(env: Env, now: Date): Promise<{ requeued: number; failed: number }> {
  const cutoff = new Date(now.getTime() - CHUNK_LOST_AFTER_MS).toISOString();
  const { results } = await env.DB.prepare(`SELECT c.backtest_id AS backtestId, c.seq, c.installation_id AS installationId, c.report_ids_json AS reportIdsJson,
      c.actor_key_id AS actorKeyId, c.requeues, b.engine
    FROM backtest_chunks c JOIN backtests b ON b.id = c.backtest_id AND b.installation_id = c.installation_id
    WHERE c.done_at IS NULL AND c.queued_at < ?1 AND b.state = 'running'
      AND NOT EXISTS (SELECT 1 FROM backtest_chunks d WHERE d.backtest_id = c.backtest_id AND d.done_at >= ?1)
    ORDER BY c.queued_at, c.backtest_id, c.seq LIMIT ?2`)
    .bind(cutoff, REQUEUES_PER_RUN)
    .all<PendingChunk>();
  if (results.length === 0) return { requeued: 0, failed: 0 };
  const at = now.toISOString();

  const exhausted = [...new Map(results.filter((c) => c.requeues >= MAX_REQUEUES).map((c) => [c.backtestId, c])).values()];
  if (exhausted.length > 0) {
    await env.DB.batch(
      exhausted.flatMap((chunk) => [
        env.DB.prepare(`UPDATE backtests SET state = 'failed', error_code = 'backtest.chunk_lost', finished_at = ?3, updated_at = ?3 WHERE id = ?1 AND installation_id = ?2 AND state = 'running'`).bind(
          chunk.backtestId,
          chunk.installationId,
          at,
        ),
        auditStatement(env.DB, {
          installationId: chunk.installationId,
          idempotencyKey: `backtest:${chunk.backtestId}:failed`,
          action: "backtest.failed",
          actor: { type: "system", id: "backtests" },
          target: { type: "backtest", id: chunk.backtestId },
          details: { errorCode: "backtest.chunk_lost", chunk: chunk.seq, requeues: chunk.requeues },
          at,
        }),
      ]),
    );
  }
  const failedIds = new Set(exhausted.map((c) => c.backtestId));
  const resend = results.filter((c) => !failedIds.has(c.backtestId));
  for (const engine of ["fast", "durable"] as const) {
    const chunks = resend.filter((c) => c.engine === engine);
    if (chunks.length === 0) continue;
    const queue = engine === "fast" ? env.FAST_BACKTESTS : env.BACKTESTS;
    await queue.sendBatch(chunks.map((c) => ({ body: chunkMessage(engine, c.backtestId, c.installationId, c.actorKeyId, c.seq, JSON.parse(c.reportIdsJson) as string[]) })));
  }
  if (resend.length > 0) {
    await env.DB.batch(resend.map((c) => env.DB.prepare(`UPDATE backtest_chunks SET queued_at = ?3, requeues = requeues + 1 WHERE backtest_id = ?1 AND seq = ?2 AND done_at IS NULL`).bind(c.backtestId, c.seq, at)));
    console.warn(JSON.stringify({ event: "backtest.chunks_requeued", chunks: resend.length, backtests: new Set(resend.map((c) => c.backtestId)).size }));
  }
  return { requeued: resend.length, failed: exhausted.length };
}
