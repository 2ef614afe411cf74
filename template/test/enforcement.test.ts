// Enforcement end to end against a separate receiver Worker that verifies every signature with the
// standardwebhooks library: authority modes, retries, dead-letter, approvals, decisions, audit chain.
import { Validator, type Schema } from "@cfworker/json-schema";
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import sorSchema from "../src/lib/dsa-statement-of-reasons.schema.json";
import { api, edge, newInstallation, publish, receiverLog, removePostGraph, startRun, until, waitForRun } from "./helpers";

async function endpoint(apiKey: string, path: string, extra: Record<string, unknown> = {}) {
  const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, ...extra } });
  expect(created.status).toBe(201);
  expect(created.body.secret).toMatch(/^whsec_/u);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: new URL(`https://x${path}`).pathname, secret: created.body.secret }) });
  const listed = await api("/api/v1/webhook-endpoints", { key: apiKey });
  expect(JSON.stringify(listed.body)).not.toContain(created.body.secret);
  return created.body as { id: string; secret: string };
}

async function actionSetup(path: string, options: { requiresApproval?: boolean } = {}) {
  const { apiKey } = await newInstallation();
  const hook = await endpoint(apiKey, path);
  const type = await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.id, reversible: true, requiresApproval: options.requiresApproval ?? false } });
  expect(type.status).toBe(201);
  const version = await publish(apiKey, removePostGraph);
  return { apiKey, version, hook };
}

async function proposalOf(apiKey: string, runId: string) {
  return until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: any) => p.runId === runId), "a proposal");
}

describe("the action node in each authority mode", () => {
  it("off refuses, shadow sends nothing, assisted waits for approval, autonomous delivers", async () => {
    const { apiKey, version } = await actionSetup("/ok/modes");
    const off = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "off", input: { postId: "p1" } })).id);
    expect(off.output.terminalCode).toBe("failed");
    expect(off.steps.find((s: any) => s.nodeId === "remove").errorCode).toBe("action.authority_insufficient");

    const shadow = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "shadow", input: { postId: "p2" } })).id);
    expect(shadow.output.terminalCode).toBe("applied");
    expect(shadow.steps.find((s: any) => s.nodeId === "remove").output).toMatchObject({ simulated: true, effectSuppressed: true });

    const autonomous = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "autonomous", input: { postId: "p3" } })).id);
    expect(autonomous.output.terminalCode).toBe("applied");

    const assisted = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p4" } });
    const proposal = await proposalOf(apiKey, assisted.id);
    expect(proposal).toMatchObject({ state: "approval_required", actionType: "remove_post", params: { postId: "p4" } });
    expect((await api(`/api/v1/runs/${assisted.id}`, { key: apiKey })).body.state).toBe("waiting");
    const before = await receiverLog("/ok/modes");
    expect(before.map((entry) => entry.data.params.postId)).toEqual(["p3"]);
    const approved = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "lead-mod", reason: "clear scam" } });
    expect(approved.status).toBe(200);
    const done = await waitForRun(apiKey, assisted.id);
    expect(done.output.terminalCode).toBe("applied");
    expect(done.steps.find((s: any) => s.nodeId === "remove").output).toMatchObject({ port: "applied", approvedBy: "lead-mod" });
    // The approval and delivery the run waited on are named by a digest of the proposal's id: the row stores neither.
    expect(await env.DB.prepare("SELECT approval_signal AS approval, delivery_signal AS delivery FROM action_proposals WHERE id = ?1").bind(proposal.id).first()).toEqual({ approval: "", delivery: "" });
    const log = await receiverLog("/ok/modes");
    expect(log.map((entry) => entry.data.params.postId)).toEqual(["p3", "p4"]);
    expect(log.every((entry) => entry.verified && entry.type === "action.execute")).toBe(true);
  });

  it("an action type that always needs approval waits even in autonomous mode; a rejection takes the rejected port", async () => {
    const { apiKey, version } = await actionSetup("/ok/reject", { requiresApproval: true });
    const run = await startRun(apiKey, version.id, { authorityMode: "autonomous", input: { postId: "p5" } });
    const proposal = await proposalOf(apiKey, run.id);
    expect((await api(`/api/v1/action-proposals/${proposal.id}/reject`, { key: apiKey, body: {} })).status).toBe(400);
    const rejected = await api(`/api/v1/action-proposals/${proposal.id}/reject`, { key: apiKey, body: { reason: "satire", approver: "mod-b" } });
    expect(rejected.body.state).toBe("rejected");
    const done = await waitForRun(apiKey, run.id);
    expect(done.output.terminalCode).toBe("rejected");
    expect(await receiverLog("/ok/reject")).toEqual([]);
  });

  it("a duplicate approval delivers once", async () => {
    const { apiKey, version } = await actionSetup("/ok/dupe");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p6" } });
    const proposal = await proposalOf(apiKey, run.id);
    const answers = await Promise.all([1, 2, 3].map(() => api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: apiKey, body: { approver: "mod" } })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409]);
    await waitForRun(apiKey, run.id);
    const deliveries = await api("/api/v1/webhook-deliveries", { key: apiKey });
    expect(deliveries.body.items).toHaveLength(1);
    expect((await receiverLog("/ok/dupe")).filter((entry) => entry.status === 200)).toHaveLength(1);
  });
});

