// Audit segments: sealed, checkpointed history moved out of D1 into immutable R2 objects
// (AUDIT_ANCHORS), one canonical JSON line (RFC 8785) per event with every column verification
// needs. A segment covers a contiguous seq range that ends at a keyed checkpoint; D1 keeps its
// index row (audit_segments: range, first and last hash, the object's SHA-256 and size), so an
// edited, deleted or replaced object is caught by full verification (chain.ts walks segments,
// then the hot rows). Keys derive from ids only:
//
//   audit/<installationId>/segments/<fromSeq, 12 digits>-<toSeq, 12 digits>.jsonl
//
// This module holds the layout: keys, the line format, the index, and reading an object line by
// line (streamed, never a whole trail in memory). The sweep that writes segments is
// segment-sweep.ts.
/// <reference path="../lib/node-crypto.d.ts" />
import { createHash } from "node:crypto";
import { AppError } from "../errors";
import { canonicalJson } from "./canonical-json";
import type { AuditRow } from "./chain";

export interface AuditSegment {
  installationId: string;
  fromSeq: number;
  toSeq: number;
  firstHash: string;
  lastHash: string;
  /** Hex SHA-256 of the object's bytes. */
  sha256: string;
  bytes: number;
  createdAt: string;
}

export const SEGMENT_COLUMNS = `installation_id AS installationId, from_seq AS fromSeq, to_seq AS toSeq, first_hash AS firstHash,
  last_hash AS lastHash, sha256, bytes, created_at AS createdAt`;

const pad = (seq: number) => String(seq).padStart(12, "0");

export const segmentPrefix = (installationId: string) => `audit/${installationId}/segments/`;

/** The object key of the segment [fromSeq, toSeq] (ids only). */
export const segmentKey = (installationId: string, fromSeq: number, toSeq: number) => `${segmentPrefix(installationId)}${pad(fromSeq)}-${pad(toSeq)}.jsonl`;

/**
 * The target index: one empty marker object per (target, segment) that holds an event about that
 * target, so the events of one target are found in the few segments that hold them, not by reading
 * the whole archived trail. Keys derive from ids only (a repeated pass writes the same keys); a
 * marker counts only for a segment indexed in audit_segments with that range.
 *
 *   audit/<installationId>/targets/<encoded targetId>/<fromSeq, 12 digits>-<toSeq, 12 digits>
 */
export const targetsPrefix = (installationId: string) => `audit/${installationId}/targets/`;

/** A target id as one key segment: percent-encoded (no slash), or its SHA-256 when that is long. */
function targetPart(targetId: string): string {
  const encoded = encodeURIComponent(targetId);
  return encoded.length <= 512 ? encoded : `sha256-${createHash("sha256").update(targetId).digest("hex")}`;
}

export const targetPrefix = (installationId: string, targetId: string) => `${targetsPrefix(installationId)}${targetPart(targetId)}/`;

const MARKER_PUTS_AT_ONCE = 32;

/** Writes the target markers of the segment [fromSeq, toSeq] for the targets its events name. */
export async function indexSegmentTargets(bucket: R2Bucket, installationId: string, fromSeq: number, toSeq: number, targetIds: Iterable<string>): Promise<number> {
  const keys = [...new Set(targetIds)].map((targetId) => `${targetPrefix(installationId, targetId)}${pad(fromSeq)}-${pad(toSeq)}`);
  for (let i = 0; i < keys.length; i += MARKER_PUTS_AT_ONCE) await Promise.all(keys.slice(i, i + MARKER_PUTS_AT_ONCE).map((key) => bucket.put(key, new Uint8Array(0))));
  return keys.length;
}

/** Writes the target markers of a segment object already in R2 (a restored one), from its lines. */
export async function indexSegmentObjectTargets(bucket: R2Bucket, installationId: string, fromSeq: number, toSeq: number): Promise<number> {
  const reader = await openSegment(bucket, segmentKey(installationId, fromSeq, toSeq));
  if (!reader) return 0;
  const targets = new Set<string>();
  try {
    for await (const line of reader.lines()) {
      const row = parseSegmentLine(line);
      if (row && row.installationId === installationId) targets.add(row.targetId);
    }
  } finally {
    await reader.close();
  }
  return indexSegmentTargets(bucket, installationId, fromSeq, toSeq, targets);
}

/**
 * Indexed segments holding events about `targetId` after `afterSeq`, oldest first, at most `limit`
 * (from the markers; a marker whose range is not an indexed segment is a leftover and ignored).
 */
