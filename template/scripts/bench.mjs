// npm run bench — a benchmark, not a test: it prints figures and ratios measured side by side, in
// one run, on one machine. It runs the bench Worker (bench/wrangler.jsonc: the production Worker
// plus a bare Cloudflare Workflow and /bench routes) on wrangler's local engines — its workerd and
// its local D1, Queues, Workflows and Worker Loader — on a free loopback port, from a snapshot of
// the sources in a throwaway folder that also holds its state, drives it over HTTP, and always
// stops the dev server's process group and deletes the folder. Human-readable lines first; the
// LAST line of stdout is one JSON object with every figure.
//
// Dev server (stated in the output as `devServer`): `wrangler dev`, the public CLI, as `npm start`
// runs it — its workerd and its local D1, Queues, Workflows and Worker Loader.
//
// Sections (bench/sections/*.mjs): per-step cost (platform runtime vs bare Workflow), per-node
// growth over a long run, context cost at step 10 vs 200 (reads far back; the context load timed
// in the Worker), component nodes vs a built-in and vs a host function, autonomous actions from
// proposal to confirmed delivery vs a bare signed webhook POST, report intake throughput, product event intake (events/s over the bare POST floor, D1 bytes per unhit event, counter cost per event),
// review-queue listing latency with 100,000 open tasks with the listing query's plan, and
// /audit/verify at 10,000 and 100,000 audit events (incremental, from the last checkpoint), the
// cost of the expression budget on a typical condition, the cost of reading reported content, and
// one scheduled run of every sweep over 100,000 tasks with each sweep's query plan, GET /search
// over 1,000,000 reports and their keyed search terms (search; BENCH_SEARCH_REPORTS to change), a bulk
// action over 1,000 subjects from request to every action delivered (bulk), and
// the export and restore of an installation with 10,000 audit events (backup), and
// GET /metrics over 30 days of hourly rollups (p95, per hour and per day), and the
// repair of 100 runs in repair_required (a bulk migrate, and one by one), and what one reviewed
// report lifecycle costs D1 — hot bytes, queries and rows written, the bytes left once the
// archive tier took its runs and audit events, and the R2 bytes they became (capacity; needs
// node:sqlite, Node ≥ 22.5). Only when named (BENCH_ONLY=scale), as it takes minutes: intake,
// claim and list latency on the small database and again once its D1 file holds ~2 GB of another
// installation's history (scale; node:sqlite too).
//
// The Worker's schedule runs as under `npm start`: scripts/local-cron.mjs calls its scheduled
// handler every minute for the whole bench. BENCH_ONLY=audit,queue,backtests,tdb,treport,… runs only those sections
// (runtime, fused, context, expressions, components, content, actions, capacity, intake, events, load, queue, audit, sweeps, backup, metrics, repair, bulk, search, start, scale) — for working on one of them.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { actionLines, sectionActions } from "../bench/sections/actions.mjs";
import { auditLines, sectionAuditVerify } from "../bench/sections/audit.mjs";
import { backtestLines, sectionBacktests } from "../bench/sections/backtests.mjs";
import { capacityLines, sectionCapacity } from "../bench/sections/capacity.mjs";
import { sectionTdb, tdbLines } from "../bench/sections/tdb.mjs";
import { sectionTransparencyReport, treportLines } from "../bench/sections/treport.mjs";
import { searchLines, sectionSearch } from "../bench/sections/search.mjs";
import { bulkLines, sectionBulk } from "../bench/sections/bulk.mjs";
import { backupLines, sectionBackup } from "../bench/sections/backup.mjs";
import { componentLines, sectionComponents } from "../bench/sections/components.mjs";
import { contentLines, sectionContent } from "../bench/sections/content.mjs";
import { contextLines, sectionContext } from "../bench/sections/context.mjs";
import { expressionLines, sectionExpressions } from "../bench/sections/expressions.mjs";
import { fusedLines, sectionFused } from "../bench/sections/fused.mjs";
import { eventLines, sectionEvents } from "../bench/sections/events.mjs";
import { intakeLines, sectionIntake } from "../bench/sections/intake.mjs";
import { loadLines, sectionLoad } from "../bench/sections/load.mjs";
import { client, deadline, edge, log, OVERALL_BUDGET_MS, publish, remaining, results, round, server, sleep, startedAt, timedClient } from "../bench/sections/lib.mjs";
import { metricsLines, sectionMetrics } from "../bench/sections/metrics.mjs";
import { pdqLines, sectionPdq } from "../bench/sections/pdq.mjs";
import { queueLines, sectionQueueListing } from "../bench/sections/queue.mjs";
import { repairLines, sectionRepair } from "../bench/sections/repair.mjs";
import { scaleLines, sectionScale } from "../bench/sections/scale.mjs";
import { runtimeLines, sectionGrowth, sectionPerStep } from "../bench/sections/runtime.mjs";
import { sectionSweeps, sweepLines } from "../bench/sections/sweeps.mjs";
import { sectionStart, startLines } from "../bench/sections/start.mjs";
import { startLocalCron } from "./local-cron.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const require = createRequire(import.meta.url);
const wranglerDir = require.resolve("wrangler/package.json").replace(/package\.json$/u, "");
const wranglerBin = join(wranglerDir, "bin", "wrangler.js");
const benchConfig = join(root, "bench", "wrangler.jsonc");
const hoistedModules = dirname(dirname(require.resolve("wrangler/package.json"))); // the workspace's node_modules
const productionConfig = join(root, "wrangler.jsonc");

