// Decisions both ways: a decision not to act (no restriction; outcome no_action or any other) is
// recorded, audited, listed, counted by shadow reports, appealable by the notifier, and has no
// DSA statement of reasons.
import { describe, expect, it } from "vitest";
import { api, personKey, edge, newInstallation, publish, waitForRun } from "./helpers";

const report = (key: string, id: string, category = "scams_and_fraud") => api("/api/v1/reports", { key, body: { subject: { kind: "content", id }, category } });

function decisionGraph(config: Record<string, unknown>) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "decide", kind: "decision", config },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
  };
}

describe("decisions not to act", () => {
  it("a no_action decision node publishes; no_action with a restriction is a 422 at its path", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, decisionGraph({ outcome: "no_action" }));
    expect(version.version).toBe(1);
    await publish(apiKey, decisionGraph({ outcome: "dismissed", restrictions: {} }));
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "contradiction" } });
    const bad = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: decisionGraph({ outcome: "no_action", restrictions: { visibility: ["content_removed"] }, statement: "x" }) } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details.map((p: any) => p.path)).toEqual(["$.nodes[1].config.restrictions"]);
    expect(bad.body.error.details[0].message).toContain("decision not to act");
    const noStatement = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: decisionGraph({ outcome: "remove", restrictions: { visibility: ["content_removed"] } }) } });
    expect(noStatement.status).toBe(422);
    expect(noStatement.body.error.details.map((p: any) => p.path)).toEqual(["$.nodes[1].config.statement"]);
  });

  it("POST /decisions records a decision not to act: audited, listed, and without a statement of reasons", async () => {
    const { apiKey } = await newInstallation();
    const r = await report(apiKey, "na-1");
    // A person records it (a reviewer's key); an automation key's would be automated.
    const recorded = await api("/api/v1/decisions", { key: await personKey(apiKey), body: { reportId: r.body.id, outcome: "no_action" } });
    expect(recorded.status).toBe(201);
    expect(recorded.body).toMatchObject({ outcome: "no_action", restricts: false, restrictions: {}, statement: null, automatedDecision: "not_automated", reportId: r.body.id });
    // Any outcome that restricts nothing is a decision not to act; a note may be kept.
    const dismissed = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "dismissed", restrictions: {}, statement: "Satire, within the rules." } });
    expect(dismissed.body).toMatchObject({ restricts: false, statement: "Satire, within the rules." });

    const sor = await api(`/api/v1/decisions/${recorded.body.id}/statement-of-reasons`, { key: apiKey });
    expect(sor.status).toBe(409);
    expect(sor.body.error.code).toBe("statement_of_reasons.not_applicable");
    expect(sor.body.error.message).toContain("Art. 17");

    const restricting = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } });
    expect(restricting.body.restricts).toBe(true);
    expect((await api(`/api/v1/decisions/${restricting.body.id}/statement-of-reasons`, { key: apiKey })).status).toBe(200);

    const listed = await api(`/api/v1/decisions?reportId=${r.body.id}`, { key: apiKey });
    expect(listed.body.items.map((d: any) => [d.id, d.restricts])).toEqual(
      expect.arrayContaining([
        [recorded.body.id, false],
        [dismissed.body.id, false],
        [restricting.body.id, true],
      ]),
    );
    expect(listed.body.items).toHaveLength(3);
    const audit = await api(`/api/v1/audit-events?action=decision.recorded&targetId=${recorded.body.id}`, { key: apiKey });
    expect(audit.body.items).toHaveLength(1);
    expect(audit.body.items[0].details).toMatchObject({ outcome: "no_action", restricts: false });
    const timeline = await api(`/api/v1/reports/${r.body.id}/timeline`, { key: apiKey });
    expect(JSON.stringify(timeline.body)).toContain(recorded.body.id);

    const other = await newInstallation("other");
    expect((await api(`/api/v1/decisions/${recorded.body.id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/decisions/${recorded.body.id}/statement-of-reasons`, { key: other.apiKey })).status).toBe(404);
    expect((await api("/api/v1/decisions", { key: other.apiKey })).body.items).toEqual([]);
  });

  it("POST /decisions: no_action with a restriction, or a restriction without a statement, is a 422 at the body's path", async () => {
    const { apiKey } = await newInstallation();
    const r = await report(apiKey, "na-2");
    const contradiction = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "no_action", restrictions: { account: "suspended" }, statement: "x" } });
    expect(contradiction.status, JSON.stringify(contradiction.body)).toBe(422);
    expect(contradiction.body.error.code).toBe("decision.config_invalid");
    expect(contradiction.body.error.details.map((p: any) => p.path)).toEqual(["$.restrictions"]);
    const noStatement = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "remove", restrictions: { visibility: ["content_removed"] } } });
    expect(noStatement.status).toBe(422);
    expect(noStatement.body.error.details.map((p: any) => p.path)).toEqual(["$.statement"]);
    const legal = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "x", ground: "illegal_content" } });
    expect(legal.body.error.details.map((p: any) => p.path)).toEqual(["$.legalGround"]);
    expect((await api("/api/v1/decisions", { key: apiKey })).body.items).toEqual([]);
  });

  it("shadow reports count no_action like any other outcome, proposed and human", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "route", kind: "condition", config: { cases: [{ port: "scam", when: "report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
        { id: "remove", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } },
        { id: "leave", kind: "decision", config: { outcome: "no_action" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "route"), edge("route", "scam", "remove"), edge("route", "other", "leave"), edge("remove", "recorded", "done"), edge("leave", "recorded", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } });
    // (category, human outcome): proposals are remove for scams, no_action otherwise.
    const plan: Array<[string, string]> = [
      ["scams_and_fraud", "remove"],
      ["scams_and_fraud", "no_action"],
      ["violence", "no_action"],
      ["violence", "no_action"],
      ["animal_welfare", "remove"],
    ];
    const runIds: string[] = [];
    const moderator = await personKey(apiKey);
    for (const [i, [category, human]] of plan.entries()) {
      const created = await report(apiKey, `sh-${i}`, category);
      runIds.push(created.body.runs[0].runId);
      const body = human === "no_action" ? { reportId: created.body.id, outcome: "no_action" } : { reportId: created.body.id, outcome: human, restrictions: { visibility: ["content_removed"] }, statement: "Decided by a moderator." };
      expect((await api("/api/v1/decisions", { key: moderator, body })).status).toBe(201);
    }
    await Promise.all(runIds.map((id) => waitForRun(apiKey, id)));
    // The shadow run's simulated no_action decision records nothing.
    const listed = await api("/api/v1/decisions", { key: apiKey });
    expect(listed.body.items.every((d: any) => d.automatedDecision === "not_automated")).toBe(true);
    const shadow = await api(`/api/v1/workflow-versions/${version.id}/shadow-report`, { key: apiKey });
    // Hand count: remove/remove, remove/no_action, no_action/no_action ×2, no_action/remove → 3 agree of 5.
    expect(shadow.body).toMatchObject({
      shadowRuns: 5,
      runsCompared: 5,
      agreements: 3,
      agreementRate: 3 / 5,
      labels: ["no_action", "remove"],
      confusionMatrix: { remove: { remove: 1, no_action: 1 }, no_action: { no_action: 2, remove: 1 } },
    });
  });
});

