// Preservation holds: a case whose reports' contents must be kept whatever the retention period
// says — a CyberTipline report's contents are held for one year (18 U.S.C. § 2258A(h) as amended
// by the REPORT Act of 2024), a legal hold as long as counsel asks. While a hold is active the
// retention sweep and erasure requests leave the case's sealed data alone (`HELD_SQL` in
// caseBusySql); the data stays sealed as it was. A hold ends at held_until, or earlier only by an
// admin's release with a reason; placing and releasing are audit events.
import { auditStatement, type AuditEventInput } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, notFound } from "../../errors";
import { newId } from "../../lib/crypto";

/** Days a hold lasts unless told otherwise: the CyberTipline preservation period. */
export const DEFAULT_HOLD_DAYS = 365;
export const MAX_HOLD_DAYS = 3650;
const DAY_MS = 86_400_000;

/** SQL true when case `c` has an active hold (used inside caseBusySql). */
export const HELD_SQL = `EXISTS (SELECT 1 FROM preservation_holds h WHERE h.case_id = c.id AND h.released_at IS NULL AND h.held_until > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`;

interface HoldRow {
  id: string;
  caseId: string;
  reason: string;
  heldUntil: string;
  createdBy: string;
  createdAt: string;
  releasedAt: string | null;
  releasedBy: string | null;
  releaseReason: string | null;
}

const COLUMNS = `id, case_id AS caseId, reason, held_until AS heldUntil, created_by AS createdBy, created_at AS createdAt, released_at AS releasedAt, released_by AS releasedBy, release_reason AS releaseReason`;

const view = (row: HoldRow, now = Date.now()) => ({ ...row, active: row.releasedAt === null && Date.parse(row.heldUntil) > now });

/** Places a hold on a case of the installation (404 for any other). */
export async function placeHold(env: Env, actor: Actor, caseId: string, input: { reason: string; days?: number }) {
  const known = await env.DB.prepare(`SELECT id FROM cases WHERE id = ?1 AND installation_id = ?2`).bind(caseId, actor.installationId).first();
  if (!known) throw notFound("case");
  const id = newId("hold");
  const at = new Date();
  const heldUntil = new Date(at.getTime() + (input.days ?? DEFAULT_HOLD_DAYS) * DAY_MS).toISOString();
  const who = `${actor.audit.type}:${actor.audit.id}`;
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO preservation_holds (id, installation_id, case_id, reason, held_until, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`).bind(
      id,
      actor.installationId,
      caseId,
      input.reason,
      heldUntil,
      who,
      at.toISOString(),
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `preservation_hold:${id}:placed`,
      action: "preservation_hold.placed",
      actor: actor.audit,
      target: { type: "case", id: caseId },
      details: { holdId: id, heldUntil, days: input.days ?? DEFAULT_HOLD_DAYS },
      at: at.toISOString(),
    }),
  ]);
  return view((await env.DB.prepare(`SELECT ${COLUMNS} FROM preservation_holds WHERE id = ?1`).bind(id).first<HoldRow>())!);
}

/**
 * For another domain's batch: a hold placed by the platform itself (a CyberTipline report's
 * contents, held for DEFAULT_HOLD_DAYS), with its audit event. Idempotent on `holdId`: a repeated
 * batch writes nothing twice. The case must be the installation's (the caller read it so).
 */
export function holdStatements(
  db: D1Database,
  input: { installationId: string; holdId: string; caseId: string; reason: string; createdBy: string; actor: AuditEventInput["actor"]; at: string; details?: Record<string, unknown> },
): D1PreparedStatement[] {
  const heldUntil = new Date(Date.parse(input.at) + DEFAULT_HOLD_DAYS * DAY_MS).toISOString();
  return [
    db
      .prepare(`INSERT OR IGNORE INTO preservation_holds (id, installation_id, case_id, reason, held_until, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`)
      .bind(input.holdId, input.installationId, input.caseId, input.reason, heldUntil, input.createdBy, input.at),
    auditStatement(db, {
      installationId: input.installationId,
      idempotencyKey: `preservation_hold:${input.holdId}:placed`,
      action: "preservation_hold.placed",
      actor: input.actor,
      target: { type: "case", id: input.caseId },
      details: { holdId: input.holdId, heldUntil, days: DEFAULT_HOLD_DAYS, ...input.details },
      at: input.at,
    }),
  ];
}

export async function listHolds(env: Env, actor: Actor, caseId: string) {
  const known = await env.DB.prepare(`SELECT id FROM cases WHERE id = ?1 AND installation_id = ?2`).bind(caseId, actor.installationId).first();
  if (!known) throw notFound("case");
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM preservation_holds WHERE case_id = ?1 AND installation_id = ?2 ORDER BY created_at`).bind(caseId, actor.installationId).all<HoldRow>();
  return { items: results.map((row) => view(row)) };
}

/** Releases an active hold early, with a reason (audited); 409 when it has already ended. */
export async function releaseHold(env: Env, actor: Actor, holdId: string, reason: string) {
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM preservation_holds WHERE id = ?1 AND installation_id = ?2`).bind(holdId, actor.installationId).first<HoldRow>();
  if (!row) throw notFound("preservation_hold");
  if (!view(row).active) throw new AppError("preservation_hold.not_active", "This hold has already ended or been released.", { status: 409 });
  const at = new Date().toISOString();
  const [updated] = await env.DB.batch([
    env.DB.prepare(`UPDATE preservation_holds SET released_at = ?3, released_by = ?4, release_reason = ?5 WHERE id = ?1 AND installation_id = ?2 AND released_at IS NULL`).bind(
      holdId,
      actor.installationId,
      at,
      `${actor.audit.type}:${actor.audit.id}`,
      reason,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `preservation_hold:${holdId}:released`,
      action: "preservation_hold.released",
      actor: actor.audit,
      target: { type: "case", id: row.caseId },
      details: { holdId, heldUntil: row.heldUntil },
      at,
    }),
  ]);
  if (!updated?.meta.changes) throw new AppError("preservation_hold.not_active", "This hold has already ended or been released.", { status: 409 });
  return view((await env.DB.prepare(`SELECT ${COLUMNS} FROM preservation_holds WHERE id = ?1`).bind(holdId).first<HoldRow>())!);
}
