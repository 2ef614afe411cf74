// `create-safest-tools upgrade`, from a previous release to this one. The previous release is this
// package with a few known files put back as they were (an older migration set, wrangler.jsonc
// without its rate limit, an older dependency, an example graph, a script, files since deleted);
// a project scaffolded from it gets a team's changes, then this package upgrades it. Offline, no
// npm install: the upgrade only reads and writes files (and runs git merge-file).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { mergeJsonc } from "../bin/lib/jsonc.mjs";
import { mergePackageJson } from "../bin/lib/merge.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const bin = path.join(root, "bin", "create-safest-tools.mjs");
const VERSION = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;
const PREVIOUS = "0.0.9";
const NAME = "my-desk";
const hasGit = spawnSync("git", ["--version"]).status === 0;

const migrations = readdirSync(path.join(root, "template", "migrations"))
  .filter((f) => f.endsWith(".sql"))
  .sort();
/** The newest migration: the previous release did not have it yet. */
const NEW_MIGRATION = `migrations/${migrations.at(-1)}`;
/** The first migration: the previous release shipped it with an older comment (never rewritten). */
const OLD_MIGRATION = `migrations/${migrations[0]}`;
/** The release's newest Queue producer: the previous release did not have it. */
const NEW_PRODUCER = (() => {
  const text = readFileSync(path.join(root, "template", "wrangler.jsonc"), "utf8");
  const lines = text.split("\n").filter((line) => /^\s*\{ "binding": "[A-Z_]+", "queue": "safest-tools-[a-z0-9-]+" \},?$/u.test(line));
  assert.ok(lines.length > 0, "template/wrangler.jsonc has one Queue producer per line");
  return lines.at(-1);
})();
const NEW_QUEUE = /"queue": "safest-tools-([a-z0-9-]+)"/u.exec(NEW_PRODUCER)[1];
/** The team's own migration, numbered after every release's. */
const TEAM_MIGRATION = "migrations/0900_team_notes.sql";
const CURRENT = JSON.parse(readFileSync(path.join(root, "template", "package.json"), "utf8"));
const HONO = CURRENT.dependencies.hono;

let work;
let previousRoot;

const sha = (bytes) => createHash("sha256").update(bytes).digest("hex");
const read = (dir, rel) => readFileSync(path.join(dir, rel), "utf8");
const write = (dir, rel, text) => {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), text);
};
/** Replaces `from` (a string or regex) in a file, failing if it is not there: the test's premises stay true as the template changes. */
function edit(dir, rel, from, to) {
  const text = read(dir, rel);
  const next = text.replace(from, to);
  assert.notEqual(next, text, `${rel}: ${from} not found`);
  write(dir, rel, next);
}

function cleanEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/iu.test(key)));
}

function cli(script, args, cwd) {
  const result = spawnSync(process.execPath, [script, ...args], { cwd, input: "", encoding: "utf8", env: cleanEnv(), timeout: 60_000 });
  assert.equal(result.error, undefined, String(result.error));
  return result;
}

/** Every file under `dir` (relative, /), with its SHA-256. */
function snapshot(dir, prefix = "") {
  const files = {};
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = `${prefix}${entry.name}`;
    if (entry.isDirectory()) Object.assign(files, snapshot(path.join(dir, entry.name), `${rel}/`));
    else files[rel] = sha(readFileSync(path.join(dir, entry.name)));
  }
  return files;
}

