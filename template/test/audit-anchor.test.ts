// The audit chain's tail: events carry a keyed MAC from the start, each seal writes a
// keyed checkpoint in D1 and the newest in R2 (AUDIT_ANCHORS). Each test is named for the attack
// it stops: an edit (sealed or not), a gap, a deleted tail (with its checkpoint row), a chain
// recomputed after an edit; and existing chains get checkpoints, keys rotate.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { auditStatement } from "../src/audit";
import { type AuditRow, AUDIT_COLUMNS, checkpointBounds, eventHash, fromStored, GENESIS_HASH, sealAuditChain } from "../src/audit/chain";
import { verifyAuditChain, walkChain } from "../src/audit/chain-verify";
import { auditKeys } from "../src/audit/keys";
import { sweepAuditChains } from "../src/audit/chain-sweep";
import { api, newInstallation } from "./helpers";

/** An installation with `count` more audited writes, sealed. */
async function trail(count: number) {
  const installation = await newInstallation();
  for (let index = 0; index < count; index++) expect((await api("/api/v1/workflows", { key: installation.apiKey, body: { name: `wf-${index}` } })).status).toBe(201);
  await sealAuditChain(env, installation.id); // whatever the writes' own (waitUntil) seals did
  return installation;
}

const verify = async (apiKey: string, mode: "incremental" | "full" = "incremental") => {
  const response = await api(`/api/v1/audit/verify?mode=${mode}`, { key: apiKey });
  expect(response.status).toBe(200);
  return response.body;
};

