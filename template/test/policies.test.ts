// Policies for AI proposals: versioned, immutable, digested documents; an ai_proposal node runs
// under one, its text leads the system prompt, and its step output records which version and digest
// drove the proposal. Also the Llama Guard output adapter, the (fake) Workers AI binding, refused
// redirects and the provider's content permission.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { executeAgentProposal } from "../src/automation";
import { api, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

const POLICY_TEXT = "# Scams\n\n4.2 MARKER-POLICY-7: offers of money for account credentials are removed.";

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return `sha256:${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

async function createPolicy(key: string, body: Record<string, unknown>) {
  const created = await api("/api/v1/policies", { key, body });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body;
}

async function provider(key: string, body: Record<string, unknown>): Promise<string> {
  const created = await api("/api/v1/ai-providers", { key, body: { kind: "openai-compatible", baseUrl: "https://model.test/v1", apiKey: "sk-test-model-key", ...body } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.id;
}

function proposalGraph(config: Record<string, unknown>, ports: string[] = ["remove", "keep"]) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "propose", kind: "ai_proposal", errorPort: "error", timeoutPolicy: { retries: 0 }, config: { instructions: "Classify this post.", result_ports: ports, ...config }, inputMapping: { text: "input.text" } },
      ...ports.map((port) => ({ id: `end_${port}`, kind: "end", config: { terminal_code: port } })),
      { id: "error", kind: "end", config: { terminal_code: "error" } },
    ],
    edges: [edge("start", "success", "propose"), ...ports.map((port) => edge("propose", port, `end_${port}`)), edge("propose", "error", "error")],
  };
}

async function propose(key: string, versionId: string, text: string) {
  const run = await waitForRun(key, (await startRun(key, versionId, { input: { text } })).id);
  return { run, step: run.steps.find((s: any) => s.nodeId === "propose") };
}

describe("policies", () => {
  it("are versioned and immutable, digested over their canonical text, retired, and another installation's are 404", async () => {
    const { apiKey } = await newInstallation();
    const created = await createPolicy(apiKey, { name: "scams", description: "Fraud and scams", text: `${POLICY_TEXT.replace(/\n/gu, "\r\n")}  \n\n` });
    expect(created).toMatchObject({ name: "scams", retiredAt: null, versions: [{ version: 1 }], latest: { version: 1, text: POLICY_TEXT } });
    expect(created.latest.digest).toBe(await sha256(POLICY_TEXT));
    expect(created.createdBy).toMatch(/^api_key:/u);

    const v2 = await api(`/api/v1/policies/${created.id}/versions`, { key: apiKey, body: { text: `${POLICY_TEXT}\n4.3 Fake giveaways are removed.` } });
    expect(v2.status).toBe(201);
    expect(v2.body).toMatchObject({ policyId: created.id, policyName: "scams", version: 2, digest: await sha256(`${POLICY_TEXT}\n4.3 Fake giveaways are removed.`) });
    // The same canonical text again publishes nothing: the newest version comes back with 200.
    const same = await api(`/api/v1/policies/${created.id}/versions`, { key: apiKey, body: { text: `${POLICY_TEXT}\r\n4.3 Fake giveaways are removed.   \n` } });
    expect(same.status).toBe(200);
    expect(same.body.id).toBe(v2.body.id);
    expect((await api(`/api/v1/policies/${created.id}/versions`, { key: apiKey, body: { text: " \n\t\n" } })).body.error.code).toBe("policy.text_empty");

    const read = await api(`/api/v1/policies/${created.id}`, { key: apiKey });
    expect(read.body.versions.map((v: any) => v.version)).toEqual([2, 1]);
    const v1 = await api(`/api/v1/policy-versions/${created.versions[0].id}`, { key: apiKey });
    expect(v1.body).toMatchObject({ version: 1, text: POLICY_TEXT, digest: created.latest.digest });
    const list = await api("/api/v1/policies", { key: apiKey });
    expect(list.body.items).toEqual([expect.objectContaining({ id: created.id, latest: expect.objectContaining({ id: v2.body.id, version: 2 }) })]);
    expect((await api("/api/v1/policies", { key: apiKey, body: { name: "scams" } })).status).toBe(409);

    // Immutable: no route changes a version, and the database refuses an update.
    expect((await api(`/api/v1/policy-versions/${v2.body.id}`, { key: apiKey, method: "PATCH", body: { text: "x" } })).status).toBe(404);
    await expect(env.DB.prepare("UPDATE policy_versions SET text = 'changed' WHERE id = ?1").bind(v2.body.id).run()).rejects.toThrow(/immutable/u);

    const other = await newInstallation("other");
    expect((await api(`/api/v1/policies/${created.id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/policy-versions/${v2.body.id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/policies/${created.id}/versions`, { key: other.apiKey, body: { text: "theirs" } })).status).toBe(404);
    expect((await api(`/api/v1/policies/${created.id}/retire`, { key: other.apiKey, body: {} })).status).toBe(404);
    expect((await api("/api/v1/policies", { key: other.apiKey })).body.items).toEqual([]);
    // The same name is free in another installation.
    await createPolicy(other.apiKey, { name: "scams" });

    const retired = await api(`/api/v1/policies/${created.id}/retire`, { key: apiKey, body: {} });
    expect(retired.status).toBe(200);
    expect(retired.body.retiredAt).toEqual(expect.any(String));
    expect((await api(`/api/v1/policies/${created.id}/retire`, { key: apiKey, body: {} })).body.retiredAt).toBe(retired.body.retiredAt);
    const refused = await api(`/api/v1/policies/${created.id}/versions`, { key: apiKey, body: { text: "new text" } });
    expect([refused.status, refused.body.error.code]).toEqual([409, "policy.retired"]);
    expect((await api(`/api/v1/policy-versions/${v2.body.id}`, { key: apiKey })).body.retiredAt).toBe(retired.body.retiredAt);

    const { results } = await env.DB.prepare("SELECT action FROM audit_events WHERE target_id IN (?1, ?2, ?3, ?4) ORDER BY seq").bind(created.id, created.versions[0].id, v2.body.id, retired.body.id).all<{ action: string }>();
    expect(results.map((r) => r.action)).toEqual(["policy.created", "policy.version_published", "policy.version_published", "policy.retired"]);
  });

  it("publishing refuses a node naming an unknown or retired policy, and label_ports outside the result ports", async () => {
    const { apiKey } = await newInstallation();
    const providerId = await provider(apiKey, { model: "policy-reader" });
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "w" } });
    const publishRaw = (graph: unknown) => api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph } });
    const unknown = await publishRaw(proposalGraph({ provider_id: providerId, policy_version_id: "no-such-policy" }));
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details).toEqual([expect.objectContaining({ path: "$.nodes[1].config.policy_version_id", code: "reference_not_found", message: expect.stringContaining("POST /api/v1/policies") })]);
    // A policy without a version is not enough either.
    await createPolicy(apiKey, { name: "empty" });
    expect((await publishRaw(proposalGraph({ provider_id: providerId, policy_version_id: "empty" }))).status).toBe(422);
    const policy = await createPolicy(apiKey, { name: "scams", text: POLICY_TEXT });
    expect((await publishRaw(proposalGraph({ provider_id: providerId, policy_version_id: policy.latest.id }))).status).toBe(201);
    const badLabels = await publishRaw(proposalGraph({ provider_id: providerId, policy_version_id: "scams", label_ports: { safe: "keep", S10: "hate" } }));
    expect(badLabels.body.error.details.map((p: any) => p.path)).toEqual(["$.nodes[1].config.label_ports.S10"]);
    await api(`/api/v1/policies/${policy.id}/retire`, { key: apiKey, body: {} });
    const retired = await publishRaw(proposalGraph({ provider_id: providerId, policy_version_id: "scams" }));
    expect(retired.body.error.details.map((p: any) => [p.path, p.code])).toEqual([["$.nodes[1].config.policy_version_id", "reference_not_found"]]);
  });
});

describe("an AI proposal under a policy", () => {
  it("puts the policy text in the system prompt and records version, digest, provider, tokens and latency", async () => {
    const { apiKey } = await newInstallation();
    const providerId = await provider(apiKey, { model: "policy-reader" });
    const policy = await createPolicy(apiKey, { name: "scams", text: POLICY_TEXT });
    const byName = await publish(apiKey, proposalGraph({ provider_id: providerId, policy_version_id: "scams" }));
    const pinned = await publish(apiKey, proposalGraph({ provider_id: providerId, policy_version_id: policy.latest.id }));

    const { run, step } = await propose(apiKey, byName.id, "send me your password for $100");
    expect(run.output.terminalCode).toBe("remove");
    expect(step.output).toMatchObject({
      port: "remove",
      resultCode: "remove",
      confidence: 0.8,
      rationale: "Section 4.2 of the policy applies.",
      policySections: ["4.2"],
      policy: { id: policy.id, name: "scams", versionId: policy.latest.id, version: 1, digest: await sha256(POLICY_TEXT) },
      provider: { id: providerId, kind: "openai-compatible", model: "policy-reader", outputFormat: "json" },
    });
    expect(step.output.usage.promptTokens).toBeGreaterThan(0);
    expect(step.output.latencyMs).toBeGreaterThanOrEqual(0);
    const [system, user] = step.output.prompt;
    expect(system.role).toBe("system");
    expect(system.content).toContain(`# Policy: scams, version 1 (${policy.latest.id}, ${policy.latest.digest})\n\n${POLICY_TEXT}`);
    expect(system.content).toContain("# Instructions\n\nClassify this post.");
    expect(system.content).toContain('"result_code": one of ["remove","keep"]');
    expect(user).toEqual({ role: "user", content: JSON.stringify({ text: "send me your password for $100" }) });

    // A new version without the marker: the node naming the policy follows it, the pinned one does not.
    await api(`/api/v1/policies/${policy.id}/versions`, { key: apiKey, body: { text: "# Scams\n\nNothing is removed." } });
    const followed = await propose(apiKey, byName.id, "send me your password");
    expect(followed.run.output.terminalCode).toBe("keep");
    expect(followed.step.output.policy).toMatchObject({ version: 2, digest: await sha256("# Scams\n\nNothing is removed.") });
    const stayed = await propose(apiKey, pinned.id, "send me your password");
    expect(stayed.step.output.policy).toMatchObject({ version: 1, versionId: policy.latest.id });
    expect(stayed.run.output.terminalCode).toBe("remove");

    // Retired, the policy drives no more proposals: the node goes to its error port.
    await api(`/api/v1/policies/${policy.id}/retire`, { key: apiKey, body: {} });
    const afterRetire = await propose(apiKey, pinned.id, "send me your password");
    expect([afterRetire.run.output.terminalCode, afterRetire.step.errorCode]).toEqual(["error", "ai.policy_retired"]);
  });

  it("maps Llama Guard's safe / unsafe + categories to ports through label_ports, by result-port precedence", async () => {
    const { apiKey } = await newInstallation();
    const providerId = await provider(apiKey, { model: "llama-guard", outputFormat: "llama_guard" });
    await createPolicy(apiKey, { name: "guard", text: "S2: Non-violent crimes.\nS10: Hate." });
    const ports = ["hate", "violation", "no_violation"];
    const version = await publish(apiKey, proposalGraph({ provider_id: providerId, policy_version_id: "guard", label_ports: { safe: "no_violation", unsafe: "violation", S10: "hate" } }, ports));
    const safe = await propose(apiKey, version.id, "hello there");
    expect(safe.step.output).toMatchObject({ port: "no_violation", confidence: null, policySections: null, rationale: "safe", provider: { outputFormat: "llama_guard" } });
    expect(safe.step.output.prompt[0].content).toContain('Answer "safe", or "unsafe"');
    const scam = await propose(apiKey, version.id, "a scam");
    expect(scam.step.output).toMatchObject({ port: "violation", policySections: ["S2"], rationale: "unsafe\nS2" });
    const both = await propose(apiKey, version.id, "a hate scam");
    expect(both.step.output).toMatchObject({ port: "hate", policySections: ["S2", "S10"] });
    // Without a mapping, "unsafe" is no result port of this node: the error port, non-retryable.
    const unmapped = await publish(apiKey, proposalGraph({ provider_id: providerId, label_ports: { safe: "no_violation" } }, ports));
    const refused = await propose(apiKey, unmapped.id, "a scam");
    expect([refused.run.output.terminalCode, refused.step.errorCode]).toEqual(["error", "ai.result_port_invalid"]);
  });

  it("works through the Workers AI binding (a fake of the same shape), JSON and Llama Guard", async () => {
    const { apiKey } = await newInstallation();
    const created = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "workers-ai", model: "@cf/test/policy-reader" } });
    expect(created.body).toMatchObject({ kind: "workers-ai", contentAllowed: true, outputFormat: "json" });
    await createPolicy(apiKey, { name: "scams", text: POLICY_TEXT });
    const json = await propose(apiKey, (await publish(apiKey, proposalGraph({ provider_id: created.body.id, policy_version_id: "scams" }))).id, "hello");
    expect(json.step.output).toMatchObject({ port: "remove", policySections: ["2"], provider: { kind: "workers-ai", model: "@cf/test/policy-reader" }, usage: { completionTokens: 7 } });
    expect(json.step.output.usage.promptTokens).toBeGreaterThan(0);

    const guard = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "workers-ai", model: "@cf/meta/llama-guard-3-8b", outputFormat: "llama_guard" } });
    const version = await publish(apiKey, proposalGraph({ provider_id: guard.body.id, label_ports: { safe: "keep", unsafe: "remove" } }));
    expect((await propose(apiKey, version.id, "pure hate")).step.output).toMatchObject({ port: "remove", policySections: ["S10"], policy: null });
    expect((await propose(apiKey, version.id, "kind words")).step.output.port).toBe("keep");
  });

  it("refuses to follow a redirect from the model endpoint (non-retryable)", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, proposalGraph({ provider_id: await provider(apiKey, { model: "redirect" }) }));
    const { run, step } = await propose(apiKey, version.id, "hello");
    expect([run.output.terminalCode, step.errorCode]).toEqual(["error", "ai_provider.redirect_refused"]);
  });
});

