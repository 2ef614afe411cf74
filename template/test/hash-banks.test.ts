// PDQ hash banks: entries, CSV import and export, matching within the bank's threshold through the
// multi-index (checked against brute force), quality floors, tenancy, and the hash_bank enrichment.
import { env, runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { hammingHex } from "../src/media";
import { PdqMultiIndex } from "../src/media/pdq-index";
import { MAX_SHARD_ENTRIES, MAX_TAGS } from "../src/media/pdq-index-shard";
import { api, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

/** A random 256-bit hash from a seeded generator (a fixed sequence, so a failure replays). */
function randomHash(random: () => number): string {
  let hex = "";
  for (let i = 0; i < 8; i += 1)
    hex += Math.floor(random() * 2 ** 32)
      .toString(16)
      .padStart(8, "0");
  return hex;
}

function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** The hash with `bits` distinct bits flipped (chosen by `random`). */
function flip(hash: string, bits: number, random: () => number): string {
  const bytes = hash.match(/../gu)!.map((b) => Number.parseInt(b, 16));
  const chosen = new Set<number>();
  while (chosen.size < bits) chosen.add(Math.floor(random() * 256));
  for (const bit of chosen) bytes[bit >> 3]! ^= 1 << (bit & 7);
  return bytes.map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("the multi-index finds exactly what brute force finds", () => {
  it("for random banks, perturbed queries and every threshold 0-63, built one by one or in bulk (no false negatives, no false positives)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 31 }), fc.integer({ min: 0, max: 63 }), fc.integer({ min: 50, max: 6000 }), fc.boolean(), fc.boolean(), (seed, threshold, size, deferred, settle) => {
        const random = seeded(seed);
        const base = Array.from({ length: 20 }, () => randomHash(random));
        const index = new PdqMultiIndex();
        const stored: string[] = [];
        for (let i = 0; i < size; i += 1) {
          // Clusters around a few bases at distances 0-70, so every threshold has hits and near-misses.
          const hash = random() < 0.7 ? flip(base[i % base.length]!, Math.floor(random() * 71), random) : randomHash(random);
          stored.push(hash);
          // `deferred`: added as a bulk load adds (tables not rebuilt, the tail scanned); else one at a time.
          index.add(hash, deferred);
        }
        // A bulk load matched before it settled scans every entry in the tail; after, through the tables.
        if (settle) index.settle();
        const removed = new Set<number>();
        for (let i = 0; i < size / 20; i += 1) removed.add(Math.floor(random() * size));
        for (const slot of removed) index.remove(slot);
        for (let q = 0; q < 5; q += 1) {
          const query = flip(base[q]!, Math.floor(random() * 40), random);
          const expected = stored
            .map((hash, slot) => ({ slot, distance: hammingHex(hash, query) }))
            .filter((m) => m.distance <= threshold && !removed.has(m.slot))
            .sort((a, b) => a.distance - b.distance || a.slot - b.slot);
          expect(index.match(query, threshold)).toEqual(expected);
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe("a shard's capacity", () => {
  it("counts live entries only: a full shard with one entry removed takes one more", async () => {
    const shard = env.PDQ_INDEX.get(env.PDQ_INDEX.idFromName(`capacity-${crypto.randomUUID()}`));
    const hashOf = (i: number) => i.toString(16).padStart(64, "0");
    for (let at = 0; at < MAX_SHARD_ENTRIES; at += 16_384) {
      const result = await shard.add(Array.from({ length: 16_384 }, (_, i) => ({ hash: hashOf(at + i), tags: [], quality: null })));
      expect(result.full).toBe(false);
    }
    expect((await shard.add([{ hash: hashOf(MAX_SHARD_ENTRIES), tags: [], quality: null }])).full).toBe(true);
    expect(await shard.remove([hashOf(0)])).toEqual({ removed: 1, updated: 0 });
    expect(await shard.add([{ hash: hashOf(MAX_SHARD_ENTRIES), tags: [], quality: null }])).toMatchObject({ added: 1, full: false });
    expect(await shard.count()).toBe(MAX_SHARD_ENTRIES);
  });
});

describe("an entry's sources", () => {
  it("an exchange replaces and drops only its own hold; the entry leaves when no source holds it", async () => {
    const shard = env.PDQ_INDEX.get(env.PDQ_INDEX.idFromName(`sources-${crypto.randomUUID()}`));
    const hash = "ab".repeat(32);
    const tagsOf = async () => (await shard.page(0, 10)).entries.map((e) => e.tags);
    expect(await shard.add([{ hash, tags: ["mine"], quality: null }])).toMatchObject({ added: 1 });
    expect(await shard.add([{ hash, tags: ["x1"], quality: null }], { source: "exchange:ncmec", replace: true })).toMatchObject({ added: 0, updated: 1 });
    expect(await tagsOf()).toEqual([["mine", "x1"]]);
    // Its record again changes nothing; a changed record replaces its own tags only.
    expect(await shard.add([{ hash, tags: ["x1"], quality: null }], { source: "exchange:ncmec", replace: true })).toMatchObject({ updated: 0 });
    await shard.add([{ hash, tags: ["x2"], quality: null }], { source: "exchange:ncmec", replace: true });
    expect(await tagsOf()).toEqual([["mine", "x2"]]);
    // Another exchange that never held it cannot take it out; the one that did lets go of its own.
    expect(await shard.remove([hash], { source: "exchange:stopncii" })).toEqual({ removed: 0, updated: 0 });
    expect(await shard.remove([hash], { source: "exchange:ncmec" })).toEqual({ removed: 0, updated: 1 });
    expect(await tagsOf()).toEqual([["mine"]]);
    expect(await shard.match([hash], 0)).toHaveLength(1);
    // Held by an exchange alone, it leaves with its withdrawal.
    const theirs = "cd".repeat(32);
    await shard.add([{ hash: theirs, tags: ["x1"], quality: null }], { source: "exchange:ncmec", replace: true });
    expect(await shard.remove([theirs], { source: "exchange:ncmec" })).toEqual({ removed: 1, updated: 0 });
    expect(await shard.match([theirs], 0)).toEqual([]);
    // An exchange's record is never refused for the bank's tags: the entry keeps MAX_TAGS, the bank's first.
    const mine = ["mine", ...Array.from({ length: MAX_TAGS - 2 }, (_, i) => `m${String(i).padStart(2, "0")}`)];
    await shard.add([{ hash, tags: mine, quality: null }]);
    expect(await shard.add([{ hash, tags: ["y1", "y2"], quality: null }], { source: "exchange:ncmec", replace: true })).toEqual({ added: 0, updated: 1, full: false });
    expect(await tagsOf()).toEqual([[...mine, "y1"].sort()]);
    // The bank's own add past MAX_TAGS is refused as before.
    expect(await shard.add([{ hash, tags: ["more"], quality: null }])).toMatchObject({ tooManyTags: hash });
  });

  it("an entry written before sources were kept counts as the bank's own", async () => {
    const shard = env.PDQ_INDEX.get(env.PDQ_INDEX.idFromName(`legacy-${crypto.randomUUID()}`));
    const hash = "ef".repeat(32);
    await shard.add([{ hash, tags: ["old"], quality: null }]);
    await runInDurableObject(shard, (_instance, state) => {
      state.storage.sql.exec(`UPDATE entries SET sources = NULL`);
    });
    await shard.add([{ hash, tags: ["x1"], quality: null }], { source: "exchange:ncmec", replace: true });
    expect(await shard.remove([hash], { source: "exchange:ncmec" })).toEqual({ removed: 0, updated: 1 });
    expect((await shard.page(0, 10)).entries).toEqual([expect.objectContaining({ hash, tags: ["old"] })]);
  });
});

describe("hash banks over the API", () => {
  let key: string;
  let other: string;
  beforeAll(async () => {
    const [mine, theirs] = await Promise.all([newInstallation("banks"), newInstallation("banks-other")]);
    key = mine.apiKey;
    other = theirs.apiKey;
  });

  const bank = async (body: Record<string, unknown> = {}) => {
    const response = await api("/api/v1/hash-banks", { key, body: { name: `bank-${crypto.randomUUID()}`, kind: "pdq", ...body } });
    expect(response.status).toBe(201);
    return response.body as { id: string; threshold: number; qualityFloor: number; shards: number; entries: number };
  };

  it("creates a bank with PDQ's defaults (threshold 31, quality floor 50) and refuses a second of the same name", async () => {
    const created = await bank({ name: "csam-known" });
    expect(created).toMatchObject({ kind: "pdq", threshold: 31, qualityFloor: 50, shards: 8, entries: 0 });
    expect((await api("/api/v1/hash-banks", { key, body: { name: "csam-known", kind: "pdq" } })).body.error.code).toBe("hash_bank.name_taken");
    expect((await api("/api/v1/hash-banks", { key, body: { name: "x", kind: "md5" } })).status).toBe(400);
  });

  it("matches within the bank's threshold with distance and tags, nearest first; merges tags on re-adding; removes", async () => {
    const random = seeded(7);
    const { id } = await bank({ shards: 3, qualityFloor: 0 });
    const known = randomHash(random);
    const near = flip(known, 12, random);
    const edge31 = flip(known, 31, random);
    const far = flip(known, 32, random);
    const added = await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: [{ hash: known.toUpperCase(), tags: ["ncmec"] }, { hash: near, tags: ["stopncii"] }, { hash: far }] } });
    expect(added.body).toEqual({ added: 3, updated: 0, skipped: 0 });
    const again = await api(`/api/v1/hash-banks/${id}/entries`, {
      key,
      body: {
        entries: [
          { hash: known, tags: ["ncmec", "tech-against-terrorism"] },
          { hash: near, tags: ["stopncii"] },
        ],
      },
    });
    expect(again.body).toEqual({ added: 0, updated: 1, skipped: 0 });
    expect((await api(`/api/v1/hash-banks/${id}`, { key })).body.entries).toBe(3);

    const match = await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: known } });
    expect(match.status).toBe(200);
    expect(match.body).toMatchObject({ threshold: 31, belowQualityFloor: false });
    expect(match.body.matches).toEqual([
      { hash: known, entry: expect.any(String), distance: 0, tags: ["ncmec", "tech-against-terrorism"], query: 0 },
      { hash: near, entry: expect.any(String), distance: 12, tags: ["stopncii"], query: 0 },
    ]);
    // Exactly at the threshold matches; one bit past it does not.
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: edge31 } })).body.matches.map((m: any) => m.hash)).toContain(known);
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: flip(far, 0, random) } })).body.matches.map((m: any) => m.hash)).not.toContain(known);

    expect((await api(`/api/v1/hash-banks/${id}`, { key, method: "PATCH", body: { threshold: 10 } })).body.threshold).toBe(10);
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: known } })).body.matches.map((m: any) => m.hash)).toEqual([known]);

    expect((await api(`/api/v1/hash-banks/${id}/entries/remove`, { key, body: { hashes: [known, randomHash(random)] } })).body).toEqual({ removed: 1 });
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: known } })).body.matches).toEqual([]);
  });

  it("skips entries and queries under the bank's quality floor", async () => {
    const random = seeded(11);
    const { id } = await bank({ qualityFloor: 60 });
    const low = randomHash(random);
    const good = randomHash(random);
    expect(
      (
        await api(`/api/v1/hash-banks/${id}/entries`, {
          key,
          body: {
            entries: [
              { hash: low, quality: 40 },
              { hash: good, quality: 90 },
            ],
          },
        })
      ).body,
    ).toEqual({ added: 1, updated: 0, skipped: 1 });
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: low } })).body.matches).toEqual([]);
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: good, quality: 59 } })).body).toMatchObject({ matches: [], belowQualityFloor: true });
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: good, quality: 60 } })).body.matches).toHaveLength(1);
    // A query of unknown quality is under any floor above 0, and matched when the floor is 0.
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: good } })).body).toMatchObject({ matches: [], belowQualityFloor: true });
    expect((await api(`/api/v1/hash-banks/${id}`, { key, method: "PATCH", body: { qualityFloor: 0 } })).status).toBe(200);
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: good } })).body).toMatchObject({ matches: [{ distance: 0 }], belowQualityFloor: false });
  });

  it("imports HMA / ThreatExchange CSV (other signal types skipped, bad rows counted) and exports CSV that imports back", async () => {
    const random = seeded(13);
    const { id } = await bank({ shards: 2 });
    const [a, b, c, d] = Array.from({ length: 4 }, () => randomHash(random)) as [string, string, string, string];
    const hma = ["signal_type,signal,tags", `pdq,${a},"ncmec csam"`, "md5,0123456789abcdef0123456789abcdef,ncmec", `PDQ,${b},stopncii`, "pdq,not-a-hash,x", ""].join("\r\n");
    const imported = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${id}/import`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "text/csv" }, body: hma }));
    expect(await imported.json()).toEqual({ added: 2, updated: 0, skipped: 0, rows: 2, otherTypes: 1, invalid: 1, invalidLines: [5] });
    const descriptors = ["indicator,type,tags,quality", `${c},HASH_PDQ,tat;terrorism,100`, `${d},HASH_PDQ,low,20`].join("\n");
    const second = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${id}/import`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: descriptors }));
    expect(await second.json()).toMatchObject({ added: 1, skipped: 1 });

    const exported = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${id}/export`, { headers: { authorization: `Bearer ${key}` } }));
    expect(exported.headers.get("content-type")).toContain("text/csv");
    const csv = await exported.text();
    const rows = csv.trim().split("\n");
    expect(rows[0]).toBe("signal_type,signal,tags,quality");
    expect(rows.slice(1).sort()).toEqual([`pdq,${a},csam ncmec,`, `pdq,${b},stopncii,`, `pdq,${c},tat terrorism,100`].sort());

    const copy = await bank({ qualityFloor: 0 });
    const back = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${copy.id}/import`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: csv }));
    expect(await back.json()).toMatchObject({ added: 3, invalid: 0 });
    expect((await api(`/api/v1/hash-banks/${copy.id}/match`, { key, body: { hash: c } })).body.matches).toEqual([{ hash: c, entry: expect.any(String), distance: 0, tags: ["tat", "terrorism"], query: 0 }]);

    const none = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${id}/import`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: "hello\nworld" }));
    expect(((await none.json()) as any).error.code).toBe("hash_bank.csv_invalid");
  });

  it("finds the same entries as brute force over a bank of 3,000 clustered hashes spread over 4 shards", async () => {
    const random = seeded(17);
    const { id } = await bank({ shards: 4, threshold: 40, qualityFloor: 0 });
    const bases = Array.from({ length: 10 }, () => randomHash(random));
    const stored = [...new Set(Array.from({ length: 3000 }, (_, i) => flip(bases[i % 10]!, Math.floor(random() * 60), random)))];
    for (let i = 0; i < stored.length; i += 1000) {
      const response = await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: stored.slice(i, i + 1000).map((hash) => ({ hash })) } });
      expect(response.status).toBe(200);
    }
    for (const query of bases.slice(0, 4).map((b) => flip(b, 5, random))) {
      const expected = stored
        .map((hash) => ({ hash, distance: hammingHex(hash, query) }))
        .filter((m) => m.distance <= 40)
        .sort((a, b) => a.distance - b.distance || (a.hash < b.hash ? -1 : 1))
        .slice(0, 100);
      const got = (await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: query } })).body.matches.map((m: any) => ({ hash: m.hash, distance: m.distance }));
      expect(got).toEqual(expected);
    }
  });

  it("exports only to admins (403 for a read key), and shows the matched entry's exact hash only to admins", async () => {
    const { id } = await bank({ qualityFloor: 0 });
    const known = "5a".repeat(32);
    await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: [{ hash: known, tags: ["ncmec"] }] } });
    const reader = (await api("/api/v1/api-keys", { key, body: { name: `reader-${crypto.randomUUID()}`, scopes: ["read"] } })).body.apiKey as string;
    const intake = (await api("/api/v1/api-keys", { key, body: { name: `intake-${crypto.randomUUID()}`, scopes: ["reports:write"] } })).body.apiKey as string;
    const refused = await api(`/api/v1/hash-banks/${id}/export`, { key: reader });
    expect(refused).toMatchObject({ status: 403, body: { error: { code: "auth.scope_missing" } } });
    const exported = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${id}/export`, { headers: { authorization: `Bearer ${key}` } }));
    expect(exported.status).toBe(200);
    expect(await exported.text()).toContain(known);
    const asIntake = (await api(`/api/v1/hash-banks/${id}/match`, { key: intake, body: { hash: known } })).body;
    expect(asIntake.matches).toEqual([{ entry: expect.stringMatching(/^\d+\.\d+$/u), distance: 0, tags: ["ncmec"], query: 0 }]);
    const asAdmin = (await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: known } })).body;
    expect(asAdmin.matches).toEqual([{ hash: known, entry: asIntake.matches[0].entry, distance: 0, tags: ["ncmec"], query: 0 }]);
  });

  it("refuses with 422 a CSV row of more than 20 tags or a tag past 100 characters, and a merge that would pass 20 tags", async () => {
    const { id } = await bank({ qualityFloor: 0 });
    const importCsv = async (csv: string) => {
      const response = await exports.default.fetch(new Request(`http://safest.test/api/v1/hash-banks/${id}/import`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "text/csv" }, body: csv }));
      return { status: response.status, body: (await response.json()) as any };
    };
    const many = Array.from({ length: 21 }, (_, i) => `t${i}`).join(" ");
    expect(await importCsv(`signal_type,signal,tags\npdq,${"1a".repeat(32)},ok\npdq,${"1b".repeat(32)},${many}\n`)).toMatchObject({ status: 422, body: { error: { code: "hash_bank.csv_tags_invalid", details: { line: 3 } } } });
    expect(await importCsv(`pdq,${"1c".repeat(32)},${"x".repeat(101)}\n`)).toMatchObject({ status: 422, body: { error: { code: "hash_bank.csv_tags_invalid" } } });
    expect((await api(`/api/v1/hash-banks/${id}`, { key })).body.entries).toBe(0);
    const hash = "1d".repeat(32);
    const first = Array.from({ length: 15 }, (_, i) => `a${i}`);
    expect((await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: [{ hash, tags: first }] } })).body).toMatchObject({ added: 1 });
    const more = await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: [{ hash, tags: Array.from({ length: 10 }, (_, i) => `b${i}`) }] } });
    expect(more).toMatchObject({ status: 422, body: { error: { code: "hash_bank.too_many_tags" } } });
    expect(await importCsv(`pdq,${hash},${Array.from({ length: 6 }, (_, i) => `c${i}`).join(" ")}\n`)).toMatchObject({ status: 422, body: { error: { code: "hash_bank.too_many_tags" } } });
    const match = (await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash } })).body;
    expect(match.matches[0].tags).toEqual([...first].sort());
  });

  it("answers another installation's bank with 404 for every operation, and an unknown one too", async () => {
    const { id } = await bank();
    for (const [path, body, method] of [
      [`/api/v1/hash-banks/${id}`, undefined, "GET"],
      [`/api/v1/hash-banks/${id}/match`, { hash: "ab".repeat(32) }, "POST"],
      [`/api/v1/hash-banks/${id}/entries`, { entries: [{ hash: "ab".repeat(32) }] }, "POST"],
      [`/api/v1/hash-banks/${id}/export`, undefined, "GET"],
      [`/api/v1/hash-banks/${id}`, undefined, "DELETE"],
    ] as const) {
      const response = await api(path, { key: other, method, ...(body ? { body } : {}) });
      expect(response.status, path).toBe(404);
      expect(response.body.error.code).toBe("hash_bank.not_found");
    }
    expect((await api(`/api/v1/hash-banks/${id}`, { key })).status).toBe(200);
  });

  it("the hash_bank enrichment matches the PDQ hashes of a report's evidence, naming the item, tags and distance", async () => {
    const random = seeded(23);
    const known = randomHash(random);
    const { id } = await bank({ name: `evidence-${crypto.randomUUID()}` });
    await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: [{ hash: known, tags: ["ncmec"] }] } });
    const report = await api("/api/v1/reports", {
      key,
      body: {
        subject: { kind: "content", id: `post-${crypto.randomUUID()}` },
        category: "protection_of_minors",
        evidence: [
          { kind: "image", pdq: randomHash(random), pdqQuality: 100 },
          { kind: "image", pdq: flip(known, 9, random), pdqQuality: 100 },
          { kind: "image", pdq: known, pdqQuality: 10 },
          { kind: "image", pdq: known },
        ],
      },
    });
    expect(report.status, JSON.stringify(report.body)).toBe(201);
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "media", kind: "enrichment", config: { component: "hash_bank", bank_id: id }, inputMapping: { evidence: "content.evidence" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "media"), edge("media", "success", "done")],
    };
    const version = await publish(key, graph);
    const run = await waitForRun(key, (await api("/api/v1/runs", { key, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: report.body.id } })).body.id);
    expect(run.state, JSON.stringify(run).slice(0, 1000)).toBe("succeeded");
    // Derived from the report's content, the output is sealed: the verdict is open, the rest is read (audited) through /content.
    expect(run.steps.find((s: any) => s.nodeId === "media")).toMatchObject({ sealed: true, output: { data: { matched: true } } });
    const opened = await api(`/api/v1/runs/${run.id}/content`, { key });
    const data = opened.body.items.find((item: any) => item.nodeId === "media").output.data;
    expect(data).toMatchObject({ matched: true, pdq: { matched: true, belowQualityFloor: true } });
    // The second item matches at distance 9; the third is the hash itself but under the quality floor.
    expect(data.pdq.matches).toEqual([{ bankId: id, bankName: expect.any(String), entry: expect.any(String), distance: 9, tags: ["ncmec"], variant: 0, evidence: 1, untrusted: true }]);
  });

  it("deletes a bank with its entries", async () => {
    const { id } = await bank();
    await api(`/api/v1/hash-banks/${id}/entries`, { key, body: { entries: [{ hash: "cd".repeat(32) }] } });
    expect((await api(`/api/v1/hash-banks/${id}`, { key, method: "DELETE" })).body).toEqual({ id, deleted: true });
    expect((await api(`/api/v1/hash-banks/${id}/match`, { key, body: { hash: "cd".repeat(32) } })).status).toBe(404);
  });
});