describe("webhook delivery", () => {
  it("a receiver that fails 3 times then accepts gets it once, with 4 attempts recorded", async () => {
    const { apiKey, version } = await actionSetup("/flaky/three?failures=3");
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId: "p7" } })).id);
    expect(done.output.terminalCode).toBe("applied");
    const [delivery] = (await api("/api/v1/webhook-deliveries", { key: apiKey })).body.items;
    const detail = await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey });
    expect(detail.body).toMatchObject({ state: "delivered", attempts: 4 });
    expect(detail.body.history.map((a: any) => a.statusCode)).toEqual([500, 500, 500, 200]);
    const log = await receiverLog("/flaky/three");
    expect(log.filter((entry) => entry.status === 200)).toHaveLength(1);
    expect(new Set(log.map((entry) => entry.webhookId)).size).toBe(1);
  });

  it("a receiver that is always down dead-letters the delivery and the run takes its error path", async () => {
    const { apiKey, version } = await actionSetup("/down/always");
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId: "p8" } })).id);
    expect(done.output.terminalCode).toBe("failed");
    expect(done.steps.find((s: any) => s.nodeId === "remove").errorCode).toBe("action.delivery_failed");
    const [delivery] = (await api("/api/v1/webhook-deliveries", { key: apiKey })).body.items;
    const detail = await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey });
    expect(detail.body).toMatchObject({ state: "dead", attempts: 5, lastStatus: 503 });
    expect(detail.body.history).toHaveLength(5);
    const proposals = await env.DB.prepare("SELECT state FROM action_proposals WHERE run_id = ?").bind(done.id).all<{ state: string }>();
    expect(proposals.results.map((p) => p.state)).toEqual(["failed"]);
    const resent = await api(`/api/v1/webhook-deliveries/${delivery.id}/resend`, { key: apiKey, method: "POST" });
    expect(resent.status).toBe(201);
    expect(resent.body.id).not.toBe(delivery.id);
  });
});

