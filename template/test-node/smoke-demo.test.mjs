// The demo desk under the real `wrangler dev`, started as `npm start` starts it: a fresh state
// folder is seeded (queues, the example workflows bound to triggers, reports whose runs reach their
// tasks and proposals, the demo model's proposals, signed deliveries the demo product verified); a
// second start on the same state adds nothing; `npm start -- --empty` seeds nothing.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { api as apiFor, startServer, until } from "./harness.mjs";

const READY_TIMEOUT_MS = 240_000;
const dataset = JSON.parse(readFileSync(new URL("../demo/dataset.json", import.meta.url), "utf8"));
const secrets = { reportMasterKey: randomBytes(32).toString("base64url"), auditCheckpointKey: randomBytes(32).toString("base64url") };
const servers = [];
let keptState = null;

after(async () => {
  for (const server of servers) await server.stop();
  if (keptState) rmSync(keptState, { recursive: true, force: true });
});

async function start(options) {
  const server = await startServer({ readyTimeoutMs: READY_TIMEOUT_MS, signin: true, secrets, ...options });
  servers.push(server);
  return server;
}

/** What the desk holds, through the API. */
async function desk(server) {
  const api = apiFor(server.baseUrl, server.apiKey, { prefix: "/api/v1" });
  const list = async (pathname) => {
    const response = await api(pathname);
    assert.equal(response.status, 200, `${pathname}: ${JSON.stringify(response.body)}`);
    return response.body.items;
  };
  const queues = await list("/queues");
  return {
    api,
    queues: Object.fromEntries(queues.map((q) => [q.name, { slaSeconds: q.slaSeconds, open: q.open }])),
    workflows: (await list("/workflows")).map((w) => w.name).sort(),
    triggers: (await list("/triggers")).map((t) => `${t.event} ${t.authorityMode}`).sort(),
    reports: (await list("/reports?limit=200")).length,
    runs: (await list("/runs?limit=200")).length,
    proposals: (await list("/action-proposals?state=approval_required&limit=200")).length,
    endpoints: (await list("/webhook-endpoints")).map((e) => e.name).sort(),
    providers: await list("/ai-providers"),
  };
}

function onFailure(t, server) {
  t.after(() => {
    if (t.passed === false) console.error(`server output:\n${server?.output().slice(-8000)}`);
  });
}

