// The content rule over every kind of the node registry: reading `content`, or a sealed field of a
// content reader's output, publishes only in the four kinds that declare content (enrichment,
// ai_proposal, human_task, handoff). And through a real run: an AI proposal whose input holds
// content, on a provider without `contentAllowed`, takes its error port and the model peer
// (test/peers/model-server.ts) receives nothing; the same run on an allowed provider reaches it.
import { describe, expect, it } from "vitest";
import { KINDS, NODE_KINDS, nodePorts } from "../src/workflows/kinds/descriptors";
import type { WorkflowNodeV1 } from "../src/workflows/types";
import { api, edge, newInstallation, publish, waitForRun } from "./helpers";

const CONTENT_KINDS = ["enrichment", "ai_proposal", "human_task", "handoff"];

/** A config each kind validates with (references are checked only when publishing, not by /workflow-graphs/validate). */
const CONFIGS: Record<string, Record<string, unknown>> = {
  ai_proposal: { provider_id: "aip_x", instructions: "Classify.", result_ports: ["remove", "keep"] },
  handoff: { queue_id: "que_x" },
  start_linked_workflow: { workflow_version_id: "wfv_x" },
  action: { action_type: "remove_post", approval_timeout_seconds: 3600 },
  human_task: { queue_id: "que_x", timeout_seconds: 3600 },
  ncmec_report: { confirmation_node: "review" },
};

/** A content reader (a keyword bank over the description) whose `data.keywords` is sealed. */
const bank = { id: "bank", kind: "enrichment", config: { component: "keyword_bank", keywords: ["scam"] }, inputMapping: { text: "content.description" } };

/** start → bank → [node of `kind` reading `probe`] → done, with a fork for a join and the probe on start or end themselves. */
function graphWith(kind: string, probe: string) {
  const descriptor = KINDS[kind as keyof typeof KINDS];
  const config = CONFIGS[kind] ?? descriptor.defaults?.config ?? {};
  const done = { id: "done", kind: "end", config: { terminal_code: "done" } };
  if (kind === "start") {
    return { schemaVersion: 1, nodes: [{ id: "start", kind: "start", inputMapping: { probe } }, done], edges: [edge("start", "success", "done")], probeAt: 0 };
  }
  if (kind === "end") {
    return { schemaVersion: 1, nodes: [{ id: "start", kind: "start" }, bank, { ...done, inputMapping: { probe } }], edges: [edge("start", "success", "bank"), edge("bank", "success", "done")], probeAt: 2 };
  }
  if (kind === "join") {
    const branch = (id: string) => ({ id, kind: "delay", config: { seconds: 1 } });
    return {
      schemaVersion: 1,
      nodes: [{ id: "start", kind: "start" }, bank, branch("left"), branch("right"), { id: "x", kind: "join", inputMapping: { probe } }, done],
      edges: [edge("start", "success", "bank"), edge("bank", "success", "left"), edge("bank", "success", "right"), edge("left", "completed", "x"), edge("right", "completed", "x"), edge("x", "success", "done")],
      probeAt: 4,
    };
  }
  const node = { id: "x", kind, config, inputMapping: { ...((descriptor.defaults as { inputMapping?: Record<string, string> } | undefined)?.inputMapping ?? {}), probe } };
  const ports = nodePorts(node as unknown as WorkflowNodeV1);
  if (kind === "ncmec_report") {
    // Its confirming review task lies on every path to it (checked at publish).
    const review = { id: "review", kind: "human_task", config: CONFIGS.human_task };
    return {
      schemaVersion: 1,
      nodes: [{ id: "start", kind: "start" }, bank, review, node, done],
      edges: [edge("start", "success", "bank"), edge("bank", "success", "review"), edge("review", "completed", "x"), edge("review", "timeout", "done"), ...ports.map((port) => edge("x", port, "done"))],
      probeAt: 3,
    };
  }
  return {
    schemaVersion: 1,
    nodes: [{ id: "start", kind: "start" }, bank, node, done],
    edges: [edge("start", "success", "bank"), edge("bank", "success", "x"), ...ports.map((port) => edge("x", port, "done"))],
    probeAt: 2,
  };
}

