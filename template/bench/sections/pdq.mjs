// Section "pdq": PDQ at scale. (1) A bank of 1,000,000 entries (4 Durable Object shards of
// ~250,000), loaded through the CSV import 100,000 rows at a time; then `POST /hash-banks/:id/match`
// for queries near stored hashes (a hit each) and for unrelated ones (none), timed end to end over
// loopback: pdqMatchP95Ms (target ≤ 20 ms), with the Worker's own time (Server-Timing) and, in the
// same window, a bare `GET /` (no auth, no storage) as the floor this machine puts under any
// request. (2) `POST /media/hashes` on one photo (the reference bridge photo, 1600×1004 JPEG, when
// shared/pdq_vectors is found: PDQ_VECTORS_DIR, else ../../shared/pdq_vectors from template/; else
// a generated 1024×1024 PNG), two at a time: pdqHashesPerSecond.
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { crc32, deflateSync } from "node:zlib";
import { log, percentile, pool, remaining, results, round, verdict } from "./lib.mjs";

const ENTRIES = Number(process.env.BENCH_PDQ_ENTRIES ?? 1_000_000);
const IMPORT_ROWS = 100_000;
const QUERIES = 400;
const HASHES = 60;
const TARGET_MATCH_P95_MS = 20;

/** A seeded xorshift128 generator (every bit usable): the same bank every run. */
function seeded(seed) {
  let [a, b, c, d] = [seed >>> 0, 0x9e3779b9, 0x243f6a88, 0xb7e15162];
  return () => {
    const t = a ^ (a << 11);
    a = b;
    b = c;
    c = d;
    d = (d ^ (d >>> 19) ^ t ^ (t >>> 8)) >>> 0;
    return d;
  };
}

const hex8 = (n) => (n >>> 0).toString(16).padStart(8, "0");
const randomHash = (next) => Array.from({ length: 8 }, () => hex8(next())).join("");

function flip(hash, bits, next) {
  const bytes = Buffer.from(hash, "hex");
  const chosen = new Set();
  while (chosen.size < bits) chosen.add(next() % 256);
  for (const bit of chosen) bytes[bit >> 3] ^= 1 << (bit & 7);
  return bytes.toString("hex");
}

/** An RGB PNG of smooth shapes and noise (something with gradients for PDQ to see). */
function syntheticPng(width, height) {
  const next = seeded(99);
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    for (let x = 0; x < width; x++) {
      const at = row + 1 + x * 3;
      raw[at] = (Math.sin(x / 37) * 80 + 128 + (next() % 16)) & 255;
      raw[at + 1] = (Math.cos(y / 23) * 80 + 128 + (next() % 16)) & 255;
      raw[at + 2] = ((x ^ y) + (next() % 16)) & 255;
    }
  }
  const chunk = (type, data) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", header), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

