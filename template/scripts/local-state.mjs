// Where `npm start` keeps its state and secrets, for the scripts that talk to that local server
// (backup, restore): the state folder (SAFEST_STATE_DIR, default <repo root>/.safest-state), the
// base URL (PORT, default 8787, on 127.0.0.1), the admin token (ADMIN_TOKEN, else .dev.vars) and
// the demo installation's key (<state>/demo-installation.json), read the way scripts/start.mjs
// records them.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const templateDir = fileURLToPath(new URL("..", import.meta.url));
const devVarsPath = path.join(templateDir, ".dev.vars");

function repoRoot() {
  const parent = path.resolve(templateDir, "..");
  try {
    const pkg = JSON.parse(readFileSync(path.join(parent, "package.json"), "utf8"));
    if (Array.isArray(pkg.workspaces) && pkg.workspaces.some((w) => path.resolve(parent, w) === path.resolve(templateDir))) return parent;
  } catch {
    // No parent package: the template is the project.
  }
  return path.resolve(templateDir);
}

export function stateDir() {
  const configured = process.env.SAFEST_STATE_DIR;
  if (configured) return path.resolve(process.env.INIT_CWD || process.cwd(), configured);
  return path.join(repoRoot(), ".safest-state");
}

export function baseUrl() {
  if (process.env.SAFEST_URL) return process.env.SAFEST_URL.replace(/\/+$/u, "");
  return `http://127.0.0.1:${process.env.PORT ?? "8787"}`;
}

/** The value of KEY in a dotenv file (the subset of dotenv syntax that .dev.vars files use; the last assignment wins). */
export function readDotenvValue(file, key) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  let value;
  for (const line of text.split(/\r?\n/u)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/u.exec(line);
    if (!match || match[1] !== key) continue;
    let raw = match[2].trim();
    const quoted = /^(['"`])(.*)\1$/u.exec(raw);
    if (quoted) raw = quoted[2];
    else raw = raw.replace(/\s+#.*$/u, "");
    value = raw;
  }
  return value;
}

export function adminToken() {
  return process.env.ADMIN_TOKEN || readDotenvValue(devVarsPath, "ADMIN_TOKEN") || null;
}

/** An installation admin key: SAFEST_API_KEY, else the demo installation's (all scopes). */
export function installationKey() {
  if (process.env.SAFEST_API_KEY) return process.env.SAFEST_API_KEY;
  try {
    return JSON.parse(readFileSync(path.join(stateDir(), "demo-installation.json"), "utf8")).apiKey ?? null;
  } catch {
    return null;
  }
}

/** `--name value` from argv. */
export function option(name) {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

export function fail(message) {
  console.error(`[safest] ${message}`);
  process.exit(1);
}
