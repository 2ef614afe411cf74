// Egress: where the platform's own fetch() may go. Component egress checks every
// redirect hop; webhook endpoints refuse loopback, private, link-local and metadata targets at
// creation and again at delivery; ALLOW_LOCAL_EGRESS=true (local development only) permits
// loopback and plain http.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Actor } from "../src/auth";
import { attemptDelivery, createEndpoint, deliveryStatement } from "../src/enforcement/webhooks";
import { egressRefusal } from "../src/lib/egress";
import { runSchedule, SWEEPS } from "../src/schedule";
import { api, edge, newInstallation, publish, type ReceiverLogEntry, startRun, waitForRun } from "./helpers";

const enrichGraph = (componentVersionId: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "lookup", kind: "enrichment", errorPort: "error", timeoutPolicy: { retries: 0 }, config: { component_version_id: componentVersionId }, inputMapping: {} },
    { id: "done", kind: "end", config: { terminal_code: "enriched" } },
    { id: "failed", kind: "end", config: { terminal_code: "failed" } },
  ],
  edges: [edge("start", "success", "lookup"), edge("lookup", "success", "done"), edge("lookup", "error", "failed")],
});

/** A component that fetches `url` and swallows any failure, returning what it saw. */
async function runFetching(apiKey: string, url: string, allowedHosts: string[], storedHosts?: string[]) {
  const source = `export async function run() {
    try {
      const response = await fetch(${JSON.stringify(url)});
      return { status: response.status, body: response.ok ? await response.json() : null };
    } catch (error) { return { caught: String(error) }; }
  }`;
  const created = await api("/api/v1/components", { key: apiKey, body: { name: `c-${crypto.randomUUID()}` } });
  const version = await api(`/api/v1/components/${created.body.id}/versions`, { key: apiKey, body: { source, allowedHosts, maxSubrequests: 5 } });
  expect(version.status).toBe(201);
  // A version stored before its hosts were checked at publish: the call-time check alone stands.
  if (storedHosts) await env.DB.prepare("UPDATE component_versions SET allowed_hosts_json = ?2 WHERE id = ?1").bind(version.body.id, JSON.stringify(storedHosts)).run();
  const workflow = await publish(apiKey, enrichGraph(version.body.id));
  return waitForRun(apiKey, (await startRun(apiKey, workflow.id)).id);
}

describe("component egress", () => {
  it("refuses a redirect from a declared host to an undeclared one (redirect-based allowlist bypass)", async () => {
    const { apiKey } = await newInstallation();
    const run = await runFetching(apiKey, `https://allowed.test/redirect?to=${encodeURIComponent("https://forbidden.test/lookup")}`, ["allowed.test"]);
    expect(run.output.terminalCode).toBe("failed");
    const step = run.steps.find((s: any) => s.nodeId === "lookup");
    expect(step.errorCode).toBe("component.egress_denied");
  });

  it("still follows a redirect between declared hosts", async () => {
    const { apiKey } = await newInstallation();
    const run = await runFetching(apiKey, `https://allowed.test/redirect?to=${encodeURIComponent("https://forbidden.test/lookup")}`, ["allowed.test", "forbidden.test"]);
    expect(run.output.terminalCode).toBe("enriched");
    expect(run.steps.find((s: any) => s.nodeId === "lookup").output).toMatchObject({ data: { status: 200, body: { reachedAs: "forbidden.test" } }, subrequests: 2 });
  });

  it("refuses a declared metadata address at publish, and at call time directly or through a redirect (SSRF to cloud metadata)", async () => {
    const { apiKey } = await newInstallation();
    const component = await api("/api/v1/components", { key: apiKey, body: { name: `c-${crypto.randomUUID()}` } });
    const declared = await api(`/api/v1/components/${component.body.id}/versions`, { key: apiKey, body: { source: "export async function run() { return {}; }", allowedHosts: ["169.254.169.254"] } });
    expect([declared.status, declared.body.error?.code, declared.body.error?.details?.reason]).toEqual([422, "component.host_not_allowed", "metadata_host"]);
    // Stored as declared (before the publish check), and still refused: the address, not the allowlist, decides.
    const direct = await runFetching(apiKey, "https://169.254.169.254/latest/meta-data/", ["allowed.test"], ["169.254.169.254"]);
    expect(direct.steps.find((s: any) => s.nodeId === "lookup").errorCode).toBe("component.egress_denied");
    const bounced = await runFetching(apiKey, `https://allowed.test/redirect?to=${encodeURIComponent("https://169.254.169.254/latest")}`, ["allowed.test"], ["allowed.test", "169.254.169.254"]);
    expect(bounced.steps.find((s: any) => s.nodeId === "lookup").errorCode).toBe("component.egress_denied");
  });
});

