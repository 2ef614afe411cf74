// Section "capacity": what one reviewed report lifecycle costs D1, measured from outside. In an
// installation of its own, N lifecycles go through the real HTTP API: a report comes in, its
// trigger starts a run, the run puts a review task in a queue, a reviewer claims and answers it
// ("remove"), the run takes an autonomous `remove` action whose signed webhook a receiver on
// 127.0.0.1 accepts (signatures checked), and the run ends. Once every run has ended, every
// delivery is delivered and the audit trail is sealed, the section measures:
//
// - hot bytes per lifecycle: what a lifecycle holds in D1 through the installation's 7-day window.
//   The local D1 database (wrangler's SQLite file under the bench's state folder) copied before
//   the lifecycles and once the schedule, run an hour on, has moved the ended runs' step histories
//   and the settled deliveries' payloads and attempts to R2 (they leave D1 an hour after a run ends
//   or a delivery settles; cases and audit events stay for the window), each
//   copy VACUUMed and measured with SQLite's `dbstat`: the bytes each table's and index's pages hold
//   (pgsize − unused; whole pages, which add up to page_count × page_size, are printed beside it:
//   in a small sample each b-tree's last, partly empty page weighs up to 4 KB / N per lifecycle), read with Node's built-in `node:sqlite` (Node ≥ 22.5; the project
//   asks for ≥ 22.12). The difference over N, by table, the schedule's own tables left out (and the
//   audit trail, which leaves D1 by the hour). What leaves D1 an hour after it is written (an ended
//   run's step history, a settled delivery's payload and attempts, the audit events) is in D1 for
//   that hour only: the copy at the runs' end holds it, and its bytes count for the share of the
//   window that hour is (TRANSIENT_MINUTES over the window's minutes). The figure at the runs' end
//   (every last hour's history still in D1) is printed beside it.
// - queries and rows written per lifecycle: every D1 statement the bench Worker sends in the
//   meantime, counted by the wrapper around its DB binding (bench/d1-count.ts) — HTTP handlers,
//   Workflows steps, the runtime capability, queue consumers and the schedule alike —, with
//   `meta.rows_written` as D1 reports it (index entries included), by entrypoint and by statement.
// - archived bytes per lifecycle: what D1 still holds of the N lifecycles once the archive tier
//   has taken what it takes. The installation's hot window is set to 0 days and the schedule fired
//   (the Worker's own scheduled handler) until `workflows.archive_runs` and `audit.segments` find
//   nothing left; then the same copy-VACUUM-dbstat measurement. The baseline it is compared with
//   was taken the same way: the warm-up's lifecycles were archived before the measured ones began
//   (and the window set back to the default 7 days, so nothing moves while they run). Tables the
//   schedule writes on every run whatever the lifecycles (sweep_runs) are left out and named.
// - the R2 bytes those lifecycles became: the run archive objects (GET /api/v1/storage
//   `archiveBytes`, the sum of each archived run's object size) and the audit segments (their
//   `audit_segments.bytes`), before and after, over N.
// - days until 10 GB at 100,000 lifecycles a day with the default 7-day window: D1 holds 7 days
//   of lifecycles hot and every older one archived, so 10 GB = hot × 7 × 100,000 + archived ×
//   100,000 × days, solved for days.
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { atLeast, log, poll, pool, results, reviewedDesk, round, server, sleep, TARGETS, verdict } from "./lib.mjs";

const LIFECYCLES = Number(process.env.BENCH_CAPACITY_LIFECYCLES ?? 200);
const WARMUP = 5; // lifecycles before the first measurement (caches, data keys), not counted
const INTAKE_CONCURRENCY = 4;
const REVIEWERS = 4;
const LIFECYCLES_PER_DAY = 100_000;
const TEN_GB = 10e9; // D1's limit per database, in decimal bytes
const TARGET_HOT_BYTES = 6_144;
const TARGET_QUERIES = 40;
const TARGET_DAYS = 1_095; // three years
const TARGET_ARCHIVED_BYTES = 50;
const DEFAULT_HOT_DAYS = 7; // the window an installation has unless it sets one (src/workflows/run-archive.ts)
/** Written by every scheduled run whatever the lifecycles: not a lifecycle's bytes (it is trimmed by age). */
const SCHEDULE_TABLES = new Set(["sweep_runs"]);
// How long what leaves D1 by the hour stays there: an ended run's step history and a settled
// delivery's payload an hour after (RUN_HISTORY_HOT_MINUTES, DELIVERY_PAYLOAD_HOT_MINUTES), the
// audit events in segments past the hour (AUDIT_HOT_MINUTES; the last few, past the newest
// checkpoint and the anchor, a minute later), all in src/lib/storage-tiers.ts. At a steady rate D1
// holds that long's lifecycles' share of them: TRANSIENT_MINUTES over the window's minutes.
const TRANSIENT_MINUTES = 61;
const ARCHIVE_TIMEOUT_MS = 240_000;
const ARCHIVE_AHEAD_MS = 2 * 86_400_000;
/** Past the hour an ended run's step history stays in D1 (src/lib/storage-tiers.ts, RUN_HISTORY_HOT_MINUTES). */
const RUN_HISTORY_AHEAD_MS = 61 * 60_000;
/** The moment of the last scheduled run the archive drove (each is later than the one before). */
let lastAt = 0;