describe("the content rule over every kind of the registry", () => {
  it("exactly four kinds declare content: enrichment, ai_proposal, human_task, handoff", () => {
    expect(NODE_KINDS.filter((kind) => KINDS[kind].content !== undefined).sort()).toEqual([...CONTENT_KINDS].sort());
  });

  it("publishes content and a content reader's sealed output only in those four, for each of the 16 kinds", async () => {
    const { apiKey } = await newInstallation();
    const validate = async (graph: unknown) => (await api("/api/v1/workflow-graphs/validate", { key: apiKey, body: { graph } })).body;
    expect(NODE_KINDS.length).toBe(16);
    for (const kind of NODE_KINDS) {
      const { probeAt: _unused, ...plain } = graphWith(kind, "true");
      const baseline = await validate(plain);
      expect(baseline, `${kind} without content`).toMatchObject({ valid: true });
      const probes = kind === "start" ? ["content.description"] : ["content.description", "steps.bank.data.keywords"];
      for (const probe of probes) {
        const { probeAt: at, ...graph } = graphWith(kind, probe);
        const result = await validate(graph);
        if (CONTENT_KINDS.includes(kind)) expect(result, `${kind} reading ${probe}`).toMatchObject({ valid: true });
        else {
          expect(result.valid, `${kind} reading ${probe}`).toBe(false);
          expect(result.errors, `${kind} reading ${probe}`).toContainEqual(expect.objectContaining({ path: `$.nodes[${at}].inputMapping.probe`, code: "content_not_readable_here" }));
        }
      }
    }
  });
});

describe("an AI proposal over content, through a real run", () => {
  async function run(contentAllowed: boolean) {
    const { apiKey } = await newInstallation();
    const tag = `/v1/content-${crypto.randomUUID()}`;
    const provider = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: `https://model.test${tag}`, model: "fixed-remove", apiKey: "sk-test-model-key", contentAllowed } });
    expect(provider.status, JSON.stringify(provider.body)).toBe(201);
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        {
          id: "propose",
          kind: "ai_proposal",
          errorPort: "error",
          timeoutPolicy: { retries: 0 },
          config: { provider_id: provider.body.id, instructions: "Is this a scam?", result_ports: ["remove", "keep"] },
          inputMapping: { post: "content.description" },
        },
        { id: "removed", kind: "end", config: { terminal_code: "remove" } },
        { id: "kept", kind: "end", config: { terminal_code: "keep" } },
        { id: "failed", kind: "end", config: { terminal_code: "error" } },
      ],
      edges: [edge("start", "success", "propose"), edge("propose", "remove", "removed"), edge("propose", "keep", "kept"), edge("propose", "error", "failed")],
    });
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}` }, category: "scams_and_fraud", description: "a scam: wire the fee" } });
    expect(report.status).toBe(201);
    const started = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", reportId: report.body.id } });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const done = await waitForRun(apiKey, started.body.id);
    const log = (await (await fetch(`https://model.test/_control/log?prefix=${encodeURIComponent(tag)}`)).json()) as unknown[];
    return { done, step: done.steps.find((s: { nodeId: string }) => s.nodeId === "propose"), log };
  }

  it("on a provider without contentAllowed takes the error port and the model receives nothing", async () => {
    const { done, step, log } = await run(false);
    expect(done.output.terminalCode).toBe("error");
    expect(step).toMatchObject({ errorCode: "ai_provider.content_not_allowed", output: { port: "error" } });
    expect(log).toEqual([]);
  });

  it("on a provider with contentAllowed reaches the model once and takes its proposal's port", async () => {
    const { done, log } = await run(true);
    expect(done.output.terminalCode).toBe("remove");
    expect(log).toEqual([expect.objectContaining({ model: "fixed-remove", hadUserMessage: true })]);
  });
});
