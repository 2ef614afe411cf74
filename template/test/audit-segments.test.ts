// The audit trail in segments: sealed, checkpointed events older than the hot window move out of
// D1 into R2 objects (one canonical JSON line per event) with an index row in D1. Archived events
// list exactly as hot ones; full verification walks the segments, then the hot rows, and names the
// segment an edit, a deleted or reordered line, a replaced or deleted object is in; a sweep cut
// short finishes on the next pass. Every test uses installations of its own.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { type AuditRow, checkpointBounds, GENESIS_HASH, sealAuditChain } from "../src/audit/chain";
import { walkChain } from "../src/audit/chain-verify";
import { auditKeys } from "../src/audit/keys";
import { archiveAuditSegments, planSegment, sweepAuditSegments, writeSegment } from "../src/audit/segment-sweep";
import { deleteAuditSegments, segmentKey, segmentPrefix, segmentStartPrefix, targetPrefix } from "../src/audit/segments";
import { auditStatement, canonicalJson } from "../src/audit";
import { AUDIT_HOT_MINUTES, SEGMENT_MIN_EVENTS } from "../src/lib/storage-tiers";
import { installationDeleteStatements } from "../src/installations/backup";
import { sha256Hex } from "../src/lib/crypto";
import { ADMIN_TOKEN, api, newInstallation } from "./helpers";

/** An installation with `rounds` rounds of audited writes, each round sealed (so checkpointed). */
async function trail(rounds: number[]) {
  const installation = await newInstallation();
  for (const [round, count] of rounds.entries()) {
    for (let index = 0; index < count; index++) expect((await api("/api/v1/workflows", { key: installation.apiKey, body: { name: `wf-${round}-${index}` } })).status).toBe(201);
    await sealAuditChain(env, installation.id);
  }
  return installation;
}

/**
 * Appends `count` audit events dated `at` to an installation's trail, about targets `target-0` …
 * `target-<targets - 1>` in turn (and `extra` first), sealed, then one newer audited write, sealed,
 * so the bulk's checkpoint is not the newest (the head always stays in D1).
 */
async function appendBulk(installation: { id: string; apiKey: string }, count: number, at: Date, options: { targets?: number; extra?: string[]; tag?: string } = {}) {
  const targets = options.targets ?? 7;
  const tag = options.tag ?? "bulk";
  const ids = [...(options.extra ?? []), ...Array.from({ length: count }, (_, index) => `target-${index % targets}`)];
  const statements = ids.map((target, index) =>
    auditStatement(env.DB, {
      installationId: installation.id,
      idempotencyKey: `${tag}:${index}`,
      action: "workflow.step_succeeded",
      actor: { type: "system", id: "test" },
      target: { type: "workflow_run", id: target },
      details: { index },
      at: at.toISOString(),
    }),
  );
  for (let i = 0; i < statements.length; i += 100) await env.DB.batch(statements.slice(i, i + 100));
  await sealAuditChain(env, installation.id);
  expect((await api("/api/v1/workflows", { key: installation.apiKey, body: { name: `after-${tag}` } })).status).toBe(201);
  await sealAuditChain(env, installation.id);
  return installation;
}

/** When a test's sweep runs: an hour and five minutes from now (events written now are past the audit hour). */
const sweepTime = () => new Date(Date.now() + (AUDIT_HOT_MINUTES + 5) * 60_000);

const future = () => new Date(Date.now() + 60_000).toISOString();

const verify = async (apiKey: string, mode: "incremental" | "full" = "full") => {
  const response = await api(`/api/v1/audit/verify?mode=${mode}`, { key: apiKey });
  expect(response.status).toBe(200);
  return response.body;
};

/** Every event through /audit-events, `limit` a page. */
async function listAll(apiKey: string, limit = 500, filter = "") {
  const items: any[] = [];
  let cursor: string | null = "0";
  while (cursor !== null) {
    const page: { status: number; body: any } = await api(`/api/v1/audit-events?limit=${limit}&cursor=${cursor}${filter}`, { key: apiKey });
    expect(page.status).toBe(200);
    items.push(...page.body.items);
    cursor = page.body.nextCursor;
  }
  return items;
}

