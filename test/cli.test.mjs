// The scaffolder's command line: --help, --version, each refusal (one line on stderr, a non-zero
// exit, no stack trace, nothing written), the prompts in a terminal, what a project leaves out, and
// the packed package run the way `npm create safest-tools` runs it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const bin = path.join(root, "bin", "create-safest-tools.mjs");
const rootPackage = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));

let work;
before(() => {
  work = mkdtempSync(path.join(tmpdir(), "create-safest-tools-cli-"));
});
after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A clean environment: nothing from the `npm test` that runs these tests leaks into npm below. */
function cleanEnv(extra = {}) {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/iu.test(key))), ...extra };
}

/** Runs the CLI with stdin that is not a terminal (so it asks nothing). */
function cli(args, { cwd = work, script = bin } = {}) {
  const result = spawnSync(process.execPath, [script, ...args], { cwd, input: "", encoding: "utf8", env: cleanEnv(), timeout: 60_000 });
  assert.equal(result.error, undefined, String(result.error));
  return result;
}

/** A fresh, empty folder under the test's temporary folder. */
function freshDir(name) {
  const dir = path.join(work, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function assertRefused(result, pattern) {
  assert.notEqual(result.status, 0, `expected a non-zero exit; stdout: ${result.stdout}`);
  const stderr = result.stderr.trimEnd();
  assert.equal(stderr.split("\n").length, 1, `expected one line on stderr, got:\n${stderr}`);
  assert.match(stderr, pattern);
  assert.doesNotMatch(stderr, /\bat .*:\d+:\d+|Error:|node:internal/u, "no stack trace");
  assert.equal(result.stdout, "", "nothing on stdout");
}

/** Every file under `dir`, relative, with / separators. */
function listFiles(dir, prefix = "") {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const rel = `${prefix}${entry.name}`;
    return entry.isDirectory() ? [`${rel}/`, ...listFiles(path.join(dir, entry.name), `${rel}/`)] : [rel];
  });
}

const LOCAL_STATE = /(^|\/)(node_modules|\.wrangler|\.safest-state|\.vite)\/|(^|\/)\.dev\.vars$|kernel-source\.generated\.ts$|\.log$/u;

describe("--help and --version", () => {
  test("--help prints the usage and every option, exit 0", () => {
    for (const flag of ["--help", "-h"]) {
      const result = cli([flag]);
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stderr, "");
      assert.match(result.stdout, /^Usage:/mu);
      assert.match(result.stdout, /npm create safest-tools@latest \[dir\]/u);
      for (const option of ["--name <name>", "--yes", "--no-install", "--install", "--help", "--version"]) assert.ok(result.stdout.includes(option), `help mentions ${option}`);
    }
  });

  test("--version prints the package's version, exit 0", () => {
    for (const flag of ["--version", "-v"]) {
      const result = cli([flag]);
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stdout, `${rootPackage.version}\n`);
      assert.equal(result.stderr, "");
    }
  });

  test("package.json wires the bin and publishes bin/, template/ and docs/", () => {
    assert.equal(rootPackage.bin["create-safest-tools"], "bin/create-safest-tools.mjs");
    for (const entry of ["bin/", "template/", "docs/"]) assert.ok(rootPackage.files.includes(entry), `files has ${entry}`);
    assert.match(readFileSync(bin, "utf8"), /^#!\/usr\/bin\/env node\n/u);
  });
});

