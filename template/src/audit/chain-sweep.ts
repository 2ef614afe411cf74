// The schedule's side of the audit trail (split out of chain.ts): seal what is unsealed, checkpoint
// existing chains, and verify every chain in full, a bounded number of events a run, resuming
// from a MAC-protected cursor.
import { canonicalJson } from "./canonical-json";
import { checkpointBounds, GENESIS_HASH, readAnchor, sealAuditChain } from "./chain";
import { checkTail, markVerified, walkChain, type WalkPosition } from "./chain-verify";
import { auditKeys, macVerifies, type AuditKey } from "./keys";

// ---------------------------------------------------------------------------------------------
// The schedule: seal what is unsealed, checkpoint existing chains, verify every chain in full

/** Events the scheduled full verification recomputes per run, over all installations. */
const SWEEP_VERIFY_BUDGET = 20_000;
const SWEEP_INSTALLATIONS = 50;
/** Installations whose anchor the sweep moves per run (each one R2 read and at most one write). */
const SWEEP_ANCHORS = 200;

interface VerifyCursor {
  installationId: string;
  nextSeq: number;
  prevHash: string;
  keyId: string;
  mac: string;
  passStartedAt: string;
}

const cursorMacText = (c: Pick<VerifyCursor, "installationId" | "nextSeq" | "prevHash" | "passStartedAt">) =>
  canonicalJson({ v: 1, kind: "audit_verify_cursor", installationId: c.installationId, nextSeq: c.nextSeq, prevHash: c.prevHash, passStartedAt: c.passStartedAt });

function cursorStatement(db: D1Database, key: AuditKey, installationId: string, position: WalkPosition, passStartedAt: string, at: string, result?: unknown): D1PreparedStatement {
  const mac = key.mac(cursorMacText({ installationId, nextSeq: position.seq, prevHash: position.prev, passStartedAt }));
  return db
    .prepare(`INSERT INTO audit_verify_cursors (installation_id, next_seq, prev_hash, key_id, mac, pass_started_at, last_result_json, last_finished_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, CASE WHEN ?7 IS NULL THEN NULL ELSE ?8 END, ?8)
      ON CONFLICT (installation_id) DO UPDATE SET next_seq = ?2, prev_hash = ?3, key_id = ?4, mac = ?5, pass_started_at = ?6,
        last_result_json = COALESCE(?7, last_result_json), last_finished_at = CASE WHEN ?7 IS NULL THEN last_finished_at ELSE ?8 END, updated_at = ?8`)
    .bind(installationId, position.seq, position.prev, key.id, mac, passStartedAt, result === undefined ? null : JSON.stringify(result), at);
}

export interface AuditSweepSummary {
  sealed: number;
  installationsSealed: number;
  verifiedEvents: number;
  passesFinished: number;
  broken: number;
  /** Installations whose R2 anchor this run moved to their newest checkpoint. */
  anchored: number;
  /** 1 when this run stopped at a bound (verification budget, installations, anchors) with work left. */
  more: number;
}

/**
 * The audit sweep (bounded, idempotent): seals installations with unsealed events or without a
 * checkpoint yet, then goes on with each chain's full verification where the last run stopped
 * (a MAC'd cursor), SWEEP_VERIFY_BUDGET events per run. A finished pass records its verdict and
 * starts over; a broken chain is logged (`audit.chain_broken`, installation and seq only).
 */
