// The files a project is made of, rendered in memory from a package's template/: what the
// scaffolder writes into a new folder and what `upgrade` compares a project against. Rendering is
// a pure function of the package and the project's name, so the same release renders the same bytes.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** Prefix of every resource name in template/wrangler.jsonc; replaced by the project's name. */
export const TEMPLATE_PREFIX = "safest-tools";
/** The script a project runs to take a new release (npm run upgrade). */
export const UPGRADE_SCRIPT = "npx --yes create-safest-tools@latest upgrade";

/** Never copied, wherever they sit: dependencies, local state, local secrets, logs. */
const SKIPPED_NAMES = new Set(["node_modules", ".wrangler", ".safest-state", ".safest-tools", ".git", ".gitignore", ".npmignore", ".DS_Store", ".vite", ".vite-temp"]);
/** Never copied, relative to template/: build output, generated files, the README (written anew). */
const SKIPPED_PATHS = new Set(["dist", "coverage", "console-dist", "src/workflows/kernel/kernel-source.generated.ts", "README.md"]);

/** A package's folders: its template, docs and the files the CLI writes into every project. */
export function packagePaths(packageRoot) {
  return {
    root: packageRoot,
    template: path.join(packageRoot, "template"),
    docs: path.join(packageRoot, "docs"),
    projectFiles: path.join(packageRoot, "bin", "project"),
  };
}

export function packageVersion(packageRoot) {
  return JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8")).version;
}

/** Every file under `from` that goes into a project, as [relative path with /, absolute path]. */
function collect(from, skippedPaths, relative = "") {
  const found = [];
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const rel = relative ? `${relative}/${entry.name}` : entry.name;
    if (SKIPPED_NAMES.has(entry.name) || skippedPaths.has(rel)) continue;
    if (entry.name.endsWith(".log") || entry.name.endsWith(".upgrade")) continue;
    // Local secrets (.dev.vars, .dev.vars.<env>, .env, .env.<env>); only the examples are copied.
    if (/^\.(dev\.vars|env)(\..+)?$/u.test(entry.name) && !entry.name.endsWith(".example")) continue;
    const source = path.join(from, entry.name);
    if (entry.isDirectory()) found.push(...collect(source, skippedPaths, rel));
    else if (entry.isFile()) found.push([rel, source]);
  }
  return found;
}