/** The dev server, as `npm start` runs it. */
const DEV_SERVER = "wrangler dev (as npm start: the public CLI, its devtools inspector attached)";
const RESERVED_PORTS = new Set([8787, 8899]); // other sessions' dev servers

async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const probe = createServer();
      probe.unref();
      probe.on("error", reject);
      probe.listen(0, "127.0.0.1", () => {
        const { port: chosen } = probe.address();
        probe.close(() => resolve(chosen));
      });
    });
    if (!RESERVED_PORTS.has(port)) return port;
  }
}

// ---------------------------------------------------------------------------------------------
// The bench config must keep declaring what the production config declares

// JSONC → JSON: drops line and block comments outside strings, and trailing commas.
function parseJsonc(text) {
  let out = "";
  for (let index = 0; index < text.length; index++) {
    const char = text[index];
    if (char === '"') {
      let end = index + 1;
      while (end < text.length && text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      out += text.slice(index, end + 1);
      index = end;
    } else if (char === "/" && text[index + 1] === "/") {
      while (index < text.length && text[index] !== "\n") index++;
      out += "\n";
    } else if (char === "/" && text[index + 1] === "*") {
      index = text.indexOf("*/", index + 2) + 1;
      if (index === 0) break;
    } else out += char;
  }
  return JSON.parse(out.replace(/,(\s*[}\]])/gu, "$1"));
}

/** Fails fast when template/wrangler.jsonc gained or changed something bench/wrangler.jsonc lacks. */
function checkBenchConfig() {
  const production = parseJsonc(readFileSync(productionConfig, "utf8"));
  const bench = parseJsonc(readFileSync(benchConfig, "utf8"));
  const ignored = new Set(["$schema", "name", "main"]);
  const normalize = (key, value, config) => {
    if (key === "d1_databases") return value.map(({ migrations_dir: _dir, ...rest }) => rest);
    if (key === "workflows") return value.filter((entry) => entry.binding !== "BENCH_WORKFLOW").map(({ name: _name, ...rest }) => rest);
    if (key === "assets" && value) {
      // The same folder (each config's path resolves against its own directory); /bench/* added.
      const { directory, run_worker_first: first, ...rest } = value;
      return { ...rest, directory: resolve(dirname(config), directory), run_worker_first: Array.isArray(first) ? first.filter((pattern) => pattern !== "/bench/*") : first };
    }
    return value;
  };
  const differences = [];
  for (const key of new Set([...Object.keys(production), ...Object.keys(bench)])) {
    if (ignored.has(key)) continue;
    if (JSON.stringify(normalize(key, production[key], productionConfig)) !== JSON.stringify(normalize(key, bench[key], benchConfig))) differences.push(key);
  }
  if (differences.length > 0) throw new Error(`bench/wrangler.jsonc differs from wrangler.jsonc in: ${differences.join(", ")} (update the bench config)`);
  return bench;
}

