// Walking on (kernel protocol 4): once a wait or an action finishes, the host runs the fused group
// that follows it in the same call and batch, and the kernel continues where that group ended (the
// group's own Workflows step then never runs). Everything recorded is what one step per node
// records, and a group that throws is left to its own step, which meets the error as protocol 3 does.
import { env, introspectWorkflow } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, removePostGraph, STEP_OUTPUT, startRun, until, waitForRun, waitForWait } from "./helpers";

/** start → wait for an event → condition on its payload → an end per verdict (or timeout). */
const waitGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "await", kind: "wait_for_event", config: { event_type: "moderator.decision", timeout_seconds: 3600 } },
    {
      id: "verdict",
      kind: "condition",
      errorPort: "error",
      inputMapping: { remove: "steps.await.event.payload.remove" },
      config: { cases: [{ port: "remove", when: "node_input.remove" }], case_ports: ["remove"], default_port: "keep" },
    },
    { id: "removed", kind: "end", config: { terminal_code: "removed" }, inputMapping: { remove: "steps.await.event.payload.remove" } },
    { id: "kept", kind: "end", config: { terminal_code: "kept" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
    { id: "broken", kind: "end", config: { terminal_code: "broken" } },
  ],
  edges: [edge("start", "success", "await"), edge("await", "received", "verdict"), edge("await", "timeout", "expired"), edge("verdict", "remove", "removed"), edge("verdict", "keep", "kept"), edge("verdict", "error", "broken")],
};

async function publishAs(key: string, graph: unknown, steps: "fused" | "per_node") {
  const workflow = await api("/api/v1/workflows", { body: { name: `wf-${crypto.randomUUID()}` }, key });
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph, steps }, key });
  expect(version.status).toBe(201);
  return version.body as { id: string; artifact: { id: string } };
}

/** The capability a version's sandbox is given, driven here as its kernel would. */
function capability(version: { id: string; artifact: { id: string } }) {
  return (exports as any).WorkflowRuntimeCapability({ props: { artifactId: version.artifact.id, workflowVersionId: version.id } }) as Record<"completeWait", (input: unknown) => Promise<any>>;
}

/** A run of the version about a new report (whose category the action maps). */
async function startAboutReport(key: string, versionId: string) {
  const report = await api("/api/v1/reports", { key, body: { subject: { kind: "content", id: `post-${crypto.randomUUID().slice(0, 8)}` }, category: "scams_and_fraud", reporter: { id: "reporter-1" } } });
  expect(report.status).toBe(201);
  const run = await api("/api/v1/runs", { key, body: { workflowVersionId: versionId, authorityMode: "autonomous", input: {}, reportId: report.body.id } });
  expect(run.status).toBe(201);
  return run.body as { id: string };
}

/** A run of the version parked at its wait, with an event for that wait recorded as the events API records one (its instance is never told: the test is its kernel). */
async function parkedWithEvent(key: string, version: { id: string }, payload: unknown, start: (key: string, versionId: string) => Promise<{ id: string }> = startRun) {
  const { run, wait } = await waitForWait(key, (await start(key, version.id)).id);
  const eventId = `evt_${crypto.randomUUID().replaceAll("-", "")}`;
  await env.DB.prepare("INSERT INTO workflow_events (id, installation_id, run_id, wait_id, type, payload_json, created_at) SELECT ?1, installation_id, id, ?3, 'moderator.decision', ?4, ?5 FROM workflow_runs WHERE id = ?2")
    .bind(eventId, run.id, wait.id, JSON.stringify(payload), new Date().toISOString())
    .run();
  return { runId: run.id as string, request: { runId: run.id, nodeId: "await", authorityMode: "autonomous", eventResult: { status: "received", event: { eventId } } } };
}

