// Erasure by destroying a person's keys (crypto-shredding): a report is sealed under its period's
// key and the keys of the people it is about, so a person's erasure makes every copy of their data
// that relies on the keys in D1 unreadable — an archived case's immutable R2 object, a backup's
// ciphertext read against the live keys — while another person's data in the same case still
// opens. A backup file exported before the erasure still holds the person's key (a restore into a
// fresh deployment needs it); the erasure's tombstone, re-applied on every restore with the
// request's own checks, keeps them erased. The audit chain verifies, hot and archived; one
// installation's erasure never touches another's keys.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sealAuditChain } from "../src/audit/chain";
import { archiveAuditSegments } from "../src/audit/segment-sweep";
import { sweepCaseArchive } from "../src/cases/archive/case-archive";
import { caseArchiveKey } from "../src/cases/archive/case-scope";
import { tombstoneKey, tombstonesStatement } from "../src/cases/reports/erasure-tombstones";
import { forgetPersonSealingKeys, openPersonKey, personKeysPrefix } from "../src/cases/reports/person-data-keys";
import { reapplyErasures } from "../src/cases/retention/erasure-reapply";
import { destroyPeriodKeys, installationKey, openPersonalData, sealPersonalData } from "../src/cases/reports/report-crypto";
import { installationDeleteStatements } from "../src/installations/backup";
import { personKey } from "../src/lib/person-keys";
import { sweepMetricRollups, sweepTransparencyRollups } from "../src/metrics";
import { sweepRunArchive } from "../src/workflows/run-archive";
import { ADMIN_TOKEN, api, newInstallation } from "./helpers";

const DAY = 86_400_000;
const WORDS_A = "what only person A wrote about the scam";
const WORDS_B = "what only person B wrote about the same scam";

/** A report by `reporterId` about `subjectId` (no workflow: its case has nothing pending). */
async function report(apiKey: string, reporterId: string, subjectId: string, words: string) {
  const created = await api("/api/v1/reports", {
    key: apiKey,
    body: { subject: { kind: "content", id: subjectId, snapshot: { text: words } }, category: "scams_and_fraud", reporter: { id: reporterId, contact: `${reporterId}@example.org` }, description: words },
  });
  expect(created.status).toBe(201);
  return { id: created.body.id as string, caseId: created.body.caseId as string };
}

