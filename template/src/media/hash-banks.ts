// Hash banks of an installation: configuration in D1 (hash_banks), entries in Durable Object
// shards (PdqIndexShard), one per (bank, shard), an entry's shard a function of its hash. A bank of
// another installation is a 404 everywhere: every call first reads the bank by id *and*
// installation, and shards are named after both.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError, conflict, notFound } from "../errors";
import { newId } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";
import { MAX_SHARD_ENTRIES, MAX_TAG_LENGTH, MAX_TAGS, type ShardEntry, type ShardMatch } from "./pdq-index-shard";

export const HASH_BANK_KINDS = ["pdq"] as const;
export type HashBankKind = (typeof HASH_BANK_KINDS)[number];
/** PDQ's published match threshold (pdq/README.md; python-threatexchange's confident match). */
export const PDQ_DEFAULT_THRESHOLD = 31;
/** Highest threshold a bank may set: the index probes ⌊t/16⌋ bits around each chunk, 697 values at 63. */
export const PDQ_MAX_THRESHOLD = 63;
/** PDQ's published advice: discard hashes of quality 49 and below. */
export const PDQ_DEFAULT_QUALITY_FLOOR = 50;
export const DEFAULT_SHARDS = 8;
export const MAX_ENTRIES_PER_CALL = 10_000;
export { MAX_TAG_LENGTH, MAX_TAGS };

export interface HashBankRow {
  id: string;
  installationId: string;
  name: string;
  kind: HashBankKind;
  threshold: number;
  qualityFloor: number;
  shards: number;
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = `id, installation_id AS installationId, name, kind, threshold, quality_floor AS qualityFloor, shards, created_at AS createdAt, updated_at AS updatedAt`;

export interface BankEntry {
  hash: string;
  tags?: string[];
  quality?: number;
}

/** Reads a bank of the installation; 404 hash_bank.not_found for any other (or none). */
export async function bankOf(env: Env, installationId: string, bankId: string): Promise<HashBankRow> {
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM hash_banks WHERE id = ?1 AND installation_id = ?2`).bind(bankId, installationId).first<HashBankRow>();
  if (!row) throw notFound("hash_bank");
  configs.set(`${installationId}:${bankId}`, { row, until: Date.now() + CONFIG_TTL_MS });
  return row;
}

/**
 * Bank configurations matched in this isolate, for a few seconds: a match is the hot path (every
 * image of every report), and its D1 read of the bank's row was a round trip per match. The cost
 * is bounded staleness: a threshold or floor changed, or a bank deleted, through another isolate
 * applies here within CONFIG_TTL_MS (a deleted bank's shards are already empty). Keyed by
 * installation and bank, so tenancy is the D1 read's.
 */
const CONFIG_TTL_MS = 5_000;
const configs = new Map<string, { row: HashBankRow; until: number }>();

async function bankForMatch(env: Env, installationId: string, bankId: string): Promise<HashBankRow> {
  const cached = configs.get(`${installationId}:${bankId}`);
  if (cached && cached.until > Date.now()) return cached.row;
  if (configs.size >= 1_000) configs.clear();
  // A workflow's hash_bank node names its bank by id, or by its name (unique per installation) as a
  // published example does; an id wins.
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM hash_banks WHERE installation_id = ?2 AND (id = ?1 OR name = ?1) ORDER BY id = ?1 DESC LIMIT 1`).bind(bankId, installationId).first<HashBankRow>();
  if (!row) throw notFound("hash_bank");
  configs.set(`${installationId}:${bankId}`, { row, until: Date.now() + CONFIG_TTL_MS });
  return row;
}

const forgetBank = (installationId: string, bankId: string) => configs.delete(`${installationId}:${bankId}`);

export function shardStub(env: Env, bank: HashBankRow, shard: number) {
  return env.PDQ_INDEX.get(env.PDQ_INDEX.idFromName(`pdq:${bank.installationId}:${bank.id}:${shard}`));
}

/**
 * The shard an entry lives in: all 256 bits folded and finished with MurmurHash3's avalanche, so
 * shards fill evenly whatever bits the hashes share.
 */
export function shardOfHash(hash: string, shards: number): number {
  let h = 0;
  for (let i = 0; i < 64; i += 8) h = Math.imul(h ^ Number.parseInt(hash.slice(i, i + 8), 16), 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) % shards;
}

const serialize = (row: HashBankRow) => ({ id: row.id, name: row.name, kind: row.kind, threshold: row.threshold, qualityFloor: row.qualityFloor, shards: row.shards, createdAt: row.createdAt, updatedAt: row.updatedAt });

