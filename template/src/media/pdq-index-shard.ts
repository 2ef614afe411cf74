// One shard of a PDQ hash bank: a Durable Object with SQLite storage, addressed by name
// `pdq:<installation>:<bank>:<shard>`. Its table holds the shard's entries (hash, tags, quality,
// and which sources hold each: the bank's own curation, "manual", and each exchange it follows);
// its memory holds the multi-index over them (pdq-index.ts), built from the table on first use and
// kept up to date by every write, so a match reads SQLite only for the tags of what it found.
// Capacity: MAX_SHARD_ENTRIES entries, about 110 bytes of memory each.
import { DurableObject } from "cloudflare:workers";
import { PdqMultiIndex } from "./pdq-index";

/** Entries one shard holds at most (≈ 29 MB of index memory, well inside a Durable Object's 128 MB). */
export const MAX_SHARD_ENTRIES = 262_144;

/** Tags an entry holds at most, and characters a tag holds at most (the API's schema says the same). */
export const MAX_TAGS = 20;
export const MAX_TAG_LENGTH = 100;

/** Thrown inside an add's transaction to roll it back when a merge would pass MAX_TAGS. */
class TooManyTags extends Error {}

export interface ShardEntry {
  hash: string;
  tags: string[];
  quality: number | null;
}

export interface ShardMatch {
  /** Which of the queries (their order in the call) matched. */
  query: number;
  /** The entry's row id in its shard (with the shard, the entry's reference). */
  id: number;
  hash: string;
  distance: number;
  tags: string[];
  quality: number | null;
}

/**
 * The source of entries added by hand (the API, a CSV import). An exchange's source is
 * `exchange:<kind>`: its record of a hash is that source's whole state, and it takes a hash out
 * only by dropping its own source; the entry leaves when no source holds it.
 */
export const MANUAL_SOURCE = "manual";

// `tags` is the union of the sources' tags (the bank's own first), what a match answers; `sources`
// is JSON { source: tags }. A row written before sources were kept (NULL) counts as the bank's own.
const SCHEMA = `CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, tags TEXT NOT NULL, quality INTEGER, sources TEXT)`;

type Sources = Record<string, string[]>;

const sourcesOf = (row: { tags: string; sources: string | null }): Sources => (row.sources === null ? { [MANUAL_SOURCE]: JSON.parse(row.tags) as string[] } : (JSON.parse(row.sources) as Sources));

/** Sources in a stable order (the bank's own first), so equal states serialize equally. */
const normalSources = (sources: Sources): Sources => Object.fromEntries(Object.entries(sources).sort(([a], [b]) => (a === MANUAL_SOURCE ? -1 : b === MANUAL_SOURCE ? 1 : a < b ? -1 : a > b ? 1 : 0)));

/** The entry's tags: every source's, the bank's own first when they must be cut to MAX_TAGS; sorted. */
function unionTags(sources: Sources): { tags: string[]; over: boolean } {
  const all = [...new Set(Object.values(normalSources(sources)).flat())];
  return { tags: all.slice(0, MAX_TAGS).sort(), over: all.length > MAX_TAGS };
}

