// Section "start": `npm start` on a fresh state folder, the demo desk seeded, to the
// console sign-in link printed — the first thing a new user waits for. Started exactly as a user
// starts it (scripts/start.mjs through the test harness: kernel build, console build reused when
// fresh, migrations, wrangler dev, the seed and its runs reaching their tasks and proposals), on a
// warm machine: the console is built once beforehand, untimed, as after `npm install` and a first
// start. Reported: startToConsoleMs (target ≤ 20,000), and the seed's own share from the banner.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { startServer, templateDir } from "../../test-node/harness.mjs";
import { log, results, round, verdict } from "./lib.mjs";

export const START_TARGET_MS = 20_000;

export async function sectionStart() {
  const require = createRequire(path.join(templateDir, "package.json"));
  const vite = path.join(path.dirname(require.resolve("vite/package.json")), "bin", "vite.js");
  log("start: building the console once (untimed: a warm machine)");
  const build = spawnSync(process.execPath, [vite, "build", "--config", "console/vite.config.ts", "--logLevel", "warn"], { cwd: templateDir, encoding: "utf8" });
  if (build.status !== 0) throw new Error(`start: vite build failed:\n${build.stderr}`);
  log("start: npm start on a fresh state folder, with the demo desk, to the sign-in link");
  const started = performance.now();
  const server = await startServer({ label: "bench-start", readyTimeoutMs: 180_000, signin: true, args: [] });
  const elapsed = performance.now() - started;
  try {
    const seeded = /Demo desk: seeded in ([\d.]+) s/u.exec(server.output());
    Object.assign(results, { startToConsoleMs: round(elapsed, 0), startSeedMs: seeded ? round(Number(seeded[1]) * 1000, 0) : null, startTargetMs: START_TARGET_MS });
  } finally {
    await server.stop();
  }
  log(`start: sign-in link after ${round(elapsed, 0)} ms (seed ${results.startSeedMs} ms)`);
}

export function startLines() {
  if (results.startToConsoleMs === undefined) return [];
  return [
    `npm start:        fresh state to the console sign-in link, demo desk seeded: ${results.startToConsoleMs} ms (target ≤ ${START_TARGET_MS}) ${verdict(results.startToConsoleMs, START_TARGET_MS)}  (of which the seed and its runs settling ${results.startSeedMs} ms; the console build reused)`,
  ];
}