/** What a run recorded, without ids and times: its steps (node, state, port), its audit trail's actions, and its row. */
async function records(runId: string) {
  const steps = await env.DB.prepare(`SELECT node_id AS nodeId, state, json_extract(${STEP_OUTPUT.json}, '$.port') AS port FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.run_id = ?1 ORDER BY node_id`).bind(runId).all();
  const events = await env.DB.prepare("SELECT action, json_extract(details_json, '$.nodeId') AS nodeId, json_extract(details_json, '$.port') AS port FROM audit_events WHERE target_id = ?1 ORDER BY seq").bind(runId).all();
  const run = await env.DB.prepare("SELECT state, current_node_id AS currentNodeId, revision, output_json AS output FROM workflow_runs WHERE id = ?1").bind(runId).first();
  return { steps: steps.results, events: events.results, run };
}

describe("the host walks on past a wait into the group that follows", () => {
  it("asked to walk, completes the wait and runs the condition and the end in the same call, and tells the kernel where it stopped", async () => {
    const { apiKey } = await newInstallation();
    const version = await publishAs(apiKey, waitGraph, "fused");
    const runtime = capability(version);
    const { runId, request } = await parkedWithEvent(apiKey, version, { remove: true });
    expect(await runtime.completeWait({ ...request, walk: true })).toEqual({ port: "received", ahead: { head: "verdict", nodeId: "removed", port: "terminal" } });
    const { steps, run } = await records(runId);
    expect(steps).toEqual([
      { nodeId: "await", state: "succeeded", port: "received" },
      { nodeId: "removed", state: "succeeded", port: "terminal" },
      { nodeId: "start", state: "succeeded", port: "success" },
      { nodeId: "verdict", state: "succeeded", port: "remove" },
    ]);
    expect(run).toMatchObject({ state: "succeeded", currentNodeId: "removed" });
    expect(JSON.parse(String(run!.output))).toMatchObject({ terminalCode: "removed", result: { remove: true } });
    // A retry of the call (its answer lost) answers from the record: the port, no walk, nothing written again.
    const before = await records(runId);
    expect(await runtime.completeWait({ ...request, walk: true }).catch((error: Error) => error.message)).toBe("runtime.run_terminal");
    expect(await records(runId)).toEqual(before);
  });

  it("not asked (a kernel of an earlier protocol), records the wait alone", async () => {
    const { apiKey } = await newInstallation();
    const version = await publishAs(apiKey, waitGraph, "fused");
    const { runId, request } = await parkedWithEvent(apiKey, version, { remove: true });
    expect(await capability(version).completeWait(request)).toEqual({ port: "received" });
    const { steps, run } = await records(runId);
    expect(steps.map((step) => step.nodeId)).toEqual(["await", "start"]);
    expect(run).toMatchObject({ state: "running", currentNodeId: "await" });
  });

  it("a group that throws is not walked into: the wait is recorded alone, and the group is left to its own step", async () => {
    const { apiKey } = await newInstallation();
    const version = await publishAs(apiKey, waitGraph, "fused");
    // A case whose value is not a boolean fails the condition.
    const { runId, request } = await parkedWithEvent(apiKey, version, { remove: 7 });
    expect(await capability(version).completeWait({ ...request, walk: true })).toEqual({ port: "received" });
    const { steps, run } = await records(runId);
    expect(steps.map((step) => step.nodeId)).toEqual(["await", "start"]);
    expect(run).toMatchObject({ state: "running", currentNodeId: "await" });
  });

  it("a run through the wait records what one step per node records, whether the group after it takes its case or its error port", async () => {
    const { apiKey } = await newInstallation();
    const fused = await publishAs(apiKey, waitGraph, "fused");
    const perNode = await publishAs(apiKey, waitGraph, "per_node");
    for (const payload of [{ remove: true }, { remove: 7 }]) {
      const ran: string[] = [];
      for (const version of [fused, perNode]) {
        const { run } = await waitForWait(apiKey, (await startRun(apiKey, version.id)).id);
        expect((await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "moderator.decision", payload } })).status).toBe(202);
        const done = await waitForRun(apiKey, run.id);
        expect(done).toMatchObject({ state: "succeeded", output: { terminalCode: payload.remove === true ? "removed" : "broken" } });
        ran.push(run.id);
      }
      const [a, b] = [await records(ran[0]!), await records(ran[1]!)];
      expect(a).toEqual(b);
    }
  });
});

