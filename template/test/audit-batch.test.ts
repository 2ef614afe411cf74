// Several audit events in one statement (src/audit/events.ts auditEventsStatement,
// auditEachTargetStatement and combineAuditStatements): the rows are the ones the events' own statements would write (id, seq
// order, MAC, details, time), a repeat writes nothing, an event already written leaves no gap in
// seq, and the chain seals and verifies over them. Every test uses installations of its own.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { auditStatement, canonicalJson, type AuditEventInput } from "../src/audit";
import { sealAuditChain } from "../src/audit/chain";
import { auditEachTargetStatement, auditEventsSql, auditEventsStatement, combineAuditStatements, entryMacText } from "../src/audit/events";
import { auditKeys, signText } from "../src/audit/keys";
import { api, newInstallation } from "./helpers";

const verify = async (apiKey: string) => {
  const response = await api("/api/v1/audit/verify?mode=full", { key: apiKey });
  expect(response.status).toBe(200);
  return response.body;
};

const input = (installationId: string, key: string, n: number, at = new Date(Date.UTC(2026, 11, 3, 1, 0, n)).toISOString()): AuditEventInput => ({
  installationId,
  idempotencyKey: key,
  action: `test.batch_${n % 3}`,
  actor: { type: n % 2 === 0 ? "system" : "user", id: `actor-${n}` },
  target: { type: "test", id: `t${n}` },
  details: { n, nested: { list: [n, "x"], text: 'é\u2028"' } },
  at,
});

type Row = {
  id: string;
  seq: number;
  action: string;
  actorType: string;
  actorId: string;
  targetType: string;
  targetId: string;
  detailsJson: string;
  createdAt: unknown;
  createdAtType: string;
  entryMac: string | null;
  idempotencyKey: string | null;
  hash: string | null;
};
const rows = async (installationId: string, fromSeq = 0) =>
  (
    await env.DB.prepare(
      `SELECT id, seq, action, actor_type AS actorType, actor_id AS actorId, target_type AS targetType, target_id AS targetId, details_json AS detailsJson,
        created_at AS createdAt, typeof(created_at) AS createdAtType, entry_mac AS entryMac, idempotency_key AS idempotencyKey, hash
      FROM audit_events WHERE installation_id = ?1 AND seq > ?2 ORDER BY seq`,
    )
      .bind(installationId, fromSeq)
      .all<Row>()
  ).results;
const lastSeq = async (installationId: string) => (await env.DB.prepare("SELECT COALESCE(MAX(seq), 0) AS seq FROM audit_events WHERE installation_id = ?").bind(installationId).first<{ seq: number }>())!.seq;

/** A v1 event (as stored before migration 0036: its idempotency key, a UUID id) under `key`. */
async function legacyEvent(installationId: string, key: string) {
  const row = {
    id: crypto.randomUUID(),
    installationId,
    idempotencyKey: key,
    action: "test.legacy",
    actorType: "system",
    actorId: "test",
    targetType: "test",
    targetId: "t1",
    detailsJson: canonicalJson({}),
    createdAt: new Date().toISOString(),
  };
  const signed = signText(auditKeys(env), entryMacText(row))!;
  await env.DB.prepare(`INSERT INTO audit_events (id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at, entry_mac, seq)
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE installation_id = ?2)`)
    .bind(row.id, installationId, key, row.action, row.actorType, row.actorId, row.targetType, row.targetId, row.detailsJson, row.createdAt, `${signed.keyId}:${signed.mac}`)
    .run();
}

