// Reproduction of the workerd fault under `wrangler dev` with its devtools inspector on.
//
//   node scripts/repro-inspector-fault.mjs [--minutes 8] [--burners 2]     (npm run repro:inspector)
//
// What it looks for: the Worker's runtime (workerd) dying under sustained load while `wrangler
// dev`'s inspector relay is attached (it sends `Runtime.enable` and `Network.enable`, so V8
// captures a stack on every console call). With workerd 2026-04-26 and 2026-08-15 that ended in
// `V8 fatal error … Missing deoptimization information` (an int3 trap in
// `v8::internal::OptimizedJSFrame::Summarize`, seen in the kernel log), after which the proxy in
// front of the dead runtime held every request.
//
// The load is what set it off before: `npm start` (the public `wrangler dev`, inspector attached)
// on a fresh state folder, 400 reports, then durable backtests of those reports one after another
// for the given minutes (each backtest is 400 Workflows runs plus their queue traffic), with CPU
// burners beside it standing in for a test suite running on the same two cores. A status request
// goes out every two seconds throughout. The fault shows as wrangler's "The Workers runtime crashed
// unexpectedly and is being restarted" (wrangler 4.16x restarts a dead runtime by itself; older
// ones left the proxy holding every request), a status request unanswered for 60 s, or a 503
// "restarted mid-request".
//
// Exit code 0: the runtime survived the whole load; 1: the fault was reproduced (the output says
// how, with the last server lines); 2: the setup failed. docs/ARCHITECTURE.md ("Local dev
// server") keeps the results and what an upstream report needs.
import { Worker } from "node:worker_threads";
import { parseArgs } from "node:util";
import { api as apiFor, sleep, startServer } from "../test-node/harness.mjs";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "8" },
    burners: { type: "string", default: "2" },
  },
});
const minutes = Number(values.minutes);
const burnerCount = Number(values.burners);
const REPORTS = 400;

const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
const graph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", config: { cases: [{ port: "scam", when: "report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "route"), edge("route", "scam", "done"), edge("route", "other", "done")],
};

/** A CPU burner: busy 80 ms of every 100 ms, so the machine is loaded but not starved. */
const BURNER = `
const { parentPort } = require("node:worker_threads");
let stop = false;
parentPort.on("message", () => { stop = true; });
(function spin() {
  if (stop) return;
  const until = Date.now() + 80;
  while (Date.now() < until) Math.sqrt(Math.random());
  setTimeout(spin, 20);
})();
`;

const log = (message) => process.stdout.write(`[repro ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

async function main() {
  const mode = "npm start (wrangler dev, inspector attached)";
  log(`starting ${mode}`);
  const server = await startServer({ label: "repro", args: ["--empty"], readyTimeoutMs: 120_000 });
  const burners = Array.from({ length: burnerCount }, () => new Worker(BURNER, { eval: true }));
  let fault = null;
  const api = apiFor(server.baseUrl, server.apiKey, { timeoutMs: 60_000 });
  const pidsAtStart = server.runtimePids();
  log(`server ${server.baseUrl}, runtime pids ${pidsAtStart.join(", ") || "(none found)"}, ${burnerCount} CPU burners`);

  const check = (response, what) => {
    if (response.status === 503 && JSON.stringify(response.body).includes("restarted")) fault ??= `${what}: 503 ${JSON.stringify(response.body)}`;
    return response;
  };
  let probing = true;
  const probe = (async () => {
    while (!fault && probing) {
      try {
        check(await api("/api/v1/runs?limit=1"), "status probe");
      } catch (error) {
        fault ??= `status probe: ${error.message}`;
      }
      if (server.output().includes("crashed unexpectedly")) fault ??= "wrangler: the Workers runtime crashed unexpectedly and was restarted";
      const alive = server.runtimePids();
      if (pidsAtStart.length > 0 && alive.length === 0) fault ??= "the Worker's runtime process is gone";
      await sleep(2_000);
    }
  })();

  try {
    const workflow = await api("/api/v1/workflows", { body: { name: "repro" } });
    const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph } });
    if (version.status !== 201) throw Object.assign(new Error(`publish: ${version.status} ${JSON.stringify(version.body)}`), { setup: true });
    const reportIds = [];
    for (let i = 0; i < REPORTS && !fault; i += 20) {
      const created = await Promise.all(Array.from({ length: 20 }, (_, j) => api("/api/v1/reports", { body: { subject: { kind: "content", id: `repro-${i + j}` }, category: (i + j) % 4 === 0 ? "violence" : "scams_and_fraud" } })));
      for (const report of created) if (check(report, "intake").status === 201) reportIds.push(report.body.id);
    }
    log(`${reportIds.length} reports taken in`);
    const endAt = Date.now() + minutes * 60_000;
    let round = 0;
    while (!fault && Date.now() < endAt) {
      round += 1;
      const started = check(await api(`/api/v1/workflow-versions/${version.body.id}/backtests`, { body: { reportIds, engine: "durable" } }), "backtest start");
      if (started.status !== 202) throw Object.assign(new Error(`backtest: ${started.status} ${JSON.stringify(started.body)}`), { setup: !fault });
      for (;;) {
        await sleep(3_000);
        if (fault) break;
        const status = check(await api(`/api/v1/backtests/${started.body.id}`), "backtest status");
        const { finished: completed = 0, total = 0 } = status.body?.progress ?? {};
        if (status.body?.state !== "running" || completed >= total || Date.now() > endAt) {
          log(`backtest ${round}: ${status.body?.state} ${completed}/${total}`);
          break;
        }
      }
    }
  } catch (error) {
    if (!fault) {
      log(`setup failed: ${error.message}`);
      process.exitCode = 2;
    }
  } finally {
    probing = false;
    await probe;
    for (const burner of burners) burner.postMessage("stop");
    await Promise.all(burners.map((burner) => burner.terminate()));
    if (fault) {
      log(`FAULT REPRODUCED (${mode}): ${fault}`);
      log(`last server lines:\n${server.output().split("\n").slice(-40).join("\n")}`);
      log(`server state:\n${await server.diagnose()}`);
      process.exitCode = 1;
    } else if (process.exitCode !== 2) {
      log(`no fault: the runtime survived ${minutes} min of load (${mode})`);
    }
    await server.stop();
  }
}

await main();
