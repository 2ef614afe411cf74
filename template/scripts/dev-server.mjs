// The local dev server of `npm start` (scripts/start.mjs) and `npm run bench`: wrangler's own
// DevEnv (what `unstable_startWorker` runs) — the same bundling, workerd, local D1, Queues, Workflows,
// Worker Loader and persistence folder as `wrangler dev` — with the devtools inspector off.
//
// Why not `wrangler dev` itself: it always attaches its inspector relay to the runtime and sends
// `Runtime.enable` (and `Network.enable`), so V8 captures a stack trace for every console call and
// reports every subrequest to the relay. Under load that stack capture meets a V8 fatal error in
// workerd (`Missing deoptimization information for OptimizedJSFrame::Summarize`, an int3 trap in
// that function of workerd 2026-04-26 and 2026-08-15 alike): the runtime dies without a message of
// its own and the proxy in front of it holds every request until the client gives up. The CLI
// has no switch for the inspector; this API has one. `npm start -- --inspect` still runs the CLI
// for a DevTools session (docs/ARCHITECTURE.md, "Local dev server").
//
//   node scripts/dev-server.mjs --config wrangler.jsonc --ip 127.0.0.1 --port 8787 --persist-to DIR
//        [--env-file FILE]... [--var NAME:VALUE]... [--registry DIR] [--watch] [--log-level log]
//        [--wrangler path/to/wrangler-dist/cli.js]
//
// Secrets reach it only through env files (0600, paths on the command line; never values). Prints
// one line `ready <url>` on stdout when the Worker is up, and disposes everything on SIGTERM,
// SIGINT or SIGHUP (start.mjs forwards them; a start.mjs killed with SIGKILL leaves it running, as
// it left `wrangler dev`).
//
// A runtime that dies. Without the inspector the V8 fault is rarer, not gone (a stack captured for
// an Error goes through the same function). Miniflare does not notice a workerd that died, and the
// proxy in front of it then holds every request forever, so this process watches the workerd
// processes Miniflare starts: one that ends other than by Miniflare's own kill (a reload, or
// disposal), once the DevEnv reported it started, is reported with its signal and this process exits with
// RUNTIME_DIED (75), after which scripts/start.mjs starts the dev server again on the same state.
import childProcess from "node:child_process";
import path from "node:path";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    wrangler: { type: "string" },
    config: { type: "string", default: "wrangler.jsonc" },
    ip: { type: "string", default: "127.0.0.1" },
    port: { type: "string" },
    "persist-to": { type: "string" },
    "env-file": { type: "string", multiple: true, default: [] },
    var: { type: "string", multiple: true, default: [] },
    registry: { type: "string" },
    watch: { type: "boolean", default: false },
    // "log", as wrangler dev: the Worker's console.log lines are printed (at "info" they are not).
    "log-level": { type: "string", default: "log" },
  },
  strict: true,
});

function usage(message) {
  process.stderr.write(`dev-server.mjs: ${message}\nusage: dev-server.mjs --port N --persist-to DIR [--config FILE] [--ip IP] [--env-file FILE]... [--var NAME:VALUE]... [--registry DIR] [--watch] [--log-level LEVEL] [--wrangler CLI_JS]\n`);
  process.exit(64);
}
if (!values.port || !/^\d+$/u.test(values.port)) usage("--port takes a port number");
if (!values["persist-to"]) usage("--persist-to takes the state folder");

/** `--var NAME:VALUE` as `wrangler dev --var` takes it: a plain-text binding over the config's vars. */
const bindings = {};
for (const entry of values.var) {
  const colon = entry.indexOf(":");
  if (colon <= 0) usage(`--var ${entry}: write NAME:VALUE`);
  bindings[entry.slice(0, colon)] = { type: "plain_text", value: entry.slice(colon + 1) };
}

