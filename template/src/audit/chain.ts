// The tamper-evident audit trail: each installation's events form a hash chain over canonical
// JSON (RFC 8785). Events are numbered when inserted (the insert assigns `seq`), carry a keyed MAC
// from the start (`entry_mac`, events.ts), and are chained by the sealer, which runs after every API
// write, on the schedule, and before the trail is read or verified.
//
// The chain is anchored: each seal writes a keyed checkpoint (HMAC under a key derived from the
// AUDIT_CHECKPOINT_KEY secret, keys.ts) over the head hash and the number of events, in D1
// (audit_checkpoints); the scheduled sweep and verification also put the newest in R2
// (AUDIT_ANCHORS, one object per installation, at most one write a second) — outside D1, so
// deleting the events up to the anchor together with their checkpoint rows is still caught. Verification on request
// is incremental (from the last checkpoint a verification reached, which must still match the
// chain); the schedule verifies each chain in full, a bounded slice per run. The walk over both
// tiers (D1 rows, R2 segments) and the verdicts live in chain-verify.ts.
import { sha256Hex } from "../lib/crypto";
import { yieldToRuntime } from "../lib/queue-work";
import { canonicalJson } from "./canonical-json";
import { entryMacText } from "./events";
import { auditKeys, macVerifies, type AuditKey, type AuditKeys } from "./keys";
import { segmentAt } from "./segments";
import { createdAtText, readHash, readMac, storeHash } from "./stored";

export const GENESIS_HASH = `sha256:${"0".repeat(64)}`;
export const PAGE = 500;
/** At most this many events are sealed per call (the next call, or the next minute, goes on). */
const SEAL_MAX_EVENTS = 20_000;

/**
 * One event as the chain sees it, whichever form it is stored in (stored.ts): hashes as
 * "sha256:<hex>", the MAC as "<keyId>:<hex>". `idempotencyKey` is null for a v2 (lean) event, whose
 * id is the digest of its key; `prevHash` is null for a hot v2 event (its link is the previous
 * event's hash) and for any event not sealed yet.
 */
export interface AuditRow {
  id: string;
  seq: number;
  installationId: string;
  idempotencyKey: string | null;
  action: string;
  actorType: string;
  actorId: string;
  targetType: string;
  targetId: string;
  detailsJson: string;
  createdAt: string;
  prevHash: string | null;
  hash: string | null;
  entryMac: string | null;
}

export const AUDIT_COLUMNS = `id, seq, installation_id AS installationId, idempotency_key AS idempotencyKey, action,
  actor_type AS actorType, actor_id AS actorId, target_type AS targetType, target_id AS targetId,
  details_json AS detailsJson, ${createdAtText("created_at")} AS createdAt, prev_hash AS prevHash, hash, entry_mac AS entryMac`;

/** A row as read with AUDIT_COLUMNS, in the one shape the chain uses (stored.ts). */
export function fromStored(row: AuditRow): AuditRow {
  return { ...row, hash: readHash(row.hash), entryMac: readMac(row.entryMac) };
}

/**
 * The hash of one event given its predecessor's: sha256 over `prev\n` + the event's canonical JSON.
 * A v1 event's JSON names its idempotency key; a v2 event's is marked `v: 2` and has none (its id
 * is the key's digest, so the id commits to it).
 */
export async function eventHash(prevHash: string, row: AuditRow): Promise<string> {
  let details: unknown;
  try {
    details = JSON.parse(row.detailsJson);
  } catch {
    details = row.detailsJson;
  }
  const common = {
    seq: row.seq,
    id: row.id,
    installationId: row.installationId,
    action: row.action,
    actor: { type: row.actorType, id: row.actorId },
    target: { type: row.targetType, id: row.targetId },
    details,
    createdAt: row.createdAt,
  };
  const body = canonicalJson(row.idempotencyKey === null ? { v: 2, ...common } : { ...common, idempotencyKey: row.idempotencyKey });
  return `sha256:${await sha256Hex(`${prevHash}\n${body}`)}`;
}

