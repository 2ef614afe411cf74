// Webhook deliveries (Standard Webhooks): the delivery rows recorded in D1 and carried by the
// DELIVERIES queue, every attempt recorded (the first on the delivery's own row, later ones as
// webhook_attempts rows: lib/delivery-attempts.ts), exponential backoff with jitter, dead-letter
// after the endpoint's max attempts — never silently lost. The operator's list, detail and resend of
// deliveries are delivery-operations.ts; the endpoints they go to (secrets shown once, CRUD,
// subscriptions) are webhook-endpoints.ts.
//
// webhook_deliveries is an outbox: a pending row is the promise to send. The queue message only
// wakes the consumer; `next_attempt_at` says when the next attempt is due and, while an attempt is
// in flight, holds its lease. If a message is lost (queueing failed after the row committed, or a
// consumer died mid-attempt), the scheduled sweep puts every pending delivery overdue by more than
// a minute back on the queue. Any number of messages for one delivery send it at most once per
// attempt: an attempt first claims the delivery (a compare-and-set on next_attempt_at).
//
// Inline first attempts (delivery-inline.ts) come through the same attemptDelivery;
// the transport, one signed request per attempt, is webhook-send.ts. An hour after a delivery
// settled, its sealed payload and attempts are in its R2 object: reads of them ask
// delivery-archive.ts, which knows both tiers.
import { auditStatement, canonicalJson, combineAuditStatements } from "../audit";
import { sealPersonalData } from "../cases";
import { rowGuardClause, type RowGuard } from "../lib/d1";
import { attemptRowsSql } from "../lib/delivery-attempts";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { newId, sha256HexSync } from "../lib/crypto";
import { isConnectorEndpoint, RATE_LIMITED, sendThroughConnector, type TransportResult } from "../connectors";
import { sendWebhookAttempt, type AttemptEndpoint } from "./webhook-send";

export { parseRetryAfter, sendWebhookAttempt, type AttemptEndpoint, type AttemptResult } from "./webhook-send";
/** Re-exported for test/egress.test.ts, which imports it from here (src/ imports webhook-endpoints.ts). */
export { createEndpoint } from "./webhook-endpoints";

/** Alerts the schedule raises (operations/alerts.ts), sent to the endpoint an installation's alert settings name. */
export const ALERT_EVENT_TYPES = ["alert.sla_breached", "alert.delivery_dead", "alert.repair_spike", "alert.audit_verify_failed"] as const;
/** What the product hears of an account's ladder after the fact (accounts/notices.ts): a sanction walked back, a strike expired. */
export const ACCOUNT_EVENT_TYPES = ["account.sanction_reversed", "account.strike_expired"] as const;
/** A label an entity carries changed (detection/label-webhooks.ts): applied, negated by a person, or past its expiry. */
export const LABEL_EVENT_TYPES = ["label.applied", "label.negated", "label.expired"] as const;
export const WEBHOOK_EVENT_TYPES = ["action.execute", "message.send", "report.handoff", ...ALERT_EVENT_TYPES, ...ACCOUNT_EVENT_TYPES, ...LABEL_EVENT_TYPES] as const;
const DEFAULT_TIMEOUT_SECONDS = 15;
const MAX_BACKOFF_SECONDS = 6 * 3600;
/** A pending delivery whose next attempt is this overdue has lost its message; the sweep re-queues it. */
export const OUTBOX_GRACE_MS = 60_000;
/** Deliveries the sweep re-queues per run (the rest at the next run). */
const OUTBOX_SWEEP_LIMIT = 500;
/** How long an attempt's claim lasts beyond its request timeout before the sweep may retake it. */
const CLAIM_MARGIN_MS = 60_000;

/** The request timeout (WEBHOOK_TIMEOUT_SECONDS, 1 to 60; default 15). */
function requestTimeoutMs(env: Env): number {
  const configured = Number((env as { WEBHOOK_TIMEOUT_SECONDS?: string }).WEBHOOK_TIMEOUT_SECONDS);
  return (Number.isFinite(configured) && configured >= 1 && configured <= 60 ? configured : DEFAULT_TIMEOUT_SECONDS) * 1000;
}

export interface NewDelivery {
  id: string;
  statement: D1PreparedStatement;
  /** The payload as sent (its JSON text) and as stored, for an attempt made by the host that wrote the row (delivery-inline.ts). */
  body: string;
  payloadSealed: string;
}

