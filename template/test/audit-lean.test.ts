// The lean (v2) stored form of audit events (src/audit/stored.ts, migration 0036): what a row holds,
// that events stored before (v1) still verify beside lean ones, hot and archived, and that an
// edited, deleted, reordered or relinked lean event is caught, hot and in a segment. Every test
// uses installations of its own.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { auditStatement, canonicalJson } from "../src/audit";
import { sealAuditChain } from "../src/audit/chain";
import { entryMacText } from "../src/audit/events";
import { auditKeys, signText } from "../src/audit/keys";
import { archiveAuditSegments } from "../src/audit/segment-sweep";
import { segmentKey } from "../src/audit/segments";
import { auditEventId, base64urlToHex, hexToBase64url, readMac, storeMac } from "../src/audit/stored";
import { sha256Hex } from "../src/lib/crypto";
import { api, newInstallation } from "./helpers";

const future = () => new Date(Date.now() + 60_000).toISOString();

const verify = async (apiKey: string, mode: "incremental" | "full" = "full") => {
  const response = await api(`/api/v1/audit/verify?mode=${mode}`, { key: apiKey });
  expect(response.status).toBe(200);
  return response.body;
};

const event = (installationId: string, key: string, n: number) =>
  auditStatement(env.DB, {
    installationId,
    idempotencyKey: key,
    action: "test.lean",
    actor: { type: "system", id: "test" },
    target: { type: "test", id: "t1" },
    details: { n },
    at: new Date().toISOString(),
  });

/** An event as every event was stored before migration 0036 (v1): its key, a UUID id, hex MAC. */
async function legacyEvent(installationId: string, n: number) {
  const row = {
    id: crypto.randomUUID(),
    installationId,
    idempotencyKey: `legacy:${crypto.randomUUID()}`,
    action: "test.legacy",
    actorType: "system",
    actorId: "test",
    targetType: "test",
    targetId: "t1",
    detailsJson: canonicalJson({ n }),
    createdAt: new Date().toISOString(),
  };
  const signed = signText(auditKeys(env), entryMacText(row))!;
  await env.DB.prepare(`INSERT INTO audit_events (id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at, entry_mac, seq)
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE installation_id = ?2)`)
    .bind(row.id, installationId, row.idempotencyKey, row.action, row.actorType, row.actorId, row.targetType, row.targetId, row.detailsJson, row.createdAt, `${signed.keyId}:${signed.mac}`)
    .run();
}

/** An installation whose trail is v1 events, then lean ones, each group sealed (so checkpointed). */
async function mixedTrail() {
  const installation = await newInstallation();
  for (let n = 0; n < 3; n++) await legacyEvent(installation.id, n);
  await sealAuditChain(env, installation.id);
  await env.DB.batch([0, 1, 2].map((n) => event(installation.id, `lean:${crypto.randomUUID()}`, n)));
  await sealAuditChain(env, installation.id);
  await env.DB.batch([3, 4].map((n) => event(installation.id, `lean:${crypto.randomUUID()}`, n)));
  await sealAuditChain(env, installation.id);
  return installation;
}

type Stored = { id: string; seq: number; idempotencyKey: string | null; prevHash: string | null; hash: string | null; entryMac: string | null; action: string };
const stored = async (installationId: string) =>
  (await env.DB.prepare("SELECT id, seq, idempotency_key AS idempotencyKey, prev_hash AS prevHash, hash, entry_mac AS entryMac, action FROM audit_events WHERE installation_id = ? ORDER BY seq").bind(installationId).all<Stored>()).results;
const leanRows = async (installationId: string) => (await stored(installationId)).filter((row) => row.action === "test.lean");

/** Every event through /audit-events (with `filter`, a query string starting with &). */
async function listAll(apiKey: string, filter = "") {
  const items: any[] = [];
  let cursor: string | null = "0";
  while (cursor !== null) {
    const page: { status: number; body: any } = await api(`/api/v1/audit-events?limit=4&cursor=${cursor}${filter}`, { key: apiKey });
    expect(page.status).toBe(200);
    items.push(...page.body.items);
    cursor = page.body.nextCursor;
  }
  return items;
}