describe("webhook endpoints", () => {
  it("refuses loopback, private, link-local and metadata URLs, in every spelling (SSRF through a webhook endpoint)", async () => {
    const { apiKey } = await newInstallation();
    for (const [url, reason] of [
      ["https://127.0.0.1/hook", "loopback_address"],
      ["https://2130706433/hook", "loopback_address"],
      ["https://0x7f.0.0.1/hook", "loopback_address"],
      ["https://localhost/hook", "loopback_address"],
      ["https://api.localhost/hook", "loopback_address"],
      ["https://[::1]/hook", "loopback_address"],
      ["https://[::ffff:127.0.0.1]/hook", "loopback_address"],
      ["https://10.0.0.8/hook", "private_address"],
      ["https://192.168.1.10/hook", "private_address"],
      ["https://[fd12::1]/hook", "private_address"],
      ["https://169.254.169.254/latest/meta-data", "metadata_host"],
      ["https://metadata.google.internal/computeMetadata/v1/", "metadata_host"],
      ["https://0.0.0.0/hook", "reserved_address"],
      ["http://hooks.product.test/plain", "scheme_not_allowed"],
    ]) {
      const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url } });
      expect({ url, status: created.status, code: created.body.error?.code, reason: created.body.error?.details?.reason }).toEqual({ url, status: 422, code: "webhook_endpoint.url_not_allowed", reason });
    }
    const publicHook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: "https://hooks.product.test/ok" } });
    expect(publicHook.status).toBe(201);
  });

  it("permits loopback and plain http only with ALLOW_LOCAL_EGRESS=true (local development)", async () => {
    const { id: installationId } = await newInstallation();
    const actor: Actor = { installationId, scopes: ["admin"], audit: { type: "admin", id: "test" } };
    expect(egressRefusal("http://127.0.0.1:8788/hook", { allowLocal: false })?.reason).toBe("scheme_not_allowed");
    expect(egressRefusal("https://127.0.0.1:8788/hook", { allowLocal: false })?.reason).toBe("loopback_address");
    const local = await createEndpoint({ ...env, ALLOW_LOCAL_EGRESS: "true" } as Env, actor, { url: "http://127.0.0.1:8788/hook" });
    expect(local.url).toBe("http://127.0.0.1:8788/hook");
    // Private and metadata addresses stay refused even for local development.
    await expect(createEndpoint({ ...env, ALLOW_LOCAL_EGRESS: "true" } as Env, actor, { url: "http://169.254.169.254/" })).rejects.toMatchObject({ code: "webhook_endpoint.url_not_allowed" });
  });

  it("refuses at delivery time an endpoint whose URL is not allowed here (stored rows, flag turned off)", async () => {
    const { id: installationId } = await newInstallation();
    const actor: Actor = { installationId, scopes: ["admin"], audit: { type: "admin", id: "test" } };
    const endpoint = await createEndpoint({ ...env, ALLOW_LOCAL_EGRESS: "true" } as Env, actor, { url: "http://localhost:9/hook" });
    const delivery = await deliveryStatement(env, { installationId, endpointId: endpoint.id, eventType: "message.send", sourceType: "resend", sourceId: "test", data: { hello: 1 }, at: new Date().toISOString() });
    await delivery.statement.run();
    await attemptDelivery(env, delivery.id, async () => []);
    const row = await env.DB.prepare("SELECT state, last_error AS lastError, attempts FROM webhook_deliveries WHERE id = ?1").bind(delivery.id).first();
    expect(row).toEqual({ state: "dead", lastError: "egress_refused", attempts: 1 });
  });
});

