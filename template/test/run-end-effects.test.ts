// Effects end with their run: a terminated, failed or finished run leaves no
// proposal that can still be approved or delivered, no task to work and no wait; a node sent to its
// error port leaves no open proposal. And review queues stay live: a lapsed lease goes back to
// its place in the queue; a task handed off to a queue can be completed.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { consumeDeliveries } from "../src/enforcement/consumer";
import { markRunFailedUnsafe } from "../src/workflows/runs-queries";
import { api, edge, newInstallation, publish, receiverLog, removePostGraph, startRun, until, waitForRun } from "./helpers";

async function count(sql: string, ...binds: unknown[]): Promise<number> {
  return (
    (await env.DB.prepare(sql)
      .bind(...binds)
      .first<{ n: number }>()) ?? { n: -1 }
  ).n;
}

/** An action, and a review in a queue, side by side: a run that waits on a proposal, a task and a wait at once. */
const forkGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post", approval_timeout_seconds: 3600 }, inputMapping: { postId: "input.postId" } },
    { id: "review", kind: "human_task", config: { queue_id: "scams", response_schema: { type: "object" }, timeout_seconds: 3600 } },
    { id: "meet", kind: "join" },
    { id: "done", kind: "end" },
  ],
  edges: [
    edge("start", "success", "remove"),
    edge("start", "success", "review"),
    ...["applied", "rejected", "expired", "failed"].map((port) => edge("remove", port, "meet")),
    edge("review", "completed", "meet"),
    edge("review", "timeout", "meet"),
    edge("meet", "success", "done"),
  ],
};

async function setup(path: string, graph: unknown = removePostGraph, endpointExtra: Record<string, unknown> = {}) {
  const { apiKey } = await newInstallation();
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, ...endpointExtra } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id } })).status).toBe(201);
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "scams", slaSeconds: 3600, priority: 5 } });
  expect(queue.status).toBe(201);
  const version = await publish(apiKey, graph);
  return { apiKey, version, queueId: queue.body.id as string };
}

async function openProposal(apiKey: string, runId: string) {
  return until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: any) => p.runId === runId), "a proposal");
}

function capability(props: { artifactId: string; workflowVersionId: string }) {
  return (exports as any).WorkflowRuntimeCapability({ props }) as { executeNode(input: unknown): Promise<any>; executeFused(input: unknown): Promise<any>; failNode(input: unknown): Promise<any> };
}

/** One queue message for the DELIVERIES consumer, as the queue would hand it over. */
async function consumeOnce(deliveryId: string) {
  const outcome = { acked: false, retried: false };
  const message = { id: crypto.randomUUID(), timestamp: new Date(), attempts: 1, body: { deliveryId }, ack: () => (outcome.acked = true), retry: () => (outcome.retried = true) };
  await consumeDeliveries({ queue: "deliveries", messages: [message], ackAll: () => undefined, retryAll: () => undefined } as unknown as MessageBatch<{ deliveryId?: unknown }>, env);
  return outcome;
}

