// The installation as an ATProto labeler: com.atproto.label.queryLabels answers the public labels
// (the kinds and values the installation chose; never a personal kind) whose subject matches a
// URI pattern, each signed with the labeler's secp256k1 key. The test checks every signature with
// the published did:key over its own DAG-CBOR encoding of the label without sig.
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { labelQuerySql } from "../src/detection";
import { api, newInstallation } from "./helpers";

type Label = { ver: number; src: string; uri: string; val: string; neg?: boolean; cts: string; exp?: string; sig?: { $bytes: string } };

const text = new TextEncoder();

/** DAG-CBOR of a flat map (text keys; text, unsigned and boolean values), written from RFC 8949 and the DAG-CBOR key order. */
function cbor(map: Record<string, unknown>): Uint8Array {
  const bytes: number[] = [];
  const header = (major: number, n: number) => {
    if (n < 24) bytes.push((major << 5) + n);
    else if (n < 256) bytes.push((major << 5) + 24, n);
    else bytes.push((major << 5) + 25, n >> 8, n & 255);
  };
  const keys = Object.keys(map)
    .filter((key) => map[key] !== undefined)
    .sort((a, b) => (a.length === b.length ? (a < b ? -1 : 1) : a.length - b.length));
  header(5, keys.length);
  for (const key of keys) {
    header(3, text.encode(key).length);
    bytes.push(...text.encode(key));
    const value = map[key];
    if (value === true) bytes.push(0xf5);
    else if (typeof value === "number") header(0, value);
    else {
      const encoded = text.encode(value as string);
      header(3, encoded.length);
      bytes.push(...encoded);
    }
  }
  return Uint8Array.from(bytes);
}

function publicKeyOf(didKey: string): Uint8Array {
  expect(didKey).toMatch(/^did:key:z[1-9A-HJ-NP-Za-km-z]+$/u);
  const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  let n = 0n;
  for (const char of didKey.slice("did:key:z".length)) n = n * 58n + BigInt(alphabet.indexOf(char));
  const out: number[] = [];
  while (n > 0n) {
    out.unshift(Number(n & 255n));
    n >>= 8n;
  }
  expect(out.slice(0, 2)).toEqual([0xe7, 0x01]);
  expect(out).toHaveLength(35);
  return Uint8Array.from(out.slice(2));
}

function verify(label: Label, publicKey: Uint8Array): boolean {
  const { sig, ...unsigned } = label;
  const signature = Uint8Array.from(atob(sig!.$bytes), (c) => c.charCodeAt(0));
  expect(signature).toHaveLength(64);
  return secp256k1.verify(signature, cbor(unsigned), publicKey, { prehash: true, lowS: true });
}

async function query(key: string, params: Array<[string, string]>) {
  const search = new URLSearchParams(params);
  return api(`/api/v1/xrpc/com.atproto.label.queryLabels?${search}`, { key });
}

async function label(key: string, entity: string, value: string, name: string, extra: Record<string, unknown> = {}) {
  const response = await api("/api/v1/labels", { key, body: { entity, value, label: name, ...extra } });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
}

