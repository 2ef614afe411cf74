// Alerts: what an on-call engineer must hear about without opening the dashboard, pushed as signed
// Standard Webhooks (`alert.*`) to the endpoint an installation's alert settings name, through the
// same outbox as every other delivery (retries, dead-lettering, attempts listed).
//
// The schedule's alert sweep (after the audit sweep) looks at each installation with settings:
//   alert.sla_breached        tasks (open or claimed) that passed their due time since the last look
//   alert.delivery_dead       deliveries dead-lettered since the last look (alert deliveries excepted)
//   alert.repair_spike        ≥ threshold runs entered repair_required in the last 15 minutes
//   alert.audit_verify_failed the schedule's last full audit verification found the chain broken
// Each alert is raised once: an `alerts` row unique per installation and key (the window it
// covers, the 15-minute bucket, the verification pass), its delivery and its `alert.raised` audit
// event written only with that row, in one batch. The watermarks move forward with a
// compare-and-set, so two sweeps at once raise nothing twice.
import { auditStatement, lastFullVerification } from "../audit";
import type { Actor } from "../auth";
import { deliveryStatement, enqueueDeliveries, getEndpointRow } from "../enforcement";
import { notFound } from "../errors";
import { newId } from "../lib/crypto";

export const ALERT_KINDS = ["sla_breached", "delivery_dead", "repair_spike", "audit_verify_failed"] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];
export const DEFAULT_REPAIR_SPIKE_THRESHOLD = 10;
export const REPAIR_SPIKE_WINDOW_MS = 15 * 60_000;
/** Installations the alert sweep looks at per run (least recently looked at first). */
const ALERT_SWEEP_INSTALLATIONS = 50;
const SAMPLE = 10;

interface SettingsRow {
  installationId: string;
  endpointId: string;
  kindsJson: string;
  repairSpikeThreshold: number;
  slaCheckedUntil: string;
  deadCheckedUntil: string;
  checkedAt: string | null;
  updatedAt: string;
}

const SETTINGS_COLUMNS = `installation_id AS installationId, endpoint_id AS endpointId, kinds_json AS kindsJson, repair_spike_threshold AS repairSpikeThreshold,
  sla_checked_until AS slaCheckedUntil, dead_checked_until AS deadCheckedUntil, checked_at AS checkedAt, updated_at AS updatedAt`;

function serializeSettings(row: SettingsRow | null) {
  return {
    endpointId: row?.endpointId ?? null,
    kinds: row ? (JSON.parse(row.kindsJson) as AlertKind[]) : [...ALERT_KINDS],
    repairSpikeThreshold: row?.repairSpikeThreshold ?? DEFAULT_REPAIR_SPIKE_THRESHOLD,
    checkedAt: row?.checkedAt ?? null,
    updatedAt: row?.updatedAt ?? null,
  };
}

function getSettingsRow(db: D1Database, installationId: string): Promise<SettingsRow | null> {
  return db.prepare(`SELECT ${SETTINGS_COLUMNS} FROM alert_settings WHERE installation_id = ?1`).bind(installationId).first<SettingsRow>();
}

/** The installation's alert settings (`endpointId: null` when alerts go nowhere yet). */
export async function getAlertSettings(env: Env, actor: Actor) {
  return serializeSettings(await getSettingsRow(env.DB, actor.installationId));
}

/**
 * Names the endpoint alerts go to (an endpoint of this installation; 404 otherwise), which kinds
 * (default all) and the repair spike threshold (default 10 in 15 minutes). Audited. The first
 * setting starts looking from now: breaches and dead deliveries from before are not alerted.
 */