async function post(base, path, key, body, contentType) {
  const began = performance.now();
  const response = await fetch(`${base}${path}`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": contentType }, body, signal: AbortSignal.timeout(Math.min(120_000, remaining())) });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${path} → ${response.status}: ${text.slice(0, 500)}`);
  const serverMs = Number(/(?:^|,)\s*app;dur=([\d.]+)/u.exec(response.headers.get("server-timing") ?? "")?.[1] ?? Number.NaN);
  return { body: JSON.parse(text), ms: performance.now() - began, serverMs };
}

async function bare(base) {
  const began = performance.now();
  await (await fetch(`${base}/`, { signal: AbortSignal.timeout(Math.min(60_000, remaining())) })).text();
  return performance.now() - began;
}

export async function sectionPdq(api, base, adminToken) {
  const { apiKey: key } = await api("/api/v1/installations", { body: { name: "bench-pdq" }, key: adminToken });
  const bank = await api("/api/v1/hash-banks", { body: { name: "bench-pdq-1m", kind: "pdq", shards: 4 }, key });
  const next = seeded(2024);
  // A tenth of the bank in clusters (copies of a few thousand images at distances 0-40), the rest spread out.
  const centres = Array.from({ length: 2000 }, () => randomHash(next));
  const kept = [];
  log(`pdq: loading ${ENTRIES} entries through the CSV import (${IMPORT_ROWS} rows a request)`);
  const loadStarted = performance.now();
  for (let done = 0; done < ENTRIES; done += IMPORT_ROWS) {
    const rows = ["signal_type,signal,tags"];
    for (let i = done; i < Math.min(ENTRIES, done + IMPORT_ROWS); i++) {
      const hash = i % 10 === 0 ? flip(centres[i % centres.length], next() % 41, next) : randomHash(next);
      if (i % 2500 === 0) kept.push(hash);
      rows.push(`pdq,${hash},bench${i % 7}`);
    }
    const { body } = await post(base, `/api/v1/hash-banks/${bank.id}/import`, key, rows.join("\n"), "text/csv");
    log(`pdq: ${done + IMPORT_ROWS} rows sent (${body.added} added)`);
  }
  const loadS = (performance.now() - loadStarted) / 1000;
  const { entries } = await api(`/api/v1/hash-banks/${bank.id}`, { key });
  log(`pdq: bank holds ${entries} entries, loaded in ${loadS.toFixed(1)} s`);
  // Warm each shard's index (built from its SQLite table on first use).
  await api(`/api/v1/hash-banks/${bank.id}/match`, { body: { hash: randomHash(next), quality: 100 }, key });
  const times = [];
  const serverTimes = [];
  const floor = [];
  let hits = 0;
  await pool(QUERIES, 1, async (index) => {
    const query = index % 2 === 0 ? flip(kept[index % kept.length], next() % 25, next) : randomHash(next);
    const { body, ms, serverMs } = await post(base, `/api/v1/hash-banks/${bank.id}/match`, key, JSON.stringify({ hash: query, quality: 100 }), "application/json");
    if (index % 2 === 0 && body.matches.length === 0) throw new Error("a query near a stored hash found nothing");
    hits += body.matches.length > 0 ? 1 : 0;
    times.push(ms);
    if (Number.isFinite(serverMs)) serverTimes.push(serverMs);
    floor.push(await bare(base));
  });
  results.pdqBankEntries = entries;
  results.pdqLoadEntriesPerSecond = round(entries / loadS, 0);
  results.pdqMatchP50Ms = round(percentile(times, 0.5));
  results.pdqMatchP95Ms = round(percentile(times, 0.95));
  results.pdqMatchServerP95Ms = round(percentile(serverTimes, 0.95));
  results.pdqBareRequestP95Ms = round(percentile(floor, 0.95));
  results.pdqMatchQueries = QUERIES;
  results.pdqMatchHits = hits;

  const vectors = resolve(process.env.PDQ_VECTORS_DIR ?? resolve(process.cwd(), "../../shared/pdq_vectors"), "dih/bridge-1-original.jpg");
  const photo = existsSync(vectors) ? { bytes: readFileSync(vectors), type: "image/jpeg", label: "1600x1004 jpeg" } : { bytes: syntheticPng(1024, 1024), type: "image/png", label: "1024x1024 png" };
  await post(base, "/api/v1/media/hashes", key, photo.bytes, photo.type);
  const hashStarted = performance.now();
  await pool(HASHES, 2, async () => {
    await post(base, "/api/v1/media/hashes", key, photo.bytes, photo.type);
  });
  results.pdqHashesPerSecond = round(HASHES / ((performance.now() - hashStarted) / 1000), 1);
  results.pdqHashImage = photo.label;
  log(`pdq: match p95 ${results.pdqMatchP95Ms} ms over ${entries} entries; ${results.pdqHashesPerSecond} hashes/s (${photo.label})`);
}

export function pdqLines() {
  if (results.pdqMatchP95Ms === undefined) return [];
  return [
    `pdq match:  p95 ${results.pdqMatchP95Ms} ms, p50 ${results.pdqMatchP50Ms} ms over ${results.pdqBankEntries} entries (target ≤ ${TARGET_MATCH_P95_MS}) ${verdict(results.pdqMatchP95Ms, TARGET_MATCH_P95_MS)}  (Worker's own p95 ${results.pdqMatchServerP95Ms} ms; a bare GET / p95 ${results.pdqBareRequestP95Ms} ms in the same window; ${results.pdqMatchQueries} queries, ${results.pdqMatchHits} with a match; loaded at ${results.pdqLoadEntriesPerSecond} entries/s)`,
    `pdq hash:   ${results.pdqHashesPerSecond} images/s (${results.pdqHashImage}, two at a time)`,
  ];
}
