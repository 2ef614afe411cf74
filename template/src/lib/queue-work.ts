// Bounded work for queue consumers: a few items at a time, every await under a deadline, and a
// yield to the runtime between items so an invocation never holds the event loop for long.
//
// Why the yield matters (without it a backtest stalled for good under `npm start`). workerd runs every Worker, Durable Object
// and binding of `wrangler dev` on one KJ event loop, and KJ only polls the operating system
// (sockets, timers) when its queue of in-process events is empty. A consumer that chains in-process
// I/O (D1, service and loopback RPC, Worker Loader, the local Workflows engine) keeps that queue
// full for its whole invocation: HTTP requests are not even read until it ends, and a keep-alive
// connection the peer closes meanwhile is not noticed. wrangler's bundled Miniflare logs every
// delivered batch over such a pooled connection to its Node loopback (idle timeout 5 s) before it
// schedules the next batch; when that write meets the unnoticed close it fails, the broker's flush
// rejects, and the queue never delivers again. A timer fires only once the loop has drained and
// polled, so `yieldToRuntime()` between items bounds how long any stretch runs without polling.
import { AppError } from "../errors";

/** Resolves once the runtime has run its pending work and polled its sockets and timers. */
export function yieldToRuntime(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * `work` under a deadline: past `ms` it rejects with `timeoutError()` (by default a retryable
 * `queue.work_timeout`). The work itself is not cancelled, so callers bound only idempotent work.
 * Locally a queue invocation has no wall-clock limit (workerd's scheduled-event limit is
 * "never"), so one promise that never settled would hold its batch, and the queue, forever.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, timeoutError: () => Error = () => workTimeout(ms)): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError()), ms);
  });
  // After a timeout the work's own outcome has no reader left: keep a late rejection from
  // surfacing as an unhandled one (the timeout already answered for it).
  work.catch(() => undefined);
  try {
    return await Promise.race([work, deadline]);
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
}

function workTimeout(ms: number): AppError {
  return new AppError("queue.work_timeout", `A queued task did not finish within ${ms} ms; its message is retried.`, { status: 503, retryable: true });
}

/**
 * Runs `fn` over `items`, at most `limit` at a time, yielding to the runtime after each item.
 * `fn` handles its own errors (a consumer acks or retries each message itself); a throw stops the
 * worker that ran it and is rethrown once the others have finished.
 */
export async function forEachBounded<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const failures: unknown[] = [];
  const worker = async () => {
    while (next < items.length && failures.length === 0) {
      const index = next++;
      try {
        await fn(items[index]!, index);
      } catch (error) {
        failures.push(error);
      }
      await yieldToRuntime();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failures.length > 0) throw failures[0];
}