// ---------------------------------------------------------------------------------------------
// Dev server lifecycle

let stateDir = null;
let logFile = null;
let cron = null;

function wranglerEnv(dir) {
  return {
    ...process.env,
    CI: "true",
    WRANGLER_SEND_METRICS: "false",
    WRANGLER_SEND_ERROR_REPORTS: "false",
    WRANGLER_HIDE_BANNER: "true", // also skips the npm update check: no traffic off the machine
    CLOUDFLARE_CF_FETCH_ENABLED: "false", // miniflare would fetch Request.cf from workers.cloudflare.com
    WRANGLER_LOG_PATH: join(dir, "wrangler-logs"),
    WRANGLER_REGISTRY_PATH: join(dir, "registry"), // our own dev registry: never seen by other sessions
    NO_COLOR: "1",
  };
}

/**
 * The Worker runs from a copy of its sources taken when the bench starts (inside the throwaway
 * folder; node_modules linked, not copied): an edit made in the repository while the bench runs
 * neither reloads the Worker mid-request (wrangler dev watches what it bundled) nor mixes versions,
 * and the sources the bench checks against (src/cases/queues/tasks.ts) are the ones running.
 */
async function snapshotSources(dir) {
  const app = join(dir, "snapshot", "template");
  await mkdir(app, { recursive: true });
  for (const entry of ["src", "bench", "migrations", "examples", "package.json", "tsconfig.json"]) await cp(join(root, entry), join(app, entry), { recursive: true });
  // The console's built assets, when there are any (the config's assets folder must exist).
  if (existsSync(join(root, "console-dist"))) await cp(join(root, "console-dist"), join(app, "console-dist"), { recursive: true });
  else await mkdir(join(app, "console-dist"));
  await symlink(hoistedModules, join(dir, "snapshot", "node_modules"), "dir");
  await symlink(join(root, "node_modules"), join(app, "node_modules"), "dir").catch(() => {});
  return app;
}