export async function putAlertSettings(env: Env, actor: Actor, input: { endpointId: string; kinds?: AlertKind[]; repairSpikeThreshold?: number }) {
  const endpoint = await getEndpointRow(env.DB, actor.installationId, input.endpointId);
  if (!endpoint) throw notFound("webhook_endpoint");
  const kinds = input.kinds ?? [...ALERT_KINDS];
  const threshold = input.repairSpikeThreshold ?? DEFAULT_REPAIR_SPIKE_THRESHOLD;
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO alert_settings (installation_id, endpoint_id, kinds_json, repair_spike_threshold, sla_checked_until, dead_checked_until, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?5, ?5)
      ON CONFLICT(installation_id) DO UPDATE SET endpoint_id = excluded.endpoint_id, kinds_json = excluded.kinds_json,
        repair_spike_threshold = excluded.repair_spike_threshold, updated_at = excluded.updated_at
    `).bind(actor.installationId, endpoint.id, JSON.stringify(kinds), threshold, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `alert_settings:${actor.installationId}:updated:${at}:${crypto.randomUUID()}`,
      action: "alert_settings.updated",
      actor: actor.audit,
      target: { type: "alert_settings", id: actor.installationId },
      details: { endpointId: endpoint.id, kinds, repairSpikeThreshold: threshold },
      at,
    }),
  ]);
  return getAlertSettings(env, actor);
}

/** Alerts raised, newest first, with their delivery's state. */
export async function listAlerts(env: Env, actor: Actor, options: { limit: number; kind?: string; before?: string }) {
  const { results } = await env.DB.prepare(`
    SELECT a.id, a.kind, a.alert_key AS alertKey, a.endpoint_id AS endpointId, a.details_json AS detailsJson, a.created_at AS createdAt,
      d.id AS deliveryId, d.state AS deliveryState
    FROM alerts a LEFT JOIN webhook_deliveries d ON d.source_type = 'alert' AND d.source_id = a.id
    WHERE a.installation_id = ?1 AND (?2 IS NULL OR a.kind = ?2) AND (?3 IS NULL OR a.id < ?3)
    ORDER BY a.id DESC LIMIT ?4`)
    .bind(actor.installationId, options.kind ?? null, options.before ?? null, options.limit + 1)
    .all<{ id: string; kind: string; alertKey: string; endpointId: string; detailsJson: string; createdAt: string; deliveryId: string | null; deliveryState: string | null }>();
  const page = results.slice(0, options.limit);
  return {
    items: page.map(({ detailsJson, ...row }) => ({ ...row, details: JSON.parse(detailsJson) as Record<string, unknown> })),
    nextCursor: results.length > options.limit ? page.at(-1)!.id : null,
  };
}

/** Tasks of an installation (?1) newly past due in (?2, ?3]; exported for the bench's query plan. */
export const SLA_BREACHES_SQL = `SELECT COUNT(*) AS n, MIN(due_at) AS firstDueAt FROM human_tasks
  WHERE installation_id = ?1 AND state IN ('open', 'claimed') AND due_at > ?2 AND due_at <= ?3`;

interface Detected {
  kind: AlertKind;
  key: string;
  details: Record<string, unknown>;
}

async function slaBreaches(db: D1Database, installationId: string, from: string, to: string): Promise<Detected | null> {
  const [total, queues, sample] = await db.batch<Record<string, unknown>>([
    db.prepare(SLA_BREACHES_SQL).bind(installationId, from, to),
    db
      .prepare(`SELECT t.queue_id AS queueId, q.name AS queueName, COUNT(*) AS count FROM human_tasks t LEFT JOIN queues q ON q.id = t.queue_id
      WHERE t.installation_id = ?1 AND t.state IN ('open', 'claimed') AND t.due_at > ?2 AND t.due_at <= ?3 GROUP BY t.queue_id ORDER BY count DESC LIMIT ?4`)
      .bind(installationId, from, to, SAMPLE),
    db.prepare(`SELECT id FROM human_tasks WHERE installation_id = ?1 AND state IN ('open', 'claimed') AND due_at > ?2 AND due_at <= ?3 ORDER BY due_at LIMIT ?4`).bind(installationId, from, to, SAMPLE),
  ]);
  const count = Number(total?.results[0]?.n ?? 0);
  if (count === 0) return null;
  return {
    kind: "sla_breached",
    key: `sla_breached:${from}`,
    details: { count, window: { from, to }, firstDueAt: total?.results[0]?.firstDueAt ?? null, queues: queues?.results ?? [], sampleTaskIds: (sample?.results ?? []).map((row) => row.id) },
  };
}

async function deadDeliveries(db: D1Database, installationId: string, from: string, to: string): Promise<Detected | null> {
  const [total, byType, sample] = await db.batch<Record<string, unknown>>([
    db.prepare(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND state = 'dead' AND updated_at > ?2 AND updated_at <= ?3 AND source_type <> 'alert'`).bind(installationId, from, to),
    db
      .prepare(`SELECT event_type AS eventType, endpoint_id AS endpointId, last_error AS lastError, COUNT(*) AS count FROM webhook_deliveries
      WHERE installation_id = ?1 AND state = 'dead' AND updated_at > ?2 AND updated_at <= ?3 AND source_type <> 'alert'
      GROUP BY event_type, endpoint_id, last_error ORDER BY count DESC LIMIT ?4`)
      .bind(installationId, from, to, SAMPLE),
    db.prepare(`SELECT id FROM webhook_deliveries WHERE installation_id = ?1 AND state = 'dead' AND updated_at > ?2 AND updated_at <= ?3 AND source_type <> 'alert' ORDER BY updated_at LIMIT ?4`).bind(installationId, from, to, SAMPLE),
  ]);
  const count = Number(total?.results[0]?.n ?? 0);
  if (count === 0) return null;
  return { kind: "delivery_dead", key: `delivery_dead:${from}`, details: { count, window: { from, to }, groups: byType?.results ?? [], sampleDeliveryIds: (sample?.results ?? []).map((row) => row.id) } };
}

