// Promotion gates and automatic demotion: a trigger is promoted one mode at a time,
// only when its gate is met (the refusal carries the figures, the promotion audits them with their
// digest); an action type's autonomy holds its actions for approval even in an autonomous run until
// its own gate promotes it; an autonomous trigger whose overturn rate passes its limit drops to
// assisted, audited, and the team hears it as a signed `automation.demoted` webhook.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../src/audit";
import { wilson } from "../src/automation/statistics";
import { overturnFigures, sweepAutomaticDemotions } from "../src/cases/promotion/promotion-sweep";
import { sha256Hex } from "../src/lib/crypto";
import { runSchedule, SWEEPS } from "../src/schedule";
import { api, personKey, edge, newInstallation, publish, receiverLog, removePostGraph, startRun, until, waitForRun } from "./helpers";

async function endpoint(apiKey: string, path: string) {
  const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(created.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: created.body.secret }) });
  return created.body.id as string;
}

async function auditOf(installationId: string, action: string) {
  const { results } = await env.DB.prepare("SELECT target_id AS targetId, details_json AS detailsJson FROM audit_events WHERE installation_id = ?1 AND action = ?2 ORDER BY created_at")
    .bind(installationId, action)
    .all<{ targetId: string; detailsJson: string }>();
  return results.map((row) => ({ targetId: row.targetId, details: JSON.parse(row.detailsJson) as any }));
}

const digestOf = async (evidence: unknown) => `sha256:${await sha256Hex(canonicalJson(evidence))}`;
const requirement = (body: any, name: string, actionType?: string) => body.requirements.find((r: any) => r.requirement === name && (actionType === undefined || r.actionType === actionType));

/** Every report is decided "remove" by the version. */
const removeGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "remove", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "remove"), edge("remove", "recorded", "done")],
};

/** Reports that start the installation's triggers, each decided by a person with `human` (null: no one). */
async function reports(apiKey: string, humans: Array<string | null>, prefix: string) {
  const runIds: string[] = [];
  const reportIds: string[] = [];
  for (const [i, human] of humans.entries()) {
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `${prefix}-${i}` }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    reportIds.push(report.body.id);
    runIds.push(...report.body.runs.map((r: any) => r.runId));
    if (human) {
      const decided = await api("/api/v1/decisions", { key: await personKey(apiKey), body: { reportId: report.body.id, outcome: human, restrictions: { visibility: ["content_removed"] }, statement: "Decided by a moderator." } });
      expect(decided.status).toBe(201);
    }
  }
  await Promise.all(runIds.map((id) => waitForRun(apiKey, id)));
  return { runIds, reportIds };
}

