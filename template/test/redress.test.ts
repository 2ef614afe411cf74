// Redress (DSA Art. 17, 20): the affected user's statement after every restricting decision, in the
// report's language, with the redress open to them; complaints accepted for six months; appeal
// workflows that decide without a human task refused at trigger creation (also through a linked
// workflow); appeals resolved by an API key counted as automation; the outcome to the appellant;
// reversals recorded and counted; another installation's rows are 404.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { complaintDeadline } from "../src/cases";
import { api, personKey, edge, newInstallation, publish, receiverLog, until } from "./helpers";

async function messageEndpoint(apiKey: string, path: string) {
  const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes: ["message.send"] } });
  expect(created.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: created.body.secret }) });
  return created.body as { id: string };
}

const messagesOf = (path: string, kind: string) => until(async () => (await receiverLog(path)).filter((l) => l.data?.kind === kind).at(0), `a ${kind} message at ${path}`);

function report(apiKey: string, id: string, extra: Record<string, unknown> = {}) {
  return api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id, ownerId: `owner-of-${id}` }, category: "scams_and_fraud", reporter: { id: "rep-1", contact: "reporter@example.org" }, ...extra } });
}

const removal = (reportId: string) => ({ reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "The post offered a fake investment scheme.", territorialScope: ["DE", "AT"] });

