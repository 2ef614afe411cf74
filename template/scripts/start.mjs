// `npm start`: build the kernel, migrate the local D1 database, run `wrangler dev` (wrangler's local
// engines: workerd, D1, R2, Queues, Workflows, Worker Loader) on local state,
// and make sure a demo installation exists; on a fresh state folder, seed the demo desk into it
// (demo/seed.mjs; `npm start -- --empty` skips it). Everything the server keeps lives in the state folder
// (SAFEST_STATE_DIR, default <repo root>/.safest-state), so a restart resumes where it left off.
// While it runs, scripts/local-cron.mjs fires the Worker's schedule every minute, as the Cron
// Trigger does on Cloudflare (Miniflare fires none by itself).
//
// Environment: PORT (default 8787), SAFEST_STATE_DIR, ADMIN_TOKEN (else .dev.vars, else a generated
// token written to .dev.vars; .dev.vars sits in template/ in the repository, at a project's root),
// REPORT_MASTER_KEY and AUDIT_CHECKPOINT_KEY (likewise, generated once into .dev.vars).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { demoDeskForStart } from "../demo/seed.mjs";
import { buildConsole } from "./console-build.mjs";
import { startLocalCron } from "./local-cron.mjs";
import { readDotenvValue } from "./local-state.mjs";

const templateDir = fileURLToPath(new URL("..", import.meta.url));
const devVarsPath = path.join(templateDir, ".dev.vars");
// A bearer token (RFC 6750 b64token): also safe in a dotenv file, where wrangler expands `$`.
const TOKEN_PATTERN = /^[A-Za-z0-9._~+/=-]{16,512}$/u;
const READY_TIMEOUT_MS = 120_000;

function fail(message) {
  console.error(`[safest] ${message}`);
  process.exit(1);
}

/** The workspace root when the template sits inside the create-safest-tools repo, else the template. */
function repoRoot() {
  const parent = path.resolve(templateDir, "..");
  try {
    const pkg = JSON.parse(readFileSync(path.join(parent, "package.json"), "utf8"));
    if (Array.isArray(pkg.workspaces) && pkg.workspaces.some((w) => path.resolve(parent, w) === path.resolve(templateDir))) return parent;
  } catch {
    // No parent package: the template is the project.
  }
  return path.resolve(templateDir);
}

/** .dev.vars as the user sees it: template/.dev.vars in the repository, .dev.vars in a project. */
function devVarsLabel() {
  return path.relative(repoRoot(), devVarsPath);
}

function stateDir() {
  const configured = process.env.SAFEST_STATE_DIR;
  if (configured) return path.resolve(process.env.INIT_CWD || process.cwd(), configured);
  return path.join(repoRoot(), ".safest-state");
}

function port() {
  const raw = process.env.PORT ?? "8787";
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 65_535) fail(`PORT must be a port number, not ${JSON.stringify(raw)}.`);
  return value;
}

function wranglerBin() {
  const require = createRequire(path.join(templateDir, "package.json"));
  try {
    return path.join(path.dirname(require.resolve("wrangler/package.json")), "bin", "wrangler.js");
  } catch {
    return fail("wrangler is not installed; run `npm install` first.");
  }
}

/** Where the admin token comes from; a token the user supplied is never printed. */
function adminToken() {
  const fromEnv = process.env.ADMIN_TOKEN;
  if (fromEnv) {
    if (!TOKEN_PATTERN.test(fromEnv)) fail("ADMIN_TOKEN must be 16-512 characters of A-Z, a-z, 0-9 and . _ ~ + / = -");
    return { token: fromEnv, source: "env" };
  }
  const fromFile = readDotenvValue(devVarsPath, "ADMIN_TOKEN");
  if (fromFile) {
    if (fromFile === "change-me") console.warn(`[safest] ${devVarsLabel()} still holds the example ADMIN_TOKEN (change-me); replace it with a secret.`);
    return { token: fromFile, source: "dev.vars" };
  }
  const token = `adm_${randomBytes(32).toString("base64url")}`;
  const previous = existsSync(devVarsPath) ? readFileSync(devVarsPath, "utf8") : "";
  const separator = previous === "" || previous.endsWith("\n") ? "" : "\n";
  writeFileSync(devVarsPath, `${previous}${separator}ADMIN_TOKEN=${token}\n`, { mode: 0o600 });
  chmodSync(devVarsPath, 0o600);
  return { token, source: "generated" };
}

