#!/usr/bin/env node
// create-safest-tools: `npm create safest-tools@latest my-desk` copies the platform (template/) into
// a new folder, names the project, its Worker and its D1 / R2 / Queue / Workflow resources after
// it, writes its README and .gitignore, records the release in .safest-tools/ and (if asked) runs
// `npm install` there. `create-safest-tools upgrade` takes a project to this release
// (lib/upgrade.mjs).
//
// Plain ESM on Node >= 20 builtins only: it runs straight from the published package.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { writeRecord } from "./lib/record.mjs";
import { packageVersion, renderProject } from "./lib/render.mjs";
import { upgradeCommand } from "./lib/upgrade-command.mjs";
import { UserError } from "./lib/user-error.mjs";

const COMMAND = "create-safest-tools";
const packageRoot = fileURLToPath(new URL("..", import.meta.url));

const DEFAULT_NAME = "safest-tools";
/** The longest suffix the template appends to the name (the Workflow's). */
const LONGEST_SUFFIX = "-dynamic-workflow";
/** Resource names (Worker, R2 bucket, Queue, Workflow) are at most 63 characters. */
const MAX_NAME_LENGTH = 63 - LONGEST_SUFFIX.length;
const NAME_RULE = `use 1-${MAX_NAME_LENGTH} lowercase letters (a-z), digits and dashes, starting and ending with a letter or digit`;

const HELP = `Create a Safest Tools project: an open Trust & Safety platform on Cloudflare Workers.

Usage:
  npm create safest-tools@latest [dir] [-- options]
  ${COMMAND} [dir] [options]
  ${COMMAND} upgrade [dir] [--dry-run]   take a project to this release (upgrade --help)

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
  return packageVersion(packageRoot);
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
    const option =
      /'([^']+)'/u
        .exec(message)?.[1]
        ?.split(/[ ,]+/u)
        .filter((part) => part.startsWith("-"))
        .pop() ?? "";
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

function scaffold({ target, name }) {
  const files = renderProject(packageRoot, name);
  for (const [rel, bytes] of files) {
    const file = path.join(target, rel);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, bytes);
  }
  // What `upgrade` merges against: the release's version and every file as written here.
  writeRecord(target, { version: version(), name, files });
}

function npmInstall(cwd) {
  console.log("\nInstalling dependencies (npm install)...\n");
  const result = spawnSync("npm", ["install"], { cwd, stdio: "inherit", shell: process.platform === "win32" });
  if (result.error) return `npm install could not start (${result.error.message})`;
  if (result.status !== 0) return `npm install failed (exit ${result.status ?? result.signal})`;
  return null;
}

async function main(argv) {
  if (argv[0] === "upgrade") return upgradeCommand(argv.slice(1), packageRoot);
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
