// Runs test blocks (shell commands, usually `npm run <script>`) side by side, in stages:
//
//   node scripts/run-blocks.mjs "npm run test:checks" --and "npm run test:workerd" --then "npm run test:smoke" "npm run test:browser"
//
// The blocks of a stage run at the same time; the next stage starts when every block of the stage
// before it has ended: after `--then` whatever the results, after `--and` only if every block so
// far exited 0 (as `&&` would). Each block's output (stdout and stderr) is held and printed in one
// piece when the block ends, so a log read top to bottom shows one block after another, each under
// the `> <script>` lines npm prints for it (.ci/run's summary labels blocks by those lines), closed
// by a `[blocks] <command>: exit <status> after <seconds> s` line. The exit status is 0 when every
// block that ran exited 0, else 1.
//
// Blocks of one stage must not share mutable state: the dev-server tests each take a free port and
// a temporary state folder, and the console build they all serve is made before (test:prepare, or
// test:checks when the template runs alone).
import { spawn } from "node:child_process";

/** The stages: the arguments split at each --then or --and ({ commands, onlyIfPassed }). */
function stages(args) {
  const out = [{ commands: [], onlyIfPassed: false }];
  for (const arg of args) {
    if (arg === "--then" || arg === "--and") out.push({ commands: [], onlyIfPassed: arg === "--and" });
    else out.at(-1).commands.push(arg);
  }
  return out.filter((stage) => stage.commands.length > 0);
}

/** The blocks still running: their process and the output held so far. */
const running = new Map();
// Stopped from outside (Ctrl-C, a CI timeout): the blocks are stopped too, and what they printed
// so far is not lost with them.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    for (const [command, { child, chunks }] of running) {
      try {
        process.kill(-child.pid, signal); // the block's whole process group: npm, node, servers
      } catch {
        // Already gone.
      }
      process.stdout.write(Buffer.concat(chunks));
      process.stdout.write(`\n[blocks] ${command}: stopped by ${signal}\n\n`);
    }
    process.exit(128 + { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[signal]);
  });
}

/** Runs one block to its end: { command, code, seconds }. */
function runBlock(command) {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks = [];
    // Its own process group (detached), so that a stop reaches everything the block started.
    const child = spawn(command, { shell: true, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    running.set(command, { child, chunks });
    child.stdout.on("data", (chunk) => chunks.push(chunk));
    child.stderr.on("data", (chunk) => chunks.push(chunk));
    const done = (code) => {
      running.delete(command);
      const seconds = Math.round((Date.now() - started) / 1000);
      process.stdout.write(Buffer.concat(chunks));
      process.stdout.write(`\n[blocks] ${command}: exit ${code} after ${seconds} s\n\n`);
      resolve({ command, code, seconds });
    };
    child.on("error", (error) => {
      chunks.push(Buffer.from(`${command} could not start: ${error.message}\n`));
      done(127);
    });
    child.on("close", (code) => done(code ?? 128));
  });
}

const plan = stages(process.argv.slice(2));
if (plan.length === 0) {
  console.error('usage: node scripts/run-blocks.mjs "<command>" ... [--then|--and "<command>" ...]');
  process.exit(2);
}
const results = [];
for (const stage of plan) {
  const passed = results.every((result) => result.code === 0);
  if (stage.onlyIfPassed && !passed) {
    console.log(`[blocks] not started, a block before failed: ${stage.commands.join(" | ")}`);
    continue;
  }
  if (stage.commands.length > 1) console.log(`[blocks] side by side: ${stage.commands.join(" | ")} (each block's output follows when it ends)`);
  results.push(...(await Promise.all(stage.commands.map(runBlock))));
}
process.exitCode = results.every((result) => result.code === 0) ? 0 : 1;
