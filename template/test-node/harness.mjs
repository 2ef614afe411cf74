// The test-server harness shared by the node smoke tests, the browser tests and the console bench:
// start the platform exactly as `npm start` does (scripts/start.mjs on a free port, a temporary
// SAFEST_STATE_DIR, its own ADMIN_TOKEN, REPORT_MASTER_KEY and AUDIT_CHECKPOINT_KEY, its own
// process group so the whole tree — wrangler, workerd — dies with it), wait until it is ready, and
// talk to its API. start.mjs drives the schedule every minute (scripts/local-cron.mjs); a test that
// cannot wait for the next minute calls `scheduled()`, the same driver's one-run trigger.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { triggerScheduled } from "../scripts/local-cron.mjs";

export const templateDir = fileURLToPath(new URL("..", import.meta.url));

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const SIGNIN_LINK = /(http:\/\/127\.0\.0\.1:\d+\/console\/signin\?token=[A-Za-z0-9_%.~-]+)/u;

/**
 * How long a start may take by default: start.mjs's own bound on wrangler dev answering, plus the
 * kernel build and migrations before it. A bound on a stalled start, not a performance target: the
 * test blocks run side by side (scripts/run-blocks.mjs), so a start shares two cores with others.
 */
const READY_TIMEOUT_MS = 150_000;

/**
 * Starts `node scripts/start.mjs` (wrangler dev) and waits for the demo installation file (and,
 * with `signin: true`, for the console sign-in link it prints). On failure the server is stopped
 * and its state removed before the error is thrown.
 */
export async function startServer(options = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startServerOnce(options);
    } catch (error) {
      // Servers started side by side (smoke files two at a time, beside the browser tests) can be
      // handed the same free port: another port, up to three times. A state folder the failed
      // start removed (one not kept) cannot be started again.
      const collided = /Address already in use|EADDRINUSE/u.test(String(error?.message));
      if (!collided || attempt >= 3 || (options.stateDir && !existsSync(options.stateDir))) throw error;
    }
  }
}

async function startServerOnce({ label = "smoke", readyTimeoutMs = READY_TIMEOUT_MS, signin = false, secrets = {}, args = ["--empty"], stateDir: reuseStateDir = null, keepState = false, adminToken: givenAdminToken = null } = {}) {
  // `args` go to start.mjs: by default --empty (no demo desk; test-node/smoke-demo.test.mjs seeds
  // it with args: []). `stateDir` + `keepState` restart a server on the state of an earlier one.
  const stateDir = reuseStateDir ?? mkdtempSync(path.join(tmpdir(), `safest-${label}-`));
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const adminToken = givenAdminToken ?? `test_${randomBytes(24).toString("hex")}`;
  const child = spawn(process.execPath, ["scripts/start.mjs", ...args], {
    cwd: templateDir,
    detached: true, // its own process group, so the whole tree can be killed at once
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      PORT: String(port),
      SAFEST_STATE_DIR: stateDir,
      ADMIN_TOKEN: adminToken,
      // A master key of the test's own: start.mjs passes it through a temp env file in the state
      // folder and leaves template/.dev.vars alone.
      // (`secrets` gives two servers the same keys, as a restore into another deployment needs.)
      REPORT_MASTER_KEY: secrets.reportMasterKey ?? randomBytes(32).toString("base64url"),
      AUDIT_CHECKPOINT_KEY: secrets.auditCheckpointKey ?? randomBytes(32).toString("base64url"),
      CI: "true",
    },
  });
  let output = "";
  // SMOKE_SERVER_LOG=<folder>: the server's whole output also goes to <folder>/<label>-<port>.log
  // (the in-memory copy keeps only its tail), for a failure that needs more than the last 40 kB.
  const logFile = process.env.SMOKE_SERVER_LOG ? path.join(process.env.SMOKE_SERVER_LOG, `${label}-${port}.log`) : null;
  const collect = (chunk) => {
    output = (output + chunk.toString()).slice(-40_000);
    if (logFile) appendFileSync(logFile, chunk);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  const killGroup = (signal) => {
    if (!child.pid) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // Already gone.
    }
  };
  // Even if the runner dies mid-test, take the server (wrangler, workerd) down with it.
  process.on("exit", () => killGroup("SIGKILL"));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      killGroup("SIGTERM");
      await Promise.race([exited, sleep(10_000)]);
    }
    killGroup("SIGKILL"); // stragglers of the group (workerd) after the parent has gone
    if (!keepState) rmSync(stateDir, { recursive: true, force: true });
  };

  const demoFile = path.join(stateDir, "demo-installation.json");
  const deadline = Date.now() + readyTimeoutMs;
  let signinUrl = null;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`npm start exited early (${child.exitCode ?? child.signalCode}):\n${output}`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`no demo installation${signin ? " and sign-in link" : ""} after ${readyTimeoutMs / 1000} s:\n${output}`);
    }
    const match = signin ? SIGNIN_LINK.exec(output) : null;
    if (existsSync(demoFile) && (!signin || match)) {
      signinUrl = match?.[1] ?? null;
      break;
    }
    await sleep(200);
  }
  const demo = JSON.parse(readFileSync(demoFile, "utf8"));
  /** One run of the Worker's schedule now, as the Cron Trigger would: { ok, status, outcome, ms }. */
  const scheduled = () => triggerScheduled(baseUrl);
  /**
   * What a failed test prints besides the output: the server's processes (CPU, memory, state:
   * a busy workerd is starved, an idle one is waiting on something) and whether a fresh request
   * to GET / is answered within 10 s.
   */
  const diagnose = async () => {
    const lines = [];
    try {
      const ps = spawnSync("ps", ["-o", "pid,ppid,pcpu,rss,etime,stat,wchan:20,args", "-g", String(child.pid)], { encoding: "utf8" });
      lines.push(
        ps.stdout
          .split("\n")
          .map((line) => line.slice(0, 200))
          .join("\n"),
      );
    } catch (error) {
      lines.push(`ps failed: ${error?.message ?? error}`);
    }
    const probeStarted = Date.now();
    try {
      const response = await fetch(`${baseUrl}/`, { signal: AbortSignal.timeout(10_000) });
      lines.push(`GET / answered ${response.status} in ${Date.now() - probeStarted} ms`);
    } catch (error) {
      lines.push(`GET / not answered after ${Date.now() - probeStarted} ms: ${error?.message ?? error}`);
    }
    return lines.join("\n");
  };
  /**
   * The pids of the server's Worker runtimes: every workerd but the proxy's, which listens on the
   * server's port (the runtime takes a free port, and keeps it when wrangler restarts it).
   */
  const runtimePids = () =>
    spawnSync("ps", ["-o", "pid=,args=", "-g", String(child.pid)], { encoding: "utf8" })
      .stdout.split("\n")
      .filter((line) => /workerd serve/u.test(line) && !line.includes(`--socket-addr=entry=127.0.0.1:${port} `))
      .map((line) => Number(line.trim().split(/\s+/u)[0]));
  return { baseUrl, port, stateDir, adminToken, apiKey: demo.apiKey, installationId: demo.id, signinUrl, output: () => output, stop, scheduled, diagnose, runtimePids };
}

