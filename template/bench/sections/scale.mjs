// Section "scale": do the hot paths stay as fast when the D1 database is large? The same
// measurements twice in one run, on one installation ("bench-scale"): first on the small database
// the bench starts with, then once the local D1 file holds about 2 GB (BENCH_SCALE_BYTES) of
// another installation's history. Measured, each as p50/p95 of sequential requests over loopback
// (client round trip, and the Worker's own `Server-Timing: app;dur`):
//
// - intake: POST /api/v1/reports, whose trigger starts a run that puts a review task in a queue;
// - claim: POST /api/v1/queues/:id/next (the exclusive lease on the first open task);
// - lists: GET /api/v1/reports?limit=50, GET /api/v1/runs, GET /api/v1/queues/:id/tasks?limit=50.
//
// The large database: the other installation ("bench-scale-history") first lives through a few
// dozen real lifecycles over the API (report → run → review task answered → remove action →
// signed webhook delivered; audit trail sealed). Then the dev server is stopped and, with
// `node:sqlite` on wrangler's D1 file, those rows — cases, reports, runs, steps, step outputs,
// waits, events, tasks, proposals, decisions, deliveries and their attempts, audit events — are
// copied over and over in big transactions until the file reaches the target size: each copy
// with fresh ids (a column whose value is the id of a template row gets the copy's suffix; ids
// inside JSON stay as they are; other unique values are suffixed too, and the audit trail's seq
// moved on), the same installation, queue and workflow version, the same (sealed) content. The
// server then starts again on that state and the measurements are repeated. The small database is
// measured on a freshly started server too (restarted once the history has settled), so both
// measurements begin alike: a fresh Worker on a database with nothing in flight. The history's copied audit events do
// not form a valid chain (their links are the template's): the schedule's verification reports
// that installation as broken, which is bounded work per run, as for any installation.
import { existsSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import { startReceiver } from "./capacity.mjs";
import { client, edge, log, percentile, poll, pool, publish, results, reviewThenActGraph, round, server, sleep, timedClient } from "./lib.mjs";

const TARGET_BYTES = Number(process.env.BENCH_SCALE_BYTES ?? 2e9);
const TEMPLATE_LIFECYCLES = 40;
const INTAKE_SAMPLES = 60;
const CLAIM_SAMPLES = 50;
const LIST_SAMPLES = 40;
const COPIES_PER_TRANSACTION = 200;
const TARGET_RATIO = 1.5;

/** The history's tables, parents before children; rows found by installation_id or by a foreign key to a table before them. */
const HISTORY_TABLES = [
  "cases",
  "reports",
  "workflow_runs",
  "workflow_step_runs",
  "workflow_step_outputs",
  "workflow_waits",
  "workflow_events",
  "human_tasks",
  "review_exposure",
  "action_proposals",
  "decisions",
  "messages",
  "webhook_deliveries",
  "webhook_attempts",
  "audit_events",
];

const reportBody = (tag, index) => ({
  subject: { kind: "content", id: `${tag}-post-${index}`, url: `https://social.example/p/${tag}-${index}`, snapshot: { text: `Cheap watches, DM me for the link (${index})` } },
  category: "scams_and_fraud",
  reporter: { id: `user-${index % 300}`, contact: `reporter.${index % 300}@example.org` },
  description: `Spam again, report ${index}.`,
  evidence: [{ kind: "text", text: `Same message sent to 40 people (${index})` }],
});

const reviewOnlyGraph = (queueId) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queueId, response_schema: { type: "object" }, timeout_seconds: 86_400 } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
});

// ---------------------------------------------------------------------------------------------
// The D1 file, filled

