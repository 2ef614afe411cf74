// Retries, error ports, repair_required, unbuilt executors and authority modes.
import { env, introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

const retryGraph = (retries: number) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", errorPort: "error", timeoutPolicy: { retries }, config: { cases: [], case_ports: [], default_port: "ok" } },
    { id: "done", kind: "end", config: { terminal_code: "ok" } },
    { id: "failed", kind: "end", config: { terminal_code: "failed" } },
  ],
  edges: [edge("start", "success", "route"), edge("route", "ok", "done"), edge("route", "error", "failed")],
});

describe("retries", () => {
  it("retries a transiently failing step up to timeoutPolicy.retries, then succeeds", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, retryGraph(2));
    await using introspector = await introspectWorkflow(env.WORKFLOWS);
    await introspector.modifyAll(async (m) => {
      await m.disableRetryDelays();
      await m.mockStepError({ name: "route:main:1" }, new Error("connection reset"), 2);
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("ok");
  });

  it("after the last retry goes to the node's error port with the error's code", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, retryGraph(1));
    await using introspector = await introspectWorkflow(env.WORKFLOWS);
    await introspector.modifyAll(async (m) => {
      await m.disableRetryDelays();
      await m.mockStepError({ name: "route:main:1" }, new Error("retryable:upstream_unavailable"), 2);
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
    expect(done.output.terminalCode).toBe("failed");
    expect(done.steps.find((s: any) => s.nodeId === "route")).toMatchObject({ state: "failed", errorCode: "upstream_unavailable", output: { port: "error", exhausted: true } });
  });
});

describe("repair_required", () => {
  it("a node that fails without an error port parks the run in repair_required", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "route", kind: "condition", timeoutPolicy: { retries: 0 }, config: { cases: [{ port: "x", when: "input.missing.deeper == 1" }], case_ports: ["x"], default_port: "y" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "route"), edge("route", "x", "done"), edge("route", "y", "done")],
    };
    const version = await publish(apiKey, graph);
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
    expect(done.state).toBe("repair_required");
    expect(done.error.code).toBe("expression.failed");
    expect(done.steps.find((s: any) => s.nodeId === "route")).toMatchObject({ state: "failed", errorCode: "expression.failed" });
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE target_id = ? AND action = 'workflow.run_repair_required'").bind(done.id).first<{ n: number }>();
    expect(audit?.n).toBe(1);
  });
});

const effectsGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: "default", response_schema: { type: "object" } } },
    { id: "notify", kind: "send_message", config: { template: "We removed it.", recipient: "reporter" } },
    { id: "record", kind: "decision", config: { outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Removed as spam." } },
    { id: "escalate", kind: "handoff", config: { queue_id: "legal" } },
    { id: "spawn", kind: "start_linked_workflow", config: { workflow_version_id: "LINKED" } },
    { id: "enforce", kind: "action", errorPort: "error", config: { action_type: "remove_content" } },
    { id: "done", kind: "end", config: { terminal_code: "done" } },
    { id: "refused", kind: "end", config: { terminal_code: "refused" } },
  ],
  edges: [
    edge("start", "success", "review"),
    edge("review", "completed", "notify"),
    edge("review", "timeout", "done"),
    edge("notify", "sent", "record"),
    edge("record", "recorded", "escalate"),
    edge("escalate", "handed_off", "spawn"),
    edge("spawn", "started", "enforce"),
    edge("enforce", "applied", "done"),
    edge("enforce", "rejected", "done"),
    edge("enforce", "expired", "done"),
    edge("enforce", "error", "refused"),
  ],
};

/** What the effects graph names, created first: publishing checks that every reference exists. */
async function effectsInstallation(): Promise<{ apiKey: string; graph: typeof effectsGraph }> {
  const { apiKey } = await newInstallation();
  for (const name of ["default", "legal"]) expect((await api("/api/v1/queues", { key: apiKey, body: { name, slaSeconds: 3600 } })).status).toBe(201);
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: "https://hooks.product.test/actions" } });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_content", name: "Remove content", endpointId: hook.body.id } })).status).toBe(201);
  const linked = await publish(apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "done")],
  });
  const graph = JSON.parse(JSON.stringify(effectsGraph).replace('"LINKED"', JSON.stringify(linked.id))) as typeof effectsGraph;
  return { apiKey, graph };
}

describe("authority modes", () => {
  it("shadow simulates every effect kind and nothing leaves the system", async () => {
    const { apiKey, graph } = await effectsInstallation();
    const version = await publish(apiKey, graph);
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "shadow" })).id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("done");
    for (const nodeId of ["review", "notify", "record", "escalate", "spawn", "enforce"]) {
      expect(done.steps.find((s: any) => s.nodeId === nodeId).output).toMatchObject({ simulated: true, effectSuppressed: true });
    }
    const tasks = await env.DB.prepare("SELECT COUNT(*) AS n FROM human_tasks WHERE run_id = ?").bind(done.id).first<{ n: number }>();
    const children = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs WHERE parent_run_id = ?").bind(done.id).first<{ n: number }>();
    const waits = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_waits WHERE run_id = ?").bind(done.id).first<{ n: number }>();
    expect([tasks?.n, children?.n, waits?.n]).toEqual([0, 0, 0]);
  });

  it("off refuses an action with action.authority_insufficient", async () => {
    const { apiKey } = await effectsInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "enforce", kind: "action", errorPort: "error", config: { action_type: "remove_content" } },
        { id: "done", kind: "end" },
        { id: "refused", kind: "end", config: { terminal_code: "refused" } },
      ],
      edges: [edge("start", "success", "enforce"), edge("enforce", "applied", "done"), edge("enforce", "rejected", "done"), edge("enforce", "expired", "done"), edge("enforce", "error", "refused")],
    };
    const version = await publish(apiKey, graph);
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "off" })).id);
    expect(done.output.terminalCode).toBe("refused");
    expect(done.steps.find((s: any) => s.nodeId === "enforce").errorCode).toBe("action.authority_insufficient");
  });

  it("an enrichment naming no known component fails with a typed error, never a fake success", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "lookup", kind: "enrichment", config: { component: "no_such_component" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "lookup"), edge("lookup", "success", "done")],
    };
    const version = await publish(apiKey, graph);
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "autonomous" })).id);
    expect(done.state).toBe("repair_required");
    expect(done.error.code).toBe("component.unknown");
    expect(done.steps.find((s: any) => s.nodeId === "lookup").state).toBe("failed");
  });
});
