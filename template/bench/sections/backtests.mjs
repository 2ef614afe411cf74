// Section "backtests": fast backtests (the host walker, no Workflows instance per report) next to
// durable ones (one shadow run per report) in the same run, on start → condition on
// report.category → decision or end: reports/s of each and their ratio (target ≥ 20), the wall
// time of a 20,000-report fast backtest, and API latency (GET /api/v1/queues, sequential) while
// each runs next to idle — p99 ratio. 20,000 reports are copied in SQL from one made by the API.
import { edge, log, percentile, poll, publish, results, round, sleep } from "./lib.mjs";

const REPORTS = 20_000;
const DURABLE = 200;
const CLONE_CHUNK = 10_000;
const TARGET_RATIO = 20;

const graph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    {
      id: "route",
      kind: "condition",
      config: {
        cases: [
          { port: "scam", when: "report.category == 'scams_and_fraud'" },
          { port: "violent", when: "report.category == 'violence'" },
        ],
        case_ports: ["scam", "violent"],
        default_port: "other",
      },
    },
    { id: "remove", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } },
    { id: "label", kind: "decision", config: { outcome: "label", restrictions: { visibility: ["content_labelled"] }, statement: "Labelled." } },
    { id: "done", kind: "end", config: { terminal_code: "decided" } },
    { id: "keep", kind: "end", config: { terminal_code: "no_action" } },
  ],
  edges: [edge("start", "success", "route"), edge("route", "scam", "remove"), edge("route", "violent", "label"), edge("route", "other", "keep"), edge("remove", "recorded", "done"), edge("label", "recorded", "done")],
};

/** Sequential GETs until `stop()`; client-side milliseconds (a request that failed or timed out counts its time, and is counted). */
async function sample(timed, key, stop, minimum = 0) {
  const samples = [];
  samples.failed = 0;
  while (!stop() || samples.length < minimum) {
    const began = performance.now();
    try {
      samples.push((await timed("/api/v1/queues", { key })).clientMs);
    } catch {
      samples.push(performance.now() - began);
      samples.failed += 1;
    }
    await sleep(20);
  }
  return samples;
}

const p = (values, fraction) => round(percentile(values, fraction));

async function backtest(api, key, versionId, body, intervalMs) {
  const began = performance.now();
  const started = await api(`/api/v1/workflow-versions/${versionId}/backtests`, { body, key });
  const done = await poll(
    `backtest ${started.id}`,
    async () => {
      const row = await api(`/api/v1/backtests/${started.id}`, { key });
      if (row.state === "completed") return row;
      if (row.state !== "running") throw new Error(`backtest ${started.id} ${row.state} (${row.errorCode})`);
      return undefined;
    },
    { intervalMs, timeoutMs: 200_000 },
  );
  // Fast: the backtest's own clock (created → completed); durable: until the poll saw it completed.
  const wallMs = body.engine === "durable" ? performance.now() - began : Date.parse(done.finishedAt) - Date.parse(done.createdAt);
  return { done, wallMs };
}

