// Section "capacity": what one reviewed report lifecycle costs D1, measured from outside. In an
// installation of its own, N lifecycles go through the real HTTP API: a report comes in, its
// trigger starts a run, the run puts a review task in a queue, a reviewer claims and answers it
// ("remove"), the run takes an autonomous `remove` action whose signed webhook a receiver on
// 127.0.0.1 accepts (signatures checked), and the run ends. Once every run has ended, every
// delivery is delivered and the audit trail is sealed, the section measures:
//
// - hot bytes per lifecycle: the local D1 database (wrangler's SQLite file under the bench's state
//   folder) copied before and after, each copy VACUUMed and measured with SQLite's `dbstat` (bytes
//   per table and per index, which add up to page_count × page_size), read with Node's built-in
//   `node:sqlite` (Node ≥ 22.5; the project asks for ≥ 22.12). The difference over N, by table.
// - queries and rows written per lifecycle: every D1 statement the bench Worker sends in the
//   meantime, counted by the wrapper around its DB binding (bench/d1-count.ts) — HTTP handlers,
//   Workflows steps, the runtime capability, queue consumers and the schedule alike —, with
//   `meta.rows_written` as D1 reports it (index entries included), by entrypoint and by statement.
// - days until 10 GB at 100,000 lifecycles a day, with everything staying in D1 (no archive tier
//   yet), and the bytes per lifecycle an archive would hold (null until one exists).
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { atLeast, log, poll, pool, publish, results, reviewThenActGraph, round, server, sleep, TARGETS, verdict } from "./lib.mjs";

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

const reportBody = (tag, index) => ({
  subject: { kind: "content", id: `${tag}-post-${index}`, url: `https://social.example/p/${tag}-${index}`, snapshot: { text: `Double your crypto in 24h! Send 0.1 BTC to get 0.2 back. (${index})` } },
  category: "scams_and_fraud",
  reporter: { id: `user-${index % 500}`, contact: `reporter.${index % 500}@example.org` },
  description: `This post is a scam; I lost money. Report ${index}.`,
  evidence: [{ kind: "text", text: `DM received: send 0.1 BTC, get 0.2 back (${index})` }],
});