/**
 * A delivery row for the caller's batch; the payload (which may carry personal data, e.g. a
 * reporter's contact) is sealed at rest and opened only to send it. `INSERT OR IGNORE` on its
 * source keeps a repeated call to one delivery. With `onlyIf`, the row is written only when that
 * row exists by then in the batch with those values (e.g. the proposal its approval moved on).
 * With `leaseUntil` (claimLeaseUntil), the row is written already claimed for its first attempt,
 * which the writing host then makes without a claim of its own (delivery-inline.ts); anyone
 * else finds it not yet due until the lease ends, as with any attempt in flight.
 */
export async function deliveryStatement(
  env: Env,
  input: { installationId: string; endpointId: string; eventType: string; sourceType: "action" | "message" | "handoff" | "resend" | "alert"; sourceId: string; data: unknown; at: string; leaseUntil?: string },
  onlyIf?: RowGuard,
): Promise<NewDelivery> {
  const id = newId("msg");
  const payload = { type: input.eventType, timestamp: input.at, data: input.data };
  const { sealed } = await sealPersonalData(env, input.installationId, `webhook_delivery:${id}`, payload);
  const guard = onlyIf ? rowGuardClause(onlyIf, 11) : { sql: "", binds: [] };
  const statement = env.DB.prepare(`
    INSERT OR IGNORE INTO webhook_deliveries (id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, next_attempt_at, created_at, updated_at)
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', 0, ?10, ?9, ?9 ${guard.sql}
  `).bind(id, input.installationId, input.endpointId, input.eventType, input.sourceType, input.sourceId, sealed, `sha256:${sha256HexSync(canonicalJson(payload))}`, input.at, input.leaseUntil ?? input.at, ...guard.binds);
  return { id, statement, body: JSON.stringify(payload), payloadSealed: sealed };
}

/** When an attempt's claim made now ends: its request timeout plus the claim margin. */
export function claimLeaseUntil(env: Env, now = Date.now()): string {
  return new Date(now + requestTimeoutMs(env) + CLAIM_MARGIN_MS).toISOString();
}

/** Puts pending deliveries on the queue (after their rows are committed), optionally after a delay. */
export async function enqueueDeliveries(env: Env, deliveryIds: string[], delaySeconds?: number): Promise<void> {
  if (deliveryIds.length === 0) return;
  const delay = delaySeconds && delaySeconds > 0 ? { delaySeconds: Math.min(Math.ceil(delaySeconds), 43_200) } : {};
  await env.DELIVERIES.sendBatch(deliveryIds.map((deliveryId) => ({ body: { deliveryId }, ...delay })));
}

export interface DeliveryRow {
  id: string;
  installationId: string;
  endpointId: string;
  eventType: string;
  sourceType: string;
  sourceId: string;
  payloadSealed: string;
  state: string;
  attempts: number;
  nextAttemptAt: string | null;
  createdAt: string;
}

export const DELIVERY_COLUMNS = `id, installation_id AS installationId, endpoint_id AS endpointId, event_type AS eventType, source_type AS sourceType,
  source_id AS sourceId, payload_sealed AS payloadSealed, state, attempts, next_attempt_at AS nextAttemptAt, created_at AS createdAt`;

/** Which path made an attempt (webhook_attempts.via): the host right after the commit, or the queue. */
export type AttemptVia = "inline" | "queue";

const ATTEMPT_ENDPOINT_COLUMNS = `e.id, e.url, e.secret_sealed AS secretSealed, e.retry_base_seconds AS retryBaseSeconds, e.max_attempts AS maxAttempts, e.state`;

/**
 * SQL for what an attempt needs of an endpoint (AttemptEndpoint) as one JSON text, NULL when there
 * is none, for a caller's read (e.g. beside the action type that names the endpoint).
 */
export function attemptEndpointJsonSql(installation: string, endpointId: string): string {
  return `(SELECT json_object('id', e.id, 'url', e.url, 'secretSealed', e.secret_sealed, 'retryBaseSeconds', e.retry_base_seconds, 'maxAttempts', e.max_attempts, 'state', e.state)
    FROM webhook_endpoints e WHERE e.installation_id = ${installation} AND e.id = ${endpointId})`;
}

/** Exponential backoff with full jitter around the endpoint's base: base·2^(n−1)·[0.5, 1.5), capped at 6 h. */
export function backoffSeconds(baseSeconds: number, attempt: number, retryAfter: number | null): number {
  if (retryAfter !== null && Number.isFinite(retryAfter)) return Math.min(Math.max(Math.ceil(retryAfter), 0), MAX_BACKOFF_SECONDS);
  const exponential = baseSeconds * 2 ** Math.max(attempt - 1, 0);
  return Math.min(Math.round(exponential * (0.5 + Math.random())), MAX_BACKOFF_SECONDS);
}

