// A Worker runtime that dies under npm start (a V8 fault in workerd ends it with SIGTRAP; see
// docs/ARCHITECTURE.md, "Local dev server") is restarted on the same state folder by wrangler dev
// itself, which says so, and what was stored before is there.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { api as apiFor, startServer } from "./harness.mjs";

let server;
const output = () => server?.output() ?? "";

before(async () => {
  server = await startServer({ label: "restart" });
});

after(async () => {
  await server?.stop();
});

test("npm start: a runtime that dies (SIGTRAP) is restarted on the same state, and says so", { timeout: 180_000 }, async (t) => {
  t.after(async () => {
    if (t.passed === false) console.error(`server output:\n${output()}\nserver state:\n${await server?.diagnose()}`);
  });
  const api = apiFor(server.baseUrl, server.apiKey, { restartGraceMs: 90_000 });
  const report = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "restart-1" }, category: "scams_and_fraud" } });
  assert.equal(report.status, 201, JSON.stringify(report.body));

  const [runtime, ...others] = server.runtimePids();
  assert.ok(runtime > 0 && others.length === 0, `one runtime: ${JSON.stringify(server.runtimePids())}`);
  process.kill(runtime, "SIGTRAP");

  // Requests that find no server are sent again until the restarted one answers.
  const read = await api(`/api/v1/reports/${report.body.id}`);
  assert.equal(read.status, 200, JSON.stringify(read.body));
  assert.equal(read.body.id, report.body.id);
  assert.match(output(), /The Workers runtime crashed unexpectedly and is being restarted \(crash #1\)/u);
  const [restarted] = server.runtimePids();
  assert.ok(restarted > 0 && restarted !== runtime, `a new runtime: ${restarted} after ${runtime}`);

  const later = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "restart-2" }, category: "scams_and_fraud" } });
  assert.equal(later.status, 201, JSON.stringify(later.body));
});
