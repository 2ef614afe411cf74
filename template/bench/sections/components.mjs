// Section "components": the per-node cost of a component call against the
// same work in the host. A component version that counts words runs as each of K enrichment nodes
// of a run; the same chain with the host built-in keyword_bank is the comparable baseline (both
// pay the runtime's step overhead). In the Worker, without the runtime: the word count called as
// a host function, executeComponentVersion (the node's sandbox call) and executeBuiltin.
import { edge, finishTimes, log, mean, median, platformRun, publish, results, round, windowMean } from "./lib.mjs";

/** Per-node figures compare node kinds one engine step each, as before fused steps: bench/sections/fused.mjs measures fusing. */
const PER_NODE = { steps: "per_node" };

const CHAIN_NODES = 30;
const CHAIN_REPEATS = 7; // runs of each chain, interleaved
const DIRECT_CALLS = 200; // executeComponentVersion / executeBuiltin calls; the host function 1,000× more

/** The component: the body of countWords in bench/worker.ts, as an ES module. */
const COMPONENT_SOURCE = `export function run(input) {
  const text = typeof input.text === "string" ? input.text : "";
  return { words: text.split(/\\s+/u).filter(Boolean).length };
}
`;
const TEXT = "Limited offer!!! Double your crypto in 24h, DM me or visit https://scam.example/offer — only 7 spots left. ".repeat(3).trim();
const KEYWORDS = ["free crypto", "double your crypto", "wire transfer", "gift card"];

/** start → e1 … eK → end, every node the same enrichment on input.text. */
function enrichmentChain(count, config) {
  const nodes = [{ id: "start", kind: "start" }];
  const edges = [edge("start", "success", "e1")];
  for (let index = 1; index <= count; index++) {
    nodes.push({ id: `e${index}`, kind: "enrichment", config, inputMapping: { text: "input.text" } });
    edges.push(edge(`e${index}`, "success", index === count ? "end" : `e${index + 1}`));
  }
  nodes.push({ id: "end", kind: "end", config: { terminal_code: "done" } });
  return { schemaVersion: 1, nodes, edges };
}

/** Per-node cost of a chain run (finishedAt deltas over e1 … eK) and the nodes' own latencyMs. */
function chainFigures(run, expectWords) {
  const perNodeMs = windowMean(run, [1, CHAIN_NODES], (index) => `e${index}`);
  const steps = run.steps.filter((step) => /^e\d+$/u.test(step.nodeId));
  if (steps.length !== CHAIN_NODES) throw new Error(`run ${run.id}: ${steps.length} enrichment steps, expected ${CHAIN_NODES}`);
  if (expectWords !== null && steps.some((step) => step.output?.data?.words !== expectWords)) throw new Error(`run ${run.id}: a component did not count ${expectWords} words`);
  if (!finishTimes(run).has("end")) throw new Error(`run ${run.id} lacks its end step`);
  // latencyMs is whole milliseconds (Date.now() around the call), so its mean, not its median.
  return { perNodeMs, insideMs: mean(steps.map((step) => step.output.latencyMs)) };
}