function nodeCompatMode(flags) {
  if (flags.includes("nodejs_compat") || flags.includes("nodejs_compat_v2")) return "v2";
  if (flags.includes("nodejs_als")) return "als";
  return null;
}

/** The exit code of a dev server whose runtime died; start.mjs restarts it (its RUNTIME_DIED). */
const RUNTIME_DIED = 75;
/** When the DevEnv last reported a runtime started ("reloadComplete"). */
let lastReloadCompleteAt = 0;
let stopping = false;
let worker = null;
const spawnProcess = childProcess.spawn;
childProcess.spawn = function spawnWatched(command, ...rest) {
  const child = spawnProcess.call(this, command, ...rest);
  if (typeof command === "string" && path.basename(command).startsWith("workerd")) {
    const spawnedAt = Date.now();
    // Miniflare ends a runtime only through child.kill (a reload, disposal); any other end is a
    // death, a SIGKILL from the kernel's OOM killer included.
    let killedByMiniflare = false;
    const kill = child.kill.bind(child);
    child.kill = (...args) => {
      killedByMiniflare = true;
      return kill(...args);
    };
    child.once("exit", (code, signal) => {
      if (stopping || killedByMiniflare) return;
      // A runtime that ends before its reload completed never started (a config it refuses after
      // an edit, say): wrangler reports that itself, and restarting it would only fail again.
      if (spawnedAt > lastReloadCompleteAt) return;
      process.stderr.write(
        `[safest] the local runtime (workerd, pid ${child.pid}) died (${signal ? `signal ${signal}` : `exit code ${code}`}); see docs/ARCHITECTURE.md, "Local dev server". Restarting the dev server on the same state folder.\n`,
      );
      void stop(RUNTIME_DIED);
    });
  }
  return child;
};
syncBuiltinESMExports();

const wranglerEntry = values.wrangler ?? createRequire(import.meta.url).resolve("wrangler");
const { unstable_DevEnv: DevEnv } = await import(pathToFileURL(wranglerEntry).href);
// wrangler's DevEnv, as unstable_startWorker builds it, with its event bus observed for the
// moment each runtime has started (its controllers dispatch through devEnv.dispatch).
const devEnv = new DevEnv();
const dispatch = devEnv.dispatch.bind(devEnv);
devEnv.dispatch = (event) => {
  if (event?.type === "reloadComplete") lastReloadCompleteAt = Date.now();
  return dispatch(event);
};
worker = await devEnv.startWorker({
  config: values.config,
  // None given: wrangler's own default (.dev.vars, else .env, next to the config).
  ...(values["env-file"].length > 0 ? { envFiles: values["env-file"] } : {}),
  bindings,
  // As `wrangler dev` and `wrangler deploy` decide it from the config's flags (for compatibility
  // dates since 2024-09-23, which ours are): nodejs_compat bundles with the v2 Node.js polyfills.
  build: { nodejsCompatMode: (config) => nodeCompatMode(config.compatibility_flags ?? []) },
  dev: {
    remote: false, // every binding local, as `wrangler dev` without remote bindings
    server: { hostname: values.ip, port: Number(values.port) },
    inspector: false, // the point of this script (see above)
    watch: values.watch,
    testScheduled: true, // GET /__scheduled, which scripts/local-cron.mjs calls every minute
    liveReload: false,
    persist: values["persist-to"],
    ...(values.registry ? { registry: values.registry } : {}),
    logLevel: values["log-level"],
  },
});

async function stop(code) {
  if (stopping) return;
  stopping = true;
  try {
    // Bounded: disposing a half-dead runtime must not keep the restart waiting.
    await Promise.race([worker?.dispose(), new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
  } finally {
    process.exit(code);
  }
}
// `on`, not `once`: Ctrl-C reaches this process from the terminal and again from start.mjs, and a
// second signal must not end it with Node's default action halfway through disposing.
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => void stop(0));

await worker.ready;
process.stdout.write(`ready ${(await worker.url).href}\n`);
