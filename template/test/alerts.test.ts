// Alerts: SLA breaches, dead-lettered deliveries, a spike of repair_required runs
// and a failed full audit verification are pushed as signed Standard Webhooks (`alert.*`) to the
// endpoint the installation's alert settings name — each once. The receiver peer
// (test/peers/webhook-receiver.ts) verifies every signature with the standardwebhooks library.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepAuditChains } from "../src/audit";
import { sweepAlerts } from "../src/operations";
import { api, edge, newInstallation, publish, receiverLog, until } from "./helpers";

const later = (ms: number) => new Date(Date.now() + ms);
const newRunId = () => `run_${crypto.randomUUID().replace(/-/gu, "")}`;

/** An installation whose alerts go to a receiver path that knows the endpoint's secret. */
async function setup(path: string, settings: Record<string, unknown> = {}) {
  const { id: installationId, apiKey } = await newInstallation();
  const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(endpoint.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
  const put = await api("/api/v1/alerts/settings", { key: apiKey, method: "PUT", body: { endpointId: endpoint.body.id, ...settings } });
  expect(put.status).toBe(200);
  return { installationId, apiKey, endpointId: endpoint.body.id as string };
}

const trivialGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "done")],
};

describe("alert settings", () => {
  it("name an endpoint of the installation; another installation's endpoint is a 404; changes are audited", async () => {
    const a = await newInstallation();
    const b = await newInstallation();
    const foreign = await api("/api/v1/webhook-endpoints", { key: b.apiKey, body: { url: "https://hooks.product.test/ok/alerts-foreign" } });
    const own = await api("/api/v1/webhook-endpoints", { key: a.apiKey, body: { url: "https://hooks.product.test/ok/alerts-own" } });
    expect((await api("/api/v1/alerts/settings", { key: a.apiKey })).body).toMatchObject({ endpointId: null, kinds: ["sla_breached", "delivery_dead", "repair_spike", "audit_verify_failed"], repairSpikeThreshold: 10 });
    const refused = await api("/api/v1/alerts/settings", { key: a.apiKey, method: "PUT", body: { endpointId: foreign.body.id } });
    expect(refused.status).toBe(404);
    expect(refused.body.error.code).toBe("webhook_endpoint.not_found");
    const invalid = await api("/api/v1/alerts/settings", { key: a.apiKey, method: "PUT", body: { endpointId: own.body.id, kinds: ["everything"] } });
    expect(invalid.status).toBe(400);
    const put = await api("/api/v1/alerts/settings", { key: a.apiKey, method: "PUT", body: { endpointId: own.body.id, kinds: ["repair_spike"], repairSpikeThreshold: 3 } });
    expect(put.body).toMatchObject({ endpointId: own.body.id, kinds: ["repair_spike"], repairSpikeThreshold: 3 });
    expect((await api("/api/v1/alerts/settings", { key: a.apiKey })).body).toMatchObject({ endpointId: own.body.id, repairSpikeThreshold: 3 });
    const audited = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ? AND action = 'alert_settings.updated'").bind(a.id).first<{ n: number }>();
    expect(audited?.n).toBe(1);
  });
});

