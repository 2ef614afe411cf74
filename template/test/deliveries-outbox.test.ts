// Webhook delivery as an outbox and the receiver's answers that steer it: the
// scheduled sweep sends what the queue never got, at most once; 410 disables the endpoint; 429's
// `retry-after` is honoured; a receiver that hangs is timed out and retried. The receiver peer
// (test/peers/webhook-receiver.ts) verifies every signature with the standardwebhooks library.
import { createExecutionContext, createMessageBatch, createScheduledController, env, getQueueResult } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../src";
import { deliveryStatement, enqueueDeliveries, parseRetryAfter, sweepPendingDeliveries } from "../src/enforcement/webhooks";
import { runSchedule, SWEEPS } from "../src/schedule";
import { attemptRowsSql } from "../src/lib/delivery-attempts";
import { api, newInstallation, receiverLog, until } from "./helpers";

/** An installation with one endpoint whose secret the receiver knows. */
async function setup(path: string) {
  const { id: installationId, apiKey } = await newInstallation();
  const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
  expect(created.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: new URL(`https://x${path}`).pathname, secret: created.body.secret }) });
  return { installationId, apiKey, endpointId: created.body.id as string };
}

/** A committed pending delivery, as a batch leaves it; `queued: false` is the failure after commit. */
async function commitDelivery(installationId: string, endpointId: string, options: { ageMs?: number; queued?: boolean } = {}): Promise<string> {
  const delivery = await deliveryStatement(env, {
    installationId,
    endpointId,
    eventType: "message.send",
    sourceType: "message",
    sourceId: `msg-${crypto.randomUUID()}`,
    data: { text: "hello" },
    at: new Date(Date.now() - (options.ageMs ?? 0)).toISOString(),
  });
  await env.DB.batch([delivery.statement]);
  if (options.queued ?? true) await enqueueDeliveries(env, [delivery.id]);
  return delivery.id;
}

const deliveryRow = (id: string) =>
  env.DB.prepare("SELECT state, attempts, last_status AS lastStatus, last_error AS lastError, next_attempt_at AS nextAttemptAt FROM webhook_deliveries WHERE id = ?")
    .bind(id)
    .first<{ state: string; attempts: number; lastStatus: number | null; lastError: string | null; nextAttemptAt: string | null }>();

const attemptsOf = async (id: string) =>
  (
    await env.DB.prepare(`SELECT attempt, status_code AS statusCode, error, duration_ms AS durationMs, started_at AS startedAt FROM (${attemptRowsSql("d.id = ?1", "attempt")})`)
      .bind(id)
      .all<{ attempt: number; statusCode: number | null; error: string | null; durationMs: number; startedAt: string }>()
  ).results;

const finished = (id: string) => until(async () => ((await deliveryRow(id))?.state !== "pending" ? deliveryRow(id) : null), `delivery ${id} to finish`);

/** The Worker's own `scheduled` handler, as the Cron Trigger (or scripts/local-cron.mjs) calls it. */
async function fireSchedule() {
  await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }), env);
}

