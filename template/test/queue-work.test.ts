// Bounded queue work (src/lib/queue-work.ts) and the consumers built on it: at most `limit` items in
// flight, every item visited once, a deadline that ends a promise that never settles, and each
// message acked or retried on its own.
import { createExecutionContext, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { consumeBacktests } from "../src/automation/backtest-consumer";
import { consumeDeliveries } from "../src/enforcement";
import { errorCode } from "../src/errors";
import { forEachBounded, withDeadline } from "../src/lib/queue-work";
import { consumeRunOperations } from "../src/workflows/run-operations";

function fakeBatch<T>(queue: string, bodies: T[]) {
  const settled: Array<"ack" | "retry" | null> = bodies.map(() => null);
  const messages = bodies.map((body, i) => ({
    id: `m${i}`,
    timestamp: new Date(),
    attempts: 1,
    body,
    ack: () => {
      settled[i] = "ack";
    },
    retry: () => {
      settled[i] = "retry";
    },
  }));
  const batch = {
    queue,
    messages,
    ackAll: () => {
      for (const m of messages) m.ack();
    },
    retryAll: () => {
      for (const m of messages) m.retry();
    },
  };
  return { batch: batch as unknown as MessageBatch<T>, settled };
}

describe("forEachBounded and withDeadline", () => {
  it("runs every item once with at most `limit` in flight", async () => {
    const items = Array.from({ length: 23 }, (_, i) => i);
    const seen: number[] = [];
    let inFlight = 0;
    let most = 0;
    await forEachBounded(items, 4, async (item) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, item % 3));
      seen.push(item);
      inFlight -= 1;
    });
    expect(seen.sort((a, b) => a - b)).toEqual(items);
    expect(most).toBe(4);
  });

  it("rethrows an item's failure once the items in flight have finished, and starts no more", async () => {
    const started: number[] = [];
    const finished: number[] = [];
    const run = forEachBounded([0, 1, 2, 3, 4, 5, 6, 7], 2, async (item) => {
      started.push(item);
      if (item === 1) throw new Error("item 1 failed");
      await new Promise((resolve) => setTimeout(resolve, 1));
      finished.push(item);
    });
    await expect(run).rejects.toThrow("item 1 failed");
    expect(finished).toEqual(started.filter((item) => item !== 1));
    expect(started.length).toBeLessThan(8);
  });

  it("ends a promise that never settles with a retryable queue.work_timeout, and passes a result through", async () => {
    const never = new Promise<never>(() => undefined);
    const timedOut = await withDeadline(never, 5).catch((error: unknown) => error);
    expect(errorCode(timedOut)).toBe("queue.work_timeout");
    expect((timedOut as { retryable?: boolean }).retryable).toBe(true);
    await expect(withDeadline(Promise.resolve(42), 60_000)).resolves.toBe(42);
  });
});

describe("queue consumers ack each message on its own", () => {
  it("deliveries: a message without an id and one for an unknown delivery are both acked", async () => {
    const { batch, settled } = fakeBatch("safest-tools-deliveries", [{}, { deliveryId: "whd_unknown" }, { deliveryId: 7 }]);
    await consumeDeliveries(batch as MessageBatch<{ deliveryId?: unknown }>, env);
    expect(settled).toEqual(["ack", "ack", "ack"]);
  });

  it("backtests: a chunk of a backtest that does not exist is acked without starting runs", async () => {
    const { batch, settled } = fakeBatch("safest-tools-backtests", [
      { backtestId: "bt_missing", installationId: "inst_missing", actorKeyId: "key", reportIds: ["rpt_a", "rpt_b"] },
      { backtestId: "bt_missing_2", installationId: "inst_missing", actorKeyId: "key", reportIds: [] },
    ]);
    await consumeBacktests(batch, env, createExecutionContext());
    expect(settled).toEqual(["ack", "ack"]);
    const runs = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs WHERE backtest_id IN ('bt_missing', 'bt_missing_2')").first<{ n: number }>();
    expect(runs?.n).toBe(0);
  });

  it("run operations: a message without an operation and one for an unknown operation are acked", async () => {
    const { batch, settled } = fakeBatch("safest-tools-run-operations", [{}, { operationId: "rop_unknown" }]);
    await consumeRunOperations(batch as MessageBatch<{ operationId?: unknown }>, env, createExecutionContext());
    expect(settled).toEqual(["ack", "ack"]);
  });
});
