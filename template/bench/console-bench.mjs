// Console bench: (1) the gzipped JavaScript the review page loads, against a 300 kB budget, and
// (2) how long the review pages take to become interactive with 10,000 open tasks in the queue.
// Runs the real thing: console built with Vite, `npm start` (wrangler dev) on a free port with a
// temporary state folder, Debian's Chromium through playwright-core. Prints a table, then ends
// with one JSON line.
//
//   node bench/console-bench.mjs            (from template/; needs /usr/bin/chromium)
//
// Seeding: one report goes through the real path (trigger → run → task); the other 9,999 open
// tasks are inserted into the local D1 with `wrangler d1 execute --local` (one run, one waiting
// step and one task each, all pointing at that report), as a busy queue would hold them.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { apiClient, buildConsole, launchBrowser, pngDataUrl, signinLink, startServer, templateDir, until } from "../test-browser/harness.mjs";

const BUDGET_BYTES = 300 * 1000;
const OPEN_TASKS = 10_000;
const SAMPLES = 5;
const QUEUE = "bench-console";

const require = createRequire(path.join(templateDir, "package.json"));
const log = (line) => process.stderr.write(`[console-bench] ${line}\n`);
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const round = (value) => Math.round(value * 10) / 10;

function seedSql({ installationId, queueId, versionId, reportId, count }) {
  const at = new Date().toISOString();
  const quote = (value) => `'${String(value).replace(/'/gu, "''")}'`;
  const schema = JSON.stringify({ type: "object", required: ["outcome"], additionalProperties: false, properties: { outcome: { enum: ["remove", "keep"] }, note: { type: "string", maxLength: 2000 } } });
  const numbers = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})`;
  const base = Math.floor(Date.now() / 60_000) * 60 - 2 * 86_400;
  return `
${numbers}
INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, report_id, queue_id, current_node_id, created_at, started_at, waiting_at, updated_at)
SELECT 'run_cb_' || i, ${quote(installationId)}, ${quote(versionId)}, 'autonomous', 'waiting', '{}', ${quote(reportId)}, ${quote(queueId)}, 'human_task', ${quote(at)}, ${quote(at)}, ${quote(at)}, ${quote(at)} FROM n;
${numbers}
INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, branch_key, occurrence, state, started_at, waiting_at, updated_at)
SELECT 'sr_cb_' || i, 'run_cb_' || i, 'human_task', 'human_task', '', 1, 'waiting', ${quote(at)}, ${quote(at)}, ${quote(at)} FROM n;
${numbers}
INSERT INTO human_tasks (id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, priority, context_json, context_digest, response_schema_json, due_at, expires_at, created_at, updated_at)
SELECT 'task_' || lower(hex(randomblob(16))), ${quote(installationId)}, ${quote(reportId)}, NULL, 'run_cb_' || i, 'sr_cb_' || i, 'review', 'open', ${quote(queueId)}, (i * 37) % 101,
  '{"category":"scams_and_fraud","subject":"post-' || i || '"}', 'sha256:' || lower(hex(randomblob(32))), ${quote(schema)},
  strftime('%Y-%m-%dT%H:%M:%fZ', ${base} + ((i * 7919) % 20160) * 60, 'unixepoch'), strftime('%Y-%m-%dT%H:%M:%fZ', ${base} + 30 * 86400, 'unixepoch'), ${quote(at)}, ${quote(at)}
FROM n;
`;
}

function seed(server, sql) {
  const dir = mkdtempSync(path.join(tmpdir(), "safest-console-seed-"));
  const file = path.join(dir, "seed.sql");
  writeFileSync(file, sql);
  const wrangler = path.join(path.dirname(require.resolve("wrangler/package.json")), "bin", "wrangler.js");
  const result = spawnSync(process.execPath, [wrangler, "d1", "execute", "DB", "--local", "--persist-to", server.stateDir, "--file", file, "--yes"], {
    cwd: templateDir,
    encoding: "utf8",
    env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
  });
  rmSync(dir, { recursive: true, force: true });
  if (result.status !== 0) throw new Error(`seeding failed (${result.status}):\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}`);
}

/** Marks the moment the page first shows [data-ready] (set by each page once its data is on screen). */
const READY_PROBE = `
  (() => {
    const mark = () => {
      if (window.__readyAt === undefined && document.querySelector('[data-ready]')) window.__readyAt = performance.now();
    };
    new MutationObserver(mark).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-ready'] });
  })();