function d1File(persistDir) {
  const dir = join(persistDir, "v3", "d1", "miniflare-D1DatabaseObject");
  const files = readdirSync(dir)
    .filter((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite")
    .map((name) => join(dir, name));
  if (files.length === 0) throw new Error(`scale: no D1 SQLite file in ${dir}`);
  return files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
}

const quote = (name) => `"${name.replaceAll('"', '""')}"`;

/**
 * How each table's rows are copied: the template rows (the installation's, or children of template
 * rows by foreign key), its columns, and per column what a copy does to it. Ids are the text
 * primary keys of every template row: wherever such a value appears in a text column, a copy
 * gives it the copy's suffix. A unique index that holds none of those id columns (a key per
 * installation, an idempotency key) gets its text columns suffixed too, and its integer ones
 * (the audit trail's seq) moved past the template's largest value.
 */
function templatePlan(db, installationId) {
  const exists = new Set(
    db
      .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
      .all()
      .map((row) => row.name),
  );
  const tables = HISTORY_TABLES.filter((name) => exists.has(name));
  const ids = new Set();
  const plans = [];
  const keysOf = new Map(); // table → its text primary key column
  for (const table of tables) {
    const columns = db.prepare(`PRAGMA table_info(${quote(table)})`).all();
    const names = columns.map((c) => c.name);
    const pk = columns.filter((c) => c.pk > 0);
    let where;
    let binds = [];
    if (names.includes("installation_id")) {
      where = "installation_id = ?";
      binds = [installationId];
    } else {
      const parent = db
        .prepare(`PRAGMA foreign_key_list(${quote(table)})`)
        .all()
        .find((fk) => keysOf.has(fk.table) && plans.some((p) => p.table === fk.table));
      if (!parent) {
        log(`scale: ${table} has neither installation_id nor a key to a copied table; not copied`);
        continue;
      }
      const parentPlan = plans.find((p) => p.table === parent.table);
      where = `${quote(parent.from)} IN (SELECT ${quote(parent.to ?? keysOf.get(parent.table))} FROM ${quote(parent.table)} WHERE ${parentPlan.where})`;
      binds = parentPlan.binds;
    }
    const rows = db.prepare(`SELECT * FROM ${quote(table)} WHERE ${where}`).all(...binds);
    const integerKey = pk.length === 1 && /^INTEGER$/iu.test(pk[0].type) ? pk[0].name : null;
    if (pk.length === 1 && !integerKey) {
      keysOf.set(table, pk[0].name);
      for (const row of rows) if (typeof row[pk[0].name] === "string") ids.add(row[pk[0].name]);
    }
    plans.push({ table, columns: names, where, binds, rows, integerKey, uniques: [] });
  }
  // Unique indexes (primary keys included) that no id column makes unique per copy.
  for (const plan of plans) {
    const indexes = db
      .prepare(`PRAGMA index_list(${quote(plan.table)})`)
      .all()
      .filter((index) => index.unique);
    for (const index of indexes) {
      const cols = db
        .prepare(`PRAGMA index_info(${quote(index.name)})`)
        .all()
        .map((c) => c.name)
        .filter((name) => name !== null);
      const holdsId = cols.some((name) => plan.rows.some((row) => typeof row[name] === "string" && ids.has(row[name])));
      if (!holdsId) for (const name of cols) if (name !== "installation_id" && name !== plan.integerKey && !plan.uniques.includes(name)) plan.uniques.push(name);
    }
    plan.span = Object.fromEntries(plan.uniques.map((name) => [name, Math.max(0, ...plan.rows.map((row) => (typeof row[name] === "number" ? row[name] : 0))) + 1]));
  }
  return { plans, ids };
}

/** The processes on this machine that have `file` (or its -wal, -shm or -journal) open (Linux /proc). */
function holders(file) {
  if (process.platform !== "linux") return [];
  const found = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/u.test(name))) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith(file)) found.push(Number(pid));
    } catch {
      // Gone, or not ours to read.
    }
  }
  return [...new Set(found)];
}

/** Resolves once no process holds `file`, or after 30 s. */
async function waitForRelease(file) {
  const until = Date.now() + 30_000;
  for (;;) {
    const pids = holders(file);
    if (pids.length === 0) return;
    if (Date.now() > until) {
      log(`scale: processes ${pids.join(", ")} still hold the D1 file; going on (sqlite waits for its lock)`);
      return;
    }
    await sleep(250);
  }
}

