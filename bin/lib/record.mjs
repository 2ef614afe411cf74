// What a project records of the release it was made from, in .safest-tools/ (committed with it):
// manifest.json (the package's version, the project's name and the SHA-256 of every file as the
// scaffolder or the last upgrade wrote it) and base.tar.gz (those files themselves, the common
// ancestor of a three-way merge). One archive rather than a folder, so that no tool of the project
// (tsc, vitest, biome, an editor's search) ever mistakes the pristine copies for its sources;
// `tar -xzf .safest-tools/base.tar.gz -C /tmp/base` opens it.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { UserError } from "./user-error.mjs";

export const RECORD_DIR = ".safest-tools";
export const MANIFEST = `${RECORD_DIR}/manifest.json`;
export const BASE_ARCHIVE = `${RECORD_DIR}/base.tar.gz`;

export function sha256(bytes) {
  return createHash("sha256").update(bytes).digest("hex");
}

const BLOCK = 512;

function field(header, offset, length, value) {
  header.write(value, offset, Math.min(length, Buffer.byteLength(value)), "utf8");
}

function octal(value, length) {
  return `${value.toString(8).padStart(length - 1, "0")}\0`;
}

/** A ustar header; paths over 100 bytes are split into prefix and name at a slash. */
function tarHeader(name, size) {
  const header = Buffer.alloc(BLOCK);
  let prefix = "";
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf("/", 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100) throw new Error(`path too long for the base archive: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  field(header, 0, 100, base);
  field(header, 100, 8, octal(0o644, 8));
  field(header, 108, 8, octal(0, 8));
  field(header, 116, 8, octal(0, 8));
  field(header, 124, 12, octal(size, 12));
  field(header, 136, 12, octal(0, 12));
  field(header, 148, 8, "        ");
  field(header, 156, 1, "0");
  field(header, 257, 6, "ustar\0");
  field(header, 263, 2, "00");
  field(header, 345, 155, prefix);
  let sum = 0;
  for (const byte of header) sum += byte;
  field(header, 148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return header;
}

/** A gzipped ustar archive of `files` (path → bytes), byte for byte the same for the same files. */
export function packBase(files) {
  const parts = [];
  for (const [name, bytes] of files) {
    parts.push(tarHeader(name, bytes.length), bytes);
    const pad = (BLOCK - (bytes.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return gzipSync(Buffer.concat(parts), { level: 9 });
}

const text = (buffer, start, length) => buffer.toString("utf8", start, start + length).replace(/\0.*$/su, "");

/** The files of an archive made by packBase (regular files only). */
export function unpackBase(archive) {
  const tar = gunzipSync(archive);
  const files = new Map();
  for (let offset = 0; offset + BLOCK <= tar.length; ) {
    const header = tar.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    const name = text(header, 0, 100);
    const prefix = text(header, 345, 155);
    const size = Number.parseInt(text(header, 124, 12).trim() || "0", 8);
    const type = text(header, 156, 1);
    offset += BLOCK;
    if (type === "0" || type === "") files.set(prefix ? `${prefix}/${name}` : name, Buffer.from(tar.subarray(offset, offset + size)));
    offset += Math.ceil(size / BLOCK) * BLOCK;
  }
  return files;
}

/** Writes .safest-tools/: the manifest of `files` and their pristine copies. */
export function writeRecord(projectDir, { version, name, files }) {
  mkdirSync(path.join(projectDir, RECORD_DIR), { recursive: true });
  const manifest = {
    about: "Written by create-safest-tools: the release this project was made from or last upgraded to, and each file as that release wrote it. `npm run upgrade` reads it; do not edit it.",
    package: "create-safest-tools",
    version,
    name,
    files: Object.fromEntries([...files].map(([rel, bytes]) => [rel, sha256(bytes)])),
  };
  writeFileSync(path.join(projectDir, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(path.join(projectDir, BASE_ARCHIVE), packBase(files));
}

/** The project's record, or null without a manifest. `base` is null when the archive is missing. */
export function readRecord(projectDir) {
  const manifestFile = path.join(projectDir, MANIFEST);
  if (!existsSync(manifestFile)) return null;
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
  } catch (error) {
    throw new UserError(`${MANIFEST} is not valid JSON (${error.message}); restore it from your version control`);
  }
  if (typeof manifest?.version !== "string" || typeof manifest?.name !== "string" || typeof manifest?.files !== "object" || manifest.files === null) {
    throw new UserError(`${MANIFEST} lacks its version, name or files; restore it from your version control`);
  }
  // Paths stay inside the project: relative, with / and no . or .. segments.
  const unsafe = Object.keys(manifest.files).find((rel) => rel.startsWith("/") || rel.includes("\\") || /^[A-Za-z]:/u.test(rel) || rel.split("/").some((part) => part === "" || part === "." || part === ".."));
  if (unsafe !== undefined) throw new UserError(`${MANIFEST} lists a path outside the project (${JSON.stringify(unsafe)}); restore it from your version control`);
  const archive = path.join(projectDir, BASE_ARCHIVE);
  let base = null;
  if (existsSync(archive)) {
    try {
      base = unpackBase(readFileSync(archive));
    } catch {
      base = null;
    }
  }
  return { manifest, base };
}
