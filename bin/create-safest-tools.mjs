#!/usr/bin/env node
// create-safest-tools: `npm create safest-tools@latest my-desk` copies the platform (template/) into
// a new folder, names the project, its Worker and its D1 / R2 / Queue / Workflow resources after
// it, writes its README and .gitignore, and (if asked) runs `npm install` there.
//
// Plain ESM on Node >= 20 builtins only: it runs straight from the published package.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const COMMAND = "create-safest-tools";
const packageRoot = fileURLToPath(new URL("..", import.meta.url));
const templateDir = path.join(packageRoot, "template");
const docsDir = path.join(packageRoot, "docs");
const projectFilesDir = fileURLToPath(new URL("project/", import.meta.url));

const DEFAULT_NAME = "safest-tools";
/** Prefix of every resource name in template/wrangler.jsonc; replaced by the project's name. */
const TEMPLATE_PREFIX = "safest-tools";
/** The longest suffix the template appends to the name (the Workflow's). */
const LONGEST_SUFFIX = "-dynamic-workflow";
/** Resource names (Worker, R2 bucket, Queue, Workflow) are at most 63 characters. */
const MAX_NAME_LENGTH = 63 - LONGEST_SUFFIX.length;
const NAME_RULE = `use 1-${MAX_NAME_LENGTH} lowercase letters (a-z), digits and dashes, starting and ending with a letter or digit`;

/** Never copied, wherever they sit: dependencies, local state, local secrets, logs. */
const SKIPPED_NAMES = new Set(["node_modules", ".wrangler", ".safest-state", ".git", ".gitignore", ".npmignore", ".DS_Store", ".vite", ".vite-temp"]);
/** Never copied, relative to template/: build output, generated files, the README (written anew). */
const SKIPPED_PATHS = new Set(["dist", "coverage", "console-dist", "src/workflows/kernel/kernel-source.generated.ts", "README.md"]);

class UserError extends Error {}

const HELP = `Create a Safest Tools project: an open Trust & Safety platform on Cloudflare Workers.

Usage:
  npm create safest-tools@latest [dir] [-- options]
  ${COMMAND} [dir] [options]

Arguments:
  dir               folder to create (default: the project name); must be empty or absent

Options:
  --name <name>     project name (default: the folder's name); also names the Worker and its
                    D1 database, R2 bucket, Queues and Workflow. 1-${MAX_NAME_LENGTH} lowercase letters,
                    digits and dashes, starting and ending with a letter or digit.
  -y, --yes         ask nothing: take the defaults (and install the dependencies)
  --install         run npm install in the new project (the default)
  --no-install      do not run npm install
  -h, --help        show this help
  -v, --version     show the version

In a terminal it asks for the project name and whether to install the dependencies; otherwise it
takes the flags and defaults. With npm create, put options after --, e.g.
  npm create safest-tools@latest my-desk -- --yes --no-install`;

function version() {
  return JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8")).version;
}

function parse(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        name: { type: "string" },
        yes: { type: "boolean", short: "y" },
        install: { type: "boolean" },
        "no-install": { type: "boolean" },
        help: { type: "boolean", short: "h" },
        version: { type: "boolean", short: "v" },
      },
    });
  } catch (error) {
    const message = String(error?.message ?? error);
    // parseArgs quotes the option: '--foo', '--name <value>', '-y, --yes'.
    const option = /'([^']+)'/u.exec(message)?.[1]?.split(/[ ,]+/u).filter((part) => part.startsWith("-")).pop() ?? "";
    if (error?.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw new UserError(`Unknown option ${option}; run ${COMMAND} --help to see the options.`);
    if (error?.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      if (/does not take an argument/u.test(message)) throw new UserError(`Option ${option} does not take a value; run ${COMMAND} --help to see the options.`);
      throw new UserError(`Option ${option} needs a value, as in --name my-desk.`);
    }
    throw new UserError(message.split("\n")[0]);
  }
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new UserError(`Expected at most one folder, got ${positionals.length}: ${positionals.join(" ")}.`);
  if (values.install && values["no-install"]) throw new UserError("Choose one of --install and --no-install.");
  return {
    dir: positionals[0],
    name: values.name,
    yes: values.yes === true,
    install: values["no-install"] ? false : values.install ? true : undefined,
    help: values.help === true,
    version: values.version === true,
  };
}

/** Why `name` is not a usable project name, or null when it is. */
function nameProblem(name) {
  if (typeof name !== "string" || name.length === 0) return `The project name is empty: ${NAME_RULE}.`;
  if (name.length > MAX_NAME_LENGTH || !/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/u.test(name)) return `Invalid project name ${JSON.stringify(name)}: ${NAME_RULE}.`;
  // npm refuses names of Node's core modules for new packages.
  if (builtinModules.includes(name)) return `Invalid project name ${JSON.stringify(name)}: it is the name of a Node.js core module; choose another.`;
  return null;
}