/** JSONC (comments, trailing commas) to JSON text, respecting strings. */
export function jsoncToJson(text) {
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

export function parseJsonc(text) {
  return JSON.parse(jsoncToJson(text));
}

/** Renames every "safest-tools…" string of a wrangler config to "<name>…"; binding names stay. */
function renameWranglerConfig(text, name) {
  return text.replace(new RegExp(`"${TEMPLATE_PREFIX}((?:-[a-z0-9]+)*)"`, "gu"), (_match, suffix) => JSON.stringify(`${name}${suffix}`));
}

/** What a wrangler config binds and the Cloudflare resources behind it. */
export function describeConfig(config) {
  const producers = config.queues?.producers ?? [];
  const queueNames = [...new Set([...producers.map((q) => q.queue), ...(config.queues?.consumers ?? []).map((q) => q.queue)])];
  return {
    worker: config.name,
    databases: (config.d1_databases ?? []).map((d) => ({ binding: d.binding, name: d.database_name, id: d.database_id })),
    buckets: (config.r2_buckets ?? []).map((b) => ({ binding: b.binding, name: b.bucket_name })),
    queues: queueNames.map((name) => ({
      name,
      bindings: producers.filter((q) => q.queue === name).map((q) => q.binding),
      consumed: (config.queues?.consumers ?? []).some((q) => q.queue === name),
    })),
    workflows: (config.workflows ?? []).map((w) => ({ binding: w.binding, name: w.name, className: w.class_name })),
    loaders: (config.worker_loaders ?? []).map((l) => l.binding),
    durableObjects: (config.durable_objects?.bindings ?? []).map((d) => ({ binding: d.name, className: d.class_name })),
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
function secretNames(text) {
  if (text === undefined) return Object.keys(SECRET_MEANINGS);
  return text
    .split(/\r?\n/u)
    .map((line) => /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/u.exec(line)?.[1])
    .filter(Boolean);
}

/** The README sections that depend on wrangler.jsonc: the bindings table and the create commands. */
function readmeValues(described, secrets) {
  const code = (value) => `\`${value}\``;
  const rows = [
    ...described.databases.map((d) => `| ${code(d.binding)} | D1 database | ${code(d.name)} (schema in \`migrations/\`) |`),
    ...described.buckets.map((b) => `| ${code(b.binding)} | R2 bucket | ${code(b.name)} |`),
    ...described.queues.map(
      (q) => `| ${q.bindings.map(code).join(", ") || "(consumer only)"} | Queue, ${q.bindings.length > 0 ? "producer" : ""}${q.bindings.length > 0 && q.consumed ? " and " : ""}${q.consumed ? "consumer" : ""} | ${code(q.name)} |`,
    ),
    ...described.workflows.map((w) => `| ${code(w.binding)} | Workflow (class ${code(w.className)}) | ${code(w.name)}, created by \`wrangler deploy\` |`),
    ...described.loaders.map((binding) => `| ${code(binding)} | Worker Loader | nothing to create |`),
    ...described.durableObjects.map((d) => `| ${code(d.binding)} | Durable Object namespace (class ${code(d.className)}, SQLite storage) | created by \`wrangler deploy\` (\`migrations\` in wrangler.jsonc) |`),
    ...secrets.map((secret) => `| ${code(secret)} | secret | ${SECRET_MEANINGS[secret] ?? "see `.dev.vars.example`"} |`),
    "| `REPORT_MASTER_KEY_PREVIOUS` | secret, optional | the old key while you rotate `REPORT_MASTER_KEY` |",
    "| `AUDIT_CHECKPOINT_KEY_PREVIOUS` | secret, optional | the old key while you rotate `AUDIT_CHECKPOINT_KEY` |",
  ];
  const create = [
    ...described.databases.flatMap((d, i) => [`npx wrangler d1 create ${d.name}`, `#   → copy the database_id it prints into wrangler.jsonc (d1_databases[${i}].database_id),`, "#     in place of 00000000-0000-0000-0000-000000000000"]),
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

/**
 * The project `name` as this package makes it: a Map from relative path (with /) to its bytes,
 * sorted by path. Throws when the template is missing or its resources cannot be named.
 */
export function renderProject(packageRoot, name) {
  const dirs = packagePaths(packageRoot);
  if (!existsSync(path.join(dirs.template, "wrangler.jsonc"))) throw new Error(`the template is missing from ${dirs.template}`);
  const files = new Map();
  for (const [rel, source] of collect(dirs.template, SKIPPED_PATHS)) files.set(rel, readFileSync(source));
  if (existsSync(dirs.docs)) for (const [rel, source] of collect(dirs.docs, new Set())) files.set(`docs/${rel}`, readFileSync(source));
  const text = (rel) => files.get(rel)?.toString("utf8");
  const put = (rel, value) => files.set(rel, Buffer.from(value, "utf8"));

  // In the repository the examples link to ../../docs; in a project, docs/ is a sibling.
  if (files.has("examples/README.md")) put("examples/README.md", text("examples/README.md").replaceAll("](../../docs/", "](../docs/"));

  const pkg = JSON.parse(text("package.json"));
  put("package.json", `${JSON.stringify({ ...pkg, name, version: "0.1.0", private: true, scripts: { ...pkg.scripts, upgrade: UPGRADE_SCRIPT } }, null, 2)}\n`);

  const wrangler = renameWranglerConfig(text("wrangler.jsonc"), name);
  put("wrangler.jsonc", wrangler);
  const described = describeConfig(parseJsonc(wrangler));
  checkNamed(described, name);
  if (files.has("bench/wrangler.jsonc")) put("bench/wrangler.jsonc", renameWranglerConfig(text("bench/wrangler.jsonc"), name));

  // npm leaves .gitignore files out of published packages, so the CLI carries its own.
  files.set(".gitignore", readFileSync(path.join(dirs.projectFiles, "gitignore")));
  const values = { name, ...readmeValues(described, secretNames(text(".dev.vars.example"))) };
  put("README.md", fill(readFileSync(path.join(dirs.projectFiles, "README.md"), "utf8"), values));
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
