// Fused steps: consecutive nodes that neither wait nor have effects run as one Workflows
// step and one capability call, with exactly the records of one step per node.
import { env, introspectWorkflow } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { auditEventId } from "../src/audit/stored";
import { authorizedRunFolded, GROUP_FOLD_MAX_BYTES } from "../src/workflows/runtime-authorize";
import { fusedWriteGuard } from "../src/workflows/runtime-group-records";
import { outputRowsSql } from "../src/workflows/step-output";
import { api, edge, newInstallation, startRun, waitForRun, waitForWait, STEP_OUTPUT } from "./helpers";

const condition = (id: string, when: string, extra: Record<string, unknown> = {}) => ({ id, kind: "condition", ...extra, config: { cases: [{ port: "next", when }], case_ports: ["next"], default_port: "other" } });

/** start → keyword bank → condition → fork (two conditions) → join → condition reading a branch → end. */
const chainGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "words", kind: "enrichment", config: { component: "keyword_bank", keywords: ["free crypto"] }, inputMapping: { text: "input.text" } },
    condition("c1", 'steps["words"].port == "success" && input.x == 1'),
    condition("b1", "input.x > 0"),
    condition("b2", 'steps["c1"].port == "next"'),
    { id: "j", kind: "join" },
    condition("c3", 'steps["b1"].port == "next" && steps["b2"].port == "next"'),
    { id: "end", kind: "end", config: { terminal_code: "done" }, inputMapping: { verdict: 'steps["c3"].port' } },
  ],
  edges: [
    edge("start", "success", "words"),
    edge("words", "success", "c1"),
    edge("c1", "next", "b1"),
    edge("c1", "next", "b2"),
    edge("c1", "other", "end"),
    edge("b1", "next", "j"),
    edge("b1", "other", "j"),
    edge("b2", "next", "j"),
    edge("b2", "other", "j"),
    edge("j", "success", "c3"),
    edge("c3", "next", "end"),
    edge("c3", "other", "end"),
  ],
};

/** c2's case is not a boolean for a string `x`: the node fails inside the group and takes its error port. */
const errorGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    condition("c1", "true"),
    condition("c2", "input.x", { errorPort: "error" }),
    condition("c3", "true"),
    { id: "done", kind: "end" },
    { id: "failed", kind: "end", config: { terminal_code: "failed" }, inputMapping: { code: 'steps["c2"].errorCode' } },
  ],
  edges: [edge("start", "success", "c1"), edge("c1", "next", "c2"), edge("c1", "other", "c2"), edge("c2", "next", "c3"), edge("c2", "other", "c3"), edge("c2", "error", "failed"), edge("c3", "next", "done"), edge("c3", "other", "done")],
};

/** Fused nodes around a wait: start + c1 fuse, the wait keeps its steps, c2 + c3 + end fuse. */
const mixedGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    condition("c1", "input.x == 1"),
    { id: "await", kind: "wait_for_event", config: { event_type: "review.done", timeout_seconds: 3600 } },
    condition("c2", 'event.payload.verdict == "remove"'),
    condition("c3", 'steps["c2"].port == "next"'),
    { id: "end", kind: "end" },
  ],
  edges: [
    edge("start", "success", "c1"),
    edge("c1", "next", "await"),
    edge("c1", "other", "await"),
    edge("await", "received", "c2"),
    edge("await", "timeout", "end"),
    edge("c2", "next", "c3"),
    edge("c2", "other", "c3"),
    edge("c3", "next", "end"),
    edge("c3", "other", "end"),
  ],
};

async function publishAs(key: string, graph: unknown, steps: "fused" | "per_node") {
  const workflow = await api("/api/v1/workflows", { body: { name: `wf-${crypto.randomUUID()}` }, key });
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph, steps }, key });
  expect(version.status).toBe(201);
  return version.body as { id: string; artifact: { id: string } };
}

/** Whether the artifact's kernel graph marks any node to fuse (what the compiler embedded). */
async function fusedNodes(artifactId: string): Promise<string[]> {
  const row = await env.DB.prepare("SELECT inline_source_text AS source FROM workflow_artifacts WHERE id = ?1").bind(artifactId).first<{ source: string }>();
  const graph = JSON.parse(row!.source.slice(row!.source.indexOf("(") + 1, row!.source.indexOf(");\n"))) as { nodes: Array<{ id: string; fuse?: boolean }> };
  return graph.nodes.filter((node) => node.fuse).map((node) => node.id);
}