describe("the host prepares the wait that follows a group", () => {
  it("the start's group prepares the wait in its own call: the wait's prepare step never runs, and the run records what one step per node records", async () => {
    const { apiKey } = await newInstallation();
    const graph = { ...waitGraph, nodes: waitGraph.nodes.map((node) => (node.id === "await" ? { ...node, config: { ...node.config, timeout_seconds: 1 } } : node)) };
    const fused = await publishAs(apiKey, graph, "fused");
    const perNode = await publishAs(apiKey, graph, "per_node");
    // The host folds what it walks on to only once this isolate has the version's graph (its first call reads it).
    expect((await waitForRun(apiKey, (await startRun(apiKey, fused.id)).id)).state).toBe("succeeded");
    const ran: string[] = [];
    for (const version of [fused, perNode]) {
      await using introspector = await introspectWorkflow(env.WORKFLOWS);
      await introspector.modifyAll(async (m) => {
        await m.disableRetryDelays();
        // Only the fused version's kernel is told the wait was prepared; the per-node one prepares it itself.
        if (version === fused) await m.mockStepError({ name: "await:main:1:prepare" }, new Error("retryable:upstream_unavailable"), 3);
      });
      const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
      expect(done).toMatchObject({ state: "succeeded", output: { terminalCode: "expired" } });
      ran.push(done.id);
    }
    const [a, b] = [await records(ran[0]!), await records(ran[1]!)];
    expect(a).toEqual(b);
    expect(a.events.map((event) => event.action)).toContain("workflow.wait_prepared");
  });
});

/** start → wait for an event → condition → an action (delivered by the test's receiver) → an end per port. */
const reviewThenAct = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "await", kind: "wait_for_event", config: { event_type: "moderator.decision", timeout_seconds: 3600 } },
    {
      id: "verdict",
      kind: "condition",
      inputMapping: { remove: "steps.await.event.payload.remove" },
      config: { cases: [{ port: "remove", when: "node_input.remove" }], case_ports: ["remove"], default_port: "keep" },
    },
    { id: "act", kind: "action", errorPort: "failed", config: { action_type: "remove_post" }, inputMapping: { postId: "steps.await.event.payload.postId", category: "report.category" } },
    { id: "removed", kind: "end", config: { terminal_code: "removed" }, inputMapping: { verdict: 'steps["verdict"].port' } },
    { id: "kept", kind: "end", config: { terminal_code: "kept" } },
    { id: "other", kind: "end", config: { terminal_code: "other" } },
  ],
  edges: [
    edge("start", "success", "await"),
    edge("await", "received", "verdict"),
    edge("await", "timeout", "other"),
    edge("verdict", "remove", "act"),
    edge("verdict", "keep", "kept"),
    edge("act", "applied", "removed"),
    edge("act", "rejected", "other"),
    edge("act", "expired", "other"),
    edge("act", "failed", "other"),
  ],
};

async function actionDesk(path: string) {
  const { apiKey } = await newInstallation();
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } })).status).toBe(201);
  return apiKey;
}

