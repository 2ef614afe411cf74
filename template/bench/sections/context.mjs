// Section "context": the per-step cost of a node's context at step 10 and at
// step 200. (1) A 210-condition run where node k reads a step far back and the previous one
// (steps["n1"] and steps["n{k−1}"]): per-node cost early and late, as the growth section measures
// it. (2) loadWorkflowExecutionContext timed directly in the Worker for node n10 of a run with 12
// recorded steps and node n200 of a run with 212, and — for contrast — a probe whose expression
// reads `steps` as a whole (so every recorded output is loaded) against both runs.
import { edge, log, median, platformRun, publish, results, round, TARGETS, verdict, windowMean } from "./lib.mjs";
import { LONG_NODES, LONG_REPEATS, WINDOWS } from "./runtime.mjs";

/** Per-node figures compare node kinds one engine step each, as before fused steps: bench/sections/fused.mjs measures fusing. */
const PER_NODE = { steps: "per_node" };

const SHORT_NODES = 10;
const CONTEXT_ROUNDS = 200; // loads per measurement, one after another
const CONTEXT_REPEATS = 3; // measurements per case, interleaved across cases; the median is kept

/** start → n1 … nN → end; n1 reads the input, n2 reads n1, node k ≥ 3 reads n1 and n{k−1}. */
function farBackGraph(count) {
  const nodes = [{ id: "start", kind: "start" }];
  const edges = [edge("start", "success", "n1")];
  for (let index = 1; index <= count; index++) {
    const when = index === 1 ? "input.x == 1" : index === 2 ? `steps["n1"].port == "next"` : `steps["n1"].port == "next" && steps["n${index - 1}"].port == "next"`;
    nodes.push({ id: `n${index}`, kind: "condition", config: { cases: [{ port: "next", when }], case_ports: ["next"], default_port: "other" } });
    const next = index === count ? "end" : `n${index + 1}`;
    edges.push(edge(`n${index}`, "next", next), edge(`n${index}`, "other", next));
  }
  nodes.push({ id: "end", kind: "end", config: { terminal_code: "done" } });
  return { schemaVersion: 1, nodes, edges };
}

