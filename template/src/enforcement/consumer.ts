// The DELIVERIES queue consumer: one attempt per message; retries with backoff through the queue
// itself (message.retry), the attempt history and dead-lettering in D1. An action's first attempt
// is made inline by the host that committed it (webhooks.ts deliverInline); this consumer carries
// its retries, every other delivery, and whatever the outbox sweep re-queues — through the same
// attempt and the same source hooks.
import { errorCode } from "../errors";
import { forEachBounded } from "../lib/queue-work";
import { DELIVERY_SOURCES } from "./actions";
import { runDeliveryAttempt } from "./delivery-inline";

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
      const outcome = await runDeliveryAttempt(env, deliveryId, DELIVERY_SOURCES, "queue", DELIVERY_DEADLINE_MS);
      if (outcome.kind === "retry") {
        message.retry({ delaySeconds: outcome.delaySeconds });
        return;
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
