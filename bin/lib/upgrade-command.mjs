// The `upgrade` command line: options, the report (text or --json) and the exit code (1 when a
// file needs resolving by hand).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { gitAvailable } from "./merge.mjs";
import { RECORD_DIR } from "./record.mjs";
import { applyUpgrade, databaseBindings, planUpgrade } from "./upgrade.mjs";
import { UserError } from "./user-error.mjs";

export const UPGRADE_HELP = `Upgrade a Safest Tools project to this release of create-safest-tools.

Usage:
  npm run upgrade [-- options]                       (in the project)
  npx create-safest-tools@latest upgrade [dir] [options]

Arguments:
  dir               the project's folder (default: the current folder)

Options:
  --dry-run         print what would change; write nothing
  --json            print the report as JSON
  --no-git          do not merge with git merge-file: files changed by you and by the release
                    get the release's version next to them as <file>.upgrade
  --base <dir>      the release the project was made from, as an unpacked package
                    (npm pack create-safest-tools@<version>; tar -xzf; --base package): for a
                    project without .safest-tools/, or to merge against that release instead
  -h, --help        show this help

Files you have not changed are replaced; files only you changed are kept; files both changed are
merged (conflicts are marked, or written as <file>.upgrade; yours is never lost). New files and
migrations are added, files the release deleted are removed if you had not changed them, and
package.json takes the release's dependency versions and keeps your own additions. The exit code
is 1 when a conflict needs resolving by hand.`;

const GROUPS = [
  ["updated", "Updated (you had not changed them)"],
  ["merged", "Merged (your changes and the release's)"],
  ["kept", "Kept as you have them"],
  ["conflict", "Conflicts (resolve by hand)"],
  ["added", "Added (new in the release)"],
  ["removed", "Removed (deleted by the release; you had not changed them)"],
];

function parse(argv) {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { "dry-run": { type: "boolean" }, json: { type: "boolean" }, "no-git": { type: "boolean" }, base: { type: "string" }, help: { type: "boolean", short: "h" } },
    });
    if (positionals.length > 1) throw new UserError(`Expected at most one project folder, got ${positionals.length}: ${positionals.join(" ")}.`);
    return { dir: positionals[0] ?? ".", dryRun: values["dry-run"] === true, json: values.json === true, git: values["no-git"] !== true, base: values.base, help: values.help === true };
  } catch (error) {
    if (error instanceof UserError) throw error;
    const option = /'([^']+)'/u.exec(String(error?.message))?.[1] ?? "";
    throw new UserError(`${error?.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? `Unknown option ${option}` : String(error?.message).split("\n")[0]}; run create-safest-tools upgrade --help to see the options.`);
  }
}

/** Files that are not committed, when the project is a git work tree: the upgrade is easier to review from a clean one. */
function uncommitted(projectDir) {
  const result = spawnSync("git", ["status", "--porcelain", "--", "."], { cwd: projectDir, encoding: "utf8" });
  if (result.status !== 0) return null;
  return result.stdout.split("\n").filter(Boolean).length;
}

/** migrations/*.sql that neither release ships: the team's own, sorted. */
function ownMigrations(projectDir, plan) {
  const known = new Set([...plan.files.keys(), ...plan.entries.map((e) => e.path)]);
  try {
    return readdirSync(path.join(projectDir, "migrations"))
      .filter((f) => f.endsWith(".sql"))
      .map((f) => `migrations/${f}`)
      .filter((rel) => !known.has(rel))
      .sort();
  } catch {
    return [];
  }
}

