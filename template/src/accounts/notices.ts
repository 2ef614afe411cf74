// What the product hears of an account's ladder after the fact: `account.sanction_reversed` when an
// appeal's reversal walked a sanction back (its action had started: the product applied it and
// must lift it), and `account.strike_expired` when a strike stops counting. Both are Standard
// Webhooks through the outbox like any delivery (signed, retried, dead-lettered): a reversal goes
// to the endpoint of the sanction's action type (where the sanction was applied; not a connector,
// which maps actions onto a product's API and has no verb for a notice) and to every endpoint
// subscribed to the event type; an expiry to the subscribed endpoints. The account's own
// id is never stored, so a notice names the subject of the report the sanction or strike came from,
// as the sanction's action did. Deliveries are source_type 'alert' (platform notices, as the
// demotion's), keyed per event and endpoint, so a repeated sweep writes each one once.
//
// Imported by src/schedule.ts directly, not through accounts/index.ts: this module reaches
// enforcement (deliveries), which imports accounts/index.ts (decisions give strikes).
import { isConnectorEndpoint } from "../connectors";
import { deliveryStatement, enqueueDeliveries, subscribedEndpointsStatement, type EndpointRow } from "../enforcement";

const SLICE = 50;

interface ReversedRow {
  id: string;
  installationId: string;
  kind: string;
  actionType: string;
  threshold: number | null;
  source: string;
  runId: string;
  reportId: string | null;
  subjectKind: string | null;
  subjectId: string | null;
  overturned: number;
  createdAt: string;
  reversedAt: string;
  /** The action type's endpoint ({ id, url }) when enabled. */
  endpointJson: string | null;
}

interface ExpiredRow {
  id: string;
  installationId: string;
  accountKey: string;
  decisionId: string;
  category: string;
  points: number;
  expiresAt: string;
  reportId: string | null;
  subjectKind: string | null;
  subjectId: string | null;
}

/** The endpoints a notice goes to: `first` (if any), then those subscribed to the event (enabled, never a connector's), each once. */
async function endpointsFor(db: D1Database, installationId: string, eventType: string, first: string | null, cache: Map<string, EndpointRow[]>): Promise<string[]> {
  const key = `${installationId}\u0000${eventType}`;
  if (!cache.has(key))
    cache.set(
      key,
      (await subscribedEndpointsStatement(db, installationId, eventType).all<EndpointRow>()).results.filter((e) => !isConnectorEndpoint(e.url)),
    );
  return [...new Set([...(first ? [first] : []), ...cache.get(key)!.map((e) => e.id)])];
}

const subject = (row: { subjectKind: string | null; subjectId: string | null }) => (row.subjectKind && row.subjectId ? { kind: row.subjectKind, id: row.subjectId } : null);

/**
 * The schedule's sweep: up to 50 sanctions walked back and 50 strikes expired since the last run,
 * each with its deliveries and its mark in one batch (written once: the mark is guarded, the
 * delivery keyed). A sanction walked back that never started (refused, pending) is marked without
 * a notice: nothing was applied.
 */