/**
 * The key that seals personal data in reports: REPORT_MASTER_KEY from the environment, else from
 * .dev.vars, else generated into .dev.vars once. Losing it loses every sealed report.
 */
function masterKey() {
  if (process.env.REPORT_MASTER_KEY) return { source: "env" };
  if (readDotenvValue(devVarsPath, "REPORT_MASTER_KEY")) return { source: "dev.vars" };
  const previous = existsSync(devVarsPath) ? readFileSync(devVarsPath, "utf8") : "";
  const separator = previous === "" || previous.endsWith("\n") ? "" : "\n";
  writeFileSync(devVarsPath, `${previous}${separator}REPORT_MASTER_KEY=${randomBytes(32).toString("base64url")}\n`, { mode: 0o600 });
  chmodSync(devVarsPath, 0o600);
  console.log(`[safest] Generated REPORT_MASTER_KEY in ${devVarsLabel()}: it seals personal data in reports; keep it with the state folder.`);
  return { source: "generated" };
}

/**
 * The key the audit trail's checkpoints are signed with: AUDIT_CHECKPOINT_KEY from the environment,
 * else from .dev.vars, else generated into .dev.vars once. Losing it leaves old checkpoints
 * unverifiable (the chain itself still verifies); keep it with the state folder.
 */
function auditKey() {
  if (process.env.AUDIT_CHECKPOINT_KEY) return { source: "env" };
  if (readDotenvValue(devVarsPath, "AUDIT_CHECKPOINT_KEY")) return { source: "dev.vars" };
  const previous = existsSync(devVarsPath) ? readFileSync(devVarsPath, "utf8") : "";
  const separator = previous === "" || previous.endsWith("\n") ? "" : "\n";
  writeFileSync(devVarsPath, `${previous}${separator}AUDIT_CHECKPOINT_KEY=${randomBytes(32).toString("base64url")}\n`, { mode: 0o600 });
  chmodSync(devVarsPath, 0o600);
  console.log(`[safest] Generated AUDIT_CHECKPOINT_KEY in ${devVarsLabel()}: it signs the audit trail's checkpoints; keep it with the state folder.`);
  return { source: "generated" };
}

function run(args, extraEnv = {}, { quiet = false } = {}) {
  const result = spawnSync(process.execPath, args, { cwd: templateDir, stdio: quiet ? ["inherit", "ignore", "inherit"] : "inherit", env: { ...process.env, ...extraEnv } });
  if (result.error) fail(`${args.join(" ")} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${path.basename(args[0])} ${args.slice(1, 4).join(" ")} failed (exit ${result.status ?? result.signal}).`);
}

/**
 * The D1 migrations. `wrangler d1 migrations apply` starts the local engine once per file (about a
 * second each), so on a fresh state folder every file goes in one `wrangler d1 execute`, each
 * followed by its row in d1_migrations exactly as `migrations apply` writes it (same table, same
 * statement); a later start applies whatever is new the ordinary way.
 */
function applyMigrations(wrangler, state) {
  const env = { CI: "true", WRANGLER_SEND_METRICS: "false" }; // CI: no confirmation prompt
  if (existsSync(path.join(state, "v3", "d1"))) {
    run([wrangler, "d1", "migrations", "apply", "DB", "--local", "--persist-to", state], env);
    return;
  }
  const dir = path.join(templateDir, "migrations");
  const files = readdirSync(dir)
    .filter((name) => name.endsWith(".sql")) // as wrangler picks them
    .sort();
  const sql = [
    "CREATE TABLE IF NOT EXISTS d1_migrations(\n\t\tid         INTEGER PRIMARY KEY AUTOINCREMENT,\n\t\tname       TEXT UNIQUE,\n\t\tapplied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL\n);",
    ...files.map((name) => `${readFileSync(path.join(dir, name), "utf8")}\nINSERT INTO d1_migrations (name) values ('${name}');\n`),
  ].join("\n");
  const file = path.join(state, `.migrations-${process.pid}.sql`);
  writeFileSync(file, sql, { mode: 0o600 });
  try {
    console.log(`[safest] Applying ${files.length} migrations to the fresh state folder.`);
    run([wrangler, "d1", "execute", "DB", "--local", "--persist-to", state, "--file", file], env, { quiet: true }); // its stdout: one JSON result per statement
  } finally {
    rmSync(file, { force: true });
  }
}

function assertPortFree(host, value) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (error) => fail(`port ${value} on ${host} is not available (${error.code}); set PORT to another port.`));
    server.listen(value, host, () => server.close(resolve));
  });
}