/** Everything a run recorded, without ids and times (run ids inside keys are replaced). */
async function recordsOf(runId: string) {
  const all = async (sql: string) => (await env.DB.prepare(sql).bind(runId).all<Record<string, unknown>>()).results;
  const steps = await all(`SELECT node_id, node_type, branch_key, occurrence, attempt, state, output_digest, error_code, error_message, error_details_json,
      started_at IS NOT NULL AS started, finished_at IS NOT NULL AS finished, waiting_at IS NOT NULL AS waited
    FROM workflow_step_runs WHERE run_id = ?1 ORDER BY node_id, branch_key`);
  const outputs = await all(`SELECT s.node_id, s.branch_key, o.inline_json, o.digest, o.size_bytes, o.data_classification_json, o.sealed_json IS NULL AS open
    FROM (${outputRowsSql("s.run_id = ?1")}) o JOIN workflow_step_runs s ON s.id = o.step_run_id ORDER BY s.node_id, s.branch_key`);
  // An event stores the digest of its idempotency key as its id (src/audit/stored.ts): the key is
  // found again among the ones a run's records can have.
  const installationId = String((await all(`SELECT installation_id FROM workflow_runs WHERE id = ?1`))[0]!.installation_id);
  const candidates = new Map<string, string>();
  const candidate = (key: string) => candidates.set(auditEventId(installationId, key), key.replaceAll(runId, "RUN"));
  for (const step of steps) {
    const stepId = `${runId}:${String(step.node_id)}:${String(step.branch_key) || "main"}:1`;
    for (const suffix of ["succeeded", "failed", "timed_out", "delay_scheduled", "repair_required"]) candidate(`step:${stepId}:${suffix}`);
    candidate(`run:${runId}:content_read:${String(step.node_id)}`);
  }
  for (const suffix of ["created", "terminated", "failed", "completed"]) candidate(`run:${runId}:${suffix}`);
  const audit = (
    await all(`SELECT action, actor_type, actor_id, target_type, id, details_json
    FROM audit_events WHERE target_id = ?1 OR details_json LIKE '%' || ?1 || '%'`)
  )
    .map(({ id, ...event }) => ({ ...event, key: candidates.get(String(id)) ?? `?:${String(event.action)}` }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const run = await all(`SELECT state, current_node_id, revision, output_json, error_code, started_at IS NOT NULL AS started, finished_at IS NOT NULL AS finished FROM workflow_runs WHERE id = ?1`);
  // The waits' own ids carry the step id; their shape is what matters.
  const waits = await all(`SELECT wait_type, event_type, state FROM workflow_waits WHERE run_id = ?1 ORDER BY event_type`);
  // Ids and times that differ between any two runs (version, workflow name, event, wait deadline).
  const anonymous = (rows: Array<Record<string, unknown>>) =>
    JSON.parse(
      JSON.stringify(rows)
        .replaceAll(runId, "RUN")
        .replace(/wfv_[0-9A-Za-z]+/gu, "WFV")
        .replace(/wf-[0-9a-f-]{36}/gu, "WF")
        .replace(/evt_[0-9A-Za-z]+/gu, "EVT")
        .replace(/rpt_[0-9A-Za-z]+/gu, "RPT")
        .replace(/\\"latencyMs\\":\d+/gu, '\\"latencyMs\\":0')
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/gu, "TIME"),
    ) as Array<Record<string, unknown>>;
  return { steps: anonymous(steps), outputs: anonymous(outputs), audit: anonymous(audit), run: anonymous(run), waits };
}

/** The records with one node's output digest and size masked (an output holding per-run values). */
function withoutDigestOf(records: Awaited<ReturnType<typeof recordsOf>>, nodeId: string) {
  const digest = String(records.outputs.find((row) => row.node_id === nodeId)!.digest);
  const masked = JSON.parse(JSON.stringify(records).replaceAll(digest, "MASKED_DIGEST")) as typeof records;
  for (const row of masked.outputs) if (row.node_id === nodeId) row.size_bytes = null;
  return masked;
}

function capability(version: { id: string; artifact: { id: string } }) {
  return (exports as any).WorkflowRuntimeCapability({ props: { artifactId: version.artifact.id, workflowVersionId: version.id } }) as Record<"executeNode" | "executeFused" | "failFused", (input: unknown) => Promise<any>>;
}

async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("expected the call to be refused");
}

