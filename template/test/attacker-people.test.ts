// Who decides: an API key that is not a reviewer's key is automation. Its task answers make the
// decision automated (statements of reasons, the Transparency Database and the report then say so),
// and complaints are decided by people: automation only proposes an outcome, where the installation
// allows it, and a person confirms it before the appellant is told (DSA Art. 17(3)(c), 20(6)).
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { keyWith } from "./attacker-fixture";
import { api, edge, newInstallation, publish, until } from "./helpers";

const outcomeMessages = async (appealId: string) => (await env.DB.prepare("SELECT COUNT(*) AS n FROM redress_messages WHERE kind = 'complaint_outcome' AND source_id = ?1").bind(appealId).first<{ n: number }>())!.n;

async function reviewedDecisionSetup(name: string) {
  const { apiKey } = await newInstallation(name);
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "work", slaSeconds: 3600 } });
  const version = await publish(apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: { type: "object" }, timeout_seconds: 3600 } },
      { id: "decide", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Removed after review." } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "decide"), edge("review", "timeout", "done"), edge("decide", "recorded", "done")],
  });
  expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
  return { apiKey, queueId: queue.body.id as string };
}

/** Files a report, answers its review task with `key`, and returns the decision the run recorded. */
async function decideThrough(s: { apiKey: string; queueId: string }, key: string, reviewer?: string) {
  const report = await api("/api/v1/reports", { key: s.apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
  const task = await until(async () => (await api(`/api/v1/queues/${s.queueId}/tasks`, { key: s.apiKey })).body.items.find((t: any) => t.reportId === report.body.id), "the review task");
  expect((await api(`/api/v1/tasks/${task.id}/claim`, { key, body: reviewer ? { reviewer } : {} })).status).toBe(200);
  expect((await api(`/api/v1/tasks/${task.id}/complete`, { key, body: { ...(reviewer ? { reviewer } : {}), response: { remove: true } } })).status).toBe(200);
  return until(async () => (await api(`/api/v1/decisions?reportId=${report.body.id}`, { key: s.apiKey })).body.items?.[0], "the decision");
}

describe("a task answered by an automation key is automation", () => {
  it("the decision after an automation key's answer is fully automated, whatever reviewer name it sent; after a reviewer's key's answer, not automated", async () => {
    const s = await reviewedDecisionSetup("attack-automation-answer");
    const tool = await keyWith(s.apiKey, ["review", "read"]);
    const automated = await decideThrough(s, tool, "a-person-allegedly");
    expect(automated.automatedDecision).toBe("fully");
    const person = await keyWith(s.apiKey, ["review", "read"], { reviewer: "Rita Reviewer" });
    const reviewed = await decideThrough(s, person);
    expect(reviewed.automatedDecision).toBe("not_automated");
  });

  it("a decision recorded directly by an automation key is automated; by a reviewer's key, not", async () => {
    const { apiKey } = await newInstallation("attack-direct-decision");
    const person = await keyWith(apiKey, ["review", "read", "reports:write"], { reviewer: "Rita Reviewer" });
    const decide = async (key: string) => {
      const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
      const decision = await api("/api/v1/decisions", { key, body: { reportId: report.body.id, outcome: "no_action" } });
      expect(decision.status, JSON.stringify(decision.body)).toBe(201);
      return decision.body.automatedDecision;
    };
    expect(await decide(apiKey)).toBe("fully");
    expect(await decide(person)).toBe("not_automated");
  });
});

describe("complaints are decided by people", () => {
  it("an automation key cannot resolve an appeal; where allowed it proposes, the appellant is told nothing until a person confirms", async () => {
    const { apiKey } = await newInstallation("attack-appeal-automation");
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-a" }, category: "scams_and_fraud" } });
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { reportId: report.body.id, appellantRole: "notifier", reason: "Look again." } });
    expect(appeal.status).toBe(201);

    const refused = await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: apiKey, body: { outcome: "overturned", reviewer: "bot-named-as-person" } });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body.error.code).toBe("appeal.person_required");
    expect((await api(`/api/v1/appeals/${appeal.body.id}`, { key: apiKey })).body.state).toBe("open");

    expect((await api("/api/v1/redress-settings", { key: apiKey, method: "PUT", body: { automatedComplaints: true } })).body.automatedComplaints).toBe(true);
    const proposed = await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: apiKey, body: { outcome: "overturned", reason: "Satire." } });
    expect(proposed.status, JSON.stringify(proposed.body)).toBe(200);
    expect(proposed.body).toMatchObject({ state: "open", outcome: null, proposal: { outcome: "overturned" } });
    expect(await outcomeMessages(appeal.body.id)).toBe(0);
    // Automation cannot confirm its own proposal.
    expect((await api(`/api/v1/appeals/${appeal.body.id}/confirm`, { key: apiKey, body: {} })).body.error.code).toBe("appeal.person_required");

    const person = await keyWith(apiKey, ["review", "read"], { reviewer: "Rita Reviewer" });
    const confirmed = await api(`/api/v1/appeals/${appeal.body.id}/confirm`, { key: person, body: {} });
    expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
    expect(confirmed.body).toMatchObject({ state: "overturned", resolvedByAutomation: true, confirmedBy: "Rita Reviewer" });
    expect(await outcomeMessages(appeal.body.id)).toBe(1);
  });

  it("a reviewer's key resolves as its recorded person, not automation, whatever reviewer name it sends", async () => {
    const { apiKey } = await newInstallation("attack-appeal-person");
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-b" }, category: "scams_and_fraud" } });
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { reportId: report.body.id, appellantRole: "notifier", reason: "Look again." } });
    const person = await keyWith(apiKey, ["review", "read"], { reviewer: "Rita Reviewer" });
    const resolved = await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: person, body: { outcome: "upheld", reviewer: "someone-else" } });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    expect(resolved.body).toMatchObject({ state: "upheld", resolvedByAutomation: false, decidedBy: "Rita Reviewer" });
    expect(await outcomeMessages(appeal.body.id)).toBe(1);
  });

  it("an appeal's review task answered by an automation key is refused unless allowed, and then only proposes", async () => {
    const { apiKey } = await newInstallation("attack-appeal-task");
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
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-c" }, category: "scams_and_fraud" } });
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { reportId: report.body.id, appellantRole: "notifier", reason: "Look again." } });
    const task = await until(async () => (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items?.[0], "the appeal's task");
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: apiKey, body: { reviewer: "senior-mod" } })).status).toBe(200);
    const refused = await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "senior-mod", response: { outcome: "overturned" } } });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body.error.code).toBe("appeal.person_required");

    await api("/api/v1/redress-settings", { key: apiKey, method: "PUT", body: { automatedComplaints: true } });
    const done = await api(`/api/v1/tasks/${task.id}/complete`, { key: apiKey, body: { reviewer: "senior-mod", response: { outcome: "overturned" } } });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const read = await api(`/api/v1/appeals/${appeal.body.id}`, { key: apiKey });
    expect(read.body).toMatchObject({ state: "open", proposal: { outcome: "overturned", proposedBy: "senior-mod" } });
    expect(await outcomeMessages(appeal.body.id)).toBe(0);
  });
});
