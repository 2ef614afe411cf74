// DSA Art. 20(5): once an appeal is decided, the appellant is told the outcome and the redress still
// open (out-of-court settlement, courts), as a signed message.send webhook, recorded in
// redress_messages and audited. Called after the batch that decided the appeal (POST
// /appeals/:id/resolve, a review task's completion) and by the schedule for any decided appeal
// still without one; idempotent per appeal.
import { auditStatement } from "../audit";
import { openPersonalData } from "../cases";
import { newId, sha256Hex } from "../lib/crypto";
import { restrictsAnything } from "../lib/dsa-vocabulary";
import { reportPersonalDataOf } from "./affected-user";
import { readRedressSettings } from "./affected-user-settings";
import { renderComplaintOutcome, templateLanguage } from "./affected-user-templates";
import { subscribedEndpoints } from "./webhook-endpoints";
import { deliveryStatement, enqueueDeliveries } from "./webhooks";

interface DecidedAppeal {
  id: string;
  reportId: string | null;
  decisionId: string | null;
  appellantRole: string | null;
  state: string;
  personalData: string | null;
  outcomeReason: string | null;
  decidedAt: string;
  restrictionsJson: string | null;
}

/** Sends the outcome of a decided appeal to its appellant (once). Returns the redress message's state, or null while the appeal is open. */
export async function sendComplaintOutcome(env: Env, installationId: string, appealId: string): Promise<{ state: string; reason: string | null } | null> {
  const appeal = await env.DB.prepare(`
    SELECT a.id, a.report_id AS reportId, a.decision_id AS decisionId, a.appellant_role AS appellantRole, a.state, a.personal_data AS personalData,
      a.outcome_reason AS outcomeReason, a.decided_at AS decidedAt, d.restrictions_json AS restrictionsJson
    FROM appeals a LEFT JOIN decisions d ON d.installation_id = a.installation_id AND d.id = a.decision_id
    WHERE a.installation_id = ?1 AND a.id = ?2 AND a.state != 'open'`)
    .bind(installationId, appealId)
    .first<DecidedAppeal>();
  if (!appeal) return null;
  const existing = await env.DB.prepare(`SELECT state, not_sent_reason AS reason FROM redress_messages WHERE installation_id = ?1 AND kind = 'complaint_outcome' AND source_id = ?2`)
    .bind(installationId, appealId)
    .first<{ state: string; reason: string | null }>();
  if (existing) return existing;
  const sealed = appeal.personalData ? await openPersonalData<{ appellant: { id?: string; contact?: string } | null }>(env, installationId, `appeal:${appeal.id}`, appeal.personalData) : null;
  const report = await reportPersonalDataOf(env, installationId, appeal.reportId);
  // The appellant as they named themselves; else the person the role points to on the report.
  const named = sealed?.appellant?.id || sealed?.appellant?.contact ? sealed.appellant : null;
  const fallback = appeal.appellantRole === "notifier" ? (report?.reporter ?? null) : appeal.appellantRole === "affected" && report?.subjectOwnerId ? { id: report.subjectOwnerId } : null;
  const appellant = named ?? (fallback?.id || fallback?.contact ? fallback : null);
  const settings = await readRedressSettings(env.DB, installationId);
  const endpoints = appellant ? await subscribedEndpoints(env.DB, installationId, "message.send") : [];
  const reason = !appellant ? "recipient_unknown" : endpoints.length === 0 ? "endpoint_missing" : null;
  const language = templateLanguage(report?.locale);
  const settlementBodies = settings.settlementBodies.map(({ name, url }) => ({ name, url }));
  const restricted = appeal.restrictionsJson ? restrictsAnything(JSON.parse(appeal.restrictionsJson)) : false;
  const body = reason ? null : renderComplaintOutcome(language, { outcome: appeal.state, restricted, reason: appeal.outcomeReason, settlementBodies });
  const messageId = newId("rdm");
  const at = new Date().toISOString();
  const deliveries = body
    ? await Promise.all(
        endpoints.map((endpoint) =>
          deliveryStatement(env, {
            installationId,
            endpointId: endpoint.id,
            eventType: "message.send",
            sourceType: "message",
            sourceId: `complaint_outcome:${appeal.id}:${endpoint.id}`,
            at,
            data: {
              messageId,
              kind: "complaint_outcome",
              templateKey: "dsa.complaint_outcome",
              language,
              reportId: appeal.reportId,
              decisionId: appeal.decisionId,
              appealId: appeal.id,
              outcome: appeal.state,
              recipient: { kind: "appellant", role: appeal.appellantRole, id: appellant!.id ?? null, contact: appellant!.contact ?? null },
              body,
              redress: { settlementBodies, courts: true },
            },
          }),
        ),
      )
    : [];
  const deliveryIds = deliveries.map((d) => d.id);
  const bodyDigest = body ? `sha256:${await sha256Hex(body)}` : null;
  const [inserted] = await env.DB.batch([
    env.DB.prepare(`
      INSERT OR IGNORE INTO redress_messages (id, installation_id, kind, source_id, decision_id, appeal_id, report_id, language, state, not_sent_reason, delivery_ids_json, body_digest, notice_at, created_at)
      VALUES (?1, ?2, 'complaint_outcome', ?3, ?4, ?3, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
    `).bind(messageId, installationId, appeal.id, appeal.decisionId, appeal.reportId, language, reason ? "not_sent" : "queued", reason, JSON.stringify(deliveryIds), bodyDigest, at),
    ...deliveries.map((d) => d.statement),
    auditStatement(
      env.DB,
      {
        installationId,
        idempotencyKey: `appeal:${appeal.id}:outcome_message`,
        action: reason ? "appeal.outcome_not_sent" : "appeal.outcome_queued",
        actor: { type: "system", id: "redress" },
        target: { type: "appeal", id: appeal.id },
        details: { messageId, outcome: appeal.state, language, reason, deliveries: deliveryIds, bodyDigest },
        at,
      },
      { table: "redress_messages", id: messageId },
    ),
  ]);
  // Another call recorded it first: its deliveries are the ones written (ours were ignored by source).
  if ((inserted!.meta.changes ?? 0) === 0) return sendComplaintOutcome(env, installationId, appealId);
  await enqueueDeliveries(env, deliveryIds);
  return { state: reason ? "not_sent" : "queued", reason };
}

/** The schedule's catch-up: decided appeals of the last 7 days without an outcome message (at most 50 per run). */
export async function sweepComplaintOutcomes(env: Env, now: Date): Promise<Record<string, number>> {
  const since = new Date(now.getTime() - 7 * 86_400_000).toISOString();
  const { results } = await env.DB.prepare(`
    SELECT a.installation_id AS installationId, a.id FROM appeals a
    WHERE a.decided_at IS NOT NULL AND a.decided_at >= ?1 AND a.state != 'open'
      AND NOT EXISTS (SELECT 1 FROM redress_messages m WHERE m.installation_id = a.installation_id AND m.kind = 'complaint_outcome' AND m.source_id = a.id)
    ORDER BY a.decided_at LIMIT 50`)
    .bind(since)
    .all<{ installationId: string; id: string }>();
  let sent = 0;
  for (const appeal of results) if (await sendComplaintOutcome(env, appeal.installationId, appeal.id)) sent += 1;
  return { sent };
}
