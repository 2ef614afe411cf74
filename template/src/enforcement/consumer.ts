// The DELIVERIES queue consumer: one attempt per message; retries with backoff through the queue
// itself (message.retry), the attempt history and dead-lettering in D1.
import { errorCode } from "../errors";
import { actionDeliveryRefusal, finishActionDelivery, signalActionDelivery } from "./actions";
import { attemptDelivery, type DeliveryFinisher, type DeliveryGate } from "./webhooks";

const finisher: DeliveryFinisher = async (env, delivery) => (delivery.sourceType === "action" ? finishActionDelivery(env, delivery) : []);
/** Checked at send time: an action whose proposal was cancelled, or whose run ended, is never sent. */
const gate: DeliveryGate = (env, delivery) => actionDeliveryRefusal(env, delivery);

export async function consumeDeliveries(batch: MessageBatch<{ deliveryId?: unknown }>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    const deliveryId = typeof message.body?.deliveryId === "string" ? message.body.deliveryId : null;
    if (!deliveryId) {
      message.ack();
      continue;
    }
    try {
      const outcome = await attemptDelivery(env, deliveryId, finisher, gate);
      if (outcome.kind === "retry") {
        message.retry({ delaySeconds: outcome.delaySeconds });
        continue;
      }
      if (outcome.kind === "delivered" || outcome.kind === "dead") {
        const source = await env.DB.prepare(`SELECT source_type AS sourceType, source_id AS sourceId FROM webhook_deliveries WHERE id = ?1`).bind(deliveryId).first<{ sourceType: string; sourceId: string }>();
        if (source?.sourceType === "action") await signalActionDelivery(env, source.sourceId);
      }
      message.ack();
    } catch (error) {
      // The attempt could not even be recorded (e.g. D1 unavailable): let the queue redeliver it.
      console.error("delivery_attempt_failed", errorCode(error));
      message.retry({ delaySeconds: 5 });
    }
  }
}