describe("messages, decisions, handoffs", () => {
  it("send_message delivers message.send to the reporter with the contact opened only for delivery", async () => {
    const { apiKey } = await newInstallation();
    await endpoint(apiKey, "/ok/messages", { eventTypes: ["message.send"] });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "thank", kind: "send_message", config: { template: "Thanks for your report about {{subject}}. We took action.", recipient: "reporter" }, inputMapping: { subject: "report.subject.id" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "thank"), edge("thank", "sent", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-77" }, category: "scams_and_fraud", reporter: { id: "u1", contact: "rita@example.org" } } });
    const run = await waitForRun(apiKey, report.body.runs[0].runId);
    expect(run.state).toBe("succeeded");
    const log = await until(async () => {
      // The run's message (the notice's receipt, DSA Art. 16(4), goes the same way without a run).
      const l = (await receiverLog("/ok/messages")).filter((m) => m.data?.runId);
      return l.length ? l : null;
    }, "a message");
    expect(log[0]).toMatchObject({ verified: true, type: "message.send", data: { recipient: { kind: "reporter", contact: "rita@example.org" }, body: "Thanks for your report about post-77. We took action." } });
    const rows = JSON.stringify((await env.DB.prepare("SELECT * FROM webhook_deliveries").all()).results) + JSON.stringify((await env.DB.prepare("SELECT * FROM messages").all()).results);
    expect(rows).not.toContain("rita@example.org");
  });

  it("a decision yields a statement of reasons that the DSA schema accepts", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        {
          id: "decide",
          kind: "decision",
          inputMapping: { subject: "report.subject.id" },
          config: {
            outcome: "removed_scam",
            ground: "incompatible_content",
            statement: "The post {{subject}} advertised a fraudulent investment scheme, contrary to our terms on scams.",
            restrictions: { visibility: ["content_removed"], account: "suspended" },
            content_type: ["text", "image"],
            territorial_scope: ["DE", "FR"],
          },
        },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-88" }, category: "scams_and_fraud", categorySpecification: ["KEYWORD_PHISHING"], reporter: { contact: "x@y.z" } } });
    const run = await waitForRun(apiKey, report.body.runs[0].runId);
    const decisionId = run.steps.find((s: any) => s.nodeId === "decide").output.decisionId;
    const decision = await api(`/api/v1/decisions/${decisionId}`, { key: apiKey });
    expect(decision.body).toMatchObject({ outcome: "removed_scam", automatedDecision: "fully", automatedDetection: false, reportId: report.body.id });
    const sor = await api(`/api/v1/decisions/${decisionId}/statement-of-reasons`, { key: apiKey });
    expect(sor.status, JSON.stringify(sor.body)).toBe(200);
    const result = new Validator(sorSchema as unknown as Schema, "2020-12", false).validate(sor.body);
    expect(result.errors).toEqual([]);
    expect(sor.body).toMatchObject({
      decision_ground: "DECISION_GROUND_INCOMPATIBLE_CONTENT",
      category: "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
      decision_visibility: ["DECISION_VISIBILITY_CONTENT_REMOVED"],
      decision_account: "DECISION_ACCOUNT_SUSPENDED",
      automated_detection: "No",
      automated_decision: "AUTOMATED_DECISION_FULLY",
      source_type: "SOURCE_ARTICLE_16",
      puid: decisionId,
    });
    expect(JSON.stringify(sor.body)).not.toContain("x@y.z");
  });

  it("handoff to an external recipient sends report.handoff with an evidence bundle and its digest; to a queue makes a task", async () => {
    const { apiKey } = await newInstallation();
    const hook = await endpoint(apiKey, "/ok/handoff");
    await api("/api/v1/queues", { key: apiKey, body: { name: "legal", slaSeconds: 7200 } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "to-legal", kind: "handoff", config: { queue_id: "legal" } },
        { id: "to-hotline", kind: "handoff", config: { endpoint_id: hook.id, include_content: true } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "to-legal"), edge("to-legal", "handed_off", "to-hotline"), edge("to-hotline", "handed_off", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: "acct-5" }, category: "protection_of_minors", description: "grooming messages" } });
    const run = await waitForRun(apiKey, report.body.runs[0].runId);
    expect(run.state, JSON.stringify(run.steps.map((s: any) => [s.nodeId, s.errorCode]))).toBe("succeeded");
    const external = run.steps.find((s: any) => s.nodeId === "to-hotline").output;
    const log = await until(async () => {
      const l = await receiverLog("/ok/handoff");
      return l.length ? l : null;
    }, "a handoff");
    expect(log[0]).toMatchObject({ verified: true, type: "report.handoff" });
    expect(log[0]!.data.evidenceDigest).toBe(external.evidenceDigest);
    expect(log[0]!.data.evidence.content.description).toBe("grooming messages");
    // The reporter is left out of the bundle unless the handoff says include_reporter.
    expect(log[0]!.data.evidence.reporter).toBeUndefined();
    const task = await env.DB.prepare("SELECT task_type, state FROM human_tasks WHERE run_id = ?").bind(run.id).first<{ task_type: string; state: string }>();
    expect(task).toEqual({ task_type: "handoff", state: "open" });
  });
});

describe("tamper-evident audit", () => {
  it("the chain verifies, and an audit row edited in D1 is named by verify", async () => {
    const { apiKey, id } = await newInstallation();
    await api("/api/v1/workflows", { key: apiKey, body: { name: "one" } });
    await api("/api/v1/workflows", { key: apiKey, body: { name: "two" } });
    await api("/api/v1/workflows", { key: apiKey, body: { name: "three" } });
    const ok = await api("/api/v1/audit/verify", { key: apiKey });
    expect(ok.body).toMatchObject({ ok: true });
    expect(ok.body.events).toBeGreaterThanOrEqual(4);
    const events = await api("/api/v1/audit-events?action=workflow", { key: apiKey });
    expect(events.body.items.map((e: any) => e.details.name)).toEqual(["one", "two", "three"]);
    const victim = events.body.items[1];
    await env.DB.prepare("UPDATE audit_events SET details_json = ? WHERE id = ?")
      .bind(JSON.stringify({ name: "forged" }), victim.id)
      .run();
    // The event was verified already, so the full check (the schedule's, or ?mode=full) names it;
    // its keyed MAC fails before its hash is even recomputed (test/audit-anchor.test.ts has the rest).
    const broken = await api("/api/v1/audit/verify?mode=full", { key: apiKey });
    expect(broken.body).toMatchObject({ ok: false, firstBroken: { id: victim.id, seq: victim.seq, reason: "entry_mac_mismatch" } });
    const other = await newInstallation("other");
    expect((await api("/api/v1/audit/verify", { key: other.apiKey })).body.ok).toBe(true);
    expect(id).toBeTruthy();
  });
});
