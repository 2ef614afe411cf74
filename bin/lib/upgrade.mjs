// `create-safest-tools upgrade`: takes a project from the release recorded in .safest-tools/ to
// this package's. Each file is compared three ways: as the recorded release wrote it (the base),
// as the team has it, and as this release renders it for the project's name.
//   untouched by the team → replaced            changed by the team only → kept
//   changed by both → merged (git merge-file); a conflict is marked in the file (with git) or the
//   release's version is written next to it as <file>.upgrade; the team's version is never lost
//   new in the release → added                  deleted by the release → removed if untouched
//   migrations/ the release had shipped are never rewritten or removed; new ones are added
//   package.json is merged key by key: the release's dependency versions, the team's additions
// Then .safest-tools/ records the new release. --dry-run computes the same plan and writes nothing.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { mergeJsonc } from "./jsonc.mjs";
import { mergePackageJson, mergeText, wranglerProblem } from "./merge.mjs";
import { BASE_ARCHIVE, MANIFEST, readRecord, sha256, writeRecord } from "./record.mjs";
import { describeConfig, packageVersion, parseJsonc, renderProject } from "./render.mjs";
import { UserError } from "./user-error.mjs";

const isMigration = (rel) => /^migrations\/[^/]+\.sql$/u.test(rel);

