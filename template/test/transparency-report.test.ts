// The DSA transparency report: its figures equal counts computed from the rows the test made
// (through the API, counted again here by SQL or by construction), period boundaries (from
// included, a date `to` included whole, a time `to` excluded), the CSV, figures it cannot know,
// and another installation's rows never counted.
import { describe, expect, it } from "vitest";
import { api, personKey, db, edge, newInstallation, waitForRun, publish } from "./helpers";

const report = async (key: string, subject: string, category: string, source: string, reporter?: { id: string }) => {
  const response = await api("/api/v1/reports", { key, body: { subject: { kind: "content", id: subject }, category, source, ...(reporter ? { reporter } : {}) } });
  expect(response.status).toBe(201);
  return response.body.id as string;
};

/** A decision a person records (a reviewer's key of the installation whose admin key is `key`). */
const decide = async (key: string, reportId: string, body: Record<string, unknown>) => {
  const response = await api("/api/v1/decisions", { key: await personKey(key), body: { reportId, statement: "Against the rules.", ...body } });
  expect(response.status).toBe(201);
  return response.body.id as string;
};

const appeal = async (key: string, decisionId: string, outcome?: "upheld" | "overturned") => {
  const filed = await api("/api/v1/appeals", { key, body: { decisionId, reason: "I disagree." } });
  expect(filed.status).toBe(201);
  if (outcome) {
    // Automation proposes the outcome (the installation allows it) and a person confirms it: decided by automation, under supervision.
    expect((await api("/api/v1/redress-settings", { key, method: "PUT", body: { automatedComplaints: true } })).status).toBe(200);
    expect((await api(`/api/v1/appeals/${filed.body.id}/resolve`, { key, body: { outcome } })).status).toBe(200);
    expect((await api(`/api/v1/appeals/${filed.body.id}/confirm`, { key: await personKey(key), body: {} })).status).toBe(200);
  }
  return filed.body.id as string;
};

const count = async (sql: string, ...binds: unknown[]) =>
  (await db()
    .prepare(sql)
    .bind(...binds)
    .first<{ n: number }>())!.n;

const reportOf = async (key: string, period: { from: string; to: string } = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString() }) => {
  const response = await api(`/api/v1/transparency-report?from=${encodeURIComponent(period.from)}&to=${encodeURIComponent(period.to)}`, { key });
  expect(response.status).toBe(200);
  return response.body;
};

