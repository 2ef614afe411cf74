// Shared by the browser tests and the console bench: build the console, start the platform exactly
// as `npm start` does (scripts/start.mjs on a free port, temporary state, own ADMIN_TOKEN and master
// key, its own process group so the whole tree dies with it), drive Debian's Chromium through
// playwright-core, and inject axe-core.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const templateDir = fileURLToPath(new URL("..", import.meta.url));
const require = createRequire(path.join(templateDir, "package.json"));
const READY_TIMEOUT_MS = 90_000;

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

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

/** Builds the console into console-dist (what the Worker serves as static assets). */
export function buildConsole() {
  const vite = path.join(path.dirname(require.resolve("vite/package.json")), "bin", "vite.js");
  const result = spawnSync(process.execPath, [vite, "build", "--config", "console/vite.config.ts", "--logLevel", "warn"], { cwd: templateDir, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`vite build failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  assert.ok(existsSync(path.join(templateDir, "console-dist", "index.html")), "console-dist/index.html after the build");
}

/**
 * Starts `node scripts/start.mjs` (wrangler dev) and waits for the demo installation and the
 * console sign-in link it prints.
 */
export async function startServer({ label = "browser" } = {}) {
  const stateDir = mkdtempSync(path.join(tmpdir(), `safest-${label}-`));
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const adminToken = `test_${randomBytes(24).toString("hex")}`;
  const child = spawn(process.execPath, ["scripts/start.mjs"], {
    cwd: templateDir,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), SAFEST_STATE_DIR: stateDir, ADMIN_TOKEN: adminToken, REPORT_MASTER_KEY: randomBytes(32).toString("base64url"), CI: "true" },
  });
  let output = "";
  const collect = (chunk) => {
    output = (output + chunk.toString()).slice(-40_000);
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
  process.on("exit", () => killGroup("SIGKILL"));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      killGroup("SIGTERM");
      await Promise.race([exited, sleep(10_000)]);
    }
    killGroup("SIGKILL");
    rmSync(stateDir, { recursive: true, force: true });
  };
  const demoFile = path.join(stateDir, "demo-installation.json");
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let signinUrl = null;
  while (!signinUrl) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`npm start exited early (${child.exitCode ?? child.signalCode}):\n${output}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`no demo installation and sign-in link after ${READY_TIMEOUT_MS / 1000} s:\n${output}`);
    }
    const match = /(http:\/\/127\.0\.0\.1:\d+\/console\/signin\?token=[A-Za-z0-9_%.~-]+)/u.exec(output);
    if (match && existsSync(demoFile)) signinUrl = match[1];
    else await sleep(200);
  }
  const demo = JSON.parse(readFileSync(demoFile, "utf8"));
  return { baseUrl, stateDir, adminToken, apiKey: demo.apiKey, installationId: demo.id, signinUrl, output: () => output, stop };
}

/** JSON over the API with a bearer key (API key or admin token). */
export function apiClient(baseUrl, key) {
  return async function api(pathname, { method, body, headers = {}, as = key } = {}) {
    const response = await fetch(`${baseUrl}/api/v1${pathname}`, {
      method: method ?? (body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${as}`, "content-type": "application/json", ...headers },
      signal: AbortSignal.timeout(30_000),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { unparsed: text.slice(0, 2000) };
    }
    return { status: response.status, body: parsed };
  };
}

export async function until(probe, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last?.value) return last.value;
    if (last?.stop) break;
    await sleep(250);
  }
  assert.fail(`timed out waiting for ${what}: ${JSON.stringify(last?.seen ?? null).slice(0, 2000)}`);
}

export async function launchBrowser() {
  const { chromium } = require("playwright-core");
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
}

/** A one-time console sign-in link for a user of the installation (created with that role if new). */
export async function signinLink(server, { email, name, role }) {
  const api = apiClient(server.baseUrl, server.adminToken);
  const response = await api("/console-signin-links", { body: { installationId: server.installationId, email, name, role } });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.url;
}

const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

/** Runs axe-core in the page; returns the serious and critical violations (with their targets). */
export async function axeViolations(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ content: axeSource });
  const results = await page.evaluate(async () => {
    const run = await window.axe.run(document, { resultTypes: ["violations"] });
    return run.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => ({ target: n.target.join(" "), summary: n.failureSummary })) }));
  });
  return results.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/**
 * For working on the tests: CONSOLE_TEST_SERVER="<baseUrl> <stateDir> <adminToken>" reuses a
 * server you started with `npm start` instead of starting one.
 */
export async function reuseOrStartServer(options) {
  const reuse = process.env.CONSOLE_TEST_SERVER;
  if (!reuse) return startServer(options);
  const [baseUrl, stateDir, adminToken] = reuse.split(/\s+/u);
  const demo = JSON.parse(readFileSync(path.join(stateDir, "demo-installation.json"), "utf8"));
  const server = { baseUrl, stateDir, adminToken, apiKey: demo.apiKey, installationId: demo.id, output: () => "", stop: async () => undefined };
  server.signinUrl = await signinLink(server, { email: "admin@localhost", name: "Demo admin", role: "admin" });
  return server;
}

/** A small PNG (solid colour), as a data URL: reported media that needs no network. */
export function pngDataUrl(width = 48, height = 32, rgb = [200, 30, 40]) {
  const { deflateSync, crc32 } = require("node:zlib");
  const crc = crc32 ?? ((buffer) => {
    let c = ~0;
    for (const byte of buffer) {
      c ^= byte;
      for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
    }
    return ~c >>> 0;
  });
  const chunk = (type, data) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body) >>> 0);
    return Buffer.concat([length, body, sum]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // truecolour
  const rows = [];
  for (let y = 0; y < height; y++) rows.push(Buffer.from([0, ...Array.from({ length: width }, () => rgb).flat()]));
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(rows))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
  return `data:image/png;base64,${png.toString("base64")}`;
}