describe("lean audit rows", () => {
  it("base64url round-trips hex of whole bytes", () => {
    for (const hex of ["", "00", "ff00", "0123456789abcdef", "f".repeat(64), (1234567).toString(16).padStart(32, "0")]) expect(base64urlToHex(hexToBase64url(hex))).toBe(hex);
    expect(hexToBase64url("fbff")).toBe("-_8");
    const mac = "0123456789abcdef".repeat(4);
    expect(readMac(storeMac("ak_00112233aabbccdd", mac))).toBe(`ak_00112233aabbccdd:${mac}`);
    expect(readMac(storeMac("other-key", mac))).toBe(`other-key:${mac}`);
    expect(readMac(`ak_00112233aabbccdd:${mac}`)).toBe(`ak_00112233aabbccdd:${mac}`);
  });

  it("stores a digest id, no key, no link and base64url hash and MAC; a repeated key writes nothing", async () => {
    const { id } = await newInstallation();
    const key = `lean:${crypto.randomUUID()}`;
    await env.DB.batch([event(id, key, 1), event(id, key, 2)]);
    await sealAuditChain(env, id);
    const rows = await leanRows(id);
    expect(rows).toHaveLength(1);
    const [row] = rows;
    expect(row).toMatchObject({ id: auditEventId(id, key), idempotencyKey: null, prevHash: null });
    expect(row!.id).toMatch(/^[A-Za-z0-9_-]{22}$/u);
    expect(row!.hash).toMatch(/^[A-Za-z0-9_-]{43}$/u);
    expect(row!.entryMac).toMatch(/^[A-Za-z0-9_-]{54}$/u);
    expect(readMac(row!.entryMac)).toMatch(/^ak_[0-9a-f]{16}:[0-9a-f]{64}$/u);
    // The same key in another installation is another event.
    const other = await newInstallation();
    await event(other.id, key, 1).run();
    expect((await leanRows(other.id))[0]?.id).toBe(auditEventId(other.id, key));
    expect(auditEventId(other.id, key)).not.toBe(row!.id);
  });

  it("stores the time as milliseconds and reads it back as the text it was; a time in another form stays text", async () => {
    const { id, apiKey } = await newInstallation();
    const at = "2026-12-02T05:06:07.089Z";
    const odd = "2026-12-02T05:06:08Z"; // no milliseconds: Date.toISOString() would not give it back
    for (const [n, time] of [at, odd].entries()) {
      await auditStatement(env.DB, { installationId: id, idempotencyKey: `lean:${n}`, action: "test.lean", actor: { type: "system", id: "test" }, target: { type: "test", id: "t1" }, details: { n }, at: time }).run();
    }
    const times = (await env.DB.prepare("SELECT typeof(created_at) AS type, created_at AS value FROM audit_events WHERE installation_id = ? AND action = 'test.lean' ORDER BY seq").bind(id).all<{ type: string; value: unknown }>()).results;
    expect(times).toEqual([
      { type: "integer", value: Date.parse(at) },
      { type: "text", value: odd },
    ]);
    const listed = (await listAll(apiKey)).filter((item) => item.action === "test.lean");
    expect(listed.map((item) => item.createdAt)).toEqual([at, odd]);
    expect((await listAll(apiKey, `&action=test.lean&since=${encodeURIComponent(odd)}`)).map((item) => item.createdAt)).toEqual([odd]);
    expect((await listAll(apiKey, `&action=test.lean&until=${encodeURIComponent(odd)}`)).map((item) => item.createdAt)).toEqual([at]);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
    // One millisecond moved is an edit.
    await env.DB.prepare("UPDATE audit_events SET created_at = created_at + 1 WHERE installation_id = ? AND action = 'test.lean' AND typeof(created_at) = 'integer'").bind(id).run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { reason: "entry_mac_mismatch" } });
  });

  it("a key an event stored before (v1) already has writes nothing", async () => {
    const { id } = await newInstallation();
    await legacyEvent(id, 0);
    const [legacy] = (await stored(id)).filter((row) => row.action === "test.legacy");
    await event(id, legacy!.idempotencyKey!, 1).run();
    expect(await leanRows(id)).toHaveLength(0);
  });

  it("v1 and lean events verify in one chain, hot and archived, and list with their links", async () => {
    const { id, apiKey } = await mixedTrail();
    const forms = await stored(id);
    expect(forms.filter((row) => row.idempotencyKey !== null && row.prevHash?.startsWith("sha256:"))).toHaveLength(3);
    expect(await verify(apiKey)).toMatchObject({ ok: true, events: forms.length });
    const before = await listAll(apiKey);
    expect(before).toHaveLength(forms.length);
    for (const [index, item] of before.entries()) {
      expect(item.hash).toMatch(/^sha256:[0-9a-f]{64}$/u);
      if (index > 0) expect(item.prevHash).toBe(before[index - 1].hash);
    }
    // Archived: the segment holds v1 and lean lines; the listing is the same, the chain verifies.
    const done = await archiveAuditSegments(env, id, future());
    expect(done.events).toBeGreaterThan(3);
    expect(await listAll(apiKey)).toEqual(before);
    expect(await verify(apiKey)).toMatchObject({ ok: true, events: forms.length });
  });

  it("a v1 event is MAC'd and hashed by the texts it had before migration 0036", async () => {
    const { id } = await mixedTrail();
    const rows = (
      await env.DB.prepare(
        `SELECT id, seq, installation_id AS installationId, idempotency_key AS idempotencyKey, action, actor_type AS actorType, actor_id AS actorId,
          target_type AS targetType, target_id AS targetId, details_json AS detailsJson, created_at AS createdAt, prev_hash AS prevHash, hash, entry_mac AS entryMac
        FROM audit_events WHERE installation_id = ? AND action = 'test.legacy' ORDER BY seq`,
      )
        .bind(id)
        .all<Record<string, any>>()
    ).results;
    expect(rows).toHaveLength(3);
    const key = auditKeys(env).current!;
    for (const row of rows) {
      // The v1 texts, spelled out here as they were, not taken from the code under test.
      const macText = canonicalJson({
        v: 1,
        id: row.id,
        installationId: row.installationId,
        idempotencyKey: row.idempotencyKey,
        action: row.action,
        actor: { type: row.actorType, id: row.actorId },
        target: { type: row.targetType, id: row.targetId },
        details: row.detailsJson,
        createdAt: row.createdAt,
      });
      expect(row.entryMac).toBe(`${key.id}:${key.mac(macText)}`);
      const body = canonicalJson({
        seq: row.seq,
        id: row.id,
        installationId: row.installationId,
        idempotencyKey: row.idempotencyKey,
        action: row.action,
        actor: { type: row.actorType, id: row.actorId },
        target: { type: row.targetType, id: row.targetId },
        details: JSON.parse(row.detailsJson),
        createdAt: row.createdAt,
      });
      expect(row.hash).toBe(`sha256:${await sha256Hex(`${row.prevHash}\n${body}`)}`);
    }
    // Each links to the one before, and the first to the lean event before it (its hash converted).
    expect(rows[1]!.prevHash).toBe(rows[0]!.hash);
    const before = await env.DB.prepare("SELECT hash FROM audit_events WHERE installation_id = ? AND seq = ?")
      .bind(id, rows[0]!.seq - 1)
      .first<{ hash: string }>();
    expect(rows[0]!.prevHash).toBe(`sha256:${base64urlToHex(before!.hash)}`);
  });

  it("an edited lean event is caught, sealed or not", async () => {
    const { id, apiKey } = await mixedTrail();
    const [, victim] = await leanRows(id);
    await env.DB.prepare("UPDATE audit_events SET details_json = ? WHERE installation_id = ? AND seq = ?")
      .bind(canonicalJson({ n: 99 }), id, victim!.seq)
      .run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: victim!.seq, reason: "entry_mac_mismatch" } });
  });

  it("a lean event dressed as a v1 one (a key text added) is caught", async () => {
    const { id, apiKey } = await mixedTrail();
    const [victim] = await leanRows(id);
    await env.DB.prepare("UPDATE audit_events SET idempotency_key = ? WHERE installation_id = ? AND seq = ?").bind("forged:key", id, victim!.seq).run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: victim!.seq, reason: "entry_mac_mismatch" } });
  });

  it("a deleted lean event is a gap", async () => {
    const { id, apiKey } = await mixedTrail();
    const [, victim] = await leanRows(id);
    await env.DB.prepare("DELETE FROM audit_events WHERE installation_id = ? AND seq = ?").bind(id, victim!.seq).run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: victim!.seq, reason: "seq_gap" } });
  });

  it("two lean events swapped (each keeps its hash and MAC) are caught", async () => {
    const { id, apiKey } = await mixedTrail();
    const [a, b] = await leanRows(id);
    await env.DB.batch([
      env.DB.prepare("UPDATE audit_events SET seq = -1 WHERE installation_id = ? AND seq = ?").bind(id, a!.seq),
      env.DB.prepare("UPDATE audit_events SET seq = ? WHERE installation_id = ? AND seq = ?").bind(a!.seq, id, b!.seq),
      env.DB.prepare("UPDATE audit_events SET seq = ? WHERE installation_id = ? AND seq = -1").bind(b!.seq, id),
    ]);
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: a!.seq, reason: "hash_mismatch" } });
  });

  it("a lean event given a link it does not have is caught", async () => {
    const { id, apiKey } = await mixedTrail();
    const [, victim] = await leanRows(id);
    await env.DB.prepare("UPDATE audit_events SET prev_hash = ? WHERE installation_id = ? AND seq = ?")
      .bind(`sha256:${"e".repeat(64)}`, id, victim!.seq)
      .run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: victim!.seq, reason: "prev_hash_mismatch" } });
  });

  it("a lean event's hash replaced by the one of another chain position is caught", async () => {
    const { id, apiKey } = await mixedTrail();
    const [a, b] = await leanRows(id);
    await env.DB.prepare("UPDATE audit_events SET hash = ? WHERE installation_id = ? AND seq = ?").bind(a!.hash, id, b!.seq).run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: b!.seq, reason: "hash_mismatch" } });
  });

  it("in a segment, a lean line edited, relinked or dressed as v1 is caught (and with the object's digest made to match)", async () => {
    const attacks: Array<[string, (lines: Record<string, unknown>[]) => Record<string, unknown>[], string]> = [
      ["edited", (lines) => lines.map((line) => (line.idempotencyKey === null && line.seq === lines.at(-1)!.seq ? { ...line, detailsJson: canonicalJson({ n: 99 }) } : line)), "entry_mac_mismatch"],
      ["relinked", (lines) => lines.map((line) => (line.idempotencyKey === null && line.seq === lines.at(-1)!.seq ? { ...line, prevHash: `sha256:${"e".repeat(64)}` } : line)), "prev_hash_mismatch"],
      ["without its key made v1", (lines) => lines.map((line) => (line.idempotencyKey === null && line.seq === lines.at(-1)!.seq ? { ...line, idempotencyKey: "forged:key" } : line)), "entry_mac_mismatch"],
    ];
    for (const [, edit, reason] of attacks) {
      const { id, apiKey } = await mixedTrail();
      const done = await archiveAuditSegments(env, id, future());
      expect(done.segments).toBeGreaterThan(0);
      const segment = (await env.DB.prepare("SELECT from_seq AS fromSeq, to_seq AS toSeq FROM audit_segments WHERE installation_id = ? ORDER BY from_seq DESC LIMIT 1").bind(id).first<{ fromSeq: number; toSeq: number }>())!;
      const key = segmentKey(id, segment.fromSeq, segment.toSeq);
      const lines = (await (await env.AUDIT_ANCHORS.get(key))!.text())
        .split("\n")
        .slice(0, -1)
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.some((line) => line.idempotencyKey === null)).toBe(true);
      const text = `${edit(lines)
        .map((line) => canonicalJson(line))
        .join("\n")}\n`;
      await env.AUDIT_ANCHORS.put(key, text);
      expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: segment.toSeq, reason, segment: key } });
      // With the index row's digest made to match the edit, the line check still holds.
      await env.DB.prepare("UPDATE audit_segments SET sha256 = ?, bytes = ? WHERE installation_id = ? AND from_seq = ?")
        .bind(await sha256Hex(text), text.length, id, segment.fromSeq)
        .run();
      expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: segment.toSeq, reason, segment: key } });
    }
  });
});