function runWrangler(args, dir) {
  const result = spawnSync(process.execPath, [wranglerBin, ...args], {
    cwd: server.appDir,
    env: wranglerEnv(dir),
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024, // `d1 execute --file` answers one JSON result per statement
    // Every migration on a fresh state folder takes minutes on a loaded 2-core machine; the bench's
    // budget bounds it (half of it, when BENCH_BUDGET_S gives a shared machine more than 12 minutes).
    timeout: Math.min(Math.max(360_000, OVERALL_BUDGET_MS / 2), remaining()),
  });
  if (result.status !== 0) throw new Error(`wrangler ${args.slice(0, 3).join(" ")} failed (${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/**
 * The D1 migrations on the fresh state folder. `wrangler d1 migrations apply` starts the local
 * engine once per file (a second or more each, minutes on a loaded machine, past the bench's
 * budget), so every file goes in one `wrangler d1 execute`, each followed by its row in
 * d1_migrations as `migrations apply` writes it — as scripts/start.mjs does for a fresh state.
 */
async function applyMigrations(appDir, persist, config, dir) {
  const migrations = join(appDir, "migrations");
  const files = readdirSync(migrations)
    .filter((name) => name.endsWith(".sql"))
    .sort();
  const sql = [
    "CREATE TABLE IF NOT EXISTS d1_migrations(\n\t\tid         INTEGER PRIMARY KEY AUTOINCREMENT,\n\t\tname       TEXT UNIQUE,\n\t\tapplied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL\n);",
    ...files.map((name) => `${readFileSync(join(migrations, name), "utf8")}\nINSERT INTO d1_migrations (name) values ('${name}');\n`),
  ].join("\n");
  const file = join(dir, "migrations.sql");
  await writeFile(file, sql, { mode: 0o600 });
  runWrangler(["d1", "execute", "DB", "--local", "--persist-to", persist, "-c", config, "--file", file], dir);
}

function logTail(lines = 40) {
  try {
    return readFileSync(logFile, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no dev server log)";
  }
}

async function stopServer() {
  const child = server.child;
  server.child = null;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const signalGroup = (signal) => {
    try {
      process.kill(-child.pid, signal);
    } catch {
      // The group is already gone.
    }
  };
  signalGroup("SIGTERM");
  const done = await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)]);
  signalGroup("SIGKILL"); // workerd children too, whatever the parent did with SIGTERM
  if (!done) await Promise.race([exited, sleep(2_000)]);
}

async function cleanup() {
  await cron?.stop();
  cron = null;
  await stopServer();
  if (stateDir) {
    const dir = stateDir;
    stateDir = null;
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

/**
 * Starts the dev server. The first start writes the secrets, snapshots the sources and applies the
 * migrations; `{ again: true }` starts it once more on the same snapshot, secrets and state (its
 * D1 file as the previous server left it, or as a section changed it in between).
 */
async function startServer(dir, adminToken, { again = false } = {}) {
  const envFile = join(dir, "bench.env");
  const persist = join(dir, "state");
  if (!again) {
    // Secrets the Worker reads (see .dev.vars.example), in a 0600 file rather than on a command line.
    const reportMasterKey = randomBytes(32).toString("hex");
    // ALLOW_LOCAL_EGRESS: the bench's webhook receiver listens on 127.0.0.1 over plain http.
    const auditCheckpointKey = randomBytes(32).toString("hex");
    await writeFile(envFile, `ADMIN_TOKEN=${adminToken}\nREPORT_MASTER_KEY=${reportMasterKey}\nAUDIT_CHECKPOINT_KEY=${auditCheckpointKey}\nALLOW_LOCAL_EGRESS=true\n`, { mode: 0o600 });
    server.persistDir = persist;
    log("applying migrations");
    server.appDir = await snapshotSources(dir);
  }
  const appDir = server.appDir;
  const config = join(appDir, "bench", "wrangler.jsonc");
  if (!again) await applyMigrations(appDir, persist, config, dir);
  const port = await freePort();
  logFile = join(dir, "dev-server.log");
  const out = openSync(logFile, "a");
  log(`starting ${DEV_SERVER} on 127.0.0.1:${port}`);
  const args = [
    wranglerBin,
    "dev",
    "-c",
    config,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-ip",
    "127.0.0.1",
    "--inspector-port",
    String(await freePort()),
    "--persist-to",
    persist,
    "--env-file",
    envFile,
    "--show-interactive-dev-session=false",
    "--live-reload=false",
    "--test-scheduled",
    "--log-level",
    "warn",
  ];
  server.child = spawn(process.execPath, args, { cwd: appDir, env: wranglerEnv(dir), detached: true, stdio: ["ignore", out, out] });
  closeSync(out);
  server.port = port;
  const base = `http://127.0.0.1:${port}`;
  const ready = Math.min(Date.now() + 120_000, deadline);
  for (;;) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) throw new Error(`the dev server exited early:\n${logTail()}`);
    try {
      const response = await fetch(`${base}/bench/floor`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return base;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > ready) throw new Error(`the dev server was not ready in time:\n${logTail()}`);
    await sleep(250);
  }
}

/**
 * Stops the schedule driver and the dev server, runs `between(persistDir)` while nothing holds the
 * state folder's files, then starts both again on the same state; answers the new base URL.
 */
