// The backtest chunk outbox (src/automation/backtest-chunks.ts): a backtest records its chunks,
// consumers mark them done, and the schedule sends again the chunks of a running backtest whose
// messages were lost, so it finishes instead of running forever; a chunk lost too often fails
// its backtest, on the record.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { CHUNK_LOST_AFTER_MS, sweepLostBacktestChunks } from "../src/automation/backtest-chunks";
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

/** Puts a finished fast backtest back where a lost message leaves it: running, nothing evaluated, its chunk pending since `queuedAt`. */
async function loseMessages(backtestId: string, queuedAt: string) {
  await env.DB.batch([
    env.DB.prepare(`DELETE FROM backtest_results WHERE backtest_id = ?1`).bind(backtestId),
    env.DB.prepare(`UPDATE backtests SET state = 'running', processed = 0, finished_at = NULL WHERE id = ?1`).bind(backtestId),
    env.DB.prepare(`UPDATE backtest_chunks SET done_at = NULL, queued_at = ?2 WHERE backtest_id = ?1`).bind(backtestId, queuedAt),
  ]);
}

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

  it("the schedule sends a lost chunk again once its backtest has stalled, and the backtest completes with the same results", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, graph);
    const ids = await reports(apiKey, 12, "chunks-lost");
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    const first = await finished(apiKey, started.body.id);
    const before = await api(`/api/v1/backtests/${started.body.id}/results`, { key: apiKey });
    const now = new Date();
    const longAgo = new Date(now.getTime() - CHUNK_LOST_AFTER_MS - 60_000).toISOString();
    await loseMessages(started.body.id, longAgo);
    // A second chunk of the same backtest finished a moment ago: the backtest is moving, nothing is sent again.
    await env.DB.prepare(
      `INSERT INTO backtest_chunks (backtest_id, seq, installation_id, report_ids_json, actor_key_id, queued_at, done_at) SELECT backtest_id, 1, installation_id, '[]', actor_key_id, ?2, ?3 FROM backtest_chunks WHERE backtest_id = ?1 AND seq = 0`,
    )
      .bind(started.body.id, longAgo, new Date(now.getTime() - 10_000).toISOString())
      .run();
    await sweepLostBacktestChunks(env, now);
    expect((await chunks(started.body.id))[0]).toMatchObject({ doneAt: null, requeues: 0 });
    expect((await api(`/api/v1/backtests/${started.body.id}`, { key: apiKey })).body.state).toBe("running");

    // No chunk has finished for longer than the limit: the pending one is sent again and evaluated.
    await env.DB.prepare(`UPDATE backtest_chunks SET done_at = ?2 WHERE backtest_id = ?1 AND seq = 1`).bind(started.body.id, longAgo).run();
    await sweepLostBacktestChunks(env, now);
    const again = await finished(apiKey, started.body.id);
    expect(again.progress).toEqual(first.progress);
    const after = await api(`/api/v1/backtests/${started.body.id}/results`, { key: apiKey });
    const strip = (items: Array<Record<string, unknown>>) => items.map(({ evaluatedAt: _at, ...rest }) => rest);
    expect(strip(after.body.items)).toEqual(strip(before.body.items));
    const [chunk] = await chunks(started.body.id);
    expect(chunk).toMatchObject({ requeues: 1, doneAt: expect.any(String) });
  }, 90_000);

  it("a chunk lost too many times fails its backtest with backtest.chunk_lost, on the audit record", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, graph);
    const ids = await reports(apiKey, 3, "chunks-exhausted");
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    await finished(apiKey, started.body.id);
    const now = new Date();
    await loseMessages(started.body.id, new Date(now.getTime() - CHUNK_LOST_AFTER_MS - 60_000).toISOString());
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