/** The report's facts, without the file contents. */
export function summarize(plan, { dryRun, projectDir }) {
  const by = (status) => plan.entries.filter((e) => e.status === status).map((e) => (e.detail ? { path: e.path, detail: e.detail } : { path: e.path }));
  const summary = { project: plan.name, from: plan.from, to: plan.to, dryRun, ...Object.fromEntries(GROUPS.map(([status]) => [status, by(status)])), unchanged: by("unchanged").length };
  summary.dependencies = plan.packageJson.dependencies;
  const migrations = summary.added.filter((e) => /^migrations\/[^/]+\.sql$/u.test(e.path)).map((e) => e.path);
  const steps = [];
  if (summary.conflict.length > 0) steps.push("resolve the conflicts above (search the files for <<<<<<<, or merge each <file>.upgrade into <file> and delete it)");
  if (summary.dependencies.length > 0 || summary.updated.concat(summary.merged).some((e) => e.path === "package.json")) steps.push("npm install");
  if (migrations.length > 0) {
    steps.push(
      `new migrations (${migrations.map((m) => path.posix.basename(m)).join(", ")}): npm start applies them to the local state; before deploying run ${databaseBindings(projectDir)
        .map((b) => `npx wrangler d1 migrations apply ${b} --remote`)
        .join(" and ")}`,
    );
  }
  const own = ownMigrations(projectDir, plan);
  const early = migrations.filter((m) => own.some((o) => o > m));
  if (early.length > 0) {
    steps.push(
      `check the order of migrations: ${early.map((m) => path.posix.basename(m)).join(", ")} sort${early.length === 1 ? "s" : ""} before your own ${own.at(-1).split("/").pop()}; wrangler applies every migration not yet applied, in name order`,
    );
  }
  const changed = GROUPS.some(([status]) => status !== "kept" && summary[status].length > 0);
  if (changed) steps.push("npm test", `review the changes (git diff) and commit them with ${RECORD_DIR}/`);
  summary.nextSteps = dryRun && changed ? ["run again without --dry-run to apply it", ...steps] : steps;
  return summary;
}

function format(summary, { dirty }) {
  const lines = [];
  const head = summary.from === summary.to ? `${summary.project} is at create-safest-tools ${summary.to}` : `Upgrading ${summary.project} from create-safest-tools ${summary.from} to ${summary.to}`;
  lines.push(`${head}${summary.dryRun ? " (dry run: nothing written)" : ""}.`);
  if (dirty) lines.push(`Note: ${dirty} file${dirty === 1 ? " is" : "s are"} not committed; commit first so that git diff shows what the upgrade changed.`);
  for (const [status, title] of GROUPS) {
    const entries = summary[status];
    if (entries.length === 0) continue;
    lines.push("", `${title}: ${entries.length}`);
    for (const e of entries) lines.push(`  ${e.path}${e.detail ? `  (${e.detail})` : ""}`);
  }
  if (summary.dependencies.length > 0) {
    lines.push("", "package.json dependencies:");
    for (const d of summary.dependencies) lines.push(`  ${d.name} ${d.from ?? "(new)"} → ${d.to ?? "(removed)"}`);
  }
  lines.push("", `Unchanged: ${summary.unchanged} file${summary.unchanged === 1 ? "" : "s"}.`);
  if (summary.nextSteps.length === 0) lines.push("Nothing to do.");
  else lines.push("", "Next steps:", ...summary.nextSteps.map((step) => `  ${step}`));
  return lines.join("\n");
}

export function upgradeCommand(argv, packageRoot) {
  const options = parse(argv);
  if (options.help) {
    console.log(UPGRADE_HELP);
    return;
  }
  const projectDir = path.resolve(options.dir);
  const useGit = options.git && gitAvailable();
  const plan = planUpgrade({ projectDir, packageRoot, useGit, baseRoot: options.base === undefined ? undefined : path.resolve(options.base) });
  const dirty = uncommitted(projectDir);
  if (!options.dryRun) applyUpgrade(projectDir, plan);
  const summary = summarize(plan, { dryRun: options.dryRun, projectDir });
  console.log(options.json ? JSON.stringify(summary, null, 2) : format(summary, { dirty }));
  if (summary.conflict.length > 0) process.exitCode = 1;
}