async function restartServer(adminToken, between) {
  await cron?.stop();
  cron = null;
  await stopServer();
  await between(server.persistDir);
  const base = await startServer(stateDir, adminToken, { again: true });
  cron = startLocalCron({ baseUrl: base, log: (message) => log(`schedule: ${message}`) });
  return base;
}

// ---------------------------------------------------------------------------------------------

function report() {
  const lines = [];
  if (results.cores !== undefined) lines.push(`machine:          ${results.cores} cores, 1-minute load average ${results.loadAverageAtStart} at the start (other processes compete with the dev server for the cores)`);
  if (results.devServer !== undefined) lines.push(`dev server:       ${results.devServer}, wrangler ${results.wranglerVersion}`);
  lines.push(
    ...runtimeLines(),
    ...fusedLines(),
    ...contextLines(),
    ...expressionLines(),
    ...componentLines(),
    ...contentLines(),
    ...pdqLines(),
    ...capacityLines(),
    ...actionLines(),
    ...intakeLines(),
    ...eventLines(),
    ...loadLines(),
    ...queueLines(),
    ...auditLines(),
    ...sweepLines(),
    ...backupLines(),
    ...metricsLines(),
    ...repairLines(),
    ...backtestLines(),
    ...tdbLines(),
    ...treportLines(),
    ...searchLines(),
    ...bulkLines(),
    ...startLines(),
    ...scaleLines(),
  );
  if (results.elapsedS !== undefined) lines.push(`elapsed:          ${results.elapsedS} s (budget ${OVERALL_BUDGET_MS / 1000} s)`);
  if (results.error) lines.push(`bench failed: ${results.error}`);
  for (const line of lines) process.stdout.write(`${line}\n`);
}

async function main() {
  results.cores = cpus().length;
  results.loadAverageAtStart = round(loadavg()[0]);
  results.devServer = DEV_SERVER;
  results.inspector = true;
  results.wranglerVersion = JSON.parse(readFileSync(join(wranglerDir, "package.json"), "utf8")).version; // and so its miniflare and workerd
  const config = checkBenchConfig();
  const deliveries = config.queues?.consumers?.find((consumer) => consumer.queue.endsWith("-deliveries"));
  if (deliveries) results.deliveriesConsumer = { max_batch_size: deliveries.max_batch_size, max_batch_timeout: deliveries.max_batch_timeout };
  log("building the kernel");
  const build = spawnSync(process.execPath, [join(root, "scripts", "build-kernel.mjs")], { cwd: root, stdio: "inherit" });
  if (build.status !== 0) throw new Error("build-kernel failed");
  stateDir = await mkdtemp(join(tmpdir(), "safest-bench-"));
  const adminToken = `bench-${randomBytes(24).toString("hex")}`;
  const base = await startServer(stateDir, adminToken);
  cron = startLocalCron({ baseUrl: base, log: (message) => log(`schedule: ${message}`) });
  const first = await cron.tick(); // the schedule reaches the bench Worker as it does under npm start
  if (!first.ok) throw new Error(`the scheduled handler did not run: ${first.status} ${first.outcome}`);
  const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(",").map((name) => name.trim())) : null;
  const runs = (name) => only === null || only.has(name);
  if (only) results.benchOnly = [...only];
  const api = client(base);
  const installation = await api("/api/v1/installations", { body: { name: "bench" }, key: adminToken });
  const { apiKey } = installation;
  if (runs("runtime")) await sectionPerStep(api, adminToken, apiKey);
  if (runs("runtime")) await sectionGrowth(api, apiKey);
  if (runs("fused")) await sectionFused(api, adminToken, apiKey);
  if (runs("context")) await sectionContext(api, adminToken, apiKey);
  if (runs("expressions")) await sectionExpressions(api, adminToken);
  if (runs("components")) await sectionComponents(api, adminToken, apiKey, installation.id);
  if (runs("actions")) await sectionActions(api, adminToken, apiKey);
  if (runs("content")) await sectionContent(api, adminToken, apiKey);
  // Before the sections that seed 100,000s of rows: the D1 file it copies and VACUUMs stays small.
  if (runs("capacity")) await sectionCapacity(api, base, adminToken);
  const timed = timedClient(base);
  // Case management in an installation of its own (its initial key holds every scope).
  const cases = await api("/api/v1/installations", { body: { name: "bench-cases" }, key: adminToken });
  const casesKey = cases.apiKey;
  const trivial = await publish(
    api,
    casesKey,
    {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    },
    "bench-trivial",
  );
  if (runs("intake")) await sectionIntake(api, timed, adminToken, casesKey, cases.id, trivial.id);
  if (runs("events")) await sectionEvents(api, timed, adminToken);
  if (runs("load")) await sectionLoad(api, timed, adminToken, base);
  if (runs("queue")) await sectionQueueListing(api, timed, adminToken, casesKey, cases.id, trivial.id);
  if (runs("audit")) await sectionAuditVerify(api, timed, adminToken);
  if (runs("sweeps")) await sectionSweeps(api, base, adminToken, trivial.id);
  if (runs("backup")) await sectionBackup(api, timed, adminToken);
  if (runs("metrics")) await sectionMetrics(api, timed, adminToken);
  if (runs("repair")) await sectionRepair(api, apiKey);
  if (runs("backtests")) await sectionBacktests(api, timed, adminToken);
  if (runs("tdb")) await sectionTdb(api, adminToken);
  if (runs("treport")) await sectionTransparencyReport(api, timed, adminToken);
  if (runs("bulk")) await sectionBulk(api, adminToken);
  if (runs("search")) await sectionSearch(api, timed, adminToken);
  if (runs("start")) await sectionStart();
  if (runs("pdq")) await sectionPdq(api, base, adminToken);
  // Last, and only when asked for by name: it fills the D1 file to ~2 GB (minutes on 2 cores) and
  // restarts the dev server on it, so nothing may run after it on the small database.
  if (only?.has("scale")) await sectionScale(api, base, adminToken, (between) => restartServer(adminToken, between));
  results.elapsedS = round((Date.now() - startedAt) / 1000, 1);
}