async function repairSpike(db: D1Database, installationId: string, now: Date, threshold: number): Promise<Detected | null> {
  const since = new Date(now.getTime() - REPAIR_SPIKE_WINDOW_MS).toISOString();
  const [total, byCode] = await db.batch<Record<string, unknown>>([
    db.prepare(`SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND state = 'repair_required' AND updated_at > ?2`).bind(installationId, since),
    db
      .prepare(`SELECT error_code AS errorCode, workflow_version_id AS workflowVersionId, COUNT(*) AS count FROM workflow_runs
      WHERE installation_id = ?1 AND state = 'repair_required' AND updated_at > ?2 GROUP BY error_code, workflow_version_id ORDER BY count DESC LIMIT ?3`)
      .bind(installationId, since, SAMPLE),
  ]);
  const count = Number(total?.results[0]?.n ?? 0);
  if (count < threshold) return null;
  // One alert per 15-minute bucket while the spike lasts.
  const bucket = new Date(Math.floor(now.getTime() / REPAIR_SPIKE_WINDOW_MS) * REPAIR_SPIKE_WINDOW_MS).toISOString();
  return { kind: "repair_spike", key: `repair_spike:${bucket}`, details: { count, threshold, windowMinutes: REPAIR_SPIKE_WINDOW_MS / 60_000, since, groups: byCode?.results ?? [] } };
}

async function auditVerifyFailed(db: D1Database, installationId: string): Promise<Detected | null> {
  const result = (await lastFullVerification(db, installationId)) as { ok?: boolean; firstBroken?: { seq?: number; reason?: string }; passStartedAt?: string; finishedAt?: string } | null;
  if (result?.ok !== false) return null;
  return {
    kind: "audit_verify_failed",
    key: `audit_verify_failed:${result.finishedAt ?? result.passStartedAt ?? "unknown"}`,
    details: { firstBroken: { seq: result.firstBroken?.seq ?? null, reason: result.firstBroken?.reason ?? null }, passStartedAt: result.passStartedAt ?? null, finishedAt: result.finishedAt ?? null },
  };
}

/**
 * The alert sweep (on the schedule, after the audit sweep; bounded, idempotent): for up to 50
 * installations with alert settings, detects what is new since the last look and raises each
 * alert once, delivered as `alert.<kind>` to the settings' endpoint. Disabled kinds are not
 * raised, but their window still moves on (enabling a kind later does not replay the past).
 */
