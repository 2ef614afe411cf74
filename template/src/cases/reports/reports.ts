// Report intake: idempotent, grouped into one case per subject, personal data sealed before it
// reaches D1, triggers evaluated on the report's non-personal summary.
import { auditStatement, canonicalJson, mergeAuditStatements } from "../../audit";
import { AppError, conflict, notFound } from "../../errors";
import type { Actor } from "../../auth";
import { newId, sha256HexSync } from "../../lib/crypto";
import { PERSON_KEYS_VERSION, personKey } from "../../lib/person-keys";
import { openPersonalDataOr, sealPersonalData } from "./report-crypto";
import { ERASED_REPORT, getReportRow, reportRowByKeyStatement, reportSummary, type ReportEvidence, type ReportPersonalData, type ReportRow, type ReportSummaryRow } from "./reports-queries";
import type { PolicyCategory } from "../taxonomy";
import { enabledTriggersJsonSql, enabledTriggersStatement, fireTriggers, triggerRowsOf, type TriggeredRun, type TriggerRow } from "../triggers/triggers";
import { enqueueDeliveries, NOTICE_SOURCES, noticeReceiptStatements, subscribedEndpointIdsSql, subscribedEndpointsStatement, type EndpointRow } from "../../enforcement";
import { assumedSender, noticeRecordStatement, noticeSender, plainSendersStatement, type NoticeSender } from "../notices/notifiers";
import { hotOrArchived, rehydrateSubject } from "../archive/case-rehydrate";
import { subjectKey } from "../archive/case-scope";
import { reportTerms, reportTermsStatement, termsColumn } from "../search/search-terms";
import { signalKeys, signalsStatement, type SignalInput } from "./signals";
import { assertSnapshotBounded, reportCategory } from "./report-input";
import { stablePlanSql } from "../../lib/stable-plan";

