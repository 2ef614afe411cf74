// Section "sweeps": one scheduled run (every sweep of src/schedule.ts, through the Worker's own
// `scheduled` handler as scripts/local-cron.mjs calls it) over a queue of 100,000 tasks, 1,000 of
// them holding a lease that lapsed, in an installation with alerts on; the run's time and each
// sweep's (from sweep_runs), and the query plan of every sweep's selection, which must use the
// index it was given — no scan of a table, no sort in a temp b-tree.
import { triggerScheduled } from "../../scripts/local-cron.mjs";
import { log, results, round } from "./lib.mjs";

const SWEEP_TASKS = 100_000;
const SEED_CHUNK = 25_000;
const LAPSED = 1_000;

const planText = (plan) => plan.map((row) => `${row.parent === 0 ? "" : "  "}${row.detail}`).join("\n");

function planProblems(name, index, plan) {
  const text = plan.map((row) => row.detail).join("\n");
  const problems = [];
  if (!text.includes(index)) problems.push(`${name}: does not use ${index}`);
  if (/USE TEMP B-TREE/u.test(text)) problems.push(`${name}: sorts in a temp b-tree`);
  if (/\bSCAN (human_tasks|workflow_runs|workflow_waits|webhook_deliveries)\b(?! USING)/u.test(text)) problems.push(`${name}: scans a table`);
  return problems;
}

export async function sectionSweeps(api, base, adminToken, versionId) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-sweeps" }, key: adminToken });
  const key = installation.apiKey;
  const queue = await api("/api/v1/queues", { body: { name: "bench-sweeps", slaSeconds: 86_400 }, key });
  log(`sweeps: seeding ${SWEEP_TASKS} tasks, ${LAPSED} with a lapsed lease`);
  for (let from = 0; from < SWEEP_TASKS; from += SEED_CHUNK) {
    const count = Math.min(SEED_CHUNK, SWEEP_TASKS - from);
    const seeded = await api("/bench/queue-seed", { body: { installationId: installation.id, queueId: queue.id, workflowVersionId: versionId, from, count }, key: adminToken });
    if (seeded.tasks !== count) throw new Error(`sweeps seed ${from}: ${seeded.tasks} tasks, expected ${count}`);
  }
  const lapsed = await api("/bench/sweep-lapse", { body: { queueId: queue.id, count: LAPSED }, key: adminToken });
  if (lapsed.lapsed !== LAPSED) throw new Error(`sweeps: ${lapsed.lapsed} leases lapsed, expected ${LAPSED}`);
  const endpoint = await api("/api/v1/webhook-endpoints", { body: { url: `${base}/bench/alert-sink`, retryBaseSeconds: 1, maxAttempts: 5 }, key });
  await api("/api/v1/alerts/settings", { method: "PUT", body: { endpointId: endpoint.id }, key });

  const { plans } = await api("/bench/sweep-plans", { body: { installationId: installation.id }, key: adminToken });
  const problems = Object.entries(plans).flatMap(([name, { index, plan }]) => planProblems(name, index, plan));
  results.sweepPlans = Object.fromEntries(Object.entries(plans).map(([name, { plan }]) => [name, planText(plan)]));
  results.sweepUsesIndexes = problems.length === 0;
  log(
    `sweeps: plans\n${Object.entries(results.sweepPlans)
      .map(([name, text]) => `  ${name}: ${text.replace(/\n/gu, " | ")}`)
      .join("\n")}`,
  );
  if (problems.length > 0) throw new Error(`sweep plans: ${problems.join("; ")}`);

  // The handler's scheduled time is its own clock's (the middleware does not take ours): the rows are
  // those of the first run recorded from now on (the minute driver's, should it fire first: the same work).
  const since = new Date(Date.now() - 1_000).toISOString();
  const run = await triggerScheduled(base);
  if (!run.ok) throw new Error(`sweeps: the scheduled run failed (${run.status} ${run.outcome})`);
  const { runs } = await api("/bench/sweep-runs", { body: { since }, key: adminToken });
  if (runs.length === 0) throw new Error("sweeps: the scheduled run recorded no sweep_runs rows");
  const failed = runs.filter((row) => !row.ok);
  if (failed.length > 0) throw new Error(`sweeps: ${failed.map((row) => `${row.name} (${row.error})`).join(", ")} failed`);
  const lease = runs.find((row) => row.name === "cases.lapsed_leases");
  Object.assign(results, {
    sweepTasks: SWEEP_TASKS,
    sweepLapsedLeases: LAPSED,
    sweepScheduledRunMs: round(run.ms, 1),
    sweepMsByName: Object.fromEntries(runs.map((row) => [row.name, row.ms])),
    sweepCounts: Object.fromEntries(runs.map((row) => [row.name, row.counts])),
    sweepLeasesReleasedFirstRun: lease?.counts?.released ?? null,
  });
  log(`sweeps: one scheduled run in ${results.sweepScheduledRunMs} ms (${runs.map((row) => `${row.name} ${row.ms} ms`).join(", ")})`);
}

export function sweepLines() {
  if (results.sweepScheduledRunMs === undefined) return [];
  return [
    `scheduled sweep:  ${results.sweepScheduledRunMs} ms for one run of every sweep over ${results.sweepTasks} tasks (${results.sweepLapsedLeases} lapsed leases, ${results.sweepLeasesReleasedFirstRun} released this run — bounded per run); by sweep: ${Object.entries(
      results.sweepMsByName,
    )
      .map(([name, ms]) => `${name} ${ms}`)
      .join(", ")} ms`,
    `sweep plans:      ${results.sweepUsesIndexes ? "every selection uses its index, no temp b-tree" : "PROBLEM"}: ${Object.entries(results.sweepPlans)
      .map(([name, text]) => `${name}: ${text.replace(/\n/gu, " | ")}`)
      .join("; ")}`,
  ];
}
