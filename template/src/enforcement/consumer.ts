// The DELIVERIES queue consumer: one attempt per message; retries with backoff through the queue
// itself (message.retry), the attempt history and dead-lettering in D1.
import { errorCode } from "../errors";
import { forEachBounded, withDeadline } from "../lib/queue-work";
import { actionDeliveryRefusal, finishActionDelivery, signalActionDelivery } from "./actions";
import { attemptDelivery, type DeliveryFinisher, type DeliveryGate } from "./webhooks";

const finisher: DeliveryFinisher = async (env, delivery) => (delivery.sourceType === "action" ? finishActionDelivery(env, delivery) : []);
/** Checked at send time: an action whose proposal was cancelled, or whose run ended, is never sent. */
const gate: DeliveryGate = (env, delivery) => actionDeliveryRefusal(env, delivery);

/** Deliveries attempted at once (each is one webhook request, with its own timeout). */
const DELIVERY_PARALLEL = 4;
/**
 * One message's bound: the longest webhook timeout (60 s) plus the attempt's claim margin. A
 * message retried past it finds the attempt still claimed and waits for it (nothing is sent twice).
 */
const DELIVERY_DEADLINE_MS = 150_000;

/** A few deliveries at a time; each message is acked or retried on its own (src/lib/queue-work.ts). */
export async function consumeDeliveries(batch: MessageBatch<{ deliveryId?: unknown }>, env: Env): Promise<void> {
  await forEachBounded(batch.messages, DELIVERY_PARALLEL, async (message) => {
    const deliveryId = typeof message.body?.deliveryId === "string" ? message.body.deliveryId : null;
    if (!deliveryId) {
      message.ack();
      return;
    }
    try {
      const outcome = await withDeadline(attemptDelivery(env, deliveryId, finisher, gate), DELIVERY_DEADLINE_MS);
      if (outcome.kind === "retry") {
        message.retry({ delaySeconds: outcome.delaySeconds });
        return;
      }
      if (outcome.kind === "delivered" || outcome.kind === "dead") {
        const source = await env.DB.prepare(`SELECT source_type AS sourceType, source_id AS sourceId FROM webhook_deliveries WHERE id = ?1`).bind(deliveryId).first<{ sourceType: string; sourceId: string }>();
        if (source?.sourceType === "action") await withDeadline(signalActionDelivery(env, source.sourceId), DELIVERY_DEADLINE_MS);
      }
      message.ack();
    } catch (error) {
      // The attempt could not even be recorded (e.g. D1 unavailable), or ran past its bound: let
      // the queue redeliver it.
      console.error("delivery_attempt_failed", errorCode(error));
      message.retry({ delaySeconds: 5 });
    }
  });
}
