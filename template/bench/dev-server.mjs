// Runs the bench Worker the way `wrangler dev` does — wrangler's own DevEnv: the same bundling,
// the same workerd, the same local D1, Queues, Workflows, Worker Loader and persistence folder —
// but with the devtools inspector off (`dev.inspector: false`) and no file watching. Started by
// scripts/bench.mjs in a process group of its own, from the sources' snapshot; never by hand.
//
//   node dev-server.mjs <wrangler cli.js> <wrangler.jsonc> <port> <persist dir> <env file> <registry dir>
//
// The env file holds the Worker's secrets (0600); only its path is on the command line. Prints one
// line `ready <url>` on stdout when the Worker answers, and disposes everything on SIGTERM/SIGINT.
import { pathToFileURL } from "node:url";

const [wranglerEntry, config, port, persist, envFile, registry] = process.argv.slice(2);
if (!wranglerEntry || !config || !port || !persist || !envFile || !registry) {
  process.stderr.write("usage: dev-server.mjs <wrangler cli.js> <wrangler.jsonc> <port> <persist dir> <env file> <registry dir>\n");
  process.exit(64);
}

const { unstable_startWorker: startWorker } = await import(pathToFileURL(wranglerEntry).href);
const worker = await startWorker({
  config,
  envFiles: [envFile],
  dev: {
    remote: false, // every binding local, as `wrangler dev` without remote bindings
    server: { hostname: "127.0.0.1", port: Number(port) },
    inspector: false, // the one difference from `wrangler dev`: no devtools relay to this process
    watch: false,
    testScheduled: true, // /__scheduled, as `npm start` runs wrangler dev (scripts/local-cron.mjs)
    liveReload: false,
    persist,
    registry,
    logLevel: "warn",
  },
});

let stopping = false;
async function stop(code) {
  if (stopping) return;
  stopping = true;
  try {
    await worker.dispose();
  } finally {
    process.exit(code);
  }
}
for (const signal of ["SIGTERM", "SIGINT"]) process.once(signal, () => void stop(0));
process.once("disconnect", () => void stop(0));

await worker.ready;
process.stdout.write(`ready ${(await worker.url).href}\n`);
