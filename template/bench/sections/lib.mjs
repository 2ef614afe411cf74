// Shared by scripts/bench.mjs and its sections: the one `results` object (every figure; printed
// as the last line of stdout), the clock and time budget, statistics, loopback HTTP clients,
// graphs, and CPU time by process of the dev server's process tree (Linux /proc).
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

// The sections end within 10 min; with the console section the whole run stays under 15. On a machine
// shared with other runs (applying the migrations alone can take minutes there) BENCH_BUDGET_S
// gives the run more time; it bounds the run, it is not measured.
const budgetS = Number(process.env.BENCH_BUDGET_S);
export const OVERALL_BUDGET_MS = (Number.isFinite(budgetS) && budgetS > 0 ? budgetS : 600) * 1000;
export const startedAt = Date.now();
export const deadline = startedAt + OVERALL_BUDGET_MS;

/** The targets each figure is judged by; a figure without one is reported without a verdict. */
export const TARGETS = { runtimeOverBare: 2.0, node200OverNode10: 1.5, intakeReportsPerSecond: 300, queueListP95Ms: 20, auditVerify100kOver10k: 1.5 };

/** Every figure goes in here; sections add keys. Printed as the last line. */
export const results = { targets: TARGETS };

/** The dev server the bench drives: its process (a group leader), HTTP port, the snapshot it runs, and its local state folder. */
export const server = { child: null, port: null, appDir: null, persistDir: null };

export const log = (message) => process.stderr.write(`[bench ${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${message}\n`);
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const round = (value, digits = 2) => (value === null || value === undefined || !Number.isFinite(value) ? null : Number(value.toFixed(digits)));

export function median(values) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Nearest-rank percentile (the definition src/cases/queues/queues.ts uses). */
export function percentile(values, fraction) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))];
}

