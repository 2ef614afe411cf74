// End-to-end smoke test of case management and enforcement through the real `wrangler dev`, started
// exactly as `npm start` starts it (scripts/start.mjs). The workerd tests (test/cases.test.ts,
// test/enforcement.test.ts) cover these flows in the vitest pool, which allows code generation from
// strings; wrangler dev and Cloudflare refuse it (no eval or new Function in production). So this file proves the libraries
// on that path under wrangler dev: @cfworker/json-schema (task responses), @marcbachmann/cel-js
// (trigger, condition, mappings), report sealing (WebCrypto), the Queue consumer and its
// standardwebhooks signature, which a receiver in this process verifies with the same library.
import assert from "node:assert/strict";
import { createServer as createHttpServer } from "node:http";
import { after, before, test } from "node:test";
import { Webhook } from "standardwebhooks";
import { api as apiFor, startServer, until as waitUntil } from "./harness.mjs";

const WAIT_TIMEOUT_MS = 20_000;

// --- The server under test (wrangler dev through scripts/start.mjs) -------------------------------

let server;
let api;
const output = () => server?.output() ?? "";
const until = (probe, what, timeoutMs = WAIT_TIMEOUT_MS) => waitUntil(probe, what, timeoutMs, 200);

// --- A product's webhook receiver, in this process, on loopback -----------------------------------

const received = []; // every request that reached the receiver
let receiver;
let receiverUrl;
let webhookSecret = null; // set once the endpoint is created (its secret is shown only then)

function startReceiver() {
  return new Promise((resolve, reject) => {
    const server = createHttpServer((request, response) => {
      const chunks = [];
      request.on("data", (chunk) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const entry = { method: request.method, path: request.url, webhookId: request.headers["webhook-id"] ?? null, verified: false, type: null, data: null, error: null };
        try {
          if (!webhookSecret) throw new Error("no secret yet");
          // node:http lower-cases header names, as standardwebhooks expects.
          const payload = new Webhook(webhookSecret).verify(body, request.headers);
          entry.verified = true;
          entry.type = payload?.type ?? null;
          entry.data = payload?.data ?? null;
        } catch (error) {
          entry.error = error instanceof Error ? error.message : String(error);
        }
        received.push(entry);
        response.writeHead(entry.verified ? 200 : 401, { "content-type": "text/plain" });
        response.end(entry.verified ? "accepted" : "signature rejected");
      });
    });
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      receiver = server;
      receiverUrl = `http://127.0.0.1:${server.address().port}`;
      resolve();
    });
  });
}

function stopReceiver() {
  if (!receiver) return Promise.resolve();
  return new Promise((resolve) => {
    receiver.closeAllConnections?.();
    receiver.close(() => resolve());
  });
}

before(async () => {
  await startReceiver();
  server = await startServer({ label: "smoke-cases" });
  api = apiFor(server.baseUrl, server.apiKey, { timeoutMs: 15_000 });
  assert.match(server.apiKey, /^sk_/u);
});

after(async () => {
  await server?.stop();
  await stopReceiver();
});

// --- The flow ------------------------------------------------------------------------------------

const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

const reviewSchema = {
  type: "object",
  required: ["verdict"],
  additionalProperties: false,
  properties: { verdict: { enum: ["remove", "keep"] }, note: { type: "string", maxLength: 500 } },
};

/** start → review (human task) → verdict (condition) → remove (action) → end nodes. */
function enforcementGraph(queueName) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      {
        id: "review",
        kind: "human_task",
        config: { queue_id: queueName, response_schema: reviewSchema, timeout_seconds: 3600 },
        inputMapping: { category: "report.category", subject: "input.report.subject.id" },
      },
      { id: "verdict", kind: "condition", config: { cases: [{ port: "remove", when: "steps.review.event.payload.response.verdict == 'remove'" }], case_ports: ["remove"], default_port: "keep" } },
      {
        id: "remove",
        kind: "action",
        errorPort: "failed",
        config: { action_type: "remove_post", approval_timeout_seconds: 3600 },
        inputMapping: { postId: "report.subject.id", verdict: "steps.review.event.payload.response.verdict" },
      },
      { id: "removed", kind: "end", config: { terminal_code: "removed" } },
      { id: "kept", kind: "end", config: { terminal_code: "kept" } },
      { id: "review_expired", kind: "end", config: { terminal_code: "review_expired" } },
      { id: "rejected", kind: "end", config: { terminal_code: "rejected" } },
      { id: "approval_expired", kind: "end", config: { terminal_code: "approval_expired" } },
      { id: "failed", kind: "end", config: { terminal_code: "failed" } },
    ],
    edges: [
      edge("start", "success", "review"),
      edge("review", "completed", "verdict"),
      edge("review", "timeout", "review_expired"),
      edge("verdict", "remove", "remove"),
      edge("verdict", "keep", "kept"),
      edge("remove", "applied", "removed"),
      edge("remove", "rejected", "rejected"),
      edge("remove", "expired", "approval_expired"),
      edge("remove", "failed", "failed"),
    ],
  };
}

