// The web console's build (console-dist/, served by the Worker as static assets), shared by
// `npm start`, the browser tests and the console bench: a build newer than every source it comes
// from (console/, src/, the package files) is reused, so one build serves a whole test run.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const templateDir = fileURLToPath(new URL("..", import.meta.url));

/** The newest modification time under `dir` (files only), 0 when it does not exist. */
function newestMtime(dir) {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full));
    else if (entry.isFile()) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** True when console-dist/index.html is newer than everything the build reads. */
export function consoleBuildIsFresh() {
  const built = path.join(templateDir, "console-dist", "index.html");
  if (!existsSync(built)) return false;
  const sources = Math.max(
    newestMtime(path.join(templateDir, "console")),
    newestMtime(path.join(templateDir, "src")),
    ...["package.json", "package-lock.json", "../package-lock.json"].map((f) => (existsSync(path.join(templateDir, f)) ? statSync(path.join(templateDir, f)).mtimeMs : 0)),
  );
  return statSync(built).mtimeMs > sources;
}

/** vite's CLI script, or null when vite is not installed. */
export function viteBin() {
  const require = createRequire(path.join(templateDir, "package.json"));
  try {
    return path.join(path.dirname(require.resolve("vite/package.json")), "bin", "vite.js");
  } catch {
    return null;
  }
}

/**
 * Builds the console unless a fresh build is there (`force` builds anyway). Returns "reused" or
 * "built"; throws with vite's output when the build fails.
 */
export function buildConsole({ force = false } = {}) {
  if (!force && consoleBuildIsFresh()) return "reused";
  const vite = viteBin();
  if (!vite) throw new Error("vite is not installed; run `npm install` first.");
  const result = spawnSync(process.execPath, [vite, "build", "--config", "console/vite.config.ts", "--logLevel", "warn"], { cwd: templateDir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (result.status !== 0) throw new Error(`vite build failed (${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`);
  return "built";
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outcome = buildConsole({ force: process.argv.includes("--force") });
  console.log(`console: ${outcome === "reused" ? "the build in console-dist/ is newer than its sources (reused)" : "built into console-dist/"}`);
}
