// An autonomous action whose first attempt (sent by the host that wrote it, leased at birth) is
// delivered while prepareAction still waits for it leaves by its applied port in that same call:
// the run never waits for the delivery's signal nor calls back to complete the action. Proven by
// forcing the timeout of the step that would complete it after the wait, in the Workflows engine:
// a run that went that way fails there; this one never reaches it. A first attempt that fails still goes the waiting way (retried by the queue,
// the run woken when it is delivered).
import { env, introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openPersonalData, sealPersonalData, warmSealingKey } from "../src/cases/reports/report-crypto";
import { api, newInstallation, publish, removePostGraph, startRun, waitForRun } from "./helpers";

async function setup(path: string) {
  const { apiKey } = await newInstallation();
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: new URL(`https://x${path}`).pathname, secret: hook.body.secret }) });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } })).status).toBe(201);
  return { apiKey, version: await publish(apiKey, removePostGraph) };
}

describe("an autonomous action's first attempt, awaited by its node", () => {
  it("delivered at once, the node takes its applied port in the call that sent it: no wait for the delivery's signal, no later step to complete it", async () => {
    const { apiKey, version } = await setup("/ok/first-attempt-awaited");
    await using introspector = await introspectWorkflow(env.WORKFLOWS);
    // The step that completes the action after a wait would time out (and the action fail).
    await introspector.modifyAll(async (m) => {
      await m.disableRetryDelays();
      await m.forceStepTimeout({ name: "remove:main:1:complete:1" });
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId: "p1" } })).id);
    expect(done.output.terminalCode).toBe("applied");
    const proposal = (await api("/api/v1/action-proposals", { key: apiKey })).body.items[0];
    expect(proposal).toMatchObject({ state: "applied" });
  });

  it("a first attempt that fails is still retried by the queue, and the waiting run is woken when it is delivered", async () => {
    const { apiKey, version } = await setup("/flaky/first-attempt-retried?failures=1");
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId: "p2" } })).id);
    expect(done.output.terminalCode).toBe("applied");
    const [delivery] = (await api("/api/v1/webhook-deliveries", { key: apiKey })).body.items;
    const detail = (await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey })).body;
    expect(detail.history.map((a: { statusCode: number; via: string }) => [a.statusCode, a.via])).toEqual([
      [500, "inline"],
      [200, "queue"],
    ]);
  });
});

describe("the sealing key of an action's delivery, resolved beside the node's reads", () => {
  /** The test's env with its D1 binding counting the statements and batches sent through it. */
  function countingEnv() {
    const sent = { calls: 0 };
    const db = new Proxy(env.DB, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (property === "prepare" || property === "batch" || property === "exec") sent.calls += 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    return { env: { ...env, DB: db } as typeof env, sent };
  }

  it("once warmed (warmSealingKey, as prepare does while its reads are in flight), sealing a delivery's payload sends nothing to D1; unwarmed, a period's first seal does", async () => {
    const { id: installationId } = await newInstallation("seal-warm");
    // Periods no seal of this installation used yet, so neither isolate cache holds their key.
    const warmedAt = new Date(Date.UTC(2031, 4, 10));
    const coldAt = new Date(Date.UTC(2031, 6, 10));
    await warmSealingKey(env, installationId, "period", warmedAt);
    const warmed = countingEnv();
    const sealed = await sealPersonalData(warmed.env, installationId, "webhook_delivery:msg_warm", { data: { postId: "p1" } }, { at: warmedAt });
    expect(warmed.sent.calls).toBe(0);
    expect(await openPersonalData(env, installationId, "webhook_delivery:msg_warm", sealed.sealed)).toEqual({ data: { postId: "p1" } });
    const cold = countingEnv();
    await sealPersonalData(cold.env, installationId, "webhook_delivery:msg_cold", { data: { postId: "p2" } }, { at: coldAt });
    expect(cold.sent.calls).toBeGreaterThan(0);
  });
});