export async function createHashBank(env: Env, actor: Actor, input: { name: string; kind: HashBankKind; threshold?: number; qualityFloor?: number; shards?: number }) {
  const id = newId("hbk");
  const at = new Date().toISOString();
  const threshold = input.threshold ?? PDQ_DEFAULT_THRESHOLD;
  const qualityFloor = input.qualityFloor ?? PDQ_DEFAULT_QUALITY_FLOOR;
  const shards = input.shards ?? DEFAULT_SHARDS;
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO hash_banks (id, installation_id, name, kind, threshold, quality_floor, shards, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)`).bind(
        id,
        actor.installationId,
        input.name,
        input.kind,
        threshold,
        qualityFloor,
        shards,
        at,
      ),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `hash_bank:${id}:created`,
        action: "hash_bank.created",
        actor: actor.audit,
        target: { type: "hash_bank", id },
        details: { name: input.name, kind: input.kind, threshold, qualityFloor, shards },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("hash_bank.name_taken", "A hash bank of this installation already has this name; choose another.");
    throw error;
  }
  return { ...serialize(await bankOf(env, actor.installationId, id)), entries: 0 };
}

export async function listHashBanks(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM hash_banks WHERE installation_id = ?1 ORDER BY name`).bind(actor.installationId).all<HashBankRow>();
  return results.map(serialize);
}

/** A bank with its entry count (each shard counts its own). */
export async function getHashBank(env: Env, actor: Actor, bankId: string) {
  const bank = await bankOf(env, actor.installationId, bankId);
  const counts = await Promise.all(Array.from({ length: bank.shards }, (_, shard) => shardStub(env, bank, shard).count()));
  return { ...serialize(bank), entries: counts.reduce((a, b) => a + b, 0) };
}