describe("transparency report", () => {
  it("counts notices, actions, complaints and suspensions as the rows say, and nothing of another installation", async () => {
    const { id: installationId, apiKey: key } = await newInstallation("treport");
    const other = await newInstallation("treport-other");
    // Another installation's rows in the same period: none of them may be counted.
    const foreign = await report(other.apiKey, "f-1", "violence", "notice");
    await appeal(other.apiKey, await decide(other.apiKey, foreign, { outcome: "suspend", restrictions: { account: "suspended" } }), "overturned");

    const notices = [
      await report(key, "n-1", "scams_and_fraud", "notice"),
      await report(key, "n-2", "scams_and_fraud", "notice"),
      await report(key, "n-3", "violence", "notice"),
      await report(key, "t-1", "violence", "trusted_flagger"),
      await report(key, "t-2", "protection_of_minors", "trusted_flagger"),
    ];
    const other1 = await report(key, "o-1", "animal_welfare", "other_notification");
    const own = [await report(key, "v-1", "scams_and_fraud", "voluntary"), await report(key, "v-2", "violence", "voluntary")];

    const removeAndDemote = await decide(key, notices[0]!, { outcome: "remove", restrictions: { visibility: ["content_removed", "content_demoted"] } });
    const suspend = await decide(key, notices[1]!, { outcome: "suspend", restrictions: { account: "suspended" }, ground: "illegal_content", legalGround: "Criminal code s. 1" });
    await decide(key, notices[2]!, { outcome: "no_action" });
    const demonetise = await decide(key, notices[3]!, { outcome: "demonetise", restrictions: { monetary: "suspension", visibility: ["content_labelled"] } });
    await decide(key, other1, { outcome: "terminate", restrictions: { account: "terminated" } });
    const ownRemove = await decide(key, own[0]!, { outcome: "remove", restrictions: { visibility: ["content_removed"] } });
    // One own-initiative decision on content automation flagged; the other found by people.
    await decide(key, own[1]!, { outcome: "limit", restrictions: { provision: "partial_suspension" }, automatedDetection: true });

    // One decision made by automation: an autonomous run with no review task decides "fully".
    const version = await publish(key, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "decide", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Automated removal." } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    const run = await api("/api/v1/runs", { key, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: notices[4] } });
    expect(run.status).toBe(201);
    expect((await waitForRun(key, run.body.id)).state).toBe("succeeded");
    const automated = (await api(`/api/v1/decisions?reportId=${notices[4]}`, { key })).body.items[0];
    expect(automated.automatedDecision).toBe("fully");

    await appeal(key, removeAndDemote, "upheld");
    await appeal(key, suspend, "overturned");
    await appeal(key, automated.id, "overturned");
    await appeal(key, ownRemove);
    await appeal(key, demonetise);

    // A notifier of manifestly unfounded notices, warned and then suspended (Art. 23(2)).
    await report(key, "u-1", "violence", "notice", { id: "notifier-unfounded" });
    expect((await api("/api/v1/notifiers/warnings", { key, body: { reporter: { id: "notifier-unfounded" }, reason: "Unfounded notices." } })).status).toBe(201);
    const until = new Date(Date.now() + 30 * 86_400_000).toISOString();
    expect((await api("/api/v1/notifiers/suspensions", { key, body: { reporter: { id: "notifier-unfounded" }, reason: "Still unfounded.", until } })).status).toBe(201);

    const body = await reportOf(key);
    const s = body.sections;
    expect(body.installationId).toBe(installationId);

    // Notices (1.3): counted again by SQL from the rows.
    const noticesBySql = await count(`SELECT COUNT(*) AS n FROM reports WHERE installation_id = ?1 AND source IN ('notice', 'trusted_flagger')`, installationId);
    expect(noticesBySql).toBe(6);
    expect(s.notices.received.total).toBe(noticesBySql);
    expect(s.notices.received.bySubmitter).toEqual({ notice: 4, trusted_flagger: 2 });
    expect(s.notices.received.byCategory).toEqual({ protection_of_minors: 1, scams_and_fraud: 2, violence: 3 });
    expect(s.notices.received.byCategoryAndSubmitter.violence).toEqual({ notice: 2, trusted_flagger: 1 });
    expect(s.notices.otherNotificationsReceived).toBe(1);
    expect(s.ownInitiative.flagsReceived).toBe(2);

    // Actions on notices: 4 restricting decisions (remove+demote, suspend, demonetise+label, automated removal), 1 decision not to act.
    const onNotices = s.notices.actions;
    expect(onNotices.actions).toBe(await count(`SELECT COUNT(*) AS n FROM decisions WHERE installation_id = ?1 AND source_type IN ('notice', 'trusted_flagger') AND restrictions_json <> '{}'`, installationId));
    expect(onNotices.actions).toBe(4);
    expect(onNotices.decisionsNotToAct).toBe(1);
    expect(onNotices.byRestrictionType).toEqual({ visibility: 3, monetary: 1, provision: 0, account: 1 });
    expect(onNotices.byRestriction.visibility).toMatchObject({ content_removed: 2, content_demoted: 1, content_labelled: 1, content_disabled: 0 });
    expect(onNotices.byRestriction.account).toEqual({ suspended: 1, terminated: 0 });
    expect(onNotices.byRestriction.monetary).toMatchObject({ suspension: 1 });
    expect(onNotices.byGround).toEqual({ illegal_content: 1, incompatible_content: 3 });
    expect(onNotices.bySource).toEqual({ notice: 2, trusted_flagger: 2 });
    expect(onNotices.byCategory).toEqual({ protection_of_minors: 1, scams_and_fraud: 2, violence: 1 });
    expect(onNotices.byAutomatedDecision).toEqual({ fully: 1, partially: 0, not_automated: 3 });
    expect(s.notices.processedByAutomatedMeans).toBe(1);
    expect(s.notices.actionsOnOtherNotifications.byRestriction.account).toEqual({ suspended: 0, terminated: 1 });
    // All five notices were decided (n-3's decision not to act is a decision too): each counts once, at its first decision.
    expect(s.notices.timeToAct.actedOn).toBe(5);
    expect(s.notices.timeToAct.bySubmitter.trusted_flagger.actedOn).toBe(2);
    expect(s.notices.timeToAct.medianSeconds).toBeGreaterThanOrEqual(0);

    // Own initiative (1.4): the voluntary reports' decisions, detected by automated means only where the decision says so.
    expect(s.ownInitiative.actions.actions).toBe(2);
    expect(s.ownInitiative.actions.byRestrictionType).toEqual({ visibility: 1, monetary: 0, provision: 1, account: 0 });
    expect(s.ownInitiative.actions.byAutomatedDetection).toEqual({ automated: 1, not_automated: 1 });

    // Complaints (1.5): 5 received, 3 decided (1 upheld, 2 overturned).
    expect(s.complaints.received.total).toBe(await count(`SELECT COUNT(*) AS n FROM appeals WHERE installation_id = ?1`, installationId));
    expect(s.complaints.received.byAppellant).toEqual({ notifier: 0, affected: 5, unknown: 0 });
    expect(s.complaints.decided).toMatchObject({ total: 3, upheld: 1, overturned: 2 });
    expect(s.complaints.decisionsReversed).toBe(2);
    expect(s.complaints.medianSecondsToDecide).toBeGreaterThanOrEqual(0);
    // Resolved here by an API key, so by automation (Art. 20(6)); the two overturned ones are recorded reversals.
    expect(s.complaints.decidedByAutomation).toBe(await count(`SELECT COUNT(*) AS n FROM appeals WHERE installation_id = ?1 AND resolved_by_automation = 1`, installationId));
    expect(s.complaints.decidedByAutomation).toBe(3);
    expect(s.complaints.reversalsRecorded).toEqual({ reversed: await count(`SELECT COUNT(*) AS n FROM decision_reversals WHERE installation_id = ?1`, installationId), byAutomation: 2, withStatementUuid: 0 });
    expect(s.complaints.reversalsRecorded.reversed).toBe(2);

    // Suspensions: account restrictions of every source (the notice's suspension, the other notification's termination).
    expect(s.suspensions.accountRestrictions).toEqual({ suspended: 1, terminated: 1 });
    expect(s.suspensions.manifestlyUnfoundedNotices).toEqual({ suspensions: 1, warnings: 1 });

    // Automated means (1.6): the complaint on the automated decision was overturned: 1 of 1.
    expect(s.automatedMeans.complaintsOnAutomatedDecisions).toMatchObject({ decided: 1, overturned: 1, overturnRate: { value: 1, successes: 1, trials: 1 } });
    expect(s.automatedMeans.complaintsOnHumanDecisions).toMatchObject({ decided: 2, overturned: 1 });
    expect(s.automatedMeans.actionsByAutomatedDecision).toEqual({ fully: 1, partially: 0, not_automated: 6 });
    expect(s.automatedMeans.shadowEvaluations).toEqual([expect.objectContaining({ workflowVersionId: version.id, automatedDecisions: 1, runsCompared: 0 })]);
    expect(s.automatedMeans.reviewerQa).toMatchObject({ reviewed: 0, agreement: { value: null, trials: 0 } });

    // What the platform cannot know is said so, never a number.
    for (const figure of [s.orders.ordersToAct, s.orders.ordersToProvideInformation, s.outOfCourtDisputes.disputesSubmitted, s.humanResources.moderators, s.activeRecipients.averageMonthlyActiveRecipients]) {
      expect(figure).toMatchObject({ known: false, reason: expect.any(String) });
    }

    // The other installation sees only its own notice and its own suspension.
    const theirs = (await reportOf(other.apiKey)).sections;
    expect(theirs.notices.received.total).toBe(1);
    expect(theirs.suspensions.accountRestrictions).toEqual({ suspended: 1, terminated: 0 });
    expect(theirs.suspensions.manifestlyUnfoundedNotices).toEqual({ suspensions: 0, warnings: 0 });
    expect(theirs.complaints.reversalsRecorded.reversed).toBe(1);
    expect(theirs.complaints.decided).toMatchObject({ total: 1, overturned: 1 });
  });

  it("period boundaries: from included, a date `to` included whole, a time `to` excluded; times to act from the rows", async () => {
    const { id: installationId, apiKey: key } = await newInstallation("treport-period");
    const at = async (id: string, table: "reports" | "decisions", time: string) => {
      await db()
        .prepare(`UPDATE ${table} SET created_at = ?3${table === "decisions" ? ", decided_at = ?3" : ""} WHERE installation_id = ?1 AND id = ?2`)
        .bind(installationId, id, time)
        .run();
    };
    const onFrom = await report(key, "p-1", "violence", "notice");
    const lastInstant = await report(key, "p-2", "violence", "trusted_flagger");
    const onTo = await report(key, "p-3", "violence", "notice");
    const before = await report(key, "p-4", "violence", "notice");
    const undecided = await report(key, "p-5", "violence", "notice");
    await at(onFrom, "reports", "2025-03-01T00:00:00.000Z");
    await at(lastInstant, "reports", "2025-03-31T23:59:59.999Z");
    await at(onTo, "reports", "2025-04-01T00:00:00.000Z");
    await at(before, "reports", "2025-02-28T23:59:59.999Z");
    await at(undecided, "reports", "2025-03-10T00:00:00.000Z");
    // p-1 acted on after 60 s (a second decision later does not move its time), p-2 after 180 s but after the period's end.
    const first = await decide(key, onFrom, { outcome: "remove", restrictions: { visibility: ["content_removed"] } });
    const second = await decide(key, onFrom, { outcome: "suspend", restrictions: { account: "suspended" } });
    const late = await decide(key, lastInstant, { outcome: "remove", restrictions: { visibility: ["content_removed"] } });
    const outside = await decide(key, before, { outcome: "remove", restrictions: { visibility: ["content_removed"] } });
    await at(first, "decisions", "2025-03-01T00:01:00.000Z");
    await at(second, "decisions", "2025-03-05T00:00:00.000Z");
    await at(late, "decisions", "2025-04-01T00:02:59.999Z");
    await at(outside, "decisions", "2025-03-02T00:00:00.000Z");
    // A complaint received in March and decided two hours later.
    const complaint = await appeal(key, first, "upheld");
    await db().prepare(`UPDATE appeals SET created_at = '2025-03-02T00:00:00.000Z', decided_at = '2025-03-02T02:00:00.000Z' WHERE id = ?1`).bind(complaint).run();

    const march = await reportOf(key, { from: "2025-03-01", to: "2025-03-31" });
    expect(march.period).toMatchObject({ from: "2025-03-01T00:00:00.000Z", to: "2025-04-01T00:00:00.000Z" });
    expect(march.sections.notices.received.total).toBe(3);
    expect(march.sections.notices.received.bySubmitter).toEqual({ notice: 2, trusted_flagger: 1 });
    // Decisions recorded in March: p-1's two and p-4's (its report is February's); p-2's is April's.
    expect(march.sections.notices.actions.actions).toBe(3);
    expect(march.sections.notices.timeToAct).toEqual({ actedOn: 1, medianSeconds: 60, bySubmitter: { notice: { actedOn: 1, medianSeconds: 60 }, trusted_flagger: { actedOn: 0, medianSeconds: null } } });
    expect(march.sections.complaints).toMatchObject({ received: { total: 1 }, decided: { total: 1, upheld: 1 }, medianSecondsToDecide: 7200 });

    const exclusive = await reportOf(key, { from: "2025-03-01T00:00:00Z", to: "2025-03-31T23:59:59.999Z" });
    expect(exclusive.sections.notices.received.total).toBe(2);
    const withApril = await reportOf(key, { from: "2025-03-01", to: "2025-04-01" });
    expect(withApril.sections.notices.received.total).toBe(4);
    // Now p-2 (180 s) is acted on in the period too: the median of 60 and 180 s is 120 s.
    expect(withApril.sections.notices.timeToAct).toMatchObject({ actedOn: 2, medianSeconds: 120 });

    expect((await api("/api/v1/transparency-report?from=2025-04-01&to=2025-03-01", { key })).body.error.code).toBe("transparency.invalid_range");
    expect((await api("/api/v1/transparency-report?from=March", { key })).body.error.code).toBe("transparency.invalid_time");
    expect((await api("/api/v1/transparency-report?from=2023-01-01&to=2025-01-01", { key })).body.error.code).toBe("transparency.range_too_large");
  });

  it("reviewer QA agreement counts blind QA reviews of the period; golden items decide nothing and count nowhere", async () => {
    const { id: installationId, apiKey: key } = await newInstallation("treport-qa");
    const work = await api("/api/v1/queues", { key, body: { name: "work", slaSeconds: 3600 } });
    const qaQueue = await api("/api/v1/queues", { key, body: { name: "work-qa", slaSeconds: 3600 } });
    const schema = { type: "object", required: ["outcome"], properties: { outcome: { enum: ["remove", "keep"] } } };
    const version = await publish(key, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "work", response_schema: schema, timeout_seconds: 3600 } },
        { id: "decide", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Removed after review." } },
        { id: "done", kind: "end" },
        { id: "expired", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "decide"), edge("review", "timeout", "expired"), edge("decide", "recorded", "done")],
    });
    expect((await api("/api/v1/triggers", { key, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    expect((await api(`/api/v1/queues/${work.body.id}/qa-settings`, { method: "PUT", key, body: { qaQueueId: qaQueue.body.id, rate: 1 } })).status).toBe(200);
    const reports = [await report(key, "qa-1", "scams_and_fraud", "notice"), await report(key, "qa-2", "scams_and_fraud", "notice")];
    // The QA reviewer has a key of their own: QA of one's own answer is refused by the principal, not the name.
    const qaKey = (await api("/api/v1/api-keys", { key, body: { name: "qa reviewer", scopes: ["review"] } })).body.apiKey as string;
    const answer = async (taskId: string, reviewer: string, outcome: string, as = key) => {
      expect((await api(`/api/v1/tasks/${taskId}/claim`, { key: as, body: { reviewer } })).status).toBe(200);
      expect((await api(`/api/v1/tasks/${taskId}/complete`, { key: as, body: { reviewer, response: { outcome } } })).status).toBe(200);
    };
    const tasksOf = async (queueId: string, n: number) => {
      for (let i = 0; i < 400; i++) {
        const items = (await api(`/api/v1/queues/${queueId}/tasks?limit=50`, { key })).body.items as any[];
        if (items.length >= n) return items;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`fewer than ${n} tasks in ${queueId}`);
    };
    const tasks = await tasksOf(work.body.id, 2);
    const ana = await personKey(key, "mod-ana");
    for (const task of tasks) await answer(task.id, "mod-ana", "remove", ana);
    for (const task of tasks) await waitForRun(key, task.runId);
    // QA: one agrees, one does not.
    const qaTasks = await tasksOf(qaQueue.body.id, 2);
    await answer(qaTasks[0].id, "mod-bo", "remove", qaKey);
    await answer(qaTasks[1].id, "mod-bo", "keep", qaKey);
    // A golden copy of a completed task, answered wrong: a reviewer's test, not a decision nor a QA pair.
    const golden = await api("/api/v1/qa/golden-items", { key, body: { sourceTaskId: tasks[0].id, answer: { outcome: "remove" } } });
    expect(golden.status).toBe(201);
    await answer(golden.body.taskId, "mod-bo", "keep");

    const s = (await reportOf(key)).sections;
    const pairs = (await db().prepare(`SELECT COUNT(*) AS n, SUM(agreed) AS agreed FROM qa_reviews WHERE installation_id = ?1 AND agreed IS NOT NULL`).bind(installationId).first<{ n: number; agreed: number }>())!;
    expect(pairs).toEqual({ n: 2, agreed: 1 });
    expect(s.automatedMeans.reviewerQa).toMatchObject({ reviewed: 2, agreement: { successes: 1, trials: 2, value: 0.5 } });
    // Two decisions, each after a person's review; the golden answer added none.
    expect(await count(`SELECT COUNT(*) AS n FROM decisions WHERE installation_id = ?1`, installationId)).toBe(2);
    expect(s.notices.actions).toMatchObject({ actions: 2, byAutomatedDecision: { fully: 0, partially: 0, not_automated: 2 } });
    expect(s.notices.processedByAutomatedMeans).toBe(0);
    expect(s.automatedMeans.shadowEvaluations).toEqual([]);
    expect(s.notices.timeToAct.actedOn).toBe(reports.length);
  });

  it("the CSV has one row per figure, the same as the JSON, and is for admins", async () => {
    const { apiKey: key } = await newInstallation("treport-csv");
    await decide(key, await report(key, "c-1", "scams_and_fraud", "notice"), { outcome: "remove", restrictions: { visibility: ["content_removed"] } });
    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const response = await fetchCsv(key, `/api/v1/transparency-report.csv?from=${today}&to=${today}`);
    expect(response.headers.get("content-type")).toContain("text/csv");
    expect(response.headers.get("content-disposition")).toContain(`transparency-report-${today}-${tomorrow}.csv`);
    const lines = response.text.trimEnd().split("\r\n");
    expect(lines[0]).toBe("template_section,article,section,figure,value,note");
    expect(lines).toContain('1.3,"Art. 15(1)(b), Art. 16",notices,received.total,1,');
    expect(lines).toContain('1.3,"Art. 15(1)(b), Art. 16",notices,actions.byRestriction.visibility.content_removed,1,');
    expect(lines.find((line) => line.includes(",orders,ordersToAct,"))).toMatch(/,,"?not known: /u);
    expect(lines).toContain('1.5,"Art. 15(1)(d), Art. 20",complaints,decidedByAutomation,0,');
    expect(lines.some((line) => line.includes("not recorded yet"))).toBe(false);
    const viaFormat = await fetchCsv(key, `/api/v1/transparency-report?from=${today}&to=${today}&format=csv`);
    expect(viaFormat.text).toBe(response.text);

    const reviewer = await api("/api/v1/api-keys", { key, body: { name: "reviewer", scopes: ["review"] } });
    expect((await api("/api/v1/transparency-report", { key: reviewer.body.apiKey })).status).toBe(403);
    expect((await api("/api/v1/transparency-report?format=xlsx", { key })).status).toBe(400);
  });
});

async function fetchCsv(key: string, path: string) {
  const { exports } = await import("cloudflare:workers");
  const response = await exports.default.fetch(new Request(`http://safest.test${path}`, { headers: { authorization: `Bearer ${key}` } }));
  expect(response.status).toBe(200);
  return { headers: response.headers, text: await response.text() };
}