/** How long a delivery may wait out rate limits before they count as attempts again. */
const MAX_DEFERRAL_MS = 24 * 3600_000;

/** This delivery's attempts a rate limit deferred (recorded with the error RATE_LIMITED). */
async function deferredAttempts(env: Env, deliveryId: string): Promise<number> {
  const row = await env.DB.prepare(`SELECT COUNT(*) AS n FROM (${attemptRowsSql("d.id = ?1", "attempt")}) WHERE error = ?2`)
    .bind(deliveryId, RATE_LIMITED)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

/** A finished outcome names the delivery's source, so its caller can wake it. */
export type DeliveryOutcome = { kind: "delivered"; sourceType: string; sourceId: string } | { kind: "retry"; delaySeconds: number } | { kind: "dead"; reason: string; sourceType: string; sourceId: string } | { kind: "skip" };

/** Called once a delivery is finished (delivered or dead) so its source can move on. */
export type DeliveryFinisher = (env: Env, delivery: { id: string; installationId: string; sourceType: string; sourceId: string; delivered: boolean; at: string }) => Promise<D1PreparedStatement[]>;

/**
 * Asked at send time, in the claim's own batch and before any request: a reason its source no
 * longer wants the delivery sent (e.g. `source_cancelled`: the proposal was cancelled, or its run
 * ended), or null. `statement` reads what the gate needs (the delivery's source by a subquery on
 * its id, so it shares the claim's round trip); `refusal` decides from that read's first row, and
 * may write (e.g. cancel a proposal left open). A refused delivery ends as `dead` with that
 * reason, without a request.
 */
export interface DeliveryGate {
  statement: (db: D1Database, deliveryId: string) => D1PreparedStatement;
  refusal: (env: Env, delivery: { id: string; installationId: string; sourceType: string; sourceId: string }, row: Record<string, unknown> | undefined) => Promise<string | null>;
}

/**
 * One attempt at one delivery: wait until it is due (a backoff or a receiver's `retry-after` is
 * honoured whichever message arrives), claim it, send it (sendWebhookAttempt), record the attempt
 * — and which path made it, `via` — with the delivery's new state and next due time in one batch
 * (plus what the finisher adds when it ends), and say whether to retry. An attempt that loses the
 * claim to another is skipped. The consumer and the inline first attempt both come through here.
 */
export async function attemptDelivery(env: Env, deliveryId: string, finisher: DeliveryFinisher, gate?: DeliveryGate, via: AttemptVia = "queue"): Promise<DeliveryOutcome> {
  const now = new Date().toISOString();
  // One round trip: claim the attempt if it is pending and due (a compare-and-set: a claimed
  // attempt holds next_attempt_at in the future), read its endpoint, and what the gate needs.
  const [claimed, endpointRead, gateRead] = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(`UPDATE webhook_deliveries SET next_attempt_at = ?2 WHERE id = ?1 AND state = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?3)
      RETURNING ${DELIVERY_COLUMNS}`).bind(deliveryId, claimLeaseUntil(env), now),
    env.DB.prepare(`SELECT ${ATTEMPT_ENDPOINT_COLUMNS} FROM webhook_endpoints e JOIN webhook_deliveries d ON d.endpoint_id = e.id AND d.installation_id = e.installation_id WHERE d.id = ?1`).bind(deliveryId),
    ...(gate ? [gate.statement(env.DB, deliveryId)] : []),
  ]);
  const delivery = claimed!.results[0] as DeliveryRow | undefined;
  if (!delivery) {
    // Not claimed: finished, not yet due (a backoff, a receiver's retry-after, another attempt's lease), or lost to a racing claim.
    const row = await env.DB.prepare(`SELECT state, next_attempt_at AS nextAttemptAt FROM webhook_deliveries WHERE id = ?1`).bind(deliveryId).first<{ state: string; nextAttemptAt: string | null }>();
    const due = row?.state === "pending" && row.nextAttemptAt !== null ? Date.parse(row.nextAttemptAt) : 0;
    return due > Date.now() ? { kind: "retry", delaySeconds: Math.max(1, Math.ceil((due - Date.now()) / 1000)) } : { kind: "skip" };
  }
  const endpoint = (endpointRead!.results[0] as AttemptEndpoint | undefined) ?? null;
  const refused = gate ? await gate.refusal(env, delivery, gateRead?.results[0]) : null;
  return sendClaimedAttempt(env, { delivery, endpoint, refused }, finisher, via);
}

