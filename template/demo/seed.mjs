// The demo desk `npm start` seeds into the demo installation of a fresh state folder (see
// demo/README.md): queues with SLAs, the example workflows published and bound to triggers, the
// harassment policy, the demo model as the AI provider `moderation-model`, webhook endpoints and
// action types delivered to the demo product, and reports (with a few decisions and appeals) made
// from demo/dataset.json. Everything goes through the public API, as a team would do it.
//
// Once: a marker in the state folder (demo-seed.json) says it is done; and every step is
// idempotent against the server (resources found by name are reused, reports and appeals carry an
// Idempotency-Key, a report that already has a decision gets none), so a start after a crash
// mid-seed completes the desk without adding anything twice.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const demoDir = fileURLToPath(new URL(".", import.meta.url));
const examplesDir = path.join(demoDir, "..", "examples");
export const MARKER_FILE = "demo-seed.json";
const MARKER_VERSION = 1;
const SETTLE_TIMEOUT_MS = 60_000;
const INTAKE_CONCURRENCY = 4;
/** Where a run waits for a person (a task, a proposal: `waiting`) or has ended. */
const SETTLED_STATES = new Set(["waiting", "succeeded", "failed", "terminated", "repair_required", "superseded"]);

const HARASSMENT_POLICY = `Harassment policy (demo)

1. Scope
1.1 This policy covers posts and messages aimed at a person on the platform.

2. What we remove
2.1 Insults aimed at a person (calling them an idiot, a loser, worthless…) are removed.
2.2 Telling a person to leave, repeatedly or with others, is removed.

3. What we allow
3.1 Criticism of ideas, plans, works and public decisions is allowed, even when it is harsh.
3.2 Satire of public figures is allowed.`;

/** The workflows of the desk: an example graph, the trigger that starts it, and why. */
const WORKFLOWS = [
  { name: "spam-triage", file: "spam-triage.json", description: "Demo: keyword bank over reported posts; removals wait for approval (assisted).", trigger: { name: "demo: scam reports", event: "report.created", when: "report.category == 'scams_and_fraud'", authorityMode: "assisted" } },
  { name: "harassment-review", file: "harassment-review.json", description: "Demo: the demo model reads the post under the harassment policy, a person decides.", trigger: { name: "demo: harassment reports", event: "report.created", when: "report.category == 'cyber_violence'", authorityMode: "assisted" } },
  // The demo's own graph (demo/violent-media.json), not an example: re-uploaded violent clips by SHA-256, handed to a hotline, the uploader suspended.
  { name: "violent-media", file: "violent-media.json", dir: demoDir, description: "Demo: a hash bank over the evidence; a match is handed off and the uploader suspended.", trigger: { name: "demo: violent media reports", event: "report.created", when: "report.category == 'violence' && report.evidenceCount > 0", authorityMode: "autonomous" } },
  { name: "appeal-review", file: "appeal-review.json", description: "Demo: appeals reviewed by a person (urgent when a restriction is contested); overturns are applied.", trigger: { name: "demo: appeals", event: "appeal.created", when: "true", authorityMode: "autonomous" } },
];

const QUEUES = [
  { name: "general-review", description: "Demo: reports and appeals a person reviews within a day.", slaSeconds: 86_400, priority: 10 },
  { name: "urgent", description: "Demo: appeals against a restriction, reviewed within four hours.", slaSeconds: 14_400, priority: 80 },
];

/** Webhook endpoints of the demo product (hook = the path segment the product verifies under). */
const ENDPOINTS = [
  { name: "demo-product-actions", hook: "actions", description: "Demo product: executes actions (remove, suspend, restore).", eventTypes: [] },
  { name: "demo-product-messages", hook: "messages", description: "Demo product: sends messages to its users (reporters, authors, appellants).", eventTypes: ["message.send"] },
  { name: "hash-hotline", hook: "hotline", description: "Demo product's stand-in for a hash-sharing hotline (handoffs of known media).", eventTypes: [] },
];