const segments = async (installationId: string) =>
  (
    await env.DB.prepare("SELECT from_seq AS fromSeq, to_seq AS toSeq, sha256, bytes FROM audit_segments WHERE installation_id = ? ORDER BY from_seq")
      .bind(installationId)
      .all<{ fromSeq: number; toSeq: number; sha256: string; bytes: number }>()
  ).results;

const hotSeqs = async (installationId: string) => (await env.DB.prepare("SELECT seq FROM audit_events WHERE installation_id = ? ORDER BY seq").bind(installationId).all<{ seq: number }>()).results.map((row) => row.seq);

/** An installation with its older events archived: at least one segment. */
async function archived() {
  const installation = await trail([3, 3, 2]);
  const done = await archiveAuditSegments(env, installation.id, future());
  expect(done.segments).toBeGreaterThan(0);
  const [segment] = await segments(installation.id);
  return { ...installation, segment: segment!, key: segmentKey(installation.id, segment!.fromSeq, segment!.toSeq) };
}

async function rewrite(key: string, edit: (lines: string[]) => string[]) {
  const text = await (await env.AUDIT_ANCHORS.get(key))!.text();
  const lines = text.split("\n").slice(0, -1);
  await env.AUDIT_ANCHORS.put(key, `${edit(lines).join("\n")}\n`);
}

