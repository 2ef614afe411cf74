// Scaffolds a project into a temporary folder, then checks it the way its user would use it:
// names rewritten, every binding declared, its package.json lists what its code imports, and in
// it the typecheck, its own vitest suite (inside workerd) and `wrangler deploy --dry-run` pass.
//
// Dependencies are reused from this workspace (node_modules/ gets one symlink per package) rather
// than installed, to keep CI offline and fast. The project's node smoke tests (test-node/, real
// `wrangler dev`) are not run here: they are the template's own, and the root `npm test` has just
// run them on the same code.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { buildConsole } from "../template/scripts/console-build.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Every file under `dir` by its relative path, with its SHA-256. */
function treeDigest(dir, base = dir, into = {}) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) treeDigest(full, base, into);
    else into[path.relative(base, full)] = createHash("sha256").update(readFileSync(full)).digest("hex");
  }
  return into;
}
const bin = path.join(root, "bin", "create-safest-tools.mjs");
const NAME = "my-desk";

let work;
let project;
let created;

/** A clean environment: nothing from the `npm test` that runs these tests leaks into npm below. */
function cleanEnv(extra = {}) {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/iu.test(key))), WRANGLER_SEND_METRICS: "false", CI: "true", ...extra };
}

function run(command, args, { timeout = 300_000 } = {}) {
  const result = spawnSync(command, args, { cwd: project, encoding: "utf8", env: cleanEnv(), timeout, maxBuffer: 64 * 1024 * 1024 });
  const output = `${result.stdout ?? ""}\n${result.stderr ?? ""}`.replace(/\x1b\[[0-9;]*m/gu, "");
  assert.equal(result.error, undefined, `${command} ${args.join(" ")}: ${result.error}\n${output.slice(-8000)}`);
  assert.equal(result.status, 0, `${command} ${args.join(" ")} exited ${result.status ?? result.signal}:\n${output.slice(-8000)}`);
  return output;
}

/** JSONC (comments, trailing commas) to a value. */
function readJsonc(file) {
  const text = readFileSync(file, "utf8");
  let json = "";
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      json += text.slice(i, j + 1);
      i = j;
    } else if (text.startsWith("//", i)) {
      while (i < text.length && text[i] !== "\n") i += 1;
      json += "\n";
    } else if (text.startsWith("/*", i)) {
      i = text.indexOf("*/", i + 2) + 1;
    } else json += text[i];
  }
  return JSON.parse(json.replace(/,(\s*[}\]])/gu, "$1"));
}

function walk(dir, prefix = "") {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const rel = `${prefix}${entry.name}`;
    if (entry.isSymbolicLink()) return [rel];
    return entry.isDirectory() ? [`${rel}/`, ...walk(path.join(dir, entry.name), `${rel}/`)] : [rel];
  });
}

const bindings = (config) => ({
  d1: (config.d1_databases ?? []).map((d) => d.binding),
  r2: (config.r2_buckets ?? []).map((b) => b.binding),
  producers: (config.queues?.producers ?? []).map((q) => q.binding),
  consumers: (config.queues?.consumers ?? []).length,
  workflows: (config.workflows ?? []).map((w) => [w.binding, w.class_name]),
  loaders: (config.worker_loaders ?? []).map((l) => l.binding),
  vars: Object.keys(config.vars ?? {}),
  main: config.main,
  compatibility: [config.compatibility_date, config.compatibility_flags],
});

