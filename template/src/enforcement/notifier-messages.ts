// Messages the host sends to a notifier without a workflow (DSA Art. 16(4), (5), Art. 23(2)): the
// confirmation of a notice's receipt, the decision taken on it with the redress available, and a
// warning or suspension for misuse. They go the way send_message goes (signed message.send
// webhooks to the installation's product, the reporter's contact only in the sealed payload), are
// recorded in `messages` and audited with digests, never with their text or the recipient.
import { auditStatement, type AuditEventInput } from "../audit";
import { openPersonalData, type ReportPersonalData, type ReportRow } from "../cases";
import { sha256HexSync } from "../lib/crypto";
import { rowGuardClause, type RowGuard } from "../lib/d1";
import type { Restrictions } from "../lib/dsa-vocabulary";
import { subscribedEndpoints, type EndpointRow } from "./webhook-endpoints";
import { deliveryStatement } from "./webhooks";

/** What a message without a run is (messages.kind; `workflow` is a send_message node's). */
export const NOTIFIER_MESSAGE_KINDS = ["notice_receipt", "notice_decision", "notifier_warning", "notifier_suspension"] as const;
export type NotifierMessageKind = (typeof NOTIFIER_MESSAGE_KINDS)[number];

/** Report sources that are notices under DSA Art. 16 (their notifier is told receipt and decision). */
export const NOTICE_SOURCES: readonly string[] = ["notice", "trusted_flagger"];

/** Months a decision can be complained about through the internal system (DSA Art. 20(1): at least six). */
export const COMPLAINT_MONTHS = 6;

export interface NotifierMessages {
  statements: D1PreparedStatement[];
  deliveryIds: string[];
}

const NONE: NotifierMessages = { statements: [], deliveryIds: [] };

interface MessageInput {
  installationId: string;
  kind: NotifierMessageKind;
  /** Stable per logical message, so a repeat writes nothing. */
  messageId: string;
  reportId: string | null;
  decisionId?: string | null;
  reporter: { id?: string; contact?: string };
  body: string;
  /** The same facts as the body, structured, for a product that renders its own text. */
  facts: Record<string, unknown>;
  at: string;
  actor: AuditEventInput["actor"];
  /** Written only when this row exists by then in the caller's batch (the report, decision or sanction). */
  guard: RowGuard;
  /** The installation's message.send endpoints, when the caller read them already (intake, in its batch of reads). */
  endpoints?: EndpointRow[];
}

/**
 * The statements that record, deliver and audit one message to a notifier: a `messages` row
 * (guarded), one message.send delivery per subscribed endpoint, and `notifier.message_queued` —
 * or, when no endpoint subscribes to message.send, the row without a delivery and
 * `notifier.message_unsent`, so an auditor sees the notifier could not be told.
 */
async function messageStatements(env: Env, input: MessageInput): Promise<NotifierMessages> {
  const templateKey = `dsa.${input.kind}.v1`;
  const endpoints = input.endpoints ?? (await subscribedEndpoints(env.DB, input.installationId, "message.send"));
  const guard = rowGuardClause(input.guard, 9);
  const messageGuard: RowGuard = { table: "messages", id: input.messageId, where: { installation_id: input.installationId } };
  const deliveries = await Promise.all(
    endpoints.map((endpoint) =>
      deliveryStatement(
        env,
        {
          installationId: input.installationId,
          endpointId: endpoint.id,
          eventType: "message.send",
          sourceType: "message",
          sourceId: `${input.messageId}:${endpoint.id}`,
          at: input.at,
          data: {
            messageId: input.messageId,
            kind: input.kind,
            runId: null,
            reportId: input.reportId,
            decisionId: input.decisionId ?? null,
            recipient: { kind: "reporter", id: input.reporter.id ?? null, contact: input.reporter.contact ?? null },
            body: input.body,
            templateKey,
            facts: input.facts,
          },
        },
        messageGuard,
      ),
    ),
  );
  const statements = [
    env.DB.prepare(`INSERT OR IGNORE INTO messages (id, installation_id, run_id, step_run_id, report_id, recipient_kind, template_key, delivery_id, created_at, kind, decision_id)
      SELECT ?1, ?2, NULL, NULL, ?3, 'reporter', ?4, ?5, ?6, ?7, ?8 ${guard.sql}`).bind(
      input.messageId,
      input.installationId,
      input.reportId,
      templateKey,
      deliveries[0]?.id ?? null,
      input.at,
      input.kind,
      input.decisionId ?? null,
      ...guard.binds,
    ),
    ...deliveries.map((d) => d.statement),
    auditStatement(
      env.DB,
      {
        installationId: input.installationId,
        idempotencyKey: `message:${input.messageId}:queued`,
        action: deliveries.length > 0 ? "notifier.message_queued" : "notifier.message_unsent",
        actor: input.actor,
        target: { type: "message", id: input.messageId },
        details: {
          kind: input.kind,
          reportId: input.reportId,
          decisionId: input.decisionId ?? null,
          templateKey,
          deliveries: deliveries.map((d) => d.id),
          bodyDigest: `sha256:${sha256HexSync(input.body)}`,
          ...(deliveries.length === 0 ? { reason: "no_message_endpoint" } : {}),
        },
        at: input.at,
      },
      messageGuard as RowGuard & { table: "messages" },
    ),
  ];
  return { statements, deliveryIds: deliveries.map((d) => d.id) };
}