/**
 * Whether a sealed event links to `prev`, the hash of the event before it. A v1 event stores its
 * link (prev_hash); a v2 event stores none in D1 (its hash covers `prev`, so the link is checked
 * by recomputing the hash) and carries it in a segment line, where it must be `prev` too.
 */
export function linkHolds(row: AuditRow, prev: string): boolean {
  return row.idempotencyKey === null && row.prevHash === null ? true : row.prevHash === prev;
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

export interface Checkpoint {
  installationId: string;
  seq: number;
  headHash: string;
  keyId: string;
  mac: string;
  createdAt: string;
}

export const CHECKPOINT_COLUMNS = `installation_id AS installationId, seq, head_hash AS headHash, key_id AS keyId, mac, created_at AS createdAt`;

function checkpointMacText(c: Pick<Checkpoint, "installationId" | "seq" | "headHash" | "createdAt">): string {
  return canonicalJson({ v: 1, kind: "audit_checkpoint", installationId: c.installationId, seq: c.seq, headHash: c.headHash, createdAt: c.createdAt });
}

export function checkpointVerifies(keys: AuditKeys, c: Checkpoint): boolean {
  return macVerifies(keys, c.keyId, checkpointMacText(c), c.mac);
}

function newCheckpoint(key: AuditKey, installationId: string, seq: number, headHash: string, createdAt: string): Checkpoint {
  return { installationId, seq, headHash, keyId: key.id, mac: key.mac(checkpointMacText({ installationId, seq, headHash, createdAt })), createdAt };
}

const anchorKey = (installationId: string) => `audit/${installationId}/head.json`;

/**
 * The anchor is written only by the scheduled audit sweep (once a minute), an explicit
 * verification and the backup paths: the seal after an API write, and the one before the trail is
 * read, checkpoint in D1 and mark the anchor due (audit_anchor_due). A verification, which callers
 * may send at any rate, moves it at most once a second (R2 takes about one write a second per key).
 */
export const VERIFY_ANCHOR_INTERVAL_MS = 1_000;

export interface HeldAnchor {
  checkpoint: Checkpoint;
  etag: string;
  uploaded: Date;
}

export async function readAnchor(env: Env, installationId: string): Promise<HeldAnchor | null> {
  const object = await env.AUDIT_ANCHORS.get(anchorKey(installationId));
  if (!object) return null;
  return { checkpoint: (await object.json()) as Checkpoint, etag: object.etag, uploaded: object.uploaded };
}

/** The seq of the checkpoint the R2 anchor holds, or null when there is no anchor yet. */
export async function anchoredSeq(env: Env, installationId: string): Promise<number | null> {
  return (await readAnchor(env, installationId))?.checkpoint.seq ?? null;
}

/**
 * Puts `checkpoint` in R2 unless R2 already holds a newer one (conditional on the object read).
 * Returns whether the anchor now holds it (or a newer one): false when it was written less than
 * `minIntervalMs` ago under the same key, or lost every race, and the next sweep moves it.
 */
async function advanceAnchor(env: Env, keys: AuditKeys, checkpoint: Checkpoint, anchor: HeldAnchor | null, minIntervalMs: number): Promise<boolean> {
  let current = anchor;
  for (let attempt = 0; attempt < 3; attempt++) {
    const held = current?.checkpoint;
    const rotated = held !== undefined && held.seq === checkpoint.seq && held.keyId !== checkpoint.keyId && held.keyId !== keys.current?.id;
    const newer = !held || held.seq < checkpoint.seq || rotated;
    if (!newer) return true;
    // A re-signing after a key rotation is not held back: the held anchor no longer verifies under the current key alone.
    if (current && !rotated && Date.now() - current.uploaded.getTime() < minIntervalMs) return false;
    const put = await env.AUDIT_ANCHORS.put(anchorKey(checkpoint.installationId), JSON.stringify(checkpoint), {
      httpMetadata: { contentType: "application/json" },
      ...(current ? { onlyIf: { etagMatches: current.etag } } : {}),
    });
    if (put) return true;
    current = await readAnchor(env, checkpoint.installationId); // another writer wrote meanwhile
  }
  return false;
}

/** Marks the anchor due for the schedule: keeps the oldest due time, so the sweep takes the longest-waiting first. */
function anchorDueStatement(db: D1Database, installationId: string, seq: number, at: string): D1PreparedStatement {
  return db
    .prepare(`INSERT INTO audit_anchor_due (installation_id, seq, due_at) VALUES (?1, ?2, ?3)
      ON CONFLICT (installation_id) DO UPDATE SET seq = MAX(audit_anchor_due.seq, excluded.seq)`)
    .bind(installationId, seq, at);
}

async function headRow(db: D1Database, installationId: string): Promise<{ seq: number; hash: string } | null> {
  const head = await db.prepare(`SELECT seq, hash FROM audit_events WHERE installation_id = ?1 AND hash IS NOT NULL ORDER BY seq DESC LIMIT 1`).bind(installationId).first<{ seq: number; hash: string }>();
  return head ? { seq: head.seq, hash: readHash(head.hash)! } : null;
}

export async function hashAt(db: D1Database, installationId: string, seq: number): Promise<string | null> {
  return readHash((await db.prepare(`SELECT hash FROM audit_events WHERE installation_id = ?1 AND seq = ?2`).bind(installationId, seq).first<{ hash: string | null }>())?.hash ?? null);
}

/**
 * The hash of the event at `seq` in D1 or, once archived, the last hash of the segment ending
 * there (segments end at checkpoints, so a checkpoint's event is always one or the other). An
 * anchor may briefly point at an archived event: a seal inserts its checkpoint before it moves
 * the anchor, and the segment sweep may archive up to the checkpoint before the new one meanwhile.
 */
export async function checkpointedHashAt(db: D1Database, installationId: string, seq: number): Promise<string | null> {
  const hot = await hashAt(db, installationId, seq);
  if (hot !== null) return hot;
  const segment = await segmentAt(db, installationId, seq);
  return segment?.toSeq === seq ? segment.lastHash : null;
}

export async function checkpointBounds(db: D1Database, installationId: string, options: { keys?: AuditKeys; anchored?: () => Promise<boolean> } = {}): Promise<{ first: number | null; last: number | null }> {
  const keys = options.keys ?? auditKeys();
  // Without a configured key nothing is verifiable (and entryMacHolds accepts every event).
  if (keys.byId.size === 0) {
    return (await db.prepare(`SELECT MIN(seq) AS first, MAX(seq) AS last FROM audit_checkpoints WHERE installation_id = ?1`).bind(installationId).first<{ first: number | null; last: number | null }>()) ?? { first: null, last: null };
  }
  // Only checkpoints whose MAC verifies bound anything: a row someone wrote into D1 (or one whose
  // key id was changed) cannot widen the events accepted without a MAC or under an unknown key.
  const [low, high] = await db.batch<Checkpoint>([
    db.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 ORDER BY seq LIMIT ${BOUND_SCAN}`).bind(installationId),
    db.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 ORDER BY seq DESC LIMIT ${BOUND_SCAN}`).bind(installationId),
  ]);
  const lows = low?.results ?? [];
  if (lows.length === 0) {
    // No checkpoint at all: events from before the chain was anchored may still be adopted, unless
    // an anchor exists in R2 (then the rows were removed, and nothing without a MAC is accepted).
    return (await options.anchored?.()) ? { first: 0, last: 0 } : { first: null, last: null };
  }
  const first = lows.find((c) => checkpointVerifies(keys, c))?.seq ?? 0;
  const last = (high?.results ?? []).find((c) => checkpointVerifies(keys, c))?.seq ?? 0;
  return { first, last };
}

