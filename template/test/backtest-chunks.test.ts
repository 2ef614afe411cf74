// The backtest chunk outbox (src/automation/backtest-chunks.ts): a backtest records its chunks,
// consumers mark them done, and the schedule sends again the chunks of a running backtest whose
// messages were lost (its queue shows no work on any chunk for a while), so it finishes instead of
// running forever; a chunk lost too often fails its backtest, on the record. The sweep is called
// with a `now` past the loss window, so chunks of other tests count as old.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { CHUNK_LOST_AFTER_MS, sendChunked, sweepLostBacktestChunks } from "../src/automation/backtest-chunks";
import { api, newInstallation, publish, until } from "./helpers";

const edge = (from: string, port: string, to: string) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
const graph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", config: { cases: [{ port: "scam", when: "report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
    { id: "done", kind: "end", config: { terminal_code: "scam" } },
    { id: "keep", kind: "end", config: { terminal_code: "other" } },
  ],
  edges: [edge("start", "success", "route"), edge("route", "scam", "done"), edge("route", "other", "keep")],
};

async function reports(apiKey: string, count: number, tag: string): Promise<string[]> {
  const created = await Promise.all(Array.from({ length: count }, (_, i) => api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `${tag}-${i}` }, category: i % 2 === 0 ? "scams_and_fraud" : "violence" } })));
  for (const r of created) expect(r.status).toBe(201);
  return created.map((r) => r.body.id as string);
}

async function finished(apiKey: string, id: string, state = "completed") {
  return until(
    async () => {
      const polled = await api(`/api/v1/backtests/${id}`, { key: apiKey });
      return polled.body.state === state ? polled.body : null;
    },
    `backtest ${id} ${state}`,
    60_000,
  );
}

const chunks = (backtestId: string) =>
  env.DB.prepare(`SELECT seq, report_ids_json AS ids, done_at AS doneAt, requeues FROM backtest_chunks WHERE backtest_id = ?1 ORDER BY seq`)
    .bind(backtestId)
    .all<{ seq: number; ids: string; doneAt: string | null; requeues: number }>()
    .then((r) => r.results);

/** Puts a finished fast backtest back where a lost message leaves it: running, nothing evaluated, its chunk queued and never started. */
async function loseMessages(backtestId: string) {
  await env.DB.batch([
    env.DB.prepare(`DELETE FROM backtest_results WHERE backtest_id = ?1`).bind(backtestId),
    env.DB.prepare(`UPDATE backtests SET state = 'running', processed = 0, finished_at = NULL WHERE id = ?1`).bind(backtestId),
    env.DB.prepare(`UPDATE backtest_chunks SET done_at = NULL, active_at = NULL WHERE backtest_id = ?1`).bind(backtestId),
  ]);
}

/** A sweep's clock past the loss window of everything this test did so far. */
const later = () => new Date(Date.now() + CHUNK_LOST_AFTER_MS + 60_000);