describe("refusals: one line on stderr, a non-zero exit, nothing written", () => {
  test("a non-empty target folder", () => {
    const cwd = freshDir("refuse-non-empty");
    mkdirSync(path.join(cwd, "my-desk"));
    writeFileSync(path.join(cwd, "my-desk", "notes.txt"), "mine\n");
    const result = cli(["my-desk", "--yes", "--no-install", "--name", "my-desk"], { cwd });
    assertRefused(result, /my-desk is not empty/u);
    assert.deepEqual(readdirSync(path.join(cwd, "my-desk")), ["notes.txt"]);
  });

  test("a target that is a file", () => {
    const cwd = freshDir("refuse-file");
    writeFileSync(path.join(cwd, "my-desk"), "");
    assertRefused(cli(["my-desk", "--yes", "--no-install"], { cwd }), /my-desk exists and is not a folder/u);
  });

  test("an invalid project name, given with --name or taken from the folder", () => {
    const cwd = freshDir("refuse-name");
    for (const name of ["My Desk", "my_desk", "-desk", "desk-", "@scope/desk", "ça", "a".repeat(47), "http"]) {
      const result = cli(["desk", "--yes", "--no-install", `--name=${name}`], { cwd });
      assertRefused(result, /Invalid project name .*(lowercase letters \(a-z\), digits and dashes|core module)/u);
    }
    assertRefused(cli(["Big Desk", "--yes", "--no-install"], { cwd }), /Invalid project name "Big Desk": .*pass --name/u);
    assertRefused(cli(["desk", "--yes", "--name="], { cwd }), /project name is empty/u);
    assert.deepEqual(readdirSync(cwd), []);
  });

  test("an unknown flag, and other misuse of the options", () => {
    const cwd = freshDir("refuse-flag");
    assertRefused(cli(["my-desk", "--template", "react"], { cwd }), /^Unknown option --template; run create-safest-tools --help/u);
    assertRefused(cli(["my-desk", "-x"], { cwd }), /^Unknown option -x/u);
    assertRefused(cli(["my-desk", "--name"], { cwd }), /^Option --name needs a value/u);
    assertRefused(cli(["my-desk", "--yes=please"], { cwd }), /^Option --yes does not take a value/u);
    assertRefused(cli(["one", "two"], { cwd }), /^Expected at most one folder/u);
    assertRefused(cli(["my-desk", "--install", "--no-install"], { cwd }), /--install and --no-install/u);
    assert.deepEqual(readdirSync(cwd), []);
  });
});

describe("what goes into a project", () => {
  // A copy of the package with every kind of local state planted in its template, so that what
  // must stay out is known to be there.
  let fakeRoot;
  before(() => {
    fakeRoot = freshDir("package-with-local-state");
    for (const entry of ["bin", "docs", "package.json"]) cpSync(path.join(root, entry), path.join(fakeRoot, entry), { recursive: true });
    const skip = /(^|\/)(node_modules|\.wrangler|\.safest-state)(\/|$)|\/\.dev\.vars$|kernel-source\.generated\.ts$/u;
    cpSync(path.join(root, "template"), path.join(fakeRoot, "template"), { recursive: true, filter: (source) => !skip.test(source) });
    const planted = [
      "node_modules/vitest/package.json",
      "node_modules/.vite/vitest/results.json",
      ".wrangler/state/v3/d1/db.sqlite",
      "bench/.wrangler/tmp/worker.js",
      ".safest-state/demo-installation.json",
      ".dev.vars",
      ".dev.vars.staging",
      ".env",
      "src/workflows/kernel/kernel-source.generated.ts",
      "wrangler-debug.log",
      "dist/index.js",
      ".DS_Store",
    ];
    for (const file of planted) {
      mkdirSync(path.dirname(path.join(fakeRoot, "template", file)), { recursive: true });
      writeFileSync(path.join(fakeRoot, "template", file), "local\n");
    }
    writeFileSync(path.join(fakeRoot, "template", ".gitignore"), "node_modules/\n");
  });

  test("no dependencies, local state, secrets, logs or build output; its own .gitignore and README", () => {
    const cwd = freshDir("scaffold-from-fake");
    const result = cli(["desk", "--yes", "--no-install", "--name", "team-desk"], { cwd, script: path.join(fakeRoot, "bin", "create-safest-tools.mjs") });
    assert.equal(result.status, 0, result.stderr);
    const project = path.join(cwd, "desk");
    const files = listFiles(project);
    const leaked = files.filter((file) => LOCAL_STATE.test(file) || /^(dist|\.env|\.dev\.vars\.staging|\.DS_Store)\b/u.test(file));
    assert.deepEqual(leaked, []);
    for (const file of ["package.json", "wrangler.jsonc", ".dev.vars.example", "README.md", ".gitignore", "examples/triage.json", "docs/graph-format.md", "src/index.ts", "migrations/", "test-node/smoke.test.mjs"]) {
      assert.ok(files.includes(file), `${file} is in the project`);
    }
    // The project's .gitignore is the CLI's (npm leaves template/.gitignore out of the package).
    assert.equal(readFileSync(path.join(project, ".gitignore"), "utf8"), readFileSync(path.join(root, "bin", "project", "gitignore"), "utf8"));
  });

  test("the project's .gitignore covers everything template/.gitignore does", { skip: !existsSync(path.join(root, "template", ".gitignore")) && "no template/.gitignore" }, () => {
    const ours = readFileSync(path.join(root, "bin", "project", "gitignore"), "utf8").split("\n");
    for (const line of readFileSync(path.join(root, "template", ".gitignore"), "utf8").split("\n")) {
      if (line.trim() && !line.startsWith("#")) assert.ok(ours.includes(line), `bin/project/gitignore has ${line}`);
    }
  });
});

