// A settled webhook delivery in two tiers (src/enforcement/delivery-archive.ts): an hour after it
// settled, its sealed payload and its attempts move to one R2 object and leave D1; the row keeps
// what lists and metrics read. Every read serves a moved delivery as it served it hot: detail and
// attempts, the list, a resend (the same signed body to the receiver), a backup, and erasure,
// which leaves nothing in R2 that opens to the erased data.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../src/audit";
import { openPersonalData } from "../src/cases/reports/report-crypto";
import { commitDeliveryArchives, deliveryArchiveKey, sweepDeliveryArchive, writeDeliveryArchives } from "../src/enforcement/delivery-archive";
import { eraseDeliveriesMovedMeanwhile, eraseDeliveriesStatements } from "../src/enforcement/erasure";
import { deliveryStatement, enqueueDeliveries } from "../src/enforcement/webhooks";
import { installationDeleteStatements } from "../src/installations/backup";
import { sha256Hex } from "../src/lib/crypto";
import { attemptRowsSql } from "../src/lib/delivery-attempts";
import { runSchedule, SWEEPS } from "../src/schedule";
import { ADMIN_TOKEN, api, edge, newInstallation, publish, receiverLog, until, waitForRun, deliverMessage } from "./helpers";

const MINUTE = 60_000;
const SECRET_WORDS = "only the receiver may read this";

/** An installation with one endpoint (on `path` of the receiver peer, which knows its secret). */
async function setup(path: string, hotDays?: number) {
  const { id: installationId, apiKey } = await newInstallation("deliveries-archive");
  if (hotDays !== undefined) expect((await api("/api/v1/storage/settings", { method: "PUT", key: apiKey, body: { hotDays } })).status).toBe(200);
  const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
  expect(created.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: new URL(`https://x${path}`).pathname, secret: created.body.secret }) });
  return { installationId, apiKey, endpointId: created.body.id as string };
}

const deliver = (installationId: string, endpointId: string) => deliverMessage(installationId, endpointId, { text: SECRET_WORDS, recipient: { contact: "person@example.org" } });

const d1Row = (id: string) =>
  env.DB.prepare("SELECT payload_sealed AS payloadSealed, payload_digest AS payloadDigest, state, attempts FROM webhook_deliveries WHERE id = ?1")
    .bind(id)
    .first<{ payloadSealed: string; payloadDigest: string; state: string; attempts: number }>();
/** The delivery's attempts in D1, in either form (lib/delivery-attempts.ts). */
const attemptRows = async (id: string) =>
  (await env.DB.prepare(`SELECT COUNT(*) AS n FROM (${attemptRowsSql("d.id = ?1")})`)
    .bind(id)
    .first<{ n: number }>())!.n;
const objectText = async (installationId: string, id: string) => (await env.WORKFLOW_ARTIFACTS.get(deliveryArchiveKey(installationId, id)))?.text() ?? null;