/** Checkpoints looked at from each end for a verifiable bound (more than any key rotation leaves unverifiable). */
const BOUND_SCAN = 50;

/**
 * Writes a checkpoint at the sealed head unless the chain no longer passes through the newest
 * checkpoint or the R2 anchor — then it writes nothing, so the evidence stays for verify to report.
 * With `anchorIntervalMs` it also moves the R2 anchor to the newest checkpoint, unless the anchor
 * was written less than that long ago; with null, it marks the anchor due for the scheduled sweep. Existing chains get their first
 * checkpoint here. Returns whether it wrote a checkpoint.
 */
export async function checkpointHead(env: Env, installationId: string, keys: AuditKeys, anchorIntervalMs: number | null): Promise<boolean> {
  const moveAnchor = anchorIntervalMs !== null;
  const key = keys.current;
  if (!key) return false;
  const head = await headRow(env.DB, installationId);
  if (!head) return false;
  const latest = await env.DB.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 ORDER BY seq DESC, created_at DESC LIMIT 1`).bind(installationId).first<Checkpoint>();
  const atHead = latest !== null && latest.seq === head.seq && latest.keyId === key.id;
  if (atHead && !moveAnchor) return false;
  if (latest && (latest.seq > head.seq || (await hashAt(env.DB, installationId, latest.seq)) !== latest.headHash)) return false;
  const anchor = await readAnchor(env, installationId);
  if (anchor) {
    const held = anchor.checkpoint;
    if (held.installationId !== installationId || !checkpointVerifies(keys, held) || held.seq > head.seq) return false;
    if ((await checkpointedHashAt(env.DB, installationId, held.seq)) !== held.headHash) return false;
  }
  const at = new Date().toISOString();
  let stored: Checkpoint | null = latest;
  if (!atHead) {
    const checkpoint = newCheckpoint(key, installationId, head.seq, head.hash, at);
    await env.DB.batch([
      env.DB.prepare(`INSERT OR IGNORE INTO audit_checkpoints (installation_id, seq, head_hash, key_id, mac, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`).bind(
        checkpoint.installationId,
        checkpoint.seq,
        checkpoint.headHash,
        checkpoint.keyId,
        checkpoint.mac,
        checkpoint.createdAt,
      ),
      ...(moveAnchor ? [] : [anchorDueStatement(env.DB, installationId, checkpoint.seq, at)]),
    ]);
    // Two seals may checkpoint the same head at once (an after-write seal and the schedule's, or
    // verify's): the row stored first wins, and the anchor must hold that one, not this seal's
    // (same head, another time, so another MAC), or verify would find the anchor out of the chain.
    stored = (await env.DB.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 AND seq = ?2 AND key_id = ?3`).bind(installationId, checkpoint.seq, checkpoint.keyId).first<Checkpoint>()) ?? checkpoint;
  }
  if (moveAnchor && stored) {
    if (await advanceAnchor(env, keys, stored, anchor, anchorIntervalMs)) {
      await env.DB.prepare(`DELETE FROM audit_anchor_due WHERE installation_id = ?1 AND seq <= ?2`).bind(installationId, stored.seq).run();
    } else {
      await anchorDueStatement(env.DB, installationId, stored.seq, at).run();
    }
  }
  return !atHead;
}

