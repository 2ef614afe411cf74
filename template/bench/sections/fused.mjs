// Section "fused": the per-node cost of a 50-condition chain run as fused steps, over one
// bare Workflows step (one step.do, one D1 write; measured as the per-step section measures it,
// bench/sections/runtime.mjs, in interleaved rounds).
//
// The chain is start → 50 conditions → end, each condition reading the previous node's output,
// published with `steps: "fused"`; its end node has a timeoutPolicy, so it does not fuse and is a
// step of its own. start and the 50 conditions are one Workflows step and one capability call,
// written in one D1 batch. The figure is the span from the start node's record to the end node's
// record over the 51 node intervals (as runtimeOverBare counts them): it holds the group's
// evaluation, its batch, the return to the kernel and one whole unfused step (the end's), so it is
// the honest cost of a node in a fused run, not just of its evaluation (also reported).
import { linearConditionGraph, log, median, platformRun, results, round, TARGETS, verdict } from "./lib.mjs";
import { bareRun } from "./runtime.mjs";

const CONDITIONS = 50;
const REPEATS = 7;
TARGETS.fusedNodeOverBareStep = 0.5;

function fusedChainGraph(count) {
  const graph = linearConditionGraph(count);
  // Its own step: the span ends at a record written by a later step than the group's.
  graph.nodes.at(-1).timeoutPolicy = { retries: 2 };
  return graph;
}

async function publishFused(api, key, graph, name) {
  const workflow = await api("/api/v1/workflows", { body: { name }, key });
  return api(`/api/v1/workflows/${workflow.id}/versions`, { body: { graph, steps: "fused" }, key });
}

function spans(run) {
  const finished = new Map(run.steps.map((step) => [step.nodeId, Date.parse(step.finishedAt)]));
  const start = finished.get("start");
  return {
    // start's record → end's record: 51 intervals, one of them a whole unfused step.
    perNodeMs: (finished.get("end") - start) / (CONDITIONS + 1),
    // start's record → the last condition's: evaluation inside the group only.
    evalPerNodeMs: (finished.get(`n${CONDITIONS}`) - start) / CONDITIONS,
  };
}

export async function sectionFused(api, adminToken, key) {
  log(`fused: publishing a ${CONDITIONS}-condition chain with steps: fused`);
  const version = await publishFused(api, key, fusedChainGraph(CONDITIONS), `bench-fused-${CONDITIONS}`);
  log("fused: warm-up (not counted)");
  await bareRun(api, adminToken, 5);
  await platformRun(api, key, version.id);
  const bare = [];
  const fused = [];
  const evaluation = [];
  for (let round_ = 1; round_ <= REPEATS; round_++) {
    const b = await bareRun(api, adminToken, CONDITIONS);
    bare.push(b.perStepMs);
    const run = await platformRun(api, key, version.id);
    if (run.steps.length !== CONDITIONS + 2) throw new Error(`run ${run.id} recorded ${run.steps.length} steps, expected ${CONDITIONS + 2}`);
    const s = spans(run);
    fused.push(s.perNodeMs);
    evaluation.push(s.evalPerNodeMs);
    log(`fused round ${round_}/${REPEATS}: bare ${b.perStepMs.toFixed(2)} ms/step, fused ${s.perNodeMs.toFixed(3)} ms/node (evaluation ${s.evalPerNodeMs.toFixed(3)} ms/node)`);
  }
  const bareStepMs = median(bare);
  const fusedNodeMs = median(fused);
  Object.assign(results, {
    fusedConditions: CONDITIONS,
    fusedRepeats: REPEATS,
    fusedBareStepMs: round(bareStepMs),
    fusedNodeMs: round(fusedNodeMs, 3),
    fusedEvalNodeMs: round(median(evaluation), 3),
    fusedNodeOverBareStep: round(fusedNodeMs / bareStepMs, 3),
    fusedNodeOverBareStepPaired: round(median(fused.map((value, index) => value / bare[index])), 3),
    fusedNodeMsSamples: fused.map((value) => round(value, 3)),
    fusedBareStepMsSamples: bare.map((value) => round(value)),
  });
}

export function fusedLines() {
  if (results.fusedNodeOverBareStep === undefined) return [];
  return [
    `fused node:       ${results.fusedNodeMs} ms/node  (median of ${results.fusedRepeats} runs: start + ${results.fusedConditions} conditions in one fused step, then end in its own; start's record → end's record over ${results.fusedConditions + 1} intervals; samples ${results.fusedNodeMsSamples?.join(", ")}; evaluation alone ${results.fusedEvalNodeMs} ms/node)`,
    `fused / bare:     ${results.fusedNodeOverBareStep}  (target ≤ ${TARGETS.fusedNodeOverBareStep}) ${verdict(results.fusedNodeOverBareStep, TARGETS.fusedNodeOverBareStep)}  (bare ${results.fusedBareStepMs} ms/step in interleaved rounds: ${results.fusedBareStepMsSamples?.join(", ")}; median of per-round ratios ${results.fusedNodeOverBareStepPaired})`,
  ];
}
