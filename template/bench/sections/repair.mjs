// Section "repair": 100 runs parked in repair_required by a failing condition, repaired in one bulk
// migrate (POST /run-operations, processed by the RUN_OPERATIONS queue) onto a version that fixes
// the condition; then the same for 100 runs repaired one by one (POST /runs/:id/repair, route).
// Figures: runs/s from the request to the last run succeeded, and the operation's own span.
import { edge, log, poll, pool, results, round, startRun } from "./lib.mjs";

const RUNS = 100;

const graph = (when) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "check", kind: "condition", timeoutPolicy: { retries: 0 }, config: { cases: [{ port: "yes", when }], case_ports: ["yes"], default_port: "no" } },
    { id: "end_yes", kind: "end", config: { terminal_code: "yes" } },
    { id: "end_no", kind: "end", config: { terminal_code: "no" } },
  ],
  edges: [edge("start", "success", "check"), edge("check", "yes", "end_yes"), edge("check", "no", "end_no")],
});

async function stuckRuns(api, key, versionId) {
  const ids = [];
  await pool(RUNS, 8, async () => ids.push(await startRun(api, key, versionId, { input: { n: 1 } })));
  await pool(ids.length, 8, (index) =>
    poll(`run ${ids[index]} to need repair`, async () => {
      const run = await api(`/api/v1/runs/${ids[index]}`, { key });
      if (run.state === "repair_required") return run;
      if (["failed", "succeeded", "terminated"].includes(run.state)) throw new Error(`run ${run.id} ${run.state}`);
      return undefined;
    }),
  );
  return ids;
}

async function allSucceeded(api, key, ids) {
  await pool(ids.length, 8, (index) =>
    poll(
      `repaired run ${ids[index]}`,
      async () => {
        const run = await api(`/api/v1/runs/${ids[index]}`, { key });
        if (run.state === "succeeded") return run;
        if (["failed", "repair_required", "terminated"].includes(run.state)) throw new Error(`repaired run ${run.id} ${run.state}: ${JSON.stringify(run.error)}`);
        return undefined;
      },
      { intervalMs: 200 },
    ),
  );
}

export async function sectionRepair(api, key) {
  const workflow = await api("/api/v1/workflows", { body: { name: "bench-repair" }, key });
  const broken = await api(`/api/v1/workflows/${workflow.id}/versions`, { body: { graph: graph("input.missing.deeper == 1") }, key });
  const fixed = await api(`/api/v1/workflows/${workflow.id}/versions`, { body: { graph: graph("input.n == 1") }, key });
  log(`repair: starting ${RUNS} runs that need repair`);
  const bulkIds = await stuckRuns(api, key, broken.id);
  const request = { action: "migrate", filter: { workflowVersionId: broken.id, state: "repair_required" }, workflowVersionId: fixed.id, reason: "bench: v2 fixes the condition" };
  const dry = await api("/api/v1/run-operations", { body: { ...request, dryRun: true }, key });
  if (dry.count !== RUNS) throw new Error(`dry run counted ${dry.count}, expected ${RUNS}`);
  const began = performance.now();
  const operation = await api("/api/v1/run-operations", { body: request, key });
  const done = await poll(
    "bulk migrate",
    async () => {
      const current = await api(`/api/v1/run-operations/${operation.id}`, { key });
      return current.state === "completed" ? current : undefined;
    },
    { intervalMs: 200 },
  );
  const operationMs = performance.now() - began;
  await allSucceeded(api, key, bulkIds);
  const bulkMs = performance.now() - began;
  if (done.progress.succeeded !== RUNS) throw new Error(`bulk migrate: ${JSON.stringify(done.progress)}`);

  log(`repair: ${RUNS} runs repaired one by one (route)`);
  const singleIds = await stuckRuns(api, key, broken.id);
  const beganSingle = performance.now();
  await pool(singleIds.length, 8, (index) => api(`/api/v1/runs/${singleIds[index]}/repair`, { body: { action: "route", port: "no", reason: "bench: routed" }, key }));
  await allSucceeded(api, key, singleIds);
  const singleMs = performance.now() - beganSingle;
  results.repair = {
    runs: RUNS,
    bulkMigrateRunsPerSecond: round(RUNS / (bulkMs / 1000)),
    bulkMigrateOperationMs: round(operationMs, 0),
    bulkMigrateToAllSucceededMs: round(bulkMs, 0),
    routeRunsPerSecond: round(RUNS / (singleMs / 1000)),
    routeToAllSucceededMs: round(singleMs, 0),
  };
  log(`repair: bulk migrate ${results.repair.bulkMigrateRunsPerSecond} runs/s, route one by one ${results.repair.routeRunsPerSecond} runs/s`);
}

export function repairLines() {
  const r = results.repair;
  if (!r) return [];
  return [
    `repair:           ${r.runs} runs in repair_required → bulk migrate (RUN_OPERATIONS queue): ${r.bulkMigrateRunsPerSecond} runs/s to all succeeded (${r.bulkMigrateToAllSucceededMs} ms; operation done in ${r.bulkMigrateOperationMs} ms)`,
    `                  ${r.runs} runs repaired one by one (route, 8 in flight): ${r.routeRunsPerSecond} runs/s (${r.routeToAllSucceededMs} ms)`,
  ];
}
