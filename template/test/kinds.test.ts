// The node-kind registry: descriptors and executors agree, publish checks what can be known then
// (configs, references), a run's error carries the host's own message, and versions published
// with an earlier kernel protocol keep running.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { KINDS, NODE_KINDS, nodePorts, shadowSimulation } from "../src/workflows/kinds/descriptors";
import { EXECUTORS } from "../src/workflows/kinds/executors";
import { KERNEL_PROTOCOL, SUPPORTED_KERNEL_PROTOCOLS } from "../src/workflows/runtime-protocol";
import { KERNEL_PROTOCOL_1_SOURCE } from "./fixtures/kernel-protocol-1";
import { api, edge, newInstallation, publish, startRun, waitForRun, waitForWait } from "./helpers";

async function publishRaw(key: string, graph: unknown) {
  const workflow = await api("/api/v1/workflows", { key, body: { name: `wf-${crypto.randomUUID()}` } });
  return api(`/api/v1/workflows/${workflow.body.id}/versions`, { key, body: { graph } });
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return `sha256:${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

describe("the registry", () => {
  it("gives every kind a descriptor and an executor that fit its kernel protocol", () => {
    expect(NODE_KINDS.length).toBe(16);
    for (const kind of NODE_KINDS) {
      const descriptor = KINDS[kind];
      const executor = EXECUTORS[kind];
      // step and delay kinds execute on the host; wait and action kinds are driven by their protocol's methods.
      expect(Boolean(executor.execute), kind).toBe(descriptor.protocol === "step" || descriptor.protocol === "delay");
      expect(Boolean(executor.prepare), kind).toBe(descriptor.protocol === "delay");
      // Only effects are simulated in shadow, and a simulated effect leaves by one of its ports.
      const simulated = shadowSimulation({ kind, config: {} });
      if (descriptor.shadow) expect(nodePorts({ kind, config: { ...descriptor.defaults.config } })).toContain(simulated!.port);
      else expect(simulated).toBeNull();
    }
  });

  it("derives config-declared ports and adds the error port", () => {
    expect(nodePorts({ kind: "condition", config: { case_ports: ["a", "b"], default_port: "c" }, errorPort: "oops" })).toEqual(["a", "b", "c", "oops"]);
    expect(nodePorts({ kind: "ai_proposal", config: { result_ports: ["x"] } })).toEqual(["x"]);
    expect(nodePorts({ kind: "action", config: {} })).toEqual(["applied", "rejected", "expired"]);
  });
});

describe("publish checks what can be known then", () => {
  const decisionGraph = (config: Record<string, unknown>) => ({
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "decide", kind: "decision", config },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
  });

  it("refuses a Transparency Database constant where a decision expects our short name, and names the short name", async () => {
    const { apiKey } = await newInstallation();
    const refused = await publishRaw(apiKey, decisionGraph({ outcome: "removed", statement: "Spam.", restrictions: { visibility: ["content_removed"] }, content_type: ["CONTENT_TYPE_TEXT"] }));
    expect(refused.status).toBe(422);
    const problem = refused.body.error.details.find((p: any) => p.path === "$.nodes[1].config.content_type[0]");
    expect(problem.code).toBe("config_invalid");
    expect(problem.message).toContain("write text");
    const restricted = await publishRaw(apiKey, decisionGraph({ outcome: "removed", statement: "Spam.", restrictions: { account: "DECISION_ACCOUNT_SUSPENDED" } }));
    expect(restricted.body.error.details.map((p: any) => p.path)).toEqual(["$.nodes[1].config.restrictions.account"]);
    expect(restricted.body.error.details[0].message).toContain("write suspended");
    expect((await publishRaw(apiKey, decisionGraph({ outcome: "removed", statement: "Spam.", restrictions: { visibility: ["content_removed"] }, content_type: ["text"] }))).status).toBe(201);
  });

  it("refuses references to queues, action types, providers, components and versions that do not exist in the installation", async () => {
    const { apiKey } = await newInstallation();
    const other = await newInstallation();
    // A queue of another installation is as missing as a queue that never existed.
    expect((await api("/api/v1/queues", { key: other.apiKey, body: { name: "theirs", slaSeconds: 60 } })).status).toBe(201);
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "theirs" } },
        { id: "model", kind: "ai_proposal", config: { provider_id: "aip_missing", result_ports: ["ok"] } },
        { id: "enrich", kind: "enrichment", config: { component_version_id: "cv_missing" } },
        { id: "link", kind: "start_linked_workflow", config: { workflow_version_id: "wfv_missing" } },
        { id: "act", kind: "action", config: { action_type: "ban" } },
        { id: "done", kind: "end" },
      ],
      edges: [
        edge("start", "success", "review"),
        edge("review", "completed", "model"),
        edge("review", "timeout", "done"),
        edge("model", "ok", "enrich"),
        edge("enrich", "success", "link"),
        edge("link", "started", "act"),
        edge("act", "applied", "done"),
        edge("act", "rejected", "done"),
        edge("act", "expired", "done"),
      ],
    };
    const refused = await publishRaw(apiKey, graph);
    expect(refused.status).toBe(422);
    expect(refused.body.error.details.map((p: any) => [p.path, p.code])).toEqual([
      ["$.nodes[1].config.queue_id", "reference_not_found"],
      ["$.nodes[2].config.provider_id", "reference_not_found"],
      ["$.nodes[3].config.component_version_id", "reference_not_found"],
      ["$.nodes[4].config.workflow_version_id", "reference_not_found"],
      ["$.nodes[5].config.action_type", "reference_not_found"],
    ]);
    // Created in the publishing installation, the queue resolves (by name) and its problem goes.
    expect((await api("/api/v1/queues", { key: apiKey, body: { name: "theirs", slaSeconds: 60 } })).status).toBe(201);
    const again = await publishRaw(apiKey, graph);
    expect(again.body.error.details.map((p: any) => p.path)).not.toContain("$.nodes[1].config.queue_id");
  });
});

describe("a run's error", () => {
  it("carries the host's own message, not only the code", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "route", kind: "condition", config: { cases: [{ port: "big", when: "input.items.size() > 2" }], case_ports: ["big"], default_port: "small" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "route"), edge("route", "big", "done"), edge("route", "small", "done")],
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: {} })).id);
    expect(done.state).toBe("repair_required");
    expect(done.error.code).toBe("expression.failed");
    const step = await env.DB.prepare("SELECT error_message AS message FROM workflow_step_runs WHERE run_id = ?1 AND node_id = 'route'").bind(done.id).first<{ message: string }>();
    expect(step?.message).toBeTruthy();
    expect(done.error.summary).toBe(`Node route failed (expression.failed): ${step!.message}`);
  });

  it("says what is wrong when a failure is known only at run time (a decision with no category to state)", async () => {
    const { apiKey } = await newInstallation();
    // A decision whose policy category comes from a report the run does not have: known only at run time.
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "decide", kind: "decision", config: { outcome: "removed", statement: "Spam.", restrictions: { visibility: ["content_removed"] } } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
    expect(done.state).toBe("repair_required");
    expect(done.error.code).toBe("decision.config_invalid");
    expect(done.error.summary).toContain("policy_category");
  });
});

describe("kernel protocol versions", () => {
  const waitGraph = {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "route", kind: "condition", config: { cases: [{ port: "wait", when: "input.wait == true" }], case_ports: ["wait"], default_port: "skip" } },
      { id: "hold", kind: "wait_for_event", config: { event_type: "review.done", timeout_seconds: 3600 } },
      { id: "done", kind: "end", config: { terminal_code: "done" } },
    ],
    edges: [edge("start", "success", "route"), edge("route", "wait", "hold"), edge("route", "skip", "done"), edge("hold", "received", "done"), edge("hold", "timeout", "done")],
  };

  /** Publishes the graph, then swaps its artifact for what the protocol-1 compiler produced. */
  async function publishWithProtocol1(apiKey: string) {
    const version = await publish(apiKey, waitGraph);
    const row = await env.DB.prepare("SELECT graph_json AS graphJson FROM workflow_versions WHERE id = ?1").bind(version.id).first<{ graphJson: string }>();
    const graph = JSON.parse(row!.graphJson) as { nodes: unknown[]; edges: unknown[] };
    const source = `const GRAPH = Object.freeze(${JSON.stringify({ nodes: graph.nodes, edges: graph.edges, plan: { forkJoins: {} } })});\n${KERNEL_PROTOCOL_1_SOURCE}`;
    await env.DB.prepare("UPDATE workflow_artifacts SET inline_source_text = ?2, bundle_digest = ?3, bundle_r2_key = NULL, size_bytes = ?4, kernel_protocol = 1 WHERE id = ?1")
      .bind(version.artifact.id, source, await sha256(source), source.length)
      .run();
    return version;
  }

  it("records the protocol on new artifacts", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph);
    const row = await env.DB.prepare("SELECT kernel_protocol AS protocol FROM workflow_artifacts WHERE id = ?1").bind(version.artifact.id).first<{ protocol: number }>();
    expect(row?.protocol).toBe(KERNEL_PROTOCOL);
    expect(SUPPORTED_KERNEL_PROTOCOLS).toContain(1);
  });

  it("runs a version published with protocol 1, through a wait, in autonomous and shadow mode", async () => {
    const { apiKey } = await newInstallation();
    const version = await publishWithProtocol1(apiKey);
    const run = await startRun(apiKey, version.id, { input: { wait: true } });
    await waitForWait(apiKey, run.id);
    const sent = await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "review.done", payload: { ok: true } } });
    expect(sent.status).toBe(202);
    const done = await waitForRun(apiKey, run.id);
    expect(done.state).toBe("succeeded");
    expect(done.steps.map((s: any) => s.nodeId)).toEqual(["start", "route", "hold", "done"]);
    const shadow = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "shadow", input: { wait: false } })).id);
    expect(shadow.state).toBe("succeeded");
    expect(shadow.output.terminalCode).toBe("done");
  });

  it("refuses an artifact of a protocol it does not serve with a typed error", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph);
    await env.DB.prepare("UPDATE workflow_artifacts SET kernel_protocol = 99 WHERE id = ?1").bind(version.artifact.id).run();
    const refused = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {} } });
    expect(refused.body.error.code).toBe("workflow_artifact.kernel_protocol_unsupported");
  });
});