/** An attempt its caller holds the claim of: the delivery as claimed, its endpoint, the gate's answer (and, from the host that sealed it, the payload's text). */
export interface ClaimedAttempt {
  delivery: DeliveryRow;
  endpoint: AttemptEndpoint | null;
  refused: string | null;
  body?: string;
}

/**
 * The rest of an attempt once claimed (by attemptDelivery's compare-and-set, or by a row written
 * already leased to its writer): send it, and record the attempt, the delivery's new state and
 * next due time (plus the finisher's statements when it ends) in one batch.
 */
export async function sendClaimedAttempt(env: Env, claimed: ClaimedAttempt, finisher: DeliveryFinisher, via: AttemptVia): Promise<DeliveryOutcome> {
  const { delivery, endpoint, refused } = claimed;
  const timeoutMs = requestTimeoutMs(env);
  const attempt = delivery.attempts + 1;
  const started = Date.now();
  const startedAt = new Date(started).toISOString();
  let status: number | null = null;
  let error: string | null = null;
  let retryAfter: number | null = null;
  let permanent = false; // a connector's answer that retrying cannot change (connectors/mastodon-transport.ts)
  let deferred = false; // a connector throttled until a known time: wait for it, and the attempt does not count
  if (refused) {
    error = refused;
  } else if (endpoint?.state !== "enabled") {
    error = "endpoint_disabled";
  } else if (isConnectorEndpoint(endpoint.url)) {
    // A throw (a sealed value that does not open, a broken setting) is this attempt's failure, recorded
    // and counted like any other, so the delivery still reaches its last attempt and the dead letters.
    ({
      status,
      error,
      retryAfter,
      permanent,
      deferred = false,
    } = await sendThroughConnector(env, { installationId: delivery.installationId, deliveryId: delivery.id, endpointUrl: endpoint.url, payloadSealed: delivery.payloadSealed, timeoutMs }).catch(
      (): TransportResult => ({
        status: null,
        error: "connector_error",
        retryAfter: null,
        permanent: false,
      }),
    ));
  } else if (egressRefusal(endpoint.url, { allowLocal: allowLocalEgress(env) })) {
    // Checked again at delivery: a row written before the check existed, or under the local flag.
    error = "egress_refused";
  } else {
    ({ status, error, retryAfter } = await sendWebhookAttempt(env, endpoint, claimed.body === undefined ? delivery : { ...delivery, body: claimed.body }, { started, timeoutMs }));
  }
  const ok = status !== null && status >= 200 && status < 300;
  const gone = status === 410 || refused !== null || error === "endpoint_disabled" || error === "egress_refused" || permanent;
  // Attempts a rate limit deferred (until its window's known end) are not counted against maxAttempts,
  // for as long as the delivery is younger than MAX_DEFERRAL_MS; the count is read only when it matters.
  const deferrable = deferred && Date.now() - Date.parse(delivery.createdAt) < MAX_DEFERRAL_MS;
  const exhausted = !ok && !deferrable && (gone || attempt - (attempt >= (endpoint?.maxAttempts ?? 1) ? await deferredAttempts(env, delivery.id) : 0) >= (endpoint?.maxAttempts ?? 1));
  const state = ok ? "delivered" : exhausted ? "dead" : "pending";
  const finishedAt = Date.now();
  const at = new Date(finishedAt).toISOString();
  const errorText = ok ? null : (error ?? `http_${status}`);
  const delaySeconds = state === "pending" ? backoffSeconds(endpoint!.retryBaseSeconds, attempt, status === 429 || status === 503 ? retryAfter : null) : 0;
  const nextAttemptAt = state === "pending" ? new Date(finishedAt + delaySeconds * 1000).toISOString() : null;
  const durationMs = Date.now() - started;
  // The first attempt is kept on the delivery's row, in the update that records it (the row is
  // updated only while still at attempts = 0, so a replay writes nothing); a later attempt is a
  // webhook_attempts row (its UNIQUE (delivery_id, attempt) keeps one per attempt). Readers take
  // both forms (lib/delivery-attempts.ts).
  const first = attempt === 1;
  const statements = [
    ...(first
      ? []
      : [
          env.DB.prepare(`INSERT OR IGNORE INTO webhook_attempts (id, delivery_id, attempt, status_code, error, duration_ms, started_at, via) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`).bind(
            newId("att"),
            delivery.id,
            attempt,
            status,
            errorText,
            durationMs,
            startedAt,
            via,
          ),
        ]),
    env.DB.prepare(`UPDATE webhook_deliveries SET attempts = ?2, state = ?3, last_status = ?4, last_error = ?5, updated_at = ?6, next_attempt_at = ?8,
        delivered_at = CASE WHEN ?3 = 'delivered' THEN ?6 ELSE delivered_at END${first ? ", first_status_code = ?4, first_error = ?5, first_duration_ms = ?9, first_started_at = ?10, first_via = ?11" : ""}
        WHERE id = ?1 AND state = 'pending' AND attempts = ?7`).bind(delivery.id, attempt, state, status, errorText, at, delivery.attempts, nextAttemptAt, ...(first ? [durationMs, startedAt, via] : [])),
  ];
  if (status === 410 && endpoint && !permanent) {
    // 410 Gone: the receiver asks for no more deliveries. The endpoint is disabled (audited), so
    // its other pending deliveries end as dead without a request.
    statements.push(
      env.DB.prepare(`UPDATE webhook_endpoints SET state = 'disabled', disabled_reason = 'gone_410', updated_at = ?2 WHERE id = ?1`).bind(endpoint.id, at),
      auditStatement(env.DB, {
        installationId: delivery.installationId,
        idempotencyKey: `webhook_endpoint:${endpoint.id}:disabled:gone_410:${delivery.id}`,
        action: "webhook_endpoint.disabled",
        actor: { type: "system", id: "webhooks" },
        target: { type: "webhook_endpoint", id: endpoint.id },
        details: { reason: "gone_410", deliveryId: delivery.id },
        at,
      }),
    );
  }
  if (state !== "pending") {
    statements.push(
      auditStatement(env.DB, {
        installationId: delivery.installationId,
        idempotencyKey: `webhook_delivery:${delivery.id}:${state}:${attempt}`,
        action: `webhook_delivery.${state}`,
        actor: { type: "system", id: "webhooks" },
        target: { type: "webhook_delivery", id: delivery.id },
        details: { eventType: delivery.eventType, attempts: attempt, lastStatus: status, lastError: errorText },
        at,
      }),
    );
    statements.push(...(await finisher(env, { id: delivery.id, installationId: delivery.installationId, sourceType: delivery.sourceType, sourceId: delivery.sourceId, delivered: ok, at })));
  }
  // The delivery's event and its source's (an action's applied or failed, guarded on the proposal) in one statement.
  await env.DB.batch(combineAuditStatements(env.DB, statements));
  if (ok) return { kind: "delivered", sourceType: delivery.sourceType, sourceId: delivery.sourceId };
  if (exhausted) return { kind: "dead", reason: errorText ?? "failed", sourceType: delivery.sourceType, sourceId: delivery.sourceId };
  return { kind: "retry", delaySeconds };
}

