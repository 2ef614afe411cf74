// npm run bench — a benchmark, not a test: it prints figures and ratios measured side by side, in
// one run, on one machine. It starts the bench Worker (bench/wrangler.jsonc: the production Worker
// plus a bare Cloudflare Workflow) under `wrangler dev` on a free loopback port, from a snapshot of
// the sources in a throwaway folder that also holds its state, drives it over HTTP, and always
// stops wrangler's process group and deletes the folder. Human-readable lines first; the LAST line of stdout is one JSON object with every figure.
// Sections: per-step cost (platform runtime vs bare Workflow), per-node growth over a long run,
// report intake throughput (sealed personal data, a non-matching trigger), and review-queue listing
// latency with 100,000 open tasks in one queue, with the listing query's plan.
import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const require = createRequire(import.meta.url);
const wranglerBin = join(require.resolve("wrangler/package.json").replace(/package\.json$/u, ""), "bin", "wrangler.js");
const benchConfig = join(root, "bench", "wrangler.jsonc");
const hoistedModules = dirname(dirname(require.resolve("wrangler/package.json"))); // the workspace's node_modules
const productionConfig = join(root, "wrangler.jsonc");

const OVERALL_BUDGET_MS = 285_000;
const startedAt = Date.now();
const deadline = startedAt + OVERALL_BUDGET_MS;

/** Sizes of the experiments (small enough to finish well inside the time budget). */
const LINEAR_STEPS = 50;
const REPEATS = 7;
const LONG_NODES = 210;
const LONG_REPEATS = 3;
const WINDOWS = { early: [6, 15], late: [196, 205] };
const INTAKE_WARMUP = 100;
const INTAKE_REPORTS = 2_000;
const INTAKE_CONCURRENCY = 16;
const INTAKE_SERIAL = 200; // profile: reports sent one at a time
const INTAKE_PROFILE_ROUNDS = 200; // profile: each part of intake, in the Worker, without HTTP
const HTTP_FLOOR_REQUESTS = 1_000; // profile: GET / (no D1, no auth) at INTAKE_CONCURRENCY
const D1_ROUND_TRIPS = 2_000; // profile: sequential SELECT 1 through the D1 binding
const QUEUE_TASKS = 100_000;
const QUEUE_SEED_CHUNK = 25_000;
const LIST_LIMIT = 50;
const LIST_FIRST_PAGE_SAMPLES = 50;
const LIST_WALK_PAGES = 200;
const LIST_DEEP_OFFSETS = [10_000, 25_000, 50_000, 75_000, 90_000, 99_000, 99_900];
const LIST_DEEP_SAMPLES = 10;
const LISTING_INDEX = "human_tasks_queue_listing";
const TARGETS = { runtimeOverBare: 2.0, node200OverNode10: 1.5, intakeReportsPerSecond: 300, queueListP95Ms: 20 };

/** Every figure goes in here; sections add keys. Printed as the last line. */
const results = { targets: TARGETS };