describe("several audit events in one statement", () => {
  it("writes the rows N single inserts write (id, seq order, MAC, details, time); a repeat writes nothing; the chain verifies", async () => {
    const { id, apiKey } = await newInstallation();
    const events = [0, 1, 2, 3, 4, 5].map((n) => input(id, `batch:${n}`, n));
    events.push(input(id, "batch:odd-time", 6, "2026-12-03T01:00:06Z")); // a time kept as text
    const start = await lastSeq(id);
    await env.DB.batch(events.map((event) => auditStatement(env.DB, event)));
    const single = await rows(id, start);
    expect(single.map((row) => row.seq)).toEqual(events.map((_, index) => start + index + 1));
    expect(single.at(-1)!.createdAtType).toBe("text");
    expect(single[0]!.createdAtType).toBe("integer");
    // The same events again, into the same installation at the same place, as one statement.
    await env.DB.prepare("DELETE FROM audit_events WHERE installation_id = ?1 AND seq > ?2").bind(id, start).run();
    const combined = auditEventsStatement(env.DB, events);
    const result = await combined.run();
    expect(result.meta.changes).toBe(events.length);
    expect(await rows(id, start)).toEqual(single);
    // Again (a retried batch): nothing.
    expect((await auditEventsStatement(env.DB, events).run()).meta.changes).toBe(0);
    expect((await auditStatement(env.DB, events[3]!).run()).meta.changes).toBe(0);
    expect(await rows(id, start)).toEqual(single);
    await sealAuditChain(env, id);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });

  it("leaves out events already written, repeats in the list and v1 keys, numbering the rest with no gap", async () => {
    const { id, apiKey } = await newInstallation();
    const events = [0, 1, 2, 3, 4].map((n) => input(id, `dup:${n}`, n));
    await auditStatement(env.DB, events[1]!).run();
    await legacyEvent(id, "dup:3");
    const start = await lastSeq(id);
    const list = [events[0]!, events[1]!, events[2]!, events[3]!, events[0]!, events[4]!];
    expect((await auditEventsStatement(env.DB, list).run()).meta.changes).toBe(3);
    const written = await rows(id, start);
    expect(written.map((row) => row.seq)).toEqual([start + 1, start + 2, start + 3]);
    expect(written.map((row) => row.targetId)).toEqual(["t0", "t2", "t4"]);
    expect(written.every((row) => row.idempotencyKey === null)).toBe(true);
    // The whole trail has no gap and seals and verifies in full.
    const all = await rows(id);
    expect(all.map((row) => row.seq)).toEqual(all.map((_, index) => index + 1));
    await sealAuditChain(env, id);
    expect((await rows(id)).every((row) => row.hash !== null)).toBe(true);
    expect(await verify(apiKey)).toMatchObject({ ok: true, events: all.length });
  });

  it("combines each run of unguarded events of a batch, ended by at most one guarded event, where its last stood", async () => {
    const { id, apiKey } = await newInstallation();
    const other = await newInstallation();
    const report = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "batch-post" }, category: "violence" }, key: apiKey });
    expect(report.status).toBe(201);
    const statement = (n: number, installationId = id) => auditStatement(env.DB, input(installationId, `combine:${n}`, n));
    const guarded = (n: number, reportId: string) => auditStatement(env.DB, input(id, `combine:${n}`, n), { table: "reports", id: reportId });
    const plain = (n: number) => env.DB.prepare("SELECT ?1 AS n").bind(n);
    const batch = [plain(0), statement(0), plain(1), statement(1), plain(2), guarded(2, "no-such-report"), statement(3), plain(3), statement(4, other.id), statement(5), guarded(6, report.body.id), guarded(7, report.body.id), statement(8)];
    const combined = combineAuditStatements(env.DB, batch);
    // [plain0, plain1, plain2, (0,1,guarded 2), 3, plain3, 4@other, (5,guarded 6), guarded 7, 8]
    expect(combined).toHaveLength(10);
    expect([combined[0], combined[1], combined[2], combined[4], combined[5], combined[6], combined[8], combined[9]]).toEqual([batch[0], batch[2], batch[4], batch[6], batch[7], batch[8], batch[11], batch[12]]);
    expect(batch).not.toContain(combined[3]);
    expect(batch).not.toContain(combined[7]);
    const start = await lastSeq(id);
    await env.DB.batch(combined);
    // Event 2's report does not exist: not written, and no gap for it; 6 and 7's does.
    const written = (await rows(id, start)).map((row) => [row.seq, row.targetId]);
    expect(written).toEqual([
      [start + 1, "t0"],
      [start + 2, "t1"],
      [start + 3, "t3"],
      [start + 4, "t5"],
      [start + 5, "t6"],
      [start + 6, "t7"],
      [start + 7, "t8"],
    ]);
    expect((await rows(other.id)).filter((row) => row.targetId === "t4")).toHaveLength(1);
    // The batch again writes nothing.
    await env.DB.batch(combineAuditStatements(env.DB, [statement(0), statement(1), guarded(2, "no-such-report"), statement(3), statement(5), guarded(6, report.body.id), guarded(7, report.body.id), statement(8)]));
    expect(await lastSeq(id)).toBe(start + 7);
    // Event 2 with its guard holding now: written, next in seq.
    const again = combineAuditStatements(env.DB, [statement(0), statement(1), guarded(2, report.body.id)]);
    expect(again).toHaveLength(1);
    await env.DB.batch(again);
    expect((await rows(id, start + 7)).map((row) => [row.seq, row.targetId])).toEqual([[start + 8, "t2"]]);
    // A batch with no run of two or more (a guarded event ends a run) is left as it is.
    const single = [plain(0), guarded(9, report.body.id), plain(1), statement(10)];
    expect(combineAuditStatements(env.DB, single)).toEqual(single);
    await sealAuditChain(env, id);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });
  it("a guard naming a column its table lacks fails the batch, combined as alone: it never binds to the event's own column of that name", async () => {
    const { id } = await newInstallation();
    const report = await api("/api/v1/reports", { body: { subject: { kind: "content", id: "guard-post" }, category: "violence" }, key: (await newInstallation()).apiKey });
    expect(report.status).toBe(201);
    const event = input(id, "bad-guard:1", 1);
    // reports has no `action` column; audit_events has, and this event's action is the guard's value.
    const badGuard = () => auditStatement(env.DB, event, { table: "reports", id: report.body.id, where: { action: event.action } });
    const start = await lastSeq(id);
    await expect(env.DB.batch([badGuard()])).rejects.toThrow();
    await expect(env.DB.batch(combineAuditStatements(env.DB, [auditStatement(env.DB, input(id, "bad-guard:0", 0)), badGuard()]))).rejects.toThrow();
    expect(await lastSeq(id)).toBe(start);
  });

  it("a combined statement combined again keeps its events in their place and its guard last", async () => {
    const { id, apiKey } = await newInstallation();
    const statement = (n: number) => auditStatement(env.DB, input(id, `again:${n}`, n));
    const inner = combineAuditStatements(env.DB, [statement(1), statement(2)]);
    expect(inner).toHaveLength(1);
    const outer = combineAuditStatements(env.DB, [statement(0), ...inner, env.DB.prepare("SELECT 1"), statement(3)]);
    expect(outer).toHaveLength(2);
    const guardedInner = combineAuditStatements(env.DB, [statement(4), auditStatement(env.DB, input(id, "again:5", 5), { table: "reports", id: "no-such-report" })]);
    // A guarded last event ends the run: what follows is not moved before its guard.
    expect(combineAuditStatements(env.DB, [...guardedInner, statement(6)])).toHaveLength(2);
    const start = await lastSeq(id);
    await env.DB.batch([...outer, ...combineAuditStatements(env.DB, [...guardedInner, statement(6)])]);
    expect((await rows(id, start)).map((row) => [row.seq, row.targetId])).toEqual([
      [start + 1, "t0"],
      [start + 2, "t1"],
      [start + 3, "t2"],
      [start + 4, "t3"],
      [start + 5, "t4"],
      [start + 6, "t6"],
    ]);
    await sealAuditChain(env, id);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });
  it("events each guarded by their target's row: the ones whose row holds are written as their own guarded statements write them, numbered with no gap; a repeat writes nothing", async () => {
    const { id, apiKey } = await newInstallation();
    const other = await newInstallation();
    const report = async (key: string, n: number) => {
      const created = await api("/api/v1/reports", { body: { subject: { kind: "content", id: `each-${n}` }, category: "violence" }, key });
      expect(created.status).toBe(201);
      return created.body.id as string;
    };
    const [r0, r2] = [await report(apiKey, 0), await report(apiKey, 2)];
    // Event 1 names no report, event 3 another installation's: their guards hold for neither.
    const targets = [r0, "no-such-report", r2, await report(other.apiKey, 3)];
    const events = targets.map((target, n) => ({ ...input(id, `each:${n}`, n), target: { type: "report", id: target } }));
    const guard = { table: "reports", where: { installation_id: id } } as const;
    const start = await lastSeq(id);
    await env.DB.batch(events.map((event) => auditStatement(env.DB, event, { ...guard, id: event.target.id })));
    const single = await rows(id, start);
    expect(single.map((row) => [row.seq, row.targetId])).toEqual([
      [start + 1, r0],
      [start + 2, r2],
    ]);
    await env.DB.prepare("DELETE FROM audit_events WHERE installation_id = ?1 AND seq > ?2").bind(id, start).run();
    expect((await auditEachTargetStatement(env.DB, events, guard).run()).meta.changes).toBe(2);
    expect(await rows(id, start)).toEqual(single);
    expect((await auditEachTargetStatement(env.DB, events, guard).run()).meta.changes).toBe(0);
    // Not a statement combineAuditStatements takes apart or merges: its guards are its own.
    const each = auditEachTargetStatement(env.DB, events, guard);
    expect(combineAuditStatements(env.DB, [auditStatement(env.DB, input(id, "each:x", 9)), each])).toContain(each);
    await sealAuditChain(env, id);
    expect(await verify(apiKey)).toMatchObject({ ok: true });
  });

  it("the combined insert seeks its indexes: no walk of audit_events however long the trail", async () => {
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${auditEventsSql("AND (e.ord < 1 OR EXISTS (SELECT 1 FROM reports WHERE id = ?3))")}`)
      .bind("inst", "[]", "report")
      .all<{ detail: string }>();
    const plan = results.map((row) => row.detail);
    expect(plan.filter((detail) => /^SCAN audit_events\b/u.test(detail) || /^SCAN reports\b/u.test(detail))).toEqual([]);
    expect(plan.some((detail) => /SEARCH audit_events USING (COVERING )?INDEX audit_events_id \(id=\?\)/u.test(detail))).toBe(true);
    expect(plan.some((detail) => /SEARCH audit_events USING (COVERING )?INDEX audit_events_idempotency \(idempotency_key=\?\)/u.test(detail))).toBe(true);
    expect(plan.some((detail) => /SEARCH audit_events USING (COVERING )?INDEX audit_events_seq \(installation_id=\?\)/u.test(detail))).toBe(true);
  });
});
