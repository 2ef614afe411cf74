// npm run bench — a benchmark, not a test: it prints figures and ratios measured side by side, in
// one run, on one machine. It starts the bench Worker (bench/wrangler.jsonc: the production Worker
// plus a bare Cloudflare Workflow) under `wrangler dev` on a free loopback port with a throwaway
// state folder, drives it over HTTP, and always stops wrangler's process group and deletes the
// folder. Human-readable lines first; the LAST line of stdout is one JSON object with every figure.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const require = createRequire(import.meta.url);
const wranglerBin = join(require.resolve("wrangler/package.json").replace(/package\.json$/u, ""), "bin", "wrangler.js");
const benchConfig = join(root, "bench", "wrangler.jsonc");
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
const TARGETS = { runtimeOverBare: 2.0, node200OverNode10: 1.5 };

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

function runWrangler(args, dir) {
  const result = spawnSync(process.execPath, [wranglerBin, ...args], {
    cwd: root, env: wranglerEnv(dir), encoding: "utf8", timeout: Math.min(120_000, remaining()),
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
  runWrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", persist, "-c", benchConfig], dir);
  const port = await freePort();
  const inspectorPort = await freePort();
  logFile = join(dir, "wrangler-dev.log");
  const out = openSync(logFile, "a");
  log(`starting wrangler dev on 127.0.0.1:${port}`);
  wrangler = spawn(process.execPath, [
    wranglerBin, "dev", "-c", benchConfig, "--ip", "127.0.0.1", "--port", String(port),
    "--inspector-ip", "127.0.0.1", "--inspector-port", String(inspectorPort),
    "--persist-to", persist, "--env-file", envFile, "--show-interactive-dev-session=false", "--live-reload=false",
  ], { cwd: root, env: wranglerEnv(dir), detached: true, stdio: ["ignore", out, out] });
  closeSync(out);
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

function report() {
  const verdict = (value, target) => (value === null || value === undefined ? "n/a" : value <= target ? "OK" : "MISS");
  const lines = [];
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
  if (results.error) lines.push(`bench failed: ${results.error}`);
  for (const line of lines) process.stdout.write(`${line}\n`);
}

// ---------------------------------------------------------------------------------------------

async function main() {
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