/**
 * The D1 file opened for the fill, its journal switched from WAL to a rollback journal (one write
 * of each page, not two). Switching needs the only connection: while the stopped server's workerd
 * still holds the file, SQLite answers "database is locked" at once, so this tries again.
 */
async function openForFill(node_sqlite, file) {
  const until = Date.now() + 60_000;
  for (;;) {
    const db = new node_sqlite.DatabaseSync(file, { timeout: 10_000 });
    try {
      const journal = db.prepare("PRAGMA journal_mode").all()[0].journal_mode;
      db.exec("PRAGMA foreign_keys = OFF; PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF; PRAGMA cache_size = -1000000; PRAGMA temp_store = MEMORY;");
      return { db, journal };
    } catch (error) {
      db.close();
      if (!/locked|busy/iu.test(error.message) || Date.now() > until) throw error;
      log(`scale: the D1 file is still locked (${error.message}; holders: ${holders(file).join(", ") || "none seen"}); again`);
      await sleep(1_000);
    }
  }
}

/** Copies the template rows until the file holds `targetBytes`; answers copies, rows and bytes. */
function fill({ db, journal }, installationId, targetBytes) {
  try {
    const { plans, ids } = templatePlan(db, installationId);
    const inserts = plans.map((plan) => {
      const columns = plan.columns.filter((name) => name !== plan.integerKey);
      const statement = db.prepare(`INSERT OR IGNORE INTO ${quote(plan.table)} (${columns.map(quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`);
      // Per template row, per column: keep, add the copy's suffix, or move an integer on.
      const rows = plan.rows.map((row) =>
        columns.map((name) => {
          const value = row[name];
          if (typeof value === "string" && ids.has(value)) return { value, op: "suffix" };
          if (plan.uniques.includes(name) && typeof value === "string") return { value, op: "suffix" };
          if (plan.uniques.includes(name) && typeof value === "number") return { value, op: "offset", span: plan.span[name] };
          return { value, op: "keep" };
        }),
      );
      return { table: plan.table, statement, rows };
    });
    const templateRows = inserts.reduce((sum, insert) => sum + insert.rows.length, 0);
    const pageSize = db.prepare("PRAGMA page_size").get().page_size;
    const size = () => db.prepare("PRAGMA page_count").get().page_count * pageSize;
    const startBytes = size();
    let copies = 0;
    let inserted = 0;
    const began = performance.now();
    while (size() < targetBytes) {
      db.exec("BEGIN");
      for (let n = 0; n < COPIES_PER_TRANSACTION; n++) {
        copies += 1;
        const suffix = `~h${copies}`;
        for (const insert of inserts) {
          for (const cells of insert.rows) {
            const values = cells.map((cell) => (cell.op === "keep" ? cell.value : cell.op === "suffix" ? `${cell.value}${suffix}` : cell.value + copies * cell.span));
            inserted += Number(insert.statement.run(...values).changes);
          }
        }
      }
      db.exec("COMMIT");
      if (copies % (COPIES_PER_TRANSACTION * 20) === 0) log(`scale: ${copies} copies, ${(size() / 1e9).toFixed(2)} GB`);
    }
    db.exec(`PRAGMA journal_mode = ${journal}`);
    return { copies, templateRows, inserted, startBytes, bytes: size(), fillS: (performance.now() - began) / 1000, tables: inserts.map((insert) => `${insert.table} ${insert.rows.length}`) };
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The measurements

const figures = (samples) => ({
  p50: round(
    percentile(
      samples.map((s) => s.clientMs),
      0.5,
    ),
    1,
  ),
  p95: round(
    percentile(
      samples.map((s) => s.clientMs),
      0.95,
    ),
    1,
  ),
  serverP50: round(
    percentile(
      samples.map((s) => s.serverMs),
      0.5,
    ),
    1,
  ),
  serverP95: round(
    percentile(
      samples.map((s) => s.serverMs),
      0.95,
    ),
    1,
  ),
});

/** Intake, claim and the lists, on the measured installation; `phase` names the reports. */
async function measure(base, adminToken, setup, phase) {
  const timed = timedClient(base);
  const api = client(base);
  const tag = `${setup.tag}-${phase}`;
  const intake = [];
  for (let index = 0; index < INTAKE_SAMPLES; index++) intake.push(await timed("/api/v1/reports", { body: reportBody(tag, index), key: setup.intakeKey }));
  if (intake.some((sample) => sample.body?.runs?.length !== 1)) throw new Error(`scale ${phase}: a report started no run`);
  // Every run has put its task in the queue.
  await poll(
    `scale ${phase}: review tasks in the queue`,
    async () => {
      const states = await api("/bench/lifecycle-states", { body: { installationId: setup.installationId }, key: adminToken });
      return (states.tasks.open ?? 0) >= CLAIM_SAMPLES + setup.openBefore ? states : undefined;
    },
    { intervalMs: 500, timeoutMs: 180_000 },
  );
  const claims = [];
  for (let index = 0; index < CLAIM_SAMPLES; index++) claims.push(await timed(`/api/v1/queues/${setup.queueId}/next`, { body: { reviewer: `scale-mod-${index % 5}` }, key: setup.reviewKey }));
  setup.openBefore += INTAKE_SAMPLES - CLAIM_SAMPLES;
  const lists = { reports: [], runs: [], tasks: [] };
  for (let index = 0; index < LIST_SAMPLES; index++) {
    lists.reports.push(await timed("/api/v1/reports?limit=50", { key: setup.key }));
    lists.runs.push(await timed("/api/v1/runs", { key: setup.key }));
    lists.tasks.push(await timed(`/api/v1/queues/${setup.queueId}/tasks?limit=50`, { key: setup.key }));
  }
  return { intake: figures(intake), claim: figures(claims), listReports: figures(lists.reports), listRuns: figures(lists.runs), listTasks: figures(lists.tasks) };
}

/** The large installation's own lists (its history is what fills the database). */
async function measureHistoryLists(base, history) {
  const timed = timedClient(base);
  const samples = { reports: [], runs: [], tasks: [] };
  for (let index = 0; index < LIST_SAMPLES / 2; index++) {
    samples.reports.push(await timed("/api/v1/reports?limit=50", { key: history.key }));
    samples.runs.push(await timed("/api/v1/runs", { key: history.key }));
    samples.tasks.push(await timed(`/api/v1/queues/${history.queueId}/tasks?limit=50&state=completed`, { key: history.key }));
  }
  return { listReports: figures(samples.reports), listRuns: figures(samples.runs), listCompletedTasks: figures(samples.tasks) };
}

/** The other installation's real lifecycles, the template the fill copies. */
async function historyTemplate(api, base, adminToken) {
  const receiver = await startReceiver();
  try {
    const installation = await api("/api/v1/installations", { body: { name: "bench-scale-history" }, key: adminToken });
    const key = installation.apiKey;
    const queue = await api("/api/v1/queues", { body: { name: "history-review", slaSeconds: 3_600 }, key });
    const hook = await api("/api/v1/webhook-endpoints", { body: { url: `http://127.0.0.1:${receiver.port}/history`, retryBaseSeconds: 1, maxAttempts: 5 }, key });
    await api("/api/v1/action-types", { body: { key: "history_remove", name: "History: remove post", endpointId: hook.id, reversible: true, requiresApproval: false }, key });
    const version = await publish(api, key, reviewThenActGraph(queue.id, "history_remove"), "bench-scale-history");
    await api("/api/v1/triggers", { body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" }, key });
    const tag = Math.random().toString(16).slice(2, 10);
    await pool(TEMPLATE_LIFECYCLES, 4, async (index) => {
      await api("/api/v1/reports", { body: reportBody(`history-${tag}`, index), key });
    });
    let answered = 0;
    const until = Date.now() + 120_000;
    while (answered < TEMPLATE_LIFECYCLES) {
      const claim = await fetch(`${base}/api/v1/queues/${queue.id}/next`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${key}` }, body: JSON.stringify({ reviewer: "history-mod" }) });
      const task = await claim.json();
      if (claim.status === 404) {
        if (Date.now() > until) throw new Error(`scale: ${TEMPLATE_LIFECYCLES - answered} history tasks never reached the queue`);
        await sleep(100);
        continue;
      }
      if (!claim.ok) throw new Error(`scale: history claim ${claim.status} ${JSON.stringify(task).slice(0, 300)}`);
      await api(`/api/v1/tasks/${task.id}/complete`, { body: { reviewer: "history-mod", response: { verdict: "remove" } }, key });
      answered++;
    }
    await poll(
      "scale: history lifecycles settling",
      async () => {
        const now = await api("/bench/lifecycle-states", { body: { installationId: installation.id }, key: adminToken });
        return (now.runs.succeeded ?? 0) === TEMPLATE_LIFECYCLES && (now.deliveries.delivered ?? 0) === TEMPLATE_LIFECYCLES && now.unsealedAuditEvents === 0 ? now : undefined;
      },
      { intervalMs: 500, timeoutMs: 180_000 },
    );
    await api("/api/v1/audit-events?limit=1", { key });
    return { installationId: installation.id, key, queueId: queue.id };
  } finally {
    await receiver.close();
  }
}

// ---------------------------------------------------------------------------------------------

export async function sectionScale(api, base, adminToken, restart) {
  const node_sqlite = await import("node:sqlite").catch(() => null);
  if (!node_sqlite) {
    results.scaleSkipped = `needs node:sqlite (Node ≥ 22.5); this is Node ${process.version}`;
    log(`scale: skipped, ${results.scaleSkipped}`);
    return;
  }
  const installation = await api("/api/v1/installations", { body: { name: "bench-scale" }, key: adminToken });
  const key = installation.apiKey;
  const queue = await api("/api/v1/queues", { body: { name: "scale-review", slaSeconds: 3_600 }, key });
  const version = await publish(api, key, reviewOnlyGraph(queue.id), "bench-scale");
  await api("/api/v1/triggers", { body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" }, key });
  const { apiKey: intakeKey } = await api("/api/v1/api-keys", { body: { name: "scale-intake", scopes: ["reports:write"] }, key });
  const { apiKey: reviewKey } = await api("/api/v1/api-keys", { body: { name: "scale-review", scopes: ["review"] }, key });
  const setup = { installationId: installation.id, key, intakeKey, reviewKey, queueId: queue.id, tag: Math.random().toString(16).slice(2, 10), openBefore: 0 };

  log(`scale: the history's template, ${TEMPLATE_LIFECYCLES} lifecycles of another installation through the API`);
  const history = await historyTemplate(api, base, adminToken);
  // Both measurements start from a fresh dev server on the state as it is (the history's runs and
  // deliveries settled): the large one must not be compared with a server still busy or warmer.
  const fresh = await restart(async () => {});
  log("scale: intake, claim and lists on the small database");
  await client(fresh)("/api/v1/reports?limit=1", { key });
  const small = await measure(fresh, adminToken, setup, "small");
  const smallBytes = statSync(d1File(server.persistDir)).size;

  let filled;
  log(`scale: the dev server stopped; the D1 file filled to ${(TARGET_BYTES / 1e9).toFixed(1)} GB with copies of the history (node:sqlite)`);
  const large = await restart(async (persistDir) => {
    const file = d1File(persistDir);
    // The stopped server's processes are gone before the file is opened (a workerd that outlived its parent still holds it).
    await waitForRelease(file);
    for (const suffix of ["-wal", "-shm"]) if (existsSync(file + suffix)) log(`scale: ${file}${suffix} is there (${statSync(file + suffix).size} B); sqlite replays it on open`);
    filled = fill(await openForFill(node_sqlite, file), history.installationId, TARGET_BYTES);
    log(`scale: ${filled.copies} copies (${filled.inserted} rows) in ${round(filled.fillS, 1)} s; the D1 file ${(filled.bytes / 1e9).toFixed(2)} GB`);
  });
  log("scale: intake, claim and lists on the large database");
  // The first requests after a start load the Worker and open the database: one of each, not counted.
  await client(large)("/api/v1/reports?limit=1", { key });
  const big = await measure(large, adminToken, setup, "large");
  const historyLists = await measureHistoryLists(large, history);

  const ratio = (name, which) => round(big[name][which] / small[name][which], 2);
  const ratios = Object.fromEntries(Object.keys(small).map((name) => [name, { p50: ratio(name, "p50"), p95: ratio(name, "p95"), serverP50: ratio(name, "serverP50"), serverP95: ratio(name, "serverP95") }]));
  Object.assign(results, {
    scaleTargetBytes: TARGET_BYTES,
    scaleSmallD1Bytes: smallBytes,
    scaleLargeD1Bytes: filled.bytes,
    scaleFill: { copies: filled.copies, templateLifecycles: TEMPLATE_LIFECYCLES, templateRows: filled.templateRows, rowsInserted: filled.inserted, seconds: round(filled.fillS, 1), tables: filled.tables },
    scaleSmall: small,
    scaleLarge: big,
    scaleRatios: ratios,
    // The round trip's ratios are the figures judged; the Worker's own time (Server-Timing) is printed beside them.
    scaleWorstRatio: Math.max(...Object.values(ratios).flatMap((r) => [r.p50, r.p95])),
    scaleHistoryLists: historyLists,
  });
}

export function scaleLines() {
  if (results.scaleSkipped) return [`scale:            skipped: ${results.scaleSkipped}`];
  if (results.scaleRatios === undefined) return [];
  const row = (name, label) => {
    const s = results.scaleSmall[name];
    const l = results.scaleLarge[name];
    const r = results.scaleRatios[name];
    const mark = (value) => (value === null ? "n/a" : value <= TARGET_RATIO ? "OK" : "MISS");
    return `                    ${label.padEnd(34)} p50 ${String(s.p50).padStart(6)} → ${String(l.p50).padStart(6)} ms (${r.p50}× ${mark(r.p50)})   p95 ${String(s.p95).padStart(6)} → ${String(l.p95).padStart(6)} ms (${r.p95}× ${mark(r.p95)})   [in the Worker: p50 ${s.serverP50} → ${l.serverP50} ms (${r.serverP50}×), p95 ${s.serverP95} → ${l.serverP95} ms (${r.serverP95}×)]`;
  };
  const h = results.scaleHistoryLists;
  return [
    `scale:            (round trips over loopback, sequential; the machine's noise is in them, the Worker's own time beside)`,
    `                  the D1 file ${(results.scaleSmallD1Bytes / 1e6).toFixed(0)} MB → ${(results.scaleLargeD1Bytes / 1e9).toFixed(2)} GB (another installation's history: ${results.scaleFill.copies} copies of ${results.scaleFill.templateRows} template rows, ${results.scaleFill.rowsInserted} rows written with node:sqlite in ${results.scaleFill.seconds} s); same installation, same requests, small → large (target ≤ ${TARGET_RATIO}×):`,
    row("intake", "POST /reports (trigger → run → task)"),
    row("claim", "POST /queues/:id/next"),
    row("listReports", "GET /reports?limit=50"),
    row("listRuns", "GET /runs"),
    row("listTasks", "GET /queues/:id/tasks?limit=50"),
    `                    the large installation's own lists (${results.scaleFill.copies * results.scaleFill.templateLifecycles} lifecycles): GET /reports?limit=50 p50 ${h.listReports.p50} / p95 ${h.listReports.p95} ms (in the Worker ${h.listReports.serverP50} / ${h.listReports.serverP95}), GET /runs p50 ${h.listRuns.p50} / p95 ${h.listRuns.p95} ms (${h.listRuns.serverP50} / ${h.listRuns.serverP95}), completed tasks p50 ${h.listCompletedTasks.p50} / p95 ${h.listCompletedTasks.p95} ms (${h.listCompletedTasks.serverP50} / ${h.listCompletedTasks.serverP95})`,
  ];
}
