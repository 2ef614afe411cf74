// Section "queue listing": 100,000 open tasks in one review queue, the listing query's plan (which
// must seek the queue's index in order), and the latency of first pages, a cursor walk and pages
// after cursors deep in the queue.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cpuPerUnit, cpuSnapshot, latency, log, results, round, server as devServer, TARGETS, verdict } from "./lib.mjs";

const QUEUE_TASKS = 100_000;
const QUEUE_SEED_CHUNK = 25_000;
const LIST_LIMIT = 50;
const LIST_FIRST_PAGE_SAMPLES = 50;
const LIST_WALK_PAGES = 200;
const LIST_DEEP_OFFSETS = [10_000, 25_000, 50_000, 75_000, 90_000, 99_000, 99_900];
const LIST_DEEP_SAMPLES = 10;
const LISTING_INDEX = "human_tasks_queue_listing";

const normalizeSql = (text) => text.replace(/\s+/gu, " ").trim();

/** The cursor listQueueTasks hands out (encodeCursor in src/cases/queues/tasks.ts). */
const encodeCursor = ({ dueAt, priority, id }) => Buffer.from(JSON.stringify([dueAt, priority, id])).toString("base64url");

const planText = (plan) => plan.map((row) => `${row.parent === 0 ? "" : "  "}${row.detail}`).join("\n");

/** The listing must seek the queue's index and read it in order: no sort, no other index, no scan. */
function planProblems(plan) {
  const text = plan.map((row) => row.detail).join("\n");
  const problems = [];
  if (!text.includes(LISTING_INDEX)) problems.push(`does not use ${LISTING_INDEX}`);
  if (/USE TEMP B-TREE/u.test(text)) problems.push("sorts in a temp b-tree");
  if (/\bSCAN human_tasks\b(?! USING)/u.test(text)) problems.push("scans human_tasks");
  return problems;
}

export async function sectionQueueListing(api, timed, adminToken, key, installationId, versionId) {
  const queue = await api("/api/v1/queues", { body: { name: "bench-listing", slaSeconds: 86_400, priority: 10 }, key });
  log(`queue: seeding ${QUEUE_TASKS} open tasks (${QUEUE_SEED_CHUNK} a batch)`);
  const seedStarted = performance.now();
  let foreignKeysEnforced = null;
  for (let from = 0; from < QUEUE_TASKS; from += QUEUE_SEED_CHUNK) {
    const count = Math.min(QUEUE_SEED_CHUNK, QUEUE_TASKS - from);
    const seeded = await api("/bench/queue-seed", { body: { installationId, queueId: queue.id, workflowVersionId: versionId, from, count }, key: adminToken });
    if (seeded.tasks !== count || seeded.steps !== count) throw new Error(`seed ${from}: inserted ${seeded.tasks} tasks and ${seeded.steps} steps, expected ${count}`);
    if (from === 0) foreignKeysEnforced = seeded.foreignKeysEnforced;
  }
  const seedS = (performance.now() - seedStarted) / 1000;
  const stats = await api(`/api/v1/queues/${queue.id}/stats`, { key });
  if (stats.open !== QUEUE_TASKS) throw new Error(`queue stats: ${stats.open} open tasks, expected ${QUEUE_TASKS}`);
  log(`queue: seeded in ${seedS.toFixed(1)} s (foreign keys enforced: ${foreignKeysEnforced}); ${stats.breachedSla} past their SLA`);

  // The plan of the very query listQueueTasks runs: the bench Worker's copy must still be in tasks.ts.
  const deepKeys = (await api("/bench/queue-keys", { body: { installationId, queueId: queue.id, offsets: LIST_DEEP_OFFSETS }, key: adminToken })).keys;
  const firstPlan = await api("/bench/queue-plan", { body: { installationId, queueId: queue.id, cursor: null, limit: LIST_LIMIT }, key: adminToken });
  const cursorPlan = await api("/bench/queue-plan", { body: { installationId, queueId: queue.id, cursor: deepKeys[2], limit: LIST_LIMIT }, key: adminToken });
  const tasksSource = normalizeSql(readFileSync(join(devServer.appDir, "src", "cases", "queues", "tasks.ts"), "utf8")); // the sources running
  const drift = [];
  if (!tasksSource.includes(normalizeSql(firstPlan.template))) drift.push("the listing statement");
  if (!tasksSource.includes(normalizeSql(firstPlan.columns))) drift.push("COLUMNS");
  Object.assign(results, {
    queueListTasks: QUEUE_TASKS,
    queueSeedS: round(seedS, 1),
    queueForeignKeysEnforced: foreignKeysEnforced,
    queueListPlan: planText(firstPlan.plan),
    queueListPlanWithCursor: planText(cursorPlan.plan),
  });
  const problems = [...planProblems(firstPlan.plan).map((p) => `first page: ${p}`), ...planProblems(cursorPlan.plan).map((p) => `with a cursor: ${p}`)];
  results.queueListUsesIndex = problems.length === 0;
  log(`queue: listing plan (first page):\n${results.queueListPlan}\n  with a cursor:\n${results.queueListPlanWithCursor}`);
  if (drift.length > 0) throw new Error(`bench/worker.ts's copy of the listing query differs from src/cases/queues/tasks.ts (${drift.join(", ")}): update LISTING_COLUMNS / LISTING_TEMPLATE`);
  if (problems.length > 0) throw new Error(`queue listing plan: ${problems.join("; ")}\n${results.queueListPlan}`);

  const path = (cursor) => `/api/v1/queues/${queue.id}/tasks?limit=${LIST_LIMIT}${cursor ? `&cursor=${cursor}` : ""}`;
  const page = async (cursor) => {
    const result = await timed(path(cursor), { key });
    if (result.body.items.length !== LIST_LIMIT) throw new Error(`listing: ${result.body.items.length} items on a page, expected ${LIST_LIMIT}`);
    return result;
  };
  log("queue: warm-up (not counted)");
  for (let index = 0; index < 10; index++) await page(null);
  const cpuBefore = cpuSnapshot(devServer.port);
  const first = [];
  for (let index = 0; index < LIST_FIRST_PAGE_SAMPLES; index++) first.push(await page(null));
  log(`queue: walking ${LIST_WALK_PAGES} pages by cursor`);
  const walk = [];
  const seen = new Set();
  let previous = null;
  let cursor = null;
  for (let index = 0; index < LIST_WALK_PAGES; index++) {
    const result = await page(cursor);
    for (const item of result.body.items) {
      const key_ = [item.dueAt, -item.priority, item.id];
      if (previous && !(key_[0] > previous[0] || (key_[0] === previous[0] && (key_[1] > previous[1] || (key_[1] === previous[1] && key_[2] > previous[2]))))) {
        throw new Error(`listing: task ${item.id} is out of SLA order after page ${index}`);
      }
      if (seen.has(item.id)) throw new Error(`listing: task ${item.id} listed twice`);
      seen.add(item.id);
      previous = key_;
    }
    walk.push(result);
    cursor = result.body.nextCursor;
    if (!cursor) throw new Error(`listing: no nextCursor after page ${index + 1}`);
  }
  const cpu = cpuPerUnit(cpuBefore, cpuSnapshot(devServer.port), first.length + walk.length);
  log(`queue: pages after cursors deep in the queue (${LIST_DEEP_OFFSETS.join(", ")} tasks in)`);
  const deep = [];
  const deepByOffset = {};
  for (const [position, offset] of LIST_DEEP_OFFSETS.entries()) {
    const samples = [];
    for (let index = 0; index < LIST_DEEP_SAMPLES; index++) samples.push(await page(encodeCursor(deepKeys[position])));
    if (samples[0].body.items[0].id === deepKeys[position].id) throw new Error(`listing: the page after offset ${offset} repeats its cursor's task`);
    deep.push(...samples);
    deepByOffset[offset] = latency(samples, "serverMs").p50;
  }
  const listed = [...first, ...walk];
  const server = latency(listed, "serverMs");
  const clientSide = latency(listed, "clientMs");
  const deepServer = latency(deep, "serverMs");
  Object.assign(results, {
    queueListLimit: LIST_LIMIT,
    queueListRequests: listed.length,
    queueListP50Ms: server.p50,
    queueListP95Ms: server.p95,
    queueListMaxMs: server.max,
    queueListFirstPageP50Ms: latency(first, "serverMs").p50,
    queueListFirstPageP95Ms: latency(first, "serverMs").p95,
    queueListWalkPages: LIST_WALK_PAGES,
    queueListWalkP50Ms: latency(walk, "serverMs").p50,
    queueListWalkP95Ms: latency(walk, "serverMs").p95,
    queueListOtherProcessesPercent: cpu.otherPercent,
    queueListClientP50Ms: clientSide.p50,
    queueListClientP95Ms: clientSide.p95,
    queueListDeepP50Ms: deepServer.p50,
    queueListDeepP95Ms: deepServer.p95,
    queueListDeepClientP95Ms: latency(deep, "clientMs").p95,
    queueListDeepServerP50ByOffsetMs: deepByOffset,
  });
}