export async function sectionBacktests(api, timed, adminToken) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-backtests" }, key: adminToken });
  const key = installation.apiKey;
  const version = await publish(api, key, graph, "bench-backtest");
  const template = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "bench-template", snapshot: { text: "a post" } }, category: "violence" }, key });
  const baseMs = Date.now() - 86_400_000;
  log(`backtests: copying ${REPORTS} reports`);
  for (let from = 0; from < REPORTS; from += CLONE_CHUNK) {
    const cloned = await api("/bench/report-clone", { body: { templateId: template.id, from, count: Math.min(CLONE_CHUNK, REPORTS - from), baseMs }, key: adminToken });
    if (cloned.reports !== Math.min(CLONE_CHUNK, REPORTS - from)) throw new Error(`report clone ${from}: ${cloned.reports}`);
  }
  const ids = Array.from({ length: DURABLE }, (_, i) => `rep_bench_${String(i).padStart(6, "0")}`);
  const idle = await sample(timed, key, () => true, 200);

  log(`backtests: durable over ${DURABLE} reports`);
  let running = true;
  const duringDurable = sample(timed, key, () => !running, 20);
  const durable = await backtest(api, key, version.id, { reportIds: ids, engine: "durable" }, 100).finally(() => {
    running = false;
  });
  const durableSamples = await duringDurable;
  if (durable.done.progress.byState.succeeded !== DURABLE) throw new Error(`durable backtest: ${JSON.stringify(durable.done.progress)}`);

  log(`backtests: fast over the same ${DURABLE} reports, then over ${REPORTS}`);
  const fastSmall = await backtest(api, key, version.id, { reportIds: ids }, 50);
  running = true;
  const duringFast = sample(timed, key, () => !running, 20);
  const fast = await backtest(api, key, version.id, { from: new Date(baseMs).toISOString(), to: new Date(baseMs + REPORTS).toISOString() }, 250).finally(() => {
    running = false;
  });
  const fastSamples = await duringFast;
  if (fast.done.progress.processed !== REPORTS || fast.done.progress.byState.completed !== REPORTS) throw new Error(`fast backtest: ${JSON.stringify(fast.done.progress)}`);
  // The same proposals on the 200 reports both evaluated.
  const agree = fastSmall.done.report && durable.done.report ? JSON.stringify(fastSmall.done.report.confusionMatrix) === JSON.stringify(durable.done.report.confusionMatrix) : null;

  const durableRps = (DURABLE / durable.wallMs) * 1000;
  const fastRps = (REPORTS / fast.wallMs) * 1000;
  Object.assign(results, {
    backtestDurableRunsPerSecond: round(durableRps, 1),
    backtestFast200ReportsPerSecond: round((DURABLE / fastSmall.wallMs) * 1000, 1),
    backtestFastReportsPerSecond: round(fastRps, 1),
    backtestFastOverDurable: round(fastRps / durableRps, 1),
    backtestFast20kWallMs: round(fast.wallMs, 0),
    backtestSameProposals: agree,
    backtestApiIdle: { p50: p(idle, 0.5), p99: p(idle, 0.99), n: idle.length },
    backtestApiDuringDurable: { p50: p(durableSamples, 0.5), p99: p(durableSamples, 0.99), max: round(Math.max(...durableSamples)), n: durableSamples.length, failed: durableSamples.failed },
    backtestApiDuringFast: { p50: p(fastSamples, 0.5), p99: p(fastSamples, 0.99), max: round(Math.max(...fastSamples)), n: fastSamples.length, failed: fastSamples.failed },
  });
  results.backtestApiP99DuringFastOverIdle = round(results.backtestApiDuringFast.p99 / results.backtestApiIdle.p99);
  results.backtestApiP99DuringDurableOverIdle = round(results.backtestApiDuringDurable.p99 / results.backtestApiIdle.p99);
  log(`backtests: durable ${results.backtestDurableRunsPerSecond} runs/s, fast ${results.backtestFastReportsPerSecond} reports/s (×${results.backtestFastOverDurable}), 20k in ${results.backtestFast20kWallMs} ms`);
}

export function backtestLines() {
  if (results.backtestFastOverDurable === undefined) return [];
  const ratio = results.backtestFastOverDurable;
  return [
    `backtests:        fast ${results.backtestFastReportsPerSecond} reports/s (${results.backtestFast200ReportsPerSecond} on 200) vs durable ${results.backtestDurableRunsPerSecond} runs/s → ×${ratio} (target ≥ ${TARGET_RATIO}: ${ratio >= TARGET_RATIO ? "OK" : "MISS"}); ${REPORTS} reports in ${results.backtestFast20kWallMs} ms; same proposals on the 200: ${results.backtestSameProposals}`,
    `backtest API:     GET /queues p99 idle ${results.backtestApiIdle.p99} ms, during fast ${results.backtestApiDuringFast.p99} ms (×${results.backtestApiP99DuringFastOverIdle}), during durable ${results.backtestApiDuringDurable.p99} ms (×${results.backtestApiP99DuringDurableOverIdle})`,
  ];
}
