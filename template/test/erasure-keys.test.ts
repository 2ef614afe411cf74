// Erasure by keys: personal data is sealed under a data key of its installation and period (the
// calendar month); retention destroys a period's keys once every record of it is erased, so the
// immutable copies — archived runs in R2, audit segments, backups — hold nothing that opens. A
// named person's erasure hides their archived copies; other periods and installations keep theirs;
// values sealed under a per-installation key (as everything was before) still open.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sealAuditChain } from "../src/audit/chain";
import { sweepAuditSegments } from "../src/audit/segment-sweep";
import { deleteAuditSegments } from "../src/audit/segments";
import { dataKeyPeriod, openPersonalData, rotateDataKey, sealPersonalData } from "../src/cases/reports/report-crypto";
import { sweepRetention } from "../src/cases/retention/retention";
import { periodEnd } from "../src/cases/retention/retention-keys";
import { installationDeleteStatements } from "../src/installations/backup";
import { runArchiveKey, sweepRunArchive } from "../src/workflows/run-archive";
import { ADMIN_TOKEN, api, newInstallation, publish, until, waitForRun, STEP_OUTPUT, setSealedOutput, startEndGraph } from "./helpers";

const DAY = 86_400_000;
const SECRET_WORDS = "the words only the reporter wrote";