/** Addresses no configured URL may name: loopback, private, link-local and IPv4-mapped IPv6, each with the reason given. */
const FORBIDDEN: Array<[url: string, reason: string]> = [
  ["https://127.0.0.1/egress", "loopback_address"],
  ["https://10.1.2.3/egress", "private_address"],
  ["https://169.254.10.20/egress", "private_address"],
  ["https://[fe80::1]/egress", "private_address"],
  ["https://[::ffff:10.0.0.1]/egress", "private_address"],
  ["https://[::ffff:127.0.0.1]/egress", "loopback_address"],
  ["https://[::ffff:a9fe:a9fe]/egress", "metadata_host"],
];

/** Everything the receiver peer got (it answers every host no other peer serves, private addresses included). */
async function receivedUnder(prefix: string): Promise<ReceiverLogEntry[]> {
  const all = (await (await env.RECEIVER.fetch("http://receiver/_control/log")).json()) as ReceiverLogEntry[];
  return all.filter((entry) => entry.path.startsWith(prefix));
}
const modelReceivedUnder = async (prefix: string): Promise<unknown[]> => (await (await fetch(`https://model.test/_control/log?prefix=${encodeURIComponent(prefix)}`)).json()) as unknown[];

describe("every configured URL", () => {
  it("refuses loopback, private, link-local and mapped addresses at creation: AI providers, the Transparency Database, connectors, webhooks, component hosts, redress links", async () => {
    const { apiKey } = await newInstallation();
    const component = await api("/api/v1/components", { key: apiKey, body: { name: `c-${crypto.randomUUID()}` } });
    for (const [url, reason] of FORBIDDEN) {
      const host = new URL(url).hostname;
      const attempts: Array<[string, { status: number; body: any }, number, string]> = [
        ["AI provider baseUrl", await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: url, model: "fixed-remove", apiKey: "sk-test-model-key" } }), 422, "ai_provider.base_url_not_allowed"],
        ["Transparency Database baseUrl", await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { baseUrl: url, token: "tdb-egress-token", enabled: true } }), 422, "transparency_db.base_url_not_allowed"],
        ["connector baseUrl", await api("/api/v1/connectors", { key: apiKey, body: { kind: "mastodon", name: `m-${crypto.randomUUID()}`, baseUrl: url, accessToken: "egress-token-0123" } }), 422, "connector.base_url_not_allowed"],
        ["webhook url", await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url } }), 422, "webhook_endpoint.url_not_allowed"],
        ["redress complaintUrl", await api("/api/v1/redress-settings", { method: "PUT", key: apiKey, body: { complaintUrl: url } }), 422, "redress.url_not_allowed"],
        ["redress settlement body", await api("/api/v1/redress-settings", { method: "PUT", key: apiKey, body: { settlementBodies: [{ name: "ODS", url }] } }), 422, "redress.url_not_allowed"],
      ];
      // A component declares host names; an IPv6 literal is not one (400 by the schema), the rest are checked as addresses.
      const declared = await api(`/api/v1/components/${component.body.id}/versions`, { key: apiKey, body: { source: "export async function run() { return {}; }", allowedHosts: [host] } });
      if (host.startsWith("[")) attempts.push(["component host", declared, 400, "request.invalid"]);
      else attempts.push(["component host", declared, 422, "component.host_not_allowed"]);
      for (const [what, response, status, code] of attempts) {
        expect({ what, url, status: response.status, code: response.body.error?.code }).toEqual({ what, url, status, code });
        if (status === 422) expect(response.body.error.details?.reason, `${what} ${url}`).toBe(reason);
      }
    }
  });

  it("refuses an AI provider's stored private base URL at call time: the proposal takes its error port and nothing leaves", async () => {
    const { apiKey } = await newInstallation();
    const tag = `/v1/egress-${crypto.randomUUID()}`;
    const provider = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: `https://model.test${tag}`, model: "fixed-remove", apiKey: "sk-test-model-key" } });
    expect(provider.status).toBe(201);
    // A row from before the check (or ALLOW_LOCAL_EGRESS turned off since) names an IPv4-mapped private address.
    await env.DB.prepare("UPDATE ai_providers SET base_url = ?2 WHERE id = ?1").bind(provider.body.id, `https://[::ffff:10.0.0.7]${tag}`).run();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "propose", kind: "ai_proposal", errorPort: "error", timeoutPolicy: { retries: 0 }, config: { provider_id: provider.body.id, instructions: "Classify.", result_ports: ["remove", "keep"] }, inputMapping: { text: "input.text" } },
        { id: "removed", kind: "end", config: { terminal_code: "remove" } },
        { id: "kept", kind: "end", config: { terminal_code: "keep" } },
        { id: "failed", kind: "end", config: { terminal_code: "error" } },
      ],
      edges: [edge("start", "success", "propose"), edge("propose", "remove", "removed"), edge("propose", "keep", "kept"), edge("propose", "error", "failed")],
    });
    const run = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { text: "a scam" } })).id);
    expect(run.output.terminalCode).toBe("error");
    expect(run.steps.find((s: any) => s.nodeId === "propose").errorCode).toBe("ai_provider.egress_refused");
    expect(await receivedUnder(tag)).toEqual([]);
    expect(await modelReceivedUnder(tag)).toEqual([]);
  });

  it("refuses a stored private Transparency Database base URL at call time: no statement and no token leave", async () => {
    const { apiKey } = await newInstallation();
    const token = `tdb-egress-${crypto.randomUUID()}`;
    expect((await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { baseUrl: "https://tdb.test", token, enabled: true } })).status).toBe(200);
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
    const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: report.body.id, outcome: "removed_scam", restrictions: { visibility: ["content_removed"] }, statement: "Removed: a scam advert." } });
    expect(decision.status).toBe(201);
    const tag = `/tdb-${crypto.randomUUID()}`;
    const installationId = (await env.DB.prepare("SELECT installation_id AS id FROM decisions WHERE id = ?1").bind(decision.body.id).first<{ id: string }>())!.id;
    await env.DB.prepare("UPDATE tdb_settings SET base_url = ?2 WHERE installation_id = ?1").bind(installationId, `https://[::ffff:192.168.0.9]${tag}`).run();
    await runSchedule(
      env,
      { cron: "* * * * *", scheduledTime: Date.now() },
      SWEEPS.filter((sweep) => sweep.name === "enforcement.transparency_db"),
    );
    expect(await receivedUnder(tag)).toEqual([]);
    const tdbCalls = (await (await env.TDB_PEER.fetch(`http://tdb/_control/log?token=${token}`)).json()) as unknown[];
    expect(tdbCalls).toEqual([]);
    expect((await api(`/api/v1/transparency-database/submissions/${decision.body.id}`, { key: apiKey })).body.state).toBe("pending");
  });

  it("never follows a model endpoint's redirect, so the API key stays with the configured address", async () => {
    const { apiKey } = await newInstallation();
    const tag = `/v1/redirect-${crypto.randomUUID()}`;
    const provider = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: `https://model.test${tag}`, model: "redirect", apiKey: "sk-test-model-key" } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "propose", kind: "ai_proposal", errorPort: "error", timeoutPolicy: { retries: 0 }, config: { provider_id: provider.body.id, instructions: "Classify.", result_ports: ["remove", "keep"] }, inputMapping: { text: "input.text" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "propose"), edge("propose", "remove", "done"), edge("propose", "keep", "done"), edge("propose", "error", "done")],
    });
    const run = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { text: "hello" } })).id);
    expect(run.steps.find((s: any) => s.nodeId === "propose").errorCode).toBe("ai_provider.redirect_refused");
    // The first request reached the configured address; the redirect's target never got one.
    expect(await modelReceivedUnder(tag)).toHaveLength(1);
    expect(await modelReceivedUnder("/v1/followed/")).toEqual([]);
  });
});