export async function segmentsOfTarget(env: Env, installationId: string, targetId: string, afterSeq: number, limit: number): Promise<AuditSegment[]> {
  const prefix = targetPrefix(installationId, targetId);
  const ranges: Array<{ fromSeq: number; toSeq: number }> = [];
  let cursor: string | undefined;
  do {
    const listed = await env.AUDIT_ANCHORS.list({ prefix, cursor, limit: 1000 });
    for (const object of listed.objects) {
      const match = /^(\d{12})-(\d{12})$/u.exec(object.key.slice(prefix.length));
      if (match && Number(match[2]) > afterSeq) ranges.push({ fromSeq: Number(match[1]), toSeq: Number(match[2]) });
    }
    cursor = listed.truncated && ranges.length < limit * 2 ? listed.cursor : undefined;
  } while (cursor);
  if (ranges.length === 0) return [];
  const wanted = ranges.slice(0, limit * 2);
  const { results } = await env.DB.prepare(`SELECT ${SEGMENT_COLUMNS} FROM audit_segments WHERE installation_id = ?1 AND from_seq IN (SELECT value FROM json_each(?2)) ORDER BY from_seq`)
    .bind(installationId, JSON.stringify(wanted.map((r) => r.fromSeq)))
    .all<AuditSegment>();
  const indexed = results.filter((segment) => wanted.some((r) => r.fromSeq === segment.fromSeq && r.toSeq === segment.toSeq));
  return indexed.slice(0, limit);
}

/** The keys of every segment starting at `fromSeq` (one indexed; others are leftovers of an interrupted pass). */
export const segmentStartPrefix = (installationId: string, fromSeq: number) => `${segmentPrefix(installationId)}${pad(fromSeq)}-`;

/**
 * One event as a segment line: canonical JSON of the row's columns, newline-terminated, hashes and
 * MACs in hex whatever the row's stored form. A lean (v2) event's line has `idempotencyKey` null
 * (its id is the key's digest) and names its link (`prevHash`) like any other.
 */
export function segmentLine(row: AuditRow): string {
  return `${canonicalJson({
    seq: row.seq,
    id: row.id,
    installationId: row.installationId,
    idempotencyKey: row.idempotencyKey,
    action: row.action,
    actorType: row.actorType,
    actorId: row.actorId,
    targetType: row.targetType,
    targetId: row.targetId,
    detailsJson: row.detailsJson,
    createdAt: row.createdAt,
    entryMac: row.entryMac,
    prevHash: row.prevHash,
    hash: row.hash,
  })}\n`;
}

const STRING_FIELDS = ["id", "installationId", "action", "actorType", "actorId", "targetType", "targetId", "detailsJson", "createdAt"] as const;
const NULLABLE_FIELDS = ["idempotencyKey", "entryMac", "prevHash", "hash"] as const;

/** A segment line back as the row it was, or null when it is not one. */
export function parseSegmentLine(line: string): AuditRow | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const record = value as Record<string, unknown>;
  if (!Number.isSafeInteger(record.seq)) return null;
  for (const field of STRING_FIELDS) if (typeof record[field] !== "string") return null;
  for (const field of NULLABLE_FIELDS) if (record[field] !== null && typeof record[field] !== "string") return null;
  return {
    id: record.id as string,
    seq: record.seq as number,
    installationId: record.installationId as string,
    idempotencyKey: record.idempotencyKey as string | null,
    action: record.action as string,
    actorType: record.actorType as string,
    actorId: record.actorId as string,
    targetType: record.targetType as string,
    targetId: record.targetId as string,
    detailsJson: record.detailsJson as string,
    createdAt: record.createdAt as string,
    prevHash: record.prevHash as string | null,
    hash: record.hash as string | null,
    entryMac: record.entryMac as string | null,
  };
}

/** The index row of the segment holding `seq`, if any. */
export async function segmentAt(db: D1Database, installationId: string, seq: number): Promise<AuditSegment | null> {
  const segment = await db.prepare(`SELECT ${SEGMENT_COLUMNS} FROM audit_segments WHERE installation_id = ?1 AND from_seq <= ?2 ORDER BY from_seq DESC LIMIT 1`).bind(installationId, seq).first<AuditSegment>();
  return segment && segment.toSeq >= seq ? segment : null;
}

/** The newest segment of an installation (the one the first hot event links to). */
export async function lastSegment(db: D1Database, installationId: string): Promise<AuditSegment | null> {
  return db.prepare(`SELECT ${SEGMENT_COLUMNS} FROM audit_segments WHERE installation_id = ?1 ORDER BY from_seq DESC LIMIT 1`).bind(installationId).first<AuditSegment>();
}

