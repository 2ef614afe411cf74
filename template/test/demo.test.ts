// The demo peers of `npm start` (src/demo) and the appeal example the demo desk binds: the peers
// are a 404 unless DEMO_PEERS is "on" (this config, like production, leaves it unset); the demo
// model answers an ai_proposal prompt deterministically and says it is a demo; the demo product
// verifies Standard Webhooks signatures with the secret registered under the admin token and
// shows what it received, escaped; examples/appeal-review.json passes the Art. 20(6) check, sends
// a contested removal to `urgent`, and restores the post when the reviewer overturns it.
import { env } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { buildPrompt } from "../src/automation/ai-answers";
import { demoCompletion } from "../src/demo";
import { createApp } from "../src/http/app";
import appealReview from "../examples/appeal-review.json";
import { ADMIN_TOKEN, api, newInstallation, personKey, publish, until, waitForRun } from "./helpers";

const demoEnv = { ...env, DEMO_PEERS: "on", ALLOW_LOCAL_EGRESS: "true" } as unknown as Env;
const app = createApp();
const ctx = { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} } as unknown as ExecutionContext;
const demo = (path: string, init: RequestInit = {}, on = true) => app.request(`http://safest.test${path}`, init, on ? demoEnv : env, ctx);

describe("demo peers", () => {
  it("are a 404 unless DEMO_PEERS is on (the Worker as configured here and in production)", async () => {
    for (const path of ["/demo/product", "/demo/product/received", "/demo/model"]) {
      const response = await api(path);
      expect(response.status, path).toBe(404);
      expect(response.body.error.code).toBe("route.not_found");
    }
    expect((await demo("/demo/model", {}, false)).status).toBe(404);
    // DEMO_PEERS alone (set on a deployed Worker by mistake) mounts nothing: only local development has ALLOW_LOCAL_EGRESS.
    const deployed = { ...env, DEMO_PEERS: "on" } as unknown as Env;
    expect((await app.request("http://safest.test/demo/product/received", {}, deployed, ctx)).status).toBe(404);
    expect((await demo("/demo/model")).status).toBe(200);
  });

  it("the demo model answers an ai_proposal prompt by its ports, deterministically, labelled a demo", async () => {
    const policy = { id: "pv_1", policyName: "harassment-policy", version: 1, digest: "sha256:00", text: "Harassment policy\n2.1 Insults aimed at a person are removed." };
    const prompt = (post: string) => buildPrompt({ policy, instructions: "Decide.", resultPorts: ["harassment", "not_harassment"], format: "json", input: { post } });
    const answer = async (post: string) => {
      const response = await demo("/demo/model/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "demo-moderation-model", messages: prompt(post) }) });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { model: string; choices: Array<{ message: { content: string } }> };
      expect(body.model).toMatch(/demo/u);
      return JSON.parse(body.choices[0]!.message.content) as { result_code: string; rationale: string; policy_sections?: string[] };
    };
    const abusive = await answer("You absolute idiot, delete your account.");
    expect(abusive).toMatchObject({ result_code: "harassment", policy_sections: ["2.1"] });
    expect(abusive.rationale).toMatch(/^Demo model .*"idiot"/u);
    expect(await answer("You absolute idiot, delete your account.")).toEqual(abusive);
    expect((await answer("The park plan costs too much.")).result_code).toBe("not_harassment");
    // Ports in another order, and the llama_guard format.
    const flipped = demoCompletion({ messages: buildPrompt({ policy: null, instructions: "", resultPorts: ["keep", "remove"], format: "json", input: { text: "what a loser" } }) });
    expect(JSON.parse(flipped.choices[0]!.message.content).result_code).toBe("remove");
    const guard = demoCompletion({ messages: buildPrompt({ policy: null, instructions: "", resultPorts: [], format: "llama_guard", input: { text: "shut up" } }) });
    expect(guard.choices[0]!.message.content).toBe("unsafe\nS10");
    const bad = await demo("/demo/model/v1/chat/completions", { method: "POST", body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("demo_model.contract_missing");
  });

  it("the demo product verifies signatures with the registered secret and shows what it received, escaped", async () => {
    const hook = `t-${crypto.randomUUID().slice(0, 8)}`;
    const secret = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
    const register = (authorization?: string) =>
      demo(`/demo/product/webhooks/${hook}/secret`, { method: "PUT", headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) }, body: JSON.stringify({ secret }) });
    expect((await register()).status).toBe(401);
    expect((await register("Bearer not-the-admin-token")).status).toBe(401);
    expect((await register(`Bearer ${ADMIN_TOKEN}`)).status).toBe(200);

    const marker = `proposal-${crypto.randomUUID()}`;
    const body = JSON.stringify({ type: "action.execute", timestamp: new Date().toISOString(), data: { proposalId: marker, actionType: "remove_content", subject: { kind: "content", id: "<script>alert(1)</script>" } } });
    const id = `msg_${crypto.randomUUID().replace(/-/gu, "")}`;
    const signed = new Webhook(secret).sign(id, new Date(), body);
    const deliver = (signature: string, webhookId: string) =>
      demo(`/demo/product/webhooks/${hook}`, { method: "POST", headers: { "content-type": "application/json", "webhook-id": webhookId, "webhook-timestamp": String(Math.floor(Date.now() / 1000)), "webhook-signature": signature }, body });
    expect((await deliver(signed, id)).status).toBe(200);
    expect((await deliver("v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", `${id}-forged`)).status).toBe(401);

    const received = (await (await demo("/demo/product/received")).json()) as { demo: boolean; items: Array<{ hook: string; webhookId: string; verified: boolean; data: unknown; problem: string | null }> };
    const mine = received.items.filter((item) => item.hook === hook);
    expect(mine.map((item) => [item.webhookId, item.verified])).toEqual([
      [`${id}-forged`, false],
      [id, true],
    ]);
    // An unverified body is never shown as data.
    expect(mine[0]!.data).toBeNull();
    expect(mine[0]!.problem).toMatch(/signature/u);
    expect(mine[1]!.data).toMatchObject({ proposalId: marker });

    const page = await (await demo("/demo/product")).text();
    expect(page).toContain(`data-proposal-id="${marker}"`);
    expect(page).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(page).not.toContain("<script>alert(1)");
    expect(page).toContain("demo only");
  });
});

describe("examples/appeal-review.json", () => {
  it("passes the Art. 20(6) check; a contested removal goes to urgent and an overturn restores the post", async () => {
    const { apiKey } = await newInstallation();
    const path = `/ok/appeal-demo-${crypto.randomUUID().slice(0, 8)}`;
    const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
    for (const key of ["restore_content", "remove_content"]) {
      expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: endpoint.body.id, requiresApproval: false } })).status).toBe(201);
    }
    const queues: Record<string, string> = {};
    for (const name of ["urgent", "general-review"]) queues[name] = (await api("/api/v1/queues", { key: apiKey, body: { name, slaSeconds: 14_400 } })).body.id;
    const version = await publish(apiKey, appealReview);
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    expect(trigger.status, JSON.stringify(trigger.body)).toBe(201);

    const report = await api("/api/v1/reports", { key: apiKey, body: { category: "illegal_or_harmful_speech", subject: { kind: "content", id: "post-satire", ownerId: "author-1", snapshot: { text: "Our mayor is a lizard." } } } });
    const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: report.body.id, outcome: "content_removed", restrictions: { visibility: ["content_removed"] }, statement: "Taken for an insult." } });
    expect(decision.status).toBe(201);
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: decision.body.id, appellantRole: "affected", reason: "It is satire." } });
    expect(appeal.status).toBe(201);

    const task = await until(async () => (await api(`/api/v1/queues/${queues.urgent}/tasks`, { key: apiKey })).body.items?.[0], "the appeal's task in urgent");
    expect(task.appealId).toBe(appeal.body.id);
    const opened = await api(`/api/v1/tasks/${task.id}`, { key: apiKey });
    expect(opened.body.context).toMatchObject({ appealReason: "It is satire.", post: "Our mayor is a lizard.", category: "illegal_or_harmful_speech" });
    expect((await api(`/api/v1/queues/${queues["general-review"]}/tasks`, { key: apiKey })).body.items).toEqual([]);
    // A complaint is decided by a person: a reviewer's key.
    const seniorMod = await personKey(apiKey, "senior-mod");
    await api(`/api/v1/tasks/${task.id}/claim`, { key: seniorMod, body: {} });
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: seniorMod, body: { response: { outcome: "overturned" } } })).status).toBe(200);

    expect((await waitForRun(apiKey, appeal.body.runs[0].runId)).output.terminalCode).toBe("appeal_overturned_restored");
    expect((await api(`/api/v1/appeals/${appeal.body.id}`, { key: apiKey })).body).toMatchObject({ state: "overturned", decidedBy: "senior-mod" });
    const log = await until(async () => {
      const entries = (await (await env.RECEIVER.fetch(`http://receiver/_control/log?path=${encodeURIComponent(path)}`)).json()) as Array<{ type: string; verified: boolean; data: any }>;
      return entries.find((e) => e.verified && e.type === "action.execute");
    }, "the restore action");
    expect(log.data).toMatchObject({ actionType: "restore_content", subject: { kind: "content", id: "post-satire" } });
  });
});