export async function sweepAuditChains(env: Env): Promise<AuditSweepSummary> {
  const keys = auditKeys(env);
  const summary: AuditSweepSummary = { sealed: 0, installationsSealed: 0, verifiedEvents: 0, passesFinished: 0, broken: 0, anchored: 0, more: 0 };
  const { results: toSeal } = await env.DB.prepare(`
    SELECT installation_id AS id FROM (SELECT DISTINCT installation_id FROM audit_events WHERE hash IS NULL LIMIT ?1)
    UNION
    SELECT id FROM (SELECT i.id FROM installations i WHERE ?2 = 1 AND EXISTS (SELECT 1 FROM audit_events e WHERE e.installation_id = i.id)
      AND NOT EXISTS (SELECT 1 FROM audit_checkpoints c WHERE c.installation_id = i.id) LIMIT ?1)`)
    .bind(SWEEP_INSTALLATIONS, keys.current ? 1 : 0)
    .all<{ id: string }>();
  for (const { id } of toSeal) {
    summary.sealed += await sealAuditChain(env, id, { anchor: true });
    summary.installationsSealed += 1;
  }
  // The anchors the after-write seals left due: this sweep is their one writer, once a minute.
  // A due time is pushed back before the seal, so an anchor that cannot move (a chain verify will
  // report as broken) does not keep the others waiting.
  const sealedNow = new Set(toSeal.map((row) => row.id));
  const { results: due } = await env.DB.prepare(`SELECT installation_id AS id FROM audit_anchor_due ORDER BY due_at LIMIT ?1`).bind(SWEEP_ANCHORS).all<{ id: string }>();
  for (const { id } of due) {
    if (sealedNow.has(id)) continue;
    await env.DB.prepare(`UPDATE audit_anchor_due SET due_at = ?2 WHERE installation_id = ?1`).bind(id, new Date().toISOString()).run();
    summary.sealed += await sealAuditChain(env, id, { anchor: true });
    const left = await env.DB.prepare(`SELECT 1 AS due FROM audit_anchor_due WHERE installation_id = ?1`).bind(id).first();
    if (!left) summary.anchored += 1;
  }
  if (toSeal.length >= SWEEP_INSTALLATIONS || due.length === SWEEP_ANCHORS) summary.more = 1;
  const key = keys.current;
  if (!key) return summary;
  const { results: installations } = await env.DB.prepare(`
    SELECT i.id AS installationId, c.next_seq AS nextSeq, c.prev_hash AS prevHash, c.key_id AS keyId, c.mac, c.pass_started_at AS passStartedAt
    FROM installations i LEFT JOIN audit_verify_cursors c ON c.installation_id = i.id
    ORDER BY COALESCE(c.updated_at, '') LIMIT ?1`)
    .bind(SWEEP_INSTALLATIONS)
    .all<VerifyCursor & { nextSeq: number | null }>();
  let budget = SWEEP_VERIFY_BUDGET;
  for (const cursor of installations) {
    if (budget <= 0) break;
    const at = new Date().toISOString();
    const resumable = cursor.nextSeq !== null && macVerifies(keys, cursor.keyId, cursorMacText(cursor), cursor.mac);
    const passStartedAt = resumable ? cursor.passStartedAt : at;
    const from: WalkPosition = resumable ? { seq: cursor.nextSeq, prev: cursor.prevHash } : { seq: 1, prev: GENESIS_HASH };
    const bounds = await checkpointBounds(env.DB, cursor.installationId, { anchored: async () => (await readAnchor(env, cursor.installationId)) !== null });
    const walked = await walkChain(env, cursor.installationId, keys, bounds, from, budget);
    budget -= walked.checked;
    summary.verifiedEvents += walked.checked;
    if (!walked.end) {
      // A pass left unfinished for want of budget: another slice goes on with it (a pass that
      // finished starts over at the next minute's run, not in a further slice).
      summary.more = 1;
      await cursorStatement(env.DB, key, cursor.installationId, walked.position, passStartedAt, at).run();
      continue;
    }
    const broken = walked.broken ?? (await checkTail(env, cursor.installationId, keys, walked.position));
    const result = broken ? { ok: false, firstBroken: broken, passStartedAt } : { ok: true, events: walked.position.seq - 1, head: walked.position.prev, passStartedAt };
    if (broken) {
      summary.broken += 1;
      console.error(JSON.stringify({ event: "audit.chain_broken", installationId: cursor.installationId, seq: broken.seq, reason: broken.reason }));
    } else {
      await markVerified(env, cursor.installationId, walked.position.seq - 1, at);
      // A verified chain's anchor moves to its newest checkpoint here too, whatever audit_anchor_due
      // says: that list lives in D1, so someone who can write D1 could empty it to freeze the anchor
      // and then delete the newest events unseen. Every full pass bounds how far the anchor trails.
      summary.sealed += await sealAuditChain(env, cursor.installationId, { anchor: true });
    }
    summary.passesFinished += 1;
    await cursorStatement(env.DB, key, cursor.installationId, { seq: 1, prev: GENESIS_HASH }, at, at, { ...result, finishedAt: at }).run();
  }
  return summary;
}

/** The verdict of the last full verification the schedule finished, if any. */
export async function lastFullVerification(db: D1Database, installationId: string): Promise<unknown> {
  const row = await db.prepare(`SELECT last_result_json AS result FROM audit_verify_cursors WHERE installation_id = ?1`).bind(installationId).first<{ result: string | null }>();
  return row?.result ? JSON.parse(row.result) : null;
}
