// Egress: where the platform's own fetch() may go. Component egress checks every
// redirect hop; webhook endpoints refuse loopback, private, link-local and metadata targets at
// creation and again at delivery; ALLOW_LOCAL_EGRESS=true (local development only) permits
// loopback and plain http.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Actor } from "../src/auth";
import { attemptDelivery, createEndpoint, deliveryStatement } from "../src/enforcement/webhooks";
import { egressRefusal } from "../src/lib/egress";
import { api, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

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
async function runFetching(apiKey: string, url: string, allowedHosts: string[]) {
  const source = `export async function run() {
    try {
      const response = await fetch(${JSON.stringify(url)});
      return { status: response.status, body: response.ok ? await response.json() : null };
    } catch (error) { return { caught: String(error) }; }
  }`;
  const created = await api("/api/v1/components", { key: apiKey, body: { name: `c-${crypto.randomUUID()}` } });
  const version = await api(`/api/v1/components/${created.body.id}/versions`, { key: apiKey, body: { source, allowedHosts, maxSubrequests: 5 } });
  expect(version.status).toBe(201);
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

  it("refuses a declared metadata address, directly or through a redirect (SSRF to cloud metadata)", async () => {
    const { apiKey } = await newInstallation();
    // Declared by the version, and still refused: the address, not the allowlist, decides.
    const direct = await runFetching(apiKey, "https://169.254.169.254/latest/meta-data/", ["169.254.169.254"]);
    expect(direct.steps.find((s: any) => s.nodeId === "lookup").errorCode).toBe("component.egress_denied");
    const bounced = await runFetching(apiKey, `https://allowed.test/redirect?to=${encodeURIComponent("https://169.254.169.254/latest")}`, ["allowed.test", "169.254.169.254"]);
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