export async function sweepAlerts(env: Env, now: Date = new Date()): Promise<{ installations: number; raised: number }> {
  const { results: settings } = await env.DB.prepare(`SELECT ${SETTINGS_COLUMNS} FROM alert_settings ORDER BY COALESCE(checked_at, '') LIMIT ?1`).bind(ALERT_SWEEP_INSTALLATIONS).all<SettingsRow>();
  let raised = 0;
  for (const row of settings) raised += await alertInstallation(env, row, now);
  return { installations: settings.length, raised };
}

async function alertInstallation(env: Env, row: SettingsRow, now: Date): Promise<number> {
  const at = now.toISOString();
  const kinds = new Set(JSON.parse(row.kindsJson) as AlertKind[]);
  // A watermark never moves backwards (a sweep with an earlier clock looks at nothing).
  // The watermarks are ISO timestamps (strings compared in order); Math.max would make them NaN.
  // biome-ignore lint/complexity/useMathMinMax: string comparison, not numbers
  const slaTo = at > row.slaCheckedUntil ? at : row.slaCheckedUntil;
  // biome-ignore lint/complexity/useMathMinMax: string comparison, not numbers
  const deadTo = at > row.deadCheckedUntil ? at : row.deadCheckedUntil;
  const found = [
    kinds.has("sla_breached") && slaTo > row.slaCheckedUntil ? await slaBreaches(env.DB, row.installationId, row.slaCheckedUntil, slaTo) : null,
    kinds.has("delivery_dead") && deadTo > row.deadCheckedUntil ? await deadDeliveries(env.DB, row.installationId, row.deadCheckedUntil, deadTo) : null,
    kinds.has("repair_spike") ? await repairSpike(env.DB, row.installationId, now, row.repairSpikeThreshold) : null,
    kinds.has("audit_verify_failed") ? await auditVerifyFailed(env.DB, row.installationId) : null,
  ].filter((alert): alert is Detected => alert !== null);
  const statements: D1PreparedStatement[] = [
    env.DB.prepare(`UPDATE alert_settings SET sla_checked_until = ?2, dead_checked_until = ?3, checked_at = ?4
      WHERE installation_id = ?1 AND sla_checked_until = ?5 AND dead_checked_until = ?6`).bind(row.installationId, slaTo, deadTo, at, row.slaCheckedUntil, row.deadCheckedUntil),
  ];
  const deliveries: string[] = [];
  // Due now by the consumer's clock (a scheduled time slightly ahead would hold the first attempt back).
  const sendAt = new Date(Math.min(now.getTime(), Date.now())).toISOString();
  for (const alert of found) {
    const alertId = newId("alr");
    const data = { alertId, kind: alert.kind, installationId: row.installationId, raisedAt: at, ...alert.details };
    const delivery = await deliveryStatement(
      env,
      { installationId: row.installationId, endpointId: row.endpointId, eventType: `alert.${alert.kind}`, sourceType: "alert", sourceId: alertId, data, at: sendAt },
      { table: "alerts", id: alertId },
    );
    deliveries.push(delivery.id);
    statements.push(
      env.DB.prepare(`INSERT OR IGNORE INTO alerts (id, installation_id, kind, alert_key, endpoint_id, details_json, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`).bind(
        alertId,
        row.installationId,
        alert.kind,
        alert.key,
        row.endpointId,
        JSON.stringify(alert.details),
        at,
      ),
      delivery.statement,
      auditStatement(
        env.DB,
        {
          installationId: row.installationId,
          idempotencyKey: `alert:${alertId}:raised`,
          action: "alert.raised",
          actor: { type: "system", id: "schedule" },
          target: { type: "alert", id: alertId },
          details: { kind: alert.kind, key: alert.key, endpointId: row.endpointId, deliveryId: delivery.id },
          at,
        },
        { table: "alerts", id: alertId },
      ),
    );
  }
  const written = await env.DB.batch(statements);
  const sent = deliveries.filter((_, index) => written[2 + index * 3]?.meta.changes === 1);
  // Queued after the commit; a lost message is the outbox sweep's to re-queue.
  await enqueueDeliveries(env, sent).catch(() => {});
  return sent.length;
}