export async function sectionContext(api, adminToken, key) {
  log(`context: publishing a ${LONG_NODES}-condition graph whose nodes read steps["n1"] and the previous step, and a ${SHORT_NODES}-condition one`);
  const long = await publish(api, key, farBackGraph(LONG_NODES), `bench-far-back-${LONG_NODES}`, PER_NODE);
  const short = await publish(api, key, farBackGraph(SHORT_NODES), `bench-far-back-${SHORT_NODES}`, PER_NODE);
  const early = [];
  const late = [];
  let longRun = null;
  for (let round_ = 1; round_ <= LONG_REPEATS; round_++) {
    longRun = await platformRun(api, key, long.id);
    if (longRun.steps.length !== LONG_NODES + 2) throw new Error(`run ${longRun.id} recorded ${longRun.steps.length} steps, expected ${LONG_NODES + 2}`);
    early.push(windowMean(longRun, WINDOWS.early));
    late.push(windowMean(longRun, WINDOWS.late));
    log(`context round ${round_}/${LONG_REPEATS}: nodes ${WINDOWS.early.join("-")} ${early.at(-1).toFixed(2)} ms, nodes ${WINDOWS.late.join("-")} ${late.at(-1).toFixed(2)} ms`);
  }
  const shortRun = await platformRun(api, key, short.id);
  if (shortRun.steps.length !== SHORT_NODES + 2) throw new Error(`run ${shortRun.id} recorded ${shortRun.steps.length} steps, expected ${SHORT_NODES + 2}`);

  log(`context: loadWorkflowExecutionContext in the Worker, ${CONTEXT_ROUNDS} loads × ${CONTEXT_REPEATS} per case`);
  const cases = {
    step10: { runId: shortRun.id, nodeId: `n${SHORT_NODES}` },
    step200: { runId: longRun.id, nodeId: "n200" },
    step10InLongRun: { runId: longRun.id, nodeId: "n10" },
    allStepsShortRun: { runId: shortRun.id, probe: "all-steps" },
    allStepsLongRun: { runId: longRun.id, probe: "all-steps" },
  };
  const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
  const pings = [];
  const shape = {};
  await api("/bench/context-load", { body: { ...cases.step10, rounds: 20 }, key: adminToken }); // warm-up
  for (let repeat = 0; repeat < CONTEXT_REPEATS; repeat++) {
    for (const [name, body] of Object.entries(cases)) {
      const measured = await api("/bench/context-load", { body: { ...body, rounds: CONTEXT_ROUNDS }, key: adminToken });
      samples[name].push(measured.msPerLoad);
      pings.push(measured.d1PingMs);
      shape[name] = { recordedSteps: measured.recordedSteps, stepsLoaded: measured.stepsLoaded };
    }
  }
  for (const name of ["step10", "step200", "step10InLongRun"]) {
    if (shape[name].stepsLoaded !== 2) throw new Error(`context ${name}: loaded ${shape[name].stepsLoaded} step outputs, expected 2 (n1 and the previous step)`);
  }
  const load = Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, round(median(values), 3)]));
  const node10Ms = median(early);
  const node200Ms = median(late);
  Object.assign(results, {
    farBackNode10Ms: round(node10Ms),
    farBackNode200Ms: round(node200Ms),
    farBackNode200OverNode10: round(node200Ms / node10Ms, 3),
    farBackNode10MsSamples: early.map((value) => round(value)),
    farBackNode200MsSamples: late.map((value) => round(value)),
    contextLoadRounds: CONTEXT_ROUNDS * CONTEXT_REPEATS,
    contextLoadMs: load,
    contextLoadShape: shape,
    contextLoadD1RoundTripMs: round(median(pings), 3),
    contextLoad200Over10: round(load.step200 / load.step10, 3),
    contextLoadAllSteps200Over10: round(load.allStepsLongRun / load.allStepsShortRun, 3),
  });
}

export function contextLines() {
  const lines = [];
  if (results.farBackNode200OverNode10 !== undefined)
    lines.push(
      `far-back reads:   node ~10 ${results.farBackNode10Ms} ms/node, node ~200 ${results.farBackNode200Ms} ms/node; node200 / node10 ${results.farBackNode200OverNode10} (growth target ≤ ${TARGETS.node200OverNode10}) ${verdict(results.farBackNode200OverNode10, TARGETS.node200OverNode10)}  (${LONG_NODES}-condition run, node k reads steps["n1"] and steps["n{k-1}"]; nodes ${WINDOWS.early.join("-")} vs ${WINDOWS.late.join("-")}, median of ${LONG_REPEATS} runs: ${results.farBackNode10MsSamples?.join(", ")} / ${results.farBackNode200MsSamples?.join(", ")})`,
    );
  if (results.contextLoad200Over10 !== undefined) {
    const { contextLoadMs: load, contextLoadShape: shape } = results;
    lines.push(
      `context load:     step 10 ${load.step10} ms, step 200 ${load.step200} ms; step200 / step10 ${results.contextLoad200Over10} (growth target ≤ ${TARGETS.node200OverNode10}) ${verdict(results.contextLoad200Over10, TARGETS.node200OverNode10)}  (loadWorkflowExecutionContext in the Worker, ${results.contextLoadRounds} loads each: n10 of a run with ${shape.step10.recordedSteps} recorded steps, n200 of one with ${shape.step200.recordedSteps}, each loading ${shape.step200.stepsLoaded} outputs in one D1 batch; n10 of the long run ${load.step10InLongRun} ms; one D1 round trip ${results.contextLoadD1RoundTripMs} ms)`,
      `context, all:     a node reading \`steps\` as a whole: ${load.allStepsShortRun} ms with ${shape.allStepsShortRun.stepsLoaded} outputs, ${load.allStepsLongRun} ms with ${shape.allStepsLongRun.stepsLoaded}; ratio ${results.contextLoadAllSteps200Over10} (for contrast: what the per-node read analysis avoids)`,
    );
  }
  return lines;
}