describe("fused steps", () => {
  it("a fused chain records exactly the steps, outputs, digests and audit events of the unfused one", async () => {
    const { apiKey } = await newInstallation();
    const fused = await publishAs(apiKey, chainGraph, "fused");
    const perNode = await publishAs(apiKey, chainGraph, "per_node");
    expect(await fusedNodes(fused.artifact.id)).toEqual(chainGraph.nodes.map((node) => node.id));
    expect(await fusedNodes(perNode.artifact.id)).toEqual([]);
    const input = { x: 1, text: "get free crypto now" };
    const a = await waitForRun(apiKey, (await startRun(apiKey, fused.id, { input })).id);
    const b = await waitForRun(apiKey, (await startRun(apiKey, perNode.id, { input })).id);
    expect(a.state).toBe("succeeded");
    expect(b.state).toBe("succeeded");
    const fusedRecords = await recordsOf(a.id);
    const perNodeRecords = await recordsOf(b.id);
    // Every node on every branch: start, words, c1, b1 and b2 on their branches, j, c3, end.
    expect(fusedRecords.steps.map((step) => `${step.node_id}@${step.branch_key}`)).toEqual(["b1@b1", "b2@b2", "c1@", "c3@", "end@", "j@", "start@", "words@"]);
    expect(fusedRecords.audit.filter((event) => event.action === "workflow.step_succeeded")).toHaveLength(8);
    // Each step's event names the port it left by, as its output does (the way the run went, in the signed trail).
    const outputPort = new Map(fusedRecords.outputs.map((row) => [String(row.node_id), JSON.parse(String(row.inline_json ?? "{}")).port]));
    for (const event of fusedRecords.audit.filter((e) => e.action === "workflow.step_succeeded")) {
      const details = JSON.parse(String(event.details_json)) as { nodeId: string; kind: string; branchKey: string; port?: string; outputDigest: string };
      expect(details.port, details.nodeId).toBe(outputPort.get(details.nodeId));
      expect(typeof details.port).toBe("string");
      // The shape step events have always had (clients read it): node, kind, branch, port, digest.
      expect(Object.keys(details).sort()).toEqual(["branchKey", "kind", "nodeId", "outputDigest", "port"]);
    }
    // The keyword bank's output holds its latency, so its digest may differ; every other value matches.
    const [fusedRows, perNodeRows] = [withoutDigestOf(fusedRecords, "words"), withoutDigestOf(perNodeRecords, "words")];
    for (const part of ["steps", "outputs", "audit", "run", "waits"] as const) {
      expect(fusedRows[part].length, part).toBe(perNodeRows[part].length);
      for (const [index, row] of (fusedRows[part] as unknown[]).entries()) expect(row, `${part}[${index}]`).toEqual(perNodeRows[part][index]);
    }
    expect(JSON.parse(String(fusedRecords.run[0]!.output_json))).toEqual({ port: "terminal", terminalCode: "done", result: { verdict: "next" } });
  });

  it("runs a fused group as one Workflows step named after its head: a fault injected there fails the group before any of its nodes records; a per-node step name is never run", async () => {
    const { apiKey } = await newInstallation();
    const fused = await publishAs(apiKey, chainGraph, "fused");
    const perNode = await publishAs(apiKey, chainGraph, "per_node");
    const input = { x: 1, text: "get free crypto now" };
    const runWith = async (versionId: string, stepName: string) => {
      await using introspector = await introspectWorkflow(env.WORKFLOWS);
      await introspector.modifyAll(async (m) => {
        await m.disableRetryDelays();
        await m.mockStepError({ name: stepName }, new Error("retryable:upstream_unavailable"), 3);
      });
      // Awaited inside the block: the introspector must outlive the run it shapes.
      const run = await waitForRun(apiKey, (await startRun(apiKey, versionId, { input })).id);
      return run;
    };
    const recorded = async (runId: string) => (await env.DB.prepare("SELECT node_id AS nodeId, state FROM workflow_step_runs WHERE run_id = ?1 ORDER BY node_id").bind(runId).all<{ nodeId: string; state: string }>()).results;

    // After the fork, j, c3 and end are one group, the step "j:main:1:fused": failing it fails the group at its head, and none of its nodes ran.
    const failedGroup = await runWith(fused.id, "j:main:1:fused");
    expect(failedGroup.state).toBe("repair_required");
    expect(failedGroup.error.code).toBe("upstream_unavailable");
    expect((await recorded(failedGroup.id)).filter((row) => row.state === "succeeded").map((row) => row.nodeId)).toEqual(["b1", "b2", "c1", "start", "words"]);
    // A per-node step name does not exist in the fused version: the same fault there changes nothing.
    const untouched = await runWith(fused.id, "c3:main:1");
    expect(untouched.state).toBe("succeeded");
    expect((await recorded(untouched.id)).map((row) => row.nodeId)).toEqual(["b1", "b2", "c1", "c3", "end", "j", "start", "words"]);
    // And the per-node version has no fused step: it runs through the fault aimed at one, and fails at its own.
    expect((await runWith(perNode.id, "j:main:1:fused")).state).toBe("succeeded");
    expect((await runWith(perNode.id, "c3:main:1")).state).toBe("repair_required");
  });

  it("an error inside a fused group takes the node's error port, as it does unfused", async () => {
    const { apiKey } = await newInstallation();
    const fused = await publishAs(apiKey, errorGraph, "fused");
    const perNode = await publishAs(apiKey, errorGraph, "per_node");
    const a = await waitForRun(apiKey, (await startRun(apiKey, fused.id, { input: { x: "not a boolean" } })).id);
    const b = await waitForRun(apiKey, (await startRun(apiKey, perNode.id, { input: { x: "not a boolean" } })).id);
    expect(a.state).toBe("succeeded");
    const records = await recordsOf(a.id);
    const c2 = records.steps.find((step) => step.node_id === "c2")!;
    expect(c2.state).toBe("failed");
    expect(c2.error_code).toBe("condition.result_not_boolean");
    expect(String(c2.error_message)).toContain("did not evaluate to a boolean");
    expect(records.steps.map((step) => step.node_id)).toEqual(["c1", "c2", "failed", "start"]);
    expect(JSON.parse(String(records.outputs.find((row) => row.node_id === "c2")!.inline_json))).toEqual({ port: "error", errorCode: "condition.result_not_boolean", exhausted: true });
    expect(records.audit.map((event) => event.action)).toContain("workflow.step_failed");
    expect(JSON.parse(String(records.run[0]!.output_json))).toEqual({ port: "terminal", terminalCode: "failed", result: { code: "condition.result_not_boolean" } });
    expect(records).toEqual(await recordsOf(b.id));
  });

  it("a node without an error port fails its group into repair_required; a route resumes through the group", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      ...errorGraph,
      nodes: errorGraph.nodes.filter((node) => node.id !== "failed").map((node) => (node.id === "c2" ? condition("c2", "input.x") : node)),
      edges: errorGraph.edges.filter((candidate) => candidate.from.port !== "error"),
    };
    const version = await publishAs(apiKey, graph, "fused");
    const stuck = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { x: "not a boolean" } })).id);
    expect(stuck.state).toBe("repair_required");
    expect(stuck.error.code).toBe("condition.result_not_boolean");
    const before = await recordsOf(stuck.id);
    // start and c1 kept the records the group wrote before c2 threw; c2 failed with the host's message.
    expect(before.steps.map((step) => `${step.node_id}:${step.state}`)).toEqual(["c1:succeeded", "c2:failed", "start:succeeded"]);
    expect(String(before.steps.find((step) => step.node_id === "c2")!.error_message)).toContain("did not evaluate to a boolean");
    const routed = await api(`/api/v1/runs/${stuck.id}/repair`, { key: apiKey, body: { action: "route", port: "next", reason: "checked by hand" } });
    expect(routed.status, JSON.stringify(routed.body)).toBe(200);
    const done = await waitForRun(apiKey, stuck.id, ["succeeded", "failed", "terminated"]);
    expect(done.state).toBe("succeeded");
    const after = await recordsOf(stuck.id);
    expect(after.steps.map((step) => `${step.node_id}:${step.state}`)).toEqual(["c1:succeeded", "c2:succeeded", "c3:succeeded", "done:succeeded", "start:succeeded"]);
    // The new instance walked from start: start and c1 answered from their records, written once.
    const keys = after.audit.map((event) => String(event.key));
    expect(keys.filter((key) => key === "step:RUN:start:main:1:succeeded")).toHaveLength(1);
    expect(keys.filter((key) => key === "step:RUN:c1:main:1:succeeded")).toHaveLength(1);
    expect(keys).toContain("step:RUN:c3:main:1:succeeded");
  });

  it("a retry of a fused group writes nothing twice, and the host computes the group itself", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "await", kind: "wait_for_event", config: { event_type: "review.done", timeout_seconds: 3600 } },
        condition("c1", "true"),
        condition("c2", 'steps["c1"].port == "next"'),
        condition("c3", 'steps["c2"].port == "next"'),
        { id: "await2", kind: "wait_for_event", config: { event_type: "review.again", timeout_seconds: 3600 } },
        { id: "end", kind: "end" },
      ],
      edges: [
        edge("start", "success", "await"),
        edge("await", "received", "c1"),
        edge("await", "timeout", "c1"),
        edge("c1", "next", "c2"),
        edge("c1", "other", "c2"),
        edge("c2", "next", "c3"),
        edge("c2", "other", "c3"),
        edge("c3", "next", "await2"),
        edge("c3", "other", "await2"),
        edge("await2", "received", "end"),
        edge("await2", "timeout", "end"),
      ],
    };
    const version = await publishAs(apiKey, graph, "fused");
    const { run } = await waitForWait(apiKey, (await startRun(apiKey, version.id)).id);
    const runtime = capability(version);
    const base = { runId: run.id, authorityMode: "autonomous" };
    // The sandbox names a head; the host refuses one that does not fuse or is not reached yet.
    expect(await rejection(runtime.executeFused({ ...base, nodeId: "await", nodeKind: "wait_for_event" }))).toBe("runtime.fuse_denied");
    expect(await rejection(runtime.executeFused({ ...base, nodeId: "c1", nodeKind: "condition" }))).toBe("runtime.node_not_reached");
    // The wait finished (recorded as the host would), and an earlier attempt of the group recorded c1 before it was lost.
    const at = new Date().toISOString();
    const awaitStep = `${run.id}:await:main:1`;
    await env.DB.batch([
      env.DB.prepare(`UPDATE workflow_step_runs SET state = 'succeeded', finished_at = ?2, updated_at = ?2 WHERE id = ?1`).bind(awaitStep, at),
      env.DB.prepare(`INSERT INTO workflow_step_outputs (step_run_id, inline_json, digest, size_bytes, created_at) VALUES (?1, '{"port":"received"}', 'sha256:x', 18, ?2)`).bind(awaitStep, at),
    ]);
    expect(await runtime.executeNode({ ...base, nodeId: "c1", nodeKind: "condition" })).toEqual({ port: "next" });
    const c1Before = await env.DB.prepare(`SELECT updated_at AS at FROM workflow_step_runs WHERE id = ?1`).bind(`${run.id}:c1:main:1`).first<{ at: string }>();
    // One call runs the group c1 → c2 → c3 (it stops before the wait), c1 answered from its record.
    expect(await runtime.executeFused({ ...base, nodeId: "c1", nodeKind: "condition" })).toEqual({ nodeId: "c3", port: "next" });
    const first = await recordsOf(run.id);
    const c1After = await env.DB.prepare(`SELECT updated_at AS at FROM workflow_step_runs WHERE id = ?1`).bind(`${run.id}:c1:main:1`).first<{ at: string }>();
    expect(c1After!.at).toBe(c1Before!.at);
    expect(first.audit.filter((event) => event.action === "workflow.step_succeeded").map((event) => event.key)).toEqual([
      `step:RUN:c1:main:1:succeeded`,
      `step:RUN:c2:main:1:succeeded`,
      `step:RUN:c3:main:1:succeeded`,
      `step:RUN:start:main:1:succeeded`,
    ]);
    const times = async () => (await env.DB.prepare(`SELECT group_concat(updated_at) AS t FROM workflow_step_runs WHERE run_id = ?1`).bind(run.id).first<{ t: string }>())!.t;
    const timesBefore = await times();
    // The retry (a lost answer): the same answer, and not one row, output, event or revision more.
    expect(await runtime.executeFused({ ...base, nodeId: "c1", nodeKind: "condition" })).toEqual({ nodeId: "c3", port: "next" });
    expect(await recordsOf(run.id)).toEqual(first);
    expect(await times()).toBe(timesBefore);
    // failFused on a group that finished answers where it ended and records no failure.
    expect(await runtime.failFused({ ...base, nodeId: "c1", nodeKind: "condition", errorCode: "workflow.step_failed" })).toEqual({ nodeId: "c3", port: "next" });
    expect(await recordsOf(run.id)).toEqual(first);
  });

  it("a graph mixing fused nodes and a wait runs through, with the records of the unfused one", async () => {
    const { apiKey } = await newInstallation();
    const fused = await publishAs(apiKey, mixedGraph, "fused");
    const perNode = await publishAs(apiKey, mixedGraph, "per_node");
    expect(await fusedNodes(fused.artifact.id)).toEqual(["start", "c1", "c2", "c3", "end"]);
    const ids: string[] = [];
    for (const version of [fused, perNode]) {
      const { run } = await waitForWait(apiKey, (await startRun(apiKey, version.id, { input: { x: 1 } })).id);
      const sent = await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "review.done", payload: { verdict: "remove" } } });
      expect(sent.status).toBe(202);
      const done = await waitForRun(apiKey, run.id);
      expect(done.state).toBe("succeeded");
      ids.push(run.id);
    }
    const [a, b] = [await recordsOf(ids[0]!), await recordsOf(ids[1]!)];
    expect(a.steps.map((step) => `${step.node_id}:${step.state}`)).toEqual(["await:succeeded", "c1:succeeded", "c2:succeeded", "c3:succeeded", "end:succeeded", "start:succeeded"]);
    expect(JSON.parse(String(a.outputs.find((row) => row.node_id === "c2")!.inline_json)).port).toBe("next");
    // The wait's output holds its event (id, time), so its digest differs per run; every other row matches.
    expect(withoutDigestOf(a, "await")).toEqual(withoutDigestOf(b, "await"));
  });

  it("a built-in enrichment reading content fuses: sealed output, one content read, the same rows", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "bank", kind: "enrichment", config: { component: "keyword_bank", keywords: ["free crypto"] }, inputMapping: { text: "string(content.snapshot.text)" } },
        condition("c1", 'steps["bank"].port == "success"'),
        { id: "end", kind: "end" },
      ],
      edges: [edge("start", "success", "bank"), edge("bank", "success", "c1"), edge("c1", "next", "end"), edge("c1", "other", "end")],
    };
    const ids: string[] = [];
    for (const steps of ["fused", "per_node"] as const) {
      const version = await publishAs(apiKey, graph, steps);
      const report = await api("/api/v1/reports", {
        key: apiKey,
        body: { subject: { kind: "content", id: `post-${crypto.randomUUID().slice(0, 8)}`, snapshot: { text: "free crypto here" } }, category: "scams_and_fraud", reporter: { id: "reporter-1" } },
      });
      expect(report.status).toBe(201);
      const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: report.body.id } });
      expect((await waitForRun(apiKey, run.body.id)).state).toBe("succeeded");
      ids.push(run.body.id);
    }
    const [a, b] = [await recordsOf(ids[0]!), await recordsOf(ids[1]!)];
    const bank = a.outputs.find((row) => row.node_id === "bank")!;
    expect(bank.open).toBe(0);
    expect(bank.data_classification_json).toBe('["content"]');
    expect(JSON.stringify(a)).not.toContain("free crypto here");
    expect(a.audit.filter((event) => event.action === "report.content_read").map((event) => event.key)).toEqual(["run:RUN:content_read:bank"]);
    // Sealing is randomised, so the sealed output's digest differs per run; every other row matches.
    expect(withoutDigestOf(a, "bank")).toEqual(withoutDigestOf(b, "bank"));
  });

  it("a group's batch is refused whole when one of its steps finished since the group was read (a concurrent call of the sandbox)", async () => {
    const { apiKey } = await newInstallation("fused-guard");
    const version = await publishAs(apiKey, chainGraph, "fused");
    const run = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { x: 1, text: "hello" } })).id);
    expect(run.state).toBe("succeeded");
    const finished = await env.DB.prepare("SELECT id FROM workflow_step_runs WHERE run_id = ?1 AND node_id = 'c1'").bind(run.id).first<{ id: string }>();
    const before = await env.DB.prepare("SELECT updated_at AS updatedAt FROM workflow_runs WHERE id = ?1").bind(run.id).first<{ updatedAt: string }>();
    const touch = () => env.DB.prepare("UPDATE workflow_runs SET updated_at = 'touched' WHERE id = ?1").bind(run.id);
    // A finished step among the group's: nothing of the batch is written.
    await expect(env.DB.batch([fusedWriteGuard(env.DB, ["not-recorded-yet", finished!.id]), touch()])).rejects.toThrow(/malformed JSON/u);
    expect((await env.DB.prepare("SELECT updated_at AS updatedAt FROM workflow_runs WHERE id = ?1").bind(run.id).first<{ updatedAt: string }>())!.updatedAt).toBe(before!.updatedAt);
    // None finished: the batch goes through.
    await env.DB.batch([fusedWriteGuard(env.DB, ["not-recorded-yet"]), touch()]);
    expect((await env.DB.prepare("SELECT updated_at AS updatedAt FROM workflow_runs WHERE id = ?1").bind(run.id).first<{ updatedAt: string }>())!.updatedAt).toBe("touched");
  });

  it("a run lists a fused group's steps in the order they ran, though they share a batch (and often a millisecond)", async () => {
    const { apiKey } = await newInstallation("fused-order");
    const linear = {
      schemaVersion: 1,
      nodes: [{ id: "start", kind: "start" }, condition("c1", "true"), condition("b2", "true"), condition("a3", "true"), { id: "done", kind: "end" }],
      edges: [edge("start", "success", "c1"), edge("c1", "next", "b2"), edge("c1", "other", "b2"), edge("b2", "next", "a3"), edge("b2", "other", "a3"), edge("a3", "next", "done"), edge("a3", "other", "done")],
    };
    const version = await publishAs(apiKey, linear, "fused");
    const run = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: {} })).id);
    expect(run.state).toBe("succeeded");
    expect(run.steps.map((step: { nodeId: string }) => step.nodeId)).toEqual(["start", "c1", "b2", "a3", "done"]);
  });
  it("a group reads its step rows with its authorization, and on their own once their outputs pass the fold's bound", async () => {
    const { apiKey } = await newInstallation();
    // c2 reads `steps` by a computed name, so its group reads every step row of the run.
    const graph = { ...mixedGraph, nodes: mixedGraph.nodes.map((node) => (node.id === "c2" ? condition("c2", 'steps[input.which].port == "success" && event.payload.verdict == "remove"') : node)) };
    const version = await publishAs(apiKey, graph, "fused");
    const { run } = await waitForWait(apiKey, (await startRun(apiKey, version.id, { input: { x: 1, which: "start" } })).id);
    const props = { artifactId: version.artifact.id, workflowVersionId: version.id };
    const input = { runId: run.id, authorityMode: "autonomous" };
    const small = await authorizedRunFolded(env, props, input, { group: { nodeIds: null, sealed: false } });
    const { results } = await env.DB.prepare(
      `SELECT s.id, s.node_id AS nodeId, s.branch_key AS branchKey, s.state, s.attempt, json_extract(${STEP_OUTPUT.json}, '$.port') AS port, ${STEP_OUTPUT.json} AS json, NULL AS sealed
      FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.run_id = ?1`,
    )
      .bind(run.id)
      .all();
    const byId = (rows: Array<Record<string, unknown>>) => [...rows].sort((a, b) => String(a.id).localeCompare(String(b.id)));
    expect(byId(small.folded.group!)).toEqual(byId(results));
    // An output past the bound: not folded; the group reads the rows itself and runs through.
    const start = `${run.id}:start:main:1`;
    await env.DB.prepare("UPDATE workflow_step_runs SET output_json = ?2 WHERE id = ?1")
      .bind(start, JSON.stringify({ port: "success", pad: "x".repeat(GROUP_FOLD_MAX_BYTES) }))
      .run();
    expect((await authorizedRunFolded(env, props, input, { group: { nodeIds: null, sealed: false } })).folded.group).toBeUndefined();
    const sent = await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "review.done", payload: { verdict: "remove" } } });
    expect(sent.status).toBe(202);
    const done = await waitForRun(apiKey, run.id);
    expect(done.state).toBe("succeeded");
    expect(done.steps.find((step: { nodeId: string }) => step.nodeId === "c2").output.port).toBe("next");
  });
});
