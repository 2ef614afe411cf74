// End-to-end smoke test through the real `wrangler dev`, started exactly as `npm start` starts it
// (scripts/start.mjs). The vitest pool allows code generation from strings, which wrangler dev and
// Cloudflare refuse (DESIGN.md §6), so this test is what catches such a library before users do.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

const templateDir = fileURLToPath(new URL("..", import.meta.url));
const triage = JSON.parse(readFileSync(fileURLToPath(new URL("../examples/triage.json", import.meta.url)), "utf8"));
const READY_TIMEOUT_MS = 45_000;
const RUN_TIMEOUT_MS = 30_000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

let child;
let output = "";
let stateDir;
let baseUrl;
let apiKey;

function killGroup(signal) {
  if (!child?.pid) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}
// Even if the runner dies mid-test, take the server (wrangler, workerd) down with it.
process.on("exit", () => killGroup("SIGKILL"));

async function stopServer() {
  if (!child) return;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    killGroup("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
  }
  killGroup("SIGKILL"); // stragglers of the group (workerd) after the parent has gone
}

async function api(pathname, { method, body, headers = {} } = {}) {
  const response = await fetch(`${baseUrl}${pathname}`, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

async function pollRun(runId, done, what) {
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  let last;
  while (Date.now() < deadline) {
    last = await api(`/api/v1/runs/${runId}`);
    assert.equal(last.status, 200, JSON.stringify(last.body));
    if (done(last.body)) return last.body;
    if (["failed", "repair_required", "terminated"].includes(last.body.state)) break;
    await sleep(200);
  }
  assert.fail(`run ${runId} did not reach ${what}: ${JSON.stringify(last?.body).slice(0, 2000)}`);
}

before(async () => {
  stateDir = mkdtempSync(path.join(tmpdir(), "safest-smoke-"));
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  child = spawn(process.execPath, ["scripts/start.mjs"], {
    cwd: templateDir,
    detached: true, // its own process group, so the whole tree can be killed at once
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), SAFEST_STATE_DIR: stateDir, ADMIN_TOKEN: `smoke_${randomBytes(24).toString("hex")}`, CI: "true" },
  });
  const collect = (chunk) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);

  const demoFile = path.join(stateDir, "demo-installation.json");
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!existsSync(demoFile)) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`npm start exited early (${child.exitCode ?? child.signalCode}):\n${output}`);
    if (Date.now() > deadline) throw new Error(`no demo installation after ${READY_TIMEOUT_MS / 1000} s:\n${output}`);
    await sleep(200);
  }
  apiKey = JSON.parse(readFileSync(demoFile, "utf8")).apiKey;
  assert.match(apiKey, /^sk_/u);
});

after(async () => {
  await stopServer();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

test("wrangler dev: publish examples/triage.json, run the case path, replay by Idempotency-Key", { timeout: 90_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${output}`);
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
  assert.deepEqual(run.steps.map((step) => [step.nodeId, step.state]), [["start", "succeeded"], ["route", "succeeded"], ["close_spam", "succeeded"]]);
  assert.equal(run.steps[1].output.port, "spam");
  assert.deepEqual(run.output, { port: "terminal", terminalCode: "spam_closed", result: { category: "spam" } });

  const replay = await api("/api/v1/runs", request);
  assert.equal(replay.status, 200, JSON.stringify(replay.body));
  assert.equal(replay.body.id, created.body.id);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
});

test("wrangler dev: the default path parks in wait_for_event and an event completes it", { timeout: 90_000 }, async (t) => {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${output}`);
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
  assert.deepEqual(run.steps.map((step) => step.nodeId), ["start", "route", "await_moderator", "moderator_decided"]);
  assert.deepEqual(run.output, { port: "terminal", terminalCode: "moderator_decided", result: { decision: { decision: "remove" } } });
});
