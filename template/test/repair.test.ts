// Repair: a run in repair_required continues in a new Workflows instance by
// retry, route or migrate, keeping its id and history; nodes already recorded answer from their
// record, so the webhook an action delivered before the failure is delivered once. Bulk: a dry
// run, then a migrate of 50 runs in the background.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { processRunOperation } from "../src/workflows/run-operations";
import { api, asOldFormOutputs, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

type Logged = { path: string; status: number; webhookId: string };

async function deliveries(path: string): Promise<Logged[]> {
  const log = (await (await env.RECEIVER.fetch(`http://receiver/_control/log?path=${encodeURIComponent(path)}`)).json()) as Logged[];
  return log.filter((entry) => entry.status === 200);
}

async function count(sql: string, ...binds: unknown[]): Promise<number> {
  return (
    (await env.DB.prepare(sql)
      .bind(...binds)
      .first<{ n: number }>()) ?? { n: -1 }
  ).n;
}

/** An action delivered by webhook, then a node `second` that may fail, then two ends. */
function graphWith(second: Record<string, unknown>, ports: string[], removeConfig: Record<string, unknown> = {}) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post", ...removeConfig }, inputMapping: { postId: "input.postId" } },
      { id: "check", timeoutPolicy: { retries: 0 }, ...second },
      ...ports.map((port) => ({ id: `end_${port}`, kind: "end", config: { terminal_code: port } })),
      { id: "end_failed", kind: "end", config: { terminal_code: "failed" } },
    ],
    edges: [edge("start", "success", "remove"), ...["rejected", "expired", "failed"].map((port) => edge("remove", port, "end_failed")), edge("remove", "applied", "check"), ...ports.map((port) => edge("check", port, `end_${port}`))],
  };
}

const condition = (when: string) => ({ kind: "condition", config: { cases: [{ port: "even", when }], case_ports: ["even"], default_port: "odd" } });
const BROKEN = "input.missing.deeper == 1";

async function setup(path: string) {
  const { apiKey } = await newInstallation();
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id } })).status).toBe(201);
  return apiKey;
}

/** Publishes another version of the same workflow. */
async function publishVersion(apiKey: string, workflowId: string, graph: unknown): Promise<string> {
  const version = await api(`/api/v1/workflows/${workflowId}/versions`, { key: apiKey, body: { graph } });
  if (version.status !== 201) throw new Error(`publish failed: ${JSON.stringify(version.body)}`);
  return version.body.id as string;
}

async function stuckRun(apiKey: string, versionId: string) {
  const run = await startRun(apiKey, versionId, { input: { postId: "p1" } });
  const stuck = await waitForRun(apiKey, run.id);
  expect(stuck.state).toBe("repair_required");
  return stuck;
}

const repair = (apiKey: string, runId: string, body: Record<string, unknown>) => api(`/api/v1/runs/${runId}/repair`, { key: apiKey, body });