describe("the host walks on past a wait to the action after the group", () => {
  it("completes the wait, runs the condition, prepares and delivers the action and ends the run in the wait's call", async () => {
    const apiKey = await actionDesk("/ok/walk-on-action");
    const version = await publishAs(apiKey, reviewThenAct, "fused");
    const { runId, request } = await parkedWithEvent(apiKey, version, { remove: true, postId: "p9" }, startAboutReport);
    const answer = await capability(version).completeWait({ ...request, walk: true });
    expect(answer).toMatchObject({
      port: "received",
      ahead: { head: "verdict", nodeId: "verdict", port: "remove", onward: { head: "act", nodeId: "act", action: { port: "applied", ahead: { head: "removed", nodeId: "removed", port: "terminal" } } } },
    });
    const { steps, run } = await records(runId);
    expect(steps.map((step) => `${step.nodeId}:${step.state}:${step.port}`)).toEqual(["act:succeeded:applied", "await:succeeded:received", "removed:succeeded:terminal", "start:succeeded:success", "verdict:succeeded:remove"]);
    expect(run).toMatchObject({ state: "succeeded", currentNodeId: "removed" });
    const proposal = (await api("/api/v1/action-proposals", { key: apiKey })).body.items[0];
    expect(proposal).toMatchObject({ state: "applied", params: { postId: "p9", category: "scams_and_fraud" } });
  });

  it("a run through the wait and the action records what one step per node records", async () => {
    const apiKey = await actionDesk("/ok/walk-on-action-records");
    const fused = await publishAs(apiKey, reviewThenAct, "fused");
    const perNode = await publishAs(apiKey, reviewThenAct, "per_node");
    // The first run of the fused version puts its graph in this isolate's cache (the host walks on only with it).
    for (const payload of [
      { remove: true, postId: "warm" },
      { remove: true, postId: "p1" },
      { remove: false, postId: "p2" },
    ]) {
      const ran: string[] = [];
      for (const version of [fused, perNode]) {
        const { run } = await waitForWait(apiKey, (await startAboutReport(apiKey, version.id)).id);
        expect((await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "moderator.decision", payload } })).status).toBe(202);
        const done = await waitForRun(apiKey, run.id);
        expect(done).toMatchObject({ state: "succeeded", output: { terminalCode: payload.remove ? "removed" : "kept" } });
        ran.push(run.id);
      }
      const [a, b] = [await records(ran[0]!), await records(ran[1]!)];
      expect(a).toEqual(b);
    }
  });
});

describe("walking on never takes another node's action type", () => {
  const action = (id: string, type: string) => ({ id, kind: "action", errorPort: "failed", config: { action_type: type }, inputMapping: { postId: "steps.await.event.payload.postId" } });
  const pass = (id: string) => ({ id, kind: "condition", config: { cases: [{ port: "next", when: "true" }], case_ports: ["next"], default_port: "other" } });
  const end = (id: string) => ({ id, kind: "end", config: { terminal_code: id } });
  /** start → a wait for an event → `middle` (with `edges`, in their order) → the ends "done" and "other"; each action's other ports lead to "other". */
  const afterWait = (middle: object[], edges: Array<ReturnType<typeof edge>>, actions: string[]) => ({
    schemaVersion: 1,
    nodes: [{ id: "start", kind: "start" }, { id: "await", kind: "wait_for_event", config: { event_type: "moderator.decision", timeout_seconds: 3600 } }, ...middle, end("done"), end("other")],
    edges: [edge("start", "success", "await"), ...edges, ...actions.flatMap((id) => ["rejected", "expired", "failed"].map((port) => edge(id, port, "other")))],
  });

  async function desk(path: string) {
    const apiKey = await actionDesk(path);
    const hook = (await api("/api/v1/webhook-endpoints", { key: apiKey })).body.items[0];
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "notify_user", name: "Notify user", endpointId: hook.id, reversible: false, requiresApproval: true } })).status).toBe(201);
    return apiKey;
  }
  const proposals = async (key: string, runId: string) =>
    ((await api("/api/v1/action-proposals", { key })).body.items as Array<{ runId: string; nodeId: string; actionTypeKey?: string; actionType?: string; state: string }>)
      .filter((item) => item.runId === runId)
      .map((item) => ({ nodeId: item.nodeId, type: item.actionTypeKey ?? item.actionType, state: item.state }))
      .sort((a, b) => a.nodeId.localeCompare(b.nodeId));

  it("two groups after a wait lead to actions of different types: the one walked to is prepared with its own type", async () => {
    const apiKey = await desk("/ok/walk-on-two-types");
    // The timeout's group comes first: what it would read is folded first.
    const graph = afterWait(
      [pass("late"), action("notify", "notify_user"), pass("ok"), action("act", "remove_post")],
      [
        edge("await", "timeout", "late"),
        edge("late", "next", "notify"),
        edge("late", "other", "other"),
        edge("notify", "applied", "done"),
        edge("await", "received", "ok"),
        edge("ok", "next", "act"),
        edge("ok", "other", "other"),
        edge("act", "applied", "done"),
      ],
      ["notify", "act"],
    );
    const version = await publishAs(apiKey, graph, "fused");
    const { runId, request } = await parkedWithEvent(apiKey, version, { postId: "p5" }, startAboutReport);
    const runtime = capability(version) as unknown as Record<"completeWait" | "prepareAction", (input: unknown) => Promise<any>>;
    const answer = await runtime.completeWait({ ...request, walk: true });
    // The type folded was the other group's action's: the host ran the group and left the action to the kernel.
    expect(answer.ahead).toEqual({ head: "ok", nodeId: "ok", port: "next" });
    expect(await proposals(apiKey, runId)).toEqual([]);
    // As the kernel then does: the action prepared with its own type, delivered, and the run ended.
    expect(await runtime.prepareAction({ runId, nodeId: "act", nodeKind: "action", authorityMode: "autonomous", walk: true })).toMatchObject({ port: "applied" });
    expect(await proposals(apiKey, runId)).toEqual([{ nodeId: "act", type: "remove_post", state: "applied" }]);
  });

  it("an action after the action walked to is left to the kernel, with its own type and its approval", async () => {
    const apiKey = await desk("/ok/walk-on-chain");
    const graph = afterWait(
      [pass("ok"), action("act", "remove_post"), pass("then"), action("notify", "notify_user")],
      [
        edge("await", "timeout", "other"),
        edge("await", "received", "ok"),
        edge("ok", "next", "act"),
        edge("ok", "other", "other"),
        edge("act", "applied", "then"),
        edge("then", "next", "notify"),
        edge("then", "other", "other"),
        edge("notify", "applied", "done"),
      ],
      ["act", "notify"],
    );
    const version = await publishAs(apiKey, graph, "fused");
    const { runId, request } = await parkedWithEvent(apiKey, version, { postId: "p6" }, startAboutReport);
    const answer = await capability(version).completeWait({ ...request, walk: true });
    // The walk ends after the action's group: nothing is prepared beyond it.
    expect(answer.ahead.onward.action.ahead).toEqual({ head: "then", nodeId: "then", port: "next" });
    expect(await proposals(apiKey, runId)).toEqual([{ nodeId: "act", type: "remove_post", state: "applied" }]);
  });
});

