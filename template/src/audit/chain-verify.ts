// Verification of the audit chain over both tiers: the walk from a position through R2 segments
// (segments.ts) and D1 rows, what counts as a break (MAC, seal, link, hash, checkpoints, a gap),
// the tail against the R2 anchor, and the verdicts `GET /audit/verify` and the schedule report
// (chain.ts seals, checkpoints and anchors).
import { yieldToRuntime } from "../lib/queue-work";
import {
  AUDIT_COLUMNS,
  type AuditRow,
  CHECKPOINT_COLUMNS,
  type Checkpoint,
  checkpointBounds,
  checkpointedHashAt,
  checkpointHead,
  checkpointVerifies,
  entryMacHolds,
  eventHash,
  fromStored,
  GENESIS_HASH,
  hashAt,
  linkHolds,
  PAGE,
  readAnchor,
  sealAuditChain,
  VERIFY_ANCHOR_INTERVAL_MS,
} from "./chain";
import { AppError } from "../errors";
import { auditKeys, macVerifies, signText, type AuditKeys } from "./keys";
import { type AuditSegment, lastSegment, openSegment, parseSegmentLine, segmentAt, segmentKey } from "./segments";
export type BrokenReason =
  | "hash_mismatch"
  | "prev_hash_mismatch"
  | "seq_gap"
  | "unsealed"
  | "entry_mac_mismatch"
  | "checkpoint_invalid"
  | "checkpoint_mismatch"
  | "tail_missing"
  | "anchor_missing"
  | "anchor_mismatch"
  // An archived segment (segments.ts): its object is gone, its bytes are not the ones indexed,
  // a line is not an event, or its events do not match its index row (range, first or last hash).
  | "segment_missing"
  | "segment_digest_mismatch"
  | "segment_line_invalid"
  | "segment_mismatch";

export interface Broken {
  seq: number;
  id: string | null;
  reason: BrokenReason;
  /** The object key of the archived segment the failure is in, when it is in one. */
  segment?: string;
}

export type ChainVerdict =
  | { ok: true; mode: "incremental" | "full"; events: number; head: string; anchored: boolean; checkedFrom: number; checkpoint: { seq: number; keyId: string; createdAt: string } | null }
  | { ok: false; mode: "incremental" | "full"; events: number; firstBroken: Broken };

export interface WalkPosition {
  /** The next seq expected. */
  seq: number;
  /** The hash of the event before it. */
  prev: string;
}

interface WalkResult {
  position: WalkPosition;
  broken: Broken | null;
  end: boolean;
  checked: number;
}

/** The first failure of one event at `position` (MAC, seal, link, hash, the checkpoints at its seq), or null. */
async function rowBroken(keys: AuditKeys, bounds: { first: number | null; last: number | null }, row: AuditRow, position: WalkPosition, checkpoints: readonly Checkpoint[]): Promise<Broken | null> {
  if (!entryMacHolds(keys, row, bounds)) return { seq: row.seq, id: row.id, reason: "entry_mac_mismatch" };
  if (row.hash === null) return { seq: row.seq, id: row.id, reason: "unsealed" };
  if (!linkHolds(row, position.prev)) return { seq: row.seq, id: row.id, reason: "prev_hash_mismatch" };
  if ((await eventHash(position.prev, row)) !== row.hash) return { seq: row.seq, id: row.id, reason: "hash_mismatch" };
  for (const c of checkpoints) {
    if (!keys.byId.has(c.keyId)) continue; // signed by a retired key: no longer checkable
    if (!checkpointVerifies(keys, c)) return { seq: c.seq, id: null, reason: "checkpoint_invalid" };
    if (c.headHash !== row.hash) return { seq: c.seq, id: row.id, reason: "checkpoint_mismatch" };
  }
  return null;
}