export async function sectionComponents(api, adminToken, key, installationId) {
  log(`components: publishing a word-count component and two ${CHAIN_NODES}-enrichment chains (component, keyword_bank)`);
  const component = await api("/api/v1/components", { body: { name: "bench-word-count" }, key });
  const version = await api(`/api/v1/components/${component.id}/versions`, { body: { source: COMPONENT_SOURCE }, key });
  const componentChain = await publish(api, key, enrichmentChain(CHAIN_NODES, { component_version_id: version.id }), "bench-component-chain", PER_NODE);
  const builtinChain = await publish(api, key, enrichmentChain(CHAIN_NODES, { component: "keyword_bank", keywords: KEYWORDS }), "bench-builtin-chain", PER_NODE);
  const input = { x: 1, text: TEXT };
  const words = TEXT.split(/\s+/u).filter(Boolean).length;
  log("components: warm-up (not counted)");
  await platformRun(api, key, componentChain.id, { input });
  await platformRun(api, key, builtinChain.id, { input });
  const viaComponent = [];
  const viaBuiltin = [];
  for (let round_ = 1; round_ <= CHAIN_REPEATS; round_++) {
    viaComponent.push(chainFigures(await platformRun(api, key, componentChain.id, { input }), words));
    viaBuiltin.push(chainFigures(await platformRun(api, key, builtinChain.id, { input }), null));
    log(`components round ${round_}/${CHAIN_REPEATS}: component ${viaComponent.at(-1).perNodeMs.toFixed(2)} ms/node, keyword_bank ${viaBuiltin.at(-1).perNodeMs.toFixed(2)} ms/node`);
  }
  log(`components: direct calls in the Worker (${DIRECT_CALLS} each; the host function ${DIRECT_CALLS * 1_000}×)`);
  const directBody = { installationId, componentVersionId: version.id, text: TEXT, keywords: KEYWORDS, calls: DIRECT_CALLS };
  await api("/bench/component-direct", { body: { ...directBody, calls: 10 }, key: adminToken }); // warm-up
  const direct = await api("/bench/component-direct", { body: directBody, key: adminToken });
  if (direct.words !== words) throw new Error(`host word count ${direct.words}, expected ${words}`);
  const componentNodeMs = median(viaComponent.map((figures) => figures.perNodeMs));
  const builtinNodeMs = median(viaBuiltin.map((figures) => figures.perNodeMs));
  // Rounds are interleaved, so the per-round ratio cancels slow phases of a noisy machine.
  const pairedRatio = median(viaComponent.map((figures, index) => figures.perNodeMs / viaBuiltin[index].perNodeMs));
  Object.assign(results, {
    componentChainNodes: CHAIN_NODES,
    componentChainRepeats: CHAIN_REPEATS,
    componentNodeMs: round(componentNodeMs),
    builtinNodeMs: round(builtinNodeMs),
    componentNodeOverBuiltinNode: round(componentNodeMs / builtinNodeMs, 3),
    componentNodeOverBuiltinNodePaired: round(pairedRatio, 3),
    componentNodeExtraMs: round(componentNodeMs - builtinNodeMs),
    componentNodeMsSamples: viaComponent.map((figures) => round(figures.perNodeMs)),
    builtinNodeMsSamples: viaBuiltin.map((figures) => round(figures.perNodeMs)),
    componentNodeLatencyMs: round(median(viaComponent.map((figures) => figures.insideMs)), 3),
    builtinNodeLatencyMs: round(median(viaBuiltin.map((figures) => figures.insideMs)), 3),
    componentDirectCalls: DIRECT_CALLS,
    componentCallMs: round(direct.componentMs, 3),
    componentVersionReadMs: round(direct.versionReadMs, 3),
    componentInvokeMs: round(direct.invokeMs, 3),
    builtinCallMs: round(direct.builtinMs, 4),
    hostFunctionUs: round(direct.hostFunctionMs * 1000, 3),
    componentCallOverHostFunction: direct.hostFunctionMs > 0 ? round(direct.componentMs / direct.hostFunctionMs, 0) : null,
    componentDirectD1RoundTripMs: round(direct.d1PingMs, 3),
  });
}

export function componentLines() {
  if (results.componentNodeOverBuiltinNode === undefined) return [];
  return [
    `component node:   ${results.componentNodeMs} ms/node vs keyword_bank ${results.builtinNodeMs} ms/node; component / built-in ${results.componentNodeOverBuiltinNode} (paired ${results.componentNodeOverBuiltinNodePaired}; +${results.componentNodeExtraMs} ms a node)  (runs of start → ${results.componentChainNodes} enrichment nodes → end, mean finishedAt delta over the ${results.componentChainNodes} nodes, median of ${results.componentChainRepeats} interleaved runs each: ${results.componentNodeMsSamples?.join(", ")} / ${results.builtinNodeMsSamples?.join(", ")}; the nodes' own latencyMs, mean: ${results.componentNodeLatencyMs} / ${results.builtinNodeLatencyMs} ms)`,
    `component call:   ${results.componentCallMs} ms (executeComponentVersion in the Worker, mean of ${results.componentDirectCalls}: version-row read ${results.componentVersionReadMs} ms, sandbox RPC ${results.componentInvokeMs} ms, the rest digest check and JSON copy) vs the same word count as a host function ${results.hostFunctionUs} µs; ratio ${results.componentCallOverHostFunction}×  (keyword_bank via executeBuiltin ${results.builtinCallMs} ms; one D1 round trip ${results.componentDirectD1RoundTripMs} ms)`,
  ];
}
