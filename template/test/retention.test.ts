// Retention and erasure: the sweep erases the sealed personal data of closed cases
// past the installation's period and keeps open cases, summaries and a verifying audit chain; a
// named reporter's data is exported and erased on request; audit details carry ids, not emails or
// names; another installation is untouched.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openPersonalData, sealPersonalData } from "../src/cases/reports/report-crypto";
import { sweepRetention } from "../src/cases/retention/retention";
import { indexPersonKeys } from "../src/cases/retention/retention-people";
import { api, personKey, edge, newInstallation, publish, until, waitForRun, STEP_OUTPUT, setSealedOutput } from "./helpers";

const DAY = 86_400_000;
const REPORTER_CONTACT = "rosa.reporter@example.org";

/** An installation whose reports go to a review task, then a message to the reporter. */
async function setup(label: string) {
  const { id, apiKey } = await newInstallation(`retention-${label}`);
  const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test/ok/retention-${label}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
  expect(endpoint.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: `/ok/retention-${label}`, secret: endpoint.body.secret }) });
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `review-${label}`, slaSeconds: 3600 } });
  const version = await publish(apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue.body.id, timeout_seconds: 3600 }, inputMapping: { subject: "report.subject.id" } },
      { id: "thank", kind: "send_message", config: { template: "Thanks for your report about {{subject}}.", recipient: "reporter" }, inputMapping: { subject: "report.subject.id" } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "thank"), edge("review", "timeout", "done"), edge("thank", "sent", "done")],
  });
  expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
  return { id, apiKey, queueId: queue.body.id as string };
}

async function report(apiKey: string, subjectId: string, reporterId: string, extra: Record<string, unknown> = {}) {
  const created = await api("/api/v1/reports", {
    key: apiKey,
    body: {
      subject: { kind: "content", id: subjectId, url: `https://social.example/p/${subjectId}`, ownerId: `owner-of-${subjectId}`, snapshot: { text: `the post ${subjectId}` } },
      category: "scams_and_fraud",
      reporter: { id: reporterId, contact: REPORTER_CONTACT },
      description: `described by ${reporterId}`,
      evidence: [{ kind: "note", text: `evidence on ${subjectId}` }],
      ...extra,
    },
  });
  expect(created.status).toBe(201);
  return { reportId: created.body.id as string, caseId: created.body.caseId as string, runId: created.body.runs[0].runId as string };
}

async function taskOf(reportId: string) {
  return until(async () => env.DB.prepare("SELECT id FROM human_tasks WHERE report_id = ?1").bind(reportId).first<{ id: string }>(), "the task");
}