describe("promoting a trigger", () => {
  it("is refused below its gate with the figures, and accepted above it with the evidence and its digest audited", async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const version = await publish(apiKey, removeGraph);
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } });
    expect(trigger.status).toBe(201);
    const id = trigger.body.id as string;

    // No gate set: the defaults, and where the trigger stands against them.
    const defaults = await api(`/api/v1/triggers/${id}/gate`, { key: apiKey });
    expect(defaults.body).toMatchObject({ source: "default", gate: { minComparedRuns: 100, minAgreementLow: 0.9 }, next: { to: "assisted", met: false } });
    const gate = await api(`/api/v1/triggers/${id}/gate`, { key: apiKey, method: "PUT", body: { minComparedRuns: 4, minAgreementLow: 0.4 } });
    expect(gate.status).toBe(200);
    expect(gate.body).toMatchObject({ source: "set", gate: { minComparedRuns: 4, minAgreementLow: 0.4, minDecidedProposals: 100, minPrecisionLow: 0.9 } });

    await reports(apiKey, ["remove", "remove", "remove"], "first");
    // No skipping a mode.
    const skipped = await api(`/api/v1/triggers/${id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(skipped.status).toBe(409);
    expect(skipped.body.error.code).toBe("promotion.not_next_mode");

    const refused = await api(`/api/v1/triggers/${id}/promote`, { key: apiKey, body: { to: "assisted" } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("promotion.gate_not_met");
    const low3 = wilson(3, 3).low!;
    expect(requirement(refused.body.error.details, "compared_runs")).toMatchObject({ required: 4, actual: 3, met: false });
    expect(requirement(refused.body.error.details, "agreement_low")).toMatchObject({ required: 0.4, met: true, agreement: { agreements: 3, compared: 3 } });
    expect(requirement(refused.body.error.details, "agreement_low").actual).toBeCloseTo(low3, 12);
    expect((await api("/api/v1/triggers", { key: apiKey })).body.items[0].authorityMode).toBe("shadow");
    expect(await auditOf(installationId, "trigger.promoted")).toEqual([]);

    // Four more compared runs, one of them a disagreement: 6 of 7, lower bound 0.487 ≥ 0.4.
    await reports(apiKey, ["remove", "remove", "keep", "remove", null], "second");
    const promoted = await api(`/api/v1/triggers/${id}/promote`, { key: apiKey, body: { to: "assisted" } });
    expect(promoted.status).toBe(200);
    expect(promoted.body.trigger).toMatchObject({ id, authorityMode: "assisted" });
    const agreement = requirement(promoted.body.evidence, "agreement_low");
    expect(agreement).toMatchObject({ met: true, agreement: { agreements: 6, compared: 7 }, withoutHumanDecision: 1 });
    expect(agreement.actual).toBeCloseTo(wilson(6, 7).low!, 12);
    expect(requirement(promoted.body.evidence, "compared_runs")).toMatchObject({ required: 4, actual: 7, met: true });
    expect(promoted.body.digest).toBe(await digestOf(promoted.body.evidence));

    const [event] = await auditOf(installationId, "trigger.promoted");
    expect(event).toMatchObject({ targetId: id, details: { from: "shadow", to: "assisted", digest: promoted.body.digest } });
    expect(await digestOf(event!.details.evidence)).toBe(event!.details.digest);
    expect((await api("/api/v1/triggers", { key: apiKey })).body.items[0]).toMatchObject({ authorityMode: "assisted", authorityChangedAt: expect.any(String) });

    // PATCH lowers the mode (audited) but never raises it.
    const raised = await api(`/api/v1/triggers/${id}`, { key: apiKey, method: "PATCH", body: { authorityMode: "autonomous" } });
    expect(raised.status).toBe(409);
    expect(raised.body.error.code).toBe("promotion.requires_gate");
    // A version without action nodes has no proposals to measure: its agreement is the evidence again.
    const autonomous = await api(`/api/v1/triggers/${id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(autonomous.status).toBe(200);
    expect(autonomous.body.evidence.requirements.map((r: any) => [r.requirement, r.basis, r.met])).toEqual([
      ["compared_runs", "no_action_nodes", true],
      ["agreement_low", "no_action_nodes", true],
    ]);
    const lowered = await api(`/api/v1/triggers/${id}`, { key: apiKey, method: "PATCH", body: { authorityMode: "shadow" } });
    expect(lowered.status).toBe(200);
    expect(lowered.body.authorityMode).toBe("shadow");
    expect((await auditOf(installationId, "trigger.demoted")).map((e) => e.details)).toEqual([expect.objectContaining({ from: "autonomous", to: "shadow", automatic: false })]);
  });
});