const known = (reporter: ReportPersonalData["reporter"]): reporter is { id?: string; contact?: string } => Boolean(reporter?.id || reporter?.contact);

/**
 * Art. 16(4): the confirmation of receipt of a notice (source notice or trusted_flagger) whose
 * notifier left an id or a contact; nothing otherwise. Written only if the report is in the batch.
 */
export async function noticeReceiptStatements(
  env: Env,
  input: {
    installationId: string;
    report: { id: string; source: string; category: string; subject: { kind: string; id: string }; createdAt: string };
    reporter: ReportPersonalData["reporter"];
    actor: AuditEventInput["actor"];
    /** The message.send endpoints, if the caller read them already (subscribedEndpointsStatement). */
    endpoints?: EndpointRow[];
  },
): Promise<NotifierMessages> {
  const { report, reporter } = input;
  if (!NOTICE_SOURCES.includes(report.source) || !known(reporter)) return NONE;
  const trusted = report.source === "trusted_flagger";
  const body = [
    `We received your notice ${report.id} on ${report.createdAt.slice(0, 10)} about ${/^[aeiou]/u.test(report.subject.kind) ? "an" : "a"} ${report.subject.kind} (${report.category.replace(/_/gu, " ")}).`,
    trusted ? "As a trusted flagger's notice it is handled with priority." : "We will review it.",
    "We will tell you our decision and how you can contest it.",
  ].join(" ");
  return messageStatements(env, {
    installationId: input.installationId,
    kind: "notice_receipt",
    messageId: `${report.id}:notice_receipt`,
    reportId: report.id,
    reporter,
    body,
    facts: { reportId: report.id, receivedAt: report.createdAt, category: report.category, subject: report.subject, trustedFlagger: trusted },
    at: report.createdAt,
    actor: input.actor,
    guard: { table: "reports", id: report.id, where: { installation_id: input.installationId } },
    ...(input.endpoints ? { endpoints: input.endpoints } : {}),
  });
}

/** The end of the internal complaint period: `months` calendar months after `at` (UTC). */
export function complaintDeadline(at: string, months = COMPLAINT_MONTHS): string {
  const date = new Date(at);
  const day = date.getUTCDate();
  date.setUTCDate(1);
  date.setUTCMonth(date.getUTCMonth() + months);
  // 31 August + 6 months is the last day of February, not 3 March.
  const last = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 0)).getUTCDate();
  date.setUTCDate(Math.min(day, last));
  return date.toISOString();
}

const AUTOMATION_TEXT: Record<string, string> = {
  fully: "The decision was taken by automated means.",
  partially: "Automated means were used in taking the decision, which a person confirmed.",
  not_automated: "A person took the decision.",
};

function restrictionList(r: Restrictions): string[] {
  return [...(r.visibility ?? []).map((v) => `visibility: ${v}`), ...(r.account ? [`account: ${r.account}`] : []), ...(r.monetary ? [`monetary: ${r.monetary}`] : []), ...(r.provision ? [`service: ${r.provision}`] : [])].map((s) =>
    s.replace(/_/gu, " "),
  );
}

/**
 * Art. 16(5), (6): the decision on a notice, told to its notifier with the use of automated means
 * and the redress available (internal complaint until its deadline, out-of-court dispute
 * settlement, courts). Written only if the decision is in the batch; nothing for a report that is
 * not a notice or has no notifier to write to.
 */