before(() => {
  work = mkdtempSync(path.join(tmpdir(), "create-safest-tools-"));
  // A folder name that differs from --name: the name comes from the flag.
  const result = spawnSync(process.execPath, [bin, "desk", "--yes", "--no-install", "--name", NAME], { cwd: work, input: "", encoding: "utf8", env: cleanEnv(), timeout: 60_000 });
  created = result;
  project = path.join(work, "desk");
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test("--yes --no-install --name scaffolds and prints the next steps", () => {
  assert.equal(created.status, 0, created.stderr);
  assert.equal(created.stderr, "");
  assert.match(created.stdout, /Created my-desk in /u);
  assert.match(created.stdout, /Next steps:\n {2}cd desk\n {2}npm install\n {2}npm start/u);
  assert.match(created.stdout, /npm run deploy/u);
});

test("the project, its Worker and its D1 database, R2 bucket, Queues and Workflow are named after it; bindings are kept", () => {
  const pkg = JSON.parse(readFileSync(path.join(project, "package.json"), "utf8"));
  assert.equal(pkg.name, NAME);
  assert.equal(pkg.private, true);
  assert.equal(pkg.scripts.start, "node scripts/start.mjs");
  assert.match(pkg.scripts.test, /npm run test:workerd/u);
  assert.equal(pkg.scripts["test:workerd"], "vitest run");
  assert.match(pkg.scripts.deploy, /wrangler deploy$/u);

  const config = readJsonc(path.join(project, "wrangler.jsonc"));
  assert.equal(config.name, NAME);
  assert.deepEqual(config.d1_databases.map((d) => d.database_name), [NAME]);
  assert.deepEqual(config.r2_buckets.map((b) => b.bucket_name), [`${NAME}-artifacts`, `${NAME}-audit-anchors`]);
  assert.deepEqual(config.workflows.map((w) => w.name), [`${NAME}-dynamic-workflow`]);
  const queues = [...config.queues.producers.map((q) => q.queue), ...config.queues.consumers.map((q) => q.queue)];
  assert.ok(queues.includes(`${NAME}-deliveries`));
  for (const queue of queues) assert.match(queue, /^my-desk-[a-z0-9-]+$/u);
  assert.doesNotMatch(readFileSync(path.join(project, "wrangler.jsonc"), "utf8"), /safest-tools/u);

  // Every binding the platform uses, exactly as in the template.
  const template = readJsonc(path.join(root, "template", "wrangler.jsonc"));
  assert.deepEqual(bindings(config), bindings(template));
  const declared = bindings(config);
  assert.deepEqual(declared.d1, ["DB"]);
  assert.deepEqual(declared.r2, ["WORKFLOW_ARTIFACTS", "AUDIT_ANCHORS"]);
  assert.ok(declared.producers.includes("DELIVERIES"));
  assert.ok(config.queues.consumers.some((q) => q.queue === `${NAME}-deliveries`), "DELIVERIES is consumed too");
  assert.deepEqual(declared.workflows, [["WORKFLOWS", "DynamicWorkflow"]]);
  assert.deepEqual(declared.loaders, ["LOADER"]);
});

test("secrets are listed, and the README explains start, test, resources and deploy", () => {
  const example = readFileSync(path.join(project, ".dev.vars.example"), "utf8");
  assert.match(example, /^ADMIN_TOKEN=/mu);
  assert.match(example, /^REPORT_MASTER_KEY=/mu);

  const readme = readFileSync(path.join(project, "README.md"), "utf8");
  assert.match(readme, /^# my-desk$/mu);
  assert.doesNotMatch(readme, /\{\{\w+\}\}/u, "every placeholder filled");
  const config = readJsonc(path.join(project, "wrangler.jsonc"));
  const queues = new Set(config.queues.producers.map((q) => q.queue));
  for (const line of [
    "npm start",
    "npm test",
    "npm run deploy",
    "npx wrangler d1 create my-desk",
    "npx wrangler r2 bucket create my-desk-artifacts",
    "npx wrangler r2 bucket create my-desk-audit-anchors",
    "npx wrangler secret put AUDIT_CHECKPOINT_KEY",
    ...[...queues].map((queue) => `npx wrangler queues create ${queue}`),
    "npx wrangler secret put ADMIN_TOKEN",
    "npx wrangler secret put REPORT_MASTER_KEY",
    "npx wrangler d1 migrations apply DB --remote",
    "database_id",
    "examples/triage.json",
  ]) {
    assert.ok(readme.includes(line), `README has ${line}`);
  }
  for (const binding of ["DB", "WORKFLOW_ARTIFACTS", "DELIVERIES", "WORKFLOWS", "LOADER", "ADMIN_TOKEN", "REPORT_MASTER_KEY"]) {
    assert.ok(readme.includes(`| \`${binding}\` |`), `README's bindings table has ${binding}`);
  }
});

test("nothing local was copied: no node_modules, wrangler or server state, secrets, generated kernel, logs", () => {
  const files = walk(project);
  const leaked = files.filter((file) => /(^|\/)(node_modules|\.wrangler|\.safest-state)\/|(^|\/)\.dev\.vars$|kernel-source\.generated\.ts$|\.log$/u.test(file));
  assert.deepEqual(leaked, []);
  assert.ok(files.includes(".gitignore"));
  assert.ok(files.includes("examples/triage.json"), "the smoke tests' example graph is inside the project");
  assert.match(readFileSync(path.join(project, "test-node", "smoke.test.mjs"), "utf8"), /"\.\.\/examples\/triage\.json"/u);
});

test("package.json lists every package that the project's code, tests, scripts and config import", () => {
  const pkg = JSON.parse(readFileSync(path.join(project, "package.json"), "utf8"));
  const listed = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})]);
  const builtins = new Set(builtinModules);
  const sources = walk(project).filter((file) => /\.(ts|mts|mjs|js)$/u.test(file) && !file.endsWith(".d.ts"));
  const missing = new Set();
  for (const file of sources) {
    const text = readFileSync(path.join(project, file), "utf8");
    const statements = text.matchAll(/^\s*(?:import|export)\s(?:[^;"'`]*?\sfrom\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gmu);
    for (const match of statements) {
      const specifier = match[1] ?? match[2];
      if (/^[./]/u.test(specifier) || specifier.startsWith("node:") || specifier.startsWith("cloudflare:") || builtins.has(specifier)) continue;
      const name = specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0];
      if (!listed.has(name)) missing.add(`${name} (${file})`);
    }
  }
  // tsconfig "types" and wrangler's CLI are package dependencies too.
  const tsconfig = readJsonc(path.join(project, "tsconfig.json"));
  for (const type of tsconfig.compilerOptions?.types ?? []) {
    if (type.startsWith(".")) continue;
    const name = type.startsWith("@") ? type.split("/").slice(0, 2).join("/") : type.split("/")[0];
    if (!listed.has(name)) missing.add(`${name} (tsconfig types)`);
  }
  for (const tool of ["wrangler", "typescript", "vitest", "esbuild"]) if (!listed.has(tool)) missing.add(`${tool} (scripts)`);
  assert.deepEqual([...missing], []);
});

test("in the project: typecheck, a sample of its own vitest suite under workerd, wrangler deploy --dry-run", { timeout: 1_200_000, skip: !existsSync(path.join(root, "node_modules", "wrangler")) && "no node_modules in the workspace" }, () => {
  assert.equal(created.status, 0, created.stderr);
  // Reuse the workspace's dependencies: a real node_modules folder (so caches stay in the
  // project) holding one symlink per package — the template's own (npm keeps some of them in
  // template/node_modules, where they resolve first for the template) before the hoisted ones.
  const modules = path.join(project, "node_modules");
  mkdirSync(modules);
  const skipped = new Set([".package-lock.json", ".vite", ".vite-temp", ".cache"]);
  const templateModules = path.join(root, "template", "node_modules");
  for (const source of [templateModules, path.join(root, "node_modules")]) {
    if (!existsSync(source)) continue;
    for (const entry of readdirSync(source)) {
      // The commands (tsc, vitest, wrangler) are the workspace's: its .bin links them all.
      if (skipped.has(entry) || (source === templateModules && entry === ".bin")) continue;
      const packages = entry.startsWith("@") ? readdirSync(path.join(source, entry)).map((name) => path.join(entry, name)) : [entry];
      for (const name of packages) {
        if (existsSync(path.join(modules, name))) continue;
        mkdirSync(path.dirname(path.join(modules, name)), { recursive: true });
        symlinkSync(path.join(source, name), path.join(modules, name));
      }
    }
  }

  // The bounds below only stop a command that hangs: `npm test` runs these tests beside vitest
  // (template/scripts/run-blocks.mjs), so each command shares two cores with it.
  run("npm", ["run", "typecheck"], { timeout: 420_000 });
  // The project's suite is the template's, which `npm test` has just run in full: here a sample of
  // it (a run end to end, the API contract, the examples, the node kinds) proves the generated
  // project's own config, peers and migrations work under workerd, without running it all twice.
  const sample = ["test/runs-basic.test.ts", "test/api.test.ts", "test/examples.test.ts", "test/kinds.test.ts"];
  const vitest = run("npx", ["vitest", "run", ...sample], { timeout: 420_000 });
  assert.match(vitest, new RegExp(`Test Files\\s+.*${sample.length} passed`, "u"));
  assert.doesNotMatch(vitest, /Test Files\s+.*failed/u);

  const outdir = path.join(work, "bundle");
  // The console: the project's sources are the template's, byte for byte, so the template's build
  // (made once for the browser tests, or here) is the project's; `npm run typecheck` above has
  // already checked the project's console with its own tsconfig.
  assert.deepEqual(treeDigest(path.join(project, "console")), treeDigest(path.join(root, "template", "console")), "the project's console sources are the template's");
  buildConsole();
  cpSync(path.join(root, "template", "console-dist"), path.join(project, "console-dist"), { recursive: true });
  const deploy = run("npx", ["wrangler", "deploy", "--dry-run", "--outdir", outdir], { timeout: 300_000 });
  assert.match(deploy, /--dry-run: exiting now/u);
  const bundle = path.join(outdir, "index.js");
  assert.ok(existsSync(bundle), `wrangler wrote ${bundle}`);
  assert.ok(statSync(bundle).size > 10_000, "the bundle holds the Worker");
  assert.match(readFileSync(bundle, "utf8"), /DynamicWorkflow/u);
});