describe("statements to the affected user (Art. 17)", () => {
  it("POST /decisions sends the subject's owner the statement of reasons in German, with the complaint deadline, settlement bodies and courts", async () => {
    const { apiKey } = await newInstallation();
    await messageEndpoint(apiKey, "/ok/redress-de");
    const settings = await api("/api/v1/redress-settings", {
      key: apiKey,
      method: "PUT",
      body: { settlementBodies: [{ name: "User Rights ODS", url: "https://user-rights.example.eu" }], complaintUrl: "https://platform.example/complaints" },
    });
    expect(settings.status).toBe(200);
    expect(settings.body).toMatchObject({ statementsEnabled: true, settlementBodies: [{ name: "User Rights ODS" }] });
    const r = await report(apiKey, "post-de", { locale: "de-AT" });
    expect(r.status).toBe(201);
    const decision = await api("/api/v1/decisions", { key: apiKey, body: removal(r.body.id) });
    expect(decision.status).toBe(201);

    const message = await messagesOf("/ok/redress-de", "statement_of_reasons");
    expect(message.verified).toBe(true);
    expect(message.type).toBe("message.send");
    expect(message.data).toMatchObject({ decisionId: decision.body.id, language: "de", recipient: { kind: "subject_owner", id: "owner-of-post-de" } });
    // The same facts as the Transparency Database's statement.
    const sor = await api(`/api/v1/decisions/${decision.body.id}/statement-of-reasons`, { key: apiKey });
    expect(message.data.statement).toEqual(sor.body);
    const body: string = message.data.body;
    expect(body).toContain("Dies ist unsere Begründung");
    expect(body).toContain("The post offered a fake investment scheme.");
    expect(body).toContain("User Rights ODS (https://user-rights.example.eu)");
    expect(body).toContain("https://platform.example/complaints");
    expect(body).toContain("Der Rechtsweg steht Ihnen jederzeit offen.");
    // Six calendar months after the notice; the 31st of August gives the last day of February.
    const decidedAt = new Date(decision.body.decidedAt);
    const month = decidedAt.getUTCMonth() + 6;
    const lastDay = new Date(Date.UTC(decidedAt.getUTCFullYear(), month + 1, 0)).getUTCDate();
    const expected = new Date(Date.UTC(decidedAt.getUTCFullYear(), month, Math.min(decidedAt.getUTCDate(), lastDay))).toISOString().slice(0, 10);
    expect(message.data.redress.complaintDeadline.slice(0, 10)).toBe(expected);
    expect(body).toContain(`bis zum ${expected}`);

    const recorded = await api(`/api/v1/decisions/${decision.body.id}/affected-user-statement`, { key: apiKey });
    expect(recorded.status).toBe(200);
    expect(recorded.body).toMatchObject({ state: "queued", language: "de", notSentReason: null, complaintDeadline: message.data.redress.complaintDeadline });
    expect(recorded.body.deliveryIds).toHaveLength(1);
    const audit = await api(`/api/v1/audit-events?action=affected_user.statement_queued&targetId=${decision.body.id}`, { key: apiKey });
    expect(audit.body.items).toHaveLength(1);
    // The record holds no personal data: the owner and the text are only in the sealed delivery.
    const rows = JSON.stringify((await env.DB.prepare("SELECT * FROM redress_messages").all()).results);
    expect(rows).not.toContain("owner-of-post-de");
    expect(rows).not.toContain("fake investment");

    const other = await newInstallation("other");
    expect((await api(`/api/v1/decisions/${decision.body.id}/affected-user-statement`, { key: other.apiKey })).status).toBe(404);
  });

  it("English without a locale or for one without templates; a workflow's decision node sends it too; switched off, it is recorded as not sent", async () => {
    const { apiKey } = await newInstallation();
    await messageEndpoint(apiKey, "/ok/redress-en");
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "decide", kind: "decision", config: { outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Scam detected." } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const r = await report(apiKey, "post-fr", { locale: "fr" });
    const message = await messagesOf("/ok/redress-en", "statement_of_reasons");
    expect(message.data).toMatchObject({ language: "en", reportId: r.body.id, recipient: { id: "owner-of-post-fr" } });
    expect(message.data.body).toContain("This is our statement of reasons.");
    expect(message.data.body).toContain("The decision was taken by automated means.");
    expect(message.data.body).toContain("Digital Services Act");

    const off = await api("/api/v1/redress-settings", { key: apiKey, method: "PUT", body: { statementsEnabled: false } });
    expect(off.body.statementsEnabled).toBe(false);
    const r2 = await report(apiKey, "post-off");
    const decision = await api("/api/v1/decisions", { key: apiKey, body: removal(r2.body.id) });
    const recorded = await api(`/api/v1/decisions/${decision.body.id}/affected-user-statement`, { key: apiKey });
    expect(recorded.body).toMatchObject({ state: "not_sent", notSentReason: "disabled", deliveryIds: [] });
    expect((await api(`/api/v1/audit-events?action=affected_user.statement_not_sent&targetId=${decision.body.id}`, { key: apiKey })).body.items).toHaveLength(1);
  });
});

describe("complaints (Art. 20)", () => {
  it("the complaint period is six calendar months, clamped at a month's end", () => {
    expect(complaintDeadline("2026-01-15T09:30:00.000Z")).toBe("2026-07-15T09:30:00.000Z");
    expect(complaintDeadline("2026-08-31T10:00:00.000Z")).toBe("2027-02-28T10:00:00.000Z");
    expect(complaintDeadline("2027-08-31T10:00:00.000Z")).toBe("2028-02-29T10:00:00.000Z");
  });

  it("an appeal more than six months after the decision's notice is a 422 appeal.deadline_passed; within them it is accepted", async () => {
    const { apiKey } = await newInstallation();
    const r = await report(apiKey, "post-old");
    const decision = await api("/api/v1/decisions", { key: apiKey, body: removal(r.body.id) });
    const sevenMonthsAgo = new Date(Date.now() - 7 * 31 * 86_400_000).toISOString();
    await env.DB.batch([
      env.DB.prepare("UPDATE decisions SET decided_at = ?2 WHERE id = ?1").bind(decision.body.id, sevenMonthsAgo),
      env.DB.prepare("UPDATE redress_messages SET notice_at = ?2 WHERE decision_id = ?1").bind(decision.body.id, sevenMonthsAgo),
    ]);
    const late = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: decision.body.id, reason: "I only saw this now." } });
    expect(late.status).toBe(422);
    expect(late.body.error.code).toBe("appeal.deadline_passed");
    expect(late.body.error.details[0]).toMatchObject({ decisionId: decision.body.id, noticeAt: sevenMonthsAgo });
    // Naming only the report contests its newest decision: the same deadline.
    const byReport = await api("/api/v1/appeals", { key: apiKey, body: { reportId: r.body.id, reason: "Again." } });
    expect(byReport.body.error.code).toBe("appeal.deadline_passed");
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM appeals WHERE report_id = ?1").bind(r.body.id).first<{ n: number }>())!.n).toBe(0);

    const fresh = await report(apiKey, "post-new");
    const recent = await api("/api/v1/decisions", { key: apiKey, body: removal(fresh.body.id) });
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: recent.body.id, reason: "It was not a scam." } });
    expect(appeal.status).toBe(201);
  });

  it("an appeal workflow with a path to a decision without a human task is refused at trigger creation, also through a linked workflow; one with a task on every path is accepted", async () => {
    const { apiKey } = await newInstallation();
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "appeals", slaSeconds: 86_400 } });
    const restore = { outcome: "no_action" };
    const automatic = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "reinstate", kind: "decision", config: restore },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "reinstate"), edge("reinstate", "recorded", "done")],
    });
    const refused = await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: automatic.id, authorityMode: "autonomous" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("trigger.appeal_review_missing");
    expect(refused.body.error.details[0].nodePath).toEqual(["start", "reinstate"]);
    // The same workflow is fine for reports: the rule is the complaint's.
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "false", workflowVersionId: automatic.id, authorityMode: "autonomous" } })).status).toBe(201);

    // A task whose timeout decides anyway: nobody reviewed on that path.
    const timeoutDecides = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "look", kind: "human_task", config: { queue_id: queue.body.id } },
        { id: "reinstate", kind: "decision", config: restore },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "look"), edge("look", "completed", "done"), edge("look", "timeout", "reinstate"), edge("reinstate", "recorded", "done")],
    });
    const onTimeout = await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: timeoutDecides.id, authorityMode: "autonomous" } });
    expect(onTimeout.body.error?.details?.[0]?.nodePath).toEqual(["start", "look", "reinstate"]);

    const linking = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "hand-on", kind: "start_linked_workflow", config: { workflow_version_id: automatic.id } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "hand-on"), edge("hand-on", "started", "done")],
    });
    const viaLink = await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: linking.id, authorityMode: "autonomous" } });
    expect(viaLink.status).toBe(422);
    expect(viaLink.body.error.details[0].nodePath).toEqual(["start", "hand-on", `${automatic.id}/start`, `${automatic.id}/reinstate`]);

    // A condition with two branches: each reviews before it decides; the linked workflow reviews first too.
    const reviewedChild = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "look", kind: "human_task", config: { queue_id: queue.body.id } },
        { id: "reinstate", kind: "decision", config: restore },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "look"), edge("look", "completed", "reinstate"), edge("look", "timeout", "done"), edge("reinstate", "recorded", "done")],
    });
    const reviewed = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "route", kind: "condition", config: { cases: [{ port: "notifier", when: "input.appeal.appellantRole == 'notifier'" }], case_ports: ["notifier"], default_port: "affected" } },
        { id: "review-notifier", kind: "human_task", config: { queue_id: queue.body.id } },
        { id: "decide", kind: "decision", config: restore },
        { id: "hand-on", kind: "start_linked_workflow", config: { workflow_version_id: reviewedChild.id } },
        { id: "done", kind: "end" },
      ],
      edges: [
        edge("start", "success", "route"),
        edge("route", "notifier", "review-notifier"),
        edge("review-notifier", "completed", "decide"),
        edge("review-notifier", "timeout", "done"),
        edge("decide", "recorded", "done"),
        edge("route", "affected", "hand-on"),
        edge("hand-on", "started", "done"),
      ],
    });
    const accepted = await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: reviewed.id, authorityMode: "autonomous" } });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(201);

    // Another installation cannot bind to these versions at all.
    const other = await newInstallation("other");
    expect((await api("/api/v1/triggers", { key: other.apiKey, body: { event: "appeal.created", workflowVersionId: reviewed.id, authorityMode: "autonomous" } })).status).toBe(404);
  });

  it("an appeal resolved by automation (proposed by an API key where allowed, confirmed by a person) counts as automation; the reversal is recorded and counted; the appellant is told the outcome", async () => {
    const { apiKey } = await newInstallation();
    await messageEndpoint(apiKey, "/ok/redress-outcome");
    await api("/api/v1/redress-settings", { key: apiKey, method: "PUT", body: { settlementBodies: [{ name: "ODS Board", url: "https://ods.example.eu" }] } });
    const r = await report(apiKey, "post-appeal", { locale: "de" });
    const decision = await api("/api/v1/decisions", { key: apiKey, body: removal(r.body.id) });
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: decision.body.id, appellant: { id: "owner-of-post-appeal", contact: "owner@example.net" }, reason: "Satire." } });
    expect(appeal.status).toBe(201);
    const before = new Date(Date.now() - 60_000).toISOString();

    const other = await newInstallation("other");
    expect((await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: other.apiKey, body: { outcome: "overturned" } })).status).toBe(404);

    await api("/api/v1/redress-settings", { key: apiKey, method: "PUT", body: { automatedComplaints: true } });
    const proposed = await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: apiKey, body: { outcome: "overturned", reason: "Satire is allowed.", reviewer: "bot-named-as-person" } });
    expect(proposed.body).toMatchObject({ state: "open", proposal: { outcome: "overturned" } });
    const resolved = await api(`/api/v1/appeals/${appeal.body.id}/confirm`, { key: await personKey(apiKey), body: {} });
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ state: "overturned", resolvedByAutomation: true });
    const audit = await api(`/api/v1/audit-events?action=appeal.overturned&targetId=${appeal.body.id}`, { key: apiKey });
    expect(audit.body.items[0].details).toMatchObject({ resolvedByAutomation: true });

    const reversals = await api("/api/v1/decision-reversals", { key: apiKey });
    expect(reversals.body.items).toEqual([expect.objectContaining({ decisionId: decision.body.id, appealId: appeal.body.id, statementUuid: null, resolvedByAutomation: true })]);
    expect((await api(`/api/v1/audit-events?action=decision.reversed&targetId=${decision.body.id}`, { key: apiKey })).body.items).toHaveLength(1);
    const to = new Date(Date.now() + 60_000).toISOString();
    const figures = await api(`/api/v1/complaints/figures?from=${before}&to=${to}`, { key: apiKey });
    expect(figures.status).toBe(200);
    expect(figures.body.complaints).toEqual({ decided: 1, decidedByAutomation: 1, byOutcome: { overturned: { decided: 1, byAutomation: 1 } } });
    expect(figures.body.reversals).toEqual({ reversed: 1, reversedByAutomation: 1, withoutStatementUuid: 1 });
    expect((await api("/api/v1/complaints/figures?from=2026-02-01&to=2026-01-01", { key: apiKey })).body.error.code).toBe("complaints.period_invalid");

    const outcome = await messagesOf("/ok/redress-outcome", "complaint_outcome");
    expect(outcome.verified).toBe(true);
    expect(outcome.data).toMatchObject({ appealId: appeal.body.id, outcome: "overturned", language: "de", recipient: { kind: "appellant", role: "affected", contact: "owner@example.net" } });
    expect(outcome.data.body).toContain("unsere Entscheidung aufgehoben");
    expect(outcome.data.body).toContain("Satire is allowed.");
    expect(outcome.data.body).toContain("ODS Board (https://ods.example.eu)");
    expect((await api(`/api/v1/audit-events?action=appeal.outcome_queued&targetId=${appeal.body.id}`, { key: apiKey })).body.items).toHaveLength(1);

    // The other installation sees none of it.
    expect((await api("/api/v1/decision-reversals", { key: other.apiKey })).body.items).toEqual([]);
    expect((await api(`/api/v1/complaints/figures?from=${before}&to=${to}`, { key: other.apiKey })).body.reversals.reversed).toBe(0);
  });

  it("an appeal decided by a review task is a person's decision: not automated, the outcome sent to the notifier from the report, and an upheld decision is no reversal", async () => {
    const { apiKey } = await newInstallation();
    await messageEndpoint(apiKey, "/ok/redress-task");
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "appeals", slaSeconds: 86_400 } });
    const schema = { type: "object", required: ["outcome"], properties: { outcome: { enum: ["upheld", "overturned"] } } };
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "second-look", kind: "human_task", config: { queue_id: queue.body.id, response_schema: schema } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "second-look"), edge("second-look", "completed", "done"), edge("second-look", "timeout", "done")],
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const r = await report(apiKey, "post-task");
    const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "no_action" } });
    // A decision not to act: no statement to the affected user (nothing restricted them).
    expect((await api(`/api/v1/decisions/${decision.body.id}/affected-user-statement`, { key: apiKey })).status).toBe(404);
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: decision.body.id, appellantRole: "notifier", reason: "Please look again." } });
    expect(appeal.status).toBe(201);
    const task = await until(async () => (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items?.[0], "the appeal's task");
    const seniorMod = await personKey(apiKey, "senior-mod");
    await api(`/api/v1/tasks/${task.id}/claim`, { key: seniorMod, body: {} });
    const done = await api(`/api/v1/tasks/${task.id}/complete`, { key: seniorMod, body: { response: { outcome: "upheld" } } });
    expect(done.status).toBe(200);
    const read = await api(`/api/v1/appeals/${appeal.body.id}`, { key: apiKey });
    expect(read.body).toMatchObject({ state: "upheld", resolvedByAutomation: false, decidedBy: "senior-mod" });
    const outcome = await messagesOf("/ok/redress-task", "complaint_outcome");
    // No contact in the appeal: the notifier is the report's reporter.
    expect(outcome.data).toMatchObject({ outcome: "upheld", language: "en", recipient: { kind: "appellant", role: "notifier", id: "rep-1", contact: "reporter@example.org" } });
    expect(outcome.data.body).toContain("kept our decision");
    expect(outcome.data.body).not.toContain("restriction");
    expect((await api("/api/v1/decision-reversals", { key: apiKey })).body.items).toEqual([]);
  });
});