export function queueLines() {
  const lines = [];
  if (results.queueListUsesIndex !== undefined)
    lines.push(
      `queue list plan:  ${results.queueListUsesIndex ? `uses ${LISTING_INDEX}, no temp b-tree` : "PROBLEM"}: ${results.queueListPlan.replace(/\n/gu, " | ")}${results.queueListPlanWithCursor !== results.queueListPlan ? ` (with a cursor: ${results.queueListPlanWithCursor.replace(/\n/gu, " | ")})` : ""}`,
    );
  if (results.queueListP95Ms !== undefined)
    lines.push(
      `queue listing:    server p95 ${results.queueListP95Ms} ms  (target ≤ ${TARGETS.queueListP95Ms}) ${verdict(results.queueListP95Ms, TARGETS.queueListP95Ms)}  (p50 ${results.queueListP50Ms} ms, max ${results.queueListMaxMs} ms; ${results.queueListRequests} requests of limit=${results.queueListLimit} on ${results.queueListTasks} open tasks: first page ×${LIST_FIRST_PAGE_SAMPLES} p50/p95 ${results.queueListFirstPageP50Ms}/${results.queueListFirstPageP95Ms} ms, ${results.queueListWalkPages}-page cursor walk p50/p95 ${results.queueListWalkP50Ms}/${results.queueListWalkP95Ms} ms; client round trip p50/p95 ${results.queueListClientP50Ms}/${results.queueListClientP95Ms} ms; other processes used ${results.queueListOtherProcessesPercent}% of the machine meanwhile)`,
      `deep cursors:     server p50 ${results.queueListDeepP50Ms} ms, p95 ${results.queueListDeepP95Ms} ms ${verdict(results.queueListDeepP95Ms, TARGETS.queueListP95Ms)}  (pages after task N; p50 by N: ${Object.entries(
        results.queueListDeepServerP50ByOffsetMs,
      )
        .map(([offset, ms]) => `${offset}: ${ms}`)
        .join(", ")}; seeded in ${results.queueSeedS} s, foreign keys enforced: ${results.queueForeignKeysEnforced})`,
    );
  return lines;
}
