// Smoke test through the real `wrangler dev` (as `npm start` runs it): examples/spam-triage.json on
// a few reports end to end — a keyword bank over the reported content, a condition on its verdict,
// a decision and an action delivered to a local receiver — and then a search of the whole local
// state folder (D1, Workflows' own storage, R2) for phrases of the reported content and the
// reporter's contact, which must find nothing: everything holding them is sealed.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { api as apiFor, pollRun, startServer, until } from "./harness.mjs";

const spamTriage = JSON.parse(readFileSync(fileURLToPath(new URL("../examples/spam-triage.json", import.meta.url)), "utf8"));
const MARKER = "quokka-meridian-5521";
const REPORTER = "smoke-reporter-8812@example.org";

let server;
let api;
let receiver;
const received = [];

function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    const stat = statSync(full);
    if (stat.isDirectory()) out.push(...filesUnder(full));
    else if (stat.isFile()) out.push(full);
  }
  return out;
}

before(async () => {
  receiver = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      received.push({ path: request.url, body: JSON.parse(body || "null") });
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  server = await startServer({ label: "smoke-content" });
  api = apiFor(server.baseUrl, server.apiKey);
});

after(async () => {
  await server?.stop();
  receiver?.close();
});

test("wrangler dev: spam-triage.json reads the reported content, decides and acts; the state folder holds none of it in plaintext", { timeout: 120_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${server?.output() ?? ""}`);
  });
  const endpoint = await api("/api/v1/webhook-endpoints", { body: { url: `http://127.0.0.1:${receiver.address().port}/actions`, retryBaseSeconds: 0, maxAttempts: 5 } });
  assert.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
  const type = await api("/api/v1/action-types", { body: { key: "remove_content", name: "Remove content", endpointId: endpoint.body.id, reversible: true, requiresApproval: false } });
  assert.equal(type.status, 201, JSON.stringify(type.body));
  const workflow = await api("/api/v1/workflows", { body: { name: "spam-triage" } });
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph: spamTriage } });
  assert.equal(version.status, 201, `examples/spam-triage.json must publish: ${JSON.stringify(version.body)}`);
  const trigger = await api("/api/v1/triggers", { body: { event: "report.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } });
  assert.equal(trigger.status, 201, JSON.stringify(trigger.body));

  const texts = { spam1: `Get FREE CRYPTO today ${MARKER}`, spam2: `claim your prize now ${MARKER}`, clean: `Lovely sunset over the bay ${MARKER}` };
  const runs = {};
  for (const [name, text] of Object.entries(texts)) {
    const report = await api("/api/v1/reports", {
      body: { subject: { kind: "content", id: `smoke-${name}`, snapshot: { text } }, category: "scams_and_fraud", description: `I saw ${MARKER} in my feed`, reporter: { id: "smoke-user", contact: REPORTER } },
    });
    assert.equal(report.status, 201, JSON.stringify(report.body));
    assert.equal(report.body.runs.length, 1, JSON.stringify(report.body.runs));
    runs[name] = report.body.runs[0].runId;
  }
  for (const [name, runId] of Object.entries(runs)) {
    const run = await pollRun(api, runId, (body) => body.state === "succeeded", "succeeded", 60_000);
    assert.equal(run.output.terminalCode, name === "clean" ? "not_spam" : "spam_removed", `${name}: ${JSON.stringify(run.output)}`);
    const bank = run.steps.find((step) => step.nodeId === "spam_terms");
    assert.equal(bank.output.data.matched, name !== "clean");
    assert.equal(bank.sealed, true, "the matched keywords are sealed");
    assert.equal(bank.output.data.keywords, undefined);
  }
  await until(async () => ({ value: received.filter((r) => r.path === "/actions").length >= 2, seen: received.length }), "two action deliveries");
  const subjects = received.map((r) => r.body?.data?.parameters?.subjectId ?? r.body?.data?.subject?.id ?? JSON.stringify(r.body));
  assert.ok(subjects.some((s) => String(s).includes("smoke-spam1")) && subjects.some((s) => String(s).includes("smoke-spam2")), JSON.stringify(subjects));

  // Nothing of the content, and not the reporter's contact, in plaintext anywhere in the state folder.
  const needles = [MARKER, REPORTER, "FREE CRYPTO today", "sunset over the bay"].map((text) => Buffer.from(text));
  const files = filesUnder(server.stateDir);
  assert.ok(
    files.some((file) => file.endsWith(".sqlite")),
    `the state folder holds the local databases: ${files.join(", ")}`,
  );
  for (const file of files) {
    const bytes = readFileSync(file);
    for (const needle of needles) assert.equal(bytes.includes(needle), false, `${path.relative(server.stateDir, file)} holds "${needle}" in plaintext`);
  }
});