/** The code opening a sealed value fails with, or "opened:<description>". */
async function openOutcome(installationId: string, reportId: string, sealed: string): Promise<string> {
  try {
    const opened = await openPersonalData<{ description: string | null }>(env, installationId, `report:${reportId}`, sealed);
    return `opened:${opened.description}`;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

/** A person's keys of an installation: R2 objects (`keys/<installation>/<period>/<handle>`) and any row made before keys moved to R2. */
async function personKeyCount(installationId: string, person: string) {
  const handle = personKey(installationId, person, env)!.slice(4, 36);
  const listed = await env.AUDIT_ANCHORS.list({ prefix: personKeysPrefix(installationId) });
  const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM person_data_keys WHERE installation_id = ?1 AND person = ?2").bind(installationId, handle).first<{ n: number }>();
  return listed.objects.filter((o) => o.key.endsWith(`/${handle}`)).length + rows!.n;
}

/** An installation's key objects as R2 holds them (name and custom metadata: the wrapped material). */
async function keyObjects(installationId: string) {
  const listed = await env.AUDIT_ANCHORS.list({ prefix: personKeysPrefix(installationId), include: ["customMetadata"] });
  return listed.objects.map((o) => ({ key: o.key, metadata: o.customMetadata }));
}

async function removeInstallation(id: string) {
  await env.DB.batch(installationDeleteStatements(env.DB, id));
  await env.AUDIT_ANCHORS.delete(`audit/${id}/head.json`);
  expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM reports WHERE installation_id = ?1").bind(id).first<{ n: number }>()).toEqual({ n: 0 });
}

async function verifiesFully(apiKey: string) {
  const verify = await api("/api/v1/audit/verify?mode=full", { key: apiKey });
  expect(verify.status).toBe(200);
  expect(verify.body.ok).toBe(true);
  return verify.body;
}

describe("erasure by destroying a person's keys", () => {
  it("a backup exported before a person's erasure still holds their key, and restoring it re-applies the erasure from its tombstone: their key is deleted again, their report reads as erased, everyone else's opens", async () => {
    const inst = await newInstallation("shredding-backup");
    const a = await report(inst.apiKey, "person-a", "post-backup", WORDS_A);
    const b = await report(inst.apiKey, "person-b", "post-backup", WORDS_B);
    expect(await personKeyCount(inst.id, "person-a")).toBe(1);
    const exported = await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" });
    expect(exported.status).toBe(200);
    const backup = exported.body;
    const sealedIn = (id: string) => (backup.tables.reports as { id: string; personal_data: string }[]).find((r) => r.id === id)!.personal_data;
    // Sealed under the period's key and the reporter's (and, with no subject owner, no one else's).
    expect(sealedIn(a.id).split(".")[1]!.split("+")).toHaveLength(2);

    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-a" } } });
    expect(erased.status).toBe(200);
    expect(erased.body.erased).toMatchObject({ reports: 1 });
    expect(erased.body.keysDestroyed).toBe(1);
    expect(await personKeyCount(inst.id, "person-a")).toBe(0);
    // The tombstone names the person by their keyed index only, with the time.
    const tombstone = await env.DB.prepare("SELECT person_index AS person, erased_at AS erasedAt FROM erasure_tombstones WHERE installation_id = ?1").bind(inst.id).all<{ person: string; erasedAt: string }>();
    expect(tombstone.results).toEqual([{ person: personKey(inst.id, "person-a", env), erasedAt: erased.body.erasedAt }]);
    // The backup's ciphertext no longer opens against this database's keys; B's does. The file
    // still carries A's key row (a restore into a fresh deployment needs the keys it holds).
    expect((backup.tables.person_data_keys as { person: string }[]).map((k) => k.person)).toContain(personKey(inst.id, "person-a", env)!.slice(4, 36));
    expect(await openOutcome(inst.id, a.id, sealedIn(a.id))).toBe("crypto.data_key_destroyed");
    expect(await openOutcome(inst.id, b.id, sealedIn(b.id))).toBe(`opened:${WORDS_B}`);

    // Disaster: the installation is gone, and the backup from before the erasure is restored.
    await removeInstallation(inst.id);
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM erasure_tombstones WHERE installation_id = ?1").bind(inst.id).first<{ n: number }>()).toEqual({ n: 1 });
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });
    expect(restored.status).toBe(201);
    expect(restored.body.auditChain).toMatchObject({ ok: true, mode: "full" });
    expect(restored.body.erasuresReapplied).toMatchObject({ people: 1, keys: 1, reports: 1 });
    // The person's key came back with the backup and went again; their report reads as erased.
    expect(await personKeyCount(inst.id, "person-a")).toBe(0);
    expect(await openOutcome(inst.id, a.id, sealedIn(a.id))).toBe("crypto.data_key_destroyed");
    const readA = await api(`/api/v1/reports/${a.id}`, { key: inst.apiKey });
    expect(readA.status).toBe(200);
    expect(readA.body.description).toBeNull();
    expect(JSON.stringify(readA.body)).not.toContain(WORDS_A);
    // Everyone else's data is as the backup had it.
    const readB = await api(`/api/v1/reports/${b.id}`, { key: inst.apiKey });
    expect(readB.body.description).toBe(WORDS_B);
    expect(await openOutcome(inst.id, b.id, sealedIn(b.id))).toBe(`opened:${WORDS_B}`);
    // The person's data cannot be found by them any more either.
    const exportedAgain = await api("/api/v1/personal-data/export", { key: inst.apiKey, body: { reporter: { id: "person-a" } } });
    expect(exportedAgain.body.reports).toEqual([]);
    // The chain verifies after the erasure and its re-application.
    await verifiesFully(inst.apiKey);
    // Restoring the same backup again (a second disaster) re-applies it again.
    await removeInstallation(inst.id);
    expect((await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup })).body.erasuresReapplied).toMatchObject({ people: 1, keys: 1, reports: 1 });
    expect(await openOutcome(inst.id, a.id, sealedIn(a.id))).toBe("crypto.data_key_destroyed");
  });

  it("an archived case's sealed parts for the erased person no longer open, another person's in the same case still do, and the chain verifies hot and archived", async () => {
    const inst = await newInstallation("shredding-archive");
    expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
    const a = await report(inst.apiKey, "person-a", "post-archived", WORDS_A);
    const b = await report(inst.apiKey, "person-b", "post-archived", WORDS_B);
    expect(b.caseId).toBe(a.caseId);
    // Two days on, every hour rolled up: the quiet case leaves D1 for one immutable R2 object.
    const later = new Date(Date.now() + 2 * DAY);
    expect(await sweepRunArchive(env, later, { installationId: inst.id })).toMatchObject({ failed: 0 });
    for (let i = 0; i < 200 && ((await sweepMetricRollups(env, later)).more ?? 0) > 0; i++);
    for (let i = 0; i < 200 && ((await sweepTransparencyRollups(env, later)).more ?? 0) > 0; i++);
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    // With the case archived, nothing of the people's keys is in D1: each is an R2 object named by ids.
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM person_data_keys WHERE installation_id = ?1").bind(inst.id).first()).toEqual({ n: 0 });
    const handle = (person: string) => personKey(inst.id, person, env)!.slice(4, 36);
    const objectOf = async (person: string) => (await keyObjects(inst.id)).find((o) => o.key.endsWith(`/${handle(person)}`));
    expect(await objectOf("person-a")).toBeDefined();
    expect(await objectOf("person-b")).toBeDefined();
    // A copy of the archive object as it stands (an immutable copy: a bucket replica, a backup of it).
    const object = await env.WORKFLOW_ARTIFACTS.get(caseArchiveKey(inst.id, a.caseId));
    expect(object).not.toBeNull();
    const archived = JSON.parse(await object!.text()) as { tables: { reports: { id: string; personal_data: string }[] } };
    const sealedIn = (id: string) => archived.tables.reports.find((r) => r.id === id)!.personal_data;
    expect(await openOutcome(inst.id, a.id, sealedIn(a.id))).toBe(`opened:${WORDS_A}`);

    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-a" } } });
    expect(erased.status).toBe(200);
    expect(erased.body.keysDestroyed).toBe(1);
    // A's key object is gone from R2 (deletion is destruction); B's is there, as it was.
    expect(await objectOf("person-a")).toBeUndefined();
    expect(await objectOf("person-b")).toBeDefined();
    // The archived copy was not rewritten, and what it holds of A no longer opens; B's does.
    expect(await openOutcome(inst.id, a.id, sealedIn(a.id))).toBe("crypto.data_key_destroyed");
    expect(await openOutcome(inst.id, b.id, sealedIn(b.id))).toBe(`opened:${WORDS_B}`);
    expect((await api(`/api/v1/reports/${b.id}`, { key: inst.apiKey })).body.description).toBe(WORDS_B);

    // The trail archived into R2 segments: the full check walks them and the hot rest, and holds.
    // Sealed and anchored twice (the newest checkpoint stays hot), then archived up to the older one.
    await sealAuditChain(env, inst.id, { anchor: true });
    await report(inst.apiKey, "person-c", "post-other", WORDS_B);
    await sealAuditChain(env, inst.id, { anchor: true });
    expect((await archiveAuditSegments(env, inst.id, new Date(Date.now() + 60_000).toISOString())).segments).toBeGreaterThan(0);
    const segments = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_segments WHERE installation_id = ?1").bind(inst.id).first<{ n: number }>();
    expect(segments!.n).toBeGreaterThan(0);
    const verdict = await verifiesFully(inst.apiKey);
    const actions = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'person_data_key.destroyed'").bind(inst.id).first<{ n: number }>();
    expect(verdict.events).toBeGreaterThan(actions!.n);
  });

  it("another installation's erasure of the same person id never touches this one's keys or data", async () => {
    const mine = await newInstallation("shredding-mine");
    const theirs = await newInstallation("shredding-theirs");
    const kept = await report(mine.apiKey, "person-shared", "post-shared", WORDS_A);
    const gone = await report(theirs.apiKey, "person-shared", "post-shared", WORDS_A);
    // What was sealed before keys per person (the period's key alone) keeps opening too.
    const legacy = await sealPersonalData(env, mine.id, "report:legacy", { description: WORDS_B });
    expect(await personKeyCount(mine.id, "person-shared")).toBe(1);
    expect(await personKeyCount(theirs.id, "person-shared")).toBe(1);
    const keysBefore = await keyObjects(mine.id);
    expect(keysBefore).toHaveLength(1);

    const erased = await api("/api/v1/personal-data/erase", { key: theirs.apiKey, body: { reporter: { id: "person-shared" } } });
    expect(erased.status).toBe(200);
    expect(erased.body.keysDestroyed).toBe(1);
    expect(await personKeyCount(theirs.id, "person-shared")).toBe(0);
    expect((await api(`/api/v1/reports/${gone.id}`, { key: theirs.apiKey })).body.description).toBeNull();

    // Mine: the same keys, byte for byte; the report opens; no tombstone here.
    expect(await keyObjects(mine.id)).toEqual(keysBefore);
    expect((await api(`/api/v1/reports/${kept.id}`, { key: mine.apiKey })).body.description).toBe(WORDS_A);
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM erasure_tombstones WHERE installation_id = ?1").bind(mine.id).first<{ n: number }>()).toEqual({ n: 0 });
    expect(await openPersonalData(env, mine.id, "report:legacy", legacy.sealed)).toEqual({ description: WORDS_B });
  });
  it("a database brought back to before an erasure (D1 Time Travel) gets the erasure applied again from its tombstone, by the admin token only", async () => {
    const inst = await newInstallation("shredding-time-travel");
    const a = await report(inst.apiKey, "person-a", "post-tt", WORDS_A);
    const sealed = (await env.DB.prepare("SELECT personal_data AS sealed FROM reports WHERE id = ?1").bind(a.id).first<{ sealed: string }>())!.sealed;
    // The key object and the report as they were before the erasure (what Time Travel and a copy of the bucket would bring back).
    const keysBefore = await keyObjects(inst.id);
    expect(keysBefore).toHaveLength(1);
    expect((await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-a" } } })).body.keysDestroyed).toBe(1);
    expect(await keyObjects(inst.id)).toEqual([]);
    await env.AUDIT_ANCHORS.put(keysBefore[0]!.key, "", { customMetadata: keysBefore[0]!.metadata });
    await env.DB.batch([
      env.DB.prepare("UPDATE reports SET personal_data = ?2, personal_data_erased_at = NULL, reporter_key = ?3 WHERE id = ?1").bind(a.id, sealed, personKey(inst.id, "person-a", env)),
      env.DB.prepare("DELETE FROM erasure_tombstones WHERE installation_id = ?1").bind(inst.id),
    ]);
    expect((await api(`/api/v1/reports/${a.id}`, { key: inst.apiKey })).body.description).toBe(WORDS_A);
    // Not for an installation's own key; an unknown installation is a 404.
    expect((await api(`/api/v1/installations/${inst.id}/reapply-erasures`, { key: inst.apiKey, method: "POST" })).status).toBe(401);
    expect((await api("/api/v1/installations/inst_nope/reapply-erasures", { key: ADMIN_TOKEN, method: "POST" })).status).toBe(404);
    // The tombstone's R2 copy outlived the rollback of D1's; the erasure is applied again.
    const reapplied = await api(`/api/v1/installations/${inst.id}/reapply-erasures`, { key: ADMIN_TOKEN, method: "POST" });
    expect(reapplied.status).toBe(200);
    expect(reapplied.body.erasuresReapplied).toMatchObject({ people: 1, keys: 1, reports: 1 });
    expect(await personKeyCount(inst.id, "person-a")).toBe(0);
    expect(await openOutcome(inst.id, a.id, sealed)).toBe("crypto.data_key_destroyed");
    expect((await api(`/api/v1/reports/${a.id}`, { key: inst.apiKey })).body.description).toBeNull();
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM erasure_tombstones WHERE installation_id = ?1").bind(inst.id).first<{ n: number }>()).toEqual({ n: 1 });
    await verifiesFully(inst.apiKey);
  });
  it("retention ending a period deletes that period's people's keys with it, and no other period's", async () => {
    const inst = await newInstallation("shredding-period");
    const person = personKey(inst.id, "person-p", env)!;
    const old = await sealPersonalData(env, inst.id, "report:old", { description: WORDS_A }, { at: new Date("2020-01-15T00:00:00Z"), people: [person] });
    const recent = await sealPersonalData(env, inst.id, "report:recent", { description: WORDS_B }, { people: [person] });
    expect(await personKeyCount(inst.id, "person-p")).toBe(2);
    expect(await destroyPeriodKeys(env, inst.id, "2020-01", { at: new Date().toISOString(), actor: { type: "system", id: "retention" } })).toHaveLength(1);
    expect(await personKeyCount(inst.id, "person-p")).toBe(1);
    expect(await openOutcome(inst.id, "old", old.sealed)).toBe("crypto.data_key_destroyed");
    expect(await openOutcome(inst.id, "recent", recent.sealed)).toBe(`opened:${WORDS_B}`);
  });
  it("a reporter's erasure keeps their key while a report about them as a subject owner remains: that report still opens", async () => {
    const inst = await newInstallation("shredding-roles");
    const own = await report(inst.apiKey, "person-r", "post-roles-1", WORDS_A);
    const about = await api("/api/v1/reports", {
      key: inst.apiKey,
      body: { subject: { kind: "content", id: "post-roles-2", ownerId: "person-r" }, category: "scams_and_fraud", reporter: { id: "person-s" }, description: WORDS_B },
    });
    expect(about.status).toBe(201);
    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-r" } } });
    expect(erased.body.erased).toMatchObject({ reports: 1 });
    expect(erased.body.keysDestroyed).toBeNull();
    expect(await personKeyCount(inst.id, "person-r")).toBe(1);
    expect((await api(`/api/v1/reports/${own.id}`, { key: inst.apiKey })).body.description).toBeNull();
    expect((await api(`/api/v1/reports/${about.body.id}`, { key: inst.apiKey })).body.description).toBe(WORDS_B);
    // Erased in both roles, nothing of theirs is left: their key goes.
    const both = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-r" }, subjectOwner: { id: "person-r" } } });
    expect(both.body.erased).toMatchObject({ reports: 1 });
    expect(both.body.keysDestroyed).toBe(1);
    expect(await personKeyCount(inst.id, "person-r")).toBe(0);
  });
  it("an erasure that holds something back still leaves a tombstone of what it erased: a restore erases that again, and keeps the held case and what others reported about the person", async () => {
    const inst = await newInstallation("shredding-partial");
    const own = await report(inst.apiKey, "person-x", "post-partial-1", WORDS_A);
    const heldOwn = await report(inst.apiKey, "person-x", "post-partial-2", WORDS_A);
    expect((await api(`/api/v1/cases/${heldOwn.caseId}/preservation-holds`, { key: inst.apiKey, body: { reason: "Court order 42: keep the case" } })).status).toBe(201);
    const about = await api("/api/v1/reports", {
      key: inst.apiKey,
      body: { subject: { kind: "content", id: "post-partial-3", ownerId: "person-x" }, category: "scams_and_fraud", reporter: { id: "person-s" }, description: WORDS_B },
    });
    expect(about.status).toBe(201);
    const backup = (await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" })).body;

    // Erased as a reporter: their report in the held case stays, and their key (which also seals
    // the report someone else filed about their content) stays.
    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-x" } } });
    expect(erased.status).toBe(200);
    expect(erased.body).toMatchObject({ erased: { reports: 1 }, held: { reports: 1, caseIds: [heldOwn.caseId] }, keysDestroyed: null });
    expect(await personKeyCount(inst.id, "person-x")).toBe(1);
    const tombstone = await env.DB.prepare("SELECT reporter_until AS r, owner_until AS o, keys_until AS k FROM erasure_tombstones WHERE installation_id = ?1 AND person_index = ?2")
      .bind(inst.id, personKey(inst.id, "person-x", env))
      .first();
    expect(tombstone).toEqual({ r: erased.body.erasedAt, o: null, k: null });

    await removeInstallation(inst.id);
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });
    expect(restored.status).toBe(201);
    expect(restored.body.erasuresReapplied).toMatchObject({ people: 1, keys: 0, reports: 1 });
    // What the request erased is erased again; what it held back, and the report about them, are as the backup had them.
    const readOwn = await api(`/api/v1/reports/${own.id}`, { key: inst.apiKey });
    expect(readOwn.body.description).toBeNull();
    expect(JSON.stringify(readOwn.body)).not.toContain(WORDS_A);
    expect((await api(`/api/v1/reports/${heldOwn.id}`, { key: inst.apiKey })).body.description).toBe(WORDS_A);
    expect((await api(`/api/v1/reports/${about.body.id}`, { key: inst.apiKey })).body.description).toBe(WORDS_B);
    expect(await personKeyCount(inst.id, "person-x")).toBe(1);
    await verifiesFully(inst.apiKey);
  });

  it("a value sealed under a person's key another isolate still had cached after their erasure reads as erased, even once a new key is made for them", async () => {
    const inst = await newInstallation("shredding-generation");
    const person = personKey(inst.id, "person-g", env)!;
    const first = await sealPersonalData(env, inst.id, "report:g1", { description: WORDS_A }, { people: [person] });
    // Another isolate's erasure deletes the key object; this isolate's sealing cache still holds the key.
    for (const object of await keyObjects(inst.id)) await env.AUDIT_ANCHORS.delete(object.key);
    const stale = await sealPersonalData(env, inst.id, "report:g2", { description: WORDS_A }, { people: [person] });
    // The person is seen again: once the cache is gone, a new key is made for the same period.
    forgetPersonSealingKeys(inst.id);
    const fresh = await sealPersonalData(env, inst.id, "report:g3", { description: WORDS_B }, { people: [person] });
    expect(await personKeyCount(inst.id, "person-g")).toBe(1);
    expect(await openOutcome(inst.id, "g1", first.sealed)).toBe("crypto.data_key_destroyed");
    expect(await openOutcome(inst.id, "g2", stale.sealed)).toBe("crypto.data_key_destroyed");
    expect(await openOutcome(inst.id, "g3", fresh.sealed)).toBe(`opened:${WORDS_B}`);
  });

  it("a key made before keys moved to R2 (a row of person_data_keys) still opens, and a person's erasure deletes it with their R2 keys", async () => {
    const inst = await newInstallation("shredding-legacy");
    const person = personKey(inst.id, "person-l", env)!;
    const handle = person.slice(4, 36);
    // A key as the D1 store made it: an 8-digit generation, wrapped by the installation's key under its id.
    const wrapping = await installationKey(env, inst.id);
    const period = new Date().toISOString().slice(0, 7);
    const id = `psk_${period}_${handle}_0a1b2c3d`;
    const raw = crypto.getRandomValues(new Uint8Array(32));
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const wrapped = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: new TextEncoder().encode(`${inst.id}:person:${id}`) }, wrapping.key, raw));
    const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
    // Sealed for the person before: the same report, its period key made by a seal of its own.
    const r = await report(inst.apiKey, "person-l", "post-legacy", WORDS_A);
    await env.DB.prepare("INSERT INTO person_data_keys (installation_id, period, person, generation, wrapping_key_id, wrapped_key, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
      .bind(inst.id, period, handle, "0a1b2c3d", wrapping.id, `${b64(iv)}.${b64(wrapped)}`, new Date(Date.now() - 60_000).toISOString())
      .run();
    const opened = await openPersonKey(env, inst.id, id, async (dataKeyId) => {
      expect(dataKeyId).toBe(wrapping.id);
      return wrapping.key;
    });
    // What the legacy key seals, the key opened from its row opens.
    const probeIv = crypto.getRandomValues(new Uint8Array(12));
    const raw256 = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt"]);
    const probe = await crypto.subtle.encrypt({ name: "AES-GCM", iv: probeIv }, raw256, new TextEncoder().encode(WORDS_B));
    expect(new TextDecoder().decode(await crypto.subtle.decrypt({ name: "AES-GCM", iv: probeIv }, opened, probe))).toBe(WORDS_B);
    // The person has both: the legacy row and the R2 object their report was sealed under.
    expect(await personKeyCount(inst.id, "person-l")).toBe(2);
    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-l" } } });
    expect(erased.body.keysDestroyed).toBe(2);
    expect(await personKeyCount(inst.id, "person-l")).toBe(0);
    await expect(openPersonKey(env, inst.id, id, async () => wrapping.key)).rejects.toMatchObject({ code: "crypto.data_key_destroyed" });
    expect((await api(`/api/v1/reports/${r.id}`, { key: inst.apiKey })).body.description).toBeNull();
  });

  it("re-applying 1,200 people's erasures reads their tombstones from R2 listing pages without a read per person, and takes a number of D1 statements that does not grow with the people", async () => {
    const inst = await newInstallation("shredding-bulk");
    const a = await report(inst.apiKey, "bulk-0", "post-bulk", WORDS_A);
    const at = new Date().toISOString();
    const people = Array.from({ length: 1200 }, (_, i) => personKey(inst.id, `bulk-${i}`, env)!);
    // 1,001 tombstones known from R2 alone (more than one listing page), the rest from D1 alone.
    for (const person of people.slice(0, 1001)) await env.AUDIT_ANCHORS.put(tombstoneKey(inst.id, person), "{}", { customMetadata: { erasedAt: at, reporterUntil: at, keysUntil: at } });
    await tombstonesStatement(
      env.DB,
      inst.id,
      people.slice(1001).map((person) => ({ person, erasedAt: at, reporterUntil: at, ownerUntil: null, keysUntil: at })),
    ).run();
    const calls = { statements: 0, r2Reads: 0, r2Lists: 0 };
    const counting = <T extends object>(target: T, count: (name: string | symbol) => void): T =>
      new Proxy(target, {
        get(object, name) {
          const value = Reflect.get(object, name, object);
          if (typeof value !== "function") return value;
          return (...args: unknown[]) => {
            count(name);
            return value.apply(object, args);
          };
        },
      });
    const db = counting(env.DB, (name) => name === "prepare" && calls.statements++);
    const anchors = counting(env.AUDIT_ANCHORS, (name) => (name === "get" || name === "head" ? calls.r2Reads++ : name === "list" ? calls.r2Lists++ : undefined));
    const measured = new Proxy(env, { get: (object, name) => (name === "DB" ? db : name === "AUDIT_ANCHORS" ? anchors : Reflect.get(object, name, object)) });

    const summary = await reapplyErasures(measured, inst.id);
    expect(summary).toEqual({ people: 1200, keys: 1, reports: 1, appeals: 0 });
    expect(calls.r2Reads).toBe(0);
    // Listing pages (fewer than 1,000 objects each when metadata is included), not a read per tombstone.
    expect(calls.r2Lists).toBeGreaterThanOrEqual(2);
    expect(calls.r2Lists).toBeLessThan(50);
    // A few statements per chunk of 500 people and per page of erased rows, not per person.
    expect(calls.statements).toBeLessThan(60);
    expect((await api(`/api/v1/reports/${a.id}`, { key: inst.apiKey })).body.description).toBeNull();
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM erasure_tombstones WHERE installation_id = ?1").bind(inst.id).first()).toEqual({ n: 1200 });
    // 1,001 R2 puts to set up: more than the default 30 s on a loaded machine.
  }, 180_000);
});