test("wrangler dev: report → trigger → task (schema-checked) → action delivered to a verifying receiver → audit verifies", { timeout: 60_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`receiver got: ${JSON.stringify(received).slice(0, 4000)}\nserver output:\n${output()}`);
  });

  // Keys as a product would hold them: intake writes reports, the console reviews.
  const intake = await api("/api/v1/api-keys", { body: { name: "product", scopes: ["reports:write"] } });
  assert.equal(intake.status, 201, JSON.stringify(intake.body));
  const reviewer = await api("/api/v1/api-keys", { body: { name: "console", scopes: ["review", "personal_data:read"] } });
  assert.equal(reviewer.status, 201, JSON.stringify(reviewer.body));
  const intakeKey = intake.body.apiKey;
  const reviewKey = reviewer.body.apiKey;

  const queue = await api("/api/v1/queues", { body: { name: "scams", slaSeconds: 3600, priority: 5 } });
  assert.equal(queue.status, 201, JSON.stringify(queue.body));

  const hook = await api("/api/v1/webhook-endpoints", { body: { url: `${receiverUrl}/hooks/actions`, retryBaseSeconds: 1, maxAttempts: 5 } });
  assert.equal(hook.status, 201, JSON.stringify(hook.body));
  assert.match(hook.body.secret, /^whsec_/u);
  webhookSecret = hook.body.secret;
  const listed = await api("/api/v1/webhook-endpoints");
  assert.equal(listed.status, 200);
  assert.ok(!JSON.stringify(listed.body).includes(webhookSecret), "the secret is shown only at creation");

  const type = await api("/api/v1/action-types", { body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } });
  assert.equal(type.status, 201, JSON.stringify(type.body));

  const workflow = await api("/api/v1/workflows", { body: { name: "scam-review" } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph: enforcementGraph("scams") } });
  assert.equal(version.status, 201, `the graph must publish: ${JSON.stringify(version.body)}`);

  const trigger = await api("/api/v1/triggers", {
    body: { event: "report.created", when: "report.category == 'scams_and_fraud'", workflowVersionId: version.body.id, authorityMode: "autonomous" },
  });
  assert.equal(trigger.status, 201, JSON.stringify(trigger.body));

  const report = await api("/api/v1/reports", {
    as: intakeKey,
    body: {
      subject: { kind: "content", id: "post-smoke-1", url: "https://example.social/p/post-smoke-1", snapshot: { text: "buy cheap pills at scam.example" } },
      category: "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
      reporter: { id: "user-4242", contact: "reporter.person@example.org" },
      description: "This account keeps posting scam links to my DMs",
    },
  });
  assert.equal(report.status, 201, JSON.stringify(report.body));
  assert.equal(report.body.category, "scams_and_fraud");
  assert.equal(report.body.runs.length, 1, JSON.stringify(report.body));
  const runId = report.body.runs[0].runId;

  const task = await until(async () => {
    const listing = await api(`/api/v1/queues/${queue.body.id}/tasks`, { as: reviewKey });
    assert.equal(listing.status, 200, JSON.stringify(listing.body));
    const run = await api(`/api/v1/runs/${runId}`);
    return { value: listing.body.items?.[0], stop: ["failed", "repair_required", "terminated", "succeeded"].includes(run.body?.state), seen: run.body };
  }, "the review task");
  assert.equal(task.runId, runId);
  assert.equal(task.reportId, report.body.id);
  assert.equal(task.state, "open");
  // Listings never carry the task's sealed context; the task itself opens it for its reviewer.
  assert.equal(task.context, null);
  assert.equal(task.contextSealed, true);
  const opened = await api(`/api/v1/tasks/${task.id}`);
  assert.deepEqual(opened.body.context, { category: "scams_and_fraud", subject: "post-smoke-1" });

  const claimed = await api(`/api/v1/tasks/${task.id}/claim`, { as: reviewKey, body: { reviewer: "mod-ana" } });
  assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
  assert.equal(claimed.body.claim.reviewer, "mod-ana");

  // The response schema is checked under wrangler dev (no code generation from strings there).
  const invalid = await api(`/api/v1/tasks/${task.id}/complete`, { as: reviewKey, body: { reviewer: "mod-ana", response: { verdict: "delete-everything", extra: 1 } } });
  assert.equal(invalid.status, 422, JSON.stringify(invalid.body));
  assert.equal(invalid.body.error.code, "task.response_invalid");
  assert.ok(
    invalid.body.error.details.some((detail) => detail.path === "$.verdict"),
    JSON.stringify(invalid.body.error.details),
  );
  const unchanged = await api(`/api/v1/tasks/${task.id}`, { as: reviewKey });
  assert.equal(unchanged.body.state, "claimed");

  const done = await api(`/api/v1/tasks/${task.id}/complete`, { as: reviewKey, body: { reviewer: "mod-ana", response: { verdict: "remove", note: "scam" } } });
  assert.equal(done.status, 200, JSON.stringify(done.body));
  assert.equal(done.body.state, "completed");

  const run = await until(async () => {
    const current = await api(`/api/v1/runs/${runId}`);
    assert.equal(current.status, 200, JSON.stringify(current.body));
    return { value: current.body.state === "succeeded" ? current.body : null, stop: ["failed", "repair_required", "terminated"].includes(current.body.state), seen: current.body };
  }, "the run to succeed");
  assert.equal(run.output.terminalCode, "removed", JSON.stringify(run.output));
  assert.deepEqual(
    run.steps.map((step) => step.nodeId),
    ["start", "review", "verdict", "remove", "removed"],
  );
  assert.equal(run.steps.find((step) => step.nodeId === "remove").output.port, "applied");

  // Exactly one delivery reached the receiver, and its signature verified.
  assert.equal(received.length, 1, JSON.stringify(received));
  const [delivery] = received;
  assert.equal(delivery.error, null);
  assert.equal(delivery.verified, true);
  assert.equal(delivery.method, "POST");
  assert.equal(delivery.path, "/hooks/actions");
  assert.equal(delivery.type, "action.execute");
  assert.deepEqual(delivery.data.params, { postId: "post-smoke-1", verdict: "remove" });
  assert.equal(delivery.data.actionType, "remove_post");
  assert.equal(delivery.data.runId, runId);
  assert.equal(delivery.data.reportId, report.body.id);
  const deliveries = await api("/api/v1/webhook-deliveries");
  assert.equal(deliveries.status, 200, JSON.stringify(deliveries.body));
  assert.equal(deliveries.body.items.length, 1, JSON.stringify(deliveries.body));
  assert.equal(deliveries.body.items[0].id, delivery.webhookId);
  assert.equal(deliveries.body.items[0].state, "delivered");
  assert.equal(deliveries.body.items[0].attempts, 1);

  // Sealed content opens for a reviewer allowed to read personal data; who reported only on a reveal.
  const read = await api(`/api/v1/reports/${report.body.id}`, { as: reviewKey });
  assert.equal(read.status, 200, JSON.stringify(read.body));
  assert.deepEqual(read.body.reporter, { known: true, revealed: false });
  assert.equal(read.body.description, "This account keeps posting scam links to my DMs");
  const revealed = await api(`/api/v1/reports/${report.body.id}/reveal-reporter`, { as: reviewKey, body: { reason: "smoke test of the reveal" } });
  assert.equal(revealed.body.reporter.contact, "reporter.person@example.org");

  const audit = await api("/api/v1/audit/verify");
  assert.equal(audit.status, 200, JSON.stringify(audit.body));
  assert.equal(audit.body.ok, true, JSON.stringify(audit.body));
});
