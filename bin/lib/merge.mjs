// Three-way merges for `upgrade`: text files through `git merge-file`, package.json key by key (the
// release's dependency versions, the team's additions), and a check that a merged wrangler.jsonc
// still parses and still names the team's own resources.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describeConfig, parseJsonc } from "./render.mjs";

export function gitAvailable() {
  const result = spawnSync("git", ["--version"], { encoding: "utf8" });
  return result.status === 0;
}

/**
 * `git merge-file` of the team's file, the base and the release's: { text, conflicts } where
 * conflicts counts the marked hunks (0: a clean merge), or null when git cannot merge them (binary).
 */
export function mergeText(ours, base, theirs, labels) {
  const dir = mkdtempSync(path.join(tmpdir(), "safest-tools-merge-"));
  try {
    const files = ["yours", "base", "release"].map((name) => path.join(dir, name));
    writeFileSync(files[0], ours);
    writeFileSync(files[1], base);
    writeFileSync(files[2], theirs);
    const result = spawnSync("git", ["merge-file", "-p", "-L", labels.ours, "-L", labels.base, "-L", labels.theirs, ...files], { maxBuffer: 64 * 1024 * 1024 });
    // Exit status: the number of conflicts (capped at 127), negative (here > 127) on an error.
    if (result.error || result.status === null || result.status > 127) return null;
    return { text: result.stdout, conflicts: result.status };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const DEPENDENCY_FIELDS = new Set(["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"]);
const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const has = (object, key) => isObject(object) && Object.hasOwn(object, key);

/**
 * package.json merged key by key. Where both changed the same value: a dependency takes the
 * release's version (noted), anything else keeps the team's (a conflict). Returns
 * { value, conflicts: [{ key, yours, release }], dependencies: [{ field, name, from, to }] }.
 */
export function mergePackageJson(base, ours, theirs) {
  const conflicts = [];
  const notes = [];
  const merge = (b, o, t, at) => {
    if (same(o, t)) return o;
    if (same(o, b)) return t;
    if (same(t, b)) return o;
    if (isObject(o) && isObject(t)) {
      const result = {};
      for (const key of [...Object.keys(o), ...Object.keys(t).filter((k) => !has(o, k))]) {
        const bv = has(b, key) ? b[key] : undefined;
        if (!has(o, key)) {
          // The release added it, or the team removed it (kept removed unless the release changed it).
          if (!has(b, key) || !same(bv, t[key])) result[key] = t[key];
          continue;
        }
        if (!has(t, key)) {
          // The team added it, or the release removed it (kept when the team had changed it).
          if (!has(b, key) || !same(bv, o[key])) result[key] = o[key];
          continue;
        }
        result[key] = merge(bv, o[key], t[key], [...at, key]);
      }
      return result;
    }
    const key = at.join(".");
    if (at.length === 2 && DEPENDENCY_FIELDS.has(at[0])) {
      notes.push({ key, yours: o, release: t });
      return t;
    }
    conflicts.push({ key, yours: o, release: t });
    return o;
  };
  const value = merge(base, ours, theirs, []);
  const dependencies = [];
  for (const field of DEPENDENCY_FIELDS) {
    if (!isObject(value[field])) continue;
    // npm keeps dependencies sorted; so do we.
    value[field] = Object.fromEntries(Object.entries(value[field]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    const before = isObject(ours[field]) ? ours[field] : {};
    for (const [name, version] of Object.entries(value[field])) if (before[name] !== version) dependencies.push({ field, name, from: before[name] ?? null, to: version });
    for (const name of Object.keys(before)) if (!has(value[field], name)) dependencies.push({ field, name, from: before[name], to: null });
  }
  return { value, conflicts, overridden: notes, dependencies };
}

/** The names a wrangler config gives its resources, by binding: what an upgrade must not change. */
function resourceNames(config) {
  const described = describeConfig(config);
  const names = new Map([["Worker name", described.worker]]);
  for (const d of described.databases) {
    names.set(`D1 ${d.binding} database_name`, d.name);
    names.set(`D1 ${d.binding} database_id`, d.id);
  }
  for (const b of described.buckets) names.set(`R2 ${b.binding} bucket_name`, b.name);
  for (const q of config.queues?.producers ?? []) names.set(`Queue ${q.binding}`, q.queue);
  for (const w of described.workflows) names.set(`Workflow ${w.binding}`, w.name);
  for (const [key, value] of Object.entries(config.vars ?? {})) names.set(`var ${key}`, value);
  return names;
}

/**
 * Why a merged wrangler.jsonc cannot be used, or null: it must parse, and keep every resource
 * name, D1 database_id and var the team set (those that differ from the base).
 */
export function wranglerProblem(mergedText, oursText, baseText) {
  let merged;
  try {
    merged = parseJsonc(mergedText);
  } catch (error) {
    return `the merged file does not parse (${error.message})`;
  }
  let ours;
  let base;
  try {
    ours = resourceNames(parseJsonc(oursText));
    base = resourceNames(parseJsonc(baseText));
  } catch {
    return null;
  }
  const after = resourceNames(merged);
  const lost = [...ours].filter(([key, value]) => base.get(key) !== value && after.get(key) !== value).map(([key]) => key);
  return lost.length > 0 ? `the merge would lose your ${lost.join(", ")}` : null;
}