describe("alerts raised by the schedule", () => {
  it("an SLA breach: one signed alert.sla_breached with the count per queue, and nothing the second time", async () => {
    const path = "/ok/alerts-sla";
    const { installationId, apiKey } = await setup(path);
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "urgent", slaSeconds: 60 } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "urgent", response_schema: { type: "object" }, timeout_seconds: 86_400 } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
    });
    await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {} } });
    const task = await until(async () => (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items?.[0], "the task");
    // The task is due in a minute; five minutes on, it is breached.
    const first = await sweepAlerts(env, later(5 * 60_000));
    expect(first.raised).toBe(1);
    const second = await sweepAlerts(env, later(6 * 60_000));
    expect(second.raised).toBe(0);
    const [received] = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.type === "alert.sla_breached");
      return log.length > 0 ? log : null;
    }, "the alert");
    expect(received).toMatchObject({ verified: true, status: 200, data: { kind: "sla_breached", installationId, count: 1, sampleTaskIds: [task.id], queues: [{ queueId: queue.body.id, queueName: "urgent", count: 1 }] } });
    const listed = await api("/api/v1/alerts", { key: apiKey });
    expect(listed.body.items).toHaveLength(1);
    expect(listed.body.items[0]).toMatchObject({ kind: "sla_breached", details: { count: 1 } });
    await until(async () => (await api("/api/v1/alerts", { key: apiKey })).body.items[0].deliveryState === "delivered", "the delivery's state");
    const audited = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ? AND action = 'alert.raised'").bind(installationId).first<{ n: number }>();
    expect(audited?.n).toBe(1);
  });

  it("a dead-lettered delivery: one alert.delivery_dead; the alert's own deliveries never alert", async () => {
    const path = "/ok/alerts-dead";
    const { installationId, apiKey } = await setup(path, { kinds: ["delivery_dead"] });
    const gone = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: "https://hooks.product.test/gone/alerts-dead", retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
    const at = new Date(Date.now() + 1_000).toISOString();
    const deadId = `msg_${crypto.randomUUID().replace(/-/gu, "")}`;
    await env.DB.prepare(`INSERT INTO webhook_deliveries (id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, last_status, last_error, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'message.send', 'message', ?1, 'sealed', 'sha256:x', 'dead', 1, 410, 'http_410', ?4, ?4)`)
      .bind(deadId, installationId, gone.body.id, at)
      .run();
    expect((await sweepAlerts(env, later(60_000))).raised).toBe(1);
    expect((await sweepAlerts(env, later(120_000))).raised).toBe(0);
    const log = await until(async () => {
      const entries = (await receiverLog(path)).filter((entry) => entry.type === "alert.delivery_dead");
      return entries.length > 0 ? entries : null;
    }, "the alert");
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ verified: true, data: { count: 1, sampleDeliveryIds: [deadId], groups: [{ eventType: "message.send", endpointId: gone.body.id, lastError: "http_410", count: 1 }] } });
    // An alert's delivery that dies (its endpoint gone) does not raise an alert about itself.
    await env.DB.prepare("UPDATE webhook_deliveries SET state = 'dead', updated_at = ?2 WHERE installation_id = ?1 AND source_type = 'alert'").bind(installationId, later(150_000).toISOString()).run();
    expect((await sweepAlerts(env, later(180_000))).raised).toBe(0);
  });

  it("a spike of repair_required runs: one alert.repair_spike per 15 minutes, over the threshold only", async () => {
    const path = "/ok/alerts-repair";
    const { installationId, apiKey } = await setup(path, { kinds: ["repair_spike"], repairSpikeThreshold: 3 });
    const version = await publish(apiKey, trivialGraph);
    const insert = (count: number) =>
      env.DB.batch(
        Array.from({ length: count }, () =>
          env.DB.prepare(`INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, error_code, created_at, updated_at)
            VALUES (?1, ?2, ?3, 'autonomous', 'repair_required', '{}', 'expression.no_overload', ?4, ?4)`).bind(newRunId(), installationId, version.id, new Date().toISOString()),
        ),
      );
    await insert(2);
    expect((await sweepAlerts(env)).raised).toBe(0); // 2 < 3
    await insert(1);
    const now = new Date();
    expect((await sweepAlerts(env, now)).raised).toBe(1);
    expect((await sweepAlerts(env, now)).raised).toBe(0);
    const log = await until(async () => {
      const entries = (await receiverLog(path)).filter((entry) => entry.type === "alert.repair_spike");
      return entries.length > 0 ? entries : null;
    }, "the alert");
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ verified: true, data: { count: 3, threshold: 3, windowMinutes: 15, groups: [{ errorCode: "expression.no_overload", workflowVersionId: version.id, count: 3 }] } });
  });

  it("a failed full audit verification: one alert.audit_verify_failed naming where the chain broke", async () => {
    const path = "/ok/alerts-audit";
    const { installationId } = await setup(path, { kinds: ["audit_verify_failed"] });
    await sweepAuditChains(env); // sealed
    // Someone edits a sealed event in D1.
    await env.DB.prepare("UPDATE audit_events SET details_json = '{\"edited\":true}' WHERE installation_id = ? AND seq = 1").bind(installationId).run();
    await until(async () => {
      await sweepAuditChains(env);
      const row = await env.DB.prepare("SELECT last_result_json AS result FROM audit_verify_cursors WHERE installation_id = ?").bind(installationId).first<{ result: string | null }>();
      return row?.result && JSON.parse(row.result).ok === false;
    }, "the full verification to find the edit");
    expect((await sweepAlerts(env)).raised).toBe(1);
    expect((await sweepAlerts(env)).raised).toBe(0);
    const log = await until(async () => {
      const entries = (await receiverLog(path)).filter((entry) => entry.type === "alert.audit_verify_failed");
      return entries.length > 0 ? entries : null;
    }, "the alert");
    expect(log).toHaveLength(1);
    expect(log[0]!.verified).toBe(true);
    expect(log[0]!.data.firstBroken.seq).toBe(1);
    expect(typeof log[0]!.data.firstBroken.reason).toBe("string");
  });

  it("kinds not chosen are not raised", async () => {
    const path = "/ok/alerts-none";
    const { installationId, apiKey } = await setup(path, { kinds: ["audit_verify_failed"], repairSpikeThreshold: 1 });
    const version = await publish(apiKey, trivialGraph);
    await env.DB.prepare(`INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'autonomous', 'repair_required', '{}', ?4, ?4)`)
      .bind(newRunId(), installationId, version.id, new Date().toISOString())
      .run();
    await sweepAlerts(env);
    expect((await api("/api/v1/alerts", { key: apiKey })).body.items).toEqual([]);
  });
});