const log = (message) => process.stderr.write(`[bench ${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (value, digits = 2) => (value === null || !Number.isFinite(value) ? null : Number(value.toFixed(digits)));

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Nearest-rank percentile (the definition src/cases/queues.ts uses). */
function percentile(values, fraction) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))];
}

function mean(values) {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

function remaining() {
  const left = deadline - Date.now();
  if (left <= 0) throw new Error("bench time budget exhausted");
  return left;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
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
  const normalize = (key, value) => {
    if (key === "d1_databases") return value.map(({ migrations_dir: _dir, ...rest }) => rest);
    if (key === "workflows") return value.filter((entry) => entry.binding !== "BENCH_WORKFLOW").map(({ name: _name, ...rest }) => rest);
    return value;
  };
  const differences = [];
  for (const key of new Set([...Object.keys(production), ...Object.keys(bench)])) {
    if (ignored.has(key)) continue;
    if (JSON.stringify(normalize(key, production[key])) !== JSON.stringify(normalize(key, bench[key]))) differences.push(key);
  }
  if (differences.length > 0) throw new Error(`bench/wrangler.jsonc differs from wrangler.jsonc in: ${differences.join(", ")} (update the bench config)`);
}

// ---------------------------------------------------------------------------------------------
// wrangler dev lifecycle

let wrangler = null;
let wranglerPort = null;
let stateDir = null;
let logFile = null;

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
 * folder; node_modules linked, not copied): wrangler dev watches what it bundled, so an edit made
 * in the repository while the bench runs neither reloads the Worker mid-request nor mixes versions.
 */
async function snapshotSources(dir) {
  const app = join(dir, "snapshot", "template");
  await mkdir(app, { recursive: true });
  for (const entry of ["src", "bench", "migrations", "package.json", "tsconfig.json"]) await cp(join(root, entry), join(app, entry), { recursive: true });
  await symlink(hoistedModules, join(dir, "snapshot", "node_modules"), "dir");
  await symlink(join(root, "node_modules"), join(app, "node_modules"), "dir").catch(() => {});
  return app;
}

let appDir = null; // the snapshot wrangler runs from

function runWrangler(args, dir) {
  const result = spawnSync(process.execPath, [wranglerBin, ...args], {
    cwd: appDir, env: wranglerEnv(dir), encoding: "utf8", timeout: Math.min(120_000, remaining()),
  });
  if (result.status !== 0) throw new Error(`wrangler ${args.slice(0, 3).join(" ")} failed (${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

function logTail(lines = 40) {
  try {
    return readFileSync(logFile, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no wrangler log)";
  }
}

async function stopWrangler() {
  const child = wrangler;
  wrangler = null;
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
  await stopWrangler();
  if (stateDir) {
    const dir = stateDir;
    stateDir = null;
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

async function startWrangler(dir, adminToken) {
  const envFile = join(dir, "bench.env");
  // Secrets the Worker reads (see .dev.vars.example), in a 0600 file rather than on a command line.
  const reportMasterKey = randomBytes(32).toString("hex");
  await writeFile(envFile, `ADMIN_TOKEN=${adminToken}\nREPORT_MASTER_KEY=${reportMasterKey}\n`, { mode: 0o600 });
  const persist = join(dir, "state");
  log("applying migrations");
  appDir = await snapshotSources(dir);
  const config = join(appDir, "bench", "wrangler.jsonc");
  runWrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", persist, "-c", config], dir);
  const port = await freePort();
  const inspectorPort = await freePort();
  logFile = join(dir, "wrangler-dev.log");
  const out = openSync(logFile, "a");
  log(`starting wrangler dev on 127.0.0.1:${port}`);
  wrangler = spawn(process.execPath, [
    wranglerBin, "dev", "-c", config, "--ip", "127.0.0.1", "--port", String(port),
    "--inspector-ip", "127.0.0.1", "--inspector-port", String(inspectorPort),
    "--persist-to", persist, "--env-file", envFile, "--show-interactive-dev-session=false", "--live-reload=false",
  ], { cwd: appDir, env: wranglerEnv(dir), detached: true, stdio: ["ignore", out, out] });
  closeSync(out);
  wranglerPort = port;
  const base = `http://127.0.0.1:${port}`;
  const ready = Math.min(Date.now() + 120_000, deadline);
  for (;;) {
    if (wrangler.exitCode !== null || wrangler.signalCode !== null) throw new Error(`wrangler dev exited early:\n${logTail()}`);
    try {
      const response = await fetch(`${base}/`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return base;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > ready) throw new Error(`wrangler dev not ready in time:\n${logTail()}`);
    await sleep(250);
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers (loopback only)

function client(base) {
  return async function api(path, { method, body, key } = {}) {
    const response = await fetch(`${base}${path}`, {
      method: method ?? (body === undefined ? "GET" : "POST"),
      headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(Math.min(60_000, remaining())),
    });
    const text = await response.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { raw: text.slice(0, 500) };
    }
    if (!response.ok) throw new Error(`${method ?? (body === undefined ? "GET" : "POST")} ${path} → ${response.status}: ${JSON.stringify(parsed).slice(0, 1000)}`);
    return parsed;
  };
}

/**
 * One request with its timings: `serverMs` from the bench Worker's `Server-Timing: app;dur=` (the
 * platform handler, request arrival → its Response) and `clientMs`, the loopback round trip.
 */
function timedClient(base) {
  return async function timed(path, { method, body, key, headers } = {}) {
    const began = performance.now();
    const response = await fetch(`${base}${path}`, {
      method: method ?? (body === undefined ? "GET" : "POST"),
      headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(Math.min(60_000, remaining())),
    });
    const text = await response.text();
    const clientMs = performance.now() - began;
    const serverMs = Number(/(?:^|,)\s*app;dur=([\d.]+)/u.exec(response.headers.get("server-timing") ?? "")?.[1] ?? Number.NaN);
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { raw: text.slice(0, 500) };
    }
    if (!response.ok) throw new Error(`${method ?? (body === undefined ? "GET" : "POST")} ${path} → ${response.status}: ${JSON.stringify(parsed).slice(0, 1000)}`);
    if (!Number.isFinite(serverMs)) throw new Error(`${path}: no Server-Timing app;dur from the bench Worker`);
    return { status: response.status, body: parsed, serverMs, clientMs };
  };
}

/** Runs task(0 … count − 1) with at most `concurrency` in flight; resolves when all have. */
async function pool(count, concurrency, task) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

async function poll(what, check, { intervalMs = 300, timeoutMs = 120_000 } = {}) {
  const until = Math.min(Date.now() + timeoutMs, deadline);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`${what}: timed out`);
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------------
// Graphs

const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

/** start → n1 … nN → end; each condition reads the previous node's output (n1 reads the input). */
function linearConditionGraph(count) {
  const nodes = [{ id: "start", kind: "start" }];
  const edges = [edge("start", "success", "n1")];
  for (let index = 1; index <= count; index++) {
    const when = index === 1 ? "input.x == 1" : `steps["n${index - 1}"].port == "next"`;
    nodes.push({ id: `n${index}`, kind: "condition", config: { cases: [{ port: "next", when }], case_ports: ["next"], default_port: "other" } });
    const next = index === count ? "end" : `n${index + 1}`;
    edges.push(edge(`n${index}`, "next", next), edge(`n${index}`, "other", next));
  }
  nodes.push({ id: "end", kind: "end", config: { terminal_code: "done" } });
  return { schemaVersion: 1, nodes, edges };
}

async function publish(api, key, graph, name) {
  const workflow = await api("/api/v1/workflows", { body: { name }, key });
  return api(`/api/v1/workflows/${workflow.id}/versions`, { body: { graph }, key });
}

// ---------------------------------------------------------------------------------------------
// Measurements

/** One bare workflow instance: N step.do, one D1 write each; times are the workflow's own. */
async function bareRun(api, adminToken, steps) {
  const { id } = await api("/bench/bare", { body: { steps }, key: adminToken });
  const status = await poll(`bare instance ${id}`, async () => {
    const current = await api(`/bench/bare/${id}`, { key: adminToken });
    if (current.status === "complete") return current;
    if (["errored", "terminated"].includes(current.status)) throw new Error(`bare instance ${id} ${current.status}: ${JSON.stringify(current.error)}`);
    return undefined;
  });
  const { startedAt: start, finishedAt: finish } = status.output;
  return { spanMs: finish - start, perStepMs: (finish - start) / steps };
}

/** One platform run; resolves with the finished run detail (state, steps, times). */
async function platformRun(api, key, versionId) {
  const created = await api("/api/v1/runs", { body: { workflowVersionId: versionId, authorityMode: "autonomous", input: { x: 1 } }, key });
  return poll(`run ${created.id}`, async () => {
    const run = await api(`/api/v1/runs/${created.id}`, { key });
    if (run.state === "succeeded") return run;
    if (["failed", "repair_required", "terminated"].includes(run.state)) throw new Error(`run ${created.id} ${run.state}: ${JSON.stringify(run.error)}`);
    return undefined;
  });
}

/**
 * run.startedAt is stamped when the start node is recorded and run.finishedAt when the end node
 * is, so the span holds N + 1 node-to-node intervals (start→n1 … nN→end) for N conditions.
 */
function runtimePerStep(run, conditions) {
  const spanMs = Date.parse(run.finishedAt) - Date.parse(run.startedAt);
  return { spanMs, perStepMs: spanMs / (conditions + 1) };
}

async function sectionPerStep(api, adminToken, key) {
  log(`per-step: publishing a ${LINEAR_STEPS}-condition linear graph`);
  const version = await publish(api, key, linearConditionGraph(LINEAR_STEPS), `bench-linear-${LINEAR_STEPS}`);
  log("per-step: warm-up (not counted)");
  await bareRun(api, adminToken, 5);
  await platformRun(api, key, version.id);
  const bare = [];
  const runtime = [];
  for (let round_ = 1; round_ <= REPEATS; round_++) {
    const b = await bareRun(api, adminToken, LINEAR_STEPS);
    bare.push(b.perStepMs);
    const run = await platformRun(api, key, version.id);
    if (run.steps.length !== LINEAR_STEPS + 2) throw new Error(`run ${run.id} recorded ${run.steps.length} steps, expected ${LINEAR_STEPS + 2}`);
    const r = runtimePerStep(run, LINEAR_STEPS);
    runtime.push(r.perStepMs);
    log(`per-step round ${round_}/${REPEATS}: bare ${b.perStepMs.toFixed(2)} ms/step (${b.spanMs} ms), runtime ${r.perStepMs.toFixed(2)} ms/step (${r.spanMs} ms)`);
  }
  const bareStepMs = median(bare);
  const runtimeStepMs = median(runtime);
  // Rounds are interleaved, so the per-round ratio cancels slow phases of a noisy machine.
  const pairedRatio = median(runtime.map((value, index) => value / bare[index]));
  Object.assign(results, {
    steps: LINEAR_STEPS,
    repeats: REPEATS,
    bareStepMs: round(bareStepMs),
    runtimeStepMs: round(runtimeStepMs),
    runtimeOverBare: round(runtimeStepMs / bareStepMs, 3),
    runtimeOverBarePaired: round(pairedRatio, 3),
    bareStepMsSamples: bare.map((value) => round(value)),
    runtimeStepMsSamples: runtime.map((value) => round(value)),
  });
}

async function sectionGrowth(api, key) {
  log(`growth: publishing a ${LONG_NODES}-condition linear graph`);
  const version = await publish(api, key, linearConditionGraph(LONG_NODES), `bench-long-${LONG_NODES}`);
  const early = [];
  const late = [];
  const whole = [];
  for (let round_ = 1; round_ <= LONG_REPEATS; round_++) {
    const run = await platformRun(api, key, version.id);
    const finished = new Map(run.steps.map((step) => [step.nodeId, Date.parse(step.finishedAt)]));
    const at = (index) => finished.get(index === 0 ? "start" : `n${index}`);
    // cost(node k) = finishedAt[k] − finishedAt[k − 1]; a window's figure is the mean cost in it.
    const windowMean = ([from, to]) => {
      const costs = [];
      for (let index = from; index <= to; index++) costs.push(at(index) - at(index - 1));
      if (costs.some((value) => !Number.isFinite(value))) throw new Error(`run ${run.id} lacks finishedAt for nodes ${from}-${to}`);
      return mean(costs);
    };
    early.push(windowMean(WINDOWS.early));
    late.push(windowMean(WINDOWS.late));
    whole.push((Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / (LONG_NODES + 1));
    log(`growth round ${round_}/${LONG_REPEATS}: nodes ${WINDOWS.early.join("-")} ${early.at(-1).toFixed(2)} ms, nodes ${WINDOWS.late.join("-")} ${late.at(-1).toFixed(2)} ms, whole run ${whole.at(-1).toFixed(2)} ms/node`);
  }
  const node10Ms = median(early);
  const node200Ms = median(late);
  Object.assign(results, {
    longNodes: LONG_NODES,
    longRepeats: LONG_REPEATS,
    node10Ms: round(node10Ms),
    node200Ms: round(node200Ms),
    node200OverNode10: round(node200Ms / node10Ms, 3),
    longRunStepMs: round(median(whole)),
    node10MsSamples: early.map((value) => round(value)),
    node200MsSamples: late.map((value) => round(value)),
  });
}

// ---------------------------------------------------------------------------------------------
// CPU time by process (Linux /proc; elsewhere the figures are null)

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

function readProc(path) {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/** CPU ms so far of wrangler's process tree by role, of this process, and of the whole machine. */
function cpuSnapshot(port) {
  const snapshot = { roles: {}, machineBusyMs: null, machineTotalMs: null, benchClientMs: null };
  const usage = process.cpuUsage();
  snapshot.benchClientMs = (usage.user + usage.system) / 1000;
  const stat = readProc("/proc/stat")?.split("\n")[0]?.trim().split(/\s+/u).slice(1).map(Number);
  if (stat) {
    const [user, nice, system, idle, iowait, irq, softirq, steal] = stat;
    snapshot.machineBusyMs = ((user + nice + system + irq + softirq + steal) * 1000) / CLOCK_TICKS;
    snapshot.machineTotalMs = ((user + nice + system + idle + iowait + irq + softirq + steal) * 1000) / CLOCK_TICKS;
  }
  if (!wrangler || !stat) return snapshot;
  let pids;
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/u.test(name));
  } catch {
    return snapshot;
  }
  const processes = new Map();
  for (const pid of pids) {
    const text = readProc(`/proc/${pid}/stat`);
    if (!text) continue;
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    processes.set(Number(pid), { ppid: Number(fields[1]), cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS });
  }
  const tree = new Set([wrangler.pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, info] of processes) if (!tree.has(pid) && tree.has(info.ppid)) (tree.add(pid), (grew = true));
  }
  for (const pid of tree) {
    const info = processes.get(pid);
    if (!info) continue;
    const command = (readProc(`/proc/${pid}/cmdline`) ?? "").split("\0").join(" ");
    const role = /workerd/u.test(command)
      ? (command.includes(`entry=127.0.0.1:${port} `) ? "workerd (wrangler proxy)" : "workerd (worker, D1)")
      : /esbuild/u.test(command) ? "esbuild (wrangler)" : "node (wrangler)";
    snapshot.roles[role] = (snapshot.roles[role] ?? 0) + info.cpuMs;
  }
  return snapshot;
}

/** CPU ms per unit of work between two snapshots, by role, with the machine's busy share. */
function cpuPerUnit(before, after, units) {
  const perUnit = {};
  let ours = after.benchClientMs - before.benchClientMs;
  perUnit["node (bench client)"] = round(ours / units);
  for (const [role, ms] of Object.entries(after.roles)) {
    const spent = ms - (before.roles[role] ?? 0);
    ours += spent;
    perUnit[role] = round(spent / units);
  }
  if (after.machineBusyMs === null) return { perUnit, otherMs: null, otherPercent: null, machineBusyPercent: null };
  const busy = after.machineBusyMs - before.machineBusyMs;
  const total = after.machineTotalMs - before.machineTotalMs;
  const other = Math.max(0, busy - ours); // other processes on the machine in the meantime
  return {
    perUnit,
    otherMs: round(other / units),
    otherPercent: round((100 * other) / total, 1), // of all the machine's cores
    machineBusyPercent: round((100 * busy) / total, 1),
  };
}

// ---------------------------------------------------------------------------------------------
// Report intake throughput

const INTAKE_CATEGORIES = ["scams_and_fraud", "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH", "app.bsky.moderation.defs#reasonSpam", "cyber_violence", "protection_of_minors"];

/**
 * A report as a product sends it: reporter id and contact, a free-text description, the subject's
 * URL, owner and snapshot, and evidence. Everything personal is sealed by the platform. One in four
 * reports is about a subject already reported (its case gains a report).
 */
function reportBody(tag, index) {
  const subject = index % 4 === 3 ? index - 3 : index;
  return {
    subject: {
      kind: index % 5 === 4 ? "account" : "content",
      id: `${tag}-subject-${subject}`,
      url: `https://social.example/@seller${subject % 97}/posts/${100_000 + subject}`,
      ownerId: `acct-${subject % 97}`,
      snapshot: {
        text: `Limited offer!!! Double your crypto in 24h, DM me or visit https://scam.example/${subject} — only ${subject % 50 + 3} spots left. `.repeat(3),
        media: [{ kind: "image", url: `https://cdn.social.example/media/${subject}.jpg`, alt: "screenshot of a wallet balance" }],
        postedAt: "2026-04-30T08:15:00.000Z",
        language: "en",
      },
    },
    category: INTAKE_CATEGORIES[index % INTAKE_CATEGORIES.length],
    source: index % 10 === 0 ? "trusted_flagger" : "notice",
    reporter: { id: `user-${4_000 + (index % 1_000)}`, contact: `reporter.${index % 1_000}@example.org` },
    description: `This account keeps sending me links to a fake investment site. I lost money after following the instructions; `
      + `the same text is posted under several names. Report ${index}: please remove it before more people fall for it. `.repeat(2),
    evidence: [
      { kind: "screenshot", url: `https://uploads.example.org/evidence/${index}.png`, sha256: createHash("sha256").update(`evidence-${index}`).digest("hex") },
      { kind: "text", text: `Message received on 2026-04-29: "send 0.1 BTC to bc1q${index.toString(16).padStart(8, "0")} and get 0.2 back"` },
    ],
  };
}

async function sectionIntake(api, timed, adminToken, key, installationId, versionId) {
  log("intake: queue, a trigger that never matches, a reports:write key");
  await api("/api/v1/queues", { body: { name: "bench-intake", slaSeconds: 3_600, priority: 5 }, key });
  // Evaluated for every report (CEL over the report summary) but never true for these bodies.
  const when = "report.category == 'self_harm' && report.evidenceCount > 40";
  await api("/api/v1/triggers", { body: { event: "report.created", when, workflowVersionId: versionId, authorityMode: "autonomous" }, key });
  const { apiKey: intakeKey } = await api("/api/v1/api-keys", { body: { name: "bench-intake", scopes: ["reports:write"] }, key });
  const tag = randomBytes(4).toString("hex");
  let sent = 0;
  const post = async () => {
    const index = sent++;
    const result = await timed("/api/v1/reports", { body: reportBody(tag, index), key: intakeKey, headers: { "idempotency-key": `bench-${tag}-${index}` } });
    if (result.status !== 201) throw new Error(`report ${index}: status ${result.status} (expected 201, a new report)`);
    if (!Array.isArray(result.body.runs) || result.body.runs.length !== 0) throw new Error(`report ${index}: the trigger reported ${JSON.stringify(result.body.runs)}`);
    return result;
  };
  log(`intake: warm-up, ${INTAKE_WARMUP} reports (not counted)`);
  await pool(INTAKE_WARMUP, INTAKE_CONCURRENCY, post);
  log(`intake: ${INTAKE_REPORTS} reports, ${INTAKE_CONCURRENCY} in flight`);
  const server = [];
  const clientSide = [];
  let sample = null;
  const cpuBefore = cpuSnapshot(wranglerPort);
  const began = performance.now();
  await pool(INTAKE_REPORTS, INTAKE_CONCURRENCY, async () => {
    const result = await post();
    server.push(result.serverMs);
    clientSide.push(result.clientMs);
    sample ??= result.body;
  });
  const wallS = (performance.now() - began) / 1000;
  const cpu = cpuPerUnit(cpuBefore, cpuSnapshot(wranglerPort), INTAKE_REPORTS);
  // The sealed personal data opens again for a reviewer (the installation key has `review`).
  const read = await api(`/api/v1/reports/${sample.id}`, { key });
  if (!String(read.description ?? "").includes("fake investment site")) throw new Error(`report ${sample.id}: personal data did not round-trip`);
  Object.assign(results, {
    intakeReports: INTAKE_REPORTS,
    intakeConcurrency: INTAKE_CONCURRENCY,
    intakeRequestBytes: Buffer.byteLength(JSON.stringify(reportBody(tag, 1))),
    intakeWallS: round(wallS, 3),
    intakeReportsPerSecond: round(INTAKE_REPORTS / wallS, 1),
    intakeServerMsP50: percentile(server, 0.5),
    intakeServerMsP95: percentile(server, 0.95),
    intakeServerMsMean: round(mean(server)),
    intakeClientMsP50: round(percentile(clientSide, 0.5)),
    intakeClientMsP95: round(percentile(clientSide, 0.95)),
    intakeCpuMsPerReport: cpu.perUnit,
    intakeOtherProcessesCpuMsPerReport: cpu.otherMs,
    intakeOtherProcessesPercent: cpu.otherPercent,
    intakeMachineBusyPercent: cpu.machineBusyPercent,
  });
  log(`intake: ${results.intakeReportsPerSecond} reports/s (${INTAKE_REPORTS} in ${results.intakeWallS} s), server p50 ${results.intakeServerMsP50} ms, p95 ${results.intakeServerMsP95} ms`);

  // Where the time goes. (1) One report at a time: latency without queueing.
  log(`intake profile: ${INTAKE_SERIAL} reports one at a time`);
  const serial = [];
  for (let index = 0; index < INTAKE_SERIAL; index++) serial.push(await post());
  // (2) The local HTTP path alone: GET / (no auth, no D1) with as many in flight.
  log(`intake profile: ${HTTP_FLOOR_REQUESTS} × GET /, ${INTAKE_CONCURRENCY} in flight`);
  const floorBefore = cpuSnapshot(wranglerPort);
  const floorBegan = performance.now();
  await pool(HTTP_FLOOR_REQUESTS, INTAKE_CONCURRENCY, () => timed("/"));
  const floorS = (performance.now() - floorBegan) / 1000;
  const floorCpu = cpuPerUnit(floorBefore, cpuSnapshot(wranglerPort), HTTP_FLOOR_REQUESTS);
  // (3) Each part of intakeReport in the Worker, sequentially, without HTTP, auth or Hono.
  log(`intake profile: the parts of intake in the Worker, ${INTAKE_PROFILE_ROUNDS} rounds each`);
  const parts = await api("/bench/intake-profile", { body: { installationId, rounds: INTAKE_PROFILE_ROUNDS, tag, report: reportBody(tag, 1) }, key: adminToken });
  // (4) One D1 round trip, and the CPU it costs each process (wrangler dev's devtools relay included).
  log(`intake profile: ${D1_ROUND_TRIPS} D1 round trips`);
  const d1Before = cpuSnapshot(wranglerPort);
  const d1 = await api("/bench/d1-round-trips", { body: { count: D1_ROUND_TRIPS }, key: adminToken });
  const d1Cpu = cpuPerUnit(d1Before, cpuSnapshot(wranglerPort), D1_ROUND_TRIPS);
  Object.assign(results, {
    intakeSerialServerMsP50: latency(serial, "serverMs").p50,
    intakeSerialClientMsP50: latency(serial, "clientMs").p50,
    intakeSerialReportsPerSecond: round(1000 / mean(serial.map((sample_) => sample_.clientMs)), 1),
    httpFloorRequestsPerSecond: round(HTTP_FLOOR_REQUESTS / floorS, 1),
    httpFloorCpuMsPerRequest: floorCpu.perUnit,
    intakePartsMs: {
      d1RoundTrip: round(parts.d1PingMs, 3),
      parseAndValidateCpu: round(parts.validateCpuMs, 3),
      requestDigestCpu: round(parts.digestCpuMs, 3),
      aesGcmCpu: round(parts.aesCpuMs, 3),
      sealWithKeyLookup: round(parts.sealMs, 3),
      triggersQueryAndCel: round(parts.triggersMs, 3),
      intakeReportInWorker: round(parts.intakeMs, 3),
      // What is left once the seal and the triggers (each with their query) and intake's other two
      // reads (the Idempotency-Key lookup, the report row after the write), counted as one round
      // trip each, are taken out: mostly the five-statement write batch.
      writeBatchEstimate: round(parts.intakeMs - parts.sealMs - parts.triggersMs - 2 * parts.d1PingMs, 3),
    },
    intakeSealedPlaintextBytes: parts.plaintextBytes,
    d1RoundTripMs: round(d1.msPerRoundTrip, 3),
    d1RoundTripCpuMs: d1Cpu.perUnit,
  });
}

// ---------------------------------------------------------------------------------------------
// Queue listing with 100,000 open tasks

const normalizeSql = (text) => text.replace(/\s+/gu, " ").trim();

/** The cursor listQueueTasks hands out (encodeCursor in src/cases/tasks.ts). */
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

function latency(samples, key) {
  const values = samples.map((sample) => sample[key]);
  return { p50: round(percentile(values, 0.5)), p95: round(percentile(values, 0.95)), max: round(Math.max(...values)) };
}

async function sectionQueueListing(api, timed, adminToken, key, installationId, versionId) {
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
  const tasksSource = normalizeSql(readFileSync(join(appDir, "src", "cases", "tasks.ts"), "utf8")); // the sources running
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
  if (drift.length > 0) throw new Error(`bench/worker.ts's copy of the listing query differs from src/cases/tasks.ts (${drift.join(", ")}): update LISTING_COLUMNS / LISTING_TEMPLATE`);
  if (problems.length > 0) throw new Error(`queue listing plan: ${problems.join("; ")}\n${results.queueListPlan}`);

  const path = (cursor) => `/api/v1/queues/${queue.id}/tasks?limit=${LIST_LIMIT}${cursor ? `&cursor=${cursor}` : ""}`;
  const page = async (cursor) => {
    const result = await timed(path(cursor), { key });
    if (result.body.items.length !== LIST_LIMIT) throw new Error(`listing: ${result.body.items.length} items on a page, expected ${LIST_LIMIT}`);
    return result;
  };
  log("queue: warm-up (not counted)");
  for (let index = 0; index < 10; index++) await page(null);
  const cpuBefore = cpuSnapshot(wranglerPort);
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
  const cpu = cpuPerUnit(cpuBefore, cpuSnapshot(wranglerPort), first.length + walk.length);
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

const describeCpu = (perUnit) => Object.entries(perUnit ?? {}).map(([role, ms]) => `${role} ${ms}`).join(", ");

function report() {
  const verdict = (value, target) => (value === null || value === undefined ? "n/a" : value <= target ? "OK" : "MISS");
  const atLeast = (value, target) => (value === null || value === undefined ? "n/a" : value >= target ? "OK" : "MISS");
  const lines = [];
  if (results.cores !== undefined) lines.push(`machine:          ${results.cores} cores, 1-minute load average ${results.loadAverageAtStart} at the start (other processes compete with wrangler dev for the cores)`);
  if (results.runtimeOverBare !== undefined) lines.push(
    `bare workflow:    ${results.bareStepMs} ms/step  (median of ${results.repeats} instances × ${results.steps} step.do, one D1 write each, own clock, span / ${results.steps}; samples ${results.bareStepMsSamples?.join(", ")})`,
    `platform runtime: ${results.runtimeStepMs} ms/step  (median of ${results.repeats} runs, start → ${results.steps} conditions → end, run.finishedAt − run.startedAt over ${results.steps + 1} node intervals; samples ${results.runtimeStepMsSamples?.join(", ")})`,
    `runtime / bare:   ${results.runtimeOverBare}  (target ≤ ${TARGETS.runtimeOverBare}) ${verdict(results.runtimeOverBare, TARGETS.runtimeOverBare)}  (median of per-round ratios: ${results.runtimeOverBarePaired})`,
  );
  if (results.node200OverNode10 !== undefined) lines.push(
    `node ~10:         ${results.node10Ms} ms/node  (mean cost of nodes ${WINDOWS.early.join("-")} in a ${results.longNodes}-condition run; median of ${results.longRepeats} runs: ${results.node10MsSamples?.join(", ")})`,
    `node ~200:        ${results.node200Ms} ms/node  (mean cost of nodes ${WINDOWS.late.join("-")}, same runs: ${results.node200MsSamples?.join(", ")}; whole run ${results.longRunStepMs} ms/node)`,
    `node200 / node10: ${results.node200OverNode10}  (target ≤ ${TARGETS.node200OverNode10}) ${verdict(results.node200OverNode10, TARGETS.node200OverNode10)}`,
  );
  if (results.intakeReportsPerSecond !== undefined) lines.push(
    `report intake:    ${results.intakeReportsPerSecond} reports/s  (target ≥ ${TARGETS.intakeReportsPerSecond}) ${atLeast(results.intakeReportsPerSecond, TARGETS.intakeReportsPerSecond)}  (${results.intakeReports} reports of ${results.intakeRequestBytes} B, personal data sealed, one non-matching trigger, ${results.intakeConcurrency} in flight, ${results.intakeWallS} s)`,
    `intake latency:   server p50 ${results.intakeServerMsP50} ms, p95 ${results.intakeServerMsP95} ms (Server-Timing, under load); client round trip p50 ${results.intakeClientMsP50} ms, p95 ${results.intakeClientMsP95} ms`,
    `intake CPU:       ms per report by process: ${describeCpu(results.intakeCpuMsPerReport)}; other processes on the machine ${results.intakeOtherProcessesCpuMsPerReport} ms (${results.intakeOtherProcessesPercent}% of its ${cpus().length} cores); machine ${results.intakeMachineBusyPercent}% busy`,
  );
  if (results.intakePartsMs !== undefined) lines.push(
    `intake, serial:   ${results.intakeSerialReportsPerSecond} reports/s one at a time (server p50 ${results.intakeSerialServerMsP50} ms, client p50 ${results.intakeSerialClientMsP50} ms)`,
    `HTTP floor:       ${results.httpFloorRequestsPerSecond} requests/s for GET / (no auth, no D1), ${results.intakeConcurrency} in flight; CPU ms per request: ${describeCpu(results.httpFloorCpuMsPerRequest)}`,
    `intake parts:     ms per call in the Worker: ${Object.entries(results.intakePartsMs).map(([part, ms]) => `${part} ${ms}`).join(", ")} (sealed plaintext ${results.intakeSealedPlaintextBytes} B)`,
    `D1 round trip:    ${results.d1RoundTripMs} ms (SELECT 1 × ${D1_ROUND_TRIPS}, one after another); CPU ms per round trip: ${describeCpu(results.d1RoundTripCpuMs)}`,
  );
  if (results.queueListUsesIndex !== undefined) lines.push(
    `queue list plan:  ${results.queueListUsesIndex ? `uses ${LISTING_INDEX}, no temp b-tree` : "PROBLEM"}: ${results.queueListPlan.replace(/\n/gu, " | ")}${results.queueListPlanWithCursor !== results.queueListPlan ? ` (with a cursor: ${results.queueListPlanWithCursor.replace(/\n/gu, " | ")})` : ""}`,
  );
  if (results.queueListP95Ms !== undefined) lines.push(
    `queue listing:    server p95 ${results.queueListP95Ms} ms  (target ≤ ${TARGETS.queueListP95Ms}) ${verdict(results.queueListP95Ms, TARGETS.queueListP95Ms)}  (p50 ${results.queueListP50Ms} ms, max ${results.queueListMaxMs} ms; ${results.queueListRequests} requests of limit=${results.queueListLimit} on ${results.queueListTasks} open tasks: first page ×${LIST_FIRST_PAGE_SAMPLES} p50/p95 ${results.queueListFirstPageP50Ms}/${results.queueListFirstPageP95Ms} ms, ${results.queueListWalkPages}-page cursor walk p50/p95 ${results.queueListWalkP50Ms}/${results.queueListWalkP95Ms} ms; client round trip p50/p95 ${results.queueListClientP50Ms}/${results.queueListClientP95Ms} ms; other processes used ${results.queueListOtherProcessesPercent}% of the machine meanwhile)`,
    `deep cursors:     server p50 ${results.queueListDeepP50Ms} ms, p95 ${results.queueListDeepP95Ms} ms ${verdict(results.queueListDeepP95Ms, TARGETS.queueListP95Ms)}  (pages after task N; p50 by N: ${Object.entries(results.queueListDeepServerP50ByOffsetMs).map(([offset, ms]) => `${offset}: ${ms}`).join(", ")}; seeded in ${results.queueSeedS} s, foreign keys enforced: ${results.queueForeignKeysEnforced})`,
  );
  if (results.error) lines.push(`bench failed: ${results.error}`);
  for (const line of lines) process.stdout.write(`${line}\n`);
}

// ---------------------------------------------------------------------------------------------

async function main() {
  results.cores = cpus().length;
  results.loadAverageAtStart = round(loadavg()[0]);
  checkBenchConfig();
  log("building the kernel");
  const build = spawnSync(process.execPath, [join(root, "scripts", "build-kernel.mjs")], { cwd: root, stdio: "inherit" });
  if (build.status !== 0) throw new Error("build-kernel failed");
  stateDir = await mkdtemp(join(tmpdir(), "safest-bench-"));
  const adminToken = `bench-${randomBytes(24).toString("hex")}`;
  const base = await startWrangler(stateDir, adminToken);
  const api = client(base);
  const { apiKey } = await api("/api/v1/installations", { body: { name: "bench" }, key: adminToken });
  await sectionPerStep(api, adminToken, apiKey);
  await sectionGrowth(api, apiKey);
  const timed = timedClient(base);
  // Case management in an installation of its own (its initial key holds every scope).
  const cases = await api("/api/v1/installations", { body: { name: "bench-cases" }, key: adminToken });
  const casesKey = cases.apiKey;
  const trivial = await publish(api, casesKey, { schemaVersion: 1, nodes: [{ id: "start", kind: "start" }, { id: "done", kind: "end" }], edges: [edge("start", "success", "done")] }, "bench-trivial");
  await sectionIntake(api, timed, adminToken, casesKey, cases.id, trivial.id);
  await sectionQueueListing(api, timed, adminToken, casesKey, cases.id, trivial.id);
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
  log(`failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`);
  if (logFile) log(`wrangler log tail:\n${logTail()}`);
} finally {
  await cleanup().catch((error) => log(`cleanup: ${error}`));
  clearTimeout(watchdog);
}
report();
process.stdout.write(`${JSON.stringify(results)}\n`);
process.exitCode = exitCode;
