// End-to-end smoke test through the real `wrangler dev`, started exactly as `npm start` starts it
// (scripts/start.mjs). The vitest pool allows code generation from strings, which wrangler dev and
// Cloudflare refuse (no eval or new Function in production), so this test is what catches such a library before users do.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { api as apiFor, pollRun as pollRunWith, startServer } from "./harness.mjs";

const triage = JSON.parse(readFileSync(fileURLToPath(new URL("../examples/triage.json", import.meta.url)), "utf8"));
const RUN_TIMEOUT_MS = 30_000;

let server;
let api;
const output = () => server?.output() ?? "";
const pollRun = (runId, done, what) => pollRunWith(api, runId, done, what, RUN_TIMEOUT_MS);

before(async () => {
  server = await startServer({ label: "smoke" });
  api = apiFor(server.baseUrl, server.apiKey);
  assert.match(server.apiKey, /^sk_/u);
});

after(async () => {
  await server?.stop();
});

test("wrangler dev: publish examples/triage.json, run the case path, replay by Idempotency-Key", { timeout: 90_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${output()}`);
  });
  const workflow = await api("/api/v1/workflows", { body: { name: "triage" } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));

  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph: triage } });
  assert.equal(version.status, 201, `examples/triage.json must publish: ${JSON.stringify(version.body)}`);
  assert.match(version.body.artifact.digest, /^sha256:[0-9a-f]{64}$/u);

  const request = { body: { workflowVersionId: version.body.id, authorityMode: "autonomous", input: { category: "spam" } }, headers: { "idempotency-key": "smoke-spam-1" } };
  const created = await api("/api/v1/runs", request);
  assert.equal(created.status, 201, JSON.stringify(created.body));

  const run = await pollRun(created.body.id, (body) => body.state === "succeeded", "succeeded");
  assert.deepEqual(
    run.steps.map((step) => [step.nodeId, step.state]),
    [
      ["start", "succeeded"],
      ["route", "succeeded"],
      ["close_spam", "succeeded"],
    ],
  );
  assert.equal(run.steps[1].output.port, "spam");
  assert.deepEqual(run.output, { port: "terminal", terminalCode: "spam_closed", result: { category: "spam" } });

  const replay = await api("/api/v1/runs", request);
  assert.equal(replay.status, 200, JSON.stringify(replay.body));
  assert.equal(replay.body.id, created.body.id);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
});

test("wrangler dev: the default path parks in wait_for_event and an event completes it", { timeout: 90_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${output()}`);
  });
  const workflow = await api("/api/v1/workflows", { body: { name: "triage-wait" } });
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph: triage } });
  assert.equal(version.status, 201, JSON.stringify(version.body));
  const created = await api("/api/v1/runs", { body: { workflowVersionId: version.body.id, authorityMode: "autonomous", input: { category: "harassment" } } });
  assert.equal(created.status, 201, JSON.stringify(created.body));

  const waiting = await pollRun(created.body.id, (body) => body.waits?.some((wait) => wait.state === "waiting"), "a waiting wait");
  assert.equal(waiting.state, "waiting");
  assert.equal(waiting.waits[0].eventType, "moderator.decision");

  const sent = await api(`/api/v1/runs/${created.body.id}/events`, { body: { type: "moderator.decision", payload: { decision: "remove" } } });
  assert.equal(sent.status, 202, JSON.stringify(sent.body));

  const run = await pollRun(created.body.id, (body) => body.state === "succeeded", "succeeded");
  assert.deepEqual(
    run.steps.map((step) => step.nodeId),
    ["start", "route", "await_moderator", "moderator_decided"],
  );
  assert.deepEqual(run.output, { port: "terminal", terminalCode: "moderator_decided", result: { decision: { decision: "remove" } } });
});

test("wrangler dev: the local driver fires the Worker's schedule; the audit chain is anchored", { timeout: 60_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${output()}`);
  });
  const workflow = await api("/api/v1/workflows", { body: { name: "scheduled" } });
  assert.equal(workflow.status, 201, JSON.stringify(workflow.body));
  const run = await server.scheduled();
  assert.deepEqual([run.ok, run.status, run.outcome], [true, 200, "ok"], JSON.stringify(run));
  const verdict = await api("/api/v1/audit/verify");
  assert.equal(verdict.status, 200, JSON.stringify(verdict.body));
  assert.equal(verdict.body.ok, true, JSON.stringify(verdict.body));
  assert.equal(verdict.body.anchored, true, `AUDIT_CHECKPOINT_KEY reaches the Worker and R2 holds the anchor: ${JSON.stringify(verdict.body)}`);
  assert.equal(verdict.body.lastFullVerification?.ok, true, JSON.stringify(verdict.body));
  assert.match(output(), /"event":"schedule\.run".*"enforcement\.outbox"/u);
});
