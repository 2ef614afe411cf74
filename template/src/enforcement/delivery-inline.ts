// Inline first attempts (issue 17 §2): an action's delivery is attempted right away by the host
// that committed it (`deliverInline`, in waitUntil, off the response path), through the very
// attemptDelivery the DELIVERIES consumer calls; the queue carries only its retries. A lost inline
// attempt (an isolate that died, a retry that could not be queued) is a pending row like any
// other: the outbox sweep puts it back on the queue, and the claim keeps it to one request per attempt.
import { waitUntil } from "cloudflare:workers";
import { errorCode } from "../errors";
import { withDeadline } from "../lib/queue-work";
import { attemptDelivery, enqueueDeliveries, type AttemptVia, type DeliveryFinisher, type DeliveryGate, type DeliveryOutcome } from "./webhooks";

/** What a delivery's source adds to its attempts: the send-time gate, its statements when it ends, and what follows once they are committed (e.g. waking a run). */
export interface DeliverySource {
  finisher: DeliveryFinisher;
  gate?: DeliveryGate;
  settled?: (env: Env, delivery: { sourceType: string; sourceId: string }) => Promise<void>;
}

/** One inline attempt's bound: the longest request timeout (60 s) plus the claim margin, as the consumer's. */
const INLINE_DEADLINE_MS = 150_000;
/** An inline attempt that could not even be recorded is handed to the queue after this. */
const INLINE_FAILURE_RETRY_SECONDS = 5;

/**
 * An attempt and what follows it, for both paths: the consumer acks or retries by its outcome;
 * a finished delivery's source is settled (its run woken) once the attempt's batch committed.
 */
export async function runDeliveryAttempt(env: Env, deliveryId: string, source: DeliverySource, via: AttemptVia, deadlineMs = INLINE_DEADLINE_MS): Promise<DeliveryOutcome> {
  const outcome = await withDeadline(attemptDelivery(env, deliveryId, source.finisher, source.gate, via), deadlineMs);
  if ((outcome.kind === "delivered" || outcome.kind === "dead") && source.settled) await withDeadline(source.settled(env, outcome), deadlineMs);
  return outcome;
}

/**
 * Inline attempts in flight in this isolate, and their bound: past it a delivery goes to the
 * queue (whose consumer works a few at a time), so a burst of actions never turns into a burst
 * of background requests competing with request handling.
 */
let inlineInFlight = 0;
const INLINE_LIMIT = 8;

/** The inline path: the first attempt now; a retry goes on the queue with its backoff; a failure to the queue, or else to the sweep. */
async function inlineAttempt(env: Env, deliveryId: string, source: DeliverySource): Promise<void> {
  if (inlineInFlight >= INLINE_LIMIT) {
    await enqueueDeliveries(env, [deliveryId]).catch(() => undefined); // else the sweep
    return;
  }
  inlineInFlight++;
  try {
    const outcome = await runDeliveryAttempt(env, deliveryId, source, "inline");
    if (outcome.kind === "retry") await enqueueDeliveries(env, [deliveryId], outcome.delaySeconds);
  } catch (error) {
    console.error("delivery_inline_failed", errorCode(error));
    // Still pending: the queue (or, if that fails too, the outbox sweep) takes it from here.
    await enqueueDeliveries(env, [deliveryId], INLINE_FAILURE_RETRY_SECONDS).catch(() => undefined);
  } finally {
    inlineInFlight--;
  }
}

/** Starts work off the response path: the current invocation's waitUntil (of a request, or of the runtime capability's call in a run's step). */
export type Defer = (start: () => Promise<unknown>) => void;
const inWaitUntil: Defer = (start) => waitUntil(start());

/**
 * Makes the first attempt of freshly committed deliveries right away, from this host, off the
 * response path. Call it after their rows are committed, instead of enqueueDeliveries. A `defer`
 * that never starts the work (an isolate gone) leaves pending rows the outbox sweep recovers.
 */
export function deliverInline(env: Env, deliveryIds: readonly string[], source: DeliverySource, defer: Defer = inWaitUntil): void {
  if (deliveryIds.length === 0) return;
  defer(() => Promise.all(deliveryIds.map((id) => inlineAttempt(env, id, source))));
}