describe("repair", () => {
  it("route: a person takes a port of the failed node; the run ends there, the action delivered once", async () => {
    const path = `/ok/repair-route-${crypto.randomUUID()}`;
    const apiKey = await setup(path);
    const version = await publish(apiKey, graphWith(condition(BROKEN), ["even", "odd"]));
    const stuck = await stuckRun(apiKey, version.id);
    expect(stuck.error.code).toBe("expression.failed");
    expect(await deliveries(path)).toHaveLength(1);

    const badPort = await repair(apiKey, stuck.id, { action: "route", port: "sideways", reason: "checked by hand" });
    expect(badPort.status).toBe(422);
    expect(badPort.body.error).toMatchObject({ code: "run.repair_port_unknown", details: { ports: ["even", "odd"] } });
    const noReason = await repair(apiKey, stuck.id, { action: "route", port: "odd" });
    expect(noReason.status).toBe(400);

    const routed = await repair(apiKey, stuck.id, { action: "route", port: "odd", reason: "post checked by hand: odd" });
    expect(routed.status, JSON.stringify(routed.body)).toBe(200);
    expect(routed.body.run).toMatchObject({ id: stuck.id, instanceId: `${stuck.id}-r1`, repairCount: 1 });
    const done = await waitForRun(apiKey, stuck.id, ["succeeded", "failed", "terminated"]);
    expect(done.output.terminalCode).toBe("odd");
    expect(done.error).toBeNull();
    expect(done.steps.find((s: any) => s.nodeId === "check")).toMatchObject({ state: "succeeded", output: { port: "odd", repaired: true, reason: "post checked by hand: odd", decidedBy: { type: "api_key" } } });
    expect(done.repairs).toEqual([expect.objectContaining({ seq: 1, action: "route", nodeId: "check", port: "odd", previousState: "repair_required", previousErrorCode: "expression.failed", reason: "post checked by hand: odd" })]);
    // The action ran once: one proposal, one delivery, one step.
    expect(await deliveries(path)).toHaveLength(1);
    expect(await count("SELECT COUNT(*) AS n FROM action_proposals WHERE run_id = ?1", stuck.id)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE target_id = ?1 AND action = 'workflow.run_repaired'", stuck.id)).toBe(1);
    const again = await repair(apiKey, stuck.id, { action: "retry", reason: "again" });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("run.not_repairable");
  });

  it("route in a run recorded in the earlier form (outputs rows): the routed output goes in the step row, the others read as they did", async () => {
    const path = `/ok/repair-route-old-${crypto.randomUUID()}`;
    const apiKey = await setup(path);
    const version = await publish(apiKey, graphWith(condition(BROKEN), ["even", "odd"]));
    const stuck = await stuckRun(apiKey, version.id);
    // The run's outputs as a release before migration 0070 wrote them.
    expect(await asOldFormOutputs(stuck.id)).toBeGreaterThanOrEqual(2);
    const stepId = `${stuck.id}:check:main:1`;
    const before = (await api(`/api/v1/runs/${stuck.id}`, { key: apiKey })).body;

    const routed = await repair(apiKey, stuck.id, { action: "route", port: "odd", reason: "post checked by hand: odd" });
    expect(routed.status, JSON.stringify(routed.body)).toBe(200);
    const done = await waitForRun(apiKey, stuck.id, ["succeeded", "failed", "terminated"]);
    expect(done.output.terminalCode).toBe("odd");
    expect(done.steps.find((s: any) => s.nodeId === "check")).toMatchObject({ state: "succeeded", sealed: false, output: { port: "odd", repaired: true, reason: "post checked by hand: odd" } });
    expect(await count("SELECT COUNT(*) AS n FROM workflow_step_outputs WHERE step_run_id = ?1", stepId)).toBe(0);
    expect(await env.DB.prepare("SELECT json_extract(output_json, '$.port') AS port, output_sealed AS sealed FROM workflow_step_runs WHERE id = ?1").bind(stepId).first()).toEqual({ port: "odd", sealed: null });
    // The steps recorded before keep their earlier form and read as they did.
    for (const nodeId of ["start", "remove"]) {
      expect(done.steps.find((s: any) => s.nodeId === nodeId)).toEqual(before.steps.find((s: any) => s.nodeId === nodeId));
      expect(await count("SELECT COUNT(*) AS n FROM workflow_step_outputs WHERE step_run_id = ?1", `${stuck.id}:${nodeId}:main:1`)).toBe(1);
    }
  });

  it("retry: the failed node runs again once its provider is back (attempt 2); recorded nodes do not", async () => {
    const path = `/ok/repair-retry-${crypto.randomUUID()}`;
    const apiKey = await setup(path);
    const flaky = `/flaky/${crypto.randomUUID()}`;
    const created = await api("/api/v1/components", { key: apiKey, body: { name: `flaky-${crypto.randomUUID()}` } });
    const component = await api(`/api/v1/components/${created.body.id}/versions`, {
      key: apiKey,
      body: {
        source: `export async function run() { const r = await fetch("https://flaky.test${flaky}?failures=1"); if (!r.ok) throw new Error("provider down"); return { ok: true }; }`,
        allowedHosts: ["flaky.test"],
        maxSubrequests: 2,
      },
    });
    expect(component.status).toBe(201);
    const version = await publish(apiKey, graphWith({ kind: "enrichment", config: { component_version_id: component.body.id } }, ["success"]));
    const stuck = await stuckRun(apiKey, version.id);
    expect(stuck.steps.find((s: any) => s.nodeId === "check")).toMatchObject({ state: "failed", attempt: 1 });

    const retried = await repair(apiKey, stuck.id, { action: "retry", reason: "provider fixed" });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    const done = await waitForRun(apiKey, stuck.id, ["succeeded", "failed", "terminated"]);
    expect(done.output.terminalCode).toBe("success");
    expect(done.steps.find((s: any) => s.nodeId === "check")).toMatchObject({ state: "succeeded", attempt: 2 });
    expect(done.steps.find((s: any) => s.nodeId === "remove")).toMatchObject({ state: "succeeded", attempt: 1 });
    expect(await deliveries(path)).toHaveLength(1);
    const audit = await env.DB.prepare("SELECT actor_type AS actorType, details_json AS details FROM audit_events WHERE target_id = ?1 AND action = 'workflow.run_repaired'").bind(stuck.id).first<{ actorType: string; details: string }>();
    expect(audit?.actorType).toBe("api_key");
    expect(JSON.parse(audit!.details)).toMatchObject({ action: "retry", reason: "provider fixed", nodeId: "check", instanceId: `${stuck.id}-r1`, previousInstanceId: stuck.id });
  });

  it("migrate: continues on a fixed version of the same workflow; refuses a version where recorded nodes differ", async () => {
    const path = `/ok/repair-migrate-${crypto.randomUUID()}`;
    const apiKey = await setup(path);
    const v1 = await publish(apiKey, graphWith(condition(BROKEN), ["even", "odd"]));
    const workflowId = (await api(`/api/v1/workflow-versions/${v1.id}`, { key: apiKey })).body.workflowId as string;
    const fixed = await publishVersion(apiKey, workflowId, graphWith(condition("input.postId == 'p1'"), ["even", "odd"]));
    const changedAction = await publishVersion(apiKey, workflowId, graphWith(condition("true"), ["even", "odd"], { approval_timeout_seconds: 60 }));
    const otherPorts = await publishVersion(apiKey, workflowId, graphWith({ kind: "condition", config: { cases: [{ port: "yes", when: "true" }], case_ports: ["yes"], default_port: "no" } }, ["yes", "no"]));
    const otherWorkflow = await publish(apiKey, graphWith(condition("true"), ["even", "odd"]));
    const stuck = await stuckRun(apiKey, v1.id);

    const refused = await repair(apiKey, stuck.id, { action: "migrate", workflowVersionId: changedAction, reason: "fix" });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "run.migrate_incompatible", details: { nodeId: "remove", problem: "config_differs" } });
    const ports = await repair(apiKey, stuck.id, { action: "migrate", workflowVersionId: otherPorts, reason: "fix" });
    expect(ports.body.error).toMatchObject({ code: "run.migrate_incompatible", details: { nodeId: "check", problem: "ports_differ" } });
    const foreign = await repair(apiKey, stuck.id, { action: "migrate", workflowVersionId: otherWorkflow.id, reason: "fix" });
    expect(foreign.body.error.code).toBe("run.migrate_other_workflow");
    expect((await api(`/api/v1/runs/${stuck.id}`, { key: apiKey })).body).toMatchObject({ state: "repair_required", workflowVersionId: v1.id, repairCount: 0 });

    const migrated = await repair(apiKey, stuck.id, { action: "migrate", workflowVersionId: fixed, reason: "condition fixed in v2" });
    expect(migrated.status, JSON.stringify(migrated.body)).toBe(200);
    const done = await waitForRun(apiKey, stuck.id, ["succeeded", "failed", "terminated"]);
    expect(done).toMatchObject({ state: "succeeded", workflowVersionId: fixed, output: { terminalCode: "even" } });
    expect(done.repairs[0]).toMatchObject({ action: "migrate", fromVersionId: v1.id, toVersionId: fixed });
    expect(await deliveries(path)).toHaveLength(1);
  });
});