/** The events as the chain reads them (hashes and MACs in hex, whichever form they are stored in). */
const rows = async (installationId: string) => (await env.DB.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE installation_id = ? ORDER BY seq`).bind(installationId).all<AuditRow>()).results.map(fromStored);

const checkpoints = async (installationId: string) =>
  (
    await env.DB.prepare("SELECT seq, head_hash AS headHash, key_id AS keyId, verified_at AS verifiedAt FROM audit_checkpoints WHERE installation_id = ? ORDER BY seq, created_at")
      .bind(installationId)
      .all<{ seq: number; headHash: string; keyId: string; verifiedAt: string | null }>()
  ).results;

const anchor = async (installationId: string) => (await (await env.AUDIT_ANCHORS.get(`audit/${installationId}/head.json`))?.json()) as { seq: number; headHash: string; keyId: string } | null;

/** What an attacker with write access to D1 (and the published algorithm, not the key) can do. */
async function recomputeFrom(installationId: string, seq: number) {
  const all = await rows(installationId);
  let prev = all.find((row) => row.seq === seq - 1)?.hash ?? GENESIS_HASH;
  for (const row of all.filter((r) => r.seq >= seq)) {
    const hash = await eventHash(prev, row);
    await env.DB.prepare("UPDATE audit_events SET prev_hash = ?, hash = ? WHERE id = ?").bind(prev, hash, row.id).run();
    prev = hash;
  }
}

describe("the chain is anchored", () => {
  it("deleting the newest events together with the newest checkpoint row is caught by the R2 anchor", async () => {
    const { id, apiKey } = await trail(4);
    const ok = await verify(apiKey);
    expect(ok).toMatchObject({ ok: true, anchored: true });
    const head = ok.events as number;
    expect(await anchor(id)).toMatchObject({ seq: head, headHash: ok.head });
    // The attacker removes the last two events and every checkpoint that mentions them.
    await env.DB.prepare("DELETE FROM audit_events WHERE installation_id = ? AND seq > ?")
      .bind(id, head - 2)
      .run();
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE installation_id = ? AND seq > ?")
      .bind(id, head - 2)
      .run();
    for (const mode of ["incremental", "full"] as const) {
      expect(await verify(apiKey, mode)).toMatchObject({ ok: false, firstBroken: { seq: head, reason: "tail_missing" } });
    }
    // New writes do not paper over it: the sealer never moves the anchor past a chain that left it.
    await api("/api/v1/workflows", { key: apiKey, body: { name: "after" } });
    await api("/api/v1/workflows", { key: apiKey, body: { name: "after-2" } });
    await api("/api/v1/workflows", { key: apiKey, body: { name: "after-3" } });
    expect(await anchor(id)).toMatchObject({ seq: head, headHash: ok.head });
    expect(await verify(apiKey, "full")).toMatchObject({ ok: false, firstBroken: { seq: head } });
  });

  it("emptying the list of due anchors does not freeze the anchor: a full verification pass moves it", async () => {
    const { id, apiKey } = await trail(2);
    const first = await verify(apiKey);
    expect(await anchor(id)).toMatchObject({ seq: first.events });
    for (const name of ["later-1", "later-2", "later-3"]) expect((await api("/api/v1/workflows", { key: apiKey, body: { name } })).status).toBe(201);
    // The writes' own seals: linked and checkpointed in D1, the anchor left to the schedule.
    await sealAuditChain(env, id, { anchor: false });
    const head = (await rows(id)).at(-1)!.seq;
    expect(await anchor(id)).toMatchObject({ seq: first.events });
    // Someone who can write D1 keeps the list of due anchors empty for this installation.
    const trigger = `freeze_${id}`;
    await env.DB.prepare(`CREATE TRIGGER ${trigger} AFTER INSERT ON audit_anchor_due WHEN NEW.installation_id = '${id}' BEGIN DELETE FROM audit_anchor_due WHERE installation_id = NEW.installation_id; END`).run();
    await env.DB.prepare("DELETE FROM audit_anchor_due WHERE installation_id = ?1").bind(id).run();
    try {
      for (let pass = 0; pass < 20 && (await anchor(id))?.seq !== head; pass++) await sweepAuditChains(env);
      expect(await anchor(id)).toMatchObject({ seq: head });
    } finally {
      await env.DB.prepare(`DROP TRIGGER ${trigger}`).run();
    }
    // So deleting the newest events with their checkpoints is caught.
    await env.DB.prepare("DELETE FROM audit_events WHERE installation_id = ?1 AND seq > ?2").bind(id, first.events).run();
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE installation_id = ?1 AND seq > ?2").bind(id, first.events).run();
    expect(await verify(apiKey, "full")).toMatchObject({ ok: false, firstBroken: { seq: head, reason: "tail_missing" } });
  });

  it("deleting the newest events and every checkpoint row is caught by the R2 anchor", async () => {
    const { id, apiKey } = await trail(3);
    const ok = await verify(apiKey);
    await env.DB.prepare("DELETE FROM audit_events WHERE installation_id = ? AND seq = ?").bind(id, ok.events).run();
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE installation_id = ?").bind(id).run();
    expect(await verify(apiKey, "full")).toMatchObject({ ok: false, firstBroken: { seq: ok.events, reason: "tail_missing" } });
  });

  it("events written after the walk's seal are the unsealed tail, not a break; an unsealed event before a sealed one is", async () => {
    const { id } = await trail(2);
    await sealAuditChain(env, id);
    const head = (await rows(id)).at(-1)!;
    // Written after the seal (another request's write; its own seal has not run yet).
    const event = (n: number) =>
      auditStatement(env.DB, {
        installationId: id,
        idempotencyKey: `test:${crypto.randomUUID()}`,
        action: "report.created",
        actor: { type: "system", id: "test" },
        target: { type: "report", id: `r${n}` },
        details: { n },
        at: new Date().toISOString(),
      });
    await env.DB.batch([event(1), event(2)]);
    const walk = async () => walkChain(env, id, auditKeys(env), await checkpointBounds(env.DB, id), { seq: 1, prev: GENESIS_HASH }, 1_000);
    const tail = await walk();
    expect(tail).toMatchObject({ broken: null, end: true });
    expect(tail.position.seq).toBe(head.seq + 1);
    // Once the next event is sealed, the unsealed one before it is a break.
    const [first, second] = (await rows(id)).filter((row) => row.hash === null);
    await env.DB.prepare("UPDATE audit_events SET hash = ?2, prev_hash = ?3 WHERE id = ?1").bind(second!.id, "f".repeat(64), "e".repeat(64)).run();
    expect(await walk()).toMatchObject({ broken: { seq: first!.seq, reason: "unsealed" } });
  });

  it("an event edited before it was sealed is refused by its MAC", async () => {
    const { id, apiKey } = await trail(1);
    // A write whose seal has not run yet (the request's waitUntil, or the next minute).
    await env.DB.batch([
      auditStatement(env.DB, {
        installationId: id,
        idempotencyKey: `test:${crypto.randomUUID()}`,
        action: "report.created",
        actor: { type: "system", id: "test" },
        target: { type: "report", id: "r1" },
        details: { category: "spam" },
        at: new Date().toISOString(),
      }),
    ]);
    const [unsealed] = (await rows(id)).filter((row) => row.hash === null);
    expect(unsealed?.entryMac).toMatch(/^ak_[0-9a-f]{16}:[0-9a-f]{64}$/u);
    await env.DB.prepare("UPDATE audit_events SET details_json = ? WHERE id = ?")
      .bind(JSON.stringify({ category: "harmless" }), unsealed!.id)
      .run();
    const broken = await verify(apiKey);
    expect(broken).toMatchObject({ ok: false, firstBroken: { id: unsealed!.id, seq: unsealed!.seq, reason: "entry_mac_mismatch" } });
    // The sealer refused to chain it; clearing the MAC does not help either.
    expect((await rows(id)).find((row) => row.id === unsealed!.id)?.hash).toBeNull();
    await env.DB.prepare("UPDATE audit_events SET entry_mac = NULL WHERE id = ?").bind(unsealed!.id).run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { id: unsealed!.id, reason: "entry_mac_mismatch" } });
  });

  it("a sealed event edited in D1 is named by the full verification, on request and on the schedule", async () => {
    const { id, apiKey } = await trail(3);
    expect((await verify(apiKey)).ok).toBe(true);
    const victim = (await rows(id))[2]!;
    await env.DB.prepare("UPDATE audit_events SET details_json = ? WHERE id = ?")
      .bind(JSON.stringify({ name: "forged" }), victim.id)
      .run();
    expect(await verify(apiKey, "full")).toMatchObject({ ok: false, firstBroken: { id: victim.id, seq: victim.seq, reason: "entry_mac_mismatch" } });
    await sweepAuditChains(env);
    const scheduled = await verify(apiKey);
    expect(scheduled.lastFullVerification).toMatchObject({ ok: false, firstBroken: { seq: victim.seq, reason: "entry_mac_mismatch" } });
  });

  it("a gap (an event deleted in the middle) is named", async () => {
    const { id, apiKey } = await trail(3);
    const victim = (await rows(id))[1]!;
    await env.DB.prepare("DELETE FROM audit_events WHERE id = ?").bind(victim.id).run();
    expect(await verify(apiKey, "full")).toMatchObject({ ok: false, firstBroken: { seq: victim.seq, reason: "seq_gap" } });
    // Never verified before: the incremental check starts at the beginning and finds it too.
    const fresh = await trail(3);
    const middle = (await rows(fresh.id))[2]!;
    await env.DB.prepare("DELETE FROM audit_events WHERE id = ?").bind(middle.id).run();
    expect(await verify(fresh.apiKey)).toMatchObject({ ok: false, firstBroken: { seq: middle.seq, reason: "seq_gap" } });
  });

  it("a chain recomputed after an edit is caught by its keyed checkpoints", async () => {
    const { id, apiKey } = await trail(4);
    expect((await verify(apiKey)).ok).toBe(true);
    const victim = (await rows(id))[1]!;
    // The attacker edits a sealed event, forges nothing they cannot (no key), and recomputes the hashes.
    await env.DB.prepare("UPDATE audit_events SET details_json = ?, entry_mac = NULL WHERE id = ?")
      .bind(JSON.stringify({ name: "forged" }), victim.id)
      .run();
    await recomputeFrom(id, victim.seq);
    const incremental = await verify(apiKey);
    expect(incremental).toMatchObject({ ok: false, firstBroken: { reason: "checkpoint_mismatch" } });
    const full = await verify(apiKey, "full");
    expect(full.ok).toBe(false);
    expect(["checkpoint_mismatch", "entry_mac_mismatch"]).toContain(full.firstBroken.reason);
    // …and with every checkpoint row deleted as well (and every MAC), the R2 anchor still says a
    // chain existed: events without a MAC are no longer adopted, and the anchor disagrees anyway.
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE installation_id = ?").bind(id).run();
    await env.DB.prepare("UPDATE audit_events SET entry_mac = NULL WHERE installation_id = ?").bind(id).run();
    const withoutCheckpoints = await verify(apiKey, "full");
    expect(withoutCheckpoints.ok).toBe(false);
    expect(withoutCheckpoints.firstBroken).toMatchObject({ seq: 1, reason: "entry_mac_mismatch" });
  });
});

describe("checkpoints over time", () => {
  it("existing chains get checkpoints: a trail sealed before anchoring is adopted on the schedule", async () => {
    const { id, apiKey } = await trail(2);
    // As a chain looked before migration 0009: events without MACs, some sealed, no checkpoints.
    await env.DB.prepare("UPDATE audit_events SET entry_mac = NULL WHERE installation_id = ?").bind(id).run();
    await env.DB.prepare("UPDATE audit_events SET hash = NULL, prev_hash = NULL WHERE installation_id = ? AND seq > 1").bind(id).run();
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE installation_id = ?").bind(id).run();
    await env.AUDIT_ANCHORS.delete(`audit/${id}/head.json`);
    const summary = await sweepAuditChains(env);
    expect(summary.installationsSealed).toBeGreaterThanOrEqual(1);
    const [checkpoint] = await checkpoints(id);
    expect(checkpoint).toMatchObject({ seq: 3 });
    expect(await anchor(id)).toMatchObject({ seq: 3, headHash: checkpoint!.headHash });
    expect(await verify(apiKey, "full")).toMatchObject({ ok: true, anchored: true, events: 3 });
    // From now on an event without a MAC is not accepted.
    await env.DB.prepare("INSERT INTO audit_events (id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at) VALUES (?, ?, ?, 'x.forged', 'system', 'x', 'x', 'x', '{}', ?)")
      .bind(crypto.randomUUID(), id, `forged:${crypto.randomUUID()}`, new Date().toISOString())
      .run();
    expect(await verify(apiKey)).toMatchObject({ ok: false, firstBroken: { seq: 4, reason: "entry_mac_mismatch" } });
  });

  it("incremental verification starts from the last verified checkpoint; the schedule verifies in full", async () => {
    const { id, apiKey } = await trail(3);
    const first = await verify(apiKey);
    expect(first).toMatchObject({ ok: true, checkedFrom: 1 });
    await api("/api/v1/workflows", { key: apiKey, body: { name: "later" } });
    const second = await verify(apiKey);
    expect(second).toMatchObject({ ok: true, checkedFrom: first.events + 1, events: first.events + 1 });
    expect((await checkpoints(id)).at(-1)).toMatchObject({ seq: second.events });
    expect((await checkpoints(id)).at(-1)?.verifiedAt).not.toBeNull();
    await sweepAuditChains(env);
    expect((await verify(apiKey)).lastFullVerification).toMatchObject({ ok: true, events: second.events });
  });

  it("a rotated key: old checkpoints verify under AUDIT_CHECKPOINT_KEY_PREVIOUS and the head is signed again", async () => {
    const { id } = await trail(2);
    const before = await checkpoints(id);
    const rotated = { ...env, AUDIT_CHECKPOINT_KEY: "rotated-audit-key-fedcba9876543210fedcba9876543210", AUDIT_CHECKPOINT_KEY_PREVIOUS: env.AUDIT_CHECKPOINT_KEY } as Env;
    const verdict = await verifyAuditChain(rotated, id, "full");
    expect(verdict).toMatchObject({ ok: true, anchored: true });
    const after = await checkpoints(id);
    const newKeyId = after.at(-1)!.keyId;
    expect(newKeyId).not.toBe(before.at(-1)!.keyId);
    expect((await anchor(id))?.keyId).toBe(newKeyId);
    // Without the previous key, a checkpoint signed by an unknown key is skipped, not trusted.
    const onlyNew = { ...env, AUDIT_CHECKPOINT_KEY: rotated.AUDIT_CHECKPOINT_KEY } as Env;
    expect(await verifyAuditChain(onlyNew, id, "full")).toMatchObject({ ok: true });
    // A forged checkpoint (no key) is refused.
    await env.DB.prepare("UPDATE audit_checkpoints SET mac = ? WHERE installation_id = ? AND key_id = ?").bind("0".repeat(64), id, newKeyId).run();
    expect(await verifyAuditChain(onlyNew, id, "full")).toMatchObject({ ok: false, firstBroken: { reason: "checkpoint_invalid" } });
  });
});