describe("a settled delivery's payload and attempts leave D1", () => {
  it("the schedule an hour on moves them to R2; detail, attempts and the list read back as they did hot", async () => {
    const inst = await setup("/flaky/archive-moved?failures=1");
    const id = await deliver(inst.installationId, inst.endpointId);
    const hot = await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey });
    expect(hot.status).toBe(200);
    // Two attempts: the receiver's 500, then its 200.
    expect(hot.body.history.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 200]);
    const hotList = await api(`/api/v1/webhook-deliveries?limit=10`, { key: inst.apiKey });
    const hotRow = (await d1Row(id))!;
    expect(hotRow.payloadSealed).not.toBe("");
    expect(await attemptRows(id)).toBe(2);

    // Half an hour on, inside the hour, nothing moves.
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 30 * MINUTE), { installationId: inst.installationId })).toMatchObject({ moved: 0 });
    expect(await objectText(inst.installationId, id)).toBeNull();

    // The schedule an hour on: its delivery archive takes the backlog oldest first, a bounded
    // number a run (other tests' deliveries share this database), until this one has moved. Only
    // that sweep: the others, an hour ahead, would take over other tests' leases in this database.
    const archiveSweep = SWEEPS.filter((s) => s.name === "enforcement.delivery_archive");
    for (let runs = 1; ; runs++) {
      const run = await runSchedule(env, { cron: "* * * * *", scheduledTime: Date.now() + 61 * MINUTE }, archiveSweep);
      const sweep = run.sweeps.find((s) => s.name === "enforcement.delivery_archive");
      expect(sweep).toMatchObject({ ok: true });
      expect(sweep!.summary!.moved).toBeGreaterThanOrEqual(1);
      if ((await d1Row(id))!.payloadSealed === "") break;
      expect(runs, "the schedule kept moving other deliveries and never reached this one").toBeLessThan(40);
    }

    // D1 keeps what lists, filters and metrics read; no payload, no attempt rows.
    expect(await d1Row(id)).toEqual({ ...hotRow, payloadSealed: "" });
    expect(await attemptRows(id)).toBe(0);
    // The object holds the payload as it was sealed and the attempts verbatim; nothing in plaintext.
    const text = (await objectText(inst.installationId, id))!;
    const stored = JSON.parse(text);
    expect(stored).toMatchObject({ format: "safest-tools.delivery-archive", schemaVersion: 1, installationId: inst.installationId, deliveryId: id, payloadSealed: hotRow.payloadSealed });
    expect(stored.attempts.map((a: { attempt: number; status_code: number }) => [a.attempt, a.status_code])).toEqual([
      [1, 500],
      [2, 200],
    ]);
    expect(text).not.toContain(SECRET_WORDS);
    expect(text).not.toContain("person@example.org");

    const moved = await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey });
    expect(moved.status).toBe(200);
    expect(moved.body).toEqual(hot.body);
    for (const [index, attempt] of hot.body.history.entries()) expect(moved.body.history[index]).toEqual(attempt);
    expect((await api(`/api/v1/webhook-deliveries?limit=10`, { key: inst.apiKey })).body).toEqual(hotList.body);
    // Another installation still gets a 404 for it.
    const other = await newInstallation("deliveries-archive-other");
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: other.apiKey })).status).toBe(404);
    // A second pass finds nothing left.
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 61 * MINUTE), { installationId: inst.installationId })).toMatchObject({ moved: 0, failed: 0 });
  });

  it("the sweep is bounded: a full slice says more, the next slice takes the rest, oldest first", async () => {
    const inst = await setup("/ok/archive-bounded", 0);
    const first = await deliver(inst.installationId, inst.endpointId);
    const second = await deliver(inst.installationId, inst.endpointId);
    const third = await deliver(inst.installationId, inst.endpointId);
    const at = new Date(Date.now() + 2_000);
    const moved = async () => (await Promise.all([first, second, third].map(async (id) => (await d1Row(id))!.payloadSealed === ""))).map(Boolean);
    expect(await sweepDeliveryArchive(env, at, { installationId: inst.installationId, limit: 2 })).toMatchObject({ moved: 2, more: 1 });
    expect(await moved()).toEqual([true, true, false]);
    expect(await sweepDeliveryArchive(env, at, { installationId: inst.installationId, limit: 2 })).toMatchObject({ moved: 1, more: 0 });
    expect(await moved()).toEqual([true, true, true]);
    expect(await sweepDeliveryArchive(env, at, { installationId: inst.installationId, limit: 2 })).toMatchObject({ moved: 0, more: 0 });
  });

  it("a dead delivery moves too, and reads back as it did hot", async () => {
    const inst = await setup("/gone/archive-dead", 0);
    const delivery = await deliveryStatement(env, {
      installationId: inst.installationId,
      endpointId: inst.endpointId,
      eventType: "message.send",
      sourceType: "message",
      sourceId: `msg-${crypto.randomUUID()}`,
      data: { text: SECRET_WORDS },
      at: new Date().toISOString(),
    });
    await env.DB.batch([delivery.statement]);
    await enqueueDeliveries(env, [delivery.id]);
    await until(async () => (await d1Row(delivery.id))?.state === "dead", "the delivery dead (410)");
    const hot = await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: inst.apiKey });
    expect(hot.body).toMatchObject({ state: "dead", lastStatus: 410, history: [expect.objectContaining({ statusCode: 410 })] });
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1 });
    expect(await attemptRows(delivery.id)).toBe(0);
    expect((await d1Row(delivery.id))!.payloadSealed).toBe("");
    expect((await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: inst.apiKey })).body).toEqual(hot.body);
  });

  it("a resend of a moved delivery sends the same signed body as a resend of it hot", async () => {
    const inst = await setup("/ok/archive-resend", 0);
    const id = await deliver(inst.installationId, inst.endpointId);
    const hotResend = await api(`/api/v1/webhook-deliveries/${id}/resend`, { key: inst.apiKey, method: "POST" });
    expect(hotResend.status).toBeLessThan(300);
    await until(async () => (await receiverLog("/ok/archive-resend")).find((e) => e.webhookId === hotResend.body.id), "the hot resend received");

    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 2 });
    expect((await d1Row(id))!.payloadSealed).toBe("");
    const movedResend = await api(`/api/v1/webhook-deliveries/${id}/resend`, { key: inst.apiKey, method: "POST" });
    expect(movedResend.status).toBe(hotResend.status);
    expect(movedResend.body.id).not.toBe(hotResend.body.id);
    const log = await receiverLog("/ok/archive-resend");
    const received = await until(async () => log.concat(await receiverLog("/ok/archive-resend")).find((e) => e.webhookId === movedResend.body.id), "the moved resend received");
    const original = log.find((e) => e.webhookId === id)!;
    const fromHot = log.find((e) => e.webhookId === hotResend.body.id)!;
    for (const entry of [original, fromHot, received]) expect(entry).toMatchObject({ verified: true, status: 200, type: "message.send" });
    expect(received.data).toEqual(original.data);
    expect(received.data).toEqual(fromHot.data);
    expect(received.data).toEqual({ text: SECRET_WORDS, recipient: { contact: "person@example.org" } });
  });

  it("a move killed after its object was written loses nothing: the next pass writes the same bytes and commits once", async () => {
    const inst = await setup("/flaky/archive-killed?failures=1", 0);
    const id = await deliver(inst.installationId, inst.endpointId);
    const hot = await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey });

    // Step 1 only: the object is in R2, D1 is as it was, and every read still serves D1.
    const first = await writeDeliveryArchives(env, [id]);
    expect(first).toMatchObject({ failed: 0 });
    expect(first.written.map((w) => w.id)).toEqual([id]);
    const written = await objectText(inst.installationId, id);
    expect(written).not.toBeNull();
    expect((await d1Row(id))!.payloadSealed).not.toBe("");
    expect(await attemptRows(id)).toBe(2);
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey })).body).toEqual(hot.body);

    // A commit whose rows changed since the object was written (here: the payload erased) does not hold.
    const stale = [{ ...first.written[0]!, payloadSealed: `${first.written[0]!.payloadSealed}x` }];
    expect(await commitDeliveryArchives(env, stale)).toBe(0);
    expect(await attemptRows(id)).toBe(2);

    // The next pass: the same bytes, committed once.
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1, failed: 0 });
    expect(await objectText(inst.installationId, id)).toBe(written);
    expect(await attemptRows(id)).toBe(0);
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey })).body).toEqual(hot.body);
    // Committing the first pass's write again changes nothing.
    expect(await commitDeliveryArchives(env, first.written)).toBe(0);
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 0 });
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey })).body).toEqual(hot.body);
  });

  it("a backup carries a moved delivery hot (its payload and attempts from the object); restored, it reads as before and moves again", async () => {
    const inst = await setup("/flaky/archive-backup?failures=1", 0);
    const id = await deliver(inst.installationId, inst.endpointId);
    const hotRow = (await d1Row(id))!;
    const hotAttempts = (await env.DB.prepare(attemptRowsSql("d.id = ?1", "attempt")).bind(id).all()).results;
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1 });
    const exported = await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" });
    expect(exported.status).toBe(200);
    const row = exported.body.tables.webhook_deliveries.find((r: { id: string }) => r.id === id);
    expect(row).toMatchObject({ payload_sealed: hotRow.payloadSealed, payload_digest: hotRow.payloadDigest, state: "delivered", attempts: 2 });
    expect(exported.body.tables.webhook_attempts.filter((a: { delivery_id: string }) => a.delivery_id === id)).toEqual(hotAttempts);
    expect(exported.body.manifest.counts.webhook_attempts).toBe(exported.body.tables.webhook_attempts.length);
    const hot = await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey });

    await env.DB.batch(installationDeleteStatements(env.DB, inst.installationId));
    await env.AUDIT_ANCHORS.delete(`audit/${inst.installationId}/head.json`);
    // A backup whose delivery row claims its payload is elsewhere is refused, and nothing is written.
    const crafted = structuredClone(exported.body);
    crafted.tables.webhook_deliveries.find((r: { id: string }) => r.id === id).payload_sealed = "";
    crafted.manifest.digest = `sha256:${await sha256Hex(canonicalJson({ tables: crafted.tables, objects: crafted.objects }))}`;
    const refused = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: crafted });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("installation_import.invalid");
    expect(await d1Row(id)).toBeNull();

    // Restored, the delivery is hot again and reads as it did; the schedule moves it again.
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: exported.body });
    expect(restored.status).toBe(201);
    expect(await d1Row(id)).toEqual(hotRow);
    expect(await attemptRows(id)).toBe(2);
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey })).body).toEqual(hot.body);
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1 });
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey })).body).toEqual(hot.body);
  });
});

