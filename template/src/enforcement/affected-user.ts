// DSA Art. 17: after every restricting decision the host sends the subject's owner a statement of
// reasons with the same facts as the Transparency Database's, and the redress open to them
// (internal complaint until its deadline, out-of-court settlement bodies, courts). The message goes
// out as a signed message.send webhook; what was sent (or why nothing could be) is recorded in
// redress_messages and audited, in the decision's own batch.
import { auditStatement } from "../audit";
import { complaintDeadline, openPersonalData, type ReportPersonalData } from "../cases";
import { newId, sha256Hex } from "../lib/crypto";
import type { Restrictions } from "../lib/dsa-vocabulary";
import { readRedressSettings } from "./affected-user-settings";
import { renderStatement, templateLanguage, type StatementFacts } from "./affected-user-templates";
import { subscribedEndpoints } from "./webhook-endpoints";
import { deliveryStatement } from "./webhooks";

/** What the decision's batch knows about it (the same values its row and statement of reasons get). */
export interface RestrictingDecision {
  installationId: string;
  decisionId: string;
  reportId: string | null;
  runId: string | null;
  policyCategory: string;
  outcome: string;
  ground: "illegal_content" | "incompatible_content";
  legalGround: string | null;
  explanation: string;
  statement: string;
  restrictions: Restrictions;
  territorialScope: string[] | null;
  automatedDetection: boolean;
  automatedDecision: string;
  decidedAt: string;
  /** The decision's statement of reasons, as the Transparency Database gets it (no personal data). */
  statementOfReasons: Record<string, unknown>;
}

const human = (value: string) => value.replace(/_/gu, " ");

function restrictionLabels(r: Restrictions): string[] {
  return [
    ...(r.visibility ?? []).map((v) => (v === "other" && r.visibility_other ? r.visibility_other : human(v))),
    ...(r.account ? [`account ${human(r.account)}`] : []),
    ...(r.monetary ? [`monetary ${r.monetary === "other" && r.monetary_other ? r.monetary_other : human(r.monetary)}`] : []),
    ...(r.provision ? [`service ${human(r.provision)}`] : []),
  ];
}

/** The report's sealed personal data (the subject's owner, the recipient's locale); null without a report or once erased. */
export async function reportPersonalDataOf(env: Env, installationId: string, reportId: string | null): Promise<ReportPersonalData | null> {
  if (!reportId) return null;
  const row = await env.DB.prepare(`SELECT personal_data AS sealed FROM reports WHERE id = ?1 AND installation_id = ?2`).bind(reportId, installationId).first<{ sealed: string | null }>();
  return row?.sealed ? openPersonalData<ReportPersonalData>(env, installationId, `report:${reportId}`, row.sealed) : null;
}

/**
 * The statement to the affected user, for the decision's batch: deliveries to every message.send
 * endpoint, its redress_messages row and `affected_user.statement_queued` (or `_not_sent` with the
 * reason: switched off, no subject owner, no endpoint). Every row is written only if the decision
 * row is (a repeated step whose decision already exists writes nothing).
 */
