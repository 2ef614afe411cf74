// A label change is a signed Standard Webhook (label.applied, label.negated, label.expired) to the
// endpoints that subscribe to it, once per change: a rule's repeat hit or a retried event sends
// nothing more. The receiver peer (test/peers/webhook-receiver.ts) verifies every signature.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepExpiredLabels } from "../src/detection";
import { api, newInstallation, receiverLog, until } from "./helpers";

async function subscribedEndpoint(apiKey: string, path: string) {
  const endpoint = await api("/api/v1/webhook-endpoints", {
    key: apiKey,
    body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["label.applied", "label.negated", "label.expired"] },
  });
  expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
  return endpoint.body.id as string;
}

async function deploy(apiKey: string, rules: unknown[]) {
  const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: `hooks-${crypto.randomUUID()}` } });
  const version = await api(`/api/v1/rule-sets/${set.body.id}/versions`, { key: apiKey, body: { rules } });
  expect(version.status, JSON.stringify(version.body)).toBe(201);
  // Labels apply in autonomous only; the gate is waived (promotion is test/detection-promotion.test.ts).
  await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: apiKey, method: "PUT", body: { minComparedHits: 0, minAgreementLow: 0 } });
  const deployed = await api(`/api/v1/rule-sets/${set.body.id}/deployment`, { key: apiKey, method: "PUT", body: { versionId: version.body.id, authorityMode: "autonomous" } });
  expect(deployed.status).toBe(200);
}

const postBy = (account: string, id = `ev-${crypto.randomUUID()}`, at = Date.now()) => ({ id, type: "post.created", occurredAt: new Date(at).toISOString(), entities: { account }, data: {} });

describe("label webhooks", () => {
  it("a rule's label is one signed label.applied however often it hits; a person's negation is label.negated; nothing reaches another installation", async () => {
    const path = "/ok/labels-applied";
    const { apiKey } = await newInstallation("label-hooks");
    const other = await newInstallation("label-hooks-other");
    await subscribedEndpoint(apiKey, path);
    const otherPath = "/ok/labels-other";
    await subscribedEndpoint(other.apiKey, otherPath);
    await deploy(apiKey, [{ id: "poster", when: "event.type == 'post.created'", outcome: { label: { entity: "account", value: "poster" } } }]);
    const retried = postBy("acct-1");
    const first = await api("/api/v1/events", { key: apiKey, body: { events: [retried, postBy("acct-1")] } });
    expect(first.status).toBe(202);
    expect(first.body.hits).toBe(2);
    // The same event again, and another hit on the labelled account: the label is refreshed, not changed.
    await api("/api/v1/events", { key: apiKey, body: { events: [retried, postBy("acct-1")] } });
    const applied = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.type === "label.applied");
      return log.length > 0 ? log : null;
    }, "label.applied delivered");
    expect(applied).toHaveLength(1);
    expect(applied[0]!.verified).toBe(true);
    expect(applied[0]!.data).toMatchObject({ change: "applied", entity: { kind: "account", id: "acct-1" }, label: "poster", expiresAt: null });
    expect(applied[0]!.data.source).toMatch(/^rule:/u);

    const negate = await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: "acct-1", label: "poster", negate: true } });
    expect(negate.status).toBe(201);
    const negated = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.type === "label.negated");
      return log.length > 0 ? log : null;
    }, "label.negated delivered");
    expect(negated[0]!.verified).toBe(true);
    expect(negated[0]!.data).toMatchObject({ change: "negated", entity: { kind: "account", id: "acct-1", key: applied[0]!.data.entity.key }, label: "poster" });
    // While the negation stands the rule does not put the label back, so nothing more is applied.
    await api("/api/v1/events", { key: apiKey, body: { events: [postBy("acct-1")] } });
    const deliveries = await api("/api/v1/webhook-deliveries", { key: apiKey });
    expect(deliveries.body.items.map((item: { eventType: string }) => item.eventType).sort()).toEqual(["label.applied", "label.negated"]);
    expect(await receiverLog(otherPath)).toEqual([]);
  });

  it("an expired label is one label.expired from the sweep; an endpoint not subscribed gets none", async () => {
    const path = "/ok/labels-expired";
    const { apiKey } = await newInstallation("label-expiry-hooks");
    await subscribedEndpoint(apiKey, path);
    const silent = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: "https://hooks.product.test/ok/labels-silent", eventTypes: ["message.send"] } });
    expect(silent.status).toBe(201);
    await deploy(apiKey, [{ id: "brief", when: "event.type == 'post.created'", outcome: { label: { entity: "account", value: "brief", expiresIn: "1h" } } }]);
    await api("/api/v1/events", { key: apiKey, body: { events: [postBy("acct-2")] } });
    await until(async () => (await receiverLog(path)).some((entry) => entry.type === "label.applied"), "label.applied delivered");
    const later = new Date(Date.now() + 2 * 3600_000);
    for (let more = 1; more === 1; ) more = (await sweepExpiredLabels(env, later)).more;
    const expired = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.type === "label.expired");
      return log.length > 0 ? log : null;
    }, "label.expired delivered");
    expect(expired).toHaveLength(1);
    expect(expired[0]!.verified).toBe(true);
    expect(expired[0]!.data).toMatchObject({ change: "expired", entity: { kind: "account" }, label: "brief" });
    expect(expired[0]!.data.entity.id).toBeUndefined();
    // A second sweep finds nothing left to expire.
    await sweepExpiredLabels(env, later);
    const deliveries = await api("/api/v1/webhook-deliveries", { key: apiKey });
    expect(deliveries.body.items.filter((item: { eventType: string }) => item.eventType === "label.expired")).toHaveLength(1);
    expect(deliveries.body.items.every((item: { endpointId: string }) => item.endpointId !== silent.body.id)).toBe(true);
  });
});
