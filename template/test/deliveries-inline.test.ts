// Inline first attempts: an autonomous or approved action's delivery is attempted
// right away by the host that committed it (waitUntil), through the consumer's own attempt code;
// the DELIVERIES queue carries only the retries, and the outbox sweep still recovers an inline
// attempt that was lost. The receiver peer (test/peers/webhook-receiver.ts) verifies signatures
// and counts attempts per webhook-id.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Actor } from "../src/auth";
import { decideProposal } from "../src/enforcement/actions";
import { sweepPendingDeliveries } from "../src/enforcement/webhooks";
import { api, newInstallation, publish, receiverLog, removePostGraph, startRun, until, waitForRun } from "./helpers";

type Attempt = { attempt: number; statusCode: number | null; error: string | null; via: string };

/** An installation with an endpoint on `path` whose secret the receiver knows, an action type and the graph. */
async function setup(path: string, options: { requiresApproval?: boolean } = {}) {
  const { id: installationId, apiKey } = await newInstallation();
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: new URL(`https://x${path}`).pathname, secret: hook.body.secret }) });
  const type = await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: options.requiresApproval ?? false } });
  expect(type.status).toBe(201);
  const version = await publish(apiKey, removePostGraph);
  return { installationId, apiKey, version };
}

/** The run's one delivery with its attempts (GET /webhook-deliveries/:id). */
async function deliveryOf(apiKey: string): Promise<{ id: string; state: string; attempts: number; history: Attempt[] }> {
  const [delivery] = (await api("/api/v1/webhook-deliveries", { key: apiKey })).body.items;
  expect(delivery).toBeDefined();
  return (await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey })).body;
}

async function pendingProposal(apiKey: string, runId: string) {
  return until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: { runId: string }) => p.runId === runId), "a proposal");
}

describe("an action's first delivery attempt is made inline", () => {
  it("an autonomous action is delivered by the host itself: attempt 1 is inline, the receiver gets it once", async () => {
    const { apiKey, version } = await setup("/ok/inline-autonomous");
    const run = await startRun(apiKey, version.id, { input: { postId: "p1" } });
    const done = await waitForRun(apiKey, run.id);
    expect(done.output.terminalCode).toBe("applied");
    const delivery = await deliveryOf(apiKey);
    expect(delivery).toMatchObject({ state: "delivered", attempts: 1 });
    expect(delivery.history).toEqual([expect.objectContaining({ attempt: 1, statusCode: 200, error: null, via: "inline" })]);
    const log = await receiverLog("/ok/inline-autonomous");
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ webhookId: delivery.id, verified: true, status: 200, type: "action.execute", data: { params: { postId: "p1" }, runId: run.id } });
  });

  it("an inline attempt that fails is retried by the queue, and the receiver accepts it exactly once", async () => {
    const { apiKey, version } = await setup("/flaky/inline-retry?failures=2");
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId: "p2" } })).id);
    expect(done.output.terminalCode).toBe("applied");
    const delivery = await deliveryOf(apiKey);
    expect(delivery).toMatchObject({ state: "delivered", attempts: 3 });
    expect(delivery.history.map((a) => [a.attempt, a.statusCode, a.via])).toEqual([
      [1, 500, "inline"],
      [2, 500, "queue"],
      [3, 200, "queue"],
    ]);
    const log = await receiverLog("/flaky/inline-retry");
    expect(log.map((entry) => entry.status)).toEqual([500, 500, 200]);
    expect(new Set(log.map((entry) => entry.webhookId))).toEqual(new Set([delivery.id]));
    expect(log.every((entry) => entry.verified)).toBe(true);
  });

  it("an approved proposal is delivered inline once, however many approvals race", async () => {
    const { apiKey, version } = await setup("/ok/inline-approved");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p3" } });
    const proposal = await pendingProposal(apiKey, run.id);
    expect(await receiverLog("/ok/inline-approved")).toEqual([]);
    const answers = await Promise.all([1, 2].map(() => api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod" } })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 409]);
    const done = await waitForRun(apiKey, run.id);
    expect(done.output.terminalCode).toBe("applied");
    expect(done.steps.find((s: { nodeId: string }) => s.nodeId === "remove").output).toMatchObject({ port: "applied", approvedBy: "lead-mod" });
    const delivery = await deliveryOf(apiKey);
    expect(delivery.history).toEqual([expect.objectContaining({ attempt: 1, statusCode: 200, via: "inline" })]);
    const log = await receiverLog("/ok/inline-approved");
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ webhookId: delivery.id, verified: true, data: { approvedBy: "lead-mod" } });
  });

  it("an inline attempt that was lost (its waitUntil never ran) is recovered by the outbox sweep and the run resumes", async () => {
    const { installationId, apiKey, version } = await setup("/ok/inline-lost");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p4" } });
    const proposal = await pendingProposal(apiKey, run.id);
    const actor: Actor = { installationId, scopes: ["admin"], audit: { type: "admin", id: "test" } };
    // The approval commits its delivery, but the work handed to waitUntil is dropped — as when
    // the isolate is evicted right after the response.
    const approved = await decideProposal(env, actor, proposal.id, { approve: true, approver: "mod" }, () => undefined);
    expect(approved.state).toBe("delivery_pending");
    const pending = await deliveryOf(apiKey);
    expect(pending).toMatchObject({ state: "pending", attempts: 0, history: [] });
    expect(await receiverLog("/ok/inline-lost")).toEqual([]);
    expect((await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body.state).toBe("waiting");
    // The schedule's outbox sweep, a few minutes on, finds it overdue and queues it.
    const swept = await sweepPendingDeliveries(env, new Date(Date.now() + 5 * 60_000));
    expect(swept.requeued).toBeGreaterThanOrEqual(1);
    const done = await waitForRun(apiKey, run.id);
    expect(done.output.terminalCode).toBe("applied");
    const delivery = await deliveryOf(apiKey);
    expect(delivery).toMatchObject({ id: pending.id, state: "delivered", attempts: 1 });
    expect(delivery.history).toEqual([expect.objectContaining({ attempt: 1, statusCode: 200, via: "queue" })]);
    const log = await receiverLog("/ok/inline-lost");
    expect(log.map((entry) => [entry.webhookId, entry.status])).toEqual([[pending.id, 200]]);
  });
});
