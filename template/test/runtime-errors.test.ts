// Retries, error ports, repair_required, unbuilt executors and authority modes.
import { env, introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, receiverLog, startRun, until, waitForRun } from "./helpers";

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
async function effectsInstallation(hookPath = "/actions"): Promise<{ apiKey: string; graph: typeof effectsGraph; installationId: string }> {
  const { apiKey, id: installationId } = await newInstallation();
  for (const name of ["default", "legal"]) expect((await api("/api/v1/queues", { key: apiKey, body: { name, slaSeconds: 3600 } })).status).toBe(201);
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${hookPath}` } });
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
  return { apiKey, graph, installationId };
}

describe("authority modes", () => {
  it("shadow simulates every effect kind: the receiver gets no delivery, and no message, decision, handoff or proposal is recorded", async () => {
    const hookPath = `/ok/shadow-${crypto.randomUUID()}`;
    const { apiKey, graph, installationId } = await effectsInstallation(hookPath);
    const version = await publish(apiKey, graph);
    // A report with a reporter and a subject owner: every effect would have someone to reach.
    const report = await api("/api/v1/reports", {
      key: apiKey,
      body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}`, ownerId: "owner-7" }, category: "scams_and_fraud", reporter: { id: "reporter-7", contact: "reporter-7@example.org" } },
    });
    expect(report.status).toBe(201);
    const count = async (table: string) => (await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE installation_id = ?1`).bind(installationId).first<{ n: number }>())!.n;
    const recorded = async () => ({
      deliveries: await count("webhook_deliveries"),
      messages: await count("messages"),
      decisions: await count("decisions"),
      handoffs: await count("handoffs"),
      proposals: await count("action_proposals"),
      statements: await count("tdb_submissions"),
      tasks: await count("human_tasks"),
      runs: await count("workflow_runs"),
      waits: (await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_waits w JOIN workflow_runs r ON r.id = w.run_id WHERE r.installation_id = ?1").bind(installationId).first<{ n: number }>())!.n,
    });
    // Intake itself records the notice's receipt (a message to the reporter): the run must add nothing to it.
    const before = await recorded();
    expect(before).toMatchObject({ deliveries: 0, decisions: 0, handoffs: 0, proposals: 0, statements: 0, tasks: 0, runs: 0, waits: 0 });
    const started = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "shadow", reportId: report.body.id } });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const done = await waitForRun(apiKey, started.body.id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("done");
    for (const nodeId of ["review", "notify", "record", "escalate", "spawn", "enforce"]) {
      expect(done.steps.find((s: any) => s.nodeId === nodeId).output).toMatchObject({ simulated: true, effectSuppressed: true });
    }
    // The run itself is the one workflow_runs row added; no child run, wait, task, message, decision or delivery.
    expect(await recorded()).toEqual({ ...before, runs: 1 });
    expect(await receiverLog(hookPath)).toEqual([]);

    // The same counters and the receiver see a real effect: the action alone, run autonomous on the same report, is delivered.
    const act = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [{ id: "start", kind: "start" }, { ...graph.nodes.find((n) => n.id === "enforce")! }, { id: "done", kind: "end" }],
      edges: [edge("start", "success", "enforce"), edge("enforce", "applied", "done"), edge("enforce", "rejected", "done"), edge("enforce", "expired", "done"), edge("enforce", "error", "done")],
    });
    const real = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: act.id, authorityMode: "autonomous", reportId: report.body.id } });
    expect(real.status, JSON.stringify(real.body)).toBe(201);
    const arrived = await until(async () => ((await receiverLog(hookPath)).length > 0 ? receiverLog(hookPath) : null), "a delivery at the receiver");
    expect(arrived).toHaveLength(1);
    expect((await recorded()).deliveries).toBe(1);
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