function writePrivateJson(file, value) {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntilReady(baseUrl, currentChild) {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const child = currentChild();
    if (child.exitCode !== null || child.signalCode !== null) return false;
    try {
      const response = await fetch(`${baseUrl}/api/v1/openapi.json`, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.ok) return true;
    } catch {
      // Not listening yet.
    }
    await sleep(250);
  }
  return false;
}

async function keyWorks(baseUrl, apiKey) {
  const response = await fetch(`${baseUrl}/api/v1/workflows`, { headers: { authorization: `Bearer ${apiKey}` } });
  await response.arrayBuffer();
  return response.status !== 401;
}

/** Reads the saved demo installation, or creates one (when the state was reset, anew). */
async function ensureDemoInstallation(baseUrl, admin, file) {
  if (existsSync(file)) {
    let saved = null;
    try {
      saved = JSON.parse(readFileSync(file, "utf8"));
    } catch {
      // Unreadable: replaced below.
    }
    if (typeof saved?.apiKey === "string" && (await keyWorks(baseUrl, saved.apiKey))) return { ...saved, created: false };
    console.warn(`[safest] ${file} holds a key this database does not know; creating a new demo installation.`);
  }
  const response = await fetch(`${baseUrl}/api/v1/installations`, {
    method: "POST",
    headers: { authorization: `Bearer ${admin.token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "demo" }),
  });
  const body = await response.json().catch(() => null);
  if (response.status !== 201 || !body?.apiKey) {
    const hint = response.status === 401 ? ` The server rejected the admin token from ${admin.source === "env" ? "ADMIN_TOKEN" : devVarsLabel()}.` : "";
    throw new Error(`creating the demo installation failed (HTTP ${response.status} ${body?.error?.code ?? ""}).${hint}`);
  }
  const saved = { id: body.id, name: body.name, apiKey: body.apiKey, createdAt: body.createdAt };
  writePrivateJson(file, saved);
  return { ...saved, created: true };
}

/** A one-time sign-in link to the console for the demo installation's admin (a new one per start). */
async function consoleSigninLink(baseUrl, admin, demo) {
  const response = await fetch(`${baseUrl}/api/v1/console-signin-links`, {
    method: "POST",
    headers: { authorization: `Bearer ${admin.token}`, "content-type": "application/json" },
    body: JSON.stringify({ installationId: demo.id, email: "admin@localhost", name: "Demo admin", role: "admin" }),
  });
  if (!response.ok) return null;
  return (await response.json()).url;
}

function banner(baseUrl, admin, demo, state, demoFile, signinUrl, deskLines) {
  const lines = [
    "",
    `Safest Tools is running at ${baseUrl}  (state: ${state})`,
    admin.source === "generated" ? `  Admin token (generated, saved in ${devVarsLabel()}): ${admin.token}` : `  Admin token: from ${admin.source === "env" ? "the ADMIN_TOKEN environment variable" : devVarsLabel()}`,
    `  Demo installation: ${demo.id}${demo.created ? " (created)" : ""}  (saved in ${demoFile})`,
    `  API key: ${demo.apiKey}`,
    `  Try:  curl -s ${baseUrl}/api/v1/workflows -H "Authorization: Bearer ${demo.apiKey}"`,
    ...deskLines,
    ...(signinUrl ? [`  Console: open ${signinUrl}  (one-time sign-in link for the demo admin, valid 24 h)`] : []),
    "  Schedule: every minute (scripts/local-cron.mjs calls the Worker's scheduled handler).",
    "  Stop with Ctrl-C.",
    "",
  ];
  console.log(lines.join("\n"));
}

async function main() {
  const state = stateDir();
  const listenPort = port();
  const host = "127.0.0.1";
  const baseUrl = `http://${host}:${listenPort}`;
  const wrangler = wranglerBin();
  mkdirSync(state, { recursive: true, mode: 0o700 });

  run(["scripts/build-kernel.mjs"]);
  // The console is served as static assets; wrangler refuses to start without its folder. A build
  // newer than every source it may bundle (console/, src/, the lockfile) is reused.
  try {
    buildConsole();
  } catch (error) {
    fail(error.message);
  }
  const admin = adminToken();
  const master = masterKey();
  const audit = auditKey();
  applyMigrations(wrangler, state);
  await assertPortFree(host, listenPort);

  // A token from the environment reaches wrangler through an env file only this user can read
  // (never argv, which `ps` shows). --env-file replaces .dev.vars, so that file comes first.
  const envFiles = [];
  let tokenFile = null;
  const secretLines = [
    ...(admin.source === "env" ? [`ADMIN_TOKEN=${admin.token}`] : []),
    ...["REPORT_MASTER_KEY", "REPORT_MASTER_KEY_PREVIOUS"].filter((name) => master.source === "env" && process.env[name]).map((name) => `${name}=${process.env[name]}`),
    ...["AUDIT_CHECKPOINT_KEY", "AUDIT_CHECKPOINT_KEY_PREVIOUS"].filter((name) => audit.source === "env" && process.env[name]).map((name) => `${name}=${process.env[name]}`),
  ];
  if (secretLines.length > 0) {
    tokenFile = path.join(state, ".admin-token.env");
    rmSync(tokenFile, { force: true }); // a leftover of a killed run; mode applies only to new files
    writeFileSync(tokenFile, `${secretLines.join("\n")}\n`, { mode: 0o600 });
    chmodSync(tokenFile, 0o600);
    if (existsSync(devVarsPath)) envFiles.push("--env-file", devVarsPath);
    envFiles.push("--env-file", tokenFile);
  }
  const removeTokenFile = () => {
    if (tokenFile) rmSync(tokenFile, { force: true });
  };

  // wrangler reads the token from the files above; it need not sit in its environment too.
  const {
    ADMIN_TOKEN: _token,
    REPORT_MASTER_KEY: _master,
    REPORT_MASTER_KEY_PREVIOUS: _previous,
    AUDIT_CHECKPOINT_KEY: _audit,
    AUDIT_CHECKPOINT_KEY_PREVIOUS: _auditPrevious,
    ...wranglerEnv
  } = { WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", ...process.env };
  // ALLOW_LOCAL_EGRESS: local development may deliver webhooks to and call models on loopback
  // and plain http (a receiver on 127.0.0.1); deployed Workers never get it (src/lib/egress.ts).
  // DEMO_PEERS: the demo model and product under /demo (src/demo), never deployed.
  // The dev server: `wrangler dev` itself, public flags only. `--test-scheduled` serves
  // /__scheduled, which scripts/local-cron.mjs calls every minute. A runtime (workerd) that dies is
  // restarted by wrangler on the same state ("The Workers runtime crashed unexpectedly and is being
  // restarted"): runs resume from their last recorded step, and queue messages lost with it are
  // recovered by the schedule's sweeps.
  const vars = ["--var", "ALLOW_LOCAL_EGRESS:true", "--var", "DEMO_PEERS:on"];
  const serverArgs = [wrangler, "dev", "--port", String(listenPort), "--ip", host, "--persist-to", state, "--show-interactive-dev-session=false", "--test-scheduled", ...vars, ...envFiles];
  const child = spawn(process.execPath, serverArgs, { cwd: templateDir, stdio: "inherit", env: wranglerEnv });
  child.on("error", (error) => {
    removeTokenFile();
    fail(`wrangler dev could not start: ${error.message}`);
  });
  child.on("exit", (code, signal) => {
    removeTokenFile();
    process.exitCode = code ?? 128 + ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }[signal] ?? 0);
    process.exit();
  });

  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }

  if (!(await waitUntilReady(baseUrl, () => child))) {
    if (child.exitCode === null && child.signalCode === null) {
      console.error(`[safest] ${baseUrl} did not answer within ${READY_TIMEOUT_MS / 1000} s.`);
    }
    return;
  }
  // The schedule (sweeps: the delivery outbox, the audit seal and verification, …), every minute.
  const cron = startLocalCron({ baseUrl, log: (message) => console.warn(`[safest] ${message}`) });
  process.once("exit", () => void cron.stop());
  const demoFile = path.join(state, "demo-installation.json");
  try {
    const demo = await ensureDemoInstallation(baseUrl, admin, demoFile);
    // The demo desk (demo/seed.mjs): seeded once on a fresh state folder, unless --empty.
    const deskLines = await demoDeskForStart({ argv: process.argv.slice(2), baseUrl, adminToken: admin.token, demo, stateDir: state, log: (message) => console.warn(`[safest] ${message}`) });
    banner(baseUrl, admin, demo, state, demoFile, await consoleSigninLink(baseUrl, admin, demo), deskLines);
  } catch (error) {
    console.error(`[safest] ${error instanceof Error ? error.message : error}`);
  }
}

await main();