let exitCode = 0;
const watchdog = setTimeout(() => {
  log("overall time limit reached; stopping");
  cleanup().finally(() => process.exit(2));
}, OVERALL_BUDGET_MS + 10_000);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => {
    log(`${signal}: stopping`);
    cleanup().finally(() => process.exit(130));
  });
}
try {
  await main();
} catch (error) {
  exitCode = 1;
  results.error = error instanceof Error ? error.message.split("\n")[0] : String(error);
  log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  if (logFile) log(`dev server log tail:\n${logTail()}`);
} finally {
  await cleanup().catch((error) => log(`cleanup: ${error}`));
  clearTimeout(watchdog);
}
// The console's figures (the review page's JavaScript size and time to interactive) come from
// its own harness in headless Chromium; they join the same final JSON line.
if (exitCode === 0 && process.env.BENCH_SKIP_CONSOLE !== "1") {
  log("console: review page JavaScript and time to interactive (bench/console-bench.mjs)");
  const consoleRun = spawnSync(process.execPath, [join(root, "bench", "console-bench.mjs")], { cwd: root, encoding: "utf8", timeout: 240_000, stdio: ["ignore", "pipe", "inherit"] });
  const last = (consoleRun.stdout ?? "").trim().split("\n").at(-1) ?? "";
  try {
    const figures = JSON.parse(last);
    results.console = figures;
    process.stdout.write(`${(consoleRun.stdout ?? "").trim().split("\n").slice(0, -1).join("\n")}\n`);
  } catch {
    results.console = { error: `console bench exited ${consoleRun.status ?? consoleRun.signal}` };
  }
}
report();
process.stdout.write(`${JSON.stringify(results)}\n`);
process.exitCode = exitCode;