test("a fresh npm start seeds the demo desk once; a second start on the same state adds nothing", { timeout: 600_000 }, async (t) => {
  const first = await start({ label: "demo", args: [], keepState: true });
  keptState = first.stateDir;
  onFailure(t, first);
  assert.match(first.output(), /Demo desk: seeded in [\d.]+ s — 36 reports, 4 appeals, 4 workflows with triggers/u);
  assert.match(first.output(), /Demo product: http:\/\/127\.0\.0\.1:\d+\/demo\/product/u);
  const seeded = await desk(first);
  assert.deepEqual(seeded.workflows, ["appeal-review", "harassment-review", "spam-triage", "violent-media"]);
  assert.deepEqual(seeded.triggers, ["appeal.created autonomous", "report.created assisted", "report.created assisted", "report.created autonomous"]);
  assert.equal(seeded.reports, dataset.reports.length);
  // 10 scam, 12 harassment and 6 media reports start a run each, and 4 appeals.
  assert.equal(seeded.runs, 32);
  // Harassment reports and the notifier's appeal wait in general-review, appeals against a removal in urgent.
  assert.deepEqual(seeded.queues, { "general-review": { slaSeconds: 86_400, open: 13 }, urgent: { slaSeconds: 14_400, open: 3 } });
  // Spam triage runs assisted: each matched post's removal waits for a person.
  assert.equal(seeded.proposals, 7);
  assert.deepEqual(seeded.endpoints, ["demo-product-actions", "demo-product-messages", "hash-hotline"]);
  assert.equal(seeded.providers.length, 1);
  assert.equal(seeded.providers[0].name, "moderation-model");
  assert.match(seeded.providers[0].model, /demo/u);

  // The demo model answered the harassment proposals, labelled as a demo, through the same wrangler dev.
  const runs = (await seeded.api("/runs?limit=200")).body.items;
  const harassment = (await seeded.api("/workflows")).body.items.find((w) => w.name === "harassment-review");
  const version = (await seeded.api(`/workflows/${harassment.id}`)).body.versions[0];
  const verdicts = [];
  for (const run of runs.filter((r) => r.workflowVersionId === version.id)) {
    const detail = await seeded.api(`/runs/${run.id}`);
    verdicts.push(detail.body.steps.find((s) => s.nodeId === "assess")?.output?.resultCode);
  }
  assert.equal(verdicts.filter((v) => v === "harassment").length, 7, JSON.stringify(verdicts));
  assert.equal(verdicts.filter((v) => v === "not_harassment").length, 5, JSON.stringify(verdicts));

  // Violent media runs autonomous: the demo product received the suspensions, each signature verified.
  const received = await until(
    async () => {
      const response = await fetch(`${first.baseUrl}/demo/product/received`);
      const body = await response.json();
      const actions = body.items.filter((i) => i.type === "action.execute");
      return { value: actions.length >= 3 && body, seen: body.items.map((i) => [i.type, i.verified]) };
    },
    "three suspensions at the demo product",
    60_000,
  );
  assert.equal(received.demo, true);
  assert.ok(
    received.items.every((i) => i.verified),
    JSON.stringify(received.items.filter((i) => !i.verified)),
  );
  assert.deepEqual(
    received.items
      .filter((i) => i.type === "action.execute")
      .map((i) => i.data.actionType)
      .sort(),
    ["suspend_uploader", "suspend_uploader", "suspend_uploader"],
  );
  const page = await (await fetch(`${first.baseUrl}/demo/product`)).text();
  assert.match(page, /<h1>Demo product<\/h1>/u);
  assert.match(page, /demo only/u);
  const marker = JSON.parse(readFileSync(path.join(first.stateDir, "demo-seed.json"), "utf8"));
  assert.equal(marker.installationId, first.installationId);
  assert.equal(marker.complete, true);
  await first.stop();

  // The same state folder again: the marker says it is done, nothing is added.
  const second = await start({ label: "demo-again", args: [], stateDir: keptState, keepState: true });
  onFailure(t, second);
  assert.equal(second.installationId, first.installationId);
  assert.match(second.output(), /Demo desk: seeded on .*\(nothing added this time\)/u);
  // The fresh state's migrations went in one `d1 execute`, recorded as `migrations apply` records them.
  assert.match(second.output(), /No migrations to apply/u);
  const again = await desk(second);
  for (const key of ["queues", "workflows", "triggers", "reports", "runs", "proposals", "endpoints"]) assert.deepEqual(again[key], seeded[key], key);
  await second.stop();

  // A start that stopped mid-seed (no marker yet) completes the desk through the server's own state: still nothing twice.
  rmSync(path.join(keptState, "demo-seed.json"));
  const third = await start({ label: "demo-resume", args: [], stateDir: keptState, keepState: true });
  onFailure(t, third);
  const resumed = await desk(third);
  for (const key of ["queues", "workflows", "triggers", "reports", "runs", "proposals", "endpoints"]) assert.deepEqual(resumed[key], seeded[key], key);
  assert.ok(existsSync(path.join(keptState, "demo-seed.json")));
  await third.stop();
});

test("npm start -- --empty seeds nothing (and the demo peers are still there)", { timeout: 300_000 }, async (t) => {
  const server = await start({ label: "demo-empty", args: ["--empty"] });
  onFailure(t, server);
  assert.match(server.output(), /Demo desk: not seeded \(--empty\)/u);
  const empty = await desk(server);
  assert.deepEqual([empty.queues, empty.workflows, empty.triggers, empty.reports, empty.runs, empty.proposals, empty.endpoints, empty.providers], [{}, [], [], 0, 0, 0, [], []]);
  const model = await fetch(`${server.baseUrl}/demo/model`);
  assert.equal(model.status, 200);
  assert.equal((await model.json()).demo, true);
  const marker = JSON.parse(readFileSync(path.join(server.stateDir, "demo-seed.json"), "utf8"));
  assert.equal(marker.empty, true);
});