const ACTION_TYPES = [
  { key: "remove_content", name: "Remove the post (demo product)", description: "The demo product hides the post.", reversible: true },
  { key: "suspend_uploader", name: "Suspend the uploader (demo product)", description: "The demo product suspends the account that uploaded known media.", reversible: true },
  { key: "restore_content", name: "Restore the post (demo product)", description: "The demo product shows a post again after an appeal.", reversible: true },
];

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function readJson(file) {
  return JSON.parse(readFileSync(file, "utf8"));
}

export function readMarker(stateDir) {
  try {
    return readJson(path.join(stateDir, MARKER_FILE));
  } catch {
    return null;
  }
}

export function writeMarker(stateDir, value) {
  const file = path.join(stateDir, MARKER_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify({ version: MARKER_VERSION, ...value }, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

function client(baseUrl, key) {
  return async function call(pathname, { method, body, headers = {}, ok = [200, 201] } = {}) {
    const response = await fetch(`${baseUrl}${pathname}`, {
      method: method ?? (body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      signal: AbortSignal.timeout(30_000),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { unparsed: text.slice(0, 500) };
    }
    if (!ok.includes(response.status)) throw new Error(`${method ?? (body === undefined ? "GET" : "POST")} ${pathname} answered ${response.status} ${parsed?.error?.code ?? ""}: ${parsed?.error?.message ?? text.slice(0, 300)}`);
    return parsed;
  };
}

/** Every page of a cursor listing (GET /reports, /runs…), up to `max` items. */
async function listAll(api, pathname, max = 2_000) {
  const items = [];
  let cursor = null;
  do {
    const page = await api(`${pathname}${pathname.includes("?") ? "&" : "?"}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    items.push(...page.items);
    cursor = page.nextCursor ?? null;
  } while (cursor && items.length < max);
  return items;
}

const byName = (items, field = "name") => new Map(items.map((item) => [item[field], item]));

/** The hooks of the demo product and their secrets: registered once, right after the endpoint is created. */
async function ensureEndpoints(api, product, baseUrl, log) {
  const existing = byName((await api("/api/v1/webhook-endpoints")).items);
  const ids = {};
  for (const endpoint of ENDPOINTS) {
    let row = existing.get(endpoint.name);
    if (!row) {
      row = await api("/api/v1/webhook-endpoints", {
        body: { name: endpoint.name, url: `${baseUrl}/demo/product/webhooks/${endpoint.hook}`, description: endpoint.description, eventTypes: endpoint.eventTypes, retryBaseSeconds: 2, maxAttempts: 8 },
      });
      // The secret is shown this once: the demo product keeps it to verify every delivery.
      await product(`/demo/product/webhooks/${endpoint.hook}/secret`, { method: "PUT", body: { secret: row.secret } });
    } else if (!(await product(`/demo/product/webhooks/${endpoint.hook}/secret`)).registered) {
      log(`the demo product has no secret for ${endpoint.name} (a start stopped between creating it and registering it): its deliveries will show as not verified; delete the state folder to start over.`);
    }
    ids[endpoint.name] = row.id;
  }
  return ids;
}

async function ensureWorkflows(api) {
  const existing = byName((await api("/api/v1/workflows")).items);
  const triggers = byName((await api("/api/v1/triggers")).items);
  const versions = {};
  // Independent of one another (each its own name): published side by side.
  await Promise.all(
    WORKFLOWS.map(async (workflow) => {
      const row = existing.get(workflow.name) ?? (await api("/api/v1/workflows", { body: { name: workflow.name, description: workflow.description } }));
      const detail = await api(`/api/v1/workflows/${row.id}`);
      const version = detail.versions?.[0] ?? (await api(`/api/v1/workflows/${row.id}/versions`, { body: { graph: readJson(path.join(workflow.dir ?? examplesDir, workflow.file)) } }));
      versions[workflow.name] = version.id;
      if (!triggers.has(workflow.trigger.name)) await api("/api/v1/triggers", { body: { ...workflow.trigger, workflowVersionId: version.id } });
    }),
  );
  return versions;
}

function reportBody(dataset, report) {
  const post = dataset.posts.find((p) => p.id === report.post);
  const author = dataset.accounts.find((a) => a.id === post.author);
  const reporter = dataset.accounts.find((a) => a.id === report.reporter);
  return {
    subject: { kind: report.subjectKind ?? "content", id: post.id, ownerId: author.id, snapshot: { text: post.text, author: author.handle } },
    category: report.category,
    source: "notice",
    reporter: { id: reporter.id, contact: `${reporter.handle.slice(1)}@example.org` },
    ...(report.description ? { description: report.description } : {}),
    ...(post.evidence ? { evidence: post.evidence } : {}),
    locale: "en",
  };
}

/** The runs the seed started reach where a person comes in (a task, a proposal) or their end; bounded. */
async function settle(api, runIds, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  const mine = new Set(runIds);
  let pending = mine.size;
  while (pending > 0 && Date.now() < deadline) {
    // One listing per look (newest first; the desk's runs are the newest), not one read per run.
    const runs = await listAll(api, "/api/v1/runs", Math.max(200, mine.size));
    const settled = runs.filter((run) => mine.has(run.id) && SETTLED_STATES.has(run.state)).length;
    pending = mine.size - settled;
    if (pending > 0) await sleep(300);
  }
  return pending;
}

/** Runs `task` over `items`, `concurrency` at a time. */
async function pool(items, concurrency, task) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/**
 * Seeds the desk into the installation whose admin key is `apiKey`. Returns what the banner shows:
 * { seeded, skipped?, counts }. `adminToken` registers the demo product's secrets.
 */
export async function seedDemoDesk({ baseUrl, apiKey, adminToken, stateDir, installationId, log = () => undefined, settleTimeoutMs = SETTLE_TIMEOUT_MS }) {
  const marker = readMarker(stateDir);
  if (marker?.installationId === installationId && marker.complete) return { seeded: false, skipped: "already seeded", marker };
  const api = client(baseUrl, apiKey);
  const product = client(baseUrl, adminToken);
  const dataset = readJson(path.join(demoDir, "dataset.json"));

  const queues = byName((await api("/api/v1/queues")).items);
  for (const queue of QUEUES) if (!queues.has(queue.name)) await api("/api/v1/queues", { body: queue });
  const endpoints = await ensureEndpoints(api, product, baseUrl, log);
  const types = byName((await api("/api/v1/action-types")).items, "key");
  for (const type of ACTION_TYPES) {
    if (!types.has(type.key)) await api("/api/v1/action-types", { body: { ...type, endpointId: endpoints["demo-product-actions"], requiresApproval: false } });
  }
  if (!byName((await api("/api/v1/policies")).items).has("harassment-policy")) {
    await api("/api/v1/policies", { body: { name: "harassment-policy", description: "Demo policy for the harassment-review workflow.", text: HARASSMENT_POLICY } });
  }
  if (!byName((await api("/api/v1/ai-providers")).items).has("moderation-model")) {
    // The demo model of this same `wrangler dev` (/demo/model): deterministic, labelled a demo in its model name and every answer.
    await api("/api/v1/ai-providers", { body: { name: "moderation-model", kind: "openai-compatible", baseUrl: `${baseUrl}/demo/model/v1`, model: "demo-moderation-model", apiKey: "demo-model-needs-no-key", contentAllowed: true, timeoutMs: 10_000 } });
  }
  await ensureWorkflows(api);

  const runIds = [];
  const reportIds = {};
  await pool(dataset.reports, INTAKE_CONCURRENCY, async (report) => {
    const created = await api("/api/v1/reports", { body: reportBody(dataset, report), headers: { "idempotency-key": `demo-seed-report-${report.key}` } });
    reportIds[report.key] = created.id;
    runIds.push(...(created.runs ?? []).map((run) => run.runId).filter(Boolean));
  });
  let appeals = 0;
  await pool(dataset.decisions, INTAKE_CONCURRENCY, async (entry) => {
    const reportId = reportIds[entry.report];
    const { appeal, report: _report, ...decision } = entry;
    // POST /decisions has no Idempotency-Key: a report that already has one keeps it.
    const existing = (await api(`/api/v1/decisions?reportId=${encodeURIComponent(reportId)}`)).items;
    const recorded = existing[0] ?? (await api("/api/v1/decisions", { body: { reportId, ...decision } }));
    if (!appeal) return;
    const appellant = dataset.accounts.find((a) => a.id === appeal.appellant);
    const filed = await api("/api/v1/appeals", {
      body: { decisionId: recorded.id, appellantRole: appeal.role, appellant: { id: appellant.id, contact: `${appellant.handle.slice(1)}@example.org` }, reason: appeal.reason },
      headers: { "idempotency-key": `demo-seed-appeal-${entry.report}` },
    });
    appeals += 1;
    runIds.push(...(filed.runs ?? []).map((run) => run.runId).filter(Boolean));
  });
  const unsettled = await settle(api, runIds, settleTimeoutMs);
  // The dashboard's figures now, rather than at the end of the hour.
  await api("/api/v1/metrics/rollup", { body: {} }).catch(() => undefined);
  const counts = {
    queues: QUEUES.length,
    workflows: WORKFLOWS.length,
    triggers: WORKFLOWS.length,
    reports: dataset.reports.length,
    appeals,
    runs: runIds.length,
    tasksOpen: Object.fromEntries((await api("/api/v1/queues")).items.map((queue) => [queue.name, queue.open ?? 0])),
    proposalsWaiting: (await api("/api/v1/action-proposals?state=approval_required&limit=200")).items.length,
    unsettledRuns: unsettled,
  };
  writeMarker(stateDir, { installationId, complete: true, seededAt: new Date().toISOString(), counts });
  return { seeded: true, counts };
}

/** `npm start -- --empty`: the state folder is left empty for good (a later start does not seed it). */
export function markEmpty(stateDir, installationId) {
  const marker = readMarker(stateDir);
  if (marker?.installationId === installationId) return;
  writeMarker(stateDir, { installationId, complete: true, empty: true, seededAt: null, counts: null });
}

/**
 * What `npm start` does with the desk (scripts/start.mjs): seeds it unless `--empty` (or the state
 * folder was started empty before; `--demo` seeds it anyway), and returns the banner's lines.
 */
export async function demoDeskForStart({ argv, baseUrl, adminToken, demo, stateDir, log }) {
  const links = [`  Demo product: ${baseUrl}/demo/product  (the actions and messages it received, each signature verified)`, `  Demo model:   ${baseUrl}/demo/model  (deterministic, a demo: a word list, not a classifier)`];
  const marker = readMarker(stateDir);
  if (argv.includes("--empty") && !argv.includes("--demo")) {
    if (marker?.installationId === demo.id && marker.complete && !marker.empty) return [`  Demo desk: seeded on an earlier start (${marker.seededAt}); --empty removes nothing (delete the state folder for an empty one).`, ...links];
    markEmpty(stateDir, demo.id);
    return ["  Demo desk: not seeded (--empty).", ...links];
  }
  if (marker?.installationId === demo.id && marker.empty && !argv.includes("--demo")) return ["  Demo desk: not seeded (this state folder was started with --empty; `npm start -- --demo` seeds it).", ...links];
  const started = Date.now();
  try {
    const result = await seedDemoDesk({ baseUrl, apiKey: demo.apiKey, adminToken, stateDir, installationId: demo.id, log });
    const counts = result.counts ?? result.marker?.counts;
    const what = counts
      ? `${counts.reports} reports, ${counts.appeals} appeals, ${counts.workflows} workflows with triggers, queues ${Object.entries(counts.tasksOpen)
          .map(([name, open]) => `${name} (${open} open)`)
          .join(", ")}, ${counts.proposalsWaiting} proposals waiting for approval`
      : "";
    const lines = result.seeded
      ? [`  Demo desk: seeded in ${((Date.now() - started) / 1000).toFixed(1)} s — ${what}.${counts.unsettledRuns ? ` ${counts.unsettledRuns} runs were still starting.` : ""}`]
      : [`  Demo desk: seeded on ${result.marker.seededAt ?? "an earlier start"} (nothing added this time)${what ? ` — ${what} at the time` : ""}.`];
    return [...lines, "  In the console: Review queues, Approvals, Runs, Audit and the dashboard.", ...links];
  } catch (error) {
    log(`seeding the demo desk failed: ${error instanceof Error ? error.message : error}; the next start completes it.`);
    return ["  Demo desk: incomplete (see the error above); the next `npm start` completes it.", ...links];
  }
}
