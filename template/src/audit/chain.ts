// The tamper-evident audit trail: each installation's events form a hash chain over canonical
// JSON (RFC 8785). Events are numbered when inserted (a D1 trigger assigns `seq`) and chained by
// the sealer, which runs after every API write and before the trail is read or verified.
import { sha256Hex } from "../lib/crypto";
import { canonicalJson } from "./canonical-json";

export const GENESIS_HASH = `sha256:${"0".repeat(64)}`;
const PAGE = 500;

export interface AuditRow {
  id: string;
  seq: number;
  installationId: string;
  idempotencyKey: string;
  action: string;
  actorType: string;
  actorId: string;
  targetType: string;
  targetId: string;
  detailsJson: string;
  createdAt: string;
  prevHash: string | null;
  hash: string | null;
}

export const AUDIT_COLUMNS = `id, seq, installation_id AS installationId, idempotency_key AS idempotencyKey, action,
  actor_type AS actorType, actor_id AS actorId, target_type AS targetType, target_id AS targetId,
  details_json AS detailsJson, created_at AS createdAt, prev_hash AS prevHash, hash`;

/** The hash of one event given its predecessor's: sha256 over `prev\n` + the event's canonical JSON. */
export async function eventHash(prevHash: string, row: AuditRow): Promise<string> {
  let details: unknown;
  try {
    details = JSON.parse(row.detailsJson);
  } catch {
    details = row.detailsJson;
  }
  const body = canonicalJson({
    seq: row.seq,
    id: row.id,
    installationId: row.installationId,
    idempotencyKey: row.idempotencyKey,
    action: row.action,
    actor: { type: row.actorType, id: row.actorId },
    target: { type: row.targetType, id: row.targetId },
    details,
    createdAt: row.createdAt,
  });
  return `sha256:${await sha256Hex(`${prevHash}\n${body}`)}`;
}

/** Chains every not-yet-sealed event of the installation, in order. Safe to run concurrently. */
export async function sealAuditChain(env: Env, installationId: string): Promise<number> {
  let sealed = 0;
  for (;;) {
    const last = await env.DB.prepare(`SELECT seq, hash FROM audit_events WHERE installation_id = ?1 AND hash IS NOT NULL ORDER BY seq DESC LIMIT 1`).bind(installationId).first<{ seq: number; hash: string }>();
    const { results } = await env.DB.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE installation_id = ?1 AND hash IS NULL AND seq > ?2 ORDER BY seq LIMIT ?3`)
      .bind(installationId, last?.seq ?? 0, PAGE)
      .all<AuditRow>();
    if (results.length === 0) return sealed;
    let prev = last?.hash ?? GENESIS_HASH;
    let expected = (last?.seq ?? 0) + 1;
    const updates: D1PreparedStatement[] = [];
    for (const row of results) {
      // A gap means an event vanished before it was sealed; stop so verify reports it.
      if (row.seq !== expected) break;
      const hash = await eventHash(prev, row);
      updates.push(env.DB.prepare(`UPDATE audit_events SET prev_hash = ?2, hash = ?3 WHERE id = ?1 AND hash IS NULL`).bind(row.id, prev, hash));
      prev = hash;
      expected += 1;
    }
    if (updates.length === 0) return sealed;
    await env.DB.batch(updates);
    sealed += updates.length;
    if (updates.length < results.length || results.length < PAGE) return sealed;
  }
}

export type ChainVerdict = { ok: true; events: number; head: string } | { ok: false; events: number; firstBroken: { seq: number; id: string | null; reason: "hash_mismatch" | "prev_hash_mismatch" | "seq_gap" | "unsealed" } };

/** Recomputes the whole chain and names the first event whose link does not hold. */
export async function verifyAuditChain(env: Env, installationId: string): Promise<ChainVerdict> {
  await sealAuditChain(env, installationId);
  let prev = GENESIS_HASH;
  let expected = 1;
  for (;;) {
    const { results } = await env.DB.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE installation_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3`).bind(installationId, expected, PAGE).all<AuditRow>();
    for (const row of results) {
      if (row.seq !== expected) return { ok: false, events: expected - 1, firstBroken: { seq: expected, id: null, reason: "seq_gap" } };
      if (row.hash === null) return { ok: false, events: expected - 1, firstBroken: { seq: row.seq, id: row.id, reason: "unsealed" } };
      if (row.prevHash !== prev) return { ok: false, events: expected - 1, firstBroken: { seq: row.seq, id: row.id, reason: "prev_hash_mismatch" } };
      if ((await eventHash(prev, row)) !== row.hash) return { ok: false, events: expected - 1, firstBroken: { seq: row.seq, id: row.id, reason: "hash_mismatch" } };
      prev = row.hash;
      expected += 1;
    }
    if (results.length < PAGE) return { ok: true, events: expected - 1, head: prev };
  }
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