export async function noticeDecisionStatements(
  env: Env,
  input: {
    installationId: string;
    reportRow: ReportRow;
    decision: { id: string; outcome: string; restricts: boolean; restrictions: Restrictions; ground: string; category: string; automatedDecision: string; automatedDetection: boolean; statement: string; decidedAt: string };
    actor: AuditEventInput["actor"];
  },
): Promise<NotifierMessages> {
  const { reportRow: row, decision } = input;
  if (!NOTICE_SOURCES.includes(row.source)) return NONE;
  const personal = await openPersonalData<ReportPersonalData>(env, input.installationId, `report:${row.id}`, row.personalData);
  if (!known(personal.reporter)) return NONE;
  const until = complaintDeadline(decision.decidedAt);
  const restrictions = restrictionList(decision.restrictions);
  const redress = {
    internalComplaint: { available: true, until, reference: decision.id },
    outOfCourtDisputeSettlement: { available: true, legalBasis: "Regulation (EU) 2022/2065, Art. 21" },
    judicialRedress: { available: true },
  };
  const body = [
    `We decided on your notice ${row.id} of ${row.createdAt.slice(0, 10)}:`,
    decision.restricts ? `we restricted the reported ${row.subjectKind} (${restrictions.join("; ")}).` : `we took no action against the reported ${row.subjectKind}.`,
    decision.statement ? `Reasons: ${decision.statement}` : "",
    AUTOMATION_TEXT[decision.automatedDecision] ?? "",
    `You can complain about this decision through our internal complaint-handling system until ${until.slice(0, 10)} (reference ${decision.id}),`,
    "refer it to a certified out-of-court dispute settlement body (DSA Art. 21), or go to court.",
  ]
    .filter(Boolean)
    .join(" ");
  return messageStatements(env, {
    installationId: input.installationId,
    kind: "notice_decision",
    messageId: `${decision.id}:notice_decision`,
    reportId: row.id,
    decisionId: decision.id,
    reporter: personal.reporter,
    body,
    facts: {
      reportId: row.id,
      decisionId: decision.id,
      decidedAt: decision.decidedAt,
      outcome: decision.outcome,
      restricts: decision.restricts,
      restrictions: decision.restrictions,
      ground: decision.ground,
      category: decision.category,
      statement: decision.statement || null,
      automatedDetection: decision.automatedDetection,
      automatedDecision: decision.automatedDecision,
      redress,
    },
    at: decision.decidedAt,
    actor: input.actor,
    guard: { table: "decisions", id: decision.id, where: { installation_id: input.installationId } },
  });
}

/**
 * Art. 23(2): a notifier's warning or suspension, told at the contact of their latest notice
 * (the notifier is known only by a hash, so that is where they can be reached). Written only if
 * the sanction is in the batch; nothing when no notice of theirs left a contact.
 */
export async function notifierSanctionStatements(
  env: Env,
  input: {
    installationId: string;
    sanction: { id: string; kind: "warning" | "suspension"; endsAt: string | null; at: string };
    latestNotice: { id: string; personalData: string } | null;
    actor: AuditEventInput["actor"];
  },
): Promise<NotifierMessages> {
  if (!input.latestNotice) return NONE;
  const personal = await openPersonalData<ReportPersonalData>(env, input.installationId, `report:${input.latestNotice.id}`, input.latestNotice.personalData);
  if (!known(personal.reporter)) return NONE;
  const { sanction } = input;
  const suspension = sanction.kind === "suspension";
  const body = suspension
    ? `Because you repeatedly sent manifestly unfounded notices, and after a prior warning, we will not process notices from you until ${sanction.endsAt!.slice(0, 10)}. You can complain about this decision through our internal complaint-handling system (reference ${sanction.id}).`
    : `Several of your notices were manifestly unfounded. If this continues we may suspend the processing of your notices for a period (DSA Art. 23(2)). Reference ${sanction.id}.`;
  return messageStatements(env, {
    installationId: input.installationId,
    kind: suspension ? "notifier_suspension" : "notifier_warning",
    messageId: `${sanction.id}:${suspension ? "notifier_suspension" : "notifier_warning"}`,
    reportId: null,
    reporter: personal.reporter,
    body,
    facts: { sanctionId: sanction.id, kind: sanction.kind, until: sanction.endsAt, redress: suspension ? { internalComplaint: { available: true, reference: sanction.id } } : null },
    at: sanction.at,
    actor: input.actor,
    guard: { table: "notifier_sanctions", id: sanction.id, where: { installation_id: input.installationId } },
  });
}