/** Segments holding events after `afterSeq`, oldest first. */
export async function segmentsAfter(db: D1Database, installationId: string, afterSeq: number, limit: number): Promise<AuditSegment[]> {
  return (await db.prepare(`SELECT ${SEGMENT_COLUMNS} FROM audit_segments WHERE installation_id = ?1 AND to_seq > ?2 ORDER BY from_seq LIMIT ?3`).bind(installationId, afterSeq, limit).all<AuditSegment>()).results;
}

export interface SegmentReader {
  /** Each line (without its newline) in order; a last line without one is yielded too. */
  lines(): AsyncGenerator<string>;
  /** Hex SHA-256 of every byte read so far (of the whole object once `lines` is exhausted). */
  digest(): string;
  /** Stops reading (the body is cancelled). */
  close(): Promise<void>;
}

/** Opens a segment object for streaming, or null when it is missing. */
export async function openSegment(bucket: R2Bucket, key: string): Promise<SegmentReader | null> {
  const object = await bucket.get(key);
  if (!object) return null;
  const reader = object.body.getReader();
  const hash = createHash("sha256");
  let done = false;
  return {
    async *lines() {
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        hash.update(chunk.value);
        buffer += decoder.decode(chunk.value, { stream: true });
        let newline = buffer.indexOf("\n");
        while (newline >= 0) {
          yield buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          newline = buffer.indexOf("\n");
        }
      }
      done = true;
      buffer += decoder.decode();
      if (buffer.length > 0) yield buffer;
    },
    digest: () => hash.digest("hex"),
    async close() {
      if (!done) await reader.cancel().catch(() => undefined);
    },
  };
}

/**
 * Archived events after `afterSeq` that `keep` accepts, for a listing page: reads at most
 * `maxSegments` segments, stopping once `limit` rows are found. `scannedTo` is the last seq read;
 * `exhausted` says no segment holds anything beyond it.
 */
export async function readArchivedEvents(
  env: Env,
  installationId: string,
  afterSeq: number,
  limit: number,
  keep: (row: AuditRow) => boolean,
  maxSegments = 3,
  options: { targetId?: string } = {},
): Promise<{ rows: AuditRow[]; scannedTo: number; exhausted: boolean }> {
  // With a target, only the segments its markers name (a read of one target's events stays a few
  // objects however long the archived trail is); otherwise every segment in order.
  const segments = options.targetId === undefined ? await segmentsAfter(env.DB, installationId, afterSeq, maxSegments + 1) : await segmentsOfTarget(env, installationId, options.targetId, afterSeq, maxSegments + 1);
  const rows: AuditRow[] = [];
  let scannedTo = afterSeq;
  for (const segment of segments.slice(0, maxSegments)) {
    const key = segmentKey(installationId, segment.fromSeq, segment.toSeq);
    const reader = await openSegment(env.AUDIT_ANCHORS, key);
    if (!reader) throw new AppError("audit.segment_unavailable", "An archived segment of the audit trail is missing from R2; run a full verification (GET /api/v1/audit/verify?mode=full).", { status: 503 });
    try {
      for await (const line of reader.lines()) {
        const row = parseSegmentLine(line);
        if (!row || row.installationId !== installationId)
          throw new AppError("audit.segment_unavailable", "An archived segment of the audit trail cannot be read; run a full verification (GET /api/v1/audit/verify?mode=full).", { status: 503 });
        if (row.seq <= scannedTo) continue;
        if (keep(row)) rows.push(row);
        scannedTo = row.seq;
        if (rows.length >= limit) return { rows, scannedTo, exhausted: false };
      }
    } finally {
      await reader.close();
    }
    scannedTo = Math.max(scannedTo, segment.toSeq);
  }
  return { rows, scannedTo, exhausted: segments.length <= maxSegments };
}

/** Removes every segment object and target marker of an installation (its index rows go with its other D1 rows); answers the segments removed. */
export async function deleteAuditSegments(env: Env, installationId: string): Promise<number> {
  let deleted = 0;
  for (const prefix of [segmentPrefix(installationId), targetsPrefix(installationId)]) {
    let cursor: string | undefined;
    do {
      const listed = await env.AUDIT_ANCHORS.list({ prefix, cursor, limit: 1000 });
      const keys = listed.objects.map((object) => object.key);
      if (keys.length > 0) await env.AUDIT_ANCHORS.delete(keys);
      if (prefix === segmentPrefix(installationId)) deleted += keys.length;
      cursor = listed.truncated ? listed.cursor : undefined;
    } while (cursor);
  }
  return deleted;
}