describe("repair past waits and delays", () => {
  it("a new instance walks past a finished delay and a received wait without waiting again", { timeout: 60_000 }, async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "pause", kind: "delay", config: { seconds: 1 } },
        { id: "await", kind: "wait_for_event", config: { event_type: "moderator.note", timeout_seconds: 3600 } },
        { id: "check", timeoutPolicy: { retries: 0 }, ...condition(BROKEN) },
        { id: "end_even", kind: "end", config: { terminal_code: "even" } },
        { id: "end_odd", kind: "end", config: { terminal_code: "odd" } },
        { id: "late", kind: "end", config: { terminal_code: "late" } },
      ],
      edges: [edge("start", "success", "pause"), edge("pause", "completed", "await"), edge("await", "received", "check"), edge("await", "timeout", "late"), edge("check", "even", "end_even"), edge("check", "odd", "end_odd")],
    });
    const run = await startRun(apiKey, version.id);
    for (const deadline = Date.now() + 20_000; ; ) {
      const current = (await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body;
      if (current.waits.some((w: any) => w.state === "waiting")) break;
      if (Date.now() > deadline) throw new Error(`never waited: ${JSON.stringify(current)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "moderator.note", payload: { ok: true } } })).status).toBe(202);
    const stuck = await waitForRun(apiKey, run.id);
    expect(stuck.state).toBe("repair_required");
    const routed = await repair(apiKey, run.id, { action: "route", port: "even", reason: "decided by hand" });
    expect(routed.status, JSON.stringify(routed.body)).toBe(200);
    const done = await waitForRun(apiKey, run.id, ["succeeded", "failed", "terminated"]);
    expect(done.output.terminalCode).toBe("even");
    expect(done.steps.find((s: any) => s.nodeId === "await")).toMatchObject({ state: "succeeded", output: { port: "received", event: { payload: { ok: true } } } });
    expect(done.waits).toHaveLength(1);
    expect(await count("SELECT COUNT(*) AS n FROM workflow_events WHERE run_id = ?1", run.id)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE target_id = ?1 AND action = 'workflow.delay_scheduled'", run.id)).toBe(1);
  });
});

describe("an event recorded while the run is in repair", () => {
  it("reaches the new instance: the repair signals the waits whose event was recorded meanwhile", { timeout: 60_000 }, async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "await", kind: "wait_for_event", config: { event_type: "moderator.note", timeout_seconds: 3600 } },
        { id: "check", timeoutPolicy: { retries: 0 }, ...condition(BROKEN) },
        { id: "meet", kind: "join" },
        { id: "done", kind: "end", config: { terminal_code: "done" } },
      ],
      edges: [
        edge("start", "success", "await"),
        edge("start", "success", "check"),
        edge("await", "received", "meet"),
        edge("await", "timeout", "meet"),
        edge("check", "even", "meet"),
        edge("check", "odd", "meet"),
        edge("meet", "success", "done"),
      ],
    });
    const run = await startRun(apiKey, version.id);
    const stuck = await waitForRun(apiKey, run.id);
    expect(stuck.state).toBe("repair_required");
    for (const deadline = Date.now() + 20_000; ; ) {
      const current = (await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body;
      if (current.waits.some((w: any) => w.state === "waiting")) break;
      if (Date.now() > deadline) throw new Error(`never waited: ${JSON.stringify(current)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // The old instance has ended: the event is recorded, its signal reaches no one yet.
    expect((await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "moderator.note", payload: { n: 1 } } })).status).toBe(202);
    expect((await repair(apiKey, run.id, { action: "route", port: "odd", reason: "by hand" })).status).toBe(200);
    const done = await waitForRun(apiKey, run.id, ["succeeded", "failed", "terminated"]);
    expect(done.output.terminalCode).toBe("done");
    expect(done.steps.find((s: any) => s.nodeId === "await")).toMatchObject({ state: "succeeded", output: { port: "received", event: { payload: { n: 1 } } } });
  });
});