/** A webhook receiver on 127.0.0.1 that answers 200 at once and keeps what it got. */
function startReceiver() {
  const received = [];
  const http = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      response.writeHead(200, { "content-length": "0" });
      response.end();
      received.push({
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
async function measureD1(node_sqlite, label) {
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
        const pageSize = db.prepare("PRAGMA page_size").get().page_size;
        const pageCount = db.prepare("PRAGMA page_count").get().page_count;
        const owners = new Map(
          db
            .prepare("SELECT name, tbl_name AS tableName FROM sqlite_schema WHERE type IN ('table', 'index')")
            .all()
            .map((row) => [row.name, row.tableName]),
        );
        const tables = {};
        const entry = (name) => (tables[name] ??= { tableBytes: 0, indexBytes: 0, rows: 0 });
        for (const { name, bytes } of db.prepare("SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name").all()) {
          const table = owners.get(name) ?? name;
          entry(table)[table === name ? "tableBytes" : "indexBytes"] += bytes;
        }
        for (const name of Object.keys(tables)) {
          if (name.startsWith("sqlite_") || name.startsWith("_cf_")) continue;
          entry(name).rows = db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get().n;
        }
        return { bytes: pageSize * pageCount, pageSize, tables };
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
    const installation = await api("/api/v1/installations", { body: { name: "bench-capacity" }, key: adminToken });
    const key = installation.apiKey;
    log("capacity: a queue, a receiver, an action type, report → review → remove → webhook, a trigger for every report");
    const queue = await api("/api/v1/queues", { body: { name: "capacity-review", slaSeconds: 3_600, priority: 5 }, key });
    const hook = await api("/api/v1/webhook-endpoints", { body: { url: `http://127.0.0.1:${receiver.port}/capacity`, retryBaseSeconds: 1, maxAttempts: 5 }, key });
    await api("/api/v1/action-types", { body: { key: "capacity_remove", name: "Capacity: remove post", endpointId: hook.id, reversible: true, requiresApproval: false }, key });
    const version = await publish(api, key, reviewThenActGraph(queue.id, "capacity_remove"), "bench-capacity");
    await api("/api/v1/triggers", { body: { event: "report.created", when: "report.category == 'scams_and_fraud'", workflowVersionId: version.id, authorityMode: "autonomous" }, key });
    const { apiKey: intakeKey } = await api("/api/v1/api-keys", { body: { name: "capacity-intake", scopes: ["reports:write"] }, key });
    const { apiKey: reviewKey } = await api("/api/v1/api-keys", { body: { name: "capacity-review", scopes: ["review"] }, key });
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
          const until = Date.now() + 120_000;
          while (answered < count) {
            const claim = await fetch(`${base}/api/v1/queues/${queue.id}/next`, {
              method: "POST",
              headers: { "content-type": "application/json", authorization: `Bearer ${reviewKey}` },
              body: JSON.stringify({ reviewer: `capacity-mod-${reviewer}` }),
            });
            const task = await claim.json();
            if (claim.status === 404) {
              if (Date.now() > until) throw new Error(`capacity: ${count - answered} tasks never reached the queue`);
              await sleep(100);
              continue;
            }
            if (!claim.ok) throw new Error(`capacity: claim ${claim.status} ${JSON.stringify(task).slice(0, 300)}`);
            answered++;
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
    const before = await measureD1(node_sqlite, "before");
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
    const after = await measureD1(node_sqlite, "after");
    const states = await api("/bench/lifecycle-states", { body: { installationId: installation.id }, key: adminToken });

    const webhook = new Webhook(hook.secret);
    let valid = 0;
    for (const entry of receiver.received) {
      try {
        webhook.verify(entry.body, entry.headers);
        valid++;
      } catch {
        // Counted as invalid.
      }
    }
    const webhookIds = new Set(receiver.received.map((entry) => entry.headers["webhook-id"])).size;
    if (webhookIds !== WARMUP + LIFECYCLES || valid !== receiver.received.length) throw new Error(`capacity: receiver got ${webhookIds} webhook ids (${valid}/${receiver.received.length} signatures valid), expected ${WARMUP + LIFECYCLES}`);

    const perLifecycle = (value) => value / LIFECYCLES;
    const hotBytes = perLifecycle(after.bytes - before.bytes);
    const tables = Object.keys({ ...before.tables, ...after.tables })
      .map((name) => {
        const b = before.tables[name] ?? { tableBytes: 0, indexBytes: 0, rows: 0 };
        const a = after.tables[name] ?? { tableBytes: 0, indexBytes: 0, rows: 0 };
        return {
          table: name,
          bytesPerLifecycle: round(perLifecycle(a.tableBytes + a.indexBytes - b.tableBytes - b.indexBytes), 0),
          indexBytesPerLifecycle: round(perLifecycle(a.indexBytes - b.indexBytes), 0),
          rowsPerLifecycle: round(perLifecycle(a.rows - b.rows), 2),
        };
      })
      .filter((row) => row.bytesPerLifecycle !== 0 || row.rowsPerLifecycle !== 0)
      .sort((x, y) => y.bytesPerLifecycle - x.bytesPerLifecycle);
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
      rowsWrittenPerLifecycle: round(perLifecycle(tally.total.rowsWritten), 1),
      rowsReadPerLifecycle: round(perLifecycle(tally.total.rowsRead), 1),
      queriesPerLifecycle: round(perLifecycle(tally.total.queries), 1),
      d1RoundTripsPerLifecycle: round(perLifecycle(tally.total.roundTrips), 1),
      capacityStatementsWithoutMeta: tally.total.withoutMeta,
      daysPer10GB: hotBytes > 0 ? round(TEN_GB / (hotBytes * LIFECYCLES_PER_DAY), 1) : null,
      archivedBytesPerLifecycle: null,
      archivedBytesNote: "not built yet (no archive tier: every byte stays in D1)",
      capacityD1BytesBefore: before.bytes,
      capacityD1BytesAfter: after.bytes,
      capacityTables: tables.slice(0, 10),
      capacityQueriesByEntry: byEntry,
      capacityTopStatements: topStatements,
      capacityMostQueried: mostQueried,
      capacitySignaturesValid: `${valid}/${receiver.received.length}`,
    });
    log(`capacity: ${results.hotBytesPerLifecycle} bytes, ${results.queriesPerLifecycle} queries, ${results.rowsWrittenPerLifecycle} rows written per lifecycle`);
  } finally {
    await receiver.close();
  }
}

export function capacityLines() {
  if (results.capacitySkipped) return [`capacity:         skipped: ${results.capacitySkipped}`];
  if (results.hotBytesPerLifecycle === undefined) return [];
  const lines = [
    `capacity:         ${results.capacityLifecycles} reviewed lifecycles (report → trigger → run → review task answered → remove action → signed webhook delivered; signatures valid ${results.capacitySignaturesValid}) in ${results.capacityElapsedS} s`,
    `hot bytes:        ${results.hotBytesPerLifecycle} B per lifecycle  (target ≤ ${TARGET_HOT_BYTES}) ${verdict(results.hotBytesPerLifecycle, TARGET_HOT_BYTES)}  (the local D1 file copied before and after, VACUUMed, measured with dbstat: ${results.capacityD1BytesBefore} → ${results.capacityD1BytesAfter} B)`,
    `D1 queries:       ${results.queriesPerLifecycle} statements per lifecycle  (target ≤ ${TARGET_QUERIES}) ${verdict(results.queriesPerLifecycle, TARGET_QUERIES)} in ${results.d1RoundTripsPerLifecycle} round trips (a batch is one); rows written ${results.rowsWrittenPerLifecycle}, rows read ${results.rowsReadPerLifecycle} per lifecycle (meta as D1 reports it; by entrypoint: ${Object.entries(
      results.capacityQueriesByEntry,
    )
      .map(([entry, t]) => `${entry} ${t.queries} q in ${t.roundTrips} trips / ${t.rowsWritten} w`)
      .join(", ")})`,
    `days to 10 GB:    ${results.daysPer10GB} at ${LIFECYCLES_PER_DAY.toLocaleString("en")} lifecycles a day, everything in D1  (target ≥ ${TARGET_DAYS}) ${atLeast(results.daysPer10GB, TARGET_DAYS)}; archived bytes per lifecycle: ${results.archivedBytesPerLifecycle} — ${results.archivedBytesNote} (target ≤ ${TARGET_ARCHIVED_BYTES})`,
    "bytes by table:   per lifecycle, table + its indexes (of which indexes), rows per lifecycle:",
    ...results.capacityTables.map((t) => `                    ${t.table.padEnd(26)} ${String(t.bytesPerLifecycle).padStart(6)} B (indexes ${String(t.indexBytesPerLifecycle).padStart(5)} B)  ${t.rowsPerLifecycle} rows`),
    "top writers:      statements by rows written per lifecycle (queries per lifecycle):",
    ...results.capacityTopStatements.slice(0, 10).map((s) => `                    ${String(s.rowsWrittenPerLifecycle).padStart(6)} w (${s.queriesPerLifecycle} q)  ${s.sql}`),
    "most sent:        statements by queries per lifecycle (rows written per lifecycle):",
    ...results.capacityMostQueried.slice(0, 10).map((s) => `                    ${String(s.queriesPerLifecycle).padStart(6)} q (${s.rowsWrittenPerLifecycle} w)  ${s.sql}`),
  ];
  return lines;
}
