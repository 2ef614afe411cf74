// Notifiers (DSA Art. 16, 22, 23), known by the keyed hash of their reporter id: what intake
// learns of a notice's sender (a trusted flagger? suspended?), the notice record kept for figures,
// and the misuse measures: a warning first, then a suspension for a period, during which their
// notices are refused (403 report.notifier_suspended, audited).
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { notifierSanctionStatements, enqueueDeliveries } from "../../enforcement";
import { AppError, conflict, notFound } from "../../errors";
import { newId, sha256Hex } from "../../lib/crypto";
import { notifierHashes } from "./notifier-keys";
import { openPersonalData, sealPersonalData } from "../reports/report-crypto";
import { activeFlaggerCondition, activeFlaggerStatement } from "./trusted-flaggers";

/** What intake makes of a report's sender. */
export interface NoticeSender {
  /** The report's source after matching: a notice from a registered flagger in their area is `trusted_flagger`. */
  source: string;
  notifierHash: string | null;
  trustedFlaggerId: string | null;
}

const SUSPENSION_COLUMNS = `id, ends_at AS endsAt`;

function activeSuspensionStatement(db: D1Database, installationId: string, hashes: readonly string[], at: string): D1PreparedStatement {
  return db
    .prepare(`SELECT ${SUSPENSION_COLUMNS} FROM notifier_sanctions
      WHERE installation_id = ?1 AND notifier_hash IN (SELECT value FROM json_each(?2)) AND kind = 'suspension' AND lifted_at IS NULL AND starts_at <= ?3 AND ends_at > ?3
      ORDER BY ends_at DESC LIMIT 1`)
    .bind(installationId, JSON.stringify(hashes), at);
}

/**
 * Before a report is recorded: who sent it. Voluntary reports and reports without a reporter id
 * have no notifier (a suspended notifier is refused even when it calls its report voluntary). A suspended notifier's notice is refused (403 `report.notifier_suspended`,
 * audited as `report.refused` naming the suspension, never the reporter), except the replay of a
 * report recorded before the suspension with the same Idempotency-Key.
 */
export async function noticeSender(
  env: Env,
  actor: Actor,
  input: { source: string; reporterId: string | undefined; category: string; idempotencyKey: string | undefined; at: string },
  /** Other reads of the caller, made in the same round trip; their results come back as `alongside`. */
  alongside: D1PreparedStatement[] = [],
): Promise<NoticeSender & { alongside: D1Result<Record<string, unknown>>[] }> {
  if (!input.reporterId) {
    const reads = alongside.length > 0 ? await env.DB.batch<Record<string, unknown>>(alongside) : [];
    return { source: input.source, notifierHash: null, trustedFlaggerId: null, alongside: reads };
  }
  const hashes = notifierHashes(env, actor.installationId, input.reporterId);
  const [flagger, suspension, replay, ...reads] = await env.DB.batch<Record<string, unknown>>([
    activeFlaggerStatement(env.DB, actor.installationId, hashes.all, input.category, input.at),
    activeSuspensionStatement(env.DB, actor.installationId, hashes.all, input.at),
    env.DB.prepare(`SELECT id FROM reports WHERE installation_id = ?1 AND idempotency_key = ?2`).bind(actor.installationId, input.idempotencyKey ?? null),
    ...alongside,
  ]);
  const suspended = suspension!.results[0] as { id: string; endsAt: string } | undefined;
  if (suspended && replay!.results.length === 0) {
    await auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `report:refused:${crypto.randomUUID()}`,
      action: "report.refused",
      actor: actor.audit,
      target: { type: "notifier_sanction", id: suspended.id },
      details: { reason: "notifier_suspended", category: input.category, source: input.source, suspendedUntil: suspended.endsAt },
      at: input.at,
    }).run();
    throw new AppError("report.notifier_suspended", `Notices from this notifier are not processed until ${suspended.endsAt} (DSA Art. 23(2)); the notice was not recorded.`, {
      status: 403,
      details: { suspendedUntil: suspended.endsAt, sanctionId: suspended.id },
    });
  }
  // A suspended notifier is refused whatever source the report states; a voluntary report has no notifier.
  if (input.source === "voluntary") return { source: input.source, notifierHash: null, trustedFlaggerId: null, alongside: reads };
  const match = flagger!.results[0] as { id: string } | undefined;
  // A registered flagger's notice in their area; a source the caller states otherwise is kept.
  const source = match && input.source === "notice" ? "trusted_flagger" : input.source;
  return { source, notifierHash: hashes.current, trustedFlaggerId: match && source === "trusted_flagger" ? match.id : null, alongside: reads };
}