describe("bulk repair", () => {
  it("a dry run counts and samples; then 50 runs migrate in the background, once, with progress", { timeout: 240_000 }, async () => {
    const { apiKey } = await newInstallation();
    const simple = (when: string) => ({
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "check", timeoutPolicy: { retries: 0 }, ...condition(when) },
        { id: "end_even", kind: "end", config: { terminal_code: "even" } },
        { id: "end_odd", kind: "end", config: { terminal_code: "odd" } },
      ],
      edges: [edge("start", "success", "check"), edge("check", "even", "end_even"), edge("check", "odd", "end_odd")],
    });
    const v1 = await publish(apiKey, simple(BROKEN));
    const workflowId = (await api(`/api/v1/workflow-versions/${v1.id}`, { key: apiKey })).body.workflowId as string;
    const v2 = await publishVersion(apiKey, workflowId, simple("input.n < 25"));
    const runs: string[] = [];
    for (let i = 0; i < 50; i++) runs.push((await startRun(apiKey, v1.id, { input: { n: i } })).id);
    for (const id of runs) expect((await waitForRun(apiKey, id, ["repair_required", "succeeded", "failed"], 60_000)).state).toBe("repair_required");

    const request = { action: "migrate", filter: { workflowVersionId: v1.id, state: "repair_required", errorCode: "expression.failed" }, workflowVersionId: v2, reason: "v2 fixes the condition" };
    const dry = await api("/api/v1/run-operations", { key: apiKey, body: { ...request, dryRun: true } });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ dryRun: true, count: 50 });
    expect(dry.body.sample).toHaveLength(10);
    expect(dry.body.sample[0]).toMatchObject({ state: "repair_required", errorCode: "expression.failed", workflowVersionId: v1.id });
    const none = await api("/api/v1/run-operations", { key: apiKey, body: { ...request, filter: { ...request.filter, createdBefore: "2000-01-01T00:00:00Z" }, dryRun: true } });
    expect(none.body.count).toBe(0);

    const key = `bulk-${crypto.randomUUID()}`;
    const started = await api("/api/v1/run-operations", { key: apiKey, body: request, headers: { "idempotency-key": key } });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    expect(started.body.progress.total).toBe(50);
    const replay = await api("/api/v1/run-operations", { key: apiKey, body: request, headers: { "idempotency-key": key } });
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(started.body.id);

    const deadline = Date.now() + 180_000;
    let operation = started.body;
    while (operation.state !== "completed") {
      if (Date.now() > deadline) throw new Error(`operation stuck: ${JSON.stringify(operation)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      operation = (await api(`/api/v1/run-operations/${started.body.id}`, { key: apiKey })).body;
    }
    expect(operation.progress).toEqual({ total: 50, processed: 50, succeeded: 50, failed: 0, skipped: 0 });
    for (const [i, id] of runs.entries()) {
      const done = await waitForRun(apiKey, id, ["succeeded", "failed", "terminated"], 60_000);
      expect(done).toMatchObject({ state: "succeeded", workflowVersionId: v2, repairCount: 1, output: { terminalCode: i < 25 ? "even" : "odd" } });
    }
    // Each run repaired once, under the operation.
    expect(await count("SELECT COUNT(*) AS n FROM workflow_run_repairs WHERE operation_id = ?1", started.body.id)).toBe(50);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.run_repaired' AND json_extract(details_json, '$.operationId') = ?1", started.body.id)).toBe(50);
  });

  it("a bulk terminate is done once: a message delivered again, or a repeat of the request, repeats nothing", { timeout: 120_000 }, async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "check", timeoutPolicy: { retries: 0 }, ...condition(BROKEN) },
        { id: "end_even", kind: "end" },
        { id: "end_odd", kind: "end" },
      ],
      edges: [edge("start", "success", "check"), edge("check", "even", "end_even"), edge("check", "odd", "end_odd")],
    });
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push((await stuckRun(apiKey, version.id)).id);
    const request = { action: "terminate", filter: { workflowVersionId: version.id }, reason: "broken version withdrawn" };
    const started = await api("/api/v1/run-operations", { key: apiKey, body: request, headers: { "idempotency-key": "terminate-once" } });
    expect(started.status).toBe(202);
    let operation = started.body;
    for (const deadline = Date.now() + 60_000; operation.state !== "completed"; ) {
      if (Date.now() > deadline) throw new Error(`operation stuck: ${JSON.stringify(operation)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      operation = (await api(`/api/v1/run-operations/${started.body.id}`, { key: apiKey })).body;
    }
    expect(operation.progress).toEqual({ total: 3, processed: 3, succeeded: 3, failed: 0, skipped: 0 });
    // The same message again (at-least-once delivery) and the same request again.
    expect(await processRunOperation(env, { waitUntil: () => undefined } as unknown as ExecutionContext, started.body.id)).toEqual({ done: 0, remaining: 0 });
    const replay = await api("/api/v1/run-operations", { key: apiKey, body: request, headers: { "idempotency-key": "terminate-once" } });
    expect(replay.status).toBe(200);
    expect(replay.body.progress.succeeded).toBe(3);
    const reused = await api("/api/v1/run-operations", { key: apiKey, body: { ...request, reason: "other" }, headers: { "idempotency-key": "terminate-once" } });
    expect(reused.status).toBe(409);
    for (const id of runs) {
      expect((await api(`/api/v1/runs/${id}`, { key: apiKey })).body.state).toBe("terminated");
      expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE target_id = ?1 AND action = 'workflow.run_terminated'", id)).toBe(1);
    }
    // Nothing left to take: a retry of the same filter counts none.
    const dry = await api("/api/v1/run-operations", { key: apiKey, body: { action: "retry", filter: { workflowVersionId: version.id }, reason: "x", dryRun: true } });
    expect(dry.body.count).toBe(0);
  });
});