describe("the outbox: deliveries lost after a commit", () => {
  it("a delivery whose queueing failed after its batch committed is sent by the scheduled sweep", async () => {
    const { installationId, endpointId } = await setup("/ok/outbox-lost");
    const id = await commitDelivery(installationId, endpointId, { ageMs: 2 * 60_000, queued: false });
    await fireSchedule();
    expect(await finished(id)).toMatchObject({ state: "delivered", attempts: 1 });
    const log = await receiverLog("/ok/outbox-lost");
    expect(log.filter((entry) => entry.webhookId === id && entry.status === 200 && entry.verified)).toHaveLength(1);
  });

  it("sweeps are idempotent: twice in a row queue once, a delivered delivery is never sent again", async () => {
    const { installationId, endpointId } = await setup("/ok/outbox-twice");
    const id = await commitDelivery(installationId, endpointId, { ageMs: 5 * 60_000, queued: false });
    const fresh = await commitDelivery(installationId, endpointId, { queued: false }); // not overdue yet
    const first = await sweepPendingDeliveries(env);
    const second = await sweepPendingDeliveries(env);
    expect(first.requeued).toBeGreaterThanOrEqual(1);
    expect(second.requeued).toBe(0);
    expect((await deliveryRow(fresh))?.state).toBe("pending");
    await finished(id);
    // A stray message for the delivered delivery (a late duplicate) is acked without a request.
    const batch = createMessageBatch("safest-tools-deliveries", [{ id: "stray", timestamp: new Date(), attempts: 1, body: { deliveryId: id } }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["stray"]);
    expect((await sweepPendingDeliveries(env, new Date(Date.now() + 10 * 60_000))).requeued).toBeGreaterThanOrEqual(1); // only `fresh`, later
    await finished(fresh);
    const log = await receiverLog("/ok/outbox-twice");
    expect(log.filter((entry) => entry.webhookId === id)).toHaveLength(1);
    expect(log.filter((entry) => entry.webhookId === fresh)).toHaveLength(1);
  });

  it("two messages for one pending delivery at once make one attempt (the claim)", async () => {
    const { installationId, endpointId } = await setup("/ok/outbox-race");
    const id = await commitDelivery(installationId, endpointId, { queued: false });
    const batches = ["a", "b"].map((name) => createMessageBatch("safest-tools-deliveries", [{ id: name, timestamp: new Date(), attempts: 1, body: { deliveryId: id } }]));
    const contexts = batches.map(() => createExecutionContext());
    await Promise.all(batches.map((batch, index) => worker.queue(batch, env, contexts[index]!)));
    expect(await deliveryRow(id)).toMatchObject({ state: "delivered", attempts: 1 });
    expect(await attemptsOf(id)).toHaveLength(1);
    expect((await receiverLog("/ok/outbox-race")).filter((entry) => entry.webhookId === id)).toHaveLength(1);
  });

  it("resend of a pending delivery puts the same delivery back on the queue, without a copy", async () => {
    const { installationId, apiKey, endpointId } = await setup("/ok/outbox-resend");
    const id = await commitDelivery(installationId, endpointId, { queued: false });
    const resent = await api(`/api/v1/webhook-deliveries/${id}/resend`, { key: apiKey, method: "POST" });
    expect(resent.status).toBe(202);
    expect(resent.body).toMatchObject({ id, requeued: true });
    expect(await finished(id)).toMatchObject({ state: "delivered" });
    expect((await api("/api/v1/webhook-deliveries", { key: apiKey })).body.items).toHaveLength(1);
    const again = await api(`/api/v1/webhook-deliveries/${id}/resend`, { key: apiKey, method: "POST" });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(id);
  });

  it("the schedule runs every sweep even when one fails, and records each outcome", async () => {
    const run = await runSchedule(env, { cron: "* * * * *", scheduledTime: Date.now() }, [
      {
        name: "test.failing",
        run: async () => {
          throw new Error("test.sweep_exploded");
        },
      },
      { name: "test.counting", run: async () => ({ counted: 3 }) },
    ]);
    expect(run.ok).toBe(false);
    expect(run.sweeps).toMatchObject([
      { name: "test.failing", ok: false, error: "test.sweep_exploded" },
      { name: "test.counting", ok: true, summary: { counted: 3 } },
    ]);
    const real = await runSchedule(env, { cron: "* * * * *", scheduledTime: Date.now() });
    expect(real.sweeps.map((sweep) => [sweep.name, sweep.ok])).toEqual(SWEEPS.map((sweep) => [sweep.name, true]));
    expect(real.sweeps.map((sweep) => sweep.name)).toEqual(expect.arrayContaining(["enforcement.outbox", "audit.seal_and_verify"]));
  });
});

describe("what the receiver answers", () => {
  it("410 Gone disables the endpoint (audited) and nothing more is sent to it", async () => {
    const { installationId, apiKey, endpointId } = await setup("/gone/endpoint");
    const id = await commitDelivery(installationId, endpointId);
    expect(await finished(id)).toMatchObject({ state: "dead", attempts: 1, lastStatus: 410 });
    const endpoint = (await api("/api/v1/webhook-endpoints", { key: apiKey })).body.items.find((e: { id: string }) => e.id === endpointId);
    expect(endpoint.state).toBe("disabled");
    const audit = await api(`/api/v1/audit-events?action=webhook_endpoint.disabled&targetId=${endpointId}`, { key: apiKey });
    expect(audit.body.items).toHaveLength(1);
    expect(audit.body.items[0]).toMatchObject({ actor: { type: "system", id: "webhooks" }, details: { reason: "gone_410", deliveryId: id } });
    const next = await commitDelivery(installationId, endpointId);
    expect(await finished(next)).toMatchObject({ state: "dead", attempts: 1, lastStatus: null, lastError: "endpoint_disabled" });
    expect(await receiverLog("/gone/endpoint")).toHaveLength(1);
  });

  it("429 with retry-after: the next attempt is not made before the delay", async () => {
    const { installationId, endpointId } = await setup("/throttle/seconds?retryAfter=2&times=1");
    const id = await commitDelivery(installationId, endpointId);
    const throttled = await until(async () => ((await deliveryRow(id))?.attempts === 1 ? deliveryRow(id) : null), "the first attempt");
    const [first] = await attemptsOf(id);
    expect(first).toMatchObject({ attempt: 1, statusCode: 429 });
    // Due no sooner than retry-after after the first attempt (its claim was released with it).
    expect(Date.parse(throttled!.nextAttemptAt!)).toBeGreaterThanOrEqual(Date.parse(first!.startedAt) + 2_000);
    expect(await finished(id)).toMatchObject({ state: "delivered", attempts: 2 });
    const history = await attemptsOf(id);
    expect(history.map((a) => a.statusCode)).toEqual([429, 200]);
    expect(Date.parse(history[1]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(first!.startedAt) + 2_000);
  });

  it("retry-after as an HTTP-date is honoured too", async () => {
    const now = Date.parse("2026-05-01T12:00:00Z");
    expect(parseRetryAfter("120", now)).toBe(120);
    expect(parseRetryAfter("Fri, 01 May 2026 12:00:30 GMT", now)).toBe(30);
    expect(parseRetryAfter("Fri, 01 May 2026 11:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeNull();
    const { installationId, endpointId } = await setup("/throttle/date?retryAfter=3&times=1&date=1");
    const id = await commitDelivery(installationId, endpointId);
    expect(await finished(id)).toMatchObject({ state: "delivered", attempts: 2 });
    const history = await attemptsOf(id);
    // An HTTP-date has whole seconds: at least 2 of the 3 seconds remain when it is read.
    expect(Date.parse(history[1]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(history[0]!.startedAt) + 2_000);
  });

  it("a receiver that hangs is timed out (WEBHOOK_TIMEOUT_SECONDS) and the delivery retried", async () => {
    const { installationId, endpointId } = await setup("/hang/once?times=1");
    const id = await commitDelivery(installationId, endpointId);
    expect(await finished(id)).toMatchObject({ state: "delivered", attempts: 2 });
    const history = await attemptsOf(id);
    expect(history.map((a) => [a.statusCode, a.error])).toEqual([
      [null, "timeout"],
      [200, null],
    ]);
    const log = await receiverLog("/hang/once");
    expect(log.map((entry) => entry.status)).toEqual(["hung", 200]);
    expect(new Set(log.map((entry) => entry.webhookId))).toEqual(new Set([id]));
  });
});