/**
 * What intake may assume of a sender without reading first — neither suspended nor a registered
 * flagger in this area — and the SQL condition (for its report insert, parameters from
 * `firstParam`) that holds exactly when that is so. The insert then writes the report only when
 * the assumption holds, so the sender's standing is checked in the batch itself; when it does not
 * hold, nothing is written and intake takes the way through noticeSender.
 */
export function assumedSender(
  env: Env,
  installationId: string,
  input: { source: string; reporterId: string | undefined; category: string; at: string },
  firstParam: number,
): { sender: NoticeSender; condition: { sql: string; binds: (string | null)[] } } {
  if (!input.reporterId) return { sender: { source: input.source, notifierHash: null, trustedFlaggerId: null }, condition: { sql: "", binds: [] } };
  const hashes = notifierHashes(env, installationId, input.reporterId);
  const p = (offset: number) => `?${firstParam + offset}`;
  // ?+0 installation, ?+1 hashes, ?+2 at (and ?+3 category for a notice): the conditions of activeSuspensionStatement and activeFlaggerStatement.
  const conditions = [
    `NOT EXISTS (SELECT 1 FROM notifier_sanctions WHERE installation_id = ${p(0)} AND notifier_hash IN (SELECT value FROM json_each(${p(1)})) AND kind = 'suspension' AND lifted_at IS NULL AND starts_at <= ${p(2)} AND ends_at > ${p(2)})`,
  ];
  const binds: (string | null)[] = [installationId, JSON.stringify(hashes.all), input.at];
  // A match would make a notice trusted_flagger, and name the flagger of a notice stated as one.
  if (input.source === "notice" || input.source === "trusted_flagger") {
    conditions.push(`NOT EXISTS (${activeFlaggerCondition(p(0), p(1), p(3), p(2))})`);
    binds.push(input.category);
  }
  const condition = { sql: conditions.join(" AND "), binds };
  if (input.source === "voluntary") return { sender: { source: input.source, notifierHash: null, trustedFlaggerId: null }, condition };
  return { sender: { source: input.source, notifierHash: hashes.current, trustedFlaggerId: null }, condition };
}

/**
 * Whether intake may assume its senders (assumedSender) in this installation: it has no trusted
 * flagger and no open suspension. One read, for intake's batch of reads.
 */
export function plainSendersStatement(db: D1Database, installationId: string): D1PreparedStatement {
  return db
    .prepare(`SELECT NOT EXISTS (SELECT 1 FROM trusted_flaggers WHERE installation_id = ?1)
      AND NOT EXISTS (SELECT 1 FROM notifier_sanctions WHERE installation_id = ?1 AND kind = 'suspension' AND lifted_at IS NULL) AS plain`)
    .bind(installationId);
}

/** The notice's record for figures, in intake's batch: written only if the report `reportId` was. */
export function noticeRecordStatement(db: D1Database, input: { installationId: string; reportId: string; sender: NoticeSender; category: string; at: string }): D1PreparedStatement | null {
  if (!input.sender.notifierHash) return null;
  return db
    .prepare(`INSERT INTO notifier_notices (report_id, installation_id, notifier_hash, trusted_flagger_id, category, created_at)
      SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM reports WHERE id = ?1 AND installation_id = ?2)
      ON CONFLICT(report_id) DO NOTHING`)
    .bind(input.reportId, input.installationId, input.sender.notifierHash, input.sender.trustedFlaggerId, input.category, input.at);
}

interface Figures {
  notices: number;
  decided: number;
  restricted: number;
}

/** A notifier's notices (all time): received, decided, and whose latest decision restricted. */
async function noticeFigures(db: D1Database, installationId: string, hashes: readonly string[]): Promise<Figures> {
  const row = await db
    .prepare(`SELECT COUNT(*) AS notices, COUNT(restrictions) AS decided, COALESCE(SUM(restrictions <> '{}'), 0) AS restricted FROM (
      SELECT (SELECT d.restrictions_json FROM decisions d WHERE d.installation_id = n.installation_id AND d.report_id = n.report_id ORDER BY d.decided_at DESC, d.id DESC LIMIT 1) AS restrictions
      FROM notifier_notices n WHERE n.installation_id = ?1 AND n.notifier_hash IN (SELECT value FROM json_each(?2)))`)
    .bind(installationId, JSON.stringify(hashes))
    .first<Figures>();
  return row ?? { notices: 0, decided: 0, restricted: 0 };
}

interface SanctionRow {
  id: string;
  kind: "warning" | "suspension";
  reasonSealed: string;
  warningId: string | null;
  startsAt: string;
  endsAt: string | null;
  liftedAt: string | null;
  createdBy: string;
  createdAt: string;
}