/** Answers the report's task, waits for its run and its message delivery to finish: the case is closed. */
async function close(apiKey: string, handle: { reportId: string; runId: string }) {
  const task = await taskOf(handle.reportId);
  expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: apiKey, body: { reviewer: "Alice Example" } })).status).toBe(200);
  expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "Alice Example", response: { verdict: "remove" } } })).status).toBe(200);
  expect((await waitForRun(apiKey, handle.runId)).state).toBe("succeeded");
  await until(async () => (await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE source_id LIKE ?1 AND state = 'delivered'").bind(`${handle.runId}:%`).first<{ n: number }>())!.n > 0, "the message delivered");
  return task.id;
}

/** Moves a case's activity `days` into the past (reports, tasks, runs), as if it had been handled then. */
async function age(caseId: string, days: number) {
  const past = new Date(Date.now() - days * DAY).toISOString();
  await env.DB.batch([
    env.DB.prepare("UPDATE cases SET last_reported_at = ?2, first_reported_at = ?2, updated_at = ?2 WHERE id = ?1").bind(caseId, past),
    env.DB.prepare("UPDATE reports SET created_at = ?2 WHERE case_id = ?1").bind(caseId, past),
    env.DB.prepare("UPDATE human_tasks SET updated_at = ?2, created_at = ?2 WHERE report_id IN (SELECT id FROM reports WHERE case_id = ?1)").bind(caseId, past),
    env.DB.prepare("UPDATE workflow_runs SET updated_at = ?2, finished_at = CASE WHEN finished_at IS NULL THEN NULL ELSE ?2 END WHERE report_id IN (SELECT id FROM reports WHERE case_id = ?1)").bind(caseId, past),
    env.DB.prepare("UPDATE appeals SET updated_at = ?2 WHERE report_id IN (SELECT id FROM reports WHERE case_id = ?1)").bind(caseId, past),
  ]);
}

async function openReport(installationId: string, reportId: string) {
  const row = await env.DB.prepare("SELECT personal_data AS sealed FROM reports WHERE id = ?1").bind(reportId).first<{ sealed: string }>();
  return openPersonalData<any>(env, installationId, `report:${reportId}`, row!.sealed);
}

async function auditRows(installationId: string) {
  return (await env.DB.prepare("SELECT id, seq, action, details_json AS details, hash, entry_mac AS mac FROM audit_events WHERE installation_id = ?1 ORDER BY seq").bind(installationId).all<any>()).results;
}

async function verifies(apiKey: string) {
  const verify = await api("/api/v1/audit/verify?mode=full", { key: apiKey });
  expect(verify.status).toBe(200);
  return verify.body.ok as boolean;
}

describe("retention of closed cases", () => {
  it("erases the sealed data of closed cases past the period, keeps open and recent ones and the summaries, and the chain still verifies", async () => {
    const a = await setup("a");
    const b = await setup("b");
    // B keeps personal data ten years: its equally old closed case stays.
    expect((await api("/api/v1/retention", { key: b.apiKey, method: "PUT", body: { personalDataDays: 3650 } })).status).toBe(200);

    const old = await report(a.apiKey, "post-old", "user-1");
    const oldTask = await close(a.apiKey, old);
    const recent = await report(a.apiKey, "post-recent", "user-2");
    await close(a.apiKey, recent);
    const open = await report(a.apiKey, "post-open", "user-3");
    await taskOf(open.reportId);
    const other = await report(b.apiKey, "post-b", "user-1");
    await close(b.apiKey, other);
    // A content-reading node's sealed output on the old run (the review graph itself reads no content).
    const step = await env.DB.prepare("SELECT s.id FROM workflow_step_runs s WHERE s.run_id = ?1 AND s.node_id = 'review'").bind(old.runId).first<{ id: string }>();
    const { sealed } = await sealPersonalData(env, a.id, `step_output:${step!.id}`, { content: "the post post-old" });
    await setSealedOutput(step!.id, sealed);

    await age(old.caseId, 400);
    await age(open.caseId, 400);
    await age(other.caseId, 400);
    await age(recent.caseId, 100);
    const before = await auditRows(a.id);
    expect(await verifies(a.apiKey)).toBe(true);

    // A sealed context is authenticated by its own tag: the row keeps no digest of it (an empty one; rows written before say `sealed`).
    expect(await env.DB.prepare("SELECT context_digest AS digest FROM human_tasks WHERE id = ?1").bind(oldTask).first()).toEqual({ digest: "" });
    const summary = await sweepRetention(env, new Date());
    // Deliveries: the run's message, and the notifier's receipt of the notice (DSA Art. 16) sent outside the run.
    expect(summary).toMatchObject({ installations: 1, cases: 1, reports: 1, tasks: 1, stepOutputs: 1, deliveries: 2, failed: 0 });

    // The old, closed case: every sealed blob replaced, the summaries kept.
    expect(await openReport(a.id, old.reportId)).toEqual({ reporter: null, description: null, subjectUrl: null, subjectOwnerId: null, snapshot: null, evidence: [] });
    const read = await api(`/api/v1/reports/${old.reportId}`, { key: a.apiKey });
    expect(read.body).toMatchObject({ id: old.reportId, category: "scams_and_fraud", subject: { kind: "content", id: "post-old", url: null, ownerId: null }, description: null, evidence: [] });
    expect(Date.parse(read.body.personalDataErasedAt)).toBeGreaterThan(0);
    expect((await api(`/api/v1/reports/${open.reportId}`, { key: a.apiKey })).body.personalDataErasedAt).toBeNull();
    expect((await api(`/api/v1/reports/${old.reportId}/reveal-reporter`, { key: a.apiKey, body: { reason: "retention check" } })).body.reporter).toEqual({ id: null, contact: null });
    const task = await env.DB.prepare("SELECT context_digest AS digest, response_json AS response, state FROM human_tasks WHERE id = ?1").bind(oldTask).first<any>();
    expect(task).toMatchObject({ digest: "erased", state: "completed" });
    expect(JSON.parse(task.response)).toEqual({ verdict: "remove" });
    expect((await api(`/api/v1/tasks/${oldTask}`, { key: a.apiKey })).body.context).toBeNull();
    expect(await env.DB.prepare(`SELECT ${STEP_OUTPUT.sealed} AS s, ${STEP_OUTPUT.json} IS NOT NULL AS kept FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.id = ?1`).bind(step!.id).first()).toEqual({ s: null, kept: 1 });
    const delivery = await env.DB.prepare("SELECT id, payload_sealed AS sealed, payload_digest AS digest FROM webhook_deliveries WHERE source_id LIKE ?1").bind(`${old.runId}:%`).first<any>();
    expect(delivery.digest).toBe("erased");
    expect(await openPersonalData(env, a.id, `webhook_delivery:${delivery.id}`, delivery.sealed)).toEqual({ type: "erased", data: { erased: true } });
    expect((await env.DB.prepare("SELECT personal_data_erased_at AS at, category, subject_id AS subjectId FROM reports WHERE id = ?1").bind(old.reportId).first<any>()).at).not.toBeNull();
    // The case keeps its count and leaves the sweep's range; the open one stays in it.
    expect(await env.DB.prepare("SELECT report_count AS n, personal_data_erased_at IS NOT NULL AS done FROM cases WHERE id = ?1").bind(old.caseId).first()).toEqual({ n: 1, done: 1 });
    expect(await env.DB.prepare("SELECT personal_data_erased_at AS at FROM cases WHERE id = ?1").bind(open.caseId).first()).toEqual({ at: null });

    // Kept: the open case (its task is still open), the recent closed case, the other installation's case.
    expect((await openReport(a.id, open.reportId)).reporter).toEqual({ id: "user-3", contact: REPORTER_CONTACT });
    expect((await openReport(a.id, recent.reportId)).description).toBe("described by user-2");
    expect((await openReport(b.id, other.reportId)).snapshot).toEqual({ text: "the post post-b" });
    expect((await auditRows(b.id)).filter((e) => e.action === "retention.personal_data_erased")).toEqual([]);

    // The audit trail: earlier rows untouched, one event with counts only, and the chain verifies.
    const after = await auditRows(a.id);
    expect(after.slice(0, before.length).map((e) => [e.id, e.details, e.mac])).toEqual(before.map((e) => [e.id, e.details, e.mac]));
    const erased = after.filter((e) => e.action === "retention.personal_data_erased");
    expect(erased).toHaveLength(1);
    expect(JSON.parse(erased[0].details)).toMatchObject({ reports: 1, appeals: 0, tasks: 1, stepOutputs: 1, deliveries: 2, cases: 1, retentionDays: 365 });
    expect(erased[0].details).not.toMatch(/user-1|example\.org|post-old/u);
    expect(await verifies(a.apiKey)).toBe(true);

    // Idempotent: nothing left to erase, no second event.
    expect(await sweepRetention(env, new Date())).toMatchObject({ reports: 0, cases: 0 });
    expect((await auditRows(a.id)).filter((e) => e.action === "retention.personal_data_erased")).toHaveLength(1);

    // A new report on the same subject reopens the case; its own data is held, the old report stays erased.
    const again = await report(a.apiKey, "post-old", "user-4");
    expect(again.caseId).toBe(old.caseId);
    expect(await env.DB.prepare("SELECT personal_data_erased_at AS at, state FROM cases WHERE id = ?1").bind(old.caseId).first()).toEqual({ at: null, state: "open" });
    expect((await openReport(a.id, again.reportId)).reporter.id).toBe("user-4");
    expect((await openReport(a.id, old.reportId)).reporter).toBeNull();
  });

  it("the period is set per installation within bounds, audited", async () => {
    const { apiKey } = await newInstallation("retention-settings");
    expect((await api("/api/v1/retention", { key: apiKey })).body).toMatchObject({ personalDataDays: 365, isDefault: true });
    const tooShort = await api("/api/v1/retention", { key: apiKey, method: "PUT", body: { personalDataDays: 30 } });
    expect(tooShort.status).toBe(422);
    expect(tooShort.body.error.code).toBe("retention.period_invalid");
    expect((await api("/api/v1/retention", { key: apiKey, method: "PUT", body: { personalDataDays: 730 } })).body).toMatchObject({ personalDataDays: 730, isDefault: false });
    const events = await api("/api/v1/audit-events?action=retention.settings_updated", { key: apiKey });
    expect(events.body.items.map((e: any) => e.details)).toEqual([{ personalDataDays: 730, previousDays: 365, previousWasDefault: true }]);
  });
});

describe("a named person's data on request", () => {
  it("exports a reporter's data opened, and erases it in closed cases while holding back open ones", async () => {
    const c = await setup("c");
    const closed = await report(c.apiKey, "post-c1", "user-77");
    await close(c.apiKey, closed);
    const stillOpen = await report(c.apiKey, "post-c2", "user-77");
    await taskOf(stillOpen.reportId);
    const someoneElse = await report(c.apiKey, "post-c3", "user-88");
    const appeal = await api("/api/v1/appeals", { key: c.apiKey, body: { reportId: closed.reportId, appellantRole: "notifier", appellant: { id: "user-77", contact: REPORTER_CONTACT }, reason: "please look again" } });
    expect(appeal.status).toBe(201);
    expect((await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: await personKey(c.apiKey), body: { outcome: "upheld" } })).status).toBe(200);
    // A report written before the index existed is found too (indexed on demand).
    await env.DB.prepare("UPDATE reports SET reporter_key = NULL, subject_owner_key = NULL, person_keys_version = NULL WHERE id = ?1").bind(stillOpen.reportId).run();

    const exported = await api("/api/v1/personal-data/export", { key: c.apiKey, body: { reporter: { id: "user-77" } } });
    expect(exported.status).toBe(200);
    expect(exported.body.reports.map((r: any) => r.id).sort()).toEqual([closed.reportId, stillOpen.reportId].sort());
    expect(exported.body.reports[0]).toMatchObject({ roles: ["reporter"], reporter: { id: "user-77", contact: REPORTER_CONTACT }, description: "described by user-77" });
    expect(exported.body.appeals).toMatchObject([{ id: appeal.body.id, appellant: { id: "user-77" }, reason: "please look again" }]);
    // As subject owner, a person sees the reports about them, never who reported.
    const owner = await api("/api/v1/personal-data/export", { key: c.apiKey, body: { subjectOwner: { id: "owner-of-post-c3" } } });
    expect(owner.body.reports).toHaveLength(1);
    expect(owner.body.reports[0]).toMatchObject({ id: someoneElse.reportId, roles: ["subject_owner"], subject: { ownerId: "owner-of-post-c3" } });
    expect(owner.body.reports[0].reporter).toBeUndefined();
    expect(owner.body.reports[0].description).toBeUndefined();
    expect(JSON.stringify(owner.body)).not.toContain("user-88");

    // Erasure leaves pending deliveries alone (they are still being acted on): wait until the
    // notifier's messages, sent after the answers above, are finished.
    await until(async () => (await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND state = 'pending'").bind(c.id).first<{ n: number }>())!.n === 0, "every delivery finished");
    const erased = await api("/api/v1/personal-data/erase", { key: c.apiKey, body: { reporter: { id: "user-77" } } });
    expect(erased.status).toBe(200);
    // Deliveries: the run's message, the notifier's receipt and the decision's outcome to the notifier.
    expect(erased.body).toMatchObject({ erased: { reports: 1, appeals: 1, tasks: 1, deliveries: 3 }, held: { reports: 1, caseIds: [stillOpen.caseId] }, remaining: false });
    expect((await openReport(c.id, closed.reportId)).reporter).toBeNull();
    const appealRow = await env.DB.prepare("SELECT personal_data AS sealed, state FROM appeals WHERE id = ?1").bind(appeal.body.id).first<any>();
    expect(appealRow.state).toBe("upheld");
    expect(await openPersonalData(env, c.id, `appeal:${appeal.body.id}`, appealRow.sealed)).toEqual({ appellant: null, reason: null });
    expect((await openReport(c.id, stillOpen.reportId)).reporter).toEqual({ id: "user-77", contact: REPORTER_CONTACT });
    expect((await openReport(c.id, someoneElse.reportId)).reporter.id).toBe("user-88");
    // What was erased is no longer found.
    expect((await api("/api/v1/personal-data/export", { key: c.apiKey, body: { reporter: { id: "user-77" } } })).body.reports.map((r: any) => r.id)).toEqual([stillOpen.reportId]);

    const events = await auditRows(c.id);
    const requests = events.filter((e) => e.action === "personal_data.exported" || e.action === "personal_data.erased");
    expect(requests.map((e) => e.action)).toEqual(["personal_data.exported", "personal_data.exported", "personal_data.erased", "personal_data.exported"]);
    expect(JSON.parse(requests[2].details)).toMatchObject({ roles: ["reporter"], reports: 1, appeals: 1, heldReports: 1 });
    for (const event of requests) expect(event.details).not.toMatch(/user-77|owner-of|example\.org/u);
    expect(await verifies(c.apiKey)).toBe(true);
  });

  it("another installation's person is not found, and a request without a person is refused", async () => {
    const d = await setup("d");
    const e = await newInstallation("retention-e");
    await report(d.apiKey, "post-d1", "user-55");
    const foreign = await api("/api/v1/personal-data/export", { key: e.apiKey, body: { reporter: { id: "user-55" } } });
    expect(foreign.body).toMatchObject({ reports: [], appeals: [] });
    const foreignErase = await api("/api/v1/personal-data/erase", { key: e.apiKey, body: { reporter: { id: "user-55" } } });
    expect(foreignErase.body.erased).toMatchObject({ reports: 0 });
    expect((await api("/api/v1/personal-data/export", { key: d.apiKey, body: {} })).status).toBe(400);
  });

  it("the schedule indexes rows written before the index", async () => {
    const f = await setup("f");
    const handle = await report(f.apiKey, "post-f1", "user-66");
    await env.DB.prepare("UPDATE reports SET reporter_key = NULL, person_keys_version = NULL WHERE id = ?1").bind(handle.reportId).run();
    expect((await indexPersonKeys(env, 200)).reports).toBeGreaterThanOrEqual(1);
    const row = await env.DB.prepare("SELECT reporter_key AS k, person_keys_version AS v FROM reports WHERE id = ?1").bind(handle.reportId).first<any>();
    expect(row.v).toBe(1);
    expect(row.k).toMatch(/^pk1_[0-9a-f]{64}$/u);
    // A row that does not open is set aside, not retried forever.
    const broken = await report(f.apiKey, "post-f2", "user-67");
    await env.DB.prepare("UPDATE reports SET personal_data = 'v1.dk_missing.AAAA.AAAA', person_keys_version = NULL WHERE id = ?1").bind(broken.reportId).run();
    await indexPersonKeys(env, 200);
    expect(await env.DB.prepare("SELECT person_keys_version AS v FROM reports WHERE id = ?1").bind(broken.reportId).first()).toEqual({ v: -1 });
  });
});

describe("audit details hold ids, not emails or names", () => {
  it("a reviewer's name and a console user's email appear only as ids", async () => {
    const g = await setup("g");
    const handle = await report(g.apiKey, "post-g1", "user-99");
    const task = await taskOf(handle.reportId);
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: g.apiKey, body: { reviewer: "Alice Example" } })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: g.apiKey, body: { reviewer: "Alice Example", response: { verdict: "keep" } } })).status).toBe(200);
    expect((await api("/api/v1/console-users", { key: g.apiKey, body: { email: "mod.person@example.org", name: "Mod Person", role: "moderator" } })).status).toBe(201);
    const events = await auditRows(g.id);
    const claimed = events.find((e) => e.action === "task.claimed");
    const completed = events.find((e) => e.action === "task.completed");
    expect(JSON.parse(claimed.details).reviewerId).toMatch(/^rvw_[0-9a-f]{20}$/u);
    expect(JSON.parse(completed.details).reviewerId).toBe(JSON.parse(claimed.details).reviewerId);
    const all = events.map((e) => e.details).join("\n");
    expect(all).not.toContain("Alice Example");
    expect(all).not.toContain("mod.person@example.org");
    expect(all).not.toContain("Mod Person");
    expect(events.some((e) => e.action === "console_user.created")).toBe(true);
  });
});