async function checkpointsBetween(db: D1Database, installationId: string, from: number, to: number): Promise<Map<number, Checkpoint[]>> {
  const checkpoints = new Map<number, Checkpoint[]>();
  const { results } = await db.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 AND seq BETWEEN ?2 AND ?3`).bind(installationId, from, to).all<Checkpoint>();
  for (const c of results) checkpoints.set(c.seq, [...(checkpoints.get(c.seq) ?? []), c]);
  return checkpoints;
}

/**
 * Walks one archived segment from `position` (inside it), streaming its object line by line:
 * every line is checked exactly as a hot row, then the range and hashes against the index row,
 * then the object's SHA-256. Moves `position` past the segment; returns the events checked.
 */
async function walkSegment(env: Env, installationId: string, keys: AuditKeys, bounds: { first: number | null; last: number | null }, segment: AuditSegment, position: WalkPosition): Promise<{ broken: Broken | null; checked: number }> {
  const key = segmentKey(installationId, segment.fromSeq, segment.toSeq);
  let checked = 0;
  const broken = (seq: number, id: string | null, reason: BrokenReason) => ({ broken: { seq, id, reason, segment: key }, checked });
  const reader = await openSegment(env.AUDIT_ANCHORS, key);
  if (!reader) return broken(Math.max(position.seq, segment.fromSeq), null, "segment_missing");
  try {
    const checkpoints = await checkpointsBetween(env.DB, installationId, position.seq, segment.toSeq);
    let expected = segment.fromSeq;
    let first: string | null = null;
    for await (const line of reader.lines()) {
      const parsed = parseSegmentLine(line);
      if (!parsed) return broken(expected, null, "segment_line_invalid");
      // Hashed and MAC'd as an event of this installation, whatever the line says.
      const row = { ...parsed, installationId };
      if (row.seq !== expected) return broken(expected, null, expected > segment.toSeq ? "segment_mismatch" : "seq_gap");
      if (row.seq === segment.fromSeq) first = row.hash;
      expected += 1;
      if (row.seq < position.seq) continue; // a resumed pass: links are checked from `position` on
      const failed = await rowBroken(keys, bounds, row, position, checkpoints.get(row.seq) ?? []);
      if (failed) return { broken: { ...failed, segment: key }, checked };
      position.prev = row.hash!;
      position.seq += 1;
      checked += 1;
      if (checked % PAGE === 0) await yieldToRuntime();
    }
    if (expected !== segment.toSeq + 1) return broken(expected, null, "seq_gap");
    if (first !== segment.firstHash || position.prev !== segment.lastHash) return broken(segment.fromSeq, null, "segment_mismatch");
    if (reader.digest() !== segment.sha256) return broken(segment.fromSeq, null, "segment_digest_mismatch");
    return { broken: null, checked };
  } finally {
    await reader.close();
  }
}

/**
 * Recomputes up to `budget` events from `from`, checking MACs, links, hashes and every checkpoint
 * passed: first through archived segments (a segment is walked whole, so a walk may pass the
 * budget by up to one segment), then the rows in D1.
 */
/** Whether any event after `seq` is sealed. */
async function sealedAfter(db: D1Database, installationId: string, seq: number): Promise<boolean> {
  return (await db.prepare(`SELECT 1 AS one FROM audit_events WHERE installation_id = ?1 AND seq > ?2 AND hash IS NOT NULL LIMIT 1`).bind(installationId, seq).first()) !== null;
}

export async function walkChain(env: Env, installationId: string, keys: AuditKeys, bounds: { first: number | null; last: number | null }, from: WalkPosition, budget: number): Promise<WalkResult> {
  const position = { ...from };
  let checked = 0;
  const broken = (value: Broken): WalkResult => ({ position, broken: value, end: true, checked });
  let archivedTo = (await lastSegment(env.DB, installationId))?.toSeq ?? 0;
  while (checked < budget) {
    if (position.seq <= archivedTo) {
      const segment = await segmentAt(env.DB, installationId, position.seq);
      if (segment) {
        const walked = await walkSegment(env, installationId, keys, bounds, segment, position);
        checked += walked.checked;
        if (walked.broken) return broken(walked.broken);
        continue;
      }
    }
    const limit = Math.min(PAGE, budget - checked);
    const results = (await env.DB.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE installation_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3`).bind(installationId, position.seq, limit).all<AuditRow>()).results.map(fromStored);
    // The segment sweep may have archived the events this walk was about to read: look again.
    if (results[0]?.seq !== position.seq && (await segmentAt(env.DB, installationId, position.seq))) {
      archivedTo = (await lastSegment(env.DB, installationId))?.toSeq ?? 0;
      continue;
    }
    const checkpoints = results.length > 0 ? await checkpointsBetween(env.DB, installationId, results[0]!.seq, results.at(-1)!.seq) : new Map<number, Checkpoint[]>();
    for (const row of results) {
      if (row.seq !== position.seq) return broken({ seq: position.seq, id: null, reason: "seq_gap" });
      // An event written after this walk's seal (another request's, a moment ago) is the tail the
      // next seal chains, not a break: the walk ends before it, provided its MAC holds and nothing
      // after it is sealed (the sealer never skips an event, so a sealed one after it is a break).
      if (row.hash === null && entryMacHolds(keys, row, bounds) && !(await sealedAfter(env.DB, installationId, row.seq))) return { position, broken: null, end: true, checked };
      const failed = await rowBroken(keys, bounds, row, position, checkpoints.get(row.seq) ?? []);
      if (failed) return broken(failed);
      position.prev = row.hash!;
      position.seq += 1;
      checked += 1;
    }
    if (results.length < limit) return { position, broken: null, end: true, checked };
    // Up to 20,000 events a sweep: let the runtime read its sockets between pages (lib/queue-work.ts).
    await yieldToRuntime();
  }
  return { position, broken: null, end: false, checked };
}