const SANCTION_COLUMNS = `id, kind, reason_sealed AS reasonSealed, warning_id AS warningId, starts_at AS startsAt, ends_at AS endsAt, lifted_at AS liftedAt, created_by AS createdBy, created_at AS createdAt`;

function sanctionView(row: SanctionRow, at: string) {
  return {
    id: row.id,
    kind: row.kind,
    warningId: row.warningId,
    startsAt: row.startsAt,
    endsAt: row.endsAt,
    liftedAt: row.liftedAt,
    active: row.kind === "suspension" && row.liftedAt === null && row.startsAt <= at && (row.endsAt ?? "") > at,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
  };
}

/**
 * What the platform knows of a notifier (admin): their notices' figures (the Art. 23(3)
 * assessment: how many, how many acted on), whether they are a trusted flagger, their warnings and
 * suspensions with the reasons given. Reading the reasons is audited.
 */
export async function notifierStanding(env: Env, actor: Actor, input: { reporter: { id: string } }) {
  const hashes = notifierHashes(env, actor.installationId, input.reporter.id).all;
  const at = new Date().toISOString();
  const [figures, sanctions, flagger] = await Promise.all([
    noticeFigures(env.DB, actor.installationId, hashes),
    env.DB.prepare(`SELECT ${SANCTION_COLUMNS} FROM notifier_sanctions WHERE installation_id = ?1 AND notifier_hash IN (SELECT value FROM json_each(?2)) ORDER BY created_at, id`)
      .bind(actor.installationId, JSON.stringify(hashes))
      .all<SanctionRow>(),
    env.DB.prepare(`SELECT id, name FROM trusted_flaggers WHERE installation_id = ?1 AND notifier_hash IN (SELECT value FROM json_each(?2)) LIMIT 1`).bind(actor.installationId, JSON.stringify(hashes)).first<{ id: string; name: string }>(),
  ]);
  const items = await Promise.all(
    sanctions.results.map(async (row) => ({ ...sanctionView(row, at), reason: (await openPersonalData<{ reason: string }>(env, actor.installationId, `notifier_sanction:${row.id}`, row.reasonSealed)).reason })),
  );
  if (items.length > 0) {
    await auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `notifier_sanctions:viewed:${crypto.randomUUID()}`,
      action: "notifier.standing_viewed",
      actor: actor.audit,
      target: { type: "notifier_sanction", id: items[items.length - 1]!.id },
      details: { sanctions: items.map((s) => s.id) },
      at,
    }).run();
  }
  return {
    trustedFlagger: flagger ?? null,
    notices: { received: figures.notices, decided: figures.decided, restricted: figures.restricted, notActedOn: figures.decided - figures.restricted },
    warnings: items.filter((s) => s.kind === "warning"),
    suspensions: items.filter((s) => s.kind === "suspension"),
    suspended: items.some((s) => s.active),
  };
}

async function latestNotice(db: D1Database, installationId: string, hashes: readonly string[]) {
  return db
    .prepare(`SELECT r.id, r.personal_data AS personalData FROM notifier_notices n CROSS JOIN reports r ON r.id = n.report_id AND r.installation_id = n.installation_id
      WHERE n.installation_id = ?1 AND n.notifier_hash IN (SELECT value FROM json_each(?2)) ORDER BY n.created_at DESC LIMIT 1`)
    .bind(installationId, JSON.stringify(hashes))
    .first<{ id: string; personalData: string }>();
}

const MAX_SUSPENSION_DAYS = 366;

/**
 * A warning (`kind: warning`) or a suspension for a period (`kind: suspension`, `until`) of a
 * notifier who sent manifestly unfounded notices (Art. 23(2)). A suspension needs an earlier
 * warning (409 `notifier.warning_required`) and none in force (409 `notifier.already_suspended`).
 * The reason is sealed; the audit names the sanction only. The notifier is told at the contact of
 * their latest notice (a message.send, as for notices).
 */