export interface ReportInput {
  subject: { kind: string; id: string; url?: string; snapshot?: unknown; ownerId?: string; signals?: SignalInput };
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

/**
 * What intake last read of an installation's senders and receipt endpoints: whether it has no
 * trusted flagger and no open suspension (`plain`), and its message.send endpoints. While fresh,
 * intake assumes them and its batch checks the assumption (one round trip); a stale assumption
 * writes nothing and intake reads first (two round trips), refreshing this.
 */
const senderContexts = new Map<string, { plain: boolean; endpointIds: string[]; until: number }>();
const SENDER_CONTEXT_TTL_MS = 30_000;

interface Sender {
  sender: NoticeSender;
  /** The receipt's endpoints as intake assumes or read them. */
  endpoints: EndpointRow[];
  /** When assumed: the condition the report insert is written under (from parameter ?18). */
  condition?: { sql: string; binds: (string | null)[] };
}

/**
 * Records a report. A repeat with the same Idempotency-Key returns the first report (and finishes
 * any trigger run whose dispatch had failed); the same key with another body is a 409.
 */
export async function intakeReport(env: Env, ctx: ExecutionContext, actor: Actor, input: ReportInput, idempotencyKey?: string): Promise<{ report: ReturnType<typeof reportSummary>; runs: TriggeredRun[]; replayed: boolean }> {
  assertSnapshotBounded(input.subject.snapshot);
  const policyCategory = reportCategory(input.category);
  const requestDigest = `sha256:${sha256HexSync(canonicalJson(input))}`;
  const id = newId("rpt");
  const caseId = newId("case");
  const at = new Date().toISOString();
  // Notices (DSA Art. 16, 22, 23): a registered trusted flagger's notice becomes trusted_flagger; a
  // suspended notifier's is refused; the notifier is told of its receipt (in this batch), when the
  // report is a notice whose notifier left an id or a contact.
  const source = input.source ?? "notice";
  const receiptWanted = NOTICE_SOURCES.includes(source) && Boolean(input.reporter?.id || input.reporter?.contact);
  const senderInput = { source, reporterId: input.reporter?.id, category: policyCategory, at };
  const personal: ReportPersonalData = {
    reporter: input.reporter ?? null,
    description: input.description ?? null,
    subjectUrl: input.subject.url ?? null,
    subjectOwnerId: input.subject.ownerId ?? null,
    snapshot: input.subject.snapshot ?? null,
    evidence: input.evidence ?? [],
    locale: input.locale ?? null,
  };
  // Sealed for the people it is about as well: either one's erasure makes every copy of it unreadable.
  const { sealed, dataKeyId } = await sealPersonalData(env, actor.installationId, `report:${id}`, personal, {
    people: [personKey(actor.installationId, input.reporter?.id), personKey(actor.installationId, input.subject.ownerId)],
  });
  const known = senderContexts.get(actor.installationId);
  if (known?.plain && known.until > Date.now()) {
    // One round trip: the sender assumed (neither suspended nor a flagger) and the endpoints as last read, checked by the insert.
    const assumed = assumedSender(env, actor.installationId, senderInput, 18);
    const endpointIds = receiptWanted ? known.endpointIds : null;
    const condition = receiptWanted
      ? {
          sql: [assumed.condition.sql, `${subscribedEndpointIdsSql(`?${18 + assumed.condition.binds.length}`, `'message.send'`)} IS ?${19 + assumed.condition.binds.length}`].filter(Boolean).join(" AND "),
          binds: [...assumed.condition.binds, actor.installationId, endpointIds!.length > 0 ? endpointIds!.join(",") : null],
        }
      : assumed.condition;
    const outcome = await recordReport(
      env,
      ctx,
      actor,
      input,
      { id, caseId, at, idempotencyKey, requestDigest, policyCategory, personal, sealed, dataKeyId },
      { sender: assumed.sender, endpoints: (endpointIds ?? []).map((endpointId) => ({ id: endpointId }) as EndpointRow), condition },
    );
    if (outcome) return outcome;
    senderContexts.delete(actor.installationId); // the assumption did not hold: read, then write
  }
  // Two round trips: every read intake makes first (the sender's standing, the receipt's
  // endpoints, whether this installation's senders may be assumed next time), then the batch.
  const read = await noticeSender(env, actor, { ...senderInput, idempotencyKey }, [subscribedEndpointsStatement(env.DB, actor.installationId, "message.send"), plainSendersStatement(env.DB, actor.installationId)]);
  const endpoints = read.alongside[0]!.results as unknown as EndpointRow[];
  if (senderContexts.size > 1_000) senderContexts.clear();
  senderContexts.set(actor.installationId, { plain: read.alongside[1]!.results[0]?.plain === 1, endpointIds: endpoints.map((endpoint) => endpoint.id), until: Date.now() + SENDER_CONTEXT_TTL_MS });
  const outcome = await recordReport(env, ctx, actor, input, { id, caseId, at, idempotencyKey, requestDigest, policyCategory, personal, sealed, dataKeyId }, { sender: read, endpoints: receiptWanted ? endpoints : [] });
  if (!outcome) throw new AppError("report.intake_failed", "The report could not be recorded; retry.", { status: 503, retryable: true });
  return outcome;
}

/**
 * Intake's upsert of the report's case (exported for its plan test), numbered as the report's insert:
 * ?2-?4 the subject, ?11 the Idempotency-Key, ?13 the time, ?18… the assumed sender's condition;
 * ?caseParam the new case's id and ?caseParam+1 the subject's key. It opens the case at one report
 * (not for an archived subject, which comes back first) or counts, reopens and touches it, only
 * under the report's own conditions, and answers the case with the installation's enabled
 * `report.created` triggers (enabledTriggersJsonSql: read by the write that answers anyway, so
 * intake sends no statement of its own to read them). Planned once (lib/stable-plan.ts).
 */
export function caseUpsertSql(caseParam: number, condition: string | undefined): string {
  return stablePlanSql(`
      INSERT INTO cases (id, installation_id, subject_kind, subject_id, state, report_count, first_reported_at, last_reported_at, created_at, updated_at)
      SELECT ?${caseParam}, ?2, ?3, ?4, 'open', 1, ?13, ?13, ?13, ?13
      WHERE (NOT EXISTS (SELECT 1 FROM archived_subjects WHERE key = ?${caseParam + 1}) OR EXISTS (SELECT 1 FROM cases WHERE installation_id = ?2 AND subject_kind = ?3 AND subject_id = ?4))
        AND NOT EXISTS (SELECT 1 FROM reports WHERE installation_id = ?2 AND idempotency_key = ?11)${condition ? ` AND ${condition}` : ""}
      ON CONFLICT(installation_id, subject_kind, subject_id) DO UPDATE SET
        report_count = cases.report_count + 1, last_reported_at = excluded.last_reported_at, state = 'open', personal_data_erased_at = NULL, updated_at = excluded.updated_at
      RETURNING id AS caseId, report_count AS caseReportCount, ${enabledTriggersJsonSql("?2", "'report.created'")} AS triggersJson
    `);
}

interface Recorded {
  id: string;
  caseId: string;
  at: string;
  idempotencyKey: string | undefined;
  requestDigest: string;
  policyCategory: PolicyCategory;
  personal: ReportPersonalData;
  sealed: string;
  dataKeyId: string;
}

/**
 * Intake's one batch: the writes (the report only under an assumed sender's condition, when
 * there is one), the case's upsert answering the triggers to evaluate; the report as stored is
 * ours, from the request and what its case's update answers, or (with an Idempotency-Key already
 * used) the first one's, read after with the triggers. Null when nothing was recorded and there is
 * no replay: an assumption that did not hold (or a report that could not be recorded).
 */
async function recordReport(
  env: Env,
  ctx: ExecutionContext,
  actor: Actor,
  input: ReportInput,
  r: Recorded,
  from: Sender,
  archivedRetry = false,
): Promise<{ report: ReturnType<typeof reportSummary>; runs: TriggeredRun[]; replayed: boolean } | null> {
  const { id, caseId, at, idempotencyKey, policyCategory, sender } = { ...r, sender: from.sender };
  const subject = [actor.installationId, input.subject.kind, input.subject.id] as const;
  const receipt = await noticeReceiptStatements(env, {
    installationId: actor.installationId,
    report: { id, source: sender.source, category: policyCategory, subject: { kind: input.subject.kind, id: input.subject.id }, createdAt: at },
    reporter: r.personal.reporter,
    actor: actor.audit,
    endpoints: from.endpoints,
  });
  const noticeRecord = noticeRecordStatement(env.DB, { installationId: actor.installationId, reportId: id, sender, category: policyCategory, at });
  // A case is opened or counted only for a report that will be written: its upsert carries the
  // report's own conditions (no report under the Idempotency-Key yet, the assumed sender's
  // condition), which the report's insert, next in the same transaction, then finds as they were.
  // So no case is left behind empty, the count is the reports written, and the report cannot lose its case.
  const conditionBinds = from.condition?.sql ? from.condition.binds : [];
  const caseParam = 18 + conditionBinds.length;
  const termList = reportTerms(actor.installationId, r.personal);
  const terms = reportTermsStatement(env.DB, { installationId: actor.installationId, reportId: id, at, terms: termList });
  // The owner's signals, as keyed hashes only (accounts' related accounts).
  const signals = signalsStatement(env.DB, { installationId: actor.installationId, reportId: id, accountKey: personKey(actor.installationId, input.subject.ownerId), signals: signalKeys(actor.installationId, input.subject.signals), at });
  // The batch's audit events (report.received, the receipt's) are one statement, placed after the
  // rows they are each guarded on (mergeAuditStatements): the batch removes none of those rows.
  const statements = [
    // The report's case (caseUpsertSql), answering the triggers; the values of the report's numbering the case does not use are null.
    env.DB.prepare(caseUpsertSql(caseParam, from.condition?.sql)).bind(null, ...subject, null, null, null, null, null, null, idempotencyKey ?? null, null, at, null, null, null, null, ...conditionBinds, caseId, subjectKey(...subject)),
    env.DB.prepare(
      stablePlanSql(`
      INSERT INTO reports (id, installation_id, case_id, subject_kind, subject_id, category, category_specification_json, source,
        evidence_count, personal_data, data_key_id, idempotency_key, request_digest, created_at, reporter_key, subject_owner_key, person_keys_version, search_terms)
      SELECT ?1, ?2, c.id, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17
      FROM cases c WHERE c.installation_id = ?2 AND c.subject_kind = ?3 AND c.subject_id = ?4${from.condition?.sql ? ` AND ${from.condition.sql}` : ""}
      ON CONFLICT(installation_id, idempotency_key) DO NOTHING
    `),
    ).bind(
      id,
      ...subject,
      policyCategory,
      JSON.stringify(input.categorySpecification ?? []),
      sender.source,
      (input.evidence ?? []).length,
      r.sealed,
      r.dataKeyId,
      idempotencyKey ?? null,
      // The digest is what a replay of the same Idempotency-Key is compared with: without a key
      // there is no replay, and no digest to keep ('').
      idempotencyKey === undefined ? "" : r.requestDigest,
      at,
      // Keyed hashes of the sealed ids, so a named person's reports are found (retention/retention-people.ts).
      personKey(actor.installationId, input.reporter?.id),
      personKey(actor.installationId, input.subject.ownerId),
      PERSON_KEYS_VERSION,
      // The report's own list of its search terms (erasure and the case archive reach them by key).
      termsColumn(termList),
      ...conditionBinds,
    ),
    // Only a report that was actually inserted is audited.
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
    // Written only if this report was (each is guarded on it).
    ...(noticeRecord ? [noticeRecord] : []),
    ...receipt.statements,
    // The search index's keyed terms of the description and the reporter (cases/search).
    ...(terms ? [terms] : []),
    ...(signals ? [signals] : []),
  ];
  const results = await env.DB.batch<Record<string, unknown>>(mergeAuditStatements(env.DB, statements));
  // The case's upsert answers only when this batch wrote the report (it carries the report's own
  // conditions, among them that no report holds the Idempotency-Key yet): the report is ours, from
  // the request and that answer, and the triggers are the ones it read. When it does not answer, a
  // report already under the key is the first one's (a replay), read after the batch with the
  // triggers; none is an archived subject or an assumption that did not hold.
  const counted = results[0]!.results[0] as { caseId: string; caseReportCount: number; triggersJson: string } | undefined;
  const first = !counted && idempotencyKey ? await firstReportUnderKey(env.DB, actor.installationId, idempotencyKey) : undefined;
  const row = counted ? writtenRow(input, r, sender.source, counted) : first?.row;
  const triggers = (counted ? triggerRowsOf(counted.triggersJson) : first?.triggers) ?? [];
  // The subject's case is archived: it comes back to D1 (cases/archive), and the report joins it.
  if (!row && !archivedRetry && (await rehydrateSubject(env, ...subject))) return recordReport(env, ctx, actor, input, r, from, true);
  if (!row) return null;
  if (row.id !== id) return replay(env, ctx, actor, row, r.requestDigest, triggers);
  // The receipt's deliveries are committed (the outbox): waking the queue need not hold the answer.
  if (receipt.deliveryIds.length > 0) ctx.waitUntil(enqueueDeliveries(env, receipt.deliveryIds).catch(() => undefined));
  const summary = reportSummary(row);
  const runs = await fireTriggers(env, ctx, actor, { event: "report.created", report: summary, subjectKey: summary.id, triggers });
  return { report: summary, runs, replayed: false };
}

/** The report already under an Idempotency-Key (a replay's), with the triggers it fires: one round trip. */
async function firstReportUnderKey(db: D1Database, installationId: string, idempotencyKey: string): Promise<{ row: ReportSummaryRow | undefined; triggers: TriggerRow[] }> {
  const [row, triggers] = await db.batch<Record<string, unknown>>([reportRowByKeyStatement(db, installationId, idempotencyKey), enabledTriggersStatement(db, installationId, "report.created")]);
  return { row: row!.results[0] as ReportSummaryRow | undefined, triggers: triggers!.results as unknown as TriggerRow[] };
}

/** The report this intake wrote, as a read of it would answer (ReportSummaryRow): every column is the request's or the case update's. */
function writtenRow(input: ReportInput, r: Recorded, source: string, counted: { caseId: string; caseReportCount: number }): ReportSummaryRow {
  return {
    id: r.id,
    caseId: counted.caseId,
    subjectKind: input.subject.kind,
    subjectId: input.subject.id,
    category: r.policyCategory,
    categorySpecificationJson: JSON.stringify(input.categorySpecification ?? []),
    source,
    evidenceCount: (input.evidence ?? []).length,
    personalDataErasedAt: null,
    requestDigest: r.requestDigest,
    caseReportCount: counted.caseReportCount,
    createdAt: r.at,
  };
}

async function replay(env: Env, ctx: ExecutionContext, actor: Actor, row: ReportSummaryRow, requestDigest: string, triggers: TriggerRow[]) {
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
  const personal = await openPersonalDataOr<ReportPersonalData>(env, actor.installationId, `report:${row.id}`, row.personalData, ERASED_REPORT);
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
  const personal = await openPersonalDataOr<ReportPersonalData>(env, actor.installationId, `report:${row.id}`, row.personalData, ERASED_REPORT);
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
  const row = await hotOrArchived(env, actor.installationId, "report", reportId, () => getReportRow(env.DB, actor.installationId, reportId));
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