export async function affectedUserStatements(env: Env, decision: RestrictingDecision): Promise<{ statements: D1PreparedStatement[]; deliveryIds: string[] }> {
  const { installationId, decisionId } = decision;
  const settings = await readRedressSettings(env.DB, installationId);
  const personal = settings.statementsEnabled ? await reportPersonalDataOf(env, installationId, decision.reportId) : null;
  const language = templateLanguage(personal?.locale);
  const at = decision.decidedAt;
  const deadline = complaintDeadline(at);
  const facts: StatementFacts = {
    decisionId,
    applicationDate: at.slice(0, 10),
    category: human(decision.policyCategory),
    restrictions: restrictionLabels(decision.restrictions),
    territorialScope: decision.territorialScope,
    ground: decision.ground,
    legalGround: decision.legalGround,
    // The clause of the terms relied on, where the decision names one (Art. 17(3)(e)); never an outcome code.
    incompatibleGround: decision.ground === "incompatible_content" ? decision.legalGround : null,
    explanation: decision.explanation,
    facts: decision.statement,
    automatedDetection: decision.automatedDetection,
    automatedDecision: (["fully", "partially"].includes(decision.automatedDecision) ? decision.automatedDecision : "not_automated") as StatementFacts["automatedDecision"],
  };
  const redress = { complaintDeadline: deadline, complaintUrl: settings.complaintUrl, settlementBodies: settings.settlementBodies.map(({ name, url }) => ({ name, url })) };
  const endpoints = personal?.subjectOwnerId ? await subscribedEndpoints(env.DB, installationId, "message.send") : [];
  const reason = !settings.statementsEnabled ? "disabled" : !personal?.subjectOwnerId ? "recipient_unknown" : endpoints.length === 0 ? "endpoint_missing" : null;
  const messageId = newId("rdm");
  const body = reason ? null : renderStatement(language, facts, redress);
  const onlyIf = { table: "decisions", id: decisionId };
  const deliveries = body
    ? await Promise.all(
        endpoints.map((endpoint) =>
          deliveryStatement(
            env,
            {
              installationId,
              endpointId: endpoint.id,
              eventType: "message.send",
              sourceType: "message",
              sourceId: `statement_of_reasons:${decisionId}:${endpoint.id}`,
              at,
              data: {
                messageId,
                kind: "statement_of_reasons",
                templateKey: "dsa.statement_of_reasons",
                language,
                runId: decision.runId,
                reportId: decision.reportId,
                decisionId,
                recipient: { kind: "subject_owner", id: personal!.subjectOwnerId },
                body,
                statement: decision.statementOfReasons,
                redress,
              },
            },
            onlyIf,
          ),
        ),
      )
    : [];
  const bodyDigest = body ? `sha256:${await sha256Hex(body)}` : null;
  const deliveryIds = deliveries.map((d) => d.id);
  return {
    statements: [
      env.DB.prepare(`
        INSERT OR IGNORE INTO redress_messages (id, installation_id, kind, source_id, decision_id, report_id, language, state, not_sent_reason, delivery_ids_json, body_digest, notice_at, complaint_deadline, created_at)
        SELECT ?1, ?2, 'statement_of_reasons', ?3, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?10 WHERE EXISTS (SELECT 1 FROM decisions WHERE installation_id = ?2 AND id = ?3)
      `).bind(messageId, installationId, decisionId, decision.reportId, language, reason ? "not_sent" : "queued", reason, JSON.stringify(deliveryIds), bodyDigest, at, deadline),
      ...deliveries.map((d) => d.statement),
      auditStatement(
        env.DB,
        {
          installationId,
          idempotencyKey: `decision:${decisionId}:affected_user_statement`,
          action: reason ? "affected_user.statement_not_sent" : "affected_user.statement_queued",
          actor: { type: "system", id: "redress" },
          target: { type: "decision", id: decisionId },
          details: { messageId, language, reason, deliveries: deliveryIds, bodyDigest, complaintDeadline: deadline },
          at,
        },
        { table: "redress_messages", id: messageId },
      ),
    ],
    deliveryIds,
  };
}

/** What the affected user was sent about a decision (no personal data), or null before/without one. */
export async function redressMessageOf(db: D1Database, installationId: string, kind: "statement_of_reasons" | "complaint_outcome", sourceId: string) {
  const row = await db
    .prepare(`SELECT id, kind, decision_id AS decisionId, appeal_id AS appealId, report_id AS reportId, language, state, not_sent_reason AS notSentReason,
        delivery_ids_json AS deliveryIdsJson, body_digest AS bodyDigest, notice_at AS noticeAt, complaint_deadline AS complaintDeadline, created_at AS createdAt
      FROM redress_messages WHERE installation_id = ?1 AND kind = ?2 AND source_id = ?3`)
    .bind(installationId, kind, sourceId)
    .first<Record<string, unknown> & { deliveryIdsJson: string }>();
  if (!row) return null;
  const { deliveryIdsJson, ...rest } = row;
  return { ...rest, deliveryIds: JSON.parse(deliveryIdsJson) as string[] };
}