export function mean(values) {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

export function remaining() {
  const left = deadline - Date.now();
  if (left <= 0) throw new Error("bench time budget exhausted");
  return left;
}

export const verdict = (value, target) => (value === null || value === undefined ? "n/a" : value <= target ? "OK" : "MISS");
export const atLeast = (value, target) => (value === null || value === undefined ? "n/a" : value >= target ? "OK" : "MISS");

// ---------------------------------------------------------------------------------------------
// HTTP helpers (loopback only)

export function client(base) {
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
export function timedClient(base) {
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
export async function pool(count, concurrency, task) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

export async function poll(what, check, { intervalMs = 300, timeoutMs = 120_000 } = {}) {
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

export const edge = (from, port, to) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

/** start → n1 … nN → end; each condition reads the previous node's output (n1 reads the input). */
export function linearConditionGraph(count) {
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

/** Publishes `graph` as a new workflow's version 1; `steps: "per_node"` keeps one engine step per node (no fused groups). */
export async function publish(api, key, graph, name, { steps } = {}) {
  const workflow = await api("/api/v1/workflows", { body: { name }, key });
  return api(`/api/v1/workflows/${workflow.id}/versions`, { body: { graph, ...(steps ? { steps } : {}) }, key });
}

/** Starts a platform run (autonomous unless told); resolves with its id. */
export async function startRun(api, key, versionId, { input = { x: 1 }, authorityMode = "autonomous" } = {}) {
  return (await api("/api/v1/runs", { body: { workflowVersionId: versionId, authorityMode, input }, key })).id;
}

/** Polls a run until it succeeded; resolves with the finished run detail (state, steps, times). */
export function finishedRun(api, key, runId, { intervalMs = 300 } = {}) {
  return poll(
    `run ${runId}`,
    async () => {
      const run = await api(`/api/v1/runs/${runId}`, { key });
      if (run.state === "succeeded") return run;
      if (["failed", "repair_required", "terminated"].includes(run.state)) throw new Error(`run ${runId} ${run.state}: ${JSON.stringify(run.error)}`);
      return undefined;
    },
    { intervalMs },
  );
}

/** One platform run; resolves with the finished run detail (state, steps, times). */
export async function platformRun(api, key, versionId, options = {}) {
  return finishedRun(api, key, await startRun(api, key, versionId, options), options);
}

/**
 * Mean per-node cost over windows of a linear run: cost(node k) = finishedAt[k] − finishedAt[k − 1],
 * node 0 being `start`; `id(k)` names node k. A window's figure is the mean cost in it.
 */
export function windowMean(run, [from, to], id = (index) => `n${index}`) {
  const finished = finishTimes(run);
  const at = (index) => finished.get(index === 0 ? "start" : id(index));
  const costs = [];
  for (let index = from; index <= to; index++) costs.push(at(index) - at(index - 1));
  if (costs.some((value) => !Number.isFinite(value))) throw new Error(`run ${run.id} lacks finishedAt for nodes ${from}-${to}`);
  return mean(costs);
}

/** Step finish times of a run by node id. */
export function finishTimes(run) {
  return new Map(run.steps.map((step) => [step.nodeId, Date.parse(step.finishedAt)]));
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

/** CPU ms so far of the dev server's process tree by role, of this process, and of the whole machine. */
export function cpuSnapshot(port = server.port) {
  const snapshot = { at: performance.now(), roles: {}, threads: new Map(), machineBusyMs: null, machineTotalMs: null, benchClientMs: null };
  const usage = process.cpuUsage();
  snapshot.benchClientMs = (usage.user + usage.system) / 1000;
  const stat = readProc("/proc/stat")?.split("\n")[0]?.trim().split(/\s+/u).slice(1).map(Number);
  if (stat) {
    const [user, nice, system, idle, iowait, irq, softirq, steal] = stat;
    snapshot.machineBusyMs = ((user + nice + system + irq + softirq + steal) * 1000) / CLOCK_TICKS;
    snapshot.machineTotalMs = ((user + nice + system + idle + iowait + irq + softirq + steal) * 1000) / CLOCK_TICKS;
  }
  if (!server.child || !stat) return snapshot;
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
  const tree = new Set([server.child.pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, info] of processes)
      if (!tree.has(pid) && tree.has(info.ppid)) {
        tree.add(pid);
        grew = true;
      }
  }
  for (const pid of tree) {
    const info = processes.get(pid);
    if (!info) continue;
    const command = (readProc(`/proc/${pid}/cmdline`) ?? "").split("\0").join(" ");
    const role = /workerd/u.test(command) ? (command.includes(`entry=127.0.0.1:${port} `) ? "workerd (wrangler proxy)" : "workerd (worker, D1)") : /esbuild/u.test(command) ? "esbuild (wrangler)" : "node (wrangler)";
    snapshot.roles[role] = (snapshot.roles[role] ?? 0) + info.cpuMs;
    // Threads one by one: a Worker's isolate runs on one workerd thread (and wrangler's relay on
    // node's main thread), so one thread near 100% of a core caps throughput whatever the other
    // cores do.
    {
      let tids = [];
      try {
        tids = readdirSync(`/proc/${pid}/task`);
      } catch {
        // Gone meanwhile.
      }
      for (const tid of tids) {
        const text = readProc(`/proc/${pid}/task/${tid}/stat`);
        if (!text) continue;
        const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
        snapshot.threads.set(`${pid}/${tid}`, { role, cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS });
      }
    }
  }
  return snapshot;
}

/**
 * CPU ms per unit of work between two snapshots, by role, with the machine's busy share. With
 * `idle` (ms of CPU per second of wall time by role, from idleCpu), what each role spends while
 * nothing is asked of it is taken out first — for phases that mostly wait.
 */
export function cpuPerUnit(before, after, units, idle = null) {
  const perUnit = {};
  const seconds = (after.at - before.at) / 1000;
  const net = (role, spent) => Math.max(0, spent - (idle?.[role] ?? 0) * seconds);
  let ours = after.benchClientMs - before.benchClientMs;
  perUnit["node (bench client)"] = round(net("node (bench client)", ours) / units);
  for (const [role, ms] of Object.entries(after.roles)) {
    const spent = ms - (before.roles[role] ?? 0);
    ours += spent;
    perUnit[role] = round(net(role, spent) / units);
  }
  // The busiest thread of each role, as % of one core over the phase.
  const busiestThreadPercent = {};
  for (const [key, thread] of after.threads) {
    const percent = round((100 * (thread.cpuMs - (before.threads.get(key)?.cpuMs ?? 0))) / (seconds * 1000), 1);
    if (percent !== null && percent > (busiestThreadPercent[thread.role] ?? -1)) busiestThreadPercent[thread.role] = percent;
  }
  if (after.machineBusyMs === null) return { perUnit, busiestThreadPercent, otherMs: null, otherPercent: null, machineBusyPercent: null };
  const busy = after.machineBusyMs - before.machineBusyMs;
  const total = after.machineTotalMs - before.machineTotalMs;
  const other = Math.max(0, busy - ours); // other processes on the machine in the meantime
  return {
    perUnit,
    busiestThreadPercent,
    otherMs: round(other / units),
    otherPercent: round((100 * other) / total, 1), // of all the machine's cores
    machineBusyPercent: round((100 * busy) / total, 1),
  };
}

/** CPU ms per second of wall time, by role, that the dev server spends while nothing is asked of it. */
export async function idleCpu(ms) {
  const before = cpuSnapshot();
  await sleep(ms);
  const after = cpuSnapshot();
  const seconds = (after.at - before.at) / 1000;
  const rates = { "node (bench client)": (after.benchClientMs - before.benchClientMs) / seconds };
  for (const [role, spent] of Object.entries(after.roles)) rates[role] = (spent - (before.roles[role] ?? 0)) / seconds;
  return rates;
}

export const sumCpu = (perUnit) => round(Object.values(perUnit ?? {}).reduce((sum, value) => sum + (value ?? 0), 0));

export function latency(samples, key) {
  const values = samples.map((sample) => sample[key]);
  return { p50: round(percentile(values, 0.5)), p95: round(percentile(values, 0.95)), max: round(Math.max(...values)) };
}

export const describeCpu = (perUnit) =>
  Object.entries(perUnit ?? {})
    .map(([role, ms]) => `${role} ${ms}`)
    .join(", ");

const reviewSchema = { type: "object", required: ["verdict"], additionalProperties: false, properties: { verdict: { enum: ["remove", "keep"] } } };

/** A reviewed lifecycle: a human review task, then on "remove" an action of `actionType`, with an end for every outcome. */
export const reviewThenActGraph = (queueId, actionType) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queueId, response_schema: reviewSchema, timeout_seconds: 3_600 }, inputMapping: { category: "report.category" } },
    { id: "verdict", kind: "condition", config: { cases: [{ port: "remove", when: "steps.review.event.payload.response.verdict == 'remove'" }], case_ports: ["remove"], default_port: "keep" } },
    { id: "act", kind: "action", errorPort: "failed", config: { action_type: actionType }, inputMapping: { subject: "report.subject.id" } },
    { id: "removed", kind: "end", config: { terminal_code: "removed" } },
    { id: "kept", kind: "end", config: { terminal_code: "kept" } },
    { id: "other", kind: "end", config: { terminal_code: "other" } },
  ],
  edges: [
    edge("start", "success", "review"),
    edge("review", "completed", "verdict"),
    edge("review", "timeout", "other"),
    edge("verdict", "remove", "act"),
    edge("verdict", "keep", "kept"),
    edge("act", "applied", "removed"),
    edge("act", "rejected", "other"),
    edge("act", "expired", "other"),
    edge("act", "failed", "other"),
  ],
});

