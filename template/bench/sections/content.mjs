// Section "content": what reading the reported content costs. (1) Per-node cost of a
// keyword_bank enrichment that reads `content` (the host opens the report's sealed data, records
// the read, seals the derived output) against the same enrichment on `input.text`, in chains run
// side by side. (2) Intake with a trigger that starts a content-reading run for every report next
// to intake with a trigger that starts a run that reads nothing.
import { randomBytes } from "node:crypto";
import { edge, finishedRun, log, mean, pool, publish, results, round, windowMean } from "./lib.mjs";

/** Per-node figures compare node kinds one engine step each, as before fused steps: bench/sections/fused.mjs measures fusing. */
const PER_NODE = { steps: "per_node" };

const CHAIN_NODES = 20;
const CHAIN_REPEATS = 5;
const INTAKE_REPORTS = 400;
const INTAKE_CONCURRENCY = 16;
const TEXT = "Limited offer!!! Double your crypto in 24h, DM me or visit https://scam.example/offer — only 7 spots left. ".repeat(3).trim();
const KEYWORDS = ["free crypto", "double your crypto", "wire transfer", "gift card"];

function chain(count, text) {
  const nodes = [{ id: "start", kind: "start" }];
  const edges = [edge("start", "success", "e1")];
  for (let index = 1; index <= count; index++) {
    nodes.push({ id: `e${index}`, kind: "enrichment", config: { component: "keyword_bank", keywords: KEYWORDS }, inputMapping: { text } });
    edges.push(edge(`e${index}`, "success", index === count ? "end" : `e${index + 1}`));
  }
  nodes.push({ id: "end", kind: "end", config: { terminal_code: "done" } });
  return { schemaVersion: 1, nodes, edges };
}

function reportBody(tag, index) {
  return {
    subject: { kind: "content", id: `${tag}-${index}`, url: `https://social.example/p/${index}`, ownerId: `acct-${index % 97}`, snapshot: { text: TEXT } },
    category: "scams_and_fraud",
    reporter: { id: `user-${index}`, contact: `reporter.${index}@example.org` },
    description: "This account keeps sending me links to a fake investment site.",
  };
}

async function run(api, key, versionId, reportId) {
  const started = await api("/api/v1/runs", { body: { workflowVersionId: versionId, authorityMode: "autonomous", input: { text: TEXT }, reportId }, key });
  return finishedRun(api, key, started.id);
}

export async function sectionContent(api, adminToken, key) {
  log(`content: two ${CHAIN_NODES}-enrichment keyword_bank chains, on input.text and on content.snapshot.text`);
  const plain = await publish(api, key, chain(CHAIN_NODES, "input.text"), "bench-content-plain", PER_NODE);
  const reading = await publish(api, key, chain(CHAIN_NODES, "string(content.snapshot.text)"), "bench-content-reading", PER_NODE);
  const tag = randomBytes(4).toString("hex");
  const report = await api("/api/v1/reports", { body: reportBody(tag, 0), key });
  await run(api, key, plain.id, report.id);
  await run(api, key, reading.id, report.id);
  const plainMs = [];
  const readingMs = [];
  for (let index = 1; index <= CHAIN_REPEATS; index++) {
    plainMs.push(windowMean(await run(api, key, plain.id, report.id), [1, CHAIN_NODES], (k) => `e${k}`));
    const readingRun = await run(api, key, reading.id, report.id);
    if (!readingRun.steps.find((step) => step.nodeId === "e1")?.sealed) throw new Error("a content-reading enrichment's output was not sealed");
    readingMs.push(windowMean(readingRun, [1, CHAIN_NODES], (k) => `e${k}`));
    log(`content round ${index}/${CHAIN_REPEATS}: plain ${plainMs.at(-1).toFixed(2)} ms/node, reading content ${readingMs.at(-1).toFixed(2)} ms/node`);
  }
  Object.assign(results, {
    contentPlainNodeMs: round(mean(plainMs)),
    contentReadingNodeMs: round(mean(readingMs)),
    contentNodeOverPlainNode: round(mean(readingMs) / mean(plainMs)),
  });

  log(`content: intake, ${INTAKE_REPORTS} reports each with a run of a 1-enrichment graph on input vs on content, ${INTAKE_CONCURRENCY} in flight`);
  const oneNode = (text) => ({
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "bank", kind: "enrichment", config: { component: "keyword_bank", keywords: KEYWORDS }, inputMapping: { text } },
      { id: "end", kind: "end" },
    ],
    edges: [edge("start", "success", "bank"), edge("bank", "success", "end")],
  });
  const intakeFigures = {};
  for (const [name, text] of [
    ["plain", "string(report.category)"],
    ["reading", "string(content.snapshot.text)"],
  ]) {
    // An installation each, so the other's trigger does not fire.
    const { apiKey: installationKey } = await api("/api/v1/installations", { body: { name: `bench-content-${name}` }, key: adminToken });
    const version = await publish(api, installationKey, oneNode(text), `bench-intake-${name}`);
    await api("/api/v1/triggers", { body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" }, key: installationKey });
    let sent = 0;
    const began = performance.now();
    await pool(INTAKE_REPORTS, INTAKE_CONCURRENCY, async () => {
      const index = sent++;
      const created = await api("/api/v1/reports", { body: reportBody(`${tag}-${name}`, index), key: installationKey });
      if (!created.runs?.[0]?.runId) throw new Error(`intake (${name}): the trigger started no run`);
    });
    intakeFigures[name] = INTAKE_REPORTS / ((performance.now() - began) / 1000);
  }
  Object.assign(results, {
    intakeWithRunsReportsPerSecond: round(intakeFigures.plain, 1),
    intakeWithContentRunsReportsPerSecond: round(intakeFigures.reading, 1),
    intakeContentOverPlain: round(intakeFigures.reading / intakeFigures.plain),
  });
}

export function contentLines() {
  if (results.contentNodeOverPlainNode === undefined) return [];
  return [
    `content per node: ${results.contentReadingNodeMs} ms reading content vs ${results.contentPlainNodeMs} ms on input (${results.contentNodeOverPlainNode}×, target ≤ 1.3) ${results.contentNodeOverPlainNode <= 1.3 ? "OK" : "MISS"}  (keyword_bank chains of ${CHAIN_NODES}, ${CHAIN_REPEATS} runs each)`,
    `content intake:   ${results.intakeWithContentRunsReportsPerSecond} reports/s with a trigger starting a content-reading run vs ${results.intakeWithRunsReportsPerSecond} reports/s with one starting a run that reads none (${results.intakeContentOverPlain}×)`,
  ];
}