export async function sweepAccountNotices(env: Env, now: Date): Promise<Record<string, number>> {
  const at = now.toISOString();
  // Due now by the consumer's clock (a scheduled time slightly ahead would hold the first attempt back).
  const sendAt = new Date(Math.min(now.getTime(), Date.now())).toISOString();
  const cache = new Map<string, EndpointRow[]>();
  const [reversed, expired] = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(`SELECT s.id, s.installation_id AS installationId, s.kind, s.action_type_key AS actionType, s.threshold, s.source, s.run_id AS runId, s.report_id AS reportId,
        r.subject_kind AS subjectKind, r.subject_id AS subjectId, s.created_at AS createdAt, s.updated_at AS reversedAt,
        EXISTS (SELECT 1 FROM decisions d JOIN decision_reversals v ON v.decision_id = d.id AND v.installation_id = d.installation_id
          WHERE d.installation_id = s.installation_id AND d.run_id = s.run_id) AS overturned,
        (SELECT json_object('id', e.id, 'url', e.url) FROM action_types t JOIN webhook_endpoints e ON e.id = t.endpoint_id AND e.installation_id = t.installation_id
          WHERE t.installation_id = s.installation_id AND t.key = s.action_type_key AND e.state = 'enabled') AS endpointJson
      FROM account_sanctions s LEFT JOIN reports r ON r.id = s.report_id AND r.installation_id = s.installation_id
      WHERE s.state = 'reversed' AND s.reversal_notified_at IS NULL ORDER BY s.updated_at LIMIT ${SLICE}`),
    env.DB.prepare(`SELECT k.id, k.installation_id AS installationId, k.account_key AS accountKey, k.decision_id AS decisionId, k.category, k.points, k.expires_at AS expiresAt,
        d.report_id AS reportId, d.subject_kind AS subjectKind, d.subject_id AS subjectId
      FROM strikes k LEFT JOIN decisions d ON d.id = k.decision_id AND d.installation_id = k.installation_id
      WHERE k.reversed_at IS NULL AND k.expiry_notified_at IS NULL AND k.expires_at <= ?1 ORDER BY k.expires_at LIMIT ${SLICE}`).bind(at),
  ]);
  const deliveryIds: string[] = [];
  let notices = 0;
  for (const row of reversed!.results as unknown as ReversedRow[]) {
    // The endpoint that applied it, unless a connector (a product's own API: it takes actions, not notices).
    const applied = row.endpointJson ? (JSON.parse(row.endpointJson) as { id: string; url: string }) : null;
    const first = applied && !isConnectorEndpoint(applied.url) ? applied.id : null;
    const endpoints = row.runId ? await endpointsFor(env.DB, row.installationId, "account.sanction_reversed", first, cache) : [];
    const data = {
      sanctionId: row.id,
      kind: row.kind,
      actionType: row.actionType,
      source: row.source,
      threshold: row.threshold,
      // Its own decision overturned on appeal, or the strikes that reached its rung reversed.
      reason: row.overturned === 1 ? "decision_overturned" : "strike_reversed",
      reportId: row.reportId,
      subject: subject(row),
      sanctionedAt: row.createdAt,
      reversedAt: row.reversedAt,
    };
    const deliveries = await Promise.all(
      endpoints.map((endpointId) =>
        deliveryStatement(env, { installationId: row.installationId, endpointId, eventType: "account.sanction_reversed", sourceType: "alert", sourceId: `account_sanction:${row.id}:reversed:${endpointId}`, data, at: sendAt }),
      ),
    );
    const [marked] = await env.DB.batch([
      env.DB.prepare(`UPDATE account_sanctions SET reversal_notified_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND reversal_notified_at IS NULL`).bind(row.installationId, row.id, at),
      ...deliveries.map((d) => d.statement),
    ]);
    if ((marked!.meta.changes ?? 0) > 0) {
      deliveryIds.push(...deliveries.map((d) => d.id));
      notices += deliveries.length;
    }
  }
  for (const row of expired!.results as unknown as ExpiredRow[]) {
    const endpoints = await endpointsFor(env.DB, row.installationId, "account.strike_expired", null, cache);
    const left =
      endpoints.length === 0
        ? null
        : await env.DB.prepare(`SELECT COALESCE(SUM(points), 0) AS n FROM strikes WHERE installation_id = ?1 AND account_key = ?2 AND reversed_at IS NULL AND expires_at > ?3`)
            .bind(row.installationId, row.accountKey, at)
            .first<{ n: number }>();
    const data = { strikeId: row.id, decisionId: row.decisionId, category: row.category, points: row.points, accountPoints: Number(left?.n ?? 0), reportId: row.reportId, subject: subject(row), expiredAt: row.expiresAt };
    const deliveries = await Promise.all(
      endpoints.map((endpointId) => deliveryStatement(env, { installationId: row.installationId, endpointId, eventType: "account.strike_expired", sourceType: "alert", sourceId: `strike:${row.id}:expired:${endpointId}`, data, at: sendAt })),
    );
    const [marked] = await env.DB.batch([
      env.DB.prepare(`UPDATE strikes SET expiry_notified_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND expiry_notified_at IS NULL`).bind(row.installationId, row.id, at),
      ...deliveries.map((d) => d.statement),
    ]);
    if ((marked!.meta.changes ?? 0) > 0) {
      deliveryIds.push(...deliveries.map((d) => d.id));
      notices += deliveries.length;
    }
  }
  await enqueueDeliveries(env, deliveryIds);
  return { reversed: reversed!.results.length, expired: expired!.results.length, notices, more: reversed!.results.length === SLICE || expired!.results.length === SLICE ? 1 : 0 };
}