/** After a walk reached the head: no checkpoint lies beyond it, and the R2 anchor is in the chain. */
export async function checkTail(env: Env, installationId: string, keys: AuditKeys, head: WalkPosition): Promise<Broken | null> {
  const headSeq = head.seq - 1;
  const beyond = await env.DB.prepare(`SELECT seq FROM audit_checkpoints WHERE installation_id = ?1 AND seq > ?2 ORDER BY seq LIMIT 1`).bind(installationId, headSeq).first<{ seq: number }>();
  if (beyond) return { seq: beyond.seq, id: null, reason: "tail_missing" };
  if (!keys.current) return null;
  const anchor = await readAnchor(env, installationId);
  const newest = await env.DB.prepare(`SELECT seq FROM audit_checkpoints WHERE installation_id = ?1 ORDER BY seq DESC LIMIT 1`).bind(installationId).first<{ seq: number }>();
  if (!anchor) return newest ? { seq: newest.seq, id: null, reason: "anchor_missing" } : null;
  const held = anchor.checkpoint;
  if (held.installationId !== installationId || !checkpointVerifies(keys, held)) return { seq: Number(held.seq) || 0, id: null, reason: "checkpoint_invalid" };
  if (held.seq > headSeq) return { seq: held.seq, id: null, reason: "tail_missing" };
  const row = await env.DB.prepare(`SELECT head_hash AS headHash, mac FROM audit_checkpoints WHERE installation_id = ?1 AND seq = ?2 AND key_id = ?3`).bind(installationId, held.seq, held.keyId).first<{ headHash: string; mac: string }>();
  if (row?.headHash !== held.headHash || row.mac !== held.mac) return { seq: held.seq, id: null, reason: "anchor_mismatch" };
  if ((await checkpointedHashAt(env.DB, installationId, held.seq)) !== held.headHash) return { seq: held.seq, id: null, reason: "checkpoint_mismatch" };
  return null;
}