describe("audit segments", () => {
  it("archives sealed, checkpointed history and lists it exactly as it was in D1", async () => {
    const { id, apiKey } = await trail([3, 3, 2]);
    const before = await listAll(apiKey);
    const head = before.at(-1)!.seq as number;
    expect(before.map((item) => item.seq)).toEqual(Array.from({ length: head }, (_, index) => index + 1));

    const done = await archiveAuditSegments(env, id, future());
    expect(done).toMatchObject({ refused: 0 });
    const index = await segments(id);
    expect(index.length).toBeGreaterThan(0);
    expect(index[0]!.fromSeq).toBe(1);
    const archivedTo = index.at(-1)!.toSeq;
    // The newest checkpointed event (the head) stays in D1; everything archived left it.
    const hot = await hotSeqs(id);
    expect(hot[0]).toBe(archivedTo + 1);
    expect(hot).toContain(head);
    for (const segment of index) expect(await env.AUDIT_ANCHORS.head(segmentKey(id, segment.fromSeq, segment.toSeq))).not.toBeNull();

    // Field by field the same, in one page and in pages that cross the boundary.
    const after = await listAll(apiKey);
    expect(after.filter((item) => item.seq <= head)).toEqual(before);
    const paged = await listAll(apiKey, 2);
    expect(paged.filter((item) => item.seq <= head)).toEqual(before);
    // Filters apply to archived events as to hot ones.
    const filtered = await listAll(apiKey, 500, "&action=workflow");
    expect(filtered.filter((item) => item.seq <= head)).toEqual(before.filter((item) => item.action === "workflow" || item.action.startsWith("workflow.")));

    expect(await verify(apiKey, "full")).toMatchObject({ ok: true, checkedFrom: 1 });
    expect(await verify(apiKey, "incremental")).toMatchObject({ ok: true });
  });

  it("a segment keeps its end's checkpoint (and the chain's first), not those inside it; the chain still verifies", async () => {
    const { id, apiKey } = await trail([2, 2, 2, 2, 2]);
    const seqs = async () => (await env.DB.prepare("SELECT DISTINCT seq FROM audit_checkpoints WHERE installation_id = ?1 ORDER BY seq").bind(id).all<{ seq: number }>()).results.map((row) => row.seq);
    const before = await seqs();
    expect(before.length).toBeGreaterThanOrEqual(5);
    await archiveAuditSegments(env, id, future());
    const index = await segments(id);
    expect(index.length).toBeGreaterThan(0);
    const after = await seqs();
    const inside = (seq: number) => index.some((segment) => seq >= segment.fromSeq && seq < segment.toSeq);
    expect(after).toEqual(before.filter((seq) => seq === before[0] || !inside(seq)));
    expect(after.length).toBeLessThan(before.length);
    for (const segment of index) expect(after).toContain(segment.toSeq);
    expect(await verify(apiKey, "full")).toMatchObject({ ok: true, checkedFrom: 1 });
  });

  it("an incremental verification whose last verified checkpoint was archived starts after the segments", async () => {
    const { id, apiKey } = await trail([2, 2, 2]);
    expect(await verify(apiKey, "incremental")).toMatchObject({ ok: true });
    await archiveAuditSegments(env, id, future());
    const last = (await segments(id)).at(-1)!;
    // New events, so the verified checkpoint is no longer the head.
    await api("/api/v1/workflows", { key: apiKey, body: { name: "later" } });
    const verdict = await verify(apiKey, "incremental");
    expect(verdict).toMatchObject({ ok: true });
    expect(verdict.checkedFrom).toBeGreaterThanOrEqual(last.toSeq + 1);
  });

  it("an archived event edited inside the object fails full verification, naming the segment", async () => {
    const { apiKey, key } = await archived();
    // The attacker rewrites the line's details (valid JSON, same key order; no key for a new MAC).
    await rewrite(key, (lines) => lines.map((line, index) => (index === 1 ? JSON.stringify({ ...JSON.parse(line), detailsJson: JSON.stringify({ name: "forged" }) }) : line)));
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: 2, reason: "entry_mac_mismatch", segment: key } });
  });

  it("an event line deleted from the object fails full verification, naming the segment", async () => {
    const { apiKey, key } = await archived();
    await rewrite(key, (lines) => lines.filter((_, index) => index !== 1));
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: 2, reason: "seq_gap", segment: key } });
  });

  it("lines reordered in the object fail full verification, naming the segment", async () => {
    const { apiKey, key } = await archived();
    await rewrite(key, (lines) => [lines[0]!, lines[2]!, lines[1]!, ...lines.slice(3)]);
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: 2, reason: "seq_gap", segment: key } });
  });

  it("a deleted object fails full verification, naming the segment; a replaced one by its digest", async () => {
    const { apiKey, key, segment } = await archived();
    const original = await (await env.AUDIT_ANCHORS.get(key))!.text();
    await env.AUDIT_ANCHORS.delete(key);
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: segment.fromSeq, reason: "segment_missing", segment: key } });
    // The listing says the archive is unavailable rather than skipping it.
    expect((await api("/api/v1/audit-events?limit=5", { key: apiKey })).body.error.code).toBe("audit.segment_unavailable");
    // Same events, other bytes (the line's JSON spaced differently): only the digest catches it.
    await env.AUDIT_ANCHORS.put(key, original.replace(/^\{"action"/u, '{ "action"'));
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: segment.fromSeq, reason: "segment_digest_mismatch", segment: key } });
    await env.AUDIT_ANCHORS.put(key, original);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });

  it("a sweep cut short after writing the object finishes on the next pass, without duplicates", async () => {
    const { id, apiKey } = await trail([3, 3, 2]);
    const before = await listAll(apiKey);
    const cutoff = future();
    const plan = (await planSegment(env, id, cutoff))!;
    expect(plan).toMatchObject({ fromSeq: 1 });
    const written = (await writeSegment(env, plan))!;
    const key = segmentKey(id, plan.fromSeq, plan.toSeq);
    expect(await env.AUDIT_ANCHORS.head(key)).not.toBeNull();
    // Killed here: the object is written, nothing indexed, every row still in D1.
    expect(written.sha256).toMatch(/^[0-9a-f]{64}$/u);
    expect(await segments(id)).toEqual([]);
    expect((await hotSeqs(id))[0]).toBe(1);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
    // An earlier pass cut short that had planned a shorter range left its object too.
    const earlier = (await env.DB.prepare("SELECT MIN(seq) AS seq FROM audit_checkpoints WHERE installation_id = ?").bind(id).first<{ seq: number }>())!.seq;
    const shorter = (await planSegment(env, id, cutoff, earlier))!;
    expect(shorter.toSeq).toBeLessThan(plan.toSeq);
    await writeSegment(env, shorter);

    const swept = await sweepAuditSegments(env, new Date(Date.now() + 60_000), { hotDaysFor: (installationId) => (installationId === id ? 0 : 36_500) });
    expect(swept.segments).toBeGreaterThan(0);
    const index = await segments(id);
    expect(index[0]).toMatchObject({ fromSeq: 1, sha256: written.sha256 });
    expect((await hotSeqs(id))[0]).toBe(index.at(-1)!.toSeq + 1);
    // Only indexed objects remain under the installation's prefix.
    const listed = await env.AUDIT_ANCHORS.list({ prefix: segmentStartPrefix(id, 1) });
    expect(listed.objects.map((o) => o.key)).toEqual([key]);
    const after = await listAll(apiKey);
    expect(new Set(after.map((item) => item.seq)).size).toBe(after.length);
    expect(after.filter((item) => item.seq <= before.at(-1)!.seq)).toEqual(before);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
    // Idempotent: another pass has nothing left (the head stays in D1).
    expect(await archiveAuditSegments(env, id, future())).toMatchObject({ segments: 0, events: 0 });
  });

  it("past the audit hour, sealed events leave D1 in segments of the minimum size while the window is 7 days; a quiet installation's few stay", async () => {
    const sweepAt = sweepTime();
    const now = new Date();
    const busy = await appendBulk(await newInstallation(), SEGMENT_MIN_EVENTS + 20, now);
    const quiet = await appendBulk(await newInstallation(), 20, now);
    // Written 50 minutes before the sweep: inside the audit hour.
    const young = await appendBulk(await newInstallation(), SEGMENT_MIN_EVENTS + 20, new Date(sweepAt.getTime() - 50 * 60_000));
    const sevenDays = (id: string) => ([busy.id, quiet.id, young.id].includes(id) ? 7 : 36_500);
    const before = await listAll(busy.apiKey);
    await sweepAuditSegments(env, sweepAt, { hotDaysFor: sevenDays });
    const index = await segments(busy.id);
    expect(index.length).toBeGreaterThan(0);
    for (const segment of index) expect(segment.toSeq - segment.fromSeq + 1).toBeGreaterThanOrEqual(SEGMENT_MIN_EVENTS);
    expect((await hotSeqs(busy.id))[0]).toBe(index.at(-1)!.toSeq + 1);
    expect((await listAll(busy.apiKey)).slice(0, before.length)).toEqual(before);
    expect(await verify(busy.apiKey)).toMatchObject({ ok: true, checkedFrom: 1 });
    // Fewer than the minimum, or younger than the hour: nothing leaves before the window.
    expect(await segments(quiet.id)).toEqual([]);
    expect(await segments(young.id)).toEqual([]);
    // The same quiet trail leaves once it is older than its window (0 days here).
    await sweepAuditSegments(env, sweepAt, { hotDaysFor: (id) => (id === quiet.id ? 0 : 36_500) });
    expect((await segments(quiet.id)).length).toBeGreaterThan(0);
  });

  it("a read by target finds archived events through the target markers, reading only the segments that hold them", async () => {
    const installation = await appendBulk(await newInstallation(), SEGMENT_MIN_EVENTS + 20, new Date(), { tag: "first" });
    const { id, apiKey } = installation;
    expect((await archiveAuditSegments(env, id, future(), 100_000, SEGMENT_MIN_EVENTS)).segments).toBe(1);
    // target/late is named only by events of the second segment.
    await appendBulk(installation, SEGMENT_MIN_EVENTS + 20, new Date(), { tag: "second", extra: ["target/late", "target/late"] });
    const byTarget = async (target: string) => listAll(apiKey, 500, `&targetId=${encodeURIComponent(target)}`);
    const beforeLate = await byTarget("target/late");
    const beforeThree = await byTarget("target-3");
    expect(beforeLate).toHaveLength(2);
    expect(beforeThree.length).toBeGreaterThan(100);
    expect((await archiveAuditSegments(env, id, future(), 100_000, SEGMENT_MIN_EVENTS)).segments).toBe(1);
    const index = await segments(id);
    expect(index).toHaveLength(2);
    // One marker per (target, segment): target/late's names the second segment only.
    const markers = (await env.AUDIT_ANCHORS.list({ prefix: targetPrefix(id, "target/late") })).objects.map((o) => o.key);
    expect(markers).toHaveLength(1);
    expect(markers[0]!.endsWith(`${String(index[1]!.fromSeq).padStart(12, "0")}-${String(index[1]!.toSeq).padStart(12, "0")}`)).toBe(true);
    expect(await byTarget("target/late")).toEqual(beforeLate);
    expect(await byTarget("target-3")).toEqual(beforeThree);
    // Without the first segment's object, a read of the whole trail fails; target/late's does not need it.
    await env.AUDIT_ANCHORS.delete(segmentKey(id, index[0]!.fromSeq, index[0]!.toSeq));
    expect((await api("/api/v1/audit-events?limit=10", { key: apiKey })).body.error?.code).toBe("audit.segment_unavailable");
    expect(await byTarget("target/late")).toEqual(beforeLate);
    expect((await api("/api/v1/audit-events?limit=10&targetId=target-3", { key: apiKey })).body.error?.code).toBe("audit.segment_unavailable");
  });

  it("events inside the hot window are never segmented", async () => {
    const { id } = await trail([3, 3, 2]);
    const rows = await hotSeqs(id);
    const swept = await sweepAuditSegments(env, new Date(), { hotDaysFor: (installationId) => (installationId === id ? 7 : 36_500) });
    expect(swept.events).toBe(0);
    expect(await segments(id)).toEqual([]);
    expect(await hotSeqs(id)).toEqual(rows);
    expect(await planSegment(env, id, new Date(Date.now() - 7 * 86_400_000).toISOString())).toBeNull();
  });

  it("only checkpoints whose MAC verifies bound the events accepted without a MAC or under an unknown key", async () => {
    const { id } = await trail([2, 2, 2]);
    await sealAuditChain(env, id, { anchor: true });
    const real = await checkpointBounds(env.DB, id);
    expect(real.first).toBeGreaterThan(0);
    // Rows written into D1 with a made-up key id, past the head and at the start: no bound moves.
    const head = (await env.DB.prepare("SELECT MAX(seq) AS seq FROM audit_events WHERE installation_id = ?1").bind(id).first<{ seq: number }>())!.seq;
    for (const seq of [head + 50, 1]) {
      await env.DB.prepare("INSERT INTO audit_checkpoints (installation_id, seq, head_hash, key_id, mac, created_at) VALUES (?1, ?2, 'x', 'ak_forged', 'y', ?3)").bind(id, seq, new Date().toISOString()).run();
    }
    expect(await checkpointBounds(env.DB, id)).toEqual(real);
    // Every checkpoint row deleted while an anchor exists: nothing is accepted without a MAC.
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE installation_id = ?1").bind(id).run();
    expect(await checkpointBounds(env.DB, id, { anchored: async () => true })).toEqual({ first: 0, last: 0 });
    expect(await checkpointBounds(env.DB, id, { anchored: async () => false })).toEqual({ first: null, last: null });
  });

  it("the scheduled full verification resumes inside a segment", async () => {
    const { id } = await archived();
    const keys = auditKeys(env);
    const bounds = await checkpointBounds(env.DB, id);
    const start = await walkChain(env, id, keys, bounds, { seq: 1, prev: GENESIS_HASH }, 1);
    expect(start.broken).toBeNull();
    const rest = await walkChain(env, id, keys, bounds, { seq: 2, prev: (await firstLine(id)).hash! }, Number.MAX_SAFE_INTEGER);
    expect(rest).toMatchObject({ broken: null, end: true });
  });

  it("another installation's segments are never read", async () => {
    const a = await archived();
    const b = await archived();
    const bEvents = await listAll(b.apiKey);
    await env.AUDIT_ANCHORS.delete(a.key);
    expect(await verify(a.apiKey)).toMatchObject({ ok: false, firstBroken: { reason: "segment_missing", segment: a.key } });
    expect(await verify(b.apiKey)).toMatchObject({ ok: true });
    expect((await listAll(b.apiKey)).slice(0, bEvents.length)).toEqual(bEvents);
    // B's object under A's key (B's bytes where A's were): A's verification still fails.
    await env.AUDIT_ANCHORS.put(a.key, await (await env.AUDIT_ANCHORS.get(b.key))!.text());
    expect(await verify(a.apiKey)).toMatchObject({ ok: false, firstBroken: { segment: a.key } });
  });

  it("an incremental verification from a checkpoint in the hot window reads no segment", async () => {
    const { apiKey, key, segment } = await archived();
    expect(await verify(apiKey, "incremental")).toMatchObject({ ok: true });
    await env.AUDIT_ANCHORS.delete(key);
    await api("/api/v1/workflows", { key: apiKey, body: { name: "later" } });
    expect(await verify(apiKey, "incremental")).toMatchObject({ ok: true });
    expect(await verify(apiKey, "full")).toMatchObject({ ok: false, firstBroken: { seq: segment.fromSeq, reason: "segment_missing", segment: key } });
  });

  it("an anchor still on a checkpoint whose event was just archived is in the chain", async () => {
    const { id, apiKey, segment } = await archived();
    // A seal inserted a newer checkpoint and had not yet moved the anchor when the sweep archived up to the older one.
    const older = await env.DB.prepare("SELECT installation_id AS installationId, seq, head_hash AS headHash, key_id AS keyId, mac, created_at AS createdAt FROM audit_checkpoints WHERE installation_id = ? AND seq = ? LIMIT 1")
      .bind(id, segment.toSeq)
      .first();
    expect(older).not.toBeNull();
    await env.AUDIT_ANCHORS.put(`audit/${id}/head.json`, JSON.stringify(older));
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });

  it("deleting an installation's segments removes its objects only", async () => {
    const a = await archived();
    const b = await archived();
    expect(await deleteAuditSegments(env, a.id)).toBeGreaterThan(0);
    expect((await env.AUDIT_ANCHORS.list({ prefix: segmentPrefix(a.id) })).objects).toEqual([]);
    expect(await env.AUDIT_ANCHORS.head(b.key)).not.toBeNull();
    expect(await verify(b.apiKey)).toMatchObject({ ok: true });
  });

  it("a backup carries the segments; the restore verifies over them, and an edited segment is refused and removed", async () => {
    const { id, apiKey, key } = await archived();
    const before = await listAll(apiKey);
    const exported = await api("/api/v1/installation/export", { key: apiKey, method: "POST" });
    expect(exported.status, JSON.stringify(exported.body)).toBe(200);
    const backup = exported.body;
    expect(backup.manifest.counts.audit_segments).toBeGreaterThan(0);
    expect(backup.objects).toContainEqual(expect.objectContaining({ bucket: "AUDIT_ANCHORS", key }));
    const remove = async () => {
      await env.DB.batch(installationDeleteStatements(env.DB, id));
      await env.AUDIT_ANCHORS.delete(`audit/${id}/head.json`);
      await deleteAuditSegments(env, id);
    };
    await remove();

    // An archived event edited in the backup's segment (digest recomputed): the chain gives it away, nothing is kept.
    const edited = structuredClone(backup);
    const object = edited.objects.find((o: { key: string }) => o.key === key);
    const lines = atob(object.base64).split("\n");
    lines[1] = JSON.stringify({ ...JSON.parse(lines[1]!), detailsJson: JSON.stringify({ name: "forged" }) });
    object.base64 = btoa(lines.join("\n"));
    edited.manifest.digest = `sha256:${await sha256Hex(canonicalJson({ tables: edited.tables, objects: edited.objects }))}`;
    const broken = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: edited });
    expect(broken.status).toBe(422);
    expect(broken.body.error).toMatchObject({ code: "installation_import.chain_broken", details: { firstBroken: { segment: key } } });
    expect((await env.AUDIT_ANCHORS.list({ prefix: segmentPrefix(id) })).objects).toEqual([]);

    // An object under a segment key the backup does not index is not one a backup carries.
    const stray = structuredClone(backup);
    stray.objects.push({ ...object, key: segmentKey(id, 900, 901) });
    stray.manifest.digest = `sha256:${await sha256Hex(canonicalJson({ tables: stray.tables, objects: stray.objects }))}`;
    expect((await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: stray })).body.error.code).toBe("installation_import.object_invalid");

    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    expect(restored.body.auditChain).toMatchObject({ ok: true, mode: "full" });
    expect(await env.AUDIT_ANCHORS.head(key)).not.toBeNull();
    expect((await listAll(apiKey)).slice(0, before.length)).toEqual(before);
    // The target markers are not in the backup; the restore writes them again from the segments.
    const target = before[0]!.target.id as string;
    expect((await env.AUDIT_ANCHORS.list({ prefix: targetPrefix(id, target) })).objects.length).toBeGreaterThan(0);
    expect((await listAll(apiKey, 500, `&targetId=${encodeURIComponent(target)}`)).filter((item) => item.seq <= before.at(-1)!.seq)).toEqual(before.filter((item) => item.target.id === target));
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });
});

async function firstLine(installationId: string): Promise<AuditRow> {
  const [segment] = await segments(installationId);
  const text = await (await env.AUDIT_ANCHORS.get(segmentKey(installationId, segment!.fromSeq, segment!.toSeq)))!.text();
  return JSON.parse(text.split("\n")[0]!) as AuditRow;
}