describe("a provider's content permission", () => {
  it("is off by default for external endpoints, refuses content when off, and is changed by an audited PATCH", async () => {
    const { apiKey, id: installationId } = await newInstallation();
    const providerId = await provider(apiKey, { model: "policy-reader" });
    expect((await api(`/api/v1/ai-providers/${providerId}`, { key: apiKey })).body.contentAllowed).toBe(false);
    let mapped = 0;
    const call = {
      installationId,
      providerId,
      instructions: "Classify.",
      resultPorts: ["remove", "keep"],
      readsContent: true,
      input: async () => {
        mapped += 1;
        return { snapshot: "the reported post" };
      },
    };
    // As the runtime calls it for a node whose mapping reads `content` (NodeCall.readsContent).
    await expect(executeAgentProposal(env, call)).rejects.toMatchObject({ code: "ai_provider.content_not_allowed", retryable: false });
    expect(mapped).toBe(0);
    // Without content, the same provider is fine.
    expect(await executeAgentProposal(env, { ...call, readsContent: false })).toMatchObject({ port: "keep" });

    const other = await newInstallation("other");
    expect((await api(`/api/v1/ai-providers/${providerId}`, { key: other.apiKey, method: "PATCH", body: { contentAllowed: true } })).status).toBe(404);
    const allowed = await api(`/api/v1/ai-providers/${providerId}`, { key: apiKey, method: "PATCH", body: { contentAllowed: true } });
    expect([allowed.status, allowed.body.contentAllowed]).toEqual([200, true]);
    expect((await api("/api/v1/ai-providers", { key: apiKey })).body.items).toEqual([expect.objectContaining({ id: providerId, contentAllowed: true })]);
    expect(await executeAgentProposal(env, call)).toMatchObject({ port: "keep" });
    const audit = await env.DB.prepare("SELECT details_json AS details FROM audit_events WHERE target_id = ?1 AND action = 'ai_provider.updated'").bind(providerId).first<{ details: string }>();
    expect(JSON.parse(audit!.details)).toMatchObject({ contentAllowed: true, previous: { contentAllowed: false } });
    // Created allowed, explicitly.
    const open = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: "https://model.test/v1", model: "policy-reader", contentAllowed: true } });
    expect(open.body.contentAllowed).toBe(true);
  });
});