// ---------------------------------------------------------------------------------------------
// Entry MACs

/**
 * Whether an event's MAC holds. An event without one is accepted only up to the first checkpoint
 * (events written before the chain was anchored, adopted by that checkpoint); one under a key that
 * is no longer configured only where a checkpoint already covers it.
 */
export function entryMacHolds(keys: AuditKeys, row: AuditRow, bounds: { first: number | null; last: number | null }): boolean {
  if (keys.byId.size === 0) return true; // no audit key configured: nothing to check against
  if (row.entryMac === null) return bounds.first === null || row.seq <= bounds.first;
  const separator = row.entryMac.indexOf(":");
  const keyId = row.entryMac.slice(0, separator);
  if (!keys.byId.has(keyId)) return bounds.last !== null && row.seq <= bounds.last;
  return macVerifies(keys, keyId, entryMacText(row), row.entryMac.slice(separator + 1));
}

// ---------------------------------------------------------------------------------------------
// Sealing

/**
 * Chains every not-yet-sealed event of the installation, in order (up to SEAL_MAX_EVENTS), and
 * checkpoints the new head. Safe to run concurrently. It stops before a gap or an event whose MAC
 * does not hold, leaving it unsealed for verify to name.
 */
// After-write seals, coalesced per installation and isolate: one at a time, at most one every
// AFTER_WRITE_SEAL_MS. A seal catches up every unsealed event, so one seal covers a burst of writes;
// the schedule (every minute) and /audit/verify seal whatever a coalesced burst left.
const AFTER_WRITE_SEAL_MS = 2_000;
const afterWrite = new Map<string, { at: number; running: boolean }>();