const vectors = (await env.PDQ_VECTORS.fetch("http://vectors/")).ok;
if (!vectors) console.warn("hash-banks: shared/pdq_vectors is absent (set PDQ_VECTORS_DIR); the image-to-bank tests are skipped.");

async function hashFile(key: string, name: string, contentType = "image/jpeg") {
  const bytes = await (await env.PDQ_VECTORS.fetch(`http://vectors/${name}`)).arrayBuffer();
  const response = await exports.default.fetch(new Request("http://safest.test/api/v1/media/hashes", { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": contentType }, body: bytes }));
  expect(response.status).toBe(200);
  return ((await response.json()) as any).pdq as { hash: string; quality: number; dihedral: Record<string, string> };
}

describe.skipIf(!vectors)("the hash_bank enrichment matches a report's media against the installation's PDQ banks", () => {
  it("finds a rotated copy of a known image through its dihedral variants, with tags and distance; an unrelated image matches nothing", async () => {
    const { apiKey: key } = await newInstallation("bank-enrichment");
    const { body: created } = await api("/api/v1/hash-banks", { key, body: { name: "known-media", kind: "pdq" } });
    const original = await hashFile(key, "dih/bridge-1-original.jpg");
    await api(`/api/v1/hash-banks/${created.id}/entries`, { key, body: { entries: [{ hash: original.hash, tags: ["known", "bridge"], quality: original.quality }] } });
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "media", kind: "enrichment", config: { component: "hash_bank", bank_id: created.id }, inputMapping: { pdq: "input.pdq", pdq_quality: "input.quality" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "media"), edge("media", "success", "done")],
    };
    const version = await publish(key, graph);
    const outputOf = async (pdq: { hash: string; quality: number; dihedral: Record<string, string> }) => {
      const run = await waitForRun(key, (await startRun(key, version.id, { input: { pdq: [pdq.hash, ...Object.values(pdq.dihedral)], quality: pdq.quality } })).id);
      expect(run.state).toBe("succeeded");
      return run.steps.find((s: any) => s.nodeId === "media").output.data;
    };
    const rotated = await outputOf(await hashFile(key, "dih/bridge-2-rotate-90.jpg"));
    expect(rotated.matched).toBe(true);
    expect(rotated.pdq.matches[0]).toMatchObject({ bankId: created.id, bankName: "known-media", entry: expect.any(String), tags: ["bridge", "known"] });
    expect(rotated.pdq.matches[0].distance).toBeLessThanOrEqual(31);
    const unrelated = await outputOf(await hashFile(key, "labelme-subset/q2821.jpg"));
    expect(unrelated).toMatchObject({ matched: false, pdq: { matched: false, matches: [] } });
  });
});
