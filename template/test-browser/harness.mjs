// Shared by the browser tests and the console bench: build the console, start the platform through
// the shared test-server harness (../test-node/harness.mjs), drive a local Chromium or Chrome
// (test-browser/chromium.mjs finds it) through playwright-core, and inject axe-core.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { api, startServer as startPlatform, templateDir } from "../test-node/harness.mjs";
import { buildConsole as sharedBuild } from "../scripts/console-build.mjs";
import { findChromium } from "./chromium.mjs";

export { freePort, sleep, templateDir, until } from "../test-node/harness.mjs";

/**
 * How many tests of a file run at once against its one server (each test has an installation and
 * a browser context of its own, so they do not see each other): BROWSER_TEST_CONCURRENCY, else 1.
 */
export const TEST_CONCURRENCY = Math.max(1, Number.parseInt(process.env.BROWSER_TEST_CONCURRENCY ?? "1", 10) || 1);

const require = createRequire(path.join(templateDir, "package.json"));
const READY_TIMEOUT_MS = 150_000;

export const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** Builds the console into console-dist (what the Worker serves as static assets), unless a build newer than its sources is there. */
export function buildConsole() {
  sharedBuild();
  assert.ok(existsSync(path.join(templateDir, "console-dist", "index.html")), "console-dist/index.html after the build");
}

/**
 * Starts `node scripts/start.mjs` (wrangler dev) and waits for the demo installation and the
 * console sign-in link it prints.
 */
export function startServer({ label = "browser" } = {}) {
  return startPlatform({ label, readyTimeoutMs: READY_TIMEOUT_MS, signin: true });
}

/** JSON over the API (paths relative to /api/v1) with a bearer key (API key or admin token). */
export function apiClient(baseUrl, key) {
  return api(baseUrl, key, { prefix: "/api/v1" });
}

export async function launchBrowser() {
  const { chromium } = require("playwright-core");
  return chromium.launch({ executablePath: findChromium(), headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
}

/**
 * Starts the server (`start()`) and the browser at the same time; if either fails, the other is
 * taken down before the error is thrown.
 */
export async function serverAndBrowser(start) {
  const [started, launched] = await Promise.allSettled([start(), launchBrowser()]);
  if (started.status === "fulfilled" && launched.status === "fulfilled") return { server: started.value, browser: launched.value };
  if (launched.status === "fulfilled") await launched.value.close().catch(() => undefined);
  if (started.status === "fulfilled") await started.value.stop();
  throw started.status === "rejected" ? started.reason : launched.reason;
}

/** A one-time console sign-in link for a user of the installation (created with that role if new). */
export async function signinLink(server, { email, name, role }) {
  const api = apiClient(server.baseUrl, server.adminToken);
  const response = await api("/console-signin-links", { body: { installationId: server.installationId, email, name, role } });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.url;
}

/**
 * An installation of the test's own on a running server, made as a deployment's operator makes
 * one (POST /installations with the admin token): nothing another test made is visible in it, so
 * the test can run alone and in any order. Returns its id, its first API key (every scope), an API
 * client with that key, and `signinUrl(user)`: a one-time console sign-in link for a user of it.
 */
export async function ownInstallation(server, name) {
  const root = apiClient(server.baseUrl, server.adminToken);
  const created = await root("/installations", { body: { name } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.id;
  return {
    id,
    apiKey: created.body.apiKey,
    api: apiClient(server.baseUrl, created.body.apiKey),
    signinUrl: (user) => signinLink({ ...server, installationId: id }, user),
  };
}

/**
 * A browser context of its own (cookies, storage) signed in through a one-time link: on the review
 * home, or with `path`, on that page (the link is then spent by the context's own request, which
 * keeps the session cookie, and the console loads once, at `path`). Closed when the test ends,
 * after `onClose(page)` (where a failed test dumps what it saw).
 */
export async function signedInPage(t, browser, url, { path: at = null, viewport = { width: 1440, height: 900 }, onOpen = () => undefined, onClose = async () => undefined } = {}) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  onOpen(page);
  t.after(async () => {
    await onClose(page);
    await context.close().catch(() => undefined);
  });
  if (at) {
    const signin = await context.request.get(url, { maxRedirects: 0 });
    assert.equal(signin.status(), 302, `the sign-in link redirects into the console: ${await signin.text()}`);
    await page.goto(new URL(at, url).href);
    return page;
  }
  await page.goto(url);
  await page.getByRole("heading", { level: 1, name: "Review queues" }).waitFor();
  return page;
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
  const crc =
    crc32 ??
    ((buffer) => {
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
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", header), chunk("IDAT", deflateSync(Buffer.concat(rows))), chunk("IEND", Buffer.alloc(0))]);
  return `data:image/png;base64,${png.toString("base64")}`;
}
