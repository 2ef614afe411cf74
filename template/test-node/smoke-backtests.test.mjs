// Durable backtests through the real `wrangler dev` (scripts/start.mjs): under
// `npm start` a 400-report backtest used to stop for good at 200 of 400 runs (Miniflare's queue
// broker stopped delivering after a consumer invocation had starved workerd's event loop; see
// src/lib/queue-work.ts), and status requests waited until a whole invocation was over. Three
// backtests in a row must each finish all 400 runs, and a status request sent while one runs
// must be answered. The deadlines below only bound a stalled test; they are not performance targets.
//
// If workerd dies under the load (a V8 fault, docs/ARCHITECTURE.md "Local dev server"), npm start
// restarts the dev server on the same state: status requests that find no server are sent again
// for a while, and the backtest must still finish every run (lost chunk messages are queued again
// by the schedule after two minutes without progress: automation.backtest_chunks).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { api as apiFor, sleep, startServer } from "./harness.mjs";

const REPORTS = 400;
const BACKTESTS = 3;
/**
 * A stalled backtest stops moving; the test fails once none of its runs has finished for this
 * long (past the two minutes after which lost chunks are sent again, and the next minute's run).
 */
const STALLED_AFTER_MS = 240_000;
/** How long a status request that finds no server is sent again (a dev server restarting). */
const RESTART_GRACE_MS = 120_000;

const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
/** start → condition on report.category → end: the graph of the backtest that stalled. */
const graph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", config: { cases: [{ port: "scam", when: "report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "route"), edge("route", "scam", "done"), edge("route", "other", "done")],
};

let server;
let api;
const output = () => server?.output() ?? "";

before(async () => {
  server = await startServer({ label: "backtests" });
  // No client-side limit below the stall bound: a slow answer is still an answer.
  api = apiFor(server.baseUrl, server.apiKey, { timeoutMs: STALLED_AFTER_MS, restartGraceMs: RESTART_GRACE_MS });
});

after(async () => {
  await server?.stop();
});

test(`wrangler dev: ${BACKTESTS} durable backtests of ${REPORTS} reports in a row all complete`, { timeout: 45 * 60_000 }, async (t) => {
  t.after(async () => {
    if (t.passed === false) console.error(`server output:\n${output()}\nserver state:\n${await server?.diagnose()}`);
  });
  const workflow = await api("/api/v1/workflows", { body: { name: "backtest-smoke" } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph } });
  assert.equal(version.status, 201, JSON.stringify(version.body));

  const reportIds = [];
  for (let i = 0; i < REPORTS; i += 20) {
    const created = await Promise.all(
      Array.from({ length: Math.min(20, REPORTS - i) }, (_, j) => api("/api/v1/reports", { body: { subject: { kind: "content", id: `bt-smoke-${i + j}` }, category: (i + j) % 4 === 0 ? "violence" : "scams_and_fraud" } })),
    );
    for (const report of created) {
      assert.equal(report.status, 201, JSON.stringify(report.body));
      reportIds.push(report.body.id);
    }
  }

  for (let round = 1; round <= BACKTESTS; round++) {
    const started = await api(`/api/v1/workflow-versions/${version.body.id}/backtests`, { body: { reportIds, engine: "durable" } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    assert.equal(started.body.progress.total, REPORTS);

    // A status request while the backtest's runs are being started is answered.
    const during = await api(`/api/v1/backtests/${started.body.id}`);
    assert.equal(during.status, 200, JSON.stringify(during.body));
    assert.equal(during.body.progress.total, REPORTS);

    let backtest = during.body;
    let lastFinished = -1;
    let movedAt = Date.now();
    while (backtest.state !== "completed") {
      if (backtest.progress.finished !== lastFinished) {
        lastFinished = backtest.progress.finished;
        movedAt = Date.now();
      }
      assert.ok(Date.now() - movedAt < STALLED_AFTER_MS, `backtest ${round} stalled at ${lastFinished} of ${REPORTS}: ${JSON.stringify(backtest.progress)}`);
      await sleep(500);
      const polled = await api(`/api/v1/backtests/${started.body.id}`);
      assert.equal(polled.status, 200, JSON.stringify(polled.body));
      backtest = polled.body;
    }
    assert.deepEqual(backtest.progress, { total: REPORTS, started: REPORTS, finished: REPORTS, processed: REPORTS, byState: { succeeded: REPORTS } }, `backtest ${round}`);
    assert.equal(backtest.report.shadowRuns, REPORTS, `backtest ${round}`);
  }
  // A restart is survived, but never silent: the run says so.
  const restarts = output().match(/\[safest\] the local runtime \(workerd[^\n]*/gu) ?? [];
  if (restarts.length > 0 || api.retried > 0) t.diagnostic(`dev server restarts: ${restarts.length}; status requests sent again: ${api.retried}\n${restarts.join("\n")}`);
});