/** A project made by the previous release, with a team's changes. */
function teamProject(folder) {
  const cwd = path.join(work, folder);
  mkdirSync(cwd);
  const made = cli(path.join(previousRoot, "bin", "create-safest-tools.mjs"), ["desk", "--yes", "--no-install", "--name", NAME], cwd);
  assert.equal(made.status, 0, made.stderr);
  const project = path.join(cwd, "desk");
  assert.ok(!read(project, "wrangler.jsonc").includes(NEW_PRODUCER.trim().replace(/,$/u, "").replace("safest-tools", NAME)), "the previous release lacks the producer");
  // The team: edits the reporter's message of a workflow example, adds files, sets its D1 id and vars,
  // adds a dependency and a script, edits an example the release does not touch and one it deletes.
  edit(project, "examples/harassment-review.json", /("template": ")[^"]*(")/u, "$1Thanks for flagging this post: we removed it.$2");
  write(project, "src/team/extra.ts", "export const teamOwn = true;\n");
  write(project, TEAM_MIGRATION, "CREATE TABLE team_notes (id TEXT PRIMARY KEY);\n");
  write(project, "examples/team-escalation.json", '{ "schemaVersion": 1, "nodes": [], "edges": [] }\n');
  edit(project, "wrangler.jsonc", '"database_id": "00000000-0000-0000-0000-000000000000"', '"database_id": "2f0c8b5e-team-d1-id"');
  edit(project, "wrangler.jsonc", /"WEBHOOK_TIMEOUT_SECONDS": "\d+"/u, '"WEBHOOK_TIMEOUT_SECONDS": "30", "TEAM_FLAG": "on"');
  edit(project, "wrangler.jsonc", '"bucket_name": "my-desk-artifacts"', '"bucket_name": "acme-trust-artifacts"');
  const pkg = JSON.parse(read(project, "package.json"));
  pkg.dependencies.zod = "3.23.8";
  pkg.scripts["team:seed"] = "node scripts/team-seed.mjs";
  write(project, "package.json", `${JSON.stringify(pkg, null, 2)}\n`);
  edit(project, "examples/known-media.json", /"schemaVersion": 1/u, '"schemaVersion": 1, "x-team": "ours"');
  edit(project, "examples/legacy.json", "legacy", "legacy, tuned by the team");
  return project;
}

function upgrade(project, args = []) {
  const result = cli(bin, ["upgrade", "--json", ...args], project);
  let report = null;
  try {
    report = JSON.parse(result.stdout);
  } catch {}
  assert.ok(report, `a JSON report on stdout:\n${result.stdout}\n${result.stderr}`);
  return { ...result, report };
}

const paths = (entries) => entries.map((e) => e.path);

before(() => {
  work = mkdtempSync(path.join(tmpdir(), "create-safest-tools-upgrade-"));
  // The previous release: this package, version 0.0.9, with known files as they were.
  previousRoot = path.join(work, "previous-package");
  for (const entry of ["bin", "docs"]) cpSync(path.join(root, entry), path.join(previousRoot, entry), { recursive: true });
  const skip = /(^|\/)(node_modules|\.wrangler|\.safest-state|console-dist)(\/|$)|\/\.dev\.vars$|kernel-source\.generated\.ts$/u;
  cpSync(path.join(root, "template"), path.join(previousRoot, "template"), { recursive: true, filter: (source) => !skip.test(source) });
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
  write(previousRoot, "package.json", `${JSON.stringify({ ...pkg, version: PREVIOUS }, null, 2)}\n`);
  const t = path.join(previousRoot, "template");
  rmSync(path.join(t, NEW_MIGRATION));
  write(t, OLD_MIGRATION, `${read(t, OLD_MIGRATION)}\n-- previous release\n`);
  edit(t, "wrangler.jsonc", /\n\s*"ratelimits":[^\n]*/u, "");
  // A var the release adds on the line where the team changes another: lines conflict, values do not.
  edit(t, "wrangler.jsonc", /"ACCESS_AUD": "[^"]*", /u, "");
  edit(t, "wrangler.jsonc", `${NEW_PRODUCER}\n`, "");
  edit(t, "package.json", `"hono": "${HONO}"`, '"hono": "4.0.0"');
  // The previous release's toolchain: Node 20, wrangler 4.86 with a workerd override, and the test
  // pool under its old name (renamed @cloudflare/vitest-plugin), imported by the config and tsconfig.
  const toolchain = JSON.parse(read(t, "package.json"));
  toolchain.engines.node = ">=20.3.0";
  toolchain.devDependencies.wrangler = "4.86.0";
  delete toolchain.devDependencies["@cloudflare/vitest-plugin"];
  toolchain.devDependencies["@cloudflare/vitest-pool-workers"] = "0.23.0";
  toolchain.overrides = { wrangler: { workerd: "1.20260815.1" } };
  write(t, "package.json", `${JSON.stringify(toolchain, null, 2)}\n`);
  edit(t, "vitest.config.mts", 'from "@cloudflare/vitest-plugin"', 'from "@cloudflare/vitest-pool-workers"');
  edit(t, "tsconfig.json", '"@cloudflare/vitest-plugin/types"', '"@cloudflare/vitest-pool-workers/types"');
  edit(t, "examples/harassment-review.json", /"timeout_seconds": (\d+)/u, (_m, n) => `"timeout_seconds": ${Number(n) + 1}`);
  write(t, "scripts/build-kernel.mjs", `${read(t, "scripts/build-kernel.mjs")}// previous release\n`);
  write(t, "scripts/legacy-seed.mjs", "// a script the release deletes\n");
  write(t, "examples/legacy.json", '{ "note": "legacy" }\n');
  edit(path.join(previousRoot, "bin", "project"), "README.md", /\n$/u, "\nOld footer.\n");
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test("a new project records its release: manifest of every file's SHA-256 and the pristine copies", () => {
  const cwd = path.join(work, "fresh");
  mkdirSync(cwd);
  assert.equal(cli(bin, ["desk", "--yes", "--no-install", "--name", NAME], cwd).status, 0);
  const project = path.join(cwd, "desk");
  const manifest = JSON.parse(read(project, ".safest-tools/manifest.json"));
  assert.equal(manifest.version, VERSION);
  assert.equal(manifest.name, NAME);
  const onDisk = snapshot(project);
  delete onDisk[".safest-tools/manifest.json"];
  delete onDisk[".safest-tools/base.tar.gz"];
  assert.deepEqual(manifest.files, onDisk, "every file written, hashed as written (names already renamed)");
  assert.match(read(project, "wrangler.jsonc"), /"name": "my-desk"/u);
  assert.equal(JSON.parse(read(project, "package.json")).scripts.upgrade, "npx --yes create-safest-tools@latest upgrade");
  if (spawnSync("tar", ["--version"]).status === 0) {
    const base = path.join(work, "fresh-base");
    mkdirSync(base);
    const untar = spawnSync("tar", ["-xzf", path.join(project, ".safest-tools", "base.tar.gz"), "-C", base]);
    assert.equal(untar.status, 0, String(untar.stderr));
    assert.deepEqual(snapshot(base), manifest.files, "the base archive holds exactly those files");
  }
  // Upgrading to the same release does nothing.
  const same = upgrade(project);
  assert.equal(same.status, 0, same.stderr);
  assert.equal(same.report.unchanged, Object.keys(manifest.files).length);
  for (const group of ["updated", "merged", "kept", "conflict", "added", "removed"]) assert.deepEqual(same.report[group], [], group);
  assert.deepEqual(same.report.nextSteps, []);
});

describe("upgrading from the previous release", { skip: !hasGit && "no git for git merge-file" }, () => {
  let project;
  let dry;
  let result;
  before(() => {
    project = teamProject("team");
    const beforeDry = snapshot(project);
    dry = upgrade(project, ["--dry-run"]);
    assert.deepEqual(snapshot(project), beforeDry, "--dry-run wrote nothing");
    result = upgrade(project);
  });

  test("the report: updated, merged, kept, added, removed, the dependencies and the next steps; exit 0", () => {
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    const { report } = result;
    assert.equal(report.from, PREVIOUS);
    assert.equal(report.to, VERSION);
    assert.equal(report.dryRun, false);
    assert.deepEqual(report.conflict, []);
    assert.deepEqual(paths(report.updated).sort(), ["README.md", "scripts/build-kernel.mjs", "tsconfig.json", "vitest.config.mts"]);
    assert.deepEqual(paths(report.merged).sort(), ["examples/harassment-review.json", "package.json", "wrangler.jsonc"]);
    // With the vars on one line (as the template has them), the release's new var and the team's
    // changed one conflict line by line and merge value by value.
    if (/"vars": \{[^\n]*"ACCESS_AUD"[^\n]*"WEBHOOK_TIMEOUT_SECONDS"/u.test(read(root, "template/wrangler.jsonc"))) {
      assert.equal(report.merged.find((e) => e.path === "wrangler.jsonc").detail, "merged value by value");
    }
    const kept = Object.fromEntries(report.kept.map((e) => [e.path, e.detail]));
    assert.deepEqual(Object.keys(kept).sort(), ["examples/known-media.json", "examples/legacy.json", OLD_MIGRATION].sort());
    assert.match(kept["examples/legacy.json"], /changed by you; the release deleted it/u);
    assert.match(kept[OLD_MIGRATION], /applied migrations are never rewritten/u);
    assert.deepEqual(paths(report.added), [NEW_MIGRATION]);
    assert.deepEqual(paths(report.removed), ["scripts/legacy-seed.mjs"]);
    assert.deepEqual(
      report.dependencies.map((d) => `${d.name} ${d.from} → ${d.to}`).sort(),
      [`@cloudflare/vitest-plugin null → ${CURRENT.devDependencies["@cloudflare/vitest-plugin"]}`, "@cloudflare/vitest-pool-workers 0.23.0 → null", `hono 4.0.0 → ${HONO}`, `wrangler 4.86.0 → ${CURRENT.devDependencies.wrangler}`],
    );
    const steps = report.nextSteps.join("\n");
    assert.match(steps, /^npm install$/mu);
    assert.ok(steps.includes(path.posix.basename(NEW_MIGRATION)), steps);
    assert.match(steps, /npx wrangler d1 migrations apply DB --remote/u);
    assert.match(steps, /npm test/u);
    assert.match(steps, new RegExp(`check the order of migrations: ${path.posix.basename(NEW_MIGRATION)} sorts before your own 0900_team_notes\\.sql`, "u"));
  });

  test("--dry-run printed the same plan", () => {
    assert.equal(dry.status, 0, dry.stderr);
    assert.equal(dry.report.dryRun, true);
    for (const group of ["updated", "merged", "kept", "conflict", "added", "removed"]) assert.deepEqual(dry.report[group], result.report[group], group);
    assert.match(dry.report.nextSteps[0], /without --dry-run/u);
  });

  test("the files: both sides' changes merged, the team's own files and names kept, the release's files in", () => {
    const graph = JSON.parse(read(project, "examples/harassment-review.json"));
    const current = JSON.parse(read(root, "template/examples/harassment-review.json"));
    const review = (g) => g.nodes.find((n) => n.config?.timeout_seconds !== undefined).config.timeout_seconds;
    assert.equal(review(graph), review(current), "the release's change");
    assert.ok(
      graph.nodes.some((n) => n.config?.template === "Thanks for flagging this post: we removed it."),
      "the team's change",
    );

    const wrangler = read(project, "wrangler.jsonc");
    assert.match(wrangler, /"ratelimits":/u, "the release's new rate limit");
    assert.match(wrangler, /"database_id": "2f0c8b5e-team-d1-id"/u);
    assert.match(wrangler, /"WEBHOOK_TIMEOUT_SECONDS": "30", "TEAM_FLAG": "on"/u);
    assert.match(wrangler, /"ACCESS_AUD": ""/u, "the release's new var");
    assert.match(wrangler, /\/\/ Workers Rate Limiting/u, "the release's comments stay");
    assert.match(wrangler, /"name": "my-desk"/u);
    assert.doesNotMatch(wrangler, /safest-tools/u, "every resource still carries the project's name");
    assert.match(wrangler, /"bucket_name": "acme-trust-artifacts"/u, "the team's own bucket name");
    const producer = NEW_PRODUCER.trim().replace(/,$/u, "").replace(`"safest-tools-${NEW_QUEUE}"`, `"my-desk-${NEW_QUEUE}"`);
    assert.ok(wrangler.includes(producer), `the release's new Queue producer, named after the project: ${producer}`);

    const pkg = JSON.parse(read(project, "package.json"));
    assert.equal(pkg.name, NAME);
    assert.equal(pkg.dependencies.hono, HONO);
    // The toolchain moved with the release: Node, wrangler, the renamed test integration, no stale override.
    assert.deepEqual(pkg.engines, CURRENT.engines);
    assert.deepEqual(pkg.overrides, CURRENT.overrides);
    assert.equal(pkg.devDependencies["@cloudflare/vitest-pool-workers"], undefined);
    assert.equal(pkg.devDependencies["@cloudflare/vitest-plugin"], CURRENT.devDependencies["@cloudflare/vitest-plugin"]);
    assert.match(read(project, "vitest.config.mts"), /from "@cloudflare\/vitest-plugin"/u);
    assert.equal(pkg.dependencies.zod, "3.23.8");
    assert.equal(pkg.scripts["team:seed"], "node scripts/team-seed.mjs");
    assert.deepEqual(Object.keys(pkg.dependencies), Object.keys(pkg.dependencies).sort());

    assert.equal(read(project, NEW_MIGRATION), read(root, `template/${NEW_MIGRATION}`));
    assert.match(read(project, OLD_MIGRATION), /-- previous release\n$/u, "an applied migration is never rewritten");
    assert.equal(read(project, "scripts/build-kernel.mjs"), read(root, "template/scripts/build-kernel.mjs"));
    assert.doesNotMatch(read(project, "README.md"), /Old footer/u);
    assert.ok(!existsSync(path.join(project, "scripts/legacy-seed.mjs")));
    assert.match(read(project, "examples/legacy.json"), /tuned by the team/u);
    assert.match(read(project, "examples/known-media.json"), /"x-team": "ours"/u);
    assert.equal(read(project, "src/team/extra.ts"), "export const teamOwn = true;\n");
    assert.match(read(project, TEAM_MIGRATION), /team_notes/u);
    assert.ok(existsSync(path.join(project, "examples/team-escalation.json")));
    assert.deepEqual(
      Object.keys(snapshot(project)).filter((f) => f.endsWith(".upgrade")),
      [],
    );
  });

  test("the record is the new release's, and a second upgrade does nothing", () => {
    const manifest = JSON.parse(read(project, ".safest-tools/manifest.json"));
    assert.equal(manifest.version, VERSION);
    assert.equal(manifest.files[NEW_MIGRATION], sha(readFileSync(path.join(root, "template", NEW_MIGRATION))));
    assert.equal(manifest.files["scripts/legacy-seed.mjs"], undefined);
    const again = upgrade(project);
    assert.equal(again.status, 0, again.stderr);
    for (const group of ["updated", "merged", "conflict", "added", "removed"]) assert.deepEqual(again.report[group], [], group);
    assert.deepEqual(again.report.nextSteps, []);
  });
});

test("a project without a record upgrades against the release it was made from (--base)", { skip: !hasGit && "no git" }, () => {
  const reference = upgrade(teamProject("adopt-reference")).report;
  const project = teamProject("adopt");
  rmSync(path.join(project, ".safest-tools"), { recursive: true });
  const { status, report } = upgrade(project, ["--base", previousRoot]);
  assert.equal(status, 0, JSON.stringify(report));
  assert.equal(report.from, PREVIOUS);
  for (const group of ["updated", "merged", "kept", "conflict", "added", "removed"]) assert.deepEqual(report[group], reference[group], group);
  assert.equal(JSON.parse(read(project, ".safest-tools/manifest.json")).version, VERSION, "recorded from now on");
});

test("a checkout with CRLF line ends: untouched files are still updated, and keep CRLF", { skip: !hasGit && "no git" }, () => {
  const project = teamProject("crlf");
  for (const file of ["scripts/build-kernel.mjs", "examples/harassment-review.json"]) write(project, file, read(project, file).replaceAll("\n", "\r\n"));
  const { status, report } = upgrade(project);
  assert.equal(status, 0, JSON.stringify(report.conflict));
  assert.ok(paths(report.updated).includes("scripts/build-kernel.mjs"), "not mistaken for the team's change");
  assert.equal(read(project, "scripts/build-kernel.mjs"), read(root, "template/scripts/build-kernel.mjs").replaceAll("\n", "\r\n"));
  assert.ok(paths(report.merged).includes("examples/harassment-review.json"));
  const graph = read(project, "examples/harassment-review.json");
  assert.doesNotMatch(graph.replaceAll("\r\n", ""), /\n/u, "every line ends with CRLF");
  assert.match(graph, /Thanks for flagging this post/u);
});

describe("conflicts: exit 1, the team's version never lost", () => {
  /** The team also changes the lines the release changed. */
  function conflicting(folder) {
    const project = teamProject(folder);
    edit(project, "scripts/build-kernel.mjs", /\/\/ previous release\n$/u, "// the team's last line\n");
    edit(project, "examples/harassment-review.json", /"timeout_seconds": \d+/u, '"timeout_seconds": 3600');
    return project;
  }

  test("with git: text conflicts marked in the file, JSON conflicts next to it as .upgrade", { skip: !hasGit && "no git" }, () => {
    const project = conflicting("conflict-git");
    const graphBefore = read(project, "examples/harassment-review.json");
    const { status, report } = upgrade(project);
    assert.equal(status, 1);
    const conflicts = Object.fromEntries(report.conflict.map((e) => [e.path, e.detail]));
    assert.deepEqual(Object.keys(conflicts).sort(), ["examples/harassment-review.json", "scripts/build-kernel.mjs"]);
    assert.match(conflicts["scripts/build-kernel.mjs"], /1 conflict marked with <<<<<<< in the file/u);
    const script = read(project, "scripts/build-kernel.mjs");
    assert.match(script, /^<<<<<<< yours\n\/\/ the team's last line\n=======\n>>>>>>> create-safest-tools /mu);
    assert.equal(read(project, "examples/harassment-review.json"), graphBefore, "a JSON file stays as the team has it");
    assert.match(read(project, "examples/harassment-review.json.upgrade"), /<<<<<<< yours\n.*"timeout_seconds": 3600/su);
    assert.ok(report.nextSteps[0].startsWith("resolve the conflicts"));
    // The rest went through.
    assert.deepEqual(paths(report.added), [NEW_MIGRATION]);
    assert.ok(existsSync(path.join(project, NEW_MIGRATION)));
  });

  test("without git (--no-git): JSON merges value by value; what cannot merge keeps the team's version, the release's goes to .upgrade", () => {
    const project = conflicting("conflict-no-git");
    const before = snapshot(project);
    const { status, report, stdout } = upgrade(project, ["--no-git"]);
    assert.equal(status, 1, stdout);
    const conflicts = Object.fromEntries(report.conflict.map((e) => [e.path, e.detail]));
    assert.deepEqual(Object.keys(conflicts).sort(), ["examples/harassment-review.json", "scripts/build-kernel.mjs"]);
    assert.match(conflicts["scripts/build-kernel.mjs"], /no git to merge with; the release's version is in scripts\/build-kernel\.mjs\.upgrade/u);
    for (const file of Object.keys(conflicts)) {
      assert.equal(sha(readFileSync(path.join(project, file))), before[file], `${file} is the team's`);
      assert.equal(read(project, `${file}.upgrade`), read(root, `template/${file}`), "the release's version next to it");
    }
    // Both sides changed wrangler.jsonc, on other values: merged without git, names and ids kept.
    assert.deepEqual(paths(report.merged).sort(), ["package.json", "wrangler.jsonc"]);
    const wrangler = read(project, "wrangler.jsonc");
    assert.match(wrangler, /"ratelimits":/u);
    assert.match(wrangler, /"database_id": "2f0c8b5e-team-d1-id"/u);
    assert.match(wrangler, /"TEAM_FLAG": "on"/u);
    assert.doesNotMatch(wrangler, /safest-tools/u);
    assert.equal(JSON.parse(read(project, "package.json")).dependencies.hono, HONO);
  });
});

describe("the command line", () => {
  test("the text report names both releases, the groups and the next steps", { skip: !hasGit && "no git" }, () => {
    const project = teamProject("text");
    const result = cli(bin, ["upgrade", "--dry-run"], project);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, new RegExp(`^Upgrading my-desk from create-safest-tools ${PREVIOUS} to ${VERSION} \\(dry run: nothing written\\)\\.`, "u"));
    for (const heading of ["Updated (you had not changed them): 4", "Merged (your changes and the release's): 3", "Added (new in the release): 1", "Removed (deleted by the release; you had not changed them): 1", "Next steps:"]) {
      assert.ok(result.stdout.includes(heading), `report has ${heading}:\n${result.stdout}`);
    }
    assert.match(result.stdout, new RegExp(`hono 4\\.0\\.0 → ${HONO.replaceAll(".", "\\.")}`, "u"));
    assert.match(result.stdout, /@cloudflare\/vitest-pool-workers 0\.23\.0 → \(removed\)/u);
  });

  test("a folder without a record, and misuse, are refused in one line", () => {
    const empty = path.join(work, "not-a-project");
    mkdirSync(empty);
    const missing = cli(bin, ["upgrade"], empty);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr.trim(), /^\S*manifest\.json not found: run upgrade in the project's folder .*--base <unpacked package>\.$/u);
    assert.equal(missing.stderr.trim().split("\n").length, 1);
    write(empty, ".safest-tools/manifest.json", JSON.stringify({ version: "0.0.1", name: NAME, files: { "../outside.txt": sha("x") } }));
    const escaping = cli(bin, ["upgrade"], empty);
    assert.equal(escaping.status, 1);
    assert.match(escaping.stderr, /^\.safest-tools\/manifest\.json lists a path outside the project \("\.\.\/outside\.txt"\)/u);
    rmSync(path.join(empty, ".safest-tools"), { recursive: true });
    const unknown = cli(bin, ["upgrade", "--force"], empty);
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /^Unknown option --force; run create-safest-tools upgrade --help/u);
    const help = cli(bin, ["upgrade", "--help"], empty);
    assert.equal(help.status, 0);
    for (const option of ["--dry-run", "--json", "--no-git", "--base <dir>"]) assert.ok(help.stdout.includes(option));
    const badBase = cli(bin, ["upgrade", "--base", empty], empty);
    assert.equal(badBase.status, 1);
    assert.match(badBase.stderr, /^--base .* is not an unpacked create-safest-tools package/u);
  });
});

describe("merging JSON value by value", () => {
  const base = '{\n  // the Worker\n  "name": "desk",\n  "vars": { "A": "1", "B": "2", },\n  "list": [1, 2]\n}\n';

  test("the team's changes land in the release's text, its comments and layout kept", () => {
    const ours = base.replace('"A": "1"', '"A": "team"').replace('"B": "2", ', "").replace('"list"', '"mine": true,\n  "list"');
    const theirs = base.replace('"B": "2", ', '"B": "2", "C": "3", ').replace("// the Worker", "// the Worker, renamed nowhere");
    const merged = mergeJsonc(base, ours, theirs);
    assert.ok(merged, "merged");
    assert.match(merged, /\/\/ the Worker, renamed nowhere/u);
    const value = JSON.parse(merged.replace(/\/\/[^\n]*/gu, "").replace(/,(\s*[}\]])/gu, "$1"));
    assert.deepEqual(value, { name: "desk", vars: { A: "team", C: "3" }, list: [1, 2], mine: true });
  });

  test("refused when both change the same value, or the release removes what the team changed", () => {
    assert.equal(mergeJsonc(base, base.replace('"A": "1"', '"A": "x"'), base.replace('"A": "1"', '"A": "y"')), null);
    assert.equal(mergeJsonc(base, base.replace('"B": "2"', '"B": "x"'), base.replace('"vars": { "A": "1", "B": "2", },', "")), null);
    assert.equal(mergeJsonc(base, base.replace("[1, 2]", "[1, 2, 3]"), base.replace("[1, 2]", "[0, 1, 2]")), null, "arrays of other lengths are one value");
  });

  test("package.json: the release's dependency versions, the team's additions and scripts", () => {
    const b = { name: "desk", scripts: { test: "vitest" }, dependencies: { hono: "4.0.0", jose: "6.0.0" } };
    const o = { name: "desk", scripts: { test: "vitest --run", seed: "node seed.mjs" }, dependencies: { hono: "4.0.1", jose: "6.0.0", zod: "3.0.0" } };
    const t = { name: "desk", scripts: { test: "vitest run" }, dependencies: { hono: "4.13.0", jose: "6.2.0", canonicalize: "2.1.0" } };
    const { value, conflicts, dependencies } = mergePackageJson(b, o, t);
    assert.deepEqual(value.dependencies, { canonicalize: "2.1.0", hono: "4.13.0", jose: "6.2.0", zod: "3.0.0" });
    assert.deepEqual(value.scripts, { test: "vitest --run", seed: "node seed.mjs" });
    assert.deepEqual(conflicts, [{ key: "scripts.test", yours: "vitest --run", release: "vitest run" }]);
    assert.deepEqual(
      dependencies.map((d) => `${d.name} ${d.from}→${d.to}`),
      ["canonicalize null→2.1.0", "hono 4.0.1→4.13.0", "jose 6.0.0→6.2.0"],
    );
  });
});