/** A valid name made from a folder name, for the prompt's default. */
function suggestName(from) {
  const slug = String(from ?? "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/gu, "-")
    .replace(/^-+|-+$/gu, "")
    .slice(0, MAX_NAME_LENGTH)
    .replace(/-+$/u, "");
  return nameProblem(slug) === null ? slug : DEFAULT_NAME;
}

/** Why `target` cannot receive the project, or null. Empty means nothing but perhaps .git. */
function targetProblem(target, shown) {
  if (!existsSync(target)) return null;
  if (!statSync(target).isDirectory()) return `${shown} exists and is not a folder; choose another folder.`;
  const entries = readdirSync(target).filter((entry) => entry !== ".git");
  if (entries.length > 0) return `${shown} is not empty (${entries.length} ${entries.length === 1 ? "entry" : "entries"}); choose an empty or new folder.`;
  return null;
}

async function ask(questions) {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  rl.on("SIGINT", () => {
    process.stdout.write("\n");
    console.error("Cancelled.");
    process.exit(130);
  });
  // Lines are queued as they come, so answers typed or pasted ahead of a prompt are not lost.
  const lines = [];
  const waiting = [];
  let closed = false;
  rl.on("line", (line) => (waiting.length > 0 ? waiting.shift()(line) : lines.push(line)));
  rl.on("close", () => {
    closed = true;
    while (waiting.length > 0) waiting.shift()(null);
  });
  const question = async (text) => {
    rl.setPrompt(text);
    rl.prompt();
    const line = lines.length > 0 ? lines.shift() : closed ? null : await new Promise((resolve) => waiting.push(resolve));
    if (line === null) {
      process.stdout.write("\n");
      throw new UserError("Cancelled: no answer.");
    }
    return line.trim();
  };
  try {
    return await questions(question);
  } finally {
    rl.close();
  }
}

/** Settles the folder, name and install choice, asking in a terminal unless --yes. */
async function resolveOptions(options) {
  const interactive = process.stdin.isTTY === true && !options.yes;
  if (options.name !== undefined) {
    const problem = nameProblem(options.name);
    if (problem) throw new UserError(problem);
  }
  let { dir, name, install } = options;

  if (!interactive) {
    name ??= dir === undefined ? DEFAULT_NAME : path.basename(path.resolve(dir));
    const problem = nameProblem(name);
    if (problem) throw new UserError(options.name === undefined && dir !== undefined ? `${problem.replace(/\.$/u, "")} (taken from the folder name; pass --name).` : problem);
    return { dir: dir ?? name, name, install: install ?? true };
  }

  if (dir !== undefined) {
    const problem = targetProblem(path.resolve(dir), dir);
    if (problem) throw new UserError(problem);
  }
  return ask(async (question) => {
    if (name === undefined) {
      const fallback = dir === undefined ? DEFAULT_NAME : suggestName(path.basename(path.resolve(dir)));
      for (;;) {
        const answer = (await question(`Project name (${fallback}): `)) || fallback;
        // Without a folder argument the project goes to ./<name>, which must be free too.
        const problem = nameProblem(answer) ?? (dir === undefined ? targetProblem(path.resolve(answer), answer) : null);
        if (problem === null) {
          name = answer;
          break;
        }
        console.error(problem);
      }
    }
    dir ??= name;
    const problem = targetProblem(path.resolve(dir), dir);
    if (problem) throw new UserError(problem);
    if (install === undefined) {
      const answer = (await question("Install the dependencies with npm now? (Y/n) ")).toLowerCase();
      install = !["n", "no"].includes(answer);
    }
    return { dir, name, install };
  });
}

/** Copies a folder into `to`, leaving out dependencies, local state and build output. */
function copyTree(from, to, skippedPaths, relative = "") {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const rel = relative ? `${relative}/${entry.name}` : entry.name;
    if (SKIPPED_NAMES.has(entry.name) || skippedPaths.has(rel)) continue;
    if (entry.name.endsWith(".log")) continue;
    // Local secrets (.dev.vars, .dev.vars.<env>, .env, .env.<env>); only the examples are copied.
    if (/^\.(dev\.vars|env)(\..+)?$/u.test(entry.name) && !entry.name.endsWith(".example")) continue;
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) copyTree(source, target, skippedPaths, rel);
    else if (entry.isFile()) copyFileSync(source, target);
  }
}

/** JSONC (comments, trailing commas) to JSON text, respecting strings. */
function jsoncToJson(text) {
  let out = "";
  for (let i = 0; i < text.length; i += 1) {
    const char = text[i];
    if (char === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j;
    } else if (char === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i += 1;
      out += "\n";
    } else if (char === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end === -1 ? text.length : end + 1;
    } else {
      out += char;
    }
  }
  return out.replace(/,(\s*[}\]])/gu, "$1");
}