/**
 * The outbox sweep (on the schedule; bounded, idempotent): every pending delivery whose next
 * attempt is more than OUTBOX_GRACE_MS overdue has lost its queue message, so it is marked due now
 * and put back on the queue. Marking first means the next run does not queue it again while its
 * message waits; a delivery in flight holds a claim in the future and is left alone; one already
 * delivered is not pending. Re-queued twice, it is still sent once per attempt (the claim).
 */
export async function sweepPendingDeliveries(env: Env, now: Date = new Date()): Promise<{ requeued: number }> {
  const cutoff = new Date(now.getTime() - OUTBOX_GRACE_MS).toISOString();
  const { results } = await env.DB.prepare(`SELECT id, next_attempt_at AS nextAttemptAt FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at < ?1 ORDER BY next_attempt_at LIMIT ?2`)
    .bind(cutoff, OUTBOX_SWEEP_LIMIT)
    .all<{ id: string; nextAttemptAt: string }>();
  if (results.length === 0) return { requeued: 0 };
  const at = new Date(Math.min(now.getTime(), Date.now())).toISOString(); // due now, by the consumer's clock
  const marked = await env.DB.batch(results.map((row) => env.DB.prepare(`UPDATE webhook_deliveries SET next_attempt_at = ?3 WHERE id = ?1 AND state = 'pending' AND next_attempt_at = ?2`).bind(row.id, row.nextAttemptAt, at)));
  const ids = results.filter((_, index) => marked[index]?.meta.changes === 1).map((row) => row.id);
  for (let from = 0; from < ids.length; from += 100) await enqueueDeliveries(env, ids.slice(from, from + 100));
  return { requeued: ids.length };
}