/** Why a table still holds bytes of a lifecycle once its case, run and audit events are archived. */
const STAYS_BECAUSE = {
  archived_subjects: "one 16-byte key per archived case's subject: a new report about it brings the case back rather than opening a second one",
  case_archive_totals: "one row per installation (archived cases and their bytes, for GET /storage)",
  metric_rollup_hours: "hourly rollups (per hour, not per lifecycle)",
  metric_rollups: "hourly rollups (per hour and metric, not per lifecycle)",
  metric_rollups_daily: "daily rollups (per day and metric, not per lifecycle)",
  transparency_rollups: "the transparency report's daily rollups (per day and group, not per lifecycle)",
  transparency_rollup_days: "one row per rolled-up day",
  audit_events: "the trail's head after the newest checkpoint stays in D1 (with the R2 anchor)",
  audit_checkpoints: "the checkpoints that end segments, the chain's first, and those in the hot window (verification across tiers starts from them)",
  audit_segments: "one index row per archived segment (up to 10,000 events)",
  workflow_runs: "a run whose case is not archived (a shadow run, or one without a report)",
  workflow_step_runs: "steps of a run whose case is not archived",
  cases: "a case not archived yet (something of it live, or its day not rolled up)",
};

const reportBody = (tag, index) => ({
  subject: { kind: "content", id: `${tag}-post-${index}`, url: `https://social.example/p/${tag}-${index}`, snapshot: { text: `Double your crypto in 24h! Send 0.1 BTC to get 0.2 back. (${index})` } },
  category: "scams_and_fraud",
  reporter: { id: `user-${index % 500}`, contact: `reporter.${index % 500}@example.org` },
  description: `This post is a scam; I lost money. Report ${index}.`,
  evidence: [{ kind: "text", text: `DM received: send 0.1 BTC, get 0.2 back (${index})` }],
});