/** Renames every "safest-tools…" string of a wrangler config to "<name>…"; binding names stay. */
function renameWranglerConfig(file, name) {
  const text = readFileSync(file, "utf8");
  const renamed = text.replace(new RegExp(`"${TEMPLATE_PREFIX}((?:-[a-z0-9]+)*)"`, "gu"), (_match, suffix) => JSON.stringify(`${name}${suffix}`));
  writeFileSync(file, renamed);
  return JSON.parse(jsoncToJson(renamed));
}

/** What a wrangler config binds and the Cloudflare resources behind it. */
function describeConfig(config) {
  const producers = config.queues?.producers ?? [];
  const queueNames = [...new Set([...producers.map((q) => q.queue), ...(config.queues?.consumers ?? []).map((q) => q.queue)])];
  return {
    worker: config.name,
    databases: (config.d1_databases ?? []).map((d) => ({ binding: d.binding, name: d.database_name })),
    buckets: (config.r2_buckets ?? []).map((b) => ({ binding: b.binding, name: b.bucket_name })),
    queues: queueNames.map((name) => ({
      name,
      bindings: producers.filter((q) => q.queue === name).map((q) => q.binding),
      consumed: (config.queues?.consumers ?? []).some((q) => q.queue === name),
    })),
    workflows: (config.workflows ?? []).map((w) => ({ binding: w.binding, name: w.name, className: w.class_name })),
    loaders: (config.worker_loaders ?? []).map((l) => l.binding),
  };
}

/** Every resource name of the config, which must all carry the project's name. */
function checkNamed(described, name) {
  const names = [described.worker, ...described.databases.map((d) => d.name), ...described.buckets.map((b) => b.name), ...described.queues.map((q) => q.name), ...described.workflows.map((w) => w.name)];
  const stale = names.filter((value) => typeof value !== "string" || !(value === name || value.startsWith(`${name}-`)));
  if (stale.length > 0 || described.worker !== name) throw new Error(`template/wrangler.jsonc: could not name ${stale.join(", ") || "the Worker"} after the project`);
}

const SECRET_MEANINGS = {
  ADMIN_TOKEN: "bearer token that creates installations (`POST /api/v1/installations`)",
  REPORT_MASTER_KEY: "32 or more random characters; seals personal data in reports. Losing it loses every sealed report",
  AUDIT_CHECKPOINT_KEY: "32 or more random characters; the audit trail's event MACs and checkpoints are derived from it (rotate with `AUDIT_CHECKPOINT_KEY_PREVIOUS`)",
};

/** Names of the secrets that .dev.vars.example lists. */
function secretNames(file) {
  if (!existsSync(file)) return Object.keys(SECRET_MEANINGS);
  return readFileSync(file, "utf8").split(/\r?\n/u).map((line) => /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/u.exec(line)?.[1]).filter(Boolean);
}

/** The README sections that depend on wrangler.jsonc: the bindings table and the create commands. */
function readmeValues(described, secrets) {
  const code = (value) => `\`${value}\``;
  const rows = [
    ...described.databases.map((d) => `| ${code(d.binding)} | D1 database | ${code(d.name)} (schema in \`migrations/\`) |`),
    ...described.buckets.map((b) => `| ${code(b.binding)} | R2 bucket | ${code(b.name)} |`),
    ...described.queues.map((q) => `| ${q.bindings.map(code).join(", ") || "(consumer only)"} | Queue, ${q.bindings.length > 0 ? "producer" : ""}${q.bindings.length > 0 && q.consumed ? " and " : ""}${q.consumed ? "consumer" : ""} | ${code(q.name)} |`),
    ...described.workflows.map((w) => `| ${code(w.binding)} | Workflow (class ${code(w.className)}) | ${code(w.name)}, created by \`wrangler deploy\` |`),
    ...described.loaders.map((binding) => `| ${code(binding)} | Worker Loader | nothing to create |`),
    ...secrets.map((secret) => `| ${code(secret)} | secret | ${SECRET_MEANINGS[secret] ?? "see `.dev.vars.example`"} |`),
    "| `REPORT_MASTER_KEY_PREVIOUS` | secret, optional | the old key while you rotate `REPORT_MASTER_KEY` |",
    "| `AUDIT_CHECKPOINT_KEY_PREVIOUS` | secret, optional | the old key while you rotate `AUDIT_CHECKPOINT_KEY` |",
  ];
  const create = [
    ...described.databases.flatMap((d, i) => [
      `npx wrangler d1 create ${d.name}`,
      `#   → copy the database_id it prints into wrangler.jsonc (d1_databases[${i}].database_id),`,
      "#     in place of 00000000-0000-0000-0000-000000000000",
    ]),
    ...described.buckets.map((b) => `npx wrangler r2 bucket create ${b.name}`),
    ...described.queues.map((q) => `npx wrangler queues create ${q.name}`),
    ...described.databases.map((d) => `npx wrangler d1 migrations apply ${d.binding} --remote`),
  ];
  return {
    bindings: ["| binding | kind | Cloudflare resource |", "|---|---|---|", ...rows].join("\n"),
    create: create.join("\n"),
    secrets: secrets.map((secret) => `npx wrangler secret put ${secret}`).join("\n"),
    migrate: described.databases.map((d) => `npx wrangler d1 migrations apply ${d.binding} --remote`)[0] ?? "",
  };
}

