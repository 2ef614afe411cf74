// Sections "per-step cost" (the platform runtime against a bare Cloudflare Workflow, one D1 write
// per step) and "growth" (per-node cost early and late in a 210-condition run, each condition
// reading the previous node's output). Both publish with `steps: "per_node"`: they measure one
// Workflows step per node (runtimeOverBare as before fused steps); bench/sections/fused.mjs measures fusion.
import { linearConditionGraph, log, median, platformRun, poll, results, round, TARGETS, verdict, windowMean } from "./lib.mjs";

/** Publishes a version that runs one Workflows step per node. */
export async function publishPerNode(api, key, graph, name) {
  const workflow = await api("/api/v1/workflows", { body: { name }, key });
  return api(`/api/v1/workflows/${workflow.id}/versions`, { body: { graph, steps: "per_node" }, key });
}

const LINEAR_STEPS = 50;
const REPEATS = 7;
export const LONG_NODES = 210;
export const LONG_REPEATS = 3;
export const WINDOWS = { early: [6, 15], late: [196, 205] };

/** One bare workflow instance: N step.do, one D1 write each; times are the workflow's own. */
export async function bareRun(api, adminToken, steps) {
  const { id } = await api("/bench/bare", { body: { steps }, key: adminToken });
  const status = await poll(`bare instance ${id}`, async () => {
    const current = await api(`/bench/bare/${id}`, { key: adminToken });
    if (current.status === "complete") return current;
    if (["errored", "terminated"].includes(current.status)) throw new Error(`bare instance ${id} ${current.status}: ${JSON.stringify(current.error)}`);
    return undefined;
  });
  const { startedAt: start, finishedAt: finish } = status.output;
  return { spanMs: finish - start, perStepMs: (finish - start) / steps };
}

/**
 * run.startedAt is stamped when the start node is recorded and run.finishedAt when the end node
 * is, so the span holds N + 1 node-to-node intervals (start→n1 … nN→end) for N conditions.
 */
function runtimePerStep(run, conditions) {
  const spanMs = Date.parse(run.finishedAt) - Date.parse(run.startedAt);
  return { spanMs, perStepMs: spanMs / (conditions + 1) };
}

export async function sectionPerStep(api, adminToken, key) {
  log(`per-step: publishing a ${LINEAR_STEPS}-condition linear graph`);
  const version = await publishPerNode(api, key, linearConditionGraph(LINEAR_STEPS), `bench-linear-${LINEAR_STEPS}`);
  log("per-step: warm-up (not counted)");
  await bareRun(api, adminToken, 5);
  await platformRun(api, key, version.id);
  const bare = [];
  const runtime = [];
  for (let round_ = 1; round_ <= REPEATS; round_++) {
    const b = await bareRun(api, adminToken, LINEAR_STEPS);
    bare.push(b.perStepMs);
    const run = await platformRun(api, key, version.id);
    if (run.steps.length !== LINEAR_STEPS + 2) throw new Error(`run ${run.id} recorded ${run.steps.length} steps, expected ${LINEAR_STEPS + 2}`);
    const r = runtimePerStep(run, LINEAR_STEPS);
    runtime.push(r.perStepMs);
    log(`per-step round ${round_}/${REPEATS}: bare ${b.perStepMs.toFixed(2)} ms/step (${b.spanMs} ms), runtime ${r.perStepMs.toFixed(2)} ms/step (${r.spanMs} ms)`);
  }
  const bareStepMs = median(bare);
  const runtimeStepMs = median(runtime);
  // Rounds are interleaved, so the per-round ratio cancels slow phases of a noisy machine.
  const pairedRatio = median(runtime.map((value, index) => value / bare[index]));
  Object.assign(results, {
    steps: LINEAR_STEPS,
    repeats: REPEATS,
    bareStepMs: round(bareStepMs),
    runtimeStepMs: round(runtimeStepMs),
    runtimeOverBare: round(runtimeStepMs / bareStepMs, 3),
    runtimeOverBarePaired: round(pairedRatio, 3),
    bareStepMsSamples: bare.map((value) => round(value)),
    runtimeStepMsSamples: runtime.map((value) => round(value)),
  });
}

export async function sectionGrowth(api, key) {
  log(`growth: publishing a ${LONG_NODES}-condition linear graph`);
  const version = await publishPerNode(api, key, linearConditionGraph(LONG_NODES), `bench-long-${LONG_NODES}`);
  const early = [];
  const late = [];
  const whole = [];
  for (let round_ = 1; round_ <= LONG_REPEATS; round_++) {
    const run = await platformRun(api, key, version.id);
    early.push(windowMean(run, WINDOWS.early));
    late.push(windowMean(run, WINDOWS.late));
    whole.push((Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / (LONG_NODES + 1));
    log(`growth round ${round_}/${LONG_REPEATS}: nodes ${WINDOWS.early.join("-")} ${early.at(-1).toFixed(2)} ms, nodes ${WINDOWS.late.join("-")} ${late.at(-1).toFixed(2)} ms, whole run ${whole.at(-1).toFixed(2)} ms/node`);
  }
  const node10Ms = median(early);
  const node200Ms = median(late);
  Object.assign(results, {
    longNodes: LONG_NODES,
    longRepeats: LONG_REPEATS,
    node10Ms: round(node10Ms),
    node200Ms: round(node200Ms),
    node200OverNode10: round(node200Ms / node10Ms, 3),
    longRunStepMs: round(median(whole)),
    node10MsSamples: early.map((value) => round(value)),
    node200MsSamples: late.map((value) => round(value)),
  });
}

export function runtimeLines() {
  const lines = [];
  if (results.runtimeOverBare !== undefined)
    lines.push(
      `bare workflow:    ${results.bareStepMs} ms/step  (median of ${results.repeats} instances × ${results.steps} step.do, one D1 write each, own clock, span / ${results.steps}; samples ${results.bareStepMsSamples?.join(", ")})`,
      `platform runtime: ${results.runtimeStepMs} ms/step  (median of ${results.repeats} runs, start → ${results.steps} conditions → end, run.finishedAt − run.startedAt over ${results.steps + 1} node intervals; samples ${results.runtimeStepMsSamples?.join(", ")})`,
      `runtime / bare:   ${results.runtimeOverBare}  (target ≤ ${TARGETS.runtimeOverBare}) ${verdict(results.runtimeOverBare, TARGETS.runtimeOverBare)}  (median of per-round ratios: ${results.runtimeOverBarePaired})`,
    );
  if (results.node200OverNode10 !== undefined)
    lines.push(
      `node ~10:         ${results.node10Ms} ms/node  (mean cost of nodes ${WINDOWS.early.join("-")} in a ${results.longNodes}-condition run; median of ${results.longRepeats} runs: ${results.node10MsSamples?.join(", ")})`,
      `node ~200:        ${results.node200Ms} ms/node  (mean cost of nodes ${WINDOWS.late.join("-")}, same runs: ${results.node200MsSamples?.join(", ")}; whole run ${results.longRunStepMs} ms/node)`,
      `node200 / node10: ${results.node200OverNode10}  (target ≤ ${TARGETS.node200OverNode10}) ${verdict(results.node200OverNode10, TARGETS.node200OverNode10)}`,
    );
  return lines;
}