export class PdqIndexShard extends DurableObject<Env> {
  private index: PdqMultiIndex | null = null;
  /** The row id of each slot, ascending (slots are appended in id order). */
  private ids = new Float64Array(1024);
  /**
   * Entries the shard holds: the index's slots less those removed (a removed entry's slot stays,
   * dead, until the index is rebuilt from the table), so capacity counts only live entries.
   */
  private live = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // The shard's own schema, created with the object's storage (D1 migrations do not reach it);
    // a shard made before entries kept their sources gains the column.
    ctx.storage.sql.exec(SCHEMA);
    if (ctx.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM pragma_table_info('entries') WHERE name = 'sources'`).one().n === 0) ctx.storage.sql.exec(`ALTER TABLE entries ADD COLUMN sources TEXT`);
  }

  private loaded(): PdqMultiIndex {
    if (this.index) return this.index;
    const index = new PdqMultiIndex();
    this.live = 0;
    for (const row of this.ctx.storage.sql.exec<{ id: number; hash: string }>(`SELECT id, hash FROM entries ORDER BY id`)) this.track(index, row.id, row.hash, true);
    index.build();
    this.index = index;
    return index;
  }

  private track(index: PdqMultiIndex, id: number, hash: string, deferBuild = false): void {
    const slot = index.add(hash, deferBuild);
    this.live += 1;
    if (slot >= this.ids.length) {
      const ids = new Float64Array(this.ids.length * 2);
      ids.set(this.ids);
      this.ids = ids;
    }
    this.ids[slot] = id;
  }

  private slotOf(id: number): number {
    let lo = 0;
    let hi = (this.index?.size ?? 0) - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const at = this.ids[mid]!;
      if (at === id) return mid;
      if (at < id) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /**
   * Adds entries (hashes are 64 lowercase hex digits, checked by the caller) for `source` (the bank's
   * own by default). A hash already present keeps its row and its other sources; this source's tags
   * gain the new ones (a set union), or with `replace` (an exchange's record is its whole state)
   * become them. Idempotent: adding the same entries again changes nothing. Refuses the whole call
   * when it would pass MAX_SHARD_ENTRIES, or when a merge would give an entry more than MAX_TAGS
   * tags (`tooManyTags` names that hash); a replace instead keeps MAX_TAGS of them, the bank's own
   * first (an exchange's record is not refused for what the bank added).
   */
  async add(entries: ShardEntry[], options: { source?: string; replace?: boolean } = {}): Promise<{ added: number; updated: number; full: boolean; tooManyTags?: string }> {
    const source = options.source ?? MANUAL_SOURCE;
    const index = this.loaded();
    const sql = this.ctx.storage.sql;
    // Exact capacity check only when the shard is near full (it reads which hashes are new).
    if (this.live + entries.length > MAX_SHARD_ENTRIES) {
      const hashes = [...new Set(entries.map((e) => e.hash))];
      let known = 0;
      for (let i = 0; i < hashes.length; i += 100) {
        const batch = hashes.slice(i, i + 100);
        known += sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM entries WHERE hash IN (${batch.map(() => "?").join(",")})`, ...batch).one().n;
      }
      if (this.live + hashes.length - known > MAX_SHARD_ENTRIES) return { added: 0, updated: 0, full: true };
    }
    let added = 0;
    let updated = 0;
    try {
      this.ctx.storage.transactionSync(() => {
        for (const entry of entries) {
          const tags = [...new Set(entry.tags)].sort();
          const inserted = sql
            .exec<{ id: number }>(`INSERT INTO entries (hash, tags, quality, sources) VALUES (?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING RETURNING id`, entry.hash, JSON.stringify(tags), entry.quality, JSON.stringify({ [source]: tags }))
            .toArray()[0];
          if (inserted) {
            this.track(index, inserted.id, entry.hash, true);
            added += 1;
            continue;
          }
          const known = sql.exec<{ id: number; tags: string; sources: string | null }>(`SELECT id, tags, sources FROM entries WHERE hash = ?`, entry.hash).one();
          const before = normalSources(sourcesOf(known));
          const mine = options.replace ? tags : [...new Set([...(before[source] ?? []), ...tags])].sort();
          const after = normalSources({ ...before, [source]: mine });
          const union = unionTags(after);
          if (union.over && !options.replace) throw new TooManyTags(entry.hash);
          if (JSON.stringify(after) !== JSON.stringify(before) || JSON.stringify(union.tags) !== known.tags) {
            sql.exec(`UPDATE entries SET tags = ?, sources = ? WHERE id = ?`, JSON.stringify(union.tags), JSON.stringify(after), known.id);
            updated += 1;
          }
        }
      });
    } catch (error) {
      if (!(error instanceof TooManyTags)) throw error;
      // The transaction rolled back, but the slots tracked for its inserts did not: rebuild from storage.
      this.index = null;
      this.ids = new Float64Array(1024);
      return { added: 0, updated: 0, full: false, tooManyTags: error.message };
    }
    index.settle();
    return { added, updated, full: false };
  }

  /**
   * Removes entries by hash; absent hashes are ignored (idempotent). Without `source` (an admin's
   * removal) the entry goes whoever holds it; with one, only that source's hold goes, and the entry
   * with it when no other source holds it (`updated` counts entries that stayed with fewer tags).
   */
  async remove(hashes: string[], options: { source?: string } = {}): Promise<{ removed: number; updated: number }> {
    const index = this.loaded();
    const sql = this.ctx.storage.sql;
    let removed = 0;
    let updated = 0;
    this.ctx.storage.transactionSync(() => {
      for (const hash of hashes) {
        if (options.source !== undefined) {
          const known = sql.exec<{ id: number; tags: string; sources: string | null }>(`SELECT id, tags, sources FROM entries WHERE hash = ?`, hash).toArray()[0];
          if (!known) continue;
          const sources = sourcesOf(known);
          if (!(options.source in sources)) continue;
          delete sources[options.source];
          if (Object.keys(sources).length > 0) {
            sql.exec(`UPDATE entries SET tags = ?, sources = ? WHERE id = ?`, JSON.stringify(unionTags(sources).tags), JSON.stringify(normalSources(sources)), known.id);
            updated += 1;
            continue;
          }
        }
        const row = sql.exec<{ id: number }>(`DELETE FROM entries WHERE hash = ? RETURNING id`, hash).toArray()[0];
        if (!row) continue;
        const slot = this.slotOf(row.id);
        if (slot >= 0) index.remove(slot);
        this.live -= 1;
        removed += 1;
      }
    });
    // Dead slots still hold index memory: past half a shard of them, rebuild from the table on next use.
    if (index.size - this.live > MAX_SHARD_ENTRIES / 2) {
      this.index = null;
      this.ids = new Float64Array(1024);
    }
    return { removed, updated };
  }

  /** Entries within `threshold` bits of any of the queries, with their tags. */
  async match(queries: string[], threshold: number): Promise<ShardMatch[]> {
    const index = this.loaded();
    const found: { query: number; slot: number; distance: number }[] = [];
    queries.forEach((query, q) => {
      for (const m of index.match(query, threshold)) found.push({ query: q, ...m });
    });
    if (found.length === 0) return [];
    const ids = [...new Set(found.map((m) => this.ids[m.slot]!))].slice(0, 1000);
    const rows = new Map<number, { hash: string; tags: string; quality: number | null }>();
    for (let i = 0; i < ids.length; i += 100) {
      const batch = ids.slice(i, i + 100);
      for (const row of this.ctx.storage.sql.exec<{ id: number; hash: string; tags: string; quality: number | null }>(`SELECT id, hash, tags, quality FROM entries WHERE id IN (${batch.map(() => "?").join(",")})`, ...batch)) {
        rows.set(row.id, row);
      }
    }
    return found.flatMap((m) => {
      const row = rows.get(this.ids[m.slot]!);
      return row ? [{ query: m.query, id: this.ids[m.slot]!, hash: row.hash, distance: m.distance, tags: JSON.parse(row.tags) as string[], quality: row.quality }] : [];
    });
  }

  /** Entries after row id `after`, in id order (an export's page). */
  async page(after: number, limit: number): Promise<{ entries: (ShardEntry & { id: number })[] }> {
    const rows = this.ctx.storage.sql.exec<{ id: number; hash: string; tags: string; quality: number | null }>(`SELECT id, hash, tags, quality FROM entries WHERE id > ? ORDER BY id LIMIT ?`, after, limit).toArray();
    return { entries: rows.map((row) => ({ id: row.id, hash: row.hash, tags: JSON.parse(row.tags) as string[], quality: row.quality })) };
  }

  async count(): Promise<number> {
    return this.ctx.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM entries`).one().n;
  }

  /** Drops every entry and the object's storage (the bank was deleted). */
  async clear(): Promise<void> {
    this.index = null;
    this.ids = new Float64Array(1024);
    this.live = 0;
    await this.ctx.storage.deleteAll();
    this.ctx.storage.sql.exec(SCHEMA);
  }
}