function fill(text, values) {
  return text.replace(/\{\{(\w+)\}\}/gu, (match, key) => values[key] ?? match);
}

function scaffold({ target, name }) {
  if (!existsSync(path.join(templateDir, "wrangler.jsonc"))) throw new Error(`the template is missing from ${templateDir}`);
  copyTree(templateDir, target, SKIPPED_PATHS);
  if (existsSync(docsDir)) copyTree(docsDir, path.join(target, "docs"), new Set());
  // In the repository the examples link to ../../docs; in a project, docs/ is a sibling.
  const examplesReadme = path.join(target, "examples", "README.md");
  if (existsSync(examplesReadme)) writeFileSync(examplesReadme, readFileSync(examplesReadme, "utf8").replaceAll("](../../docs/", "](../docs/"));

  const pkgFile = path.join(target, "package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
  writeFileSync(pkgFile, `${JSON.stringify({ ...pkg, name, version: "0.1.0", private: true }, null, 2)}\n`);

  const described = describeConfig(renameWranglerConfig(path.join(target, "wrangler.jsonc"), name));
  checkNamed(described, name);
  const bench = path.join(target, "bench", "wrangler.jsonc");
  if (existsSync(bench)) renameWranglerConfig(bench, name);

  // npm leaves .gitignore files out of published packages, so the CLI carries its own.
  writeFileSync(path.join(target, ".gitignore"), readFileSync(path.join(projectFilesDir, "gitignore"), "utf8"));
  const values = { name, ...readmeValues(described, secretNames(path.join(target, ".dev.vars.example"))) };
  writeFileSync(path.join(target, "README.md"), fill(readFileSync(path.join(projectFilesDir, "README.md"), "utf8"), values));
}

function npmInstall(cwd) {
  console.log("\nInstalling dependencies (npm install)...\n");
  const result = spawnSync("npm", ["install"], { cwd, stdio: "inherit", shell: process.platform === "win32" });
  if (result.error) return `npm install could not start (${result.error.message})`;
  if (result.status !== 0) return `npm install failed (exit ${result.status ?? result.signal})`;
  return null;
}

async function main(argv) {
  const options = parse(argv);
  if (options.help) {
    console.log(HELP);
    return;
  }
  if (options.version) {
    console.log(version());
    return;
  }
  const { dir, name, install } = await resolveOptions(options);
  const target = path.resolve(dir);
  const problem = targetProblem(target, dir);
  if (problem) throw new UserError(problem);
  const insidePackage = path.relative(packageRoot, target);
  if (!insidePackage.startsWith("..") && !path.isAbsolute(insidePackage)) throw new UserError(`${dir} is inside the create-safest-tools package; choose a folder outside ${packageRoot}.`);

  const existed = existsSync(target);
  try {
    scaffold({ target, name });
  } catch (error) {
    // Leave no half-made project behind: remove what this run wrote.
    if (!existed) rmSync(target, { recursive: true, force: true });
    else for (const entry of readdirSync(target)) if (entry !== ".git") rmSync(path.join(target, entry), { recursive: true, force: true });
    throw error;
  }
  const shown = path.relative(process.cwd(), target) || ".";
  console.log(`\nCreated ${name} in ${target}`);

  const installProblem = install ? npmInstall(target) : null;
  const cd = shown === "." ? [] : [`  cd ${/\s/u.test(shown) ? JSON.stringify(shown) : shown}`];
  const steps = [
    "",
    "Next steps:",
    ...cd,
    ...(install && !installProblem ? [] : ["  npm install"]),
    "  npm start          # runs it locally on http://127.0.0.1:8787, no Cloudflare account needed",
    "  npm test           # typecheck, workerd tests, wrangler dev smoke tests",
    "",
    "To deploy: create the D1 database, R2 bucket and Queues and set the secrets as README.md",
    "describes (Deploy to Cloudflare), then run npm run deploy.",
  ];
  console.log(steps.join("\n"));
  if (installProblem) throw new UserError(`${installProblem}; the project is in ${shown}, run npm install there.`);
}

try {
  await main(process.argv.slice(2));
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  const line = message.split("\n")[0];
  console.error(error instanceof UserError ? line : `${COMMAND}: ${line}`);
  process.exitCode = 1;
}