describe("an assisted run walks on to its proposal", () => {
  it("the action after the wait's group waits for approval as prepareAction leaves it, and the run records what one step per node records once approved", async () => {
    const apiKey = await actionDesk("/ok/walk-on-assisted");
    const fused = await publishAs(apiKey, reviewThenAct, "fused");
    const perNode = await publishAs(apiKey, reviewThenAct, "per_node");
    const startAssisted = async (key: string, versionId: string) => {
      const report = await api("/api/v1/reports", { key, body: { subject: { kind: "content", id: `post-${crypto.randomUUID().slice(0, 8)}` }, category: "scams_and_fraud", reporter: { id: "reporter-1" } } });
      return (await api("/api/v1/runs", { key, body: { workflowVersionId: versionId, authorityMode: "assisted", input: {}, reportId: report.body.id } })).body as { id: string };
    };
    const ran: string[] = [];
    for (const version of [fused, fused, perNode]) {
      const { run } = await waitForWait(apiKey, (await startAssisted(apiKey, version.id)).id);
      expect((await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "moderator.decision", payload: { remove: true, postId: "p3" } } })).status).toBe(202);
      // The run parks at the action, its proposal waiting for a person.
      let proposal: any;
      for (let tries = 0; !proposal && tries < 200; tries++) {
        proposal = (await api("/api/v1/action-proposals", { key: apiKey })).body.items.find((item: any) => item.runId === run.id && item.state === "approval_required");
        if (!proposal) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(proposal).toBeDefined();
      expect((await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body).toMatchObject({ state: "waiting", currentNodeId: "act" });
      expect((await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod", reason: "clear" } })).status).toBe(200);
      expect(await waitForRun(apiKey, run.id)).toMatchObject({ state: "succeeded", output: { terminalCode: "removed" } });
      ran.push(run.id);
    }
    // The first run of the fused version put its graph in this isolate's cache; the second walked on.
    const [a, b] = [await records(ran[1]!), await records(ran[2]!)];
    expect(a).toEqual(b);
  });
});

describe("the host walks on past an action delivered at once", () => {
  it("records the end in the action's call: the end's fused step never runs", async () => {
    const { apiKey } = await newInstallation();
    const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: "https://hooks.product.test/ok/walk-on", retryBaseSeconds: 0, maxAttempts: 5 } });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: "/ok/walk-on", secret: hook.body.secret }) });
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } })).status).toBe(201);
    const version = await publishAs(apiKey, removePostGraph, "fused");
    await using introspector = await introspectWorkflow(env.WORKFLOWS);
    await introspector.modifyAll(async (m) => {
      await m.disableRetryDelays();
      await m.mockStepError({ name: "applied:main:1:fused" }, new Error("retryable:upstream_unavailable"), 3);
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId: "p1" } })).id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("applied");
    const { steps, events } = await records(done.id);
    expect(steps).toEqual([
      { nodeId: "applied", state: "succeeded", port: "terminal" },
      { nodeId: "remove", state: "succeeded", port: "applied" },
      { nodeId: "start", state: "succeeded", port: "success" },
    ]);
    expect(events.filter((event) => event.action === "workflow.step_succeeded").map((event) => event.nodeId)).toEqual(["start", "remove", "applied"]);
  });
});

