// Intake in one round trip: once an installation's senders are known to be plain (no
// trusted flagger, no open suspension), intake assumes its sender and its receipt endpoints and
// writes under a condition that checks the assumption in the batch. These tests change the
// installation right after intake learned it (so the assumption is stale) and show each change is
// still honoured, exactly as intake that reads first: a flagger registered since, a suspension,
// a new message.send endpoint.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { caseUpsertSql } from "../src/cases/reports/reports";
import { api, newInstallation, receiverLog, until } from "./helpers";

const report = (subjectId: string, reporterId: string) => ({
  subject: { kind: "content", id: subjectId, snapshot: { text: "buy cheap pills" } },
  category: "scams_and_fraud",
  reporter: { id: reporterId, contact: `${reporterId}@example.org` },
  description: "scam",
});

/** Two reports, so this isolate has read the installation's senders and assumes them from now on. */
async function warmed() {
  const { id, apiKey } = await newInstallation();
  for (const subject of ["warm-1", "warm-2"]) expect((await api("/api/v1/reports", { key: apiKey, body: report(subject, "someone") })).status).toBe(201);
  return { id, apiKey };
}

const sourceOf = async (reportId: string) => (await env.DB.prepare("SELECT source FROM reports WHERE id = ?").bind(reportId).first<{ source: string }>())?.source;

describe("intake's assumed sender is checked in its batch", () => {
  it("a flagger registered after intake learned the installation still makes its notice trusted_flagger", async () => {
    const { apiKey } = await warmed();
    const flagger = await api("/api/v1/trusted-flaggers", { key: apiKey, body: { name: "Hotline", reporter: { id: "hotline-1" }, categories: ["scams_and_fraud"] } });
    expect(flagger.status).toBe(201);
    const notice = await api("/api/v1/reports", { key: apiKey, body: report("flagged-1", "hotline-1") });
    expect(notice.status).toBe(201);
    expect(notice.body.source).toBe("trusted_flagger");
    expect(await sourceOf(notice.body.id)).toBe("trusted_flagger");
    const recorded = await env.DB.prepare("SELECT trusted_flagger_id AS flaggerId FROM notifier_notices WHERE report_id = ?").bind(notice.body.id).first<{ flaggerId: string }>();
    expect(recorded?.flaggerId).toBe(flagger.body.id);
    // Someone else's notice is still a plain notice, and no report was written twice.
    const other = await api("/api/v1/reports", { key: apiKey, body: report("flagged-2", "someone") });
    expect(other.body.source).toBe("notice");
    const counted = await env.DB.prepare("SELECT COUNT(*) AS n FROM reports WHERE subject_id IN ('flagged-1', 'flagged-2')").first<{ n: number }>();
    expect(counted?.n).toBe(2);
  });

  it("a notifier suspended after intake learned the installation is refused, and nothing is recorded", async () => {
    const { id, apiKey } = await warmed();
    expect((await api("/api/v1/notifiers/warnings", { key: apiKey, body: { reporter: { id: "spammer" }, reason: "Forty notices about the same page." } })).status).toBe(201);
    const suspended = await api("/api/v1/notifiers/suspensions", { key: apiKey, body: { reporter: { id: "spammer" }, reason: "Kept flooding.", until: new Date(Date.now() + 86_400_000).toISOString() } });
    expect(suspended.status).toBe(201);
    const refused = await api("/api/v1/reports", { key: apiKey, body: report("spam-1", "spammer") });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("report.notifier_suspended");
    const left = await env.DB.prepare("SELECT (SELECT COUNT(*) FROM reports WHERE installation_id = ?1 AND subject_id = 'spam-1') AS reports, (SELECT COUNT(*) FROM cases WHERE installation_id = ?1 AND subject_id = 'spam-1') AS cases")
      .bind(id)
      .first<{ reports: number; cases: number }>();
    expect(left).toEqual({ reports: 0, cases: 0 });
  });

  it("a message.send endpoint created after intake learned the installation gets the next receipt", async () => {
    const { apiKey } = await warmed();
    const path = "/ok/assumed-receipt";
    const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
    expect(hook.status).toBe(201);
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
    const notice = await api("/api/v1/reports", { key: apiKey, body: report("receipt-1", "reporter-9") });
    expect(notice.status).toBe(201);
    const receipts = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.verified && entry.data?.kind === "notice_receipt");
      return log.length > 0 ? log : null;
    }, "the receipt");
    expect(receipts).toHaveLength(1);
    expect(receipts[0]!.data).toMatchObject({ reportId: notice.body.id, recipient: { id: "reporter-9", contact: "reporter-9@example.org" } });
  });

  it("a report not written for its Idempotency-Key (a replay, or the key used again for another subject) opens no case, whether the sender was read or assumed", async () => {
    for (const setup of [async () => newInstallation(), warmed]) {
      const { id, apiKey } = await setup();
      const key = { "idempotency-key": `intake-${crypto.randomUUID()}` };
      const first = await api("/api/v1/reports", { key: apiKey, headers: key, body: report("keyed-1", "someone") });
      expect(first.status).toBe(201);
      const replay = await api("/api/v1/reports", { key: apiKey, headers: key, body: report("keyed-1", "someone") });
      expect(replay.body.id).toBe(first.body.id);
      const reused = await api("/api/v1/reports", { key: apiKey, headers: key, body: report("keyed-2", "someone") });
      expect(reused.status).toBe(409);
      expect(reused.body.error.code).toBe("idempotency_key.reused");
      const cases = await env.DB.prepare("SELECT subject_id AS subject, report_count AS reports FROM cases WHERE installation_id = ?1 AND subject_id IN ('keyed-1', 'keyed-2')").bind(id).all<{ subject: string; reports: number }>();
      expect(cases.results).toEqual([{ subject: "keyed-1", reports: 1 }]);
    }
  });

  it("the case's upsert finds the subject's case, its archived key and a report under the key each by an index, never a table walk", async () => {
    const sql = caseUpsertSql(18, undefined);
    const binds = [null, "inst", "content", "post-1", null, null, null, null, null, null, "key-1", null, "2026-01-01T00:00:00.000Z", null, null, null, null, "case_1", "subject-key"];
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .bind(...binds)
      .all<{ detail: string }>();
    const details = results.map((row) => row.detail);
    expect(details.filter((detail) => /^SCAN (cases|reports|archived_subjects)\b/u.test(detail))).toEqual([]);
    for (const table of ["archived_subjects", "cases", "reports"]) expect(details.some((detail) => detail.startsWith(`SEARCH ${table} USING`))).toBe(true);
  });
});