export async function sanctionNotifier(env: Env, actor: Actor, kind: "warning" | "suspension", input: { reporter: { id: string }; reason: string; until?: string }) {
  const hashes = notifierHashes(env, actor.installationId, input.reporter.id);
  const at = new Date().toISOString();
  let warningId: string | null = null;
  let endsAt: string | null = null;
  if (kind === "suspension") {
    const until = input.until ? new Date(input.until) : null;
    if (!until || Number.isNaN(until.getTime()) || until.toISOString() <= at || until.getTime() - Date.parse(at) > MAX_SUSPENSION_DAYS * 86_400_000) {
      throw new AppError("notifier.suspension_period_invalid", `until must be an ISO 8601 time in the future, at most ${MAX_SUSPENSION_DAYS} days away (a suspension is for a reasonable period).`, { status: 422 });
    }
    endsAt = until.toISOString();
    const [warning, current] = await env.DB.batch<Record<string, unknown>>([
      env.DB.prepare(`SELECT id FROM notifier_sanctions WHERE installation_id = ?1 AND notifier_hash IN (SELECT value FROM json_each(?2)) AND kind = 'warning' ORDER BY created_at DESC LIMIT 1`).bind(
        actor.installationId,
        JSON.stringify(hashes.all),
      ),
      activeSuspensionStatement(env.DB, actor.installationId, hashes.all, at),
    ]);
    warningId = (warning!.results[0] as { id: string } | undefined)?.id ?? null;
    if (!warningId) throw conflict("notifier.warning_required", "A notifier is suspended only after a prior warning (DSA Art. 23(2)); warn them first.");
    const active = current!.results[0] as { id: string; endsAt: string } | undefined;
    if (active) throw conflict("notifier.already_suspended", `This notifier is suspended until ${active.endsAt}; lift that suspension before setting another.`, { sanctionId: active.id });
  }
  const id = newId("nsn");
  const { sealed, dataKeyId } = await sealPersonalData(env, actor.installationId, `notifier_sanction:${id}`, { reason: input.reason }, { scope: "installation" });
  const notice = await latestNotice(env.DB, actor.installationId, hashes.all);
  const message = await notifierSanctionStatements(env, { installationId: actor.installationId, sanction: { id, kind, endsAt, at }, latestNotice: notice, actor: actor.audit });
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO notifier_sanctions (id, installation_id, notifier_hash, kind, reason_sealed, data_key_id, warning_id, starts_at, ends_at, created_by, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?8)`).bind(id, actor.installationId, hashes.current, kind, sealed, dataKeyId, warningId, at, endsAt, actor.audit.id),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `notifier_sanction:${id}:created`,
      action: kind === "warning" ? "notifier.warned" : "notifier.suspended",
      actor: actor.audit,
      target: { type: "notifier_sanction", id },
      details: { kind, warningId, until: endsAt, reasonDigest: `sha256:${await sha256Hex(input.reason)}`, notified: message.statements.length > 0 },
      at,
    }),
    ...message.statements,
  ]);
  await enqueueDeliveries(env, message.deliveryIds);
  const row = await sanctionRow(env.DB, actor.installationId, id);
  return { ...sanctionView(row, new Date().toISOString()), notified: message.statements.length > 0 };
}

async function sanctionRow(db: D1Database, installationId: string, id: string): Promise<SanctionRow> {
  const row = await db.prepare(`SELECT ${SANCTION_COLUMNS} FROM notifier_sanctions WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<SanctionRow>();
  if (!row) throw notFound("notifier_sanction");
  return row;
}

/** Ends a suspension early (audited with a digest of the reason). */
export async function liftSuspension(env: Env, actor: Actor, id: string, input: { reason: string }) {
  const row = await sanctionRow(env.DB, actor.installationId, id);
  const at = new Date().toISOString();
  if (row.kind !== "suspension" || row.liftedAt !== null || (row.endsAt ?? "") <= at) {
    throw conflict("notifier_sanction.not_in_force", "Only a suspension in force can be lifted.");
  }
  await env.DB.batch([
    env.DB.prepare(`UPDATE notifier_sanctions SET lifted_at = ?3, lifted_by = ?4 WHERE installation_id = ?1 AND id = ?2 AND lifted_at IS NULL`).bind(actor.installationId, id, at, actor.audit.id),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `notifier_sanction:${id}:lifted`,
        action: "notifier.suspension_lifted",
        actor: actor.audit,
        target: { type: "notifier_sanction", id },
        details: { reasonDigest: `sha256:${await sha256Hex(input.reason)}` },
        at,
      },
      { table: "notifier_sanctions", id, where: { lifted_at: at } },
    ),
  ]);
  return sanctionView(await sanctionRow(env.DB, actor.installationId, id), new Date().toISOString());
}

/** The installation's warnings and suspensions, newest first (no reasons, no notifier). */
export async function listSanctions(env: Env, actor: Actor, options: { limit: number; kind?: string }) {
  const { results } = await env.DB.prepare(`SELECT ${SANCTION_COLUMNS} FROM notifier_sanctions WHERE installation_id = ?1 AND (?2 IS NULL OR kind = ?2) ORDER BY created_at DESC, id DESC LIMIT ?3`)
    .bind(actor.installationId, options.kind ?? null, options.limit)
    .all<SanctionRow>();
  const at = new Date().toISOString();
  return { items: results.map((row) => sanctionView(row, at)) };
}
