// Sliding-window counters per entity, on Durable Objects with SQLite storage (ENTITY_COUNTERS).
//
// Each installation has COUNTER_SHARDS shards (Durable Objects named `<installation>:<n>`); an
// entity's counters live in the shard its keyed hash names, so one installation never reads
// another's, and intake sends one call per shard a batch touches. A shard keeps one row per
// counted event per counter key (the key, a 64-bit hash of the event id, the event's time, and
// for a distinct count the member's key) for as long as the longest window that reads it, so a
// count over (occurredAt − window, occurredAt] is exact; rows older than that are deleted as the
// newest time the shard has seen moves on — never past the server's clock, so an event dated in
// the future (intake allows a few minutes of skew) cannot empty short windows early. Nothing is held in memory between calls, so memory is
// bounded whatever the traffic, and the rows survive restarts. The (key, event hash) primary key
// makes a retried event count once.
import { DurableObject } from "cloudflare:workers";
import { sha256HexSync } from "../lib/crypto";

/**
 * Counter shards per installation: a batch makes at most this many Durable Object calls, each a
 * round trip with a durable commit (in the bench that round trip, not the shard's SQL — about
 * 0.1 ms per counter — is most of a counter's cost), while more shards spread the storage and
 * the writes of a large installation. Fixed: changing it moves entities to other shards, whose
 * counters then start empty.
 */
export const COUNTER_SHARDS = 8;

/** One counter read (and, when `record`, the event counted first) at the event's time. */
export interface CounterOp {
  /** `c` (a count) or `d` (a distinct count) and a hash of the event type or member kind and the entity key. */
  key: string;
  /** A hash of the event id (16 hex digits): the retried event's row is the same row. */
  event: string;
  /** The event's time, ms since the epoch. */
  at: number;
  windowMs: number;
  /** How long the row must stay: the longest window any deployed rule reads this key with. */
  keepMs: number;
  /** A distinct count (of members) rather than a count (of events). */
  distinct: boolean;
  /** A distinct count's member to record (the other entity's key). */
  member?: string;
  /** Count this event before reading (false: only read, e.g. a rule on another event type). */
  record: boolean;
}

export interface CounterResult {
  value: number;
  /** The op recorded its event before (a retry); only meaningful when `record`. */
  duplicate: boolean;
}

/** The shard of an entity key. */
export function shardOf(entityKey: string): number {
  return Number.parseInt(entityKey.slice(4, 8), 16) % COUNTER_SHARDS;
}

/** The 16-hex-digit hash a shard stores for an event id. */
export function eventHash(eventId: string): string {
  return sha256HexSync(eventId).slice(0, 16);
}

export class EntityCounters extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS entries (
        key TEXT NOT NULL, event TEXT NOT NULL, at INTEGER NOT NULL, member TEXT, keep_until INTEGER NOT NULL,
        PRIMARY KEY (key, event)
      ) WITHOUT ROWID`);
    // Window reads: one key, a time range. Pruning: rows past their keep time.
    this.sql.exec(`CREATE INDEX IF NOT EXISTS entries_window ON entries (key, at)`);
    this.sql.exec(`CREATE INDEX IF NOT EXISTS entries_keep ON entries (keep_until)`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)`);
  }

  /**
   * Applies ops in order: each counts its event (when `record`; a row already there is a
   * duplicate and counts nothing) and then reads its counter over (at − window, at]. Runs as one
   * storage transaction, so a failed call counts nothing and may be retried whole.
   */
  apply(ops: CounterOp[]): CounterResult[] {
    return this.ctx.storage.transactionSync(() => {
      const results: CounterResult[] = [];
      let newest = 0;
      for (const op of ops) {
        let duplicate = false;
        if (op.record) {
          const cursor = this.sql.exec(`INSERT OR IGNORE INTO entries (key, event, at, member, keep_until) VALUES (?, ?, ?, ?, ?)`, op.key, op.event, op.at, op.member ?? null, op.at + op.keepMs);
          duplicate = cursor.rowsWritten === 0;
        }
        const from = op.at - op.windowMs;
        const row = !op.distinct
          ? this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM entries WHERE key = ? AND at > ? AND at <= ?`, op.key, from, op.at).one()
          : this.sql.exec<{ n: number }>(`SELECT COUNT(DISTINCT member) AS n FROM entries WHERE key = ? AND at > ? AND at <= ?`, op.key, from, op.at).one();
        results.push({ value: row.n, duplicate });
        if (op.at > newest) newest = op.at;
      }
      this.prune(newest);
      return results;
    });
  }

  /** Rows and bytes this shard holds (the bench's counter cost). */
  usage(): { rows: number; bytes: number } {
    const rows = this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM entries`).one().n;
    return { rows, bytes: this.ctx.storage.sql.databaseSize };
  }

  /**
   * Deletes rows past their keep time, measured against the newest event time the shard has seen
   * or the server's clock, whichever is earlier (a client's clock may run ahead).
   */
  private prune(newest: number): void {
    const stored = this.sql.exec<{ value: number }>(`SELECT value FROM meta WHERE name = 'newest'`).toArray()[0]?.value ?? 0;
    const watermark = Math.min(Math.max(stored, newest), Date.now());
    if (watermark !== stored) this.sql.exec(`INSERT INTO meta (name, value) VALUES ('newest', ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value`, watermark);
    this.sql.exec(`DELETE FROM entries WHERE keep_until < ?`, watermark);
  }
}

/** The counter shard of an installation. */
export function counterShard(env: Env, installationId: string, shard: number): DurableObjectStub<EntityCounters> {
  return env.ENTITY_COUNTERS.get(env.ENTITY_COUNTERS.idFromName(`${installationId}:${shard}`));
}