export async function markVerified(env: Env, installationId: string, headSeq: number, at: string): Promise<void> {
  await env.DB.prepare(`UPDATE audit_checkpoints SET verified_at = ?3 WHERE installation_id = ?1 AND verified_at IS NULL
      AND seq = (SELECT MAX(seq) FROM audit_checkpoints WHERE installation_id = ?1 AND seq <= ?2)`)
    .bind(installationId, headSeq, at)
    .run();
}

/**
 * Where an incremental verification starts: after the newest checkpoint a verification reached,
 * which must still verify and still match the chain at its seq.
 */
async function incrementalStart(env: Env, installationId: string, keys: AuditKeys): Promise<{ position: WalkPosition } | { broken: Broken }> {
  const { results } = await env.DB.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 AND verified_at IS NOT NULL ORDER BY seq DESC LIMIT 5`).bind(installationId).all<Checkpoint>();
  const start = results.find((c) => keys.byId.has(c.keyId));
  if (!start) return { position: { seq: 1, prev: GENESIS_HASH } };
  if (!checkpointVerifies(keys, start)) return { broken: { seq: start.seq, id: null, reason: "checkpoint_invalid" } };
  const hash = await hashAt(env.DB, installationId, start.seq);
  if (hash === null) {
    // Its event was archived: start after the newest segment instead, which ends at a checkpoint
    // whose head must be the segment's last hash (the hot rows are then walked from there).
    const segment = await lastSegment(env.DB, installationId);
    if (segment && segment.toSeq >= start.seq) {
      const { results: ends } = await env.DB.prepare(`SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE installation_id = ?1 AND seq = ?2`).bind(installationId, segment.toSeq).all<Checkpoint>();
      const end = ends.find((c) => keys.byId.has(c.keyId));
      if (!end) return { position: { seq: 1, prev: GENESIS_HASH } };
      if (!checkpointVerifies(keys, end)) return { broken: { seq: end.seq, id: null, reason: "checkpoint_invalid" } };
      if (end.headHash !== segment.lastHash) return { broken: { seq: end.seq, id: null, reason: "checkpoint_mismatch", segment: segmentKey(installationId, segment.fromSeq, segment.toSeq) } };
      return { position: { seq: segment.toSeq + 1, prev: segment.lastHash } };
    }
  }
  if (hash !== start.headHash) return { broken: { seq: start.seq, id: null, reason: "checkpoint_mismatch" } };
  return { position: { seq: start.seq + 1, prev: start.headHash } };
}

/**
 * Seals, then verifies the chain: `incremental` from the last checkpoint a verification reached
 * (the work grows with the events since, not with the trail), `full` from the first event. Both
 * check every checkpoint they pass, that no checkpoint lies beyond the head and that the R2 anchor
 * is in the chain; the first failure is named.
 */
export async function verifyAuditChain(env: Env, installationId: string, mode: "incremental" | "full" = "incremental"): Promise<ChainVerdict> {
  await sealAuditChain(env, installationId, { anchor: true, anchorIntervalMs: VERIFY_ANCHOR_INTERVAL_MS });
  const keys = auditKeys(env);
  const bounds = await checkpointBounds(env.DB, installationId, { anchored: async () => (await readAnchor(env, installationId)) !== null });
  let from: WalkPosition = { seq: 1, prev: GENESIS_HASH };
  if (mode === "incremental" && keys.current) {
    const start = await incrementalStart(env, installationId, keys);
    if ("broken" in start) return { ok: false, mode, events: start.broken.seq - 1, firstBroken: start.broken };
    from = start.position;
  }
  const walked = await walkChain(env, installationId, keys, bounds, from, Number.MAX_SAFE_INTEGER);
  return finishVerdict(env, installationId, keys, mode, from, walked);
}

/** Events one `GET /audit/verify?mode=full` request walks at most before it answers with a cursor. */
export const FULL_VERIFY_PAGE_EVENTS = 20_000;

/** A full check that has not reached the head yet: go on with `nextCursor`. */
export type ChainPage = ChainVerdict | { ok: null; mode: "full"; complete: false; checkedFrom: number; checkedTo: number; nextCursor: string };

const cursorText = (installationId: string, position: WalkPosition) => `audit-verify-cursor\u0000${installationId}\u0000${position.seq}\u0000${position.prev}`;

/**
 * A full check walked in pages of at most `budget` events per request: from the first event, or
 * from `cursor` (the position an earlier page reached, MAC'd under the audit key, so no caller
 * can start it past a break). The last page answers as `verifyAuditChain(…, "full")` does.
 * 400 `audit.cursor_invalid` for a cursor this deployment did not make for this installation.
 */
export async function verifyAuditChainPage(env: Env, installationId: string, cursor: string | undefined, budget = FULL_VERIFY_PAGE_EVENTS): Promise<ChainPage> {
  await sealAuditChain(env, installationId, { anchor: true, anchorIntervalMs: VERIFY_ANCHOR_INTERVAL_MS });
  const keys = auditKeys(env);
  let from: WalkPosition = { seq: 1, prev: GENESIS_HASH };
  if (cursor !== undefined) {
    const [seq, prev, keyId, mac] = cursor.split(".");
    const position = { seq: Number(seq), prev: prev ?? "" };
    if (!Number.isSafeInteger(position.seq) || position.seq < 1 || !keyId || !mac || !macVerifies(keys, keyId, cursorText(installationId, position), mac)) {
      throw new AppError("audit.cursor_invalid", "The cursor is not one this deployment made for this installation's full check; start again without it.", { status: 400 });
    }
    from = position;
  }
  const bounds = await checkpointBounds(env.DB, installationId, { anchored: async () => (await readAnchor(env, installationId)) !== null });
  const walked = await walkChain(env, installationId, keys, bounds, from, budget);
  if (!walked.broken && !walked.end) {
    const signed = signText(keys, cursorText(installationId, walked.position));
    if (signed) return { ok: null, mode: "full", complete: false, checkedFrom: from.seq, checkedTo: walked.position.seq - 1, nextCursor: `${walked.position.seq}.${walked.position.prev}.${signed.keyId}.${signed.mac}` };
  }
  return finishVerdict(env, installationId, keys, "full", from, walked);
}

/** The verdict of a walk that ended (at a break or at the head): the tail, the checkpoint, the verified mark. */
async function finishVerdict(env: Env, installationId: string, keys: AuditKeys, mode: "incremental" | "full", from: WalkPosition, walked: WalkResult): Promise<ChainVerdict> {
  if (walked.broken) return { ok: false, mode, events: walked.broken.seq - 1, firstBroken: walked.broken };
  const tail = await checkTail(env, installationId, keys, walked.position);
  if (tail) return { ok: false, mode, events: walked.position.seq - 1, firstBroken: tail };
  const headSeq = walked.position.seq - 1;
  const at = new Date().toISOString();
  const latestCheckpoint = () =>
    env.DB.prepare(`SELECT seq, key_id AS keyId, created_at AS createdAt FROM audit_checkpoints WHERE installation_id = ?1 AND seq <= ?2 ORDER BY seq DESC LIMIT 1`)
      .bind(installationId, headSeq)
      .first<{ seq: number; keyId: string; createdAt: string }>();
  let checkpoint = await latestCheckpoint();
  // A seal running beside this one (the after-write seal of an earlier request) may have linked
  // the head after this seal checkpointed and before it checkpointed the head itself: the head
  // just verified is then checkpointed here, so a verified head is an anchored one.
  if (keys.current && checkpoint?.seq !== headSeq && (await checkpointHead(env, installationId, keys, VERIFY_ANCHOR_INTERVAL_MS))) checkpoint = await latestCheckpoint();
  if (keys.current) await markVerified(env, installationId, headSeq, at);
  return { ok: true, mode, events: headSeq, head: walked.position.prev, anchored: keys.current !== null && checkpoint?.seq === headSeq, checkedFrom: from.seq, checkpoint: checkpoint ?? null };
}