/**
 * An installation set up for reviewed lifecycles: a review queue, a webhook endpoint at
 * `receiverUrl`, an autonomous `<name>_remove` action type, the review-then-act graph behind a
 * trigger on every scam report, and an intake key and a review key (the endpoint's `hook.secret`
 * verifies what the receiver got).
 */
export async function reviewedDesk(api, adminToken, { name, receiverUrl, maxAttempts }) {
  const installation = await api("/api/v1/installations", { body: { name: `bench-${name}` }, key: adminToken });
  const key = installation.apiKey;
  const queue = await api("/api/v1/queues", { body: { name: `${name}-review`, slaSeconds: 3_600, priority: 5 }, key });
  const hook = await api("/api/v1/webhook-endpoints", { body: { url: receiverUrl, retryBaseSeconds: 1, maxAttempts }, key });
  const label = name[0].toUpperCase() + name.slice(1);
  await api("/api/v1/action-types", { body: { key: `${name}_remove`, name: `${label}: remove post`, endpointId: hook.id, reversible: true, requiresApproval: false }, key });
  const version = await publish(api, key, reviewThenActGraph(queue.id, `${name}_remove`), `bench-${name}`);
  await api("/api/v1/triggers", { body: { event: "report.created", when: "report.category == 'scams_and_fraud'", workflowVersionId: version.id, authorityMode: "autonomous" }, key });
  const { apiKey: intakeKey } = await api("/api/v1/api-keys", { body: { name: `${name}-intake`, scopes: ["reports:write"] }, key });
  const { apiKey: reviewKey } = await api("/api/v1/api-keys", { body: { name: `${name}-review`, scopes: ["review"] }, key });
  return { installation, key, queue, hook, version, intakeKey, reviewKey };
}