/** A webhook receiver on 127.0.0.1 that answers 200 at once and keeps what it got. */
export function startReceiver() {
  const received = [];
  const http = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      response.writeHead(200, { "content-length": "0" });
      response.end();
      received.push({
        receivedAt: Date.now(),
        body: Buffer.concat(chunks).toString("utf8"),
        headers: { "webhook-id": request.headers["webhook-id"], "webhook-timestamp": request.headers["webhook-timestamp"], "webhook-signature": request.headers["webhook-signature"] },
      });
    });
  });
  http.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    http.on("error", reject);
    http.listen(0, "127.0.0.1", () =>
      resolve({
        port: http.address().port,
        received,
        close: () =>
          new Promise((resolveClose) => {
            http.closeAllConnections?.();
            http.close(() => resolveClose());
          }),
      }),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// The local D1 file, copied and measured

/** wrangler's SQLite file of the DB binding under the bench's state folder (the largest there). */
function d1File() {
  const dir = join(server.persistDir, "v3", "d1", "miniflare-D1DatabaseObject");
  const files = readdirSync(dir)
    .filter((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite")
    .map((name) => join(dir, name));
  if (files.length === 0) throw new Error(`capacity: no D1 SQLite file in ${dir}`);
  return files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
}

/**
 * A copy of the live D1 file (with its WAL, replayed on open), VACUUMed, measured: bytes per
 * b-tree from `dbstat` grouped by the table each belongs to, and rows per table. The live files
 * are only read: workerd keeps them open, and this process never opens them as a database.
 */
async function measureD1(node_sqlite, label, installationId = null) {
  const source = d1File();
  const dir = mkdtempSync(join(tmpdir(), "safest-capacity-"));
  try {
    for (let attempt = 1; ; attempt++) {
      const copy = join(dir, `${label}-${attempt}.sqlite`);
      copyFileSync(source, copy);
      for (const suffix of ["-wal", "-shm"]) if (existsSync(source + suffix)) copyFileSync(source + suffix, copy + suffix);
      const db = new node_sqlite.DatabaseSync(copy);
      try {
        if (db.prepare("PRAGMA quick_check").get().quick_check !== "ok") throw new Error("quick_check failed");
        db.exec("PRAGMA journal_mode = DELETE; VACUUM;");
        // BENCH_CAPACITY_KEEP=<folder> keeps each measured copy there, to read its rows afterwards.
        if (process.env.BENCH_CAPACITY_KEEP) copyFileSync(copy, join(process.env.BENCH_CAPACITY_KEEP, `${label}.sqlite`));
        const pageSize = db.prepare("PRAGMA page_size").get().page_size;
        const pageCount = db.prepare("PRAGMA page_count").get().page_count;
        const owners = new Map(
          db
            .prepare("SELECT name, tbl_name AS tableName FROM sqlite_schema WHERE type IN ('table', 'index')")
            .all()
            .map((row) => [row.name, row.tableName]),
        );
        const tables = {};
        const entry = (name) => (tables[name] ??= { tableBytes: 0, indexBytes: 0, pageBytes: 0, rows: 0 });
        // Bytes a b-tree's pages hold (pgsize − unused: cells, their pointers and the page headers),
        // and its whole pages. A VACUUMed b-tree's pages are full but its last: a sample of N
        // lifecycles counted in whole pages carries up to a page per b-tree (4 KB / N each, about
        // 40 b-trees), which at volume is nothing; the bytes held are what a lifecycle adds.
        for (const { name, bytes, used } of db.prepare("SELECT name, SUM(pgsize) AS bytes, SUM(pgsize - unused) AS used FROM dbstat GROUP BY name").all()) {
          const table = owners.get(name) ?? name;
          entry(table)[table === name ? "tableBytes" : "indexBytes"] += used;
          entry(table).pageBytes += bytes;
        }
        for (const name of Object.keys(tables)) {
          if (name.startsWith("sqlite_") || name.startsWith("_cf_")) continue;
          entry(name).rows = db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get().n;
        }
        // The installation's archived audit segments: their index rows say each object's size.
        const segments = installationId ? db.prepare("SELECT COUNT(*) AS count, COALESCE(SUM(bytes), 0) AS bytes FROM audit_segments WHERE installation_id = ?").get(installationId) : { count: 0, bytes: 0 };
        return { bytes: pageSize * pageCount, pageSize, tables, segments: { count: segments.count, bytes: segments.bytes } };
      } catch (error) {
        // A copy taken while workerd was writing: try again shortly.
        if (attempt >= 5) throw new Error(`capacity: no consistent copy of the D1 file after ${attempt} attempts: ${error.message}`);
        log(`capacity: copy ${attempt} of the D1 file not usable (${error.message}); again`);
        await sleep(1_000);
      } finally {
        db.close();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The archive tier, driven as in production: the hot window, then the schedule

/**
 * Sets the installation's hot window to 0 days and runs the schedule two days on until a run of it
 * finds nothing left for the run archive, the case archive and the audit segments (and no case and
 * no unarchived run of the installation is left in D1); then sets `restoreDays` back when given.
 * Answers the runs it took and what the sweeps moved, summed.
 */
async function archiveAll(api, adminToken, key, { restoreDays = null } = {}) {
  await api("/api/v1/storage/settings", { method: "PUT", body: { hotDays: 0 }, key });
  const moved = { ticks: 0, runsQueued: 0, casesQueued: 0, casesArchived: 0, segments: 0, events: 0, ms: 0 };
  const casesBefore = (await api("/api/v1/storage", { key })).archivedCases;
  const until = Date.now() + ARCHIVE_TIMEOUT_MS;
  for (;;) {
    // Two days on: a case leaves D1 only once the day and hour of its last activity are rolled up
    // (complete), so the schedule runs as it will then (the production handler, at that moment);
    // nothing else in these lifecycles is due. Each run's moment is later than the last one's.
    const at = Math.max(Date.now() + ARCHIVE_AHEAD_MS, lastAt + 1_000);
    lastAt = at;
    const since = new Date(at).toISOString();
    const started = Date.now();
    const run = await api("/bench/schedule-at", { body: { at }, key: adminToken });
    if (!run.ok) throw new Error("capacity: a scheduled run failed while archiving");
    moved.ticks += 1;
    moved.ms += Date.now() - started;
    const { runs } = await api("/bench/sweep-runs", { body: { since }, key: adminToken });
    const counts = (name) => runs.find((row) => row.name === name)?.counts ?? null;
    const archive = counts("workflows.archive_runs");
    const segments = counts("audit.segments");
    const cases = counts("cases.archive");
    if (!archive || !segments || !cases) throw new Error(`capacity: the scheduled run recorded no ${!archive ? "workflows.archive_runs" : !segments ? "audit.segments" : "cases.archive"} row`);
    // Runs go through the RUN_OPERATIONS queue as cases do: handed over here, archived by its consumer.
    moved.runsQueued += archive.queued;
    // Cases go through the RUN_OPERATIONS queue: handed over here, archived by its consumer.
    moved.casesQueued += cases.queued;
    moved.segments += segments.segments;
    moved.events += segments.events;
    const storage = await api("/api/v1/storage", { key });
    const rows = (name) => storage.d1.tables.find((t) => t.name === name)?.rows ?? 0;
    const casesLeft = rows("cases");
    const runsLeft = rows("workflow_runs");
    // A run not archived yet is the oldest hot record.
    const runsHot = storage.oldestHotRecordAt !== null;
    moved.casesArchived = storage.archivedCases - casesBefore;
    // Nothing moved this run, none pending (`more`), and the installation has no case and no run left hot.
    if (moved.ticks >= 2 && archive.more === 0 && cases.more === 0 && segments.segments === 0 && casesLeft === 0 && !runsHot) break;
    // The queue's consumer works beside the schedule: give it a moment before the next run.
    if (casesLeft > 0) await new Promise((resolve) => setTimeout(resolve, 250));
    if (Date.now() > until) throw new Error(`capacity: archiving not done after ${moved.ticks} scheduled runs (${casesLeft} cases, ${runsLeft} runs in D1; last: ${JSON.stringify({ archive, cases, segments })})`);
  }
  if (restoreDays !== null) await api("/api/v1/storage/settings", { method: "PUT", body: { hotDays: restoreDays }, key });
  return moved;
}

/**
 * The steady state of the hot window: the schedule run an hour and a minute on (the production
 * handler, at that moment), until no run of the installation has its step history in D1 any more
 * (an ended run's history leaves D1 an hour after it ends: src/lib/storage-tiers.ts). Nothing else
 * of these lifecycles is due then: cases keep the installation's 7-day window (audit events past the
 * audit hour leave in segments of at least 500 events, lib/storage-tiers.ts).
 */
async function settleRunHistory(api, adminToken, key) {
  const moved = { ticks: 0, runsQueued: 0 };
  const until = Date.now() + ARCHIVE_TIMEOUT_MS;
  for (;;) {
    const at = Math.max(Date.now() + RUN_HISTORY_AHEAD_MS, lastAt + 1_000);
    lastAt = at;
    const since = new Date(at).toISOString();
    const run = await api("/bench/schedule-at", { body: { at }, key: adminToken });
    if (!run.ok) throw new Error("capacity: a scheduled run failed while settling");
    moved.ticks += 1;
    const { runs } = await api("/bench/sweep-runs", { body: { since }, key: adminToken });
    const archive = runs.find((row) => row.name === "workflows.archive_runs")?.counts;
    if (!archive) throw new Error("capacity: the scheduled run recorded no workflows.archive_runs row");
    moved.runsQueued += archive.queued;
    // Settled deliveries past their hour: payload and attempts to R2 (enforcement/delivery-archive.ts).
    const deliveries = runs.find((row) => row.name === "enforcement.delivery_archive")?.counts;
    const storage = await api("/api/v1/storage", { key });
    if (moved.ticks >= 2 && archive.more === 0 && (deliveries?.more ?? 0) === 0 && storage.oldestHotRecordAt === null) return moved;
    await new Promise((resolve) => setTimeout(resolve, 250));
    if (Date.now() > until) throw new Error(`capacity: run histories not archived after ${moved.ticks} scheduled runs (last: ${JSON.stringify(archive)})`);
  }
}

/** Per table, (b − a) over n: bytes (table + indexes) and rows, tables that changed, most bytes first. */
function tableDeltas(a, b, n) {
  return Object.keys({ ...a.tables, ...b.tables })
    .map((name) => {
      const x = a.tables[name] ?? { tableBytes: 0, indexBytes: 0, pageBytes: 0, rows: 0 };
      const y = b.tables[name] ?? { tableBytes: 0, indexBytes: 0, pageBytes: 0, rows: 0 };
      return {
        table: name,
        bytes: y.tableBytes + y.indexBytes - x.tableBytes - x.indexBytes,
        pageBytes: y.pageBytes - x.pageBytes,
        bytesPerLifecycle: round((y.tableBytes + y.indexBytes - x.tableBytes - x.indexBytes) / n, 0),
        indexBytesPerLifecycle: round((y.indexBytes - x.indexBytes) / n, 0),
        rowsPerLifecycle: round((y.rows - x.rows) / n, 2),
      };
    })
    .filter((row) => row.bytesPerLifecycle !== 0 || row.rowsPerLifecycle !== 0)
    .sort((x, y) => y.bytesPerLifecycle - x.bytesPerLifecycle);
}

// ---------------------------------------------------------------------------------------------

export async function sectionCapacity(api, base, adminToken) {
  Object.assign(TARGETS, { hotBytesPerLifecycle: TARGET_HOT_BYTES, queriesPerLifecycle: TARGET_QUERIES, daysPer10GB: TARGET_DAYS, archivedBytesPerLifecycle: TARGET_ARCHIVED_BYTES });
  const node_sqlite = await import("node:sqlite").catch(() => null);
  if (!node_sqlite) {
    // The project moves to Node ≥ 22.12; on an older Node the other sections still run.
    results.capacitySkipped = `needs node:sqlite (Node ≥ 22.5); this is Node ${process.version}`;
    log(`capacity: skipped, ${results.capacitySkipped}`);
    return;
  }
  const receiver = await startReceiver();
  try {
    log("capacity: a queue, a receiver, an action type, report → review → remove → webhook, a trigger for every report");
    const { installation, key, queue, hook, intakeKey, reviewKey } = await reviewedDesk(api, adminToken, { name: "capacity", receiverUrl: `http://127.0.0.1:${receiver.port}/capacity`, maxAttempts: 5 });
    const tag = Math.random().toString(16).slice(2, 10);
    let sent = 0;
    let settledBefore = 0;

    /** `count` lifecycles: the reports first (a few at a time), then reviewers answer every task. */
    const lifecycles = async (count) => {
      await pool(count, INTAKE_CONCURRENCY, async () => {
        const index = sent++;
        const intake = await api("/api/v1/reports", { body: reportBody(tag, index), key: intakeKey });
        if (intake.runs?.length !== 1) throw new Error(`capacity report ${index}: runs ${JSON.stringify(intake.runs)}`);
      });
      let answered = 0;
      await Promise.all(
        Array.from({ length: REVIEWERS }, async (_, reviewer) => {
          // Two minutes without a task to claim is a failure; a busy machine only makes the wait longer.
          let until = Date.now() + 120_000;
          while (answered < count) {
            const claim = await fetch(`${base}/api/v1/queues/${queue.id}/next`, {
              method: "POST",
              headers: { "content-type": "application/json", authorization: `Bearer ${reviewKey}` },
              body: JSON.stringify({ reviewer: `capacity-mod-${reviewer}` }),
            });
            const task = await claim.json();
            if (claim.status === 404) {
              if (answered >= count) break; // the others answered the last ones meanwhile
              if (Date.now() > until) throw new Error(`capacity: ${count - answered} tasks never reached the queue`);
              await sleep(100);
              continue;
            }
            if (!claim.ok) throw new Error(`capacity: claim ${claim.status} ${JSON.stringify(task).slice(0, 300)}`);
            answered++;
            until = Date.now() + 120_000;
            await api(`/api/v1/tasks/${task.id}/complete`, { body: { reviewer: `capacity-mod-${reviewer}`, response: { verdict: "remove" } }, key: reviewKey });
          }
        }),
      );
      // Settled: every run ended as removed, every delivery delivered, nothing in flight.
      const expected = settledBefore + count;
      const states = await poll(
        "capacity: lifecycles settling",
        async () => {
          const now = await api("/bench/lifecycle-states", { body: { installationId: installation.id }, key: adminToken });
          const ended = now.runs.succeeded ?? 0;
          if (Object.keys(now.runs).some((state) => ["failed", "repair_required", "terminated"].includes(state))) throw new Error(`capacity: runs ${JSON.stringify(now.runs)}`);
          return ended === expected && (now.deliveries.delivered ?? 0) === expected && (now.proposals.applied ?? 0) === expected && Object.keys(now.deliveries).length === 1 ? now : undefined;
        },
        { intervalMs: 500, timeoutMs: 180_000 },
      );
      settledBefore = expected;
      // The trail sealed (the sealer runs after API writes and on the schedule; listing seals first).
      await api("/api/v1/audit-events?limit=1", { key });
      return states;
    };

    log(`capacity: ${WARMUP} lifecycles of warm-up (not counted)`);
    await lifecycles(WARMUP);
    // The baseline holds the warm-up archived, as the measured lifecycles will be at the end.
    log("capacity: the warm-up archived (hot window 0 days, the schedule fired until nothing is left), the window back to 7 days");
    const warmupArchive = await archiveAll(api, adminToken, key, { restoreDays: DEFAULT_HOT_DAYS });
    // Archived cases take their runs, proposals and deliveries out of D1: settling counts from what is left.
    settledBefore = (await api("/bench/lifecycle-states", { body: { installationId: installation.id }, key: adminToken })).runs.succeeded ?? 0;
    const archiveBefore = (await api("/api/v1/storage", { key })).archiveBytes;
    const before = await measureD1(node_sqlite, "before", installation.id);
    await api("/bench/d1-tally", { body: { open: true }, key: adminToken });
    log(`capacity: ${LIFECYCLES} lifecycles (report → trigger → run → review task answered → remove action → signed webhook delivered)`);
    const began = performance.now();
    let tally;
    try {
      await lifecycles(LIFECYCLES);
    } finally {
      tally = await api("/bench/d1-tally", { body: { close: true }, key: adminToken });
    }
    const elapsedS = (performance.now() - began) / 1000;
    // At the runs' end, every step of the last hour still in D1 (a transient: an hour's worth).
    const atEnd = await measureD1(node_sqlite, "at-end", installation.id);
    const states = await api("/bench/lifecycle-states", { body: { installationId: installation.id }, key: adminToken });
    log("capacity: the hot window's steady state (the schedule an hour on: ended runs' step histories, settled deliveries' payloads and attempts, and the audit hour's full segments to R2)");
    await api("/bench/d1-tally", { body: { open: true }, key: adminToken });
    let settleTally;
    let settled;
    try {
      settled = await settleRunHistory(api, adminToken, key);
    } finally {
      settleTally = await api("/bench/d1-tally", { body: { close: true }, key: adminToken });
    }
    const after = await measureD1(node_sqlite, "after", installation.id);

    log("capacity: the lifecycles archived (hot window 0 days, the schedule fired until nothing is left)");
    await api("/bench/d1-tally", { body: { open: true }, key: adminToken });
    let archiveTally;
    let moved;
    try {
      moved = await archiveAll(api, adminToken, key);
    } finally {
      archiveTally = await api("/bench/d1-tally", { body: { close: true }, key: adminToken });
    }
    const storage = await api("/api/v1/storage", { key });
    const archived = await measureD1(node_sqlite, "archived", installation.id);

    const webhook = new Webhook(hook.secret);
    let valid = 0;
    // Each signature is checked as the receiver would have checked it on arrival: the library's
    // 5-minute timestamp tolerance is measured from when the request came, not from now (a loaded
    // machine takes longer than that between the first delivery and this check).
    const clock = Date.now;
    try {
      for (const entry of receiver.received) {
        Date.now = () => entry.receivedAt;
        try {
          webhook.verify(entry.body, entry.headers);
          valid++;
        } catch {
          // Counted as invalid.
        }
      }
    } finally {
      Date.now = clock;
    }
    const webhookIds = new Set(receiver.received.map((entry) => entry.headers["webhook-id"])).size;
    if (webhookIds !== WARMUP + LIFECYCLES || valid !== receiver.received.length) throw new Error(`capacity: receiver got ${webhookIds} webhook ids (${valid}/${receiver.received.length} signatures valid), expected ${WARMUP + LIFECYCLES}`);

    const perLifecycle = (value) => value / LIFECYCLES;
    // Hot: what a lifecycle holds in D1 through the window, the schedule's own tables left out.
    // Hot: what a lifecycle holds in D1 through the window — what stays once the hour has passed
    // (the audit trail aside: it all leaves by the hour, the few events past the newest checkpoint
    // left in the copy included), plus the hour's transient share.
    const auditLeft = tableDeltas(before, after, LIFECYCLES).find((row) => row.table === "audit_events");
    const tables = tableDeltas(before, after, LIFECYCLES).filter((row) => !SCHEDULE_TABLES.has(row.table) && row.table !== "audit_events");
    const settledBytes = perLifecycle(tables.reduce((sum, row) => sum + row.bytes, 0));
    const settledPageBytes = perLifecycle(tables.reduce((sum, row) => sum + row.pageBytes, 0));
    const atEndRows = tableDeltas(before, atEnd, LIFECYCLES).filter((row) => !SCHEDULE_TABLES.has(row.table));
    const hotBytesAtEnd = perLifecycle(atEndRows.reduce((sum, row) => sum + row.bytes, 0));
    const hotPageBytesAtEnd = perLifecycle(atEndRows.reduce((sum, row) => sum + row.pageBytes, 0));
    const transientShare = TRANSIENT_MINUTES / (DEFAULT_HOT_DAYS * 1_440);
    const transientBytes = Math.max(0, hotBytesAtEnd - settledBytes);
    const hotBytes = settledBytes + transientBytes * transientShare;
    const hotPageBytes = settledPageBytes + Math.max(0, hotPageBytesAtEnd - settledPageBytes) * transientShare;
    // What stays: the archived state against the baseline, the schedule's own tables left out.
    const staying = tableDeltas(before, archived, LIFECYCLES);
    const left = staying.filter((row) => !SCHEDULE_TABLES.has(row.table));
    const archivedBytes = perLifecycle(left.reduce((sum, row) => sum + row.bytes, 0));
    const archivedPageBytes = perLifecycle(left.reduce((sum, row) => sum + row.pageBytes, 0));
    const runObjectBytes = storage.archiveBytes - archiveBefore;
    const segmentBytes = archived.segments.bytes - before.segments.bytes;
    const hotPart = hotBytes * DEFAULT_HOT_DAYS * LIFECYCLES_PER_DAY;
    const archivedPerDay = archivedBytes * LIFECYCLES_PER_DAY;
    // 10 GB = hot × 7 × 100,000 + archived × 100,000 × days, for days (a negative archived figure is noise around 0: no bound).
    const days = hotPart >= TEN_GB ? 0 : archivedPerDay > 0 ? (TEN_GB - hotPart) / archivedPerDay : null;
    const byEntry = Object.fromEntries(
      Object.entries(tally.byEntry).map(([entry, t]) => [entry, { queries: round(perLifecycle(t.queries), 2), roundTrips: round(perLifecycle(t.roundTrips), 2), rowsWritten: round(perLifecycle(t.rowsWritten), 2) }]),
    );
    const statementFigures = (s) => ({
      sql: s.sql.length > 140 ? `${s.sql.slice(0, 137)}…` : s.sql,
      queriesPerLifecycle: round(perLifecycle(s.queries), 2),
      rowsWrittenPerLifecycle: round(perLifecycle(s.rowsWritten), 2),
    });
    const topStatements = tally.statements.slice(0, 15).map(statementFigures);
    const mostQueried = [...tally.statements]
      .sort((a, b) => b.queries - a.queries)
      .slice(0, 15)
      .map(statementFigures);
    // BENCH_CAPACITY_STATEMENTS=<file>: every statement's tally, in full, for working on the figures.
    if (process.env.BENCH_CAPACITY_STATEMENTS) writeFileSync(process.env.BENCH_CAPACITY_STATEMENTS, JSON.stringify({ lifecycles: LIFECYCLES, ...tally }, null, 1));
    Object.assign(results, {
      capacityLifecycles: LIFECYCLES,
      capacityElapsedS: round(elapsedS, 1),
      capacityStates: states,
      hotBytesPerLifecycle: round(hotBytes, 0),
      hotBytesPerLifecycleInWholePages: round(hotPageBytes, 0),
      hotBytesPerLifecycleAtRunEnd: round(hotBytesAtEnd, 0),
      capacityRunHistory: { ...settled, queriesPerLifecycle: round(perLifecycle(settleTally.total.queries), 1), rowsWrittenPerLifecycle: round(perLifecycle(settleTally.total.rowsWritten), 1) },
      rowsWrittenPerLifecycle: round(perLifecycle(tally.total.rowsWritten), 1),
      rowsReadPerLifecycle: round(perLifecycle(tally.total.rowsRead), 1),
      queriesPerLifecycle: round(perLifecycle(tally.total.queries), 1),
      d1RoundTripsPerLifecycle: round(perLifecycle(tally.total.roundTrips), 1),
      capacityStatementsWithoutMeta: tally.total.withoutMeta,
      archivedBytesPerLifecycle: round(archivedBytes, 0),
      archivedBytesPerLifecycleInWholePages: round(archivedPageBytes, 0),
      archiveObjectBytesPerLifecycle: round(perLifecycle(runObjectBytes + segmentBytes), 0),
      archiveRunObjectBytesPerLifecycle: round(perLifecycle(runObjectBytes), 0),
      archiveSegmentBytesPerLifecycle: round(perLifecycle(segmentBytes), 0),
      daysPer10GB: round(days, 0),
      daysPer10GBFormula: `10 GB = hot × ${DEFAULT_HOT_DAYS} × ${LIFECYCLES_PER_DAY} + archived × ${LIFECYCLES_PER_DAY} × days, for days`,
      daysPer10GBAllHot: hotBytes > 0 ? round(TEN_GB / (hotBytes * LIFECYCLES_PER_DAY), 1) : null,
      hotWindowGB: round(hotPart / 1e9, 2),
      capacityArchiving: {
        ...moved,
        warmupTicks: warmupArchive.ticks,
        queriesPerLifecycle: round(perLifecycle(archiveTally.total.queries), 1),
        rowsWrittenPerLifecycle: round(perLifecycle(archiveTally.total.rowsWritten), 1),
        segmentsAfter: archived.segments.count,
      },
      capacityD1BytesArchived: archived.bytes,
      capacityArchivedTables: left.map(({ bytes: _bytes, ...row }) => ({ ...row, why: STAYS_BECAUSE[row.table] ?? null })),
      capacityScheduleTables: staying.filter((row) => SCHEDULE_TABLES.has(row.table)).map(({ bytes: _bytes, ...row }) => row),
      capacityD1BytesBefore: before.bytes,
      capacityD1BytesAfter: after.bytes,
      capacityHotSettledBytes: round(settledBytes, 0),
      capacityHotTransient: { bytesPerLifecycle: round(transientBytes, 0), minutes: TRANSIENT_MINUTES, share: round(transientShare, 5), bytesShare: round(transientBytes * transientShare, 0) },
      capacityAuditLeft: auditLeft ? { events: after.tables.audit_events?.rows ?? 0, bytes: auditLeft.bytes } : null,
      // The ten largest, and the webhook tables wherever they rank (what a settled delivery keeps hot).
      capacityTables: tables.filter((row, i) => i < 10 || row.table.startsWith("webhook_")).map(({ bytes: _bytes, ...row }) => row),
      capacityQueriesByEntry: byEntry,
      capacityTopStatements: topStatements,
      capacityMostQueried: mostQueried,
      capacitySignaturesValid: `${valid}/${receiver.received.length}`,
    });
    log(
      `capacity: ${results.hotBytesPerLifecycle} bytes hot, ${results.archivedBytesPerLifecycle} bytes archived, ${results.archiveObjectBytesPerLifecycle} R2 bytes, ${results.queriesPerLifecycle} queries, ${results.rowsWrittenPerLifecycle} rows written per lifecycle`,
    );
  } finally {
    await receiver.close();
  }
}

export function capacityLines() {
  if (results.capacitySkipped) return [`capacity:         skipped: ${results.capacitySkipped}`];
  if (results.hotBytesPerLifecycle === undefined) return [];
  const lines = [
    `capacity:         ${results.capacityLifecycles} reviewed lifecycles (report → trigger → run → review task answered → remove action → signed webhook delivered; signatures valid ${results.capacitySignaturesValid}) in ${results.capacityElapsedS} s`,
    `hot bytes:        ${results.hotBytesPerLifecycle} B per lifecycle  (target ≤ ${TARGET_HOT_BYTES}) ${verdict(results.hotBytesPerLifecycle, TARGET_HOT_BYTES)}  (bytes its pages hold; in whole pages ${results.hotBytesPerLifecycleInWholePages} B, each b-tree's last page partly empty in a sample of ${results.capacityLifecycles}) (through the 7-day window: the local D1 file copied before and once the schedule an hour on moved the ended runs' step histories and the sealed audit events past the hour to R2, VACUUMed, measured with dbstat: ${results.capacityD1BytesBefore} → ${results.capacityD1BytesAfter} B; at the runs' end, with the last hour's step histories and audit events still in D1: ${results.hotBytesPerLifecycleAtRunEnd} B; moving them cost ${results.capacityRunHistory.queriesPerLifecycle} statements per lifecycle in ${results.capacityRunHistory.ticks} scheduled runs)`,
    `D1 queries:       ${results.queriesPerLifecycle} statements per lifecycle  (target ≤ ${TARGET_QUERIES}) ${verdict(results.queriesPerLifecycle, TARGET_QUERIES)} in ${results.d1RoundTripsPerLifecycle} round trips (a batch is one); rows written ${results.rowsWrittenPerLifecycle}, rows read ${results.rowsReadPerLifecycle} per lifecycle (meta as D1 reports it; by entrypoint: ${Object.entries(
      results.capacityQueriesByEntry,
    )
      .map(([entry, t]) => `${entry} ${t.queries} q in ${t.roundTrips} trips / ${t.rowsWritten} w`)
      .join(", ")})`,
    `archived bytes:   ${results.archivedBytesPerLifecycle} B per lifecycle left in D1 once its case, run and audit events are archived  (target ≤ ${TARGET_ARCHIVED_BYTES}) ${verdict(results.archivedBytesPerLifecycle, TARGET_ARCHIVED_BYTES)}  (bytes its pages hold; in whole pages ${results.archivedBytesPerLifecycleInWholePages} B) (hot window 0, ${results.capacityArchiving.ticks} scheduled runs two days on until nothing was left: ${results.capacityArchiving.runsQueued} runs and ${results.capacityArchiving.casesQueued} cases handed to the queue, ${results.capacityArchiving.casesArchived} cases archived, ${results.capacityArchiving.events} audit events in ${results.capacityArchiving.segments} segments; D1 file ${results.capacityD1BytesArchived} B; the schedule's own tables left out: ${results.capacityScheduleTables.map((t) => `${t.table} ${t.bytesPerLifecycle} B`).join(", ") || "none"})`,
    `archive (R2):     ${results.archiveObjectBytesPerLifecycle} B per lifecycle  (run and case objects ${results.archiveRunObjectBytesPerLifecycle} B, from GET /storage archiveBytes; audit segments ${results.archiveSegmentBytesPerLifecycle} B, from audit_segments.bytes); archiving cost ${results.capacityArchiving.queriesPerLifecycle} statements, ${results.capacityArchiving.rowsWrittenPerLifecycle} rows written per lifecycle (every sweep of those scheduled runs)`,
    `days to 10 GB:    ${results.daysPer10GB} at ${LIFECYCLES_PER_DAY.toLocaleString("en")} lifecycles a day, ${DEFAULT_HOT_DAYS}-day window  (target ≥ ${TARGET_DAYS}) ${atLeast(results.daysPer10GB, TARGET_DAYS)}  [${results.daysPer10GBFormula}; the hot window alone holds ${results.hotWindowGB} GB; everything hot it would be ${results.daysPer10GBAllHot}]`,
    `hot, by tier:     ${results.capacityHotSettledBytes} B a lifecycle keeps through the window + ${results.capacityHotTransient.bytesShare} B for what it holds only its first ${results.capacityHotTransient.minutes} minutes (${results.capacityHotTransient.bytesPerLifecycle} B: step history, delivery payload and attempts, audit events; × ${results.capacityHotTransient.share}, those minutes' share of the ${DEFAULT_HOT_DAYS}-day window)${results.capacityAuditLeft ? `; in the copy past the hour, ${results.capacityAuditLeft.events} audit events (${results.capacityAuditLeft.bytes} B) past the newest checkpoint the segments may end at, counted in that share` : ""}`,
    "bytes by table:   per lifecycle, table + its indexes (of which indexes), rows per lifecycle (once the hour has passed; the audit trail aside):",
    ...results.capacityTables.map((t) => `                    ${t.table.padEnd(26)} ${String(t.bytesPerLifecycle).padStart(6)} B (indexes ${String(t.indexBytesPerLifecycle).padStart(5)} B)  ${t.rowsPerLifecycle} rows`),
    "left after archiving: per lifecycle, table + its indexes, rows per lifecycle, and why it stays in D1:",
    ...results.capacityArchivedTables.map(
      (t) => `                    ${t.table.padEnd(26)} ${String(t.bytesPerLifecycle).padStart(6)} B (indexes ${String(t.indexBytesPerLifecycle).padStart(5)} B)  ${t.rowsPerLifecycle} rows  ${t.why ?? ""}`,
    ),
    "top writers:      statements by rows written per lifecycle (queries per lifecycle):",
    ...results.capacityTopStatements.slice(0, 10).map((s) => `                    ${String(s.rowsWrittenPerLifecycle).padStart(6)} w (${s.queriesPerLifecycle} q)  ${s.sql}`),
    "most sent:        statements by queries per lifecycle (rows written per lifecycle):",
    ...results.capacityMostQueried.slice(0, 10).map((s) => `                    ${String(s.queriesPerLifecycle).padStart(6)} q (${s.rowsWrittenPerLifecycle} w)  ${s.sql}`),
  ];
  return lines;
}
