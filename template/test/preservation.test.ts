// Preservation holds: a held case's reported content survives the retention sweep (and erasure
// requests) until the hold ends or an admin releases it, with a reason, audited.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepRetention } from "../src/cases/retention/retention";
import { api, newInstallation } from "./helpers";

const DAY = 86_400_000;

/** Moves a case's activity `days` into the past, as if it had been handled then. */
async function age(caseId: string, days: number) {
  const past = new Date(Date.now() - days * DAY).toISOString();
  await env.DB.batch([
    env.DB.prepare("UPDATE cases SET last_reported_at = ?2, first_reported_at = ?2, updated_at = ?2 WHERE id = ?1").bind(caseId, past),
    env.DB.prepare("UPDATE reports SET created_at = ?2 WHERE case_id = ?1").bind(caseId, past),
  ]);
}

const erasedAt = async (reportId: string) => (await env.DB.prepare("SELECT personal_data_erased_at AS at FROM reports WHERE id = ?1").bind(reportId).first<{ at: string | null }>())!.at;

describe("preservation holds", () => {
  it("keep a held case's reported content through the retention sweep until released; release is audited and happens once", async () => {
    const { apiKey: key } = await newInstallation("preservation");
    const report = (subject: string) =>
      api("/api/v1/reports", { key, body: { subject: { kind: "content", id: subject }, category: "protection_of_minors", description: `about ${subject}`, evidence: [{ kind: "image", pdq: "ab".repeat(32) }] } });
    const heldSubject = `held-${crypto.randomUUID()}`;
    const held = (await report(heldSubject)).body;
    const free = (await report(`free-${crypto.randomUUID()}`)).body;
    const hold = await api(`/api/v1/cases/${held.caseId}/preservation-holds`, { key, body: { reason: "CyberTipline report 1234, 18 U.S.C. § 2258A(h)" } });
    expect(hold.status).toBe(201);
    expect(hold.body).toMatchObject({ caseId: held.caseId, active: true, releasedAt: null });
    expect(Date.parse(hold.body.heldUntil) - Date.now()).toBeGreaterThan(364 * DAY);

    await age(held.caseId, 400);
    await age(free.caseId, 400);
    await sweepRetention(env, new Date());
    expect(await erasedAt(free.id)).not.toBeNull();
    expect(await erasedAt(held.id)).toBeNull();
    expect((await api(`/api/v1/reports/${held.id}`, { key })).body.description).toBe(`about ${heldSubject}`);

    const released = await api(`/api/v1/preservation-holds/${hold.body.id}/release`, { key, body: { reason: "NCMEC confirmed receipt; counsel released the hold" } });
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ active: false, releaseReason: "NCMEC confirmed receipt; counsel released the hold" });
    expect((await api(`/api/v1/preservation-holds/${hold.body.id}/release`, { key, body: { reason: "again" } })).body.error.code).toBe("preservation_hold.not_active");
    await sweepRetention(env, new Date());
    expect(await erasedAt(held.id)).not.toBeNull();

    const audit = await api("/api/v1/audit-events?limit=100", { key });
    const actions = audit.body.items.map((e: any) => e.action);
    expect(actions).toEqual(expect.arrayContaining(["preservation_hold.placed", "preservation_hold.released"]));
    expect((await api(`/api/v1/cases/${held.caseId}/preservation-holds`, { key })).body.items).toHaveLength(1);
  });
});