describe("an action type's autonomy and gate", () => {
  it("holds actions for approval in autonomous runs until promoted; the trigger's assisted → autonomous gate counts the version's decided proposals", async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const hook = await endpoint(apiKey, "/ok/promotion-actions");
    const type = await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook, autonomy: "assisted" } });
    expect(type.status).toBe(201);
    expect(type.body.autonomy).toBe("assisted");
    const version = await publish(apiKey, removePostGraph);
    // An autonomous run of an assisted type proposes; nothing is delivered. (Started before the
    // version has a trigger: a version a trigger starts runs by hand at most in that trigger's mode.)
    const proposals: string[] = [];
    const runs: string[] = [];
    for (const postId of ["p1", "p2", "p3"]) {
      const run = await startRun(apiKey, version.id, { authorityMode: "autonomous", input: { postId } });
      runs.push(run.id);
      const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: any) => p.runId === run.id), "a proposal");
      expect(proposal).toMatchObject({ authorityMode: "autonomous", state: "approval_required", params: { postId } });
      proposals.push(proposal.id);
    }
    expect(await receiverLog("/ok/promotion-actions")).toEqual([]);
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "false", workflowVersionId: version.id, authorityMode: "assisted" } });

    await api(`/api/v1/action-types/${type.body.id}/gate`, { key: apiKey, method: "PUT", body: { minDecidedProposals: 3, minPrecisionLow: 0.2 } });
    await api(`/api/v1/triggers/${trigger.body.id}/gate`, { key: apiKey, method: "PUT", body: { minDecidedProposals: 3, minPrecisionLow: 0.2 } });
    const early = await api(`/api/v1/action-types/${type.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe("promotion.gate_not_met");
    expect(requirement(early.body.error.details, "decided_proposals", "remove_post")).toMatchObject({ required: 3, actual: 0, met: false });
    expect(requirement(early.body.error.details, "precision_low", "remove_post")).toMatchObject({ actual: null, met: false });
    const triggerEarly = await api(`/api/v1/triggers/${trigger.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(triggerEarly.status).toBe(409);
    expect(requirement(triggerEarly.body.error.details, "decided_proposals", "remove_post")).toMatchObject({ actual: 0, met: false });

    // Two approved, one rejected: precision 2/3, lower bound 0.208 ≥ 0.2.
    expect((await api(`/api/v1/action-proposals/${proposals[0]}/approve`, { key: apiKey, body: { approver: "lead" } })).status).toBe(200);
    expect((await api(`/api/v1/action-proposals/${proposals[1]}/approve`, { key: apiKey, body: { approver: "lead" } })).status).toBe(200);
    expect((await api(`/api/v1/action-proposals/${proposals[2]}/reject`, { key: apiKey, body: { reason: "satire", approver: "lead" } })).status).toBe(200);
    await Promise.all(runs.map((id) => waitForRun(apiKey, id)));

    const status = await api(`/api/v1/action-types/${type.body.id}/gate`, { key: apiKey });
    expect(status.body).toMatchObject({ autonomy: "assisted", source: "set", next: { to: "autonomous", met: true } });
    const promoted = await api(`/api/v1/action-types/${type.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(promoted.status).toBe(200);
    const precision = requirement(promoted.body.evidence, "precision_low", "remove_post");
    expect(precision).toMatchObject({ met: true, precision: { approved: 2, rejected: 1, decided: 3 } });
    expect(precision.actual).toBeCloseTo(wilson(2, 3).low!, 12);
    expect(promoted.body.digest).toBe(await digestOf(promoted.body.evidence));
    const [typeEvent] = await auditOf(installationId, "action_type.promoted");
    expect(typeEvent).toMatchObject({ targetId: type.body.id, details: { from: "assisted", to: "autonomous", digest: promoted.body.digest } });

    // The trigger's gate counts the same decided proposals of its version (promoted first: a run by
    // hand goes no higher than the version's trigger).
    const triggerPromoted = await api(`/api/v1/triggers/${trigger.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(triggerPromoted.status).toBe(200);
    expect(requirement(triggerPromoted.body.evidence, "precision_low", "remove_post")).toMatchObject({ met: true, precision: { approved: 2, rejected: 1 } });

    // Promoted: an autonomous run delivers without a person.
    const after = await waitForRun(apiKey, (await startRun(apiKey, version.id, { authorityMode: "autonomous", input: { postId: "p4" } })).id);
    expect(after.output.terminalCode).toBe("applied");
    const delivered = await env.DB.prepare("SELECT state, decided_by AS decidedBy FROM action_proposals WHERE run_id = ?1").bind(after.id).first<{ state: string; decidedBy: string | null }>();
    expect(delivered).toEqual({ state: "applied", decidedBy: null });
    const log = await until(async () => {
      const entries = await receiverLog("/ok/promotion-actions");
      return entries.some((entry) => entry.data.params.postId === "p4") && entries;
    }, "the delivery");
    expect(log.filter((entry) => entry.status === 200).map((entry) => entry.data.params.postId)).toEqual(expect.arrayContaining(["p1", "p2", "p4"]));
    expect(log.some((entry) => entry.data.params.postId === "p3")).toBe(false);

    // PATCH lowers autonomy at once; raising it again needs the gate.
    const lowered = await api(`/api/v1/action-types/${type.body.id}`, { key: apiKey, method: "PATCH", body: { autonomy: "assisted" } });
    expect(lowered.body).toMatchObject({ autonomy: "assisted" });
    const raised = await api(`/api/v1/action-types/${type.body.id}`, { key: apiKey, method: "PATCH", body: { autonomy: "autonomous" } });
    expect(raised.status).toBe(409);
    expect(raised.body.error.code).toBe("promotion.requires_gate");
  });
});