/** An installation (hot window 0: ended runs archive at once) whose reports start a run that ends. */
async function setup(label: string) {
  const inst = await newInstallation(`erasure-keys-${label}`);
  expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
  const version = await publish(inst.apiKey, startEndGraph);
  expect((await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
  return inst;
}

/**
 * A report whose run ended, with a sealed output on one of its steps (as a content-reading node
 * leaves it): the run's archive object will hold that ciphertext.
 */
async function reportWithRun(inst: { id: string; apiKey: string }, reporterId: string, words: string) {
  const created = await api("/api/v1/reports", {
    key: inst.apiKey,
    body: { subject: { kind: "content", id: `post-${reporterId}`, snapshot: { text: words } }, category: "scams_and_fraud", reporter: { id: reporterId }, description: words },
  });
  expect(created.status).toBe(201);
  const runId = created.body.runs[0].runId as string;
  expect((await waitForRun(inst.apiKey, runId)).state).toBe("succeeded");
  const step = await until(() => env.DB.prepare(`SELECT s.id FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.run_id = ?1 AND ${STEP_OUTPUT.json} IS NOT NULL LIMIT 1`).bind(runId).first<{ id: string }>(), "a step output");
  const { sealed } = await sealPersonalData(env, inst.id, `step_output:${step.id}`, { text: words });
  await setSealedOutput(step.id, sealed);
  return { reportId: created.body.id as string, runId, stepId: step.id };
}

const soon = () => new Date(Date.now() + 2_000);

/** Archives the installation's ended runs and its sealed audit events (hot window 0). */
async function archiveAll(id: string) {
  expect(await sweepRunArchive(env, soon(), { installationId: id })).toMatchObject({ failed: 0 });
  await sealAuditChain(env, id);
  await sweepAuditSegments(env, new Date(Date.now() + 60_000), { hotDaysFor: (installationId) => (installationId === id ? 0 : 36_500) });
}

async function archivedSealed(installationId: string, runId: string, stepId: string): Promise<string> {
  const object = await env.WORKFLOW_ARTIFACTS.get(runArchiveKey(installationId, runId));
  const body = JSON.parse(await object!.text());
  const row = body.tables.workflow_step_outputs.find((o: { step_run_id: string }) => o.step_run_id === stepId);
  expect(typeof row.sealed_json).toBe("string");
  return row.sealed_json as string;
}

const keyRows = (installationId: string) =>
  env.DB.prepare("SELECT id, period, wrapped_key AS wrappedKey, destroyed_at AS destroyedAt FROM data_keys WHERE installation_id = ?1 ORDER BY version")
    .bind(installationId)
    .all<{ id: string; period: string | null; wrappedKey: string; destroyedAt: string | null }>()
    .then((r) => r.results);

async function openCode(installationId: string, context: string, sealed: string): Promise<string> {
  try {
    await openPersonalData(env, installationId, context, sealed);
    return "opened";
  } catch (error) {
    return (error as { code?: string }).code ?? "error";
  }
}

/** The same ciphertext as if sealed under each key still in D1: none of them opens it. */
async function opensUnderAnyLiveKey(installationId: string, context: string, sealed: string): Promise<boolean> {
  const [, , iv, ciphertext] = sealed.split(".");
  const { results } = await env.DB.prepare("SELECT id, installation_id AS installationId FROM data_keys WHERE destroyed_at IS NULL AND wrapped_key <> ''").all<{ id: string; installationId: string }>();
  for (const key of results) {
    if ((await openCode(key.installationId, context, `v1.${key.id}.${iv}.${ciphertext}`)) === "opened") return true;
    if ((await openCode(installationId, context, `v1.${key.id}.${iv}.${ciphertext}`)) === "opened") return true;
  }
  return false;
}

const verifyFull = async (apiKey: string) => {
  const verify = await api("/api/v1/audit/verify?mode=full", { key: apiKey });
  expect(verify.status).toBe(200);
  return verify.body;
};

describe("erasure by keys", () => {
  it("seals new personal data under the key of its period, created once, and keeps per-installation keys for secrets", async () => {
    const inst = await newInstallation("erasure-keys-periods");
    const now = new Date();
    const first = await sealPersonalData(env, inst.id, "test:a", { n: 1 });
    const second = await sealPersonalData(env, inst.id, "test:b", { n: 2 });
    expect(second.dataKeyId).toBe(first.dataKeyId);
    const later = await sealPersonalData(env, inst.id, "test:c", { n: 3 }, { at: new Date(now.getTime() + 40 * DAY) });
    expect(later.dataKeyId).not.toBe(first.dataKeyId);
    const secret = await sealPersonalData(env, inst.id, "test:secret", { token: "t" }, { scope: "installation" });
    const rows = await keyRows(inst.id);
    expect(rows.find((r) => r.id === first.dataKeyId)!.period).toBe(dataKeyPeriod(now));
    expect(rows.find((r) => r.id === later.dataKeyId)!.period).toBe(dataKeyPeriod(new Date(now.getTime() + 40 * DAY)));
    expect(rows.find((r) => r.id === secret.dataKeyId)!.period).toBeNull();
    for (const [context, sealed, n] of [
      ["test:a", first.sealed, 1],
      ["test:b", second.sealed, 2],
      ["test:c", later.sealed, 3],
    ] as const) {
      expect(await openPersonalData(env, inst.id, context, sealed)).toEqual({ n });
    }
    // Rotation: the period's key turns decrypt-only, the next seal gets a new one, both open.
    await rotateDataKey(env, inst.id);
    const rotated = await sealPersonalData(env, inst.id, "test:d", { n: 4 });
    expect(rotated.dataKeyId).not.toBe(first.dataKeyId);
    expect(await openPersonalData(env, inst.id, "test:a", first.sealed)).toEqual({ n: 1 });
    expect(await openPersonalData(env, inst.id, "test:d", rotated.sealed)).toEqual({ n: 4 });
    const created = await env.DB.prepare("SELECT details_json AS details FROM audit_events WHERE installation_id = ?1 AND action = 'data_key.created'").bind(inst.id).all<{ details: string }>();
    expect(created.results.map((r) => JSON.parse(r.details).period ?? null).sort()).toEqual([null, null, dataKeyPeriod(now), dataKeyPeriod(now), dataKeyPeriod(new Date(now.getTime() + 40 * DAY))].sort());
  });

  it("retention destroys the period's keys: archived runs, audit segments and a backup hold nothing that opens; another installation and period are untouched", async () => {
    const a = await setup("a");
    const b = await setup("b");
    const aReport = await reportWithRun(a, "reporter-a", SECRET_WORDS);
    const bReport = await reportWithRun(b, "reporter-b", "words in another installation");
    // Sealed before period keys (a per-installation key), and in a later period of the same installation.
    const legacy = await sealPersonalData(env, a.id, "test:legacy", { kept: true }, { scope: "installation" });
    const nextPeriod = await sealPersonalData(env, a.id, "test:next-period", { kept: "later" }, { at: new Date(Date.now() + 100 * DAY) });
    await archiveAll(a.id);
    await archiveAll(b.id);
    const segments = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_segments WHERE installation_id = ?1").bind(a.id).first<{ n: number }>();
    expect(segments!.n).toBeGreaterThan(0);

    // Archived and still readable before erasure.
    const sealed = await archivedSealed(a.id, aReport.runId, aReport.stepId);
    expect((await api(`/api/v1/runs/${aReport.runId}/content`, { key: a.apiKey })).body.items).toEqual([expect.objectContaining({ stepId: aReport.stepId, output: { text: SECRET_WORDS } })]);

    // A year and more later: the case is past retention, the report erased, then the period's keys destroyed.
    const later = new Date(Date.now() + 400 * DAY);
    const swept = await sweepRetention(env, later, { installationId: a.id });
    expect(swept).toMatchObject({ reports: 1, keyPeriods: 1, failed: 0, keysFailed: 0 });
    expect(swept.keysDestroyed).toBeGreaterThanOrEqual(1);
    const period = dataKeyPeriod(new Date());
    expect(Date.parse(periodEnd(period))).toBeLessThanOrEqual(later.getTime() - 365 * DAY);
    const keys = await keyRows(a.id);
    const destroyed = keys.filter((k) => k.period === period);
    expect(destroyed.length).toBeGreaterThan(0);
    for (const k of destroyed) expect(k).toMatchObject({ wrappedKey: "", destroyedAt: later.toISOString() });
    const events = await env.DB.prepare("SELECT target_id AS target, details_json AS details FROM audit_events WHERE installation_id = ?1 AND action = 'data_key.destroyed'").bind(a.id).all<{ target: string; details: string }>();
    expect(events.results.map((e) => e.target).sort()).toEqual(destroyed.map((k) => k.id).sort());
    expect(JSON.parse(events.results[0]!.details)).toMatchObject({ period });
    // A second pass has nothing more to destroy.
    expect(await sweepRetention(env, later, { installationId: a.id })).toMatchObject({ keysDestroyed: 0 });

    // Read paths answer the erased shape, never a 5xx.
    const content = await api(`/api/v1/runs/${aReport.runId}/content`, { key: a.apiKey });
    expect(content.status).toBe(200);
    expect(content.body.items).toEqual([]);
    const detail = await api(`/api/v1/runs/${aReport.runId}`, { key: a.apiKey });
    expect(detail.status).toBe(200);
    expect(detail.body.steps.every((s: { sealed: boolean }) => s.sealed === false)).toBe(true);
    const report = await api(`/api/v1/reports/${aReport.reportId}`, { key: a.apiKey });
    expect(report.status).toBe(200);
    expect(report.body).toMatchObject({ description: null, evidence: [], subject: { snapshot: null } });

    // The archived object's ciphertext: its key is gone (410), and no key still in D1 opens it.
    expect(await openCode(a.id, `step_output:${aReport.stepId}`, sealed)).toBe("crypto.data_key_destroyed");
    expect(await opensUnderAnyLiveKey(a.id, `step_output:${aReport.stepId}`, sealed)).toBe(false);
    // Audit segments never held it.
    const listed = await env.AUDIT_ANCHORS.list({ prefix: `audit/${a.id}/` });
    for (const object of listed.objects) expect(await (await env.AUDIT_ANCHORS.get(object.key))!.text()).not.toContain(SECRET_WORDS);
    expect(await verifyFull(a.apiKey)).toMatchObject({ ok: true });

    // A backup exported now: the period's keys travel as tombstones; nothing sealed under them opens.
    const exported = await api("/api/v1/installation/export", { key: a.apiKey, method: "POST" });
    expect(exported.status).toBe(200);
    const backup = exported.body;
    for (const row of backup.tables.data_keys.filter((k: { period: string | null }) => k.period === period)) expect(row).toMatchObject({ wrapped_key: "", destroyed_at: later.toISOString() });
    const archive = backup.objects.find((o: { key: string }) => o.key === runArchiveKey(a.id, aReport.runId));
    const archived = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(archive.base64), (c) => c.charCodeAt(0))));
    const inBackup = archived.tables.workflow_step_outputs.find((o: { step_run_id: string }) => o.step_run_id === aReport.stepId).sealed_json as string;
    expect(inBackup).toBe(sealed);
    expect(await openCode(a.id, `step_output:${aReport.stepId}`, inBackup)).toBe("crypto.data_key_destroyed");
    // Every sealed value in the backup's rows under a destroyed key stays shut; the plaintext is nowhere.
    const destroyedIds = new Set(destroyed.map((k) => k.id));
    const text = JSON.stringify(backup);
    expect(text).not.toContain(SECRET_WORDS);
    const underDestroyed = [...text.matchAll(/v1\.(dk_[A-Za-z0-9_-]+)\.[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]+/gu)].filter((m) => destroyedIds.has(m[1]!));
    expect(underDestroyed.length).toBeGreaterThan(0);
    expect(backup.tables.data_keys.filter((k: { id: string; wrapped_key: string }) => destroyedIds.has(k.id) && k.wrapped_key !== "")).toEqual([]);

    // Untouched: what A sealed under its installation key or in a later period, and all of B.
    expect(await openPersonalData(env, a.id, "test:legacy", legacy.sealed)).toEqual({ kept: true });
    expect(await openPersonalData(env, a.id, "test:next-period", nextPeriod.sealed)).toEqual({ kept: "later" });
    expect((await keyRows(b.id)).every((k) => k.destroyedAt === null && k.wrappedKey !== "")).toBe(true);
    expect((await api(`/api/v1/runs/${bReport.runId}/content`, { key: b.apiKey })).body.items).toEqual([expect.objectContaining({ output: { text: "words in another installation" } })]);
    expect((await api(`/api/v1/reports/${bReport.reportId}`, { key: b.apiKey })).body.description).toBe("words in another installation");
    expect(await verifyFull(b.apiKey)).toMatchObject({ ok: true });

    // Restored from that backup (into a fresh state): the chain verifies, and the erased stays erased.
    await env.DB.batch(installationDeleteStatements(env.DB, a.id));
    await env.AUDIT_ANCHORS.delete(`audit/${a.id}/head.json`);
    await deleteAuditSegments(env, a.id);
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    expect(restored.body).toMatchObject({ auditChain: { ok: true } });
    expect((await api(`/api/v1/runs/${aReport.runId}/content`, { key: a.apiKey })).body.items).toEqual([]);
    expect((await api(`/api/v1/reports/${aReport.reportId}`, { key: a.apiKey })).body).toMatchObject({ description: null, evidence: [] });
    expect(await openCode(a.id, `step_output:${aReport.stepId}`, sealed)).toBe("crypto.data_key_destroyed");
    expect(await openPersonalData(env, a.id, "test:legacy", legacy.sealed)).toEqual({ kept: true });
  });

  it("a period still needed keeps its keys: an unerased report of it, or a period not yet past retention", async () => {
    const inst = await setup("needed");
    await reportWithRun(inst, "reporter-kept", "still within retention");
    // Past retention, but the case's report is not erased (not swept): the key stays.
    const { sweepPeriodKeys } = await import("../src/cases/retention/retention-keys");
    expect(await sweepPeriodKeys(env, new Date(Date.now() + 400 * DAY), { installationId: inst.id, defaultDays: 365 })).toMatchObject({ periods: 0, keys: 0 });
    // Erased, but the period is not yet past retention: the key stays.
    expect(await sweepRetention(env, new Date(Date.now() + 200 * DAY), { installationId: inst.id })).toMatchObject({ keysDestroyed: 0 });
    expect((await keyRows(inst.id)).every((k) => k.destroyedAt === null)).toBe(true);
  });

  it("a named person's erasure hides their archived copies while others' data of the same period stays readable", async () => {
    const inst = await setup("person");
    const theirs = await reportWithRun(inst, "person-1", "the person's own words");
    const others = await reportWithRun(inst, "person-2", "someone else's words");
    await archiveAll(inst.id);
    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-1" } } });
    expect(erased.status).toBe(200);
    expect(erased.body.erased).toMatchObject({ reports: 1 });
    const content = await api(`/api/v1/runs/${theirs.runId}/content`, { key: inst.apiKey });
    expect(content.status).toBe(200);
    expect(content.body.items).toEqual([]);
    expect((await api(`/api/v1/runs/${theirs.runId}`, { key: inst.apiKey })).body.steps.every((s: { sealed: boolean }) => !s.sealed)).toBe(true);
    expect((await api(`/api/v1/reports/${theirs.reportId}`, { key: inst.apiKey })).body.description).toBeNull();
    expect((await api(`/api/v1/runs/${others.runId}/content`, { key: inst.apiKey })).body.items).toEqual([expect.objectContaining({ output: { text: "someone else's words" } })]);
    expect((await api(`/api/v1/reports/${others.reportId}`, { key: inst.apiKey })).body.description).toBe("someone else's words");
    expect(await verifyFull(inst.apiKey)).toMatchObject({ ok: true });
    // A backup carries the erasure mark with the run row, so a restored copy does not serve the archived outputs either.
    const backup = (await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" })).body;
    const runs = backup.tables.workflow_runs as { id: string; archive_sealed_erased_at: string | null }[];
    expect(runs.find((r) => r.id === theirs.runId)!.archive_sealed_erased_at).not.toBeNull();
    expect(runs.find((r) => r.id === others.runId)!.archive_sealed_erased_at).toBeNull();
  });
});