describe("com.atproto.label.queryLabels", () => {
  it("answers the public labels matching a URI pattern, each signed by the labeler's key; personal kinds never", async () => {
    const { apiKey } = await newInstallation("atproto-labeler");
    const before = await query(apiKey, [["uriPatterns", "did:plc:alice"]]);
    expect(before.status).toBe(409);
    expect(before.body.error.code).toBe("label.atproto_unavailable");
    const personal = await api("/api/v1/labeler", { key: apiKey, method: "PUT", body: { did: "did:web:labels.example.test", publicKinds: ["account", "ip"] } });
    expect(personal.status).toBe(422);
    expect(personal.body.error.code).toBe("labeler.kind_personal");
    const settings = await api("/api/v1/labeler", { key: apiKey, method: "PUT", body: { did: "did:web:labels.example.test", publicKinds: ["account", "post"], signingKey: "generate" } });
    expect(settings.status, JSON.stringify(settings.body)).toBe(200);
    expect(settings.body).toMatchObject({ configured: true, did: "did:web:labels.example.test", publicKinds: ["account", "post"], signed: true });
    expect(JSON.stringify(settings.body)).not.toMatch(/secretKey|signing_key/u);
    const publicKey = publicKeyOf(settings.body.publicKey);

    await label(apiKey, "account", "did:plc:alice", "spam");
    await label(apiKey, "post", "at://did:plc:alice/app.bsky.feed.post/3k1", "nsfw", { expiresIn: "24h" });
    await label(apiKey, "account", "did:plc:bob", "spam", { negate: true });
    await label(apiKey, "ip", "did:plc:alice", "spam");
    await label(apiKey, "device", "at://did:plc:alice/device", "spam");

    const alice = await query(apiKey, [["uriPatterns", "did:plc:alice"]]);
    expect(alice.status, JSON.stringify(alice.body)).toBe(200);
    expect(alice.body.labels).toHaveLength(1);
    const [spam] = alice.body.labels as Label[];
    expect(spam).toMatchObject({ ver: 1, src: "did:web:labels.example.test", uri: "did:plc:alice", val: "spam" });
    expect(spam!.neg).toBeUndefined();
    expect(verify(spam!, publicKey)).toBe(true);
    // A changed field no longer verifies.
    expect(verify({ ...spam!, val: "nsfw" }, publicKey)).toBe(false);

    const all = await query(apiKey, [
      ["uriPatterns", "at://did:plc:alice/*"],
      ["uriPatterns", "did:plc:bob"],
    ]);
    const labels = all.body.labels as Label[];
    expect(labels.map((l) => `${l.uri} ${l.val} ${l.neg === true}`).sort()).toEqual(["at://did:plc:alice/app.bsky.feed.post/3k1 nsfw false", "did:plc:bob spam true"]);
    for (const one of labels) expect(verify(one, publicKey)).toBe(true);
    expect(labels.find((l) => l.val === "nsfw")!.exp).toMatch(/^\d{4}-/u);

    // Everything: still no ip or device label (personal kinds hold no clear subject and are never public).
    const everything = await query(apiKey, [["uriPatterns", "*"]]);
    expect((everything.body.labels as Label[]).map((l) => l.uri).sort()).toEqual(["at://did:plc:alice/app.bsky.feed.post/3k1", "did:plc:alice", "did:plc:bob"]);

    // Pages through a cursor.
    const first = await query(apiKey, [
      ["uriPatterns", "*"],
      ["limit", "2"],
    ]);
    expect(first.body.labels).toHaveLength(2);
    const second = await query(apiKey, [
      ["uriPatterns", "*"],
      ["limit", "2"],
      ["cursor", first.body.cursor],
    ]);
    expect(second.body.labels).toHaveLength(1);
    expect(second.body.cursor).toBeUndefined();

    // Another source matches nothing; a narrower choice of public values hides the rest.
    expect(
      (
        await query(apiKey, [
          ["uriPatterns", "*"],
          ["sources", "did:plc:someone-else"],
        ])
      ).body.labels,
    ).toEqual([]);
    await api("/api/v1/labeler", { key: apiKey, method: "PUT", body: { did: "did:web:labels.example.test", publicKinds: ["account", "post"], publicValues: ["nsfw"] } });
    const narrowed = (await query(apiKey, [["uriPatterns", "*"]])).body.labels as Label[];
    expect(narrowed.map((l) => l.val)).toEqual(["nsfw"]);
    expect(verify(narrowed[0]!, publicKey)).toBe(true);

    const badPattern = await query(apiKey, [["uriPatterns", "at://*/post"]]);
    expect(badPattern.status).toBe(400);
    expect(badPattern.body.error.code).toBe("label.uri_pattern_invalid");
  });

  it("serves unsigned labels without a key, and never another installation's labels", async () => {
    const a = await newInstallation("atproto-a");
    const b = await newInstallation("atproto-b");
    for (const { apiKey } of [a, b]) {
      const put = await api("/api/v1/labeler", { key: apiKey, method: "PUT", body: { did: "did:web:shared.example.test", publicKinds: ["account"] } });
      expect(put.body).toMatchObject({ signed: false, publicKey: null });
    }
    await label(a.apiKey, "account", "did:plc:carol", "impersonation");
    const own = await query(a.apiKey, [["uriPatterns", "did:plc:carol"]]);
    expect(own.body.labels).toHaveLength(1);
    expect(own.body.labels[0].sig).toBeUndefined();
    expect((await query(b.apiKey, [["uriPatterns", "did:plc:carol"]])).body.labels).toEqual([]);
  });

  it("overlapping patterns answer each label once, oldest first, and page through the cursor", async () => {
    const { apiKey } = await newInstallation("atproto-overlap");
    await api("/api/v1/labeler", { key: apiKey, method: "PUT", body: { did: "did:web:overlap.example.test", publicKinds: ["account"] } });
    for (const subject of ["did:plc:dan", "did:plc:erin", "did:web:frank.example", "did:plc:dana"]) await label(apiKey, "account", subject, "spam");
    const patterns: Array<[string, string]> = [
      ["uriPatterns", "did:plc:dan"],
      ["uriPatterns", "did:plc:*"],
      ["uriPatterns", "did:plc:d*"],
      ["uriPatterns", "did:plc:dan"],
      ["uriPatterns", "did:web:frank.example"],
    ];
    const all = await query(apiKey, patterns);
    expect(all.status).toBe(200);
    expect((all.body.labels as Label[]).map((l) => l.uri)).toEqual(["did:plc:dan", "did:plc:erin", "did:web:frank.example", "did:plc:dana"]);
    // A prefix is a prefix of the text, not of a path segment; an exact subject is that subject only.
    expect((await query(apiKey, [["uriPatterns", "did:plc:dan*"]])).body.labels.map((l: Label) => l.uri)).toEqual(["did:plc:dan", "did:plc:dana"]);
    expect((await query(apiKey, [["uriPatterns", "did:plc:da"]])).body.labels).toEqual([]);
    const pages: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await query(apiKey, [...patterns, ["limit", "2"], ...(cursor === undefined ? [] : [["cursor", cursor] as [string, string]])]);
      expect(page.status).toBe(200);
      pages.push(...(page.body.labels as Label[]).map((l) => l.uri));
      cursor = page.body.cursor;
    } while (cursor !== undefined);
    expect(pages).toEqual(["did:plc:dan", "did:plc:erin", "did:web:frank.example", "did:plc:dana"]);
  });

  it("reads each pattern through the subject index (query plan), never a scan of the installation's labels", async () => {
    const query = labelQuerySql([{ exact: "did:plc:alice" }, { prefix: "at://did:plc:alice/" }, { exact: "at://did:plc:alice/app.bsky.feed.post/1" }, { prefix: "did:web:" }]);
    // The exact subject under the prefix is dropped: no label comes twice.
    expect(query.binds).toEqual(["at://did:plc:alice/", "did:web:", "did:plc:alice"]);
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${query.sql}`)
      .bind("inst_plan", 0, new Date().toISOString(), JSON.stringify(["account", "post"]), null, 50, ...query.binds)
      .all<{ detail: string }>();
    const reads = results.map((row) => row.detail).filter((detail) => /\b(SCAN|SEARCH) entity_labels\b/u.test(detail));
    expect(reads).toHaveLength(3);
    for (const detail of reads) expect(detail).toMatch(/^SEARCH entity_labels USING INDEX entity_labels_subject \(installation_id=\? AND subject[=>]/u);
  });
});