describe("approvals the gates count", () => {
  it("an approval refused to the key that answered the run's review task counts toward neither the action type's nor the trigger's gate; another key's approval counts once", async () => {
    const { apiKey } = await newInstallation();
    const hook = await endpoint(apiKey, "/ok/promotion-own-review");
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `work-${crypto.randomUUID()}`, slaSeconds: 3600 } });
    expect(queue.status).toBe(201);
    const type = await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook, autonomy: "assisted" } });
    expect(type.status).toBe(201);
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: { type: "object" }, timeout_seconds: 3600 } },
        { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post", approval_timeout_seconds: 3600 }, inputMapping: { postId: "input.postId" } },
        { id: "applied", kind: "end", config: { terminal_code: "applied" } },
        { id: "other", kind: "end", config: { terminal_code: "other" } },
      ],
      edges: [
        edge("start", "success", "review"),
        edge("review", "completed", "remove"),
        edge("review", "timeout", "other"),
        edge("remove", "applied", "applied"),
        edge("remove", "rejected", "other"),
        edge("remove", "expired", "other"),
        edge("remove", "failed", "other"),
      ],
    });
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p-own" } });
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "false", workflowVersionId: version.id, authorityMode: "assisted" } });
    expect(trigger.status).toBe(201);
    // One decided proposal, approved, meets each gate (precision 1/1: lower bound 0.207 ≥ 0.2).
    const gate = { minDecidedProposals: 1, minPrecisionLow: 0.2 };
    expect((await api(`/api/v1/action-types/${type.body.id}/gate`, { key: apiKey, method: "PUT", body: gate })).status).toBe(200);
    expect((await api(`/api/v1/triggers/${trigger.body.id}/gate`, { key: apiKey, method: "PUT", body: gate })).status).toBe(200);

    const keyOf = async (name: string) => (await api("/api/v1/api-keys", { key: apiKey, body: { name, scopes: ["review"] } })).body.apiKey as string;
    const [answerer, other] = [await keyOf("answerer"), await keyOf("other")];
    const task = await until(async () => (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: answerer })).body.items.find((t: any) => t.runId === run.id), "the review task");
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: answerer, body: { reviewer: "alice" } })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: answerer, body: { reviewer: "alice", response: { remove: true } } })).status).toBe(200);
    const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: any) => p.runId === run.id), "a proposal");

    // The answerer's approval, under any approver name, is refused and leaves the proposal undecided.
    for (const approver of ["alice", "bob"]) {
      const self = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: answerer, body: { approver } });
      expect(self.status, JSON.stringify(self.body)).toBe(403);
      expect(self.body.error.code).toBe("action_proposal.own_review");
    }
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: apiKey })).body.state).toBe("approval_required");
    const typeEarly = await api(`/api/v1/action-types/${type.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(typeEarly.status, JSON.stringify(typeEarly.body)).toBe(409);
    expect(requirement(typeEarly.body.error.details, "decided_proposals", "remove_post")).toMatchObject({ required: 1, actual: 0, met: false });
    const triggerEarly = await api(`/api/v1/triggers/${trigger.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(triggerEarly.status, JSON.stringify(triggerEarly.body)).toBe(409);
    expect(requirement(triggerEarly.body.error.details, "decided_proposals", "remove_post")).toMatchObject({ required: 1, actual: 0, met: false });

    // Another key's approval is the decision, and both gates count it.
    expect((await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: other, body: { approver: "carol" } })).status).toBe(200);
    expect((await waitForRun(apiKey, run.id)).output.terminalCode).toBe("applied");
    const typePromoted = await api(`/api/v1/action-types/${type.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(typePromoted.status, JSON.stringify(typePromoted.body)).toBe(200);
    expect(requirement(typePromoted.body.evidence, "precision_low", "remove_post")).toMatchObject({ met: true, precision: { approved: 1, rejected: 0, decided: 1 } });
    const triggerPromoted = await api(`/api/v1/triggers/${trigger.body.id}/promote`, { key: apiKey, body: { to: "autonomous" } });
    expect(triggerPromoted.status, JSON.stringify(triggerPromoted.body)).toBe(200);
    expect(requirement(triggerPromoted.body.evidence, "decided_proposals", "remove_post")).toMatchObject({ actual: 1, met: true });
  });
});

describe("automatic demotion", () => {
  it("drops an autonomous trigger to assisted once overturns pass its limit: audited, and automation.demoted delivered", async () => {
    const path = "/ok/promotion-demoted";
    const { id: installationId, apiKey } = await newInstallation();
    const hook = await endpoint(apiKey, path);
    expect((await api("/api/v1/alerts/settings", { key: apiKey, method: "PUT", body: { endpointId: hook } })).status).toBe(200);
    const version = await publish(apiKey, removeGraph);
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const id = trigger.body.id as string;
    await api(`/api/v1/triggers/${id}/gate`, { key: apiKey, method: "PUT", body: { maxOverturnRate: 0.3, minOverturnSample: 4 } });

    const { reportIds } = await reports(apiKey, [null, null, null, null], "demote");
    const decisions: string[] = [];
    for (const reportId of reportIds) {
      const listed = await api(`/api/v1/decisions?reportId=${reportId}`, { key: apiKey });
      expect(listed.body.items).toHaveLength(1);
      decisions.push(listed.body.items[0].id);
    }
    const overturn = async (decisionId: string) => {
      const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId, reason: "Not a scam." } });
      expect(appeal.status).toBe(201);
      expect((await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: await personKey(apiKey), body: { outcome: "overturned", reason: "Legitimate seller." } })).status).toBe(200);
    };
    const since = new Date(Date.now() - 86_400_000).toISOString();

    // 1 of 4 overturned: 0.25, not past 0.3.
    await overturn(decisions[0]!);
    expect(await overturnFigures(env, installationId, id, since)).toMatchObject({ decisions: 4, overturned: 1, sources: { appeals: 1, qaDisagreements: 0 }, rate: 0.25 });
    await sweepAutomaticDemotions(env, new Date());
    expect((await api("/api/v1/triggers", { key: apiKey })).body.items[0].authorityMode).toBe("autonomous");

    expect((await api(`/api/v1/triggers/${id}/gate`, { key: apiKey })).body.demotion).toMatchObject({ maxOverturnRate: 0.3, figures: { decisions: 4, overturned: 1 }, limitPassed: false });

    // 2 of 4: 0.5 > 0.3 with the minimum sample of 4.
    await overturn(decisions[1]!);
    expect((await api(`/api/v1/triggers/${id}/gate`, { key: apiKey })).body.demotion).toMatchObject({ figures: { overturned: 2, rate: 0.5 }, limitPassed: true });
    // Through the schedule's own entry for the sweep.
    const scheduled = await runSchedule(
      env,
      { cron: "* * * * *", scheduledTime: Date.now() },
      SWEEPS.filter((sweep) => sweep.name === "cases.automatic_demotions"),
    );
    expect(scheduled.sweeps).toEqual([expect.objectContaining({ name: "cases.automatic_demotions", ok: true, summary: expect.objectContaining({ demoted: 1, notified: 1 }) })]);
    expect((await api("/api/v1/triggers", { key: apiKey })).body.items[0].authorityMode).toBe("assisted");
    const [event, ...more] = await auditOf(installationId, "trigger.demoted");
    expect(more).toEqual([]);
    expect(event).toMatchObject({ targetId: id, details: { from: "autonomous", to: "assisted", automatic: true, evidence: { limit: { maxOverturnRate: 0.3, minOverturnSample: 4 }, figures: { decisions: 4, overturned: 2, rate: 0.5 } } } });
    expect(await digestOf(event!.details.evidence)).toBe(event!.details.digest);

    const demotions = await api(`/api/v1/triggers/${id}/demotions`, { key: apiKey });
    expect(demotions.body.items).toHaveLength(1);
    expect(demotions.body.items[0]).toMatchObject({ id: event!.details.demotionId, digest: event!.details.digest, endpointId: hook });

    const [delivered] = await until(async () => {
      const entries = (await receiverLog(path)).filter((entry) => entry.status === 200);
      return entries.length > 0 && entries;
    }, "the automation.demoted webhook");
    expect(delivered).toMatchObject({ type: "automation.demoted", verified: true, data: { triggerId: id, from: "autonomous", to: "assisted", digest: event!.details.digest, figures: { overturned: 2, decisions: 4 } } });

    // Idempotent: another sweep demotes nothing more.
    await sweepAutomaticDemotions(env, new Date());
    expect((await api(`/api/v1/triggers/${id}/demotions`, { key: apiKey })).body.items).toHaveLength(1);
    const sent = await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND event_type = 'automation.demoted'").bind(installationId).first<{ n: number }>();
    expect(sent?.n).toBe(1);
  });
});

describe("tenancy", () => {
  it("another installation's trigger and action type are a 404 on the promotion, gate and demotion routes", async () => {
    const owner = await newInstallation();
    const other = await newInstallation();
    const version = await publish(owner.apiKey, removeGraph);
    const trigger = await api("/api/v1/triggers", { key: owner.apiKey, body: { event: "report.created", when: "false", workflowVersionId: version.id, authorityMode: "off" } });
    const hook = await endpoint(owner.apiKey, "/ok/promotion-tenancy");
    const type = await api("/api/v1/action-types", { key: owner.apiKey, body: { key: "ban", name: "Ban", endpointId: hook, autonomy: "assisted" } });
    const attempts = [
      api(`/api/v1/triggers/${trigger.body.id}/promote`, { key: other.apiKey, body: { to: "shadow" } }),
      api(`/api/v1/triggers/${trigger.body.id}`, { key: other.apiKey, method: "PATCH", body: { authorityMode: "off" } }),
      api(`/api/v1/triggers/${trigger.body.id}/gate`, { key: other.apiKey }),
      api(`/api/v1/triggers/${trigger.body.id}/gate`, { key: other.apiKey, method: "PUT", body: { minComparedRuns: 1 } }),
      api(`/api/v1/triggers/${trigger.body.id}/demotions`, { key: other.apiKey }),
    ];
    for (const response of await Promise.all(attempts)) {
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe("trigger.not_found");
    }
    const typeAttempts = [
      api(`/api/v1/action-types/${type.body.id}/promote`, { key: other.apiKey, body: { to: "autonomous" } }),
      api(`/api/v1/action-types/${type.body.id}`, { key: other.apiKey, method: "PATCH", body: { autonomy: "assisted" } }),
      api(`/api/v1/action-types/${type.body.id}/gate`, { key: other.apiKey }),
      api(`/api/v1/action-types/${type.body.id}/gate`, { key: other.apiKey, method: "PUT", body: { minDecidedProposals: 1 } }),
    ];
    for (const response of await Promise.all(typeAttempts)) {
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe("action_type.not_found");
    }
    // Nothing changed for the owner; off → shadow has nothing to measure and is allowed.
    const promoted = await api(`/api/v1/triggers/${trigger.body.id}/promote`, { key: owner.apiKey, body: { to: "shadow" } });
    expect(promoted.status).toBe(200);
    expect(promoted.body.evidence.requirements).toEqual([]);
    expect((await api(`/api/v1/triggers/${trigger.body.id}/gate`, { key: owner.apiKey })).body.source).toBe("default");
  });
});