/**
 * JSON over HTTP with a bearer key (API key or admin token; `as` overrides it per call). `prefix`
 * is put before every pathname. Returns { status, headers, body }; a body that is not JSON comes
 * back as { unparsed }.
 */
export function api(baseUrl, key, { prefix = "", timeoutMs = 30_000, restartGraceMs = 0 } = {}) {
  // `restartGraceMs`: a GET that finds no server (connection refused or reset, or the proxy's 5xx
  // "Network connection lost" for a runtime that died under it; never a timeout) is sent again for
  // this long, as while wrangler dev restarts a runtime that died. Each retry is counted in
  // `request.retried`.
  const request = async function request(pathname, { method, body, headers = {}, as = key } = {}) {
    const verb = method ?? (body === undefined ? "GET" : "POST");
    const sentAt = new Date().toISOString();
    const graceUntil = Date.now() + (verb === "GET" ? restartGraceMs : 0);
    let text;
    let response;
    for (;;) {
      try {
        response = await fetch(`${baseUrl}${prefix}${pathname}`, {
          method: verb,
          headers: { authorization: `Bearer ${as}`, "content-type": "application/json", ...headers },
          signal: AbortSignal.timeout(timeoutMs),
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        text = await response.text();
        // The dev server's proxy answers for a runtime that died under the request ("Network
        // connection lost"): as no server, within the grace.
        if (response.status >= 500 && Date.now() < graceUntil && text.includes("Network connection lost")) {
          request.retried += 1;
          await sleep(1_000);
          continue;
        }
        break;
      } catch (error) {
        if (error?.name !== "TimeoutError" && Date.now() < graceUntil) {
          request.retried += 1;
          await sleep(1_000);
          continue;
        }
        // Which request went unanswered, and since when: the server log is read against it.
        throw new Error(`${verb} ${prefix}${pathname} sent at ${sentAt}: ${error?.message ?? error}`, { cause: error });
      }
    }
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { unparsed: text.slice(0, 2000) };
    }
    return { status: response.status, headers: response.headers, body: parsed };
  };
  request.retried = 0;
  return request;
}

/** Polls `probe` until it returns { value }, or gives up on { stop } or the timeout ({ seen } is reported). */
export async function until(probe, what, timeoutMs = 30_000, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last?.value) return last.value;
    if (last?.stop) break;
    await sleep(intervalMs);
  }
  assert.fail(`timed out waiting for ${what}: ${JSON.stringify(last?.seen ?? null).slice(0, 2000)}`);
}

/** Polls GET /api/v1/runs/:id (with a client from api() without prefix) until `done(run)`; fails on a terminal failure state or the timeout. */
export async function pollRun(request, runId, done, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await request(`/api/v1/runs/${runId}`);
    assert.equal(last.status, 200, JSON.stringify(last.body));
    if (done(last.body)) return last.body;
    if (["failed", "repair_required", "terminated"].includes(last.body.state)) break;
    await sleep(200);
  }
  assert.fail(`run ${runId} did not reach ${what}: ${JSON.stringify(last?.body).slice(0, 2000)}`);
}