describe("appeals of decisions", () => {
  async function setup() {
    const { apiKey } = await newInstallation();
    const intake = await api("/api/v1/api-keys", { key: apiKey, body: { name: "intake", scopes: ["reports:write"] } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: version.id, authorityMode: "autonomous", when: "input.appeal.appellantRole == 'notifier'" } });
    return { apiKey, intakeKey: intake.body.apiKey as string };
  }

  it("the notifier appeals a decision not to act by its id; the appeal workflow starts", async () => {
    const { apiKey, intakeKey } = await setup();
    const r = await report(intakeKey, "ap-1");
    const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "no_action" } });
    const appeal = await api("/api/v1/appeals", { key: intakeKey, body: { decisionId: decision.body.id, appellantRole: "notifier", appellant: { contact: "notifier@example.org" }, reason: "This is a scam; please look again." } });
    expect(appeal.status).toBe(201);
    expect(appeal.body).toMatchObject({ decisionId: decision.body.id, reportId: r.body.id, appellantRole: "notifier", state: "open" });
    expect(appeal.body.runs).toHaveLength(1);
    expect((await waitForRun(apiKey, appeal.body.runs[0].runId)).state).toBe("succeeded");
    const read = await api(`/api/v1/appeals/${appeal.body.id}`, { key: apiKey });
    expect(read.body).toMatchObject({ appellantRole: "notifier", decisionId: decision.body.id });
    const audit = await api(`/api/v1/audit-events?action=appeal.filed&targetId=${appeal.body.id}`, { key: apiKey });
    expect(audit.body.items[0].details).toMatchObject({ decisionId: decision.body.id, appellantRole: "notifier" });
    // The role defaults from the decision: a decision not to act is the notifier's to contest.
    const defaulted = await api("/api/v1/appeals", { key: intakeKey, body: { decisionId: decision.body.id, reportId: r.body.id, reason: "Again." } });
    expect(defaulted.body.appellantRole).toBe("notifier");
  });

  it("the affected user appeals a restriction; a decision not to act has nothing for them to contest", async () => {
    const { apiKey, intakeKey } = await setup();
    const r = await report(intakeKey, "ap-2");
    const removal = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } });
    const affected = await api("/api/v1/appeals", { key: intakeKey, body: { decisionId: removal.body.id, reason: "Not a scam." } });
    expect(affected.status).toBe(201);
    expect(affected.body).toMatchObject({ appellantRole: "affected", runs: [] });
    const noAction = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "no_action" } });
    const refused = await api("/api/v1/appeals", { key: intakeKey, body: { decisionId: noAction.body.id, appellantRole: "affected", reason: "?" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("appeal.role_invalid");
  });

  it("another installation's decision is a 404, and a reportId that is not the decision's is a 422", async () => {
    const { apiKey, intakeKey } = await setup();
    const r = await report(intakeKey, "ap-3");
    const elsewhere = await report(intakeKey, "ap-4");
    const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: r.body.id, outcome: "no_action" } });
    const mismatch = await api("/api/v1/appeals", { key: intakeKey, body: { decisionId: decision.body.id, reportId: elsewhere.body.id, reason: "x" } });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.error.code).toBe("appeal.report_mismatch");
    const other = await setup();
    const foreign = await api("/api/v1/appeals", { key: other.intakeKey, body: { decisionId: decision.body.id, reason: "x" } });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("decision.not_found");
    const unknown = await api("/api/v1/appeals", { key: intakeKey, body: { decisionId: "dec_unknown", reason: "x" } });
    expect(unknown.status).toBe(404);
  });
});
