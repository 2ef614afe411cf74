// The segment sweep: moves each installation's sealed, checkpointed events out of D1 into
// immutable R2 segments (layout in segments.ts): after AUDIT_HOT_MINUTES in segments of at least
// SEGMENT_MIN_EVENTS, and whatever is left once it is older than the installation's hot window. Bounded (SWEEP_EVENTS a
// run; the next minute goes on) and idempotent, in three steps that each survive being cut short:
//
// 1. plan: the range from the first event left in D1 to the newest checkpoint that is at most
//    SEGMENT_MAX_EVENTS on, older than the window, not the installation's newest checkpoint and
//    not past the one the R2 anchor holds (the head stays in D1; the anchor, which the schedule
//    moves up to a minute behind the head, is in D1 or the end of a segment). Deterministic, so a pass cut short plans it again.
// 2. write: the range's rows are checked (contiguous, sealed, MACs, links, hashes, the checkpoint
//    at its end) and put as one object under a key derived from the range — the same bytes under
//    the same key when written again. A range that does not check stays in D1 for verify to name.
// 3. commit: the object is read back and its SHA-256 compared; only then, in one D1 batch, the
//    index row is inserted and the range's rows deleted (the delete only where that index row,
//    with this digest, exists). Objects of the same start left by an earlier, differently planned
//    pass are removed afterwards.
/// <reference path="../lib/node-crypto.d.ts" />
import { createHash } from "node:crypto";
import { yieldToRuntime } from "../lib/queue-work";
import { anchoredSeq, AUDIT_COLUMNS, type AuditRow, checkpointBounds, entryMacHolds, eventHash, fromStored, GENESIS_HASH, linkHolds, readAnchor } from "./chain";
import { auditKeys } from "./keys";
import { AUDIT_HOT_MINUTES, SEGMENT_MIN_EVENTS } from "../lib/storage-tiers";
import { type AuditSegment, indexSegmentTargets, lastSegment, segmentKey, segmentLine, segmentStartPrefix } from "./segments";
import { createdAtText } from "./stored";

/** Days an event stays in D1 after it is written, unless the installation says otherwise. */
export const DEFAULT_AUDIT_HOT_DAYS = 7;
/** At most this many events in one segment (one object, written and read back within a sweep). */
export const SEGMENT_MAX_EVENTS = 10_000;
/**
 * Events archived per sweep run, over all installations. Each segment also writes one R2 marker per
 * target its events name (about 0.4 a event), and R2 calls count toward a Worker invocation's
 * subrequests (10,000 on Workers Paid): 5,000 events is about 2,000 markers a run, and still five
 * times the trail's rate at 100,000 lifecycles a day (about 1,050 events a minute).
 */
const SWEEP_EVENTS = 5_000;
const SWEEP_INSTALLATIONS = 50;
const SCAN_PAGES = 10;
const PAGE = 500;
const DAY_MS = 86_400_000;

export interface SegmentPlan {
  installationId: string;
  fromSeq: number;
  toSeq: number;
  /** The hash the first event links to: the previous segment's last, or the genesis hash. */
  prevHash: string;
}

/** The next segment to archive for an installation, or null (nothing old enough, or the start does not link). */
export async function planSegment(env: Env, installationId: string, cutoff: string, maxEvents = SEGMENT_MAX_EVENTS, minEvents = 1): Promise<SegmentPlan | null> {
  const first = await env.DB.prepare(`SELECT seq FROM audit_events WHERE installation_id = ?1 ORDER BY seq LIMIT 1`).bind(installationId).first<{ seq: number }>();
  if (!first) return null;
  const previous = await lastSegment(env.DB, installationId);
  // The first event in D1 must follow the last segment: a gap stays for verify to report.
  if (first.seq !== (previous ? previous.toSeq + 1 : 1)) return null;
  const newest = await env.DB.prepare(`SELECT MAX(seq) AS seq FROM audit_checkpoints WHERE installation_id = ?1`).bind(installationId).first<{ seq: number | null }>();
  if (!newest?.seq) return null;
  const tooNew = await env.DB.prepare(`SELECT MIN(seq) AS seq FROM audit_events WHERE installation_id = ?1 AND seq BETWEEN ?2 AND ?3 AND (${createdAtText("created_at")} >= ?4 OR hash IS NULL)`)
    .bind(installationId, first.seq, first.seq + maxEvents - 1, cutoff)
    .first<{ seq: number | null }>();
  const anchored = await anchoredSeq(env, installationId);
  const limit = Math.min(first.seq + maxEvents - 1, newest.seq - 1, anchored ?? Number.MAX_SAFE_INTEGER, (tooNew?.seq ?? Number.MAX_SAFE_INTEGER) - 1);
  if (limit < first.seq) return null;
  const end = await env.DB.prepare(`SELECT MAX(seq) AS seq FROM audit_checkpoints WHERE installation_id = ?1 AND seq BETWEEN ?2 AND ?3`).bind(installationId, first.seq, limit).first<{ seq: number | null }>();
  if (!end?.seq || end.seq - first.seq + 1 < minEvents) return null;
  return { installationId, fromSeq: first.seq, toSeq: end.seq, prevHash: previous?.lastHash ?? GENESIS_HASH };
}