describe("backtest chunks", () => {
  it("a backtest records its chunks and its consumers mark every one done (fast and durable)", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, graph);
    const ids = await reports(apiKey, 30, "chunks-record");
    const fast = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    expect(fast.status).toBe(202);
    const durable = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids, engine: "durable" } });
    expect(durable.status).toBe(202);
    await finished(apiKey, fast.body.id);
    await finished(apiKey, durable.body.id);
    // A consumer marks its chunk done when it acknowledges the message, just after the chunk's last
    // result is recorded (which may be what finished the backtest): wait for the marks.
    await until(async () => (await chunks(fast.body.id)).every((c) => c.doneAt) && (await chunks(durable.body.id)).every((c) => c.doneAt), "every chunk marked done");
    // Fast: one chunk of up to 250 reports; durable: chunks of 25 (30 reports are two).
    const fastChunks = await chunks(fast.body.id);
    expect(fastChunks.map((c) => JSON.parse(c.ids).length)).toEqual([30]);
    const durableChunks = await chunks(durable.body.id);
    expect(durableChunks.map((c) => JSON.parse(c.ids).length)).toEqual([25, 5]);
    expect(durableChunks.flatMap((c) => JSON.parse(c.ids)).sort()).toEqual([...ids].sort());
    for (const c of [...fastChunks, ...durableChunks]) {
      expect(c.doneAt).toEqual(expect.any(String));
      expect(c.requeues).toBe(0);
    }
  }, 90_000);

  it("the schedule sends lost chunks again once their queue shows no work, and the backtest completes with the same results", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, graph);
    const ids = await reports(apiKey, 12, "chunks-lost");
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    const first = await finished(apiKey, started.body.id);
    const before = await api(`/api/v1/backtests/${started.body.id}/results`, { key: apiKey });
    await loseMessages(started.body.id);
    const now = later();
    // Another chunk on the same queue was worked on a moment ago: the queue is moving (a backlog,
    // a long evaluation), so nothing is sent again.
    await env.DB.prepare(
      `INSERT INTO backtest_chunks (backtest_id, seq, installation_id, engine, report_ids_json, actor_key_id, queued_at, active_at) SELECT backtest_id, 1, installation_id, engine, '[]', actor_key_id, queued_at, ?2 FROM backtest_chunks WHERE backtest_id = ?1 AND seq = 0`,
    )
      .bind(started.body.id, new Date(now.getTime() - 10_000).toISOString())
      .run();
    await sweepLostBacktestChunks(env, now);
    expect((await chunks(started.body.id))[0]).toMatchObject({ doneAt: null, requeues: 0 });
    expect((await api(`/api/v1/backtests/${started.body.id}`, { key: apiKey })).body.state).toBe("running");

    // No work on the queue for longer than the window: the pending chunks are sent again and evaluated.
    await env.DB.prepare(`UPDATE backtest_chunks SET active_at = queued_at, done_at = queued_at WHERE backtest_id = ?1 AND seq = 1`).bind(started.body.id).run();
    const swept = await sweepLostBacktestChunks(env, now);
    expect(swept.requeued).toBeGreaterThanOrEqual(1);
    const again = await finished(apiKey, started.body.id);
    expect(again.progress).toEqual(first.progress);
    const after = await api(`/api/v1/backtests/${started.body.id}/results`, { key: apiKey });
    const strip = (items: Array<Record<string, unknown>>) => items.map(({ evaluatedAt: _at, ...rest }) => rest);
    expect(strip(after.body.items)).toEqual(strip(before.body.items));
    const [chunk] = await chunks(started.body.id);
    expect(chunk).toMatchObject({ requeues: 1, doneAt: expect.any(String) });
  }, 90_000);

  it("requeues are sent in batches within Queues' limits, and each accepted batch is recorded", async () => {
    const batches: Array<Array<{ body: { ids: string[] } }>> = [];
    const recorded: number[] = [];
    const queue = { sendBatch: async (batch: Array<{ body: { ids: string[] } }>) => void batches.push(batch) } as unknown as Queue<{ ids: string[] }>;
    // 120 fast chunks of 250 ids (~10 KB each): one batch would be ~1.2 MB and 120 messages.
    const messages = Array.from({ length: 120 }, (_, i) => ({ body: { ids: Array.from({ length: 250 }, (_, j) => `rep_${String(i).padStart(4, "0")}${String(j).padStart(28, "0")}`) } }));
    await sendChunked(queue, messages, async (slice) => void recorded.push(slice.length));
    expect(batches.flat()).toHaveLength(120);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(100);
      expect(JSON.stringify(batch.map((m) => m.body)).length).toBeLessThan(256_000);
    }
    expect(batches.length).toBeGreaterThan(2);
    expect(recorded).toEqual(batches.map((b) => b.length));
    // A refused batch stops there: what was accepted before it is recorded, nothing after it is sent.
    let calls = 0;
    const failing = {
      sendBatch: async () => {
        calls += 1;
        if (calls === 2) throw new Error("queue refused");
      },
    } as unknown as Queue<{ ids: string[] }>;
    const partial: number[] = [];
    await expect(sendChunked(failing, messages, async (slice) => void partial.push(slice.length))).rejects.toThrow("queue refused");
    expect(partial).toEqual([batches[0]!.length]);
  });

  it("a chunk lost too many times fails its backtest with backtest.chunk_lost, on the audit record", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, graph);
    const ids = await reports(apiKey, 3, "chunks-exhausted");
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    await finished(apiKey, started.body.id);
    await loseMessages(started.body.id);
    const now = later();
    await env.DB.prepare(`UPDATE backtest_chunks SET requeues = 10 WHERE backtest_id = ?1`).bind(started.body.id).run();
    await sweepLostBacktestChunks(env, now);
    const failed = await finished(apiKey, started.body.id, "failed");
    expect(failed.errorCode).toBe("backtest.chunk_lost");
    const audit = await env.DB.prepare(`SELECT action, details_json AS details FROM audit_events WHERE target_id = ?1 AND action = 'backtest.failed'`).bind(started.body.id).all<{ action: string; details: string }>();
    expect(audit.results).toHaveLength(1);
    expect(JSON.parse(audit.results[0]!.details)).toMatchObject({ errorCode: "backtest.chunk_lost", requeues: 10 });
    // A failed backtest is left alone by later runs.
    await sweepLostBacktestChunks(env, now);
    expect((await chunks(started.body.id))[0]!.requeues).toBe(10);
  }, 90_000);
});