/** start → an action (a person approves it in assisted mode) → a wait the run parks at → end. */
const actThenHold = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "act", kind: "action", errorPort: "failed", config: { action_type: "remove_post" }, inputMapping: { postId: "input.postId" } },
    { id: "hold", kind: "wait_for_event", config: { event_type: "moderator.decision", timeout_seconds: 3600 } },
    { id: "done", kind: "end", config: { terminal_code: "done" } },
    { id: "other", kind: "end", config: { terminal_code: "other" } },
  ],
  edges: [
    edge("start", "success", "act"),
    edge("act", "applied", "hold"),
    edge("act", "rejected", "other"),
    edge("act", "expired", "other"),
    edge("act", "failed", "other"),
    edge("hold", "received", "done"),
    edge("hold", "timeout", "other"),
  ],
};

describe("a kernel's completeAction repeated after its answer was lost", () => {
  it("is answered with the port the step recorded, and writes nothing again, whether or not it asks to walk on", async () => {
    const apiKey = await actionDesk("/ok/walk-on-repeat");
    for (const steps of ["fused", "per_node"] as const) {
      const version = await publishAs(apiKey, actThenHold, steps);
      const started = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "assisted", input: { postId: "p9" } } });
      expect(started.status).toBe(201);
      const runId = started.body.id as string;
      const proposal = await until(async () => (await api("/api/v1/action-proposals", { key: apiKey })).body.items.find((item: any) => item.runId === runId && item.state === "approval_required"), "the proposal");
      expect((await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod", reason: "clear" } })).status).toBe(200);
      // The kernel's own completeAction recorded the action, and the run went on to park at the wait.
      const { run } = await waitForWait(apiKey, runId);
      expect(run).toMatchObject({ state: "waiting", currentNodeId: "hold" });
      const before = await records(runId);
      expect(before.steps).toContainEqual({ nodeId: "act", state: "succeeded", port: "applied" });
      const runtime = capability(version) as unknown as Record<"completeAction", (input: unknown) => Promise<any>>;
      const repeat = { runId, nodeId: "act", nodeKind: "action", authorityMode: "assisted", proposalId: proposal.id, eventResult: { status: "received", event: { proposalId: proposal.id } } };
      for (const request of [repeat, { ...repeat, walk: true }]) expect(await runtime.completeAction(request)).toMatchObject({ port: "applied" });
      expect(await records(runId)).toEqual(before);
    }
  });
});