/**
 * Checks the planned rows and puts them as the segment's object (same key, same bytes on a
 * retry). Returns the index row to commit, or null when the range does not check (logged as
 * `audit.segment_refused`, installation and seq only) and so stays in D1.
 */
export async function writeSegment(env: Env, plan: SegmentPlan): Promise<AuditSegment | null> {
  const keys = auditKeys(env);
  const bounds = await checkpointBounds(env.DB, plan.installationId, { anchored: async () => (await readAnchor(env, plan.installationId)) !== null });
  const refuse = (seq: number, reason: string) => {
    console.error(JSON.stringify({ event: "audit.segment_refused", installationId: plan.installationId, seq, reason }));
    return null;
  };
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  const hash = createHash("sha256");
  let bytes = 0;
  let prev = plan.prevHash;
  let expected = plan.fromSeq;
  let firstHash: string | null = null;
  const targets = new Set<string>();
  while (expected <= plan.toSeq) {
    const { results: stored } = await env.DB.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE installation_id = ?1 AND seq BETWEEN ?2 AND ?3 ORDER BY seq LIMIT ?4`)
      .bind(plan.installationId, expected, plan.toSeq, PAGE)
      .all<AuditRow>();
    const results = stored.map(fromStored);
    if (results.length === 0) return refuse(expected, "seq_gap");
    for (const row of results) {
      if (row.seq !== expected) return refuse(expected, "seq_gap");
      if (row.hash === null) return refuse(row.seq, "unsealed");
      if (!entryMacHolds(keys, row, bounds)) return refuse(row.seq, "entry_mac_mismatch");
      if (!linkHolds(row, prev) || (await eventHash(prev, row)) !== row.hash) return refuse(row.seq, "hash_mismatch");
      // The line names the link, a lean (v2) row's too (it stores none in D1): a segment reads on its own.
      const line = encoder.encode(segmentLine({ ...row, prevHash: prev }));
      hash.update(line);
      parts.push(line);
      targets.add(row.targetId);
      bytes += line.byteLength;
      firstHash ??= row.hash;
      prev = row.hash;
      expected += 1;
    }
    await yieldToRuntime();
  }
  // The segment ends at a checkpoint whose head is its last hash (checked under a current key).
  const { results: ends } = await env.DB.prepare(`SELECT head_hash AS headHash, key_id AS keyId FROM audit_checkpoints WHERE installation_id = ?1 AND seq = ?2`)
    .bind(plan.installationId, plan.toSeq)
    .all<{ headHash: string; keyId: string }>();
  if (!ends.some((c) => c.headHash === prev)) return refuse(plan.toSeq, "checkpoint_mismatch");
  const body = new Uint8Array(bytes);
  let offset = 0;
  for (const part of parts) {
    body.set(part, offset);
    offset += part.byteLength;
  }
  const sha256 = hash.digest("hex");
  const key = segmentKey(plan.installationId, plan.fromSeq, plan.toSeq);
  await env.AUDIT_ANCHORS.put(key, body, { httpMetadata: { contentType: "application/x-ndjson" }, sha256 });
  // The target markers before the commit: once the rows leave D1, a read by target finds them.
  await indexSegmentTargets(env.AUDIT_ANCHORS, plan.installationId, plan.fromSeq, plan.toSeq, targets);
  return { installationId: plan.installationId, fromSeq: plan.fromSeq, toSeq: plan.toSeq, firstHash: firstHash!, lastHash: prev, sha256, bytes, createdAt: new Date().toISOString() };
}

/**
 * Reads the written object back and, when its bytes are the ones checked, indexes the segment
 * and deletes its rows from D1 in one batch. Returns the rows deleted (0 when the object does not
 * read back as written: nothing is deleted, the next pass writes it again).
 */
export async function commitSegment(env: Env, segment: AuditSegment): Promise<number> {
  const key = segmentKey(segment.installationId, segment.fromSeq, segment.toSeq);
  const object = await env.AUDIT_ANCHORS.get(key);
  if (!object) return 0;
  const read = new Uint8Array(await object.arrayBuffer());
  if (read.byteLength !== segment.bytes || createHash("sha256").update(read).digest("hex") !== segment.sha256) return 0;
  const [, deleted] = await env.DB.batch([
    env.DB.prepare(`INSERT OR IGNORE INTO audit_segments (installation_id, from_seq, to_seq, first_hash, last_hash, sha256, bytes, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`).bind(
      segment.installationId,
      segment.fromSeq,
      segment.toSeq,
      segment.firstHash,
      segment.lastHash,
      segment.sha256,
      segment.bytes,
      segment.createdAt,
    ),
    // Only the range of the index row that holds (a concurrent pass may have indexed another).
    env.DB.prepare(`DELETE FROM audit_events WHERE installation_id = ?1 AND seq BETWEEN ?2 AND ?3
      AND EXISTS (SELECT 1 FROM audit_segments WHERE installation_id = ?1 AND from_seq = ?2 AND to_seq = ?3 AND sha256 = ?4)`).bind(segment.installationId, segment.fromSeq, segment.toSeq, segment.sha256),
    // The checkpoints inside the segment: its end's checkpoint (kept) commits to every event of it,
    // as the chain's first checkpoint (kept) bounds the events from before entry MACs. A checkpoint
    // inside an immutable, indexed segment adds nothing a verification needs, and costs a row each.
    env.DB.prepare(`DELETE FROM audit_checkpoints WHERE installation_id = ?1 AND seq >= ?2 AND seq < ?3
      AND seq > (SELECT MIN(seq) FROM audit_checkpoints WHERE installation_id = ?1)
      AND EXISTS (SELECT 1 FROM audit_segments WHERE installation_id = ?1 AND from_seq = ?2 AND to_seq = ?3 AND sha256 = ?4)`).bind(segment.installationId, segment.fromSeq, segment.toSeq, segment.sha256),
  ]);
  // Objects of the same start under another range: a pass cut short before its commit planned
  // differently. The start is indexed now, so none of them is (or will be) an indexed segment.
  const indexed = await env.DB.prepare(`SELECT to_seq AS toSeq FROM audit_segments WHERE installation_id = ?1 AND from_seq = ?2`).bind(segment.installationId, segment.fromSeq).first<{ toSeq: number }>();
  if (indexed) {
    const own = segmentKey(segment.installationId, segment.fromSeq, indexed.toSeq);
    const listed = await env.AUDIT_ANCHORS.list({ prefix: segmentStartPrefix(segment.installationId, segment.fromSeq), limit: 100 });
    const leftovers = listed.objects.map((o) => o.key).filter((k) => k !== own);
    if (leftovers.length > 0) await env.AUDIT_ANCHORS.delete(leftovers);
  }
  return deleted?.meta.changes ?? 0;
}

export interface SegmentSweepSummary {
  installations: number;
  segments: number;
  events: number;
  refused: number;
  /** 1 when the run stopped at its event budget (or its installation pages) with archivable events left. */
  more: number;
}

/** Archives an installation's events older than `cutoff`, segment by segment, up to `budget` events. */
export async function archiveAuditSegments(env: Env, installationId: string, cutoff: string, budget = SWEEP_EVENTS, minEvents = 1): Promise<Omit<SegmentSweepSummary, "installations" | "more">> {
  const done = { segments: 0, events: 0, refused: 0 };
  while (done.events < budget) {
    const plan = await planSegment(env, installationId, cutoff, Math.min(SEGMENT_MAX_EVENTS, budget - done.events), minEvents);
    if (!plan) break;
    const segment = await writeSegment(env, plan);
    if (!segment) {
      done.refused += 1;
      break;
    }
    const deleted = await commitSegment(env, segment);
    if (deleted === 0) break;
    done.segments += 1;
    done.events += deleted;
  }
  return done;
}

/**
 * The segment sweep (bounded, idempotent; see the top of this file). `hotDaysFor` gives each
 * installation's hot window in days (DEFAULT_AUDIT_HOT_DAYS unless told). Installations are taken
 * oldest first (by their oldest event in D1), SWEEP_INSTALLATIONS at a time, at most
 * SCAN_PAGES pages a run.
 */
export async function sweepAuditSegments(env: Env, now: Date, options: { hotDaysFor?: (installationId: string) => number | Promise<number> } = {}): Promise<SegmentSweepSummary> {
  const hotDaysFor = options.hotDaysFor ?? (() => DEFAULT_AUDIT_HOT_DAYS);
  const summary: SegmentSweepSummary = { installations: 0, segments: 0, events: 0, refused: 0, more: 0 };
  let after = { oldest: "", id: "" };
  for (let page = 0; page < SCAN_PAGES && summary.events < SWEEP_EVENTS; page++) {
    // Installations whose oldest event in D1 is older than now (the loosest window) and that have
    // a checkpoint from that event on other than their newest (so something could be archived):
    // an idle installation, all of whose events its newest checkpoint covers, takes no place here.
    const { results } = await env.DB.prepare(`
      SELECT id, oldest FROM (
        SELECT i.id,
          (SELECT ${createdAtText("e.created_at")} FROM audit_events e WHERE e.installation_id = i.id ORDER BY e.seq LIMIT 1) AS oldest,
          (SELECT e.seq FROM audit_events e WHERE e.installation_id = i.id ORDER BY e.seq LIMIT 1) AS first_seq
        FROM installations i
      ) t WHERE oldest < ?1 AND (oldest > ?2 OR (oldest = ?2 AND id > ?3))
        AND EXISTS (SELECT 1 FROM audit_checkpoints c WHERE c.installation_id = t.id AND c.seq >= t.first_seq
          AND c.seq < (SELECT MAX(m.seq) FROM audit_checkpoints m WHERE m.installation_id = t.id))
      ORDER BY oldest, id LIMIT ?4`)
      .bind(now.toISOString(), after.oldest, after.id, SWEEP_INSTALLATIONS)
      .all<{ id: string; oldest: string }>();
    for (const { id, oldest } of results) {
      if (summary.events >= SWEEP_EVENTS) break;
      const windowMs = Math.max(0, await hotDaysFor(id)) * DAY_MS;
      const cutoff = new Date(now.getTime() - windowMs).toISOString();
      // Past AUDIT_HOT_MINUTES, sealed events leave D1 in segments of at least SEGMENT_MIN_EVENTS;
      // past the installation's window, whatever is left (a quiet installation's few events).
      const early = new Date(now.getTime() - Math.min(windowMs, AUDIT_HOT_MINUTES * 60_000)).toISOString();
      if (oldest >= early) continue;
      const done = oldest < cutoff ? await archiveAuditSegments(env, id, cutoff, SWEEP_EVENTS - summary.events) : { segments: 0, events: 0, refused: 0 };
      if (done.refused === 0 && early > cutoff && summary.events + done.events < SWEEP_EVENTS) {
        const more = await archiveAuditSegments(env, id, early, SWEEP_EVENTS - summary.events - done.events, SEGMENT_MIN_EVENTS);
        done.segments += more.segments;
        done.events += more.events;
        done.refused += more.refused;
      }
      summary.installations += 1;
      summary.segments += done.segments;
      summary.events += done.events;
      summary.refused += done.refused;
    }
    if (summary.events >= SWEEP_EVENTS) break;
    if (results.length < SWEEP_INSTALLATIONS) return summary;
    after = results.at(-1)!;
  }
  summary.more = 1; // the event budget or the scan's pages ran out before the installations did
  return summary;
}
