// The outbox of a backtest's chunks (migration 0029). startBacktest records every chunk in the
// same batch as the backtest and then queues them; a consumer marks a chunk active when it starts
// it (and, for a long fast chunk, every CHUNK_HEARTBEAT_MS while it evaluates) and done once it
// acked it. The schedule's sweep sends again the pending chunks of running backtests once their
// engine's queue has shown no work on ANY chunk for CHUNK_LOST_AFTER_MS: the messages are then lost
// (a local runtime that died took its in-memory queue with it; on Cloudflare, a message past its
// retries), not waiting behind another installation's backlog or still being evaluated. Consumers
// are idempotent per backtest and report, so a repeat never double counts. A chunk sent again
// MAX_REQUEUES times fails its backtest (backtest.chunk_lost) instead of leaving it running.
import { auditStatement } from "../audit";

/** Chunks per INSERT: a bound parameter holds at most 2 MB on D1 (250 ids of ~35 bytes per chunk). */
const CHUNKS_PER_STATEMENT = 40;
/** A queue with no work on any chunk for this long has lost the messages of its pending chunks. */
export const CHUNK_LOST_AFTER_MS = 2 * 60_000;
/** A consumer still evaluating a chunk says so this often (well under CHUNK_LOST_AFTER_MS). */
const CHUNK_HEARTBEAT_MS = 15_000;
/** Under a Queues sendBatch's 100 messages and 256 KB (startBacktest and the sweep alike). */
const SEND_BATCH_MESSAGES = 100;
const SEND_BATCH_BYTES = 200_000;
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
export function chunkInsertStatements(db: D1Database, engine: "fast" | "durable", backtestId: string, installationId: string, actorKeyId: string, chunks: string[][], at: string): D1PreparedStatement[] {
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < chunks.length; i += CHUNKS_PER_STATEMENT) {
    const rows = chunks.slice(i, i + CHUNKS_PER_STATEMENT).map((ids, j) => ({ seq: i + j, ids }));
    statements.push(
      db
        .prepare(`INSERT INTO backtest_chunks (backtest_id, seq, installation_id, engine, report_ids_json, actor_key_id, queued_at)
          SELECT ?1, json_extract(value, '$.seq'), ?2, ?3, json_extract(value, '$.ids'), ?4, ?5 FROM json_each(?6)`)
        .bind(backtestId, installationId, engine, actorKeyId, at, JSON.stringify(rows)),
    );
  }
  return statements;
}

/**
 * Sends messages in batches within Queues' limits (100 messages, 256 KB); `sent(slice)` runs after
 * each batch is accepted, so what was sent is recorded even if a later batch fails.
 */