`;

async function main() {
  log("building the console");
  buildConsole();
  log("starting npm start (wrangler dev)");
  const server = await startServer({ label: "console-bench" });
  const browser = await launchBrowser();
  try {
    const api = apiClient(server.baseUrl, server.apiKey);
    const queue = await api("/queues", { body: { name: QUEUE, slaSeconds: 3600, priority: 10 } });
    assert.equal(queue.status, 201, JSON.stringify(queue.body));
    const workflow = await api("/workflows", { body: { name: "bench-console-review" } });
    const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });
    const version = await api(`/workflows/${workflow.body.id}/versions`, {
      body: {
        graph: {
          schemaVersion: 1,
          nodes: [
            { id: "start", kind: "start" },
            {
              id: "human_task",
              kind: "human_task",
              config: { queue_id: QUEUE, timeout_seconds: 86_400, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["remove", "keep"] }, note: { type: "string" } } } },
              inputMapping: { category: "report.category" },
            },
            { id: "end", kind: "end" },
          ],
          edges: [edge("start", "success", "human_task"), edge("human_task", "completed", "end"), edge("human_task", "timeout", "end")],
        },
      },
    });
    assert.equal(version.status, 201, JSON.stringify(version.body));
    const trigger = await api("/triggers", { body: { event: "report.created", workflowVersionId: version.body.id, authorityMode: "autonomous" } });
    assert.equal(trigger.status, 201, JSON.stringify(trigger.body));
    const intake = await api("/api-keys", { body: { name: "bench intake", scopes: ["reports:write"] } });
    const report = await api("/reports", {
      as: intake.body.apiKey,
      body: { subject: { kind: "content", id: "post-bench-0", snapshot: { text: "Reported text", media: [{ type: "image", url: pngDataUrl() }] } }, category: "scams_and_fraud", description: "scam", reporter: { id: "u1" } },
    });
    assert.equal(report.status, 201, JSON.stringify(report.body));
    const runId = report.body.runs[0].runId;
    const realTask = await until(async () => {
      const list = await api(`/queues/${queue.body.id}/tasks?limit=5`);
      return { value: list.body.items?.find((t) => t.runId === runId), seen: list.body };
    }, "the first task");

    log(`seeding ${OPEN_TASKS - 1} more open tasks into the local D1`);
    const seedStarted = performance.now();
    seed(server, seedSql({ installationId: server.installationId, queueId: queue.body.id, versionId: version.body.id, reportId: report.body.id, count: OPEN_TASKS - 1 }));
    const seedMs = performance.now() - seedStarted;
    const stats = await api(`/queues/${queue.body.id}/stats`);
    assert.equal(stats.body.open, OPEN_TASKS, JSON.stringify(stats.body));

    // A reviewer (moderator) signed in through a one-time link spent here, so that the browser's
    // first request is the page itself: a fresh context per sample, a cold cache.
    const reviewerContext = async () => {
      const link = await signinLink(server, { email: "bench-reviewer@example.org", name: "Bench reviewer", role: "moderator" });
      const response = await fetch(link, { redirect: "manual" });
      const cookie = /^([^=;]+)=([^;]*)/u.exec(response.headers.get("set-cookie") ?? "");
      assert.ok(response.status === 302 && cookie, `the sign-in link sets a session cookie (${response.status})`);
      const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
      await context.addCookies([{ name: cookie[1], value: cookie[2], url: server.baseUrl, httpOnly: true, sameSite: "Lax" }]);
      return context;
    };

    // (1) JavaScript of the review page: a cold load of a task, every script response, gzipped.
    const scripts = new Map();
    {
      const context = await reviewerContext();
      const page = await context.newPage();
      page.on("response", async (response) => {
        if (response.request().resourceType() !== "script") return;
        const body = await response.body().catch(() => null);
        if (body) scripts.set(new URL(response.url()).pathname, { raw: body.length, gzip: gzipSync(body, { level: 9 }).length });
      });
      await page.goto(`${server.baseUrl}/tasks/${encodeURIComponent(realTask.id)}`);
      await page.waitForSelector("section.task-page[data-ready]");
      await page.waitForLoadState("networkidle");
      await context.close();
    }
    const jsGzip = [...scripts.values()].reduce((sum, s) => sum + s.gzip, 0);
    const jsRaw = [...scripts.values()].reduce((sum, s) => sum + s.raw, 0);
    const editorLoaded = [...scripts.keys()].some((name) => /editor|view-/u.test(name));

    // (2) Interactive with 10,000 open tasks: a cold load of the review home, then the queue page,
    // then "Next task" (claims the top of the queue, opens it, answer form ready).
    const timings = { overview: [], queue: [], nextTask: [] };
    for (let i = 0; i < SAMPLES; i++) {
      const context = await reviewerContext();
      await context.addInitScript(READY_PROBE);
      const page = await context.newPage();
      await page.goto(`${server.baseUrl}/`);
      await page.waitForFunction(() => window.__readyAt !== undefined);
      timings.overview.push(await page.evaluate(() => window.__readyAt));
      await page.goto(`${server.baseUrl}/queues/${encodeURIComponent(queue.body.id)}`);
      await page.waitForFunction(() => window.__readyAt !== undefined);
      timings.queue.push(await page.evaluate(() => window.__readyAt));
      const clicked = await page.evaluate(() => performance.now());
      await page.getByTestId("next-task").click();
      await page.waitForSelector('section.task-page[data-ready] [data-testid="submit-answer"]:not([disabled])');
      timings.nextTask.push((await page.evaluate(() => performance.now())) - clicked);
      await context.close();
    }
    const after = await api(`/queues/${queue.body.id}/stats`);

    const result = {
      bench: "console",
      reviewPageJsGzipBytes: jsGzip,
      reviewPageJsRawBytes: jsRaw,
      reviewPageJsBudgetBytes: BUDGET_BYTES,
      reviewPageJsWithinBudget: jsGzip <= BUDGET_BYTES,
      reviewPageScripts: [...scripts.keys()].map((name) => name.replace(/^\/assets\//u, "")),
      reviewPageLoadsEditor: editorLoaded,
      openTasks: OPEN_TASKS,
      samples: SAMPLES,
      reviewHomeInteractiveMs: round(median(timings.overview)),
      queuePageInteractiveMs: round(median(timings.queue)),
      nextTaskInteractiveMs: round(median(timings.nextTask)),
      openTasksAfter: after.body.open,
      seedMs: Math.round(seedMs),
    };
    const kb = (bytes) => `${(bytes / 1000).toFixed(1)} kB`;
    console.log("Console bench (npm start, Debian Chromium, a fresh browser context per sample)");
    console.log(`  review page JavaScript: ${kb(jsGzip)} gzipped (${kb(jsRaw)} raw) in ${scripts.size} files; budget ${kb(BUDGET_BYTES)} → ${result.reviewPageJsWithinBudget ? "within budget" : "OVER BUDGET"}`);
    console.log(`    ${result.reviewPageScripts.join(", ")}${editorLoaded ? "  (the editor chunk was loaded!)" : "  (no editor or React Flow chunk)"}`);
    console.log(`  with ${OPEN_TASKS.toLocaleString("en")} open tasks in the queue (median of ${SAMPLES}):`);
    console.log(`    review home interactive:  ${result.reviewHomeInteractiveMs} ms after navigation start (cold cache)`);
    console.log(`    queue page interactive:   ${result.queuePageInteractiveMs} ms after navigation start (cached scripts)`);
    console.log(`    Next task → answer form:  ${result.nextTaskInteractiveMs} ms after the click`);
    console.log(JSON.stringify(result));
  } finally {
    await browser.close().catch(() => undefined);
    await server.stop();
  }
}

await main();
