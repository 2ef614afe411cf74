// Report intake: idempotent, grouped into one case per subject, personal data sealed before it
// reaches D1, triggers evaluated on the report's non-personal summary.
import { auditStatement, canonicalJson } from "../audit";
import { AppError, conflict, notFound } from "../errors";
import type { Actor } from "../auth";
import { newId, sha256Hex } from "../lib/crypto";
import { PERSON_KEYS_VERSION, personKey } from "../lib/person-keys";
import { openPersonalData, sealPersonalData } from "./report-crypto";
import { getReportRow, reportRowByKeyStatement, reportRowStatement, reportSummary, type ReportEvidence, type ReportPersonalData, type ReportRow } from "./reports-queries";
import { normalizeCategory, POLICY_CATEGORIES, type PolicyCategory } from "./taxonomy";
import { enabledTriggersStatement, fireTriggers, type TriggeredRun, type TriggerRow } from "./triggers";
import { enqueueDeliveries, NOTICE_SOURCES, noticeReceiptStatements, subscribedEndpointsStatement, type EndpointRow } from "../enforcement";
import { noticeRecordStatement, noticeSender } from "./notifiers";

export interface ReportInput {
  subject: { kind: string; id: string; url?: string; snapshot?: unknown; ownerId?: string };
  category: string;
  categorySpecification?: string[];
  source?: string;
  reporter?: { id?: string; contact?: string };
  description?: string;
  evidence?: ReportEvidence[];
  /** The locale redress messages to the subject's owner and the notifier are written in (sealed with the report). */
  locale?: string;
}

// The summary lives with the report queries (nothing there reaches the workflows domain); it is
// re-exported here for workflows/execution-context.ts, which imports it from this module.
export { reportSummary, type ReportPersonalData, type ReportSummary } from "./reports-queries";

function category(input: string): PolicyCategory {
  const normalized = normalizeCategory(input);
  if (!normalized) {
    throw new AppError("report.category_unknown", "Unknown category; use a DSA statement category (e.g. scams_and_fraud) or an ATProto reason type.", {
      status: 422,
      details: { allowed: POLICY_CATEGORIES },
    });
  }
  return normalized;
}

/**
 * Records a report. A repeat with the same Idempotency-Key returns the first report (and finishes
 * any trigger run whose dispatch had failed); the same key with another body is a 409.
 */
export async function intakeReport(env: Env, ctx: ExecutionContext, actor: Actor, input: ReportInput, idempotencyKey?: string): Promise<{ report: ReturnType<typeof reportSummary>; runs: TriggeredRun[]; replayed: boolean }> {
  const policyCategory = category(input.category);
  const requestDigest = `sha256:${await sha256Hex(canonicalJson(input))}`;
  const id = newId("rpt");
  const caseId = newId("case");
  const at = new Date().toISOString();
  // Notices (DSA Art. 16, 22, 23): a registered trusted flagger's notice becomes trusted_flagger; a
  // suspended notifier's is refused; the notifier is told of its receipt (in this batch).
  // One round trip for every read intake makes before its batch: the sender's standing, and the
  // endpoints a notice's receipt goes to (only when there will be a receipt: a notice whose notifier left an id or a contact).
  const source = input.source ?? "notice";
  const receiptWanted = NOTICE_SOURCES.includes(source) && Boolean(input.reporter?.id || input.reporter?.contact);
  const sender = await noticeSender(env, actor, { source, reporterId: input.reporter?.id, category: policyCategory, idempotencyKey, at }, receiptWanted ? [subscribedEndpointsStatement(env.DB, actor.installationId, "message.send")] : []);
  const personal: ReportPersonalData = {
    reporter: input.reporter ?? null,
    description: input.description ?? null,
    subjectUrl: input.subject.url ?? null,
    subjectOwnerId: input.subject.ownerId ?? null,
    snapshot: input.subject.snapshot ?? null,
    evidence: input.evidence ?? [],
    locale: input.locale ?? null,
  };
  const { sealed, dataKeyId } = await sealPersonalData(env, actor.installationId, `report:${id}`, personal);
  const subject = [actor.installationId, input.subject.kind, input.subject.id] as const;
  const receipt = await noticeReceiptStatements(env, {
    installationId: actor.installationId,
    report: { id, source: sender.source, category: policyCategory, subject: { kind: input.subject.kind, id: input.subject.id }, createdAt: at },
    reporter: personal.reporter,
    actor: actor.audit,
    ...(receiptWanted ? { endpoints: sender.alongside[0]!.results as unknown as EndpointRow[] } : {}),
  });
  const noticeRecord = noticeRecordStatement(env.DB, { installationId: actor.installationId, reportId: id, sender, category: policyCategory, at });
  // One round trip: the writes, then the report as stored (ours, or the first one with this
  // Idempotency-Key), then the triggers to evaluate.
  const results = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(`
      INSERT INTO cases (id, installation_id, subject_kind, subject_id, state, report_count, first_reported_at, last_reported_at, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, 'open', 0, ?5, ?5, ?5, ?5)
      ON CONFLICT(installation_id, subject_kind, subject_id) DO NOTHING
    `).bind(caseId, ...subject, at),
    env.DB.prepare(`
      INSERT INTO reports (id, installation_id, case_id, subject_kind, subject_id, category, category_specification_json, source,
        evidence_count, personal_data, data_key_id, idempotency_key, request_digest, created_at, reporter_key, subject_owner_key, person_keys_version)
      SELECT ?1, ?2, c.id, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16
      FROM cases c WHERE c.installation_id = ?2 AND c.subject_kind = ?3 AND c.subject_id = ?4
      ON CONFLICT(installation_id, idempotency_key) DO NOTHING
    `).bind(
      id,
      ...subject,
      policyCategory,
      JSON.stringify(input.categorySpecification ?? []),
      sender.source,
      (input.evidence ?? []).length,
      sealed,
      dataKeyId,
      idempotencyKey ?? null,
      requestDigest,
      at,
      // Issue 15 §6: keyed hashes of the sealed ids, so a named person's reports are found (retention-people.ts).
      personKey(actor.installationId, input.reporter?.id),
      personKey(actor.installationId, input.subject.ownerId),
      PERSON_KEYS_VERSION,
    ),
    // Only a report that was actually inserted counts, reopens its case and is audited.
    env.DB.prepare(`
      UPDATE cases SET report_count = report_count + 1, last_reported_at = ?2, state = 'open', personal_data_erased_at = NULL, updated_at = ?2
      WHERE id = (SELECT case_id FROM reports WHERE id = ?1)
    `).bind(id, at),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `report:${id}:received`,
        action: "report.received",
        actor: actor.audit,
        target: { type: "report", id },
        details: { category: policyCategory, subjectKind: input.subject.kind, evidenceCount: (input.evidence ?? []).length },
        at,
      },
      { table: "reports", id },
    ),
    // A case opened for a report that lost an Idempotency-Key race is not left behind empty (without
    // a key the report cannot lose: its case always has it).
    ...(idempotencyKey ? [env.DB.prepare(`DELETE FROM cases WHERE id = ?1 AND report_count = 0`).bind(caseId)] : []),
    idempotencyKey ? reportRowByKeyStatement(env.DB, actor.installationId, idempotencyKey) : reportRowStatement(env.DB, actor.installationId, id),
    enabledTriggersStatement(env.DB, actor.installationId, "report.created"),
    // Written only if this report was (each is guarded on it).
    ...(noticeRecord ? [noticeRecord] : []),
    ...receipt.statements,
  ]);
  const reads = idempotencyKey ? 5 : 4;
  const row = results[reads]!.results[0] as ReportRow | undefined;
  const triggers = results[reads + 1]!.results as unknown as TriggerRow[];
  if (!row) throw new AppError("report.intake_failed", "The report could not be recorded; retry.", { status: 503, retryable: true });
  if (row.id !== id) return replay(env, ctx, actor, row, requestDigest, triggers);
  // The receipt's deliveries are committed (the outbox): waking the queue need not hold the answer.
  if (receipt.deliveryIds.length > 0) ctx.waitUntil(enqueueDeliveries(env, receipt.deliveryIds).catch(() => undefined));
  const summary = reportSummary(row);
  const runs = await fireTriggers(env, ctx, actor, { event: "report.created", report: summary, subjectKey: summary.id, triggers });
  return { report: summary, runs, replayed: false };
}