test("a failure while copying leaves no half-made project behind, and says so in one line", () => {
  const fakeRoot = freshDir("broken-package");
  for (const entry of ["bin", "package.json"]) cpSync(path.join(root, entry), path.join(fakeRoot, entry), { recursive: true });
  mkdirSync(path.join(fakeRoot, "template"));
  writeFileSync(path.join(fakeRoot, "template", "package.json"), '{ "name": "x", "version": "0.0.0" }\n');
  writeFileSync(path.join(fakeRoot, "template", "wrangler.jsonc"), '{ "name": "something-else", "main": "src/index.ts" }\n');
  const cwd = freshDir("broken-target");
  const result = cli(["desk", "--yes", "--no-install"], { cwd, script: path.join(fakeRoot, "bin", "create-safest-tools.mjs") });
  assertRefused(result, /^create-safest-tools: template\/wrangler\.jsonc: could not name something-else after the project$/u);
  assert.deepEqual(readdirSync(cwd), []);
});

test("in a terminal it asks for the name (again, when invalid) and whether to install", { skip: spawnSync("script", ["--version"]).status !== 0 && "no script(1) to make a terminal" }, () => {
  const cwd = freshDir("interactive");
  // script(1) gives the CLI a pseudo-terminal; the answers are typed ahead, all at once.
  const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(bin)}`;
  const result = spawnSync("script", ["-qec", command, "/dev/null"], { cwd, input: "Bad Name\nteam-desk\nn\n", encoding: "utf8", env: cleanEnv(), timeout: 60_000 });
  const output = result.stdout.replace(/\x1b\[[0-9;]*[A-Za-z]/gu, "");
  assert.equal(result.status, 0, output);
  assert.match(output, /Project name \(safest-tools\):/u);
  assert.match(output, /Invalid project name "Bad Name"/u);
  assert.match(output, /Install the dependencies with npm now\? \(Y\/n\)/u);
  assert.match(output, /Next steps:\s+cd team-desk\s+npm install/u);
  assert.equal(JSON.parse(readFileSync(path.join(cwd, "team-desk", "package.json"), "utf8")).name, "team-desk");
  assert.ok(!existsSync(path.join(cwd, "team-desk", "node_modules")), "answered no to installing");
});

test("the packed package scaffolds a project, as npm create runs it (npm exec create-safest-tools)", () => {
  const packDir = freshDir("pack");
  const cache = freshDir("npm-cache");
  const env = cleanEnv({ npm_config_cache: cache, npm_config_update_notifier: "false", npm_config_audit: "false", npm_config_fund: "false" });
  const pack = spawnSync("npm", ["pack", "--json", "--pack-destination", packDir], { cwd: root, encoding: "utf8", env, timeout: 120_000 });
  assert.equal(pack.status, 0, pack.stderr);
  const [packed] = JSON.parse(pack.stdout);
  const paths = packed.files.map((file) => file.path);
  assert.deepEqual(paths.filter((file) => LOCAL_STATE.test(file)), [], "no local state in the package");
  assert.ok(paths.includes("bin/project/gitignore") && paths.includes("template/wrangler.jsonc") && paths.includes("template/examples/triage.json"));

  const cwd = freshDir("from-tarball");
  const tarball = path.join(packDir, packed.filename);
  const run = spawnSync("npm", ["exec", "--yes", `--package=${tarball}`, "--", "create-safest-tools", "desk", "--yes", "--no-install"], { cwd, encoding: "utf8", env, input: "", timeout: 120_000 });
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /Created desk in /u);
  const files = listFiles(path.join(cwd, "desk"));
  assert.ok(files.includes(".gitignore"), ".gitignore written although npm drops it from packages");
  assert.deepEqual(files.filter((file) => LOCAL_STATE.test(file)), []);
});