/** The seal after a write, coalesced (see above). */
export async function sealAuditChainAfterWrite(env: Env, installationId: string): Promise<number> {
  const state = afterWrite.get(installationId);
  const now = Date.now();
  if (state && (state.running || now - state.at < AFTER_WRITE_SEAL_MS)) return 0;
  if (afterWrite.size > 1_000) afterWrite.clear();
  const entry = { at: now, running: true };
  afterWrite.set(installationId, entry);
  try {
    // Links and checkpoints in D1 only: the R2 anchor is the schedule's to move (one writer per key).
    return await sealAuditChain(env, installationId, { anchor: false });
  } finally {
    entry.running = false;
    entry.at = Date.now();
  }
}

/**
 * `anchor`: whether this seal also moves the R2 anchor (the scheduled sweep, verification and
 * backups do; the seal after a write and the one before a read only mark it due), unless it was
 * written less than `anchorIntervalMs` ago.
 */
export async function sealAuditChain(env: Env, installationId: string, options: { anchor: boolean; anchorIntervalMs?: number } = { anchor: true }): Promise<number> {
  const keys = auditKeys(env);
  const bounds = await checkpointBounds(env.DB, installationId, { anchored: async () => (await readAnchor(env, installationId)) !== null });
  let sealed = 0;
  for (;;) {
    const last = await headRow(env.DB, installationId);
    const { results: stored } = await env.DB.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE installation_id = ?1 AND hash IS NULL AND seq > ?2 ORDER BY seq LIMIT ?3`)
      .bind(installationId, last?.seq ?? 0, PAGE)
      .all<AuditRow>();
    const results = stored.map(fromStored);
    let prev = last?.hash ?? GENESIS_HASH;
    let expected = (last?.seq ?? 0) + 1;
    // Each link as stored: a v1 row gets prev_hash and its hex hash, a v2 row only its hash, in
    // base64url. The page's events are consecutive (from `first`), so the i-th link is the one of seq first + i.
    const first = expected;
    const updates: { prev: string | null; hash: string }[] = [];
    for (const row of results) {
      // A gap means an event vanished before it was sealed; a MAC that does not hold, an event
      // changed before it was sealed. Stop so verify reports it.
      if (row.seq !== expected || !entryMacHolds(keys, row, bounds)) break;
      const hash = await eventHash(prev, row);
      updates.push(row.idempotencyKey === null ? { prev: null, hash: storeHash(hash) } : { prev, hash });
      prev = hash;
      expected += 1;
    }
    // The page's links in one statement (one query, not one per event), each row found by seq; each row still only once, while unsealed.
    if (updates.length > 0) {
      await env.DB.prepare(`UPDATE audit_events SET prev_hash = ?1 ->> ('$[' || CAST(seq - ?3 AS INTEGER) || '].prev'), hash = ?1 ->> ('$[' || CAST(seq - ?3 AS INTEGER) || '].hash')
        WHERE installation_id = ?2 AND seq BETWEEN ?3 AND ?4 AND hash IS NULL`)
        .bind(JSON.stringify(updates), installationId, first, first + updates.length - 1)
        .run();
    }
    sealed += updates.length;
    await yieldToRuntime(); // a page at a time: requests are read between pages (lib/queue-work.ts)
    if (updates.length === 0 || updates.length < results.length || results.length < PAGE || sealed >= SEAL_MAX_EVENTS) break;
  }
  await checkpointHead(env, installationId, keys, options.anchor ? (options.anchorIntervalMs ?? 0) : null);
  return sealed;
}

export function serializeAuditRow(row: AuditRow) {
  let details: unknown;
  try {
    details = JSON.parse(row.detailsJson);
  } catch {
    details = null;
  }
  return {
    id: row.id,
    seq: row.seq,
    action: row.action,
    actor: { type: row.actorType, id: row.actorId },
    target: { type: row.targetType, id: row.targetId },
    details,
    createdAt: row.createdAt,
    hash: row.hash,
    prevHash: row.prevHash,
  };
}