describe("effects after a run ends", () => {
  it("approving a proposal of a terminated run delivers nothing", async () => {
    const { apiKey, version } = await setup("/ok/terminated");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p1" } });
    const proposal = await openProposal(apiKey, run.id);
    expect((await api(`/api/v1/runs/${run.id}/terminate`, { key: apiKey, method: "POST" })).status).toBe(200);

    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body).toMatchObject({ state: "cancelled", cancelReason: "run_terminated" });
    const approved = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod" } });
    expect(approved.status).toBe(409);
    expect(approved.body.error.code).toBe("action_proposal.run_finished");
    const rejected = await api(`/api/v1/action-proposals/${proposal.id}/reject`, { key: apiKey, body: { reason: "late" } });
    expect(rejected.status).toBe(409);
    expect(rejected.body.error.code).toBe("action_proposal.run_finished");
    expect(await count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE source_id = ?", proposal.id)).toBe(0);
    expect(await receiverLog("/ok/terminated")).toEqual([]);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'action.cancelled' AND target_id = ?", proposal.id)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action IN ('action.approved', 'action.rejected') AND target_id = ?", proposal.id)).toBe(0);
  });

  it("terminating a run cancels its proposal, its task and its wait, each audited", async () => {
    const { apiKey, version, queueId } = await setup("/ok/terminated-fork", forkGraph);
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p2" } });
    const proposal = await openProposal(apiKey, run.id);
    const task = await until(async () => (await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items[0], "a task");
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: apiKey, body: { reviewer: "mod-a" } })).status).toBe(200);
    expect((await api(`/api/v1/runs/${run.id}/terminate`, { key: apiKey, method: "POST" })).status).toBe(200);

    const detail = (await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body;
    expect(detail.state).toBe("terminated");
    expect(detail.waits.map((wait: any) => wait.state)).toEqual(["cancelled"]);
    expect((await api(`/api/v1/tasks/${task.id}`, { key: apiKey })).body.state).toBe("cancelled");
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body.state).toBe("cancelled");
    // Nothing is left to work: the queue is empty, the claimed task cannot be completed.
    expect((await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items).toEqual([]);
    expect((await api(`/api/v1/queues/${queueId}/next`, { key: apiKey, body: { reviewer: "mod-b" } })).status).toBe(404);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "mod-a", response: {} } })).status).toBe(409);
    const audited = await env.DB.prepare("SELECT action, actor_type AS actorType FROM audit_events WHERE action IN ('task.cancelled', 'workflow.wait_cancelled', 'action.cancelled') AND details_json LIKE ? ORDER BY action")
      .bind(`%${run.id}%`)
      .all<{ action: string; actorType: string }>();
    expect(audited.results).toEqual([
      { action: "action.cancelled", actorType: "api_key" },
      { action: "task.cancelled", actorType: "api_key" },
      { action: "workflow.wait_cancelled", actorType: "api_key" },
    ]);
  });

  it("a run failed by the host leaves no task or wait, and its proposal can neither be approved nor sent", async () => {
    const { apiKey, version, queueId } = await setup("/ok/failed-fork", forkGraph);
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p3" } });
    const proposal = await openProposal(apiKey, run.id);
    const task = await until(async () => (await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items[0], "a task");
    // What the loader does when the sandbox throws.
    await markRunFailedUnsafe(env, run.id, "sandbox_crashed");

    const detail = (await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body;
    expect(detail.state).toBe("failed");
    expect(detail.waits.map((wait: any) => wait.state)).toEqual(["cancelled"]);
    expect((await api(`/api/v1/tasks/${task.id}`, { key: apiKey })).body.state).toBe("cancelled");
    const approved = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod" } });
    expect(approved.status).toBe(409);
    expect(approved.body.error.code).toBe("action_proposal.run_finished");
    // The host's failure could not reach enforcement: the refused decision closes the leftover.
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body).toMatchObject({ state: "cancelled", cancelReason: "run_failed" });
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'action.cancelled' AND target_id = ?", proposal.id)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE source_id = ?", proposal.id)).toBe(0);
    expect(await receiverLog("/ok/failed-fork")).toEqual([]);
  });

  it("a run that ends while a proposal is still open cancels it", async () => {
    const { apiKey, version } = await setup("/ok/ended");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p4" } });
    const proposal = await openProposal(apiKey, run.id);
    // A kernel cannot jump to the end while the action waits: the host refuses a node nothing recorded leads to…
    const runtime = capability({ artifactId: version.artifact.id, workflowVersionId: version.id });
    let refused = "";
    try {
      await runtime.executeNode({ runId: run.id, authorityMode: "assisted", nodeId: "applied", nodeKind: "end" });
    } catch (error) {
      refused = (error as Error).message;
    }
    expect(refused).toBe("runtime.node_not_reached");
    // …so let the record lead there (as a finished action step would), and the end closes what is left open.
    const stepId = `${run.id}:remove:main:1`;
    await env.DB.batch([
      env.DB.prepare("UPDATE workflow_step_runs SET state = 'succeeded' WHERE id = ?1").bind(stepId),
      env.DB.prepare("INSERT INTO workflow_step_outputs (step_run_id, inline_json, digest, size_bytes, created_at) VALUES (?1, '{\"port\":\"applied\"}', 'sha256:x', 18, ?2) ON CONFLICT(step_run_id) DO NOTHING").bind(
        stepId,
        new Date().toISOString(),
      ),
    ]);
    expect(await runtime.executeNode({ runId: run.id, authorityMode: "assisted", nodeId: "applied", nodeKind: "end" })).toEqual({ port: "terminal" });
    expect((await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body.state).toBe("succeeded");
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body).toMatchObject({ state: "cancelled", cancelReason: "run_succeeded" });
    const approved = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: {} });
    expect(approved.body.error.code).toBe("action_proposal.run_finished");
    expect(await count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE source_id = ?", proposal.id)).toBe(0);
  });

  it("a fused group that ends the run cancels what is still open, read with its authorization", async () => {
    const { apiKey, version } = await setup("/ok/ended-fused");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p5" } });
    const proposal = await openProposal(apiKey, run.id);
    const runtime = capability({ artifactId: version.artifact.id, workflowVersionId: version.id });
    const stepId = `${run.id}:remove:main:1`;
    await env.DB.batch([
      env.DB.prepare("UPDATE workflow_step_runs SET state = 'succeeded' WHERE id = ?1").bind(stepId),
      env.DB.prepare("INSERT INTO workflow_step_outputs (step_run_id, inline_json, digest, size_bytes, created_at) VALUES (?1, '{\"port\":\"applied\"}', 'sha256:x', 18, ?2) ON CONFLICT(step_run_id) DO NOTHING").bind(
        stepId,
        new Date().toISOString(),
      ),
    ]);
    // Twice: the graph is cached by the first call, so the second reads what is open in the run's statement.
    await runtime.executeFused({ runId: run.id, authorityMode: "assisted", nodeId: "start", nodeKind: "start" }).catch(() => undefined);
    expect(await runtime.executeFused({ runId: run.id, authorityMode: "assisted", nodeId: "applied", nodeKind: "end" })).toEqual({ nodeId: "applied", port: "terminal" });
    expect((await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body.state).toBe("succeeded");
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body).toMatchObject({ state: "cancelled", cancelReason: "run_succeeded" });
  });

  it("a node sent to its error port leaves no open proposal", async () => {
    const { apiKey, version } = await setup("/ok/error-port");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p5" } });
    const proposal = await openProposal(apiKey, run.id);
    const runtime = capability({ artifactId: version.artifact.id, workflowVersionId: version.id });
    // The action node's retries are exhausted: it leaves by its error port.
    expect(await runtime.failNode({ runId: run.id, authorityMode: "assisted", nodeId: "remove", nodeKind: "action", errorCode: "probe_failure" })).toEqual({ port: "failed" });

    const approved = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod" } });
    expect(approved.status).toBe(409);
    expect(approved.body.error.code).toBe("action_proposal.cancelled");
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body).toMatchObject({ state: "cancelled", cancelReason: "node_error_port" });
    expect((await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items).toEqual([]);
    expect(await count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE source_id = ?", proposal.id)).toBe(0);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'action.cancelled' AND target_id = ?", proposal.id)).toBe(1);
    expect(await receiverLog("/ok/error-port")).toEqual([]);
  });

  it("a pending delivery whose run was terminated is never sent again, not even by a resend", async () => {
    // The endpoint is down and backs off for minutes: the delivery is pending when the run is terminated.
    const { apiKey, version } = await setup("/down/terminated", removePostGraph, { retryBaseSeconds: 600 });
    const run = await startRun(apiKey, version.id, { authorityMode: "autonomous", input: { postId: "p6" } });
    const delivery = await until(
      () => env.DB.prepare("SELECT id, source_id AS proposalId FROM webhook_deliveries WHERE source_type = 'action' AND attempts = 1 AND source_id LIKE ?").bind(`${run.id}:%`).first<{ id: string; proposalId: string }>(),
      "a first attempt",
    );
    expect((await api(`/api/v1/runs/${run.id}/terminate`, { key: apiKey, method: "POST" })).status).toBe(200);
    expect((await api(`/api/v1/action-proposals/${delivery.proposalId}`, { key: apiKey })).body.state).toBe("cancelled");

    // The backoff is over (or the outbox sweep re-queued it): the consumer takes the delivery again.
    await env.DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01T00:00:00.000Z' WHERE id = ?").bind(delivery.id).run();
    expect(await consumeOnce(delivery.id)).toEqual({ acked: true, retried: false });
    const detail = (await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey })).body;
    expect(detail).toMatchObject({ state: "dead", attempts: 2, lastError: "source_cancelled" });
    expect(detail.history.map((attempt: any) => attempt.statusCode)).toEqual([503, null]);
    expect((await receiverLog("/down/terminated")).length).toBe(1);
    expect((await api(`/api/v1/action-proposals/${delivery.proposalId}`, { key: apiKey })).body.state).toBe("cancelled");
    const resent = await api(`/api/v1/webhook-deliveries/${delivery.id}/resend`, { key: apiKey, method: "POST" });
    expect(resent.status).toBe(409);
    expect(resent.body.error.code).toBe("webhook_delivery.source_cancelled");
    expect((await receiverLog("/down/terminated")).length).toBe(1);
  });

  it("a pending delivery of a run failed by the host is refused at send time and its proposal closed", async () => {
    const { apiKey, version } = await setup("/down/failed", removePostGraph, { retryBaseSeconds: 600 });
    const run = await startRun(apiKey, version.id, { authorityMode: "autonomous", input: { postId: "p7" } });
    const delivery = await until(
      () => env.DB.prepare("SELECT id, source_id AS proposalId FROM webhook_deliveries WHERE source_type = 'action' AND attempts = 1 AND source_id LIKE ?").bind(`${run.id}:%`).first<{ id: string; proposalId: string }>(),
      "a first attempt",
    );
    await markRunFailedUnsafe(env, run.id, "sandbox_crashed");
    await env.DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01T00:00:00.000Z' WHERE id = ?").bind(delivery.id).run();
    expect(await consumeOnce(delivery.id)).toEqual({ acked: true, retried: false });
    expect((await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey })).body).toMatchObject({ state: "dead", attempts: 2, lastError: "run_finished" });
    expect((await receiverLog("/down/failed")).length).toBe(1);
    expect((await api(`/api/v1/action-proposals/${delivery.proposalId}`, { key: apiKey })).body).toMatchObject({ state: "cancelled", cancelReason: "run_failed" });
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'action.failed' AND target_id = ?", delivery.proposalId)).toBe(0);
  });
});

const reviewGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: "scams", response_schema: { type: "object" }, timeout_seconds: 3600 } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
};

describe("review queue liveness", () => {
  it("a lapsed lease goes back to the head of its queue", async () => {
    const { apiKey, queueId } = await setup("/ok/unused-lease");
    const version = await publish(apiKey, reviewGraph);
    const first = await startRun(apiKey, version.id);
    await until(async () => (await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items.length === 1, "the first task");
    const second = await startRun(apiKey, version.id);
    const listed = await until(async () => {
      const items = (await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items;
      return items.length === 2 && items;
    }, "both tasks");
    expect(listed.map((task: any) => task.runId)).toEqual([first.id, second.id]);
    const head = listed[0].id;

    const taken = await api(`/api/v1/queues/${queueId}/next`, { key: apiKey, body: { reviewer: "mod-a" } });
    expect(taken.body.id).toBe(head);
    // mod-a walks away; the lease lapses.
    await env.DB.prepare("UPDATE human_tasks SET lease_expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?").bind(head).run();

    expect((await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items.map((task: any) => task.id)).toEqual([head, listed[1].id]);
    expect((await api(`/api/v1/queues/${queueId}/tasks?state=claimed`, { key: apiKey })).body.items).toEqual([]);
    expect((await api("/api/v1/queues", { key: apiKey })).body.items.find((queue: any) => queue.id === queueId)).toMatchObject({ open: 2, claimed: 0 });
    const next = await api(`/api/v1/queues/${queueId}/next`, { key: apiKey, body: { reviewer: "mod-b" } });
    expect(next.status).toBe(200);
    expect(next.body).toMatchObject({ id: head, state: "claimed", claim: { reviewer: "mod-b" } });
    expect((await api(`/api/v1/tasks/${head}/complete`, { key: apiKey, body: { reviewer: "mod-b", response: {} } })).status).toBe(200);
    expect((await waitForRun(apiKey, first.id)).state).toBe("succeeded");
  });

  it("a handed-off task can be completed", async () => {
    const { apiKey, queueId } = await setup("/ok/unused-handoff");
    const legal = await api("/api/v1/queues", { key: apiKey, body: { name: "legal", slaSeconds: 7200, priority: 3 } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        {
          id: "to-legal",
          kind: "handoff",
          config: { queue_id: "legal", note: "court order?", response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["escalated", "no_action"] } } } },
        },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "to-legal"), edge("to-legal", "handed_off", "done")],
    });
    const run = await startRun(apiKey, version.id);
    // The run does not wait for the handoff, and its end leaves the handed-off task open.
    expect((await waitForRun(apiKey, run.id)).state).toBe("succeeded");
    expect((await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items).toEqual([]);
    const task = (await api(`/api/v1/queues/${legal.body.id}/tasks`, { key: apiKey })).body.items[0];
    expect(task).toMatchObject({ taskType: "handoff", state: "open", runId: run.id, context: null });

    expect((await api(`/api/v1/queues/${legal.body.id}/next`, { key: apiKey, body: { reviewer: "counsel" } })).body.id).toBe(task.id);
    const invalid = await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "counsel", response: { outcome: "shrug" } } });
    expect(invalid.status).toBe(422);
    const done = await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "counsel", response: { outcome: "escalated" } } });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ state: "completed", completedBy: "counsel", response: { outcome: "escalated" } });
    const again = await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "counsel", response: { outcome: "escalated" } } });
    expect(again.status).toBe(200);

    const handoff = await env.DB.prepare("SELECT completed_by AS completedBy, outcome, response_digest AS digest FROM handoffs WHERE task_id = ?").bind(task.id).first<Record<string, string>>();
    // The key's own reviewer identity (`api_key:<id>/counsel`): the name is a label within the key.
    expect(handoff).toMatchObject({ completedBy: expect.stringMatching(/^api_key:[^/]+\/counsel$/u), outcome: "escalated" });
    // Keyed: a reader of the trail cannot hash candidate answers to recover it.
    expect(handoff!.digest).toMatch(/^hmac-sha256:[0-9a-f]{64}$/u);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'task.completed' AND target_id = ?", task.id)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'handoff.completed' AND target_id = ?", `${run.id}:to-legal:main:1:handoff`)).toBe(1);
    // No run is woken: nothing waited for it.
    expect(await count("SELECT COUNT(*) AS n FROM workflow_events WHERE run_id = ?", run.id)).toBe(0);
  });
});