async function replay(env: Env, ctx: ExecutionContext, actor: Actor, row: ReportRow, requestDigest: string, triggers: TriggerRow[]) {
  if (row.requestDigest !== requestDigest) throw conflict("idempotency_key.reused", "This Idempotency-Key was already used for a different report.");
  const summary = reportSummary(row);
  const runs = await fireTriggers(env, ctx, actor, { event: "report.created", report: summary, subjectKey: summary.id, triggers });
  return { report: summary, runs, replayed: true };
}

/**
 * A report with its content opened, for reviewers; the access is audited. Who reported is not
 * part of it (`revealReporter`). A console user limited to some queues reaches only the reports
 * behind tasks of those queues.
 */
export async function readReport(env: Env, actor: Actor, reportId: string) {
  const row = await visibleReportRow(env, actor, reportId);
  const personal = await openPersonalData<ReportPersonalData>(env, actor.installationId, `report:${row.id}`, row.personalData);
  const at = new Date().toISOString();
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `report:${row.id}:viewed:${crypto.randomUUID()}`,
    action: "report.personal_data_viewed",
    actor: actor.audit,
    target: { type: "report", id: row.id },
    details: { fields: ["content"] },
    at,
  }).run();
  return {
    ...reportSummary(row),
    subject: { kind: row.subjectKind, id: row.subjectId, url: personal.subjectUrl, ownerId: personal.subjectOwnerId, snapshot: personal.snapshot },
    description: personal.description,
    evidence: personal.evidence,
    reporter: { known: Boolean(personal.reporter?.id || personal.reporter?.contact), revealed: false },
    personalDataErasedAt: row.personalDataErasedAt,
  };
}

/** Who reported and how to reach them, for a reviewer who says why; every reveal is audited with its reason. */
export async function revealReporter(env: Env, actor: Actor, reportId: string, input: { reason: string }) {
  const row = await visibleReportRow(env, actor, reportId);
  const personal = await openPersonalData<ReportPersonalData>(env, actor.installationId, `report:${row.id}`, row.personalData);
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `report:${row.id}:reporter_revealed:${crypto.randomUUID()}`,
    action: "report.reporter_revealed",
    actor: actor.audit,
    target: { type: "report", id: row.id },
    details: { reason: input.reason },
    at: new Date().toISOString(),
  }).run();
  return { reportId: row.id, reporter: { id: personal.reporter?.id ?? null, contact: personal.reporter?.contact ?? null } };
}

async function visibleReportRow(env: Env, actor: Actor, reportId: string): Promise<ReportRow> {
  const row = await getReportRow(env.DB, actor.installationId, reportId);
  if (!row) throw notFound("report");
  const queues = actor.user?.queueIds;
  if (queues) {
    const behind = await env.DB.prepare(`SELECT 1 AS x FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2 AND queue_id IN (SELECT value FROM json_each(?3)) LIMIT 1`)
      .bind(actor.installationId, row.id, JSON.stringify(queues))
      .first();
    if (!behind) throw notFound("report");
  }
  return row;
}