describe("erasure of a moved delivery", () => {
  it("the person's erasure replaces the payload in R2: nothing left opens to their data, the detail still reads", async () => {
    const { id: installationId, apiKey } = await newInstallation("deliveries-archive-erasure");
    const path = "/ok/archive-erasure";
    const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
    expect((await api("/api/v1/storage/settings", { method: "PUT", key: apiKey, body: { hotDays: 0 } })).status).toBe(200);
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "thank", kind: "send_message", config: { template: "Thanks for your report about {{subject}}.", recipient: "reporter" }, inputMapping: { subject: "report.subject.id" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "thank"), edge("thank", "sent", "done")],
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const contact = "erin.erasable@example.org";
    const created = await api("/api/v1/reports", {
      key: apiKey,
      body: { subject: { kind: "content", id: "post-erase", snapshot: { text: "a post" } }, category: "scams_and_fraud", reporter: { id: "user-erase", contact }, description: "described by erin" },
    });
    expect(created.status).toBe(201);
    const runId = created.body.runs[0].runId as string;
    expect((await waitForRun(apiKey, runId)).state).toBe("succeeded");
    await until(async () => (await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND state = 'pending'").bind(installationId).first<{ n: number }>())!.n === 0, "every delivery finished");
    const message = (await env.DB.prepare("SELECT id FROM webhook_deliveries WHERE installation_id = ?1 AND source_id LIKE ?2").bind(installationId, `${runId}:%`).first<{ id: string }>())!;
    const hotRow = (await d1Row(message.id))!;
    const opened = await openPersonalData<{ data: unknown }>(env, installationId, `webhook_delivery:${message.id}`, hotRow.payloadSealed);
    expect(JSON.stringify(opened)).toContain(contact);

    expect((await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId })).moved).toBeGreaterThanOrEqual(1);
    expect((await d1Row(message.id))!.payloadSealed).toBe("");
    const before = await api(`/api/v1/webhook-deliveries/${message.id}`, { key: apiKey });

    const erased = await api("/api/v1/personal-data/erase", { key: apiKey, body: { reporter: { id: "user-erase" } } });
    expect(erased.status).toBe(200);
    expect(erased.body.erased.deliveries).toBeGreaterThanOrEqual(1);
    const row = (await d1Row(message.id))!;
    expect(row).toMatchObject({ payloadSealed: "", payloadDigest: "erased", state: "delivered" });
    // The object now holds the tombstone, sealed; the erased ciphertext is nowhere in the installation's archive.
    const stored = JSON.parse((await objectText(installationId, message.id))!);
    expect(stored.payloadSealed).not.toBe(hotRow.payloadSealed);
    expect(await openPersonalData(env, installationId, `webhook_delivery:${message.id}`, stored.payloadSealed)).toEqual({ type: "erased", data: { erased: true } });
    const listed = await env.WORKFLOW_ARTIFACTS.list({ prefix: `archive/v1/${installationId}/` });
    for (const object of listed.objects) {
      const text = await (await env.WORKFLOW_ARTIFACTS.get(object.key))!.text();
      expect(text).not.toContain(hotRow.payloadSealed);
      expect(text).not.toContain(contact);
    }
    // The detail reads as before, with the digest erased; the attempts are still there.
    const after = await api(`/api/v1/webhook-deliveries/${message.id}`, { key: apiKey });
    expect(after.body).toEqual({ ...before.body, payloadDigest: "erased" });
    // A second erasure finds nothing more to erase.
    expect((await api("/api/v1/personal-data/erase", { key: apiKey, body: { reporter: { id: "user-erase" } } })).body.erased.deliveries).toBe(0);
  });

  it("a delivery that moved while its erasure was being prepared is erased in its object right after the erasure's batch", async () => {
    const inst = await setup("/ok/archive-erase-race", 0);
    const id = await deliver(inst.installationId, inst.endpointId);
    const hotRow = (await d1Row(id))!;
    // The erasure reads the row hot and prepares its statements; the move commits before the erasure's batch.
    const statements = await eraseDeliveriesStatements(env, inst.installationId, [id]);
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1 });
    await env.DB.batch(statements);
    // The batch itself marks what it could not reach: the object still holds the payload.
    expect(await d1Row(id)).toMatchObject({ payloadSealed: "", payloadDigest: "erasing" });
    expect(JSON.parse((await objectText(inst.installationId, id))!).payloadSealed).toBe(hotRow.payloadSealed);

    expect(await eraseDeliveriesMovedMeanwhile(env, inst.installationId, [id])).toBe(1);
    expect(await d1Row(id)).toMatchObject({ payloadSealed: "", payloadDigest: "erased" });
    const stored = JSON.parse((await objectText(inst.installationId, id))!);
    expect(stored.payloadSealed).not.toBe(hotRow.payloadSealed);
    expect(await openPersonalData(env, inst.installationId, `webhook_delivery:${id}`, stored.payloadSealed)).toEqual({ type: "erased", data: { erased: true } });
    expect(stored.attempts).toHaveLength(1);
    expect(await eraseDeliveriesMovedMeanwhile(env, inst.installationId, [id])).toBe(0);
  });

  it("an erasure whose step after the batch never ran is finished by the schedule, and a resend in between sends only the tombstone", async () => {
    const inst = await setup("/ok/archive-erase-lost", 0);
    const [first, second] = [await deliver(inst.installationId, inst.endpointId), await deliver(inst.installationId, inst.endpointId)];
    const hot = { first: (await d1Row(first))!, second: (await d1Row(second))! };
    const statements = await eraseDeliveriesStatements(env, inst.installationId, [first, second]);
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 2 });
    await env.DB.batch(statements);
    // The isolate is gone before eraseDeliveriesMovedMeanwhile: both rows say `erasing`, both objects still hold the payload.
    for (const id of [first, second]) expect(await d1Row(id)).toMatchObject({ payloadSealed: "", payloadDigest: "erasing" });
    expect(JSON.parse((await objectText(inst.installationId, first))!).payloadSealed).toBe(hot.first.payloadSealed);

    // A resend meanwhile erases the object first: the receiver gets the tombstone, never the payload.
    const resend = await api(`/api/v1/webhook-deliveries/${first}/resend`, { key: inst.apiKey, method: "POST" });
    expect(resend.status).toBeLessThan(300);
    const received = await until(async () => (await receiverLog("/ok/archive-erase-lost")).find((e) => e.webhookId === resend.body.id), "the resend received");
    expect(received.data).toEqual({ erased: true });
    expect(await d1Row(first)).toMatchObject({ payloadDigest: "erased" });

    // The schedule finishes the other.
    const run = await runSchedule(env, { cron: "* * * * *", scheduledTime: Date.now() });
    expect(run.sweeps.find((sweep) => sweep.name === "enforcement.delivery_erasures")).toMatchObject({ ok: true });
    expect(await d1Row(second)).toMatchObject({ payloadSealed: "", payloadDigest: "erased" });
    for (const id of [first, second]) {
      const stored = JSON.parse((await objectText(inst.installationId, id))!);
      expect(await openPersonalData(env, inst.installationId, `webhook_delivery:${id}`, stored.payloadSealed)).toEqual({ type: "erased", data: { erased: true } });
      expect(JSON.stringify(stored)).not.toContain(SECRET_WORDS);
    }
  });

  it("a damaged object does not stop an erasure: it is replaced by the tombstone", async () => {
    const inst = await setup("/ok/archive-erase-damaged", 0);
    const id = await deliver(inst.installationId, inst.endpointId);
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1 });
    const text = (await objectText(inst.installationId, id))!;
    await env.WORKFLOW_ARTIFACTS.put(deliveryArchiveKey(inst.installationId, id), text.slice(0, Math.floor(text.length / 2)));
    await env.DB.batch(await eraseDeliveriesStatements(env, inst.installationId, [id]));
    expect(await d1Row(id)).toMatchObject({ payloadSealed: "", payloadDigest: "erased" });
    const stored = JSON.parse((await objectText(inst.installationId, id))!);
    expect(stored).toMatchObject({ deliveryId: id, installationId: inst.installationId, attempts: [] });
    expect(await openPersonalData(env, inst.installationId, `webhook_delivery:${id}`, stored.payloadSealed)).toEqual({ type: "erased", data: { erased: true } });
    expect((await api(`/api/v1/webhook-deliveries/${id}`, { key: inst.apiKey })).status).toBe(200);
  });

  it("an object a killed move left beside a hot row gets the tombstone too", async () => {
    const inst = await setup("/ok/archive-orphan", 0);
    const id = await deliver(inst.installationId, inst.endpointId);
    const hotRow = (await d1Row(id))!;
    await writeDeliveryArchives(env, [id]);
    await env.DB.batch(await eraseDeliveriesStatements(env, inst.installationId, [id]));
    const row = (await d1Row(id))!;
    expect(row.payloadDigest).toBe("erased");
    expect(row.payloadSealed).not.toBe("");
    expect(await openPersonalData(env, inst.installationId, `webhook_delivery:${id}`, row.payloadSealed)).toEqual({ type: "erased", data: { erased: true } });
    const text = (await objectText(inst.installationId, id))!;
    expect(text).not.toContain(hotRow.payloadSealed);
    // The next move takes the tombstone (the row's payload now), not what the killed move wrote.
    expect(await sweepDeliveryArchive(env, new Date(Date.now() + 2_000), { installationId: inst.installationId })).toMatchObject({ moved: 1 });
    expect(JSON.parse((await objectText(inst.installationId, id))!).payloadSealed).toBe(row.payloadSealed);
  });
});
