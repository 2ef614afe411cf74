// The operator's view of webhook deliveries: the list (newest first, by state and endpoint), a
// delivery with every attempt, and a resend. A settled delivery's payload and attempts may be in
// its R2 object an hour after it settled; delivery-archive.ts reads either tier. The deliveries
// themselves — the outbox, attempts, backoff and dead-lettering — are webhooks.ts.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { hotOrArchived, openPersonalData } from "../cases";
import { conflict, notFound } from "../errors";
import { deliveryAttempts, deliveryPayloadSealed } from "./delivery-archive";
import { ERASING_DIGEST, finishDeliveryErasure } from "./erasure";
import { DELIVERY_COLUMNS, deliveryStatement, enqueueDeliveries, type DeliveryRow } from "./webhooks";

/** What the list and the detail show of a delivery (never its payload). */
const SHOWN_COLUMNS = `id, endpoint_id AS endpointId, event_type AS eventType, source_type AS sourceType, source_id AS sourceId, payload_digest AS payloadDigest,
  state, attempts, last_status AS lastStatus, last_error AS lastError, created_at AS createdAt, delivered_at AS deliveredAt`;

export async function listDeliveries(env: Env, actor: Actor, options: { state?: string; endpointId?: string; limit: number; before?: string }) {
  const { results } = await env.DB.prepare(`
    SELECT ${SHOWN_COLUMNS}
    FROM webhook_deliveries WHERE installation_id = ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR endpoint_id = ?3) AND (?4 IS NULL OR id < ?4)
    ORDER BY id DESC LIMIT ?5
  `)
    .bind(actor.installationId, options.state ?? null, options.endpointId ?? null, options.before ?? null, options.limit + 1)
    .all<{ id: string }>();
  const page = results.slice(0, options.limit);
  return { items: page, nextCursor: results.length > options.limit ? page.at(-1)!.id : null };
}

export async function getDelivery(env: Env, actor: Actor, id: string) {
  const row = await hotOrArchived(env, actor.installationId, "delivery", id, () =>
    env.DB.prepare(`
    SELECT ${SHOWN_COLUMNS}, payload_sealed = '' AS moved
    FROM webhook_deliveries WHERE installation_id = ?1 AND id = ?2`)
      .bind(actor.installationId, id)
      .first<Record<string, unknown> & { moved: number }>(),
  );
  if (!row) throw notFound("webhook_delivery");
  // The attempts of a settled delivery past its hour are in its archive object (delivery-archive.ts).
  const { moved, ...delivery } = row;
  const history = await deliveryAttempts(env, { id, installationId: actor.installationId, moved: moved === 1 });
  return { ...delivery, history };
}

/**
 * Re-sends a finished delivery as a new delivery with the same payload (the original stays as
 * recorded). Its outcome is not fed back to workflows: a re-send is an operator's manual repair.
 * A pending delivery is not copied: it is put back on the queue as itself (same id, so the same
 * `webhook-id`; its backoff still applies and an attempt in flight is not repeated), and the
 * answer is that delivery with `requeued: true`.
 */
export async function resendDelivery(env: Env, actor: Actor, id: string) {
  const row = await hotOrArchived(env, actor.installationId, "delivery", id, () =>
    env.DB.prepare(`SELECT ${DELIVERY_COLUMNS}, payload_digest AS payloadDigest FROM webhook_deliveries WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<DeliveryRow & { payloadDigest?: string }>(),
  );
  if (!row) throw notFound("webhook_delivery");
  if (row.sourceType === "action") {
    // An action whose proposal was cancelled (its node left, or its run ended) is never sent, not even by hand.
    const proposal = await env.DB.prepare(`SELECT state FROM action_proposals WHERE id = ?1`).bind(row.sourceId).first<{ state: string }>();
    if (proposal?.state === "cancelled") throw conflict("webhook_delivery.source_cancelled", "The action proposal of this delivery was cancelled; it is not sent again.");
  }
  if (row.state === "pending") {
    await enqueueDeliveries(env, [row.id]);
    return { ...(await getDelivery(env, actor, row.id)), requeued: true };
  }
  // A moved delivery whose erasure has not reached its object yet is erased now, before any read of it.
  if (row.payloadDigest === ERASING_DIGEST) await finishDeliveryErasure(env, actor.installationId, row.id);
  const payload = await openPersonalData<{ type: string; data: unknown }>(env, actor.installationId, `webhook_delivery:${row.id}`, await deliveryPayloadSealed(env, row));
  const at = new Date().toISOString();
  const copy = await deliveryStatement(env, {
    installationId: actor.installationId,
    endpointId: row.endpointId,
    eventType: row.eventType,
    sourceType: "resend",
    sourceId: `${row.id}:${at}`,
    data: payload.data,
    at,
  });
  await env.DB.batch([
    copy.statement,
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `webhook_delivery:${copy.id}:resent`,
      action: "webhook_delivery.resent",
      actor: actor.audit,
      target: { type: "webhook_delivery", id: copy.id },
      details: { originalId: row.id, eventType: row.eventType },
      at,
    }),
  ]);
  await enqueueDeliveries(env, [copy.id]);
  return { ...(await getDelivery(env, actor, copy.id)), requeued: false };
}