export async function sendChunked<T>(queue: Queue<T>, messages: Array<{ body: T }>, sent: (slice: Array<{ body: T }>) => Promise<void> = async () => {}): Promise<void> {
  let batch: Array<{ body: T }> = [];
  let bytes = 0;
  for (const message of messages) {
    const size = JSON.stringify(message.body).length + 100;
    if (batch.length === SEND_BATCH_MESSAGES || (batch.length > 0 && bytes + size > SEND_BATCH_BYTES)) {
      await queue.sendBatch(batch);
      await sent(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(message);
    bytes += size;
  }
  if (batch.length > 0) {
    await queue.sendBatch(batch);
    await sent(batch);
  }
}

async function chunkUpdate(env: Env, message: Pick<BacktestChunkMessage, "backtestId" | "seq">, done: boolean): Promise<void> {
  if (typeof message.seq !== "number") return;
  const at = new Date().toISOString();
  try {
    await env.DB.prepare(`UPDATE backtest_chunks SET active_at = ?3${done ? ", done_at = ?3" : ""} WHERE backtest_id = ?1 AND seq = ?2 AND done_at IS NULL`)
      .bind(message.backtestId, message.seq, at)
      .run();
  } catch (error) {
    console.error(JSON.stringify({ event: "backtest.chunk_mark_failed", backtestId: message.backtestId, seq: message.seq, error: error instanceof Error ? error.name : "error" }));
  }
}

/**
 * A consumer starts a chunk: it is marked active now, and `beat()` marks it again at most every
 * CHUNK_HEARTBEAT_MS while it is evaluated. Best effort, like markChunkDone.
 */
export async function startChunk(env: Env, message: Pick<BacktestChunkMessage, "backtestId" | "seq">): Promise<{ beat: () => Promise<void> }> {
  await chunkUpdate(env, message, false);
  let last = Date.now();
  return {
    beat: async () => {
      if (Date.now() - last < CHUNK_HEARTBEAT_MS) return;
      last = Date.now();
      await chunkUpdate(env, message, false);
    },
  };
}

/** Marks a consumed chunk done. Best effort: a chunk left pending is at worst evaluated again. */
export async function markChunkDone(env: Env, message: Pick<BacktestChunkMessage, "backtestId" | "seq">): Promise<void> {
  await chunkUpdate(env, message, true);
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

/** The schedule's sweep (automation.backtest_chunks): the pending chunks of a queue that stopped working, queued again. */
export async function sweepLostBacktestChunks(env: Env, now: Date): Promise<{ requeued: number; failed: number; sendFailed: number }> {
  const cutoff = new Date(now.getTime() - CHUNK_LOST_AFTER_MS).toISOString();
  // Pending chunks of running backtests, queued (or last active) before the cutoff, whose engine's
  // queue shows no work on any chunk since: a backlog or a long evaluation is not a loss.
  const { results } = await env.DB.prepare(`SELECT c.backtest_id AS backtestId, c.seq, c.installation_id AS installationId, c.report_ids_json AS reportIdsJson,
      c.actor_key_id AS actorKeyId, c.requeues, c.engine
    FROM backtest_chunks c JOIN backtests b ON b.id = c.backtest_id AND b.installation_id = c.installation_id
    WHERE c.done_at IS NULL AND c.queued_at < ?1 AND COALESCE(c.active_at, c.queued_at) < ?1 AND b.state = 'running'
      AND NOT EXISTS (SELECT 1 FROM backtest_chunks d WHERE d.engine = c.engine AND d.active_at >= ?1)
    ORDER BY c.queued_at, c.backtest_id, c.seq LIMIT ?2`)
    .bind(cutoff, REQUEUES_PER_RUN)
    .all<PendingChunk>();
  const summary = { requeued: 0, failed: 0, sendFailed: 0 };
  if (results.length === 0) return summary;
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
        // Only if this batch failed it (a backtest completed or cancelled meanwhile is left as it is).
        auditStatement(
          env.DB,
          {
            installationId: chunk.installationId,
            idempotencyKey: `backtest:${chunk.backtestId}:failed`,
            action: "backtest.failed",
            actor: { type: "system", id: "backtests" },
            target: { type: "backtest", id: chunk.backtestId },
            details: { errorCode: "backtest.chunk_lost", chunk: chunk.seq, requeues: chunk.requeues },
            at,
          },
          { table: "backtests", id: chunk.backtestId, where: { state: "failed", finished_at: at } },
        ),
      ]),
    );
    summary.failed = exhausted.length;
  }
  const failedIds = new Set(exhausted.map((c) => c.backtestId));
  const resend = results.filter((c) => !failedIds.has(c.backtestId));
  for (const engine of ["fast", "durable"] as const) {
    const chunks = resend.filter((c) => c.engine === engine);
    if (chunks.length === 0) continue;
    const queue = (engine === "fast" ? env.FAST_BACKTESTS : env.BACKTESTS) as Queue<BacktestChunkMessage>;
    const messages = chunks.map((c) => ({ body: chunkMessage(engine, c.backtestId, c.installationId, c.actorKeyId, c.seq, JSON.parse(c.reportIdsJson) as string[]) }));
    try {
      // Each accepted batch is recorded at once: a later batch that fails leaves only its own chunks for the next run.
      await sendChunked(queue, messages, async (slice) => {
        await env.DB.batch(slice.map(({ body }) => env.DB.prepare(`UPDATE backtest_chunks SET queued_at = ?3, requeues = requeues + 1 WHERE backtest_id = ?1 AND seq = ?2 AND done_at IS NULL`).bind(body.backtestId, body.seq, at)));
        summary.requeued += slice.length;
      });
    } catch (error) {
      // One engine's queue refusing does not keep the other's chunks back.
      summary.sendFailed += 1;
      console.error(JSON.stringify({ event: "backtest.chunks_requeue_failed", engine, error: error instanceof Error ? error.name : "error" }));
    }
  }
  if (summary.requeued > 0) console.warn(JSON.stringify({ event: "backtest.chunks_requeued", chunks: summary.requeued, backtests: new Set(resend.map((c) => c.backtestId)).size }));
  return summary;
}