export async function updateHashBank(env: Env, actor: Actor, bankId: string, input: { name?: string; threshold?: number; qualityFloor?: number }) {
  const bank = await bankOf(env, actor.installationId, bankId);
  const at = new Date().toISOString();
  const next = { name: input.name ?? bank.name, threshold: input.threshold ?? bank.threshold, qualityFloor: input.qualityFloor ?? bank.qualityFloor };
  try {
    await env.DB.batch([
      env.DB.prepare(`UPDATE hash_banks SET name = ?3, threshold = ?4, quality_floor = ?5, updated_at = ?6 WHERE id = ?1 AND installation_id = ?2`).bind(bank.id, bank.installationId, next.name, next.threshold, next.qualityFloor, at),
      auditStatement(env.DB, {
        installationId: bank.installationId,
        idempotencyKey: `hash_bank:${bank.id}:updated:${at}`,
        action: "hash_bank.updated",
        actor: actor.audit,
        target: { type: "hash_bank", id: bank.id },
        details: { before: { name: bank.name, threshold: bank.threshold, qualityFloor: bank.qualityFloor }, after: next },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("hash_bank.name_taken", "A hash bank of this installation already has this name; choose another.");
    throw error;
  }
  forgetBank(bank.installationId, bank.id);
  return getHashBank(env, actor, bank.id);
}

/** Deletes the bank: its shards drop every entry first, then its row goes (with an audit event). */
export async function deleteHashBank(env: Env, actor: Actor, bankId: string) {
  const bank = await bankOf(env, actor.installationId, bankId);
  await Promise.all(Array.from({ length: bank.shards }, (_, shard) => shardStub(env, bank, shard).clear()));
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`DELETE FROM hash_banks WHERE id = ?1 AND installation_id = ?2`).bind(bank.id, bank.installationId),
    // A bank that followed an exchange stops (its mirror's index rows go with the schedule's cleanup).
    env.DB.prepare(`UPDATE hash_exchange_follows SET state = 'ended', updated_at = ?3 WHERE bank_id = ?1 AND installation_id = ?2 AND state = 'active'`).bind(bank.id, bank.installationId, at),
    auditStatement(env.DB, {
      installationId: bank.installationId,
      idempotencyKey: `hash_bank:${bank.id}:deleted`,
      action: "hash_bank.deleted",
      actor: actor.audit,
      target: { type: "hash_bank", id: bank.id },
      details: { name: bank.name },
      at,
    }),
  ]);
  forgetBank(bank.installationId, bank.id);
  return { id: bank.id, deleted: true };
}

const normalTags = (tags: string[] | undefined) => [...new Set((tags ?? []).map((t) => t.trim()).filter((t) => t !== ""))].slice(0, MAX_TAGS);

/**
 * Adds entries: lowercase hashes, tags merged into those of a hash already present; entries whose
 * quality is known and under the bank's floor are skipped (counted). Idempotent per entry. 422
 * hash_bank.full when a shard would pass its capacity, 422 hash_bank.too_many_tags when a merge
 * would give an entry more than MAX_TAGS tags (that shard's entries are then not added).
 */
export async function addHashBankEntries(env: Env, actor: Actor, bankId: string, entries: BankEntry[], source: "api" | "csv", extra: Record<string, unknown> = {}) {
  const bank = await bankOf(env, actor.installationId, bankId);
  const byShard = new Map<number, ShardEntry[]>();
  let skipped = 0;
  for (const entry of entries) {
    if (entry.quality !== undefined && entry.quality < bank.qualityFloor) {
      skipped += 1;
      continue;
    }
    const hash = entry.hash.toLowerCase();
    const shard = shardOfHash(hash, bank.shards);
    const list = byShard.get(shard) ?? [];
    list.push({ hash, tags: normalTags(entry.tags), quality: entry.quality ?? null });
    byShard.set(shard, list);
  }
  // One call per shard and 10,000 entries (an RPC's payload stays near a megabyte).
  const calls = [...byShard].flatMap(([shard, list]) => Array.from({ length: Math.ceil(list.length / MAX_ENTRIES_PER_CALL) }, (_, i) => [shard, list.slice(i * MAX_ENTRIES_PER_CALL, (i + 1) * MAX_ENTRIES_PER_CALL)] as const));
  const results: { added: number; updated: number; full: boolean; tooManyTags?: string }[] = [];
  for (let i = 0; i < calls.length; i += bank.shards) results.push(...(await Promise.all(calls.slice(i, i + bank.shards).map(([shard, list]) => shardStub(env, bank, shard).add(list)))));
  const added = results.reduce((n, r) => n + r.added, 0);
  const updated = results.reduce((n, r) => n + r.updated, 0);
  const full = results.some((r) => r.full);
  const tooManyTags = results.find((r) => r.tooManyTags)?.tooManyTags;
  const at = new Date().toISOString();
  if (added + updated > 0) {
    await auditStatement(env.DB, {
      installationId: bank.installationId,
      idempotencyKey: `hash_bank:${bank.id}:entries_added:${crypto.randomUUID()}`,
      action: "hash_bank.entries_added",
      actor: actor.audit,
      target: { type: "hash_bank", id: bank.id },
      details: { source, given: entries.length, added, updated, skipped, ...extra },
      at,
    }).run();
  }
  if (tooManyTags) {
    throw new AppError("hash_bank.too_many_tags", `Merging the tags given for ${tooManyTags} with those it has would pass ${MAX_TAGS} tags; that entry's shard added nothing (the others did). Remove tags or send fewer.`, {
      status: 422,
      details: { hash: tooManyTags, added, updated, skipped },
    });
  }
  if (full) {
    throw new AppError("hash_bank.full", `A shard of this bank would pass ${MAX_SHARD_ENTRIES} entries; its entries were not added (the others were). Create a bank with more shards.`, {
      status: 422,
      details: { added, updated, skipped },
    });
  }
  return { added, updated, skipped };
}

/** Removes entries by hash (absent ones are ignored). */
export async function removeHashBankEntries(env: Env, actor: Actor, bankId: string, hashes: string[]) {
  const bank = await bankOf(env, actor.installationId, bankId);
  const byShard = new Map<number, string[]>();
  for (const raw of hashes) {
    const hash = raw.toLowerCase();
    const shard = shardOfHash(hash, bank.shards);
    byShard.set(shard, [...(byShard.get(shard) ?? []), hash]);
  }
  const results = await Promise.all([...byShard].map(([shard, list]) => shardStub(env, bank, shard).remove(list)));
  const removed = results.reduce((n, r) => n + r.removed, 0);
  if (removed > 0) {
    await auditStatement(env.DB, {
      installationId: bank.installationId,
      idempotencyKey: `hash_bank:${bank.id}:entries_removed:${crypto.randomUUID()}`,
      action: "hash_bank.entries_removed",
      actor: actor.audit,
      target: { type: "hash_bank", id: bank.id },
      details: { given: hashes.length, removed },
      at: new Date().toISOString(),
    }).run();
  }
  return { removed };
}

export interface BankMatch {
  /**
   * The entry's exact hash. Callers other than admins are not shown it (matchView): a bank of
   * known hashes is what an adversary would test perturbations against offline.
   */
  hash: string;
  /** A reference to the entry, stable while it stays in the bank: `<shard>.<row id>`. */
  entry: string;
  distance: number;
  tags: string[];
  /** Which of the query hashes matched (0 for a single hash; a dihedral variant's position otherwise). */
  query: number;
}

/**
 * Entries within the bank's threshold of any of the hashes (an image's PDQ and, to catch turned
 * copies, its dihedral variants), nearest first, one per entry. A query whose quality is under the
 * bank's floor, or not given while the floor is above 0, matches nothing (`belowQualityFloor`): PDQ
 * hashes of flat images collide.
 */
export async function matchHashBank(env: Env, installationId: string, bankId: string, input: { hashes: string[]; quality?: number }) {
  const bank = await bankForMatch(env, installationId, bankId);
  // A query of unknown quality counts as under the floor unless the floor is 0: the quality is what
  // tells a real picture from a flat one whose hash collides with many.
  if (input.quality === undefined ? bank.qualityFloor > 0 : input.quality < bank.qualityFloor) return { bank, matches: [] as BankMatch[], belowQualityFloor: true };
  const hashes = input.hashes.map((h) => h.toLowerCase());
  const found = (await Promise.all(Array.from({ length: bank.shards }, async (_, shard) => (await shardStub(env, bank, shard).match(hashes, bank.threshold)).map((m) => ({ ...m, shard }))))).flat() as (ShardMatch & { shard: number })[];
  const best = new Map<string, BankMatch>();
  for (const m of found) {
    const known = best.get(m.hash);
    if (!known || m.distance < known.distance) best.set(m.hash, { hash: m.hash, entry: `${m.shard}.${m.id}`, distance: m.distance, tags: m.tags, query: m.query });
  }
  const matches = [...best.values()].sort((a, b) => a.distance - b.distance || (a.hash < b.hash ? -1 : 1)).slice(0, 100);
  return { bank, matches, belowQualityFloor: false };
}

/** A match as `actor` may see it: the entry's exact hash for admins only. */
export function matchView(actor: Actor, match: BankMatch): Omit<BankMatch, "hash"> & { hash?: string } {
  const { hash, ...rest } = match;
  return actor.scopes.includes("admin") ? { hash, ...rest } : rest;
}

/**
 * Applies an exchange's changes to the bank's shards as `source` (`exchange:<kind>`): a `put`
 * entry's tags become exactly this source's tags for the hash (an exchange's record is its whole
 * state), leaving those the bank added by hand, or another exchange, as they are; a `remove` hash
 * loses this source's hold and leaves the bank only when no other source holds it, so an exchange
 * never deletes what the bank curated itself. Idempotent: applying the same changes again adds,
 * updates and removes nothing. No audit here: the exchange's sync audits the page it applied.
 * Entries under the bank's quality floor are never given (exchanges send no quality).
 */
export async function applyExchangeChanges(env: Env, bank: HashBankRow, source: string, changes: { put: ShardEntry[]; remove: string[] }) {
  const removeBy = new Map<number, string[]>();
  for (const hash of changes.remove) {
    const shard = shardOfHash(hash, bank.shards);
    const list = removeBy.get(shard) ?? [];
    list.push(hash);
    removeBy.set(shard, list);
  }
  const putBy = new Map<number, ShardEntry[]>();
  for (const entry of changes.put) {
    const shard = shardOfHash(entry.hash, bank.shards);
    const list = putBy.get(shard) ?? [];
    list.push({ hash: entry.hash, tags: normalTags(entry.tags), quality: entry.quality });
    putBy.set(shard, list);
  }
  const removals = await Promise.all([...removeBy].map(([shard, list]) => shardStub(env, bank, shard).remove(list, { source })));
  const results = await Promise.all([...putBy].map(([shard, list]) => shardStub(env, bank, shard).add(list, { source, replace: true })));
  if (results.some((r) => r.full)) throw new AppError("hash_bank.full", `A shard of this bank would pass ${MAX_SHARD_ENTRIES} entries; the exchange's page was not applied. Follow with a bank of more shards.`, { status: 422 });
  return {
    added: results.reduce((n, r) => n + r.added, 0),
    updated: results.reduce((n, r) => n + r.updated, 0),
    removed: removals.reduce((n, r) => n + r.removed, 0),
    /** Hashes that stayed in the bank (another source holds them) with this source's hold dropped. */
    released: removals.reduce((n, r) => n + r.updated, 0),
  };
}
