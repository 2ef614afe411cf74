// Inline first attempts: an action's delivery is attempted right away by the host
// that committed it (`deliverInline`, in waitUntil, off the response path), through the very
// attemptDelivery the DELIVERIES consumer calls; the queue carries only its retries. A lost inline
// attempt (an isolate that died, a retry that could not be queued) is a pending row like any
// other: the outbox sweep puts it back on the queue, and the claim keeps it to one request per attempt.
//
// The fast way (`reserveInline` + `deliverLeased`): the host reserves an inline attempt before it
// writes the delivery, writes the row already claimed for it (next_attempt_at = the claim's lease,
// as attemptDelivery's compare-and-set would set it), and after the commit sends at once with what
// it has in memory — the endpoint it read, the payload it sealed — so the attempt needs no claim
// round trip and opens nothing. The send-time gate's answer is the batch itself: it wrote the
// proposal open, with its run and step live. Anyone else (a queue message, a resend, the sweep)
// finds the row not yet due until the lease ends, as for any attempt in flight; if the host dies
// before sending, the sweep takes the row back once the lease is over.
import { waitUntil } from "cloudflare:workers";
import { errorCode } from "../errors";
import { withDeadline } from "../lib/queue-work";
import { attemptDelivery, claimLeaseUntil, enqueueDeliveries, sendClaimedAttempt, type AttemptEndpoint, type AttemptVia, type DeliveryFinisher, type DeliveryGate, type DeliveryOutcome, type NewDelivery } from "./webhooks";

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

/** A finished delivery's source is settled (its run woken) once the attempt's batch committed. */
async function settle(env: Env, outcome: DeliveryOutcome, source: DeliverySource, deadlineMs: number): Promise<DeliveryOutcome> {
  if ((outcome.kind === "delivered" || outcome.kind === "dead") && source.settled) await withDeadline(source.settled(env, outcome), deadlineMs);
  return outcome;
}

/**
 * An attempt and what follows it, for both paths: the consumer acks or retries by its outcome;
 * a finished delivery's source is settled (its run woken) once the attempt's batch committed.
 */
export async function runDeliveryAttempt(env: Env, deliveryId: string, source: DeliverySource, via: AttemptVia, deadlineMs = INLINE_DEADLINE_MS): Promise<DeliveryOutcome> {
  return settle(env, await withDeadline(attemptDelivery(env, deliveryId, source.finisher, source.gate, via), deadlineMs), source, deadlineMs);
}

/**
 * Inline attempts in flight in this isolate (reserved, until released or past their lease), and
 * their bound: past it a delivery goes to the queue (whose consumer works a few at a time), so a
 * burst of actions never turns into a burst of background requests competing with request
 * handling. A reservation whose work never ran (an isolate about to go) lapses with its lease.
 */
const inFlight = new Set<{ until: number }>();
const INLINE_LIMIT = 8;

/** One of the isolate's inline attempts, reserved before its delivery row is written, so the row can be written leased to it (deliveryStatement's `leaseUntil`). */
export interface InlineSlot {
  leaseUntil: string;
  release(): void;
}

/** Reserves an inline attempt, or null when this isolate has INLINE_LIMIT in flight (the delivery then goes the queue's way). */
export function reserveInline(env: Env): InlineSlot | null {
  const now = Date.now();
  for (const held of inFlight) if (held.until <= now) inFlight.delete(held);
  if (inFlight.size >= INLINE_LIMIT) return null;
  const leaseUntil = claimLeaseUntil(env, now);
  const held = { until: Date.parse(leaseUntil) };
  inFlight.add(held);
  return { leaseUntil, release: () => void inFlight.delete(held) };
}

/**
 * Offered the outcome of an inline attempt as soon as its batch committed, before its source is
 * settled: true when the caller took it (it was still waiting for it, and it carries the outcome
 * on itself), so nobody is woken for it; false, and the source is settled as usual.
 */
export type OutcomeTaker = (outcome: DeliveryOutcome) => boolean;

/** The inline path: the first attempt now; a retry goes on the queue with its backoff; a failure to the queue, or else to the sweep. */
async function inlineAttempt(env: Env, deliveryId: string, source: DeliverySource, attempt: () => Promise<DeliveryOutcome>, slot: InlineSlot, take?: OutcomeTaker): Promise<void> {
  try {
    const attempted = await withDeadline(attempt(), INLINE_DEADLINE_MS);
    const outcome = take?.(attempted) ? attempted : await settle(env, attempted, source, INLINE_DEADLINE_MS);
    if (outcome.kind === "retry") await enqueueDeliveries(env, [deliveryId], outcome.delaySeconds);
  } catch (error) {
    console.error("delivery_inline_failed", errorCode(error));
    // Still pending: the queue (or, if that fails too, the outbox sweep) takes it from here.
    await enqueueDeliveries(env, [deliveryId], INLINE_FAILURE_RETRY_SECONDS).catch(() => undefined);
  } finally {
    slot.release();
  }
}

/** Starts work off the response path: the current invocation's waitUntil (of a request, or of the runtime capability's call in a run's step). */
export type Defer = (start: () => Promise<unknown>) => void;
const inWaitUntil: Defer = (start) => waitUntil(start());

/**
 * Makes the first attempt of freshly committed deliveries right away, from this host, off the
 * response path, each claiming its attempt (attemptDelivery). Call it after their rows are
 * committed, instead of enqueueDeliveries. A `defer` that never starts the work (an isolate gone)
 * leaves pending rows the outbox sweep recovers.
 */
export function deliverInline(env: Env, deliveryIds: readonly string[], source: DeliverySource, defer: Defer = inWaitUntil): void {
  if (deliveryIds.length === 0) return;
  defer(() =>
    Promise.all(
      deliveryIds.map((id) => {
        const slot = reserveInline(env);
        if (!slot) return enqueueDeliveries(env, [id]).catch(() => undefined); // else the sweep
        return inlineAttempt(env, id, source, () => attemptDelivery(env, id, source.finisher, source.gate, "inline"), slot);
      }),
    ),
  );
}

/** A delivery its writer committed leased to `slot` (deliveryStatement with the slot's leaseUntil), with what the writer knows of it. */
export interface LeasedDelivery {
  delivery: NewDelivery;
  installationId: string;
  endpoint: AttemptEndpoint;
  eventType: string;
  sourceType: string;
  sourceId: string;
  at: string;
}

/**
 * The first attempt of a delivery written leased to this host (see the top of this file): sent at
 * once, off the response path, without a claim round trip; recorded like every attempt. Call it
 * after the row is committed; the slot is released when the attempt is over. A `defer` that never
 * starts the work leaves a pending row the outbox sweep recovers once its lease is over.
 */
export function deliverLeased(env: Env, leased: LeasedDelivery, slot: InlineSlot, source: DeliverySource, defer: Defer = inWaitUntil, take?: OutcomeTaker): void {
  const { delivery } = leased;
  const row = {
    id: delivery.id,
    installationId: leased.installationId,
    endpointId: leased.endpoint.id,
    eventType: leased.eventType,
    sourceType: leased.sourceType,
    sourceId: leased.sourceId,
    payloadSealed: delivery.payloadSealed,
    state: "pending",
    attempts: 0,
    nextAttemptAt: slot.leaseUntil,
    createdAt: leased.at,
  };
  defer(() => inlineAttempt(env, delivery.id, source, () => sendClaimedAttempt(env, { delivery: row, endpoint: leased.endpoint, refused: null, body: delivery.body }, source.finisher, "inline"), slot, take));
}