/** -1, 0 or 1 for dotted numeric versions (pre-release tags compare as text after the numbers). */
export function compareVersions(a, b) {
  const parse = (v) => String(v).split(/[.+-]/u);
  const [x, y] = [parse(a), parse(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    const [p, q] = [x[i] ?? "0", y[i] ?? "0"];
    const [m, n] = [Number(p), Number(q)];
    const diff = Number.isNaN(m) || Number.isNaN(n) ? p.localeCompare(q) : m - n;
    if (diff !== 0) return Math.sign(diff);
  }
  return 0;
}

function parses(bytes) {
  try {
    parseJsonc(bytes.toString("utf8"));
    return true;
  } catch {
    return false;
  }
}

function readOurs(projectDir, rel) {
  const file = path.join(projectDir, rel);
  return existsSync(file) ? readFileSync(file) : undefined;
}

/**
 * What upgrading `projectDir` to the package at `packageRoot` does, without writing anything:
 * { from, to, name, entries: [{ path, status, detail?, write?, sidecar?, remove? }], packageJson, files }.
 */
export function planUpgrade({ projectDir, packageRoot, useGit, baseRoot }) {
  const record = baseRoot ? recordFrom(projectDir, baseRoot) : readRecord(projectDir);
  if (record === null) {
    throw new UserError(
      `${path.join(projectDir, MANIFEST)} not found: run upgrade in the project's folder (or pass it as the first argument); for a project made before releases were recorded, pass the release it was made from with --base <unpacked package>.`,
    );
  }
  const { manifest } = record;
  const to = packageVersion(packageRoot);
  if (compareVersions(manifest.version, to) > 0) {
    throw new UserError(`This project is at create-safest-tools ${manifest.version}, newer than this package (${to}); run npx create-safest-tools@latest upgrade.`);
  }
  const files = renderProject(packageRoot, manifest.name);
  // A base copy is used only if it is the very file the manifest recorded.
  const base = new Map([...(record.base ?? new Map())].filter(([rel, bytes]) => manifest.files[rel] === sha256(bytes)));
  const labels = { ours: "yours", base: `create-safest-tools ${manifest.version}`, theirs: `create-safest-tools ${to}` };
  const entries = [];
  let packageJson = null;
  const paths = [...new Set([...Object.keys(manifest.files), ...files.keys()])].sort();

  for (const rel of paths) {
    const baseHash = manifest.files[rel];
    const theirs = files.get(rel);
    const theirsHash = theirs && sha256(theirs);
    // A checkout with CRLF line ends (git's core.autocrlf on Windows) is compared and merged as LF,
    // and what is written keeps the team's line ends.
    const disk = readOurs(projectDir, rel);
    const crlf = disk !== undefined && !disk.includes(0) && disk.includes("\r\n") && !(theirs ?? base.get(rel) ?? Buffer.alloc(0)).includes("\r\n");
    const ours = crlf ? Buffer.from(disk.toString("utf8").replaceAll("\r\n", "\n")) : disk;
    const oursHash = ours && sha256(ours);
    const eol = (bytes) => (crlf && bytes ? Buffer.from(bytes.toString("utf8").replace(/\r?\n/gu, "\r\n")) : bytes);
    const entry = (status, extra = {}) => entries.push({ path: rel, status, ...extra, ...(extra.write ? { write: eol(extra.write) } : {}), ...(extra.sidecar ? { sidecar: eol(extra.sidecar) } : {}) });

    if (isMigration(rel) && baseHash !== undefined) {
      // Applied somewhere already: D1 records migrations by name, so never rewrite or remove one.
      if (ours === undefined) entry("unchanged");
      else if (theirs === undefined) entry("kept", { detail: "a migration the release no longer ships; migrations are never removed" });
      else if (oursHash === theirsHash || (oursHash === baseHash && theirsHash === baseHash)) entry("unchanged");
      else if (theirsHash !== baseHash) entry("kept", { detail: "the release changed this migration; applied migrations are never rewritten" });
      else entry("kept", { detail: "changed by you; applied migrations are never rewritten" });
      continue;
    }
    if (baseHash === undefined) {
      // New in this release.
      if (ours === undefined) entry("added", { write: theirs });
      else if (oursHash === theirsHash) entry("unchanged");
      else entry("conflict", { detail: `you have your own ${rel}; the release's is in ${rel}.upgrade`, sidecar: theirs });
      continue;
    }
    if (theirs === undefined) {
      // Deleted by this release.
      if (ours === undefined) entry("unchanged");
      else if (oursHash === baseHash) entry("removed", { remove: true });
      else entry("kept", { detail: "changed by you; the release deleted it" });
      continue;
    }
    if (ours === undefined) {
      if (theirsHash === baseHash) entry("kept", { detail: "deleted by you" });
      else entry("conflict", { detail: `deleted by you and changed by the release; its version is in ${rel}.upgrade`, sidecar: theirs });
      continue;
    }
    if (oursHash === baseHash) {
      entry(theirsHash === baseHash ? "unchanged" : "updated", theirsHash === baseHash ? {} : { write: theirs });
      continue;
    }
    if (theirsHash === baseHash) {
      entry("kept", { detail: "changed by you" });
      continue;
    }
    if (theirsHash === oursHash) {
      entry("unchanged");
      continue;
    }
    // Changed by both.
    const baseBytes = base.get(rel);
    if (rel === "package.json") {
      packageJson = mergePackage(baseBytes, ours, theirs);
      const write = Buffer.from(`${JSON.stringify(packageJson.value, null, 2)}\n`);
      if (packageJson.conflicts.length > 0) {
        const keys = packageJson.conflicts.map((c) => `${c.key} (yours ${JSON.stringify(c.yours)}, release ${JSON.stringify(c.release)})`);
        entry("conflict", { detail: `kept yours for ${keys.join("; ")}`, write });
      } else entry("merged", { write });
      continue;
    }
    if (baseBytes === undefined) {
      entry("conflict", { detail: `no base copy in ${BASE_ARCHIVE} to merge with; the release's version is in ${rel}.upgrade`, sidecar: theirs });
      continue;
    }
    let merged = useGit ? mergeText(ours, baseBytes, theirs, labels) : null;
    if (/\.jsonc?$/u.test(rel) && (merged === null || merged.conflicts > 0 || !parses(merged.text))) {
      // JSON the lines could not merge: merge it value by value instead.
      const byValue = mergeJsonc(baseBytes.toString("utf8"), ours.toString("utf8"), theirs.toString("utf8"));
      if (byValue !== null) merged = { text: Buffer.from(byValue), conflicts: 0, detail: "merged value by value" };
    }
    if (merged === null) {
      const why = useGit ? "git could not merge it" : "no git to merge with";
      entry("conflict", { detail: `${why}; the release's version is in ${rel}.upgrade`, sidecar: theirs });
      continue;
    }
    if (merged.conflicts > 0) {
      const hunks = `${merged.conflicts} conflict${merged.conflicts === 1 ? "" : "s"}`;
      // A config that does not parse stops npm and wrangler: keep the team's file working.
      if (/\.jsonc?$/u.test(rel)) entry("conflict", { detail: `${hunks}; yours is unchanged, the merge with <<<<<<< markers is in ${rel}.upgrade`, sidecar: merged.text });
      else entry("conflict", { detail: `${hunks} marked with <<<<<<< in the file`, write: merged.text });
      continue;
    }
    const problem = rel === "wrangler.jsonc" ? wranglerProblem(merged.text.toString("utf8"), ours.toString("utf8"), baseBytes.toString("utf8")) : null;
    if (problem) entry("conflict", { detail: `${problem}; yours is unchanged, the merge is in ${rel}.upgrade`, sidecar: merged.text });
    else entry("merged", { write: merged.text, ...(merged.detail ? { detail: merged.detail } : {}) });
  }
  if (packageJson === null) {
    const ours = readOurs(projectDir, "package.json");
    const theirs = files.get("package.json");
    packageJson = ours && theirs ? mergePackage(base.get("package.json"), ours, theirs) : { dependencies: [], overridden: [], conflicts: [] };
  }
  return { from: manifest.version, to, name: manifest.name, entries, packageJson, files };
}

/** The record a project would have, rendered from the package it was made from (--base). */
function recordFrom(projectDir, baseRoot) {
  if (!existsSync(path.join(baseRoot, "template", "wrangler.jsonc"))) throw new UserError(`--base ${baseRoot} is not an unpacked create-safest-tools package (no template/wrangler.jsonc in it).`);
  const recorded = readRecord(projectDir)?.manifest;
  let name = recorded?.name;
  if (!name) {
    try {
      name = JSON.parse(readFileSync(path.join(projectDir, "package.json"), "utf8")).name;
    } catch {
      throw new UserError(`No package.json with a name in ${projectDir}: run upgrade in the project's folder.`);
    }
  }
  const base = renderProject(baseRoot, name);
  return { manifest: { version: packageVersion(baseRoot), name, files: Object.fromEntries([...base].map(([rel, bytes]) => [rel, sha256(bytes)])) }, base };
}

function mergePackage(baseBytes, ours, theirs) {
  const parse = (bytes, what) => {
    try {
      return JSON.parse(bytes.toString("utf8"));
    } catch (error) {
      throw new UserError(`${what} package.json is not valid JSON (${error.message}); fix it, then run upgrade again.`);
    }
  };
  return mergePackageJson(baseBytes ? parse(baseBytes, "The recorded") : {}, parse(ours, "Your"), parse(theirs, "The release's"));
}

/** Removes the now-empty folders above a removed file, up to the project. */
function pruneEmpty(projectDir, rel) {
  let dir = path.dirname(path.join(projectDir, rel));
  while (dir.startsWith(projectDir + path.sep) && existsSync(dir) && readdirSync(dir).length === 0) {
    rmdirSync(dir);
    dir = path.dirname(dir);
  }
}

/** Writes the plan: files, removals, .upgrade files, then the new record. */
export function applyUpgrade(projectDir, plan) {
  for (const entry of plan.entries) {
    const file = path.join(projectDir, entry.path);
    if (entry.write) {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, entry.write);
    }
    if (entry.sidecar) {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(`${file}.upgrade`, entry.sidecar);
    }
    if (entry.remove) {
      rmSync(file, { force: true });
      pruneEmpty(projectDir, entry.path);
    }
  }
  writeRecord(projectDir, { version: plan.to, name: plan.name, files: plan.files });
}

/** The D1 bindings of the project's wrangler.jsonc (for the migrations' next step). */
export function databaseBindings(projectDir) {
  try {
    return describeConfig(parseJsonc(readFileSync(path.join(projectDir, "wrangler.jsonc"), "utf8"))).databases.map((d) => d.binding);
  } catch {
    return ["DB"];
  }
}
