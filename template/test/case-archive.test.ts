// Storage in tiers, whole cases: a closed case past its installation's hot window leaves D1 with
// everything that hangs off it, for one R2 object (src/cases/archive/case-archive.ts). Every read
// by id answers for it as it did while it was hot, a new report about its subject brings it back,
// and erasure by destroying its period's keys reaches the archived copy.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { dataKeyPeriod } from "../src/cases/reports/report-crypto";
import { commitCaseArchive, queueCaseArchive, sweepCaseArchive, writeCaseArchive } from "../src/cases/archive/case-archive";
import { buildCaseArchive, caseArchiveKey } from "../src/cases/archive/case-scope";
import { sweepRetention } from "../src/cases/retention/retention";
import { sweepDeliveryArchive } from "../src/enforcement/delivery-archive";
import { installationDeleteStatements } from "../src/installations/backup";
import { sweepMetricRollups, sweepTransparencyRollups } from "../src/metrics";
import { sweepRunArchive } from "../src/workflows/run-archive";
import { ADMIN_TOKEN, api, edge, newInstallation, publish, receiverLog, until, waitForRun } from "./helpers";

const DAY = 86_400_000;
const SECRET = "the reporter wrote these words about a scam";

const reviewSchema = { type: "object", required: ["verdict"], additionalProperties: false, properties: { verdict: { enum: ["remove", "keep"] } } };
const reviewGraph = (queue: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queue, response_schema: reviewSchema, timeout_seconds: 3600 }, inputMapping: { category: "report.category" } },
    { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
});

async function setup(hotDays: number) {
  const inst = await newInstallation("case-archive");
  expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays } })).status).toBe(200);
  const queue = await api("/api/v1/queues", { key: inst.apiKey, body: { name: "scams", slaSeconds: 3600 } });
  const version = await publish(inst.apiKey, reviewGraph("scams"));
  const trigger = await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  return { ...inst, queueId: queue.body.id as string };
}

/** A report reviewed to the end: intake, its run, its task claimed and answered, the run succeeded. */
async function reviewedReport(inst: { apiKey: string; queueId: string }, subjectId: string) {
  const intake = await api("/api/v1/reports", {
    key: inst.apiKey,
    body: { subject: { kind: "content", id: subjectId, snapshot: { text: SECRET } }, category: "scams_and_fraud", reporter: { id: "person-1", contact: "person@example.org" }, description: SECRET },
  });
  expect(intake.status).toBe(201);
  const runId = intake.body.runs[0].runId as string;
  let task: { id: string } | undefined;
  for (let i = 0; i < 200 && !task; i++) {
    task = (await api(`/api/v1/queues/${inst.queueId}/tasks`, { key: inst.apiKey })).body.items?.find((t: { reportId: string }) => t.reportId === intake.body.id);
    if (!task) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect((await api(`/api/v1/tasks/${task!.id}/claim`, { key: inst.apiKey, body: { reviewer: "mod-1" } })).status).toBe(200);
  expect((await api(`/api/v1/tasks/${task!.id}/complete`, { key: inst.apiKey, body: { reviewer: "mod-1", response: { verdict: "remove" } } })).status).toBe(200);
  expect((await waitForRun(inst.apiKey, runId)).state).toBe("succeeded");
  return { reportId: intake.body.id as string, caseId: intake.body.caseId as string, runId, taskId: task!.id };
}

/** Two days on: runs archived, every hour and day rolled up, so the case is past a 0-day window and counted. */
async function twoDaysOn(installationId: string): Promise<Date> {
  const later = new Date(Date.now() + 2 * DAY);
  expect(await sweepRunArchive(env, later, { installationId })).toMatchObject({ failed: 0 });
  for (let i = 0; i < 5 && ((await sweepMetricRollups(env, later)).more ?? 0) > 0; i++);
  for (let i = 0; i < 5 && ((await sweepTransparencyRollups(env, later)).more ?? 0) > 0; i++);
  return later;
}

/** What D1 holds of a lifecycle, by table. */
async function rowsOf(ids: { reportId: string; caseId: string; runId: string; taskId: string }) {
  const n = async (sql: string, id: string) => (await env.DB.prepare(sql).bind(id).first<{ n: number }>())!.n;
  return {
    cases: await n("SELECT COUNT(*) AS n FROM cases WHERE id = ?1", ids.caseId),
    reports: await n("SELECT COUNT(*) AS n FROM reports WHERE id = ?1", ids.reportId),
    runs: await n("SELECT COUNT(*) AS n FROM workflow_runs WHERE id = ?1", ids.runId),
    steps: await n("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ?1", ids.runId),
    tasks: await n("SELECT COUNT(*) AS n FROM human_tasks WHERE id = ?1", ids.taskId),
    exposure: await n("SELECT COUNT(*) AS n FROM review_exposure WHERE task_id = ?1", ids.taskId),
    searchTerms: await n("SELECT COUNT(*) AS n FROM search_terms WHERE record_id = ?1", ids.reportId),
  };
}
const NONE = { cases: 0, reports: 0, runs: 0, steps: 0, tasks: 0, exposure: 0, searchTerms: 0 };

describe("the case archive", () => {
  it("a closed case leaves D1 for one sealed R2 object and reads back exactly as its hot form", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-archived");
    const read = async () => ({
      report: (await api(`/api/v1/reports/${ids.reportId}`, { key: inst.apiKey })).body,
      timeline: (await api(`/api/v1/reports/${ids.reportId}/timeline`, { key: inst.apiKey })).body,
      case: (await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey })).body,
      run: (await api(`/api/v1/runs/${ids.runId}`, { key: inst.apiKey })).body,
      task: (await api(`/api/v1/tasks/${ids.taskId}`, { key: inst.apiKey })).body,
    });
    const hot = await read();
    expect(hot.report.description).toBe(SECRET);
    // The run archived (its steps, outputs and waits in its own object), the rest hot.
    const later = await twoDaysOn(inst.id);
    const hotRows = await rowsOf(ids);
    expect(hotRows).toMatchObject({ cases: 1, reports: 1, runs: 1, tasks: 1, exposure: 1 });
    // The report's keyed search terms go and come back with it.
    expect(hotRows.searchTerms).toBeGreaterThan(0);

    // Inside the window nothing moves: a 7-day window keeps a two-day-old case hot.
    await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 7 } });
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 0 });
    expect(await rowsOf(ids)).toEqual(hotRows);
    await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } });

    const period = `from=${new Date(Date.now() - DAY).toISOString().slice(0, 10)}T00:00:00Z&to=${new Date(Date.now() + DAY).toISOString().slice(0, 10)}T00:00:00Z`;
    const hotTransparency = (await api(`/api/v1/transparency-report?${period}`, { key: inst.apiKey })).body;
    expect(hotTransparency.computedFrom).toBe("rows");
    expect(hotTransparency.sections.notices.received.total).toBe(1);

    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    expect(await rowsOf(ids)).toEqual(NONE);
    const keys = await env.DB.prepare("SELECT COUNT(*) AS n FROM archived_subjects").first<{ n: number }>();
    expect(keys!.n).toBeGreaterThanOrEqual(1);
    const object = JSON.parse(await (await env.WORKFLOW_ARTIFACTS.get(caseArchiveKey(inst.id, ids.caseId)))!.text());
    expect(object).toMatchObject({ format: "safest-tools.case-archive", installationId: inst.id, caseId: ids.caseId });
    expect(object.tables.reports).toHaveLength(1);
    expect(object.tables.human_tasks).toHaveLength(1);
    expect(object.tables.workflow_runs).toHaveLength(1);
    // Sealed parts stay sealed: the report's words and the reporter are nowhere in plaintext.
    const text = JSON.stringify(object);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain("person@example.org");
    const storage = (await api("/api/v1/storage", { key: inst.apiKey })).body;
    expect(storage.archivedCases).toBe(1);
    // The transparency report counts the archived case from the rollups the archive waited for.
    const archivedTransparency = (await api(`/api/v1/transparency-report?${period}`, { key: inst.apiKey })).body;
    expect(archivedTransparency.computedFrom).toBe("daily_rollups");
    expect(archivedTransparency.sections.notices.received).toEqual(hotTransparency.sections.notices.received);
    expect(storage.archiveBytes).toBeGreaterThan(0);

    // Read by id, field by field as it was hot (the first read brings the case back to D1).
    const archived = await read();
    expect(archived.report).toEqual(hot.report);
    expect(archived.timeline).toEqual(hot.timeline);
    expect(archived.case).toEqual(hot.case);
    expect(archived.run).toEqual(hot.run);
    expect(archived.task).toEqual(hot.task);
    expect(archived.task.id).toBe(ids.taskId);
    expect(await rowsOf(ids)).toEqual(hotRows);
    expect((await api("/api/v1/storage", { key: inst.apiKey })).body.archivedCases).toBe(0);
    // Another installation's key finds nothing, archived or not.
    const other = await newInstallation("case-archive-other");
    expect((await api(`/api/v1/reports/${ids.reportId}`, { key: other.apiKey })).status).toBe(404);

    // Archived again (the window counts from the read): same rows, the very same object.
    const again = new Date(later.getTime() + 1_000);
    expect(await sweepCaseArchive(env, again, { installationId: inst.id })).toMatchObject({ archived: 1 });
    const objectAgain = JSON.parse(await (await env.WORKFLOW_ARTIFACTS.get(caseArchiveKey(inst.id, ids.caseId)))!.text());
    expect(objectAgain.digest).toBe(object.digest);
    expect(await rowsOf(ids)).toEqual(NONE);

    // Any record of it read by id brings it back: a task, then a decision-less run.
    expect((await api(`/api/v1/tasks/${ids.taskId}`, { key: inst.apiKey })).body).toEqual(hot.task);
    expect(await rowsOf(ids)).toEqual(hotRows);
    expect(await sweepCaseArchive(env, new Date(again.getTime() + 1_000), { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect((await api(`/api/v1/runs/${ids.runId}`, { key: inst.apiKey })).body).toEqual(hot.run);
    expect(await sweepCaseArchive(env, new Date(again.getTime() + 2_000), { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect(await rowsOf(ids)).toEqual(NONE);

    // A new report about the same subject joins the same case, which comes back whole.
    const next = await api("/api/v1/reports", { key: inst.apiKey, body: { subject: { kind: "content", id: "post-archived" }, category: "scams_and_fraud" } });
    expect(next.status).toBe(201);
    expect(next.body).toMatchObject({ caseId: ids.caseId, caseReportCount: 2 });
    expect((await rowsOf(ids)).reports).toBe(1);
    expect((await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey })).body.reports).toHaveLength(2);
  });

  it.each([
    ["still in D1", false, false],
    ["moved to its own R2 object first", true, false],
    ["still in D1; the proposal of the earlier form, its step_run_id stored", false, true],
  ])("an archived case's action proposal and webhook delivery read by their own ids as they did hot (the delivery's payload and attempts %s)", async (_, movedFirst, earlierForm) => {
    const inst = await newInstallation("case-archive-action");
    expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
    const path = `/case-archive/${crypto.randomUUID()}`;
    const hook = await api("/api/v1/webhook-endpoints", { key: inst.apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
    expect(hook.body).toMatchObject({ id: expect.any(String) });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
    expect((await api("/api/v1/action-types", { key: inst.apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } })).status).toBe(201);
    const version = await publish(inst.apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post" }, inputMapping: { postId: "report.subject.id" } },
        { id: "applied", kind: "end", config: { terminal_code: "applied" } },
        { id: "other", kind: "end", config: { terminal_code: "other" } },
      ],
      edges: [edge("start", "success", "remove"), edge("remove", "applied", "applied"), edge("remove", "rejected", "other"), edge("remove", "expired", "other"), edge("remove", "failed", "other")],
    });
    expect((await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const intake = await api("/api/v1/reports", { key: inst.apiKey, body: { subject: { kind: "content", id: "post-acted-on" }, category: "scams_and_fraud" } });
    expect(intake.body).toMatchObject({ id: expect.any(String) });
    expect((await waitForRun(inst.apiKey, intake.body.runs[0].runId)).state).toBe("succeeded");
    const delivered = await until(async () => {
      const items = (await api("/api/v1/webhook-deliveries", { key: inst.apiKey })).body.items as Array<{ id: string; state: string }>;
      return items.length === 1 && items[0]!.state === "delivered" ? items[0] : null;
    }, "the action's delivery");
    expect((await receiverLog(path)).filter((entry) => entry.verified)).toHaveLength(1);
    const [proposal] = (await api("/api/v1/action-proposals", { key: inst.apiKey })).body.items as Array<{ id: string }>;
    const runId = intake.body.runs[0].runId as string;
    const stepId = proposal!.id.slice(0, -":proposal".length);
    const storedStep = async () => (await env.DB.prepare("SELECT step_run_id AS stepRunId FROM action_proposals WHERE id = ?1").bind(proposal!.id).first<{ stepRunId: string | null }>())?.stepRunId;
    // A proposal written now names its step by its id alone; one of the earlier form stored it too (as the release before wrote it).
    expect(await storedStep()).toBeNull();
    if (earlierForm) await env.DB.prepare("UPDATE action_proposals SET step_run_id = ?2 WHERE id = ?1").bind(proposal!.id, stepId).run();
    const read = async () => ({
      proposal: await api(`/api/v1/action-proposals/${proposal!.id}`, { key: inst.apiKey }),
      delivery: await api(`/api/v1/webhook-deliveries/${delivered.id}`, { key: inst.apiKey }),
    });
    const hot = await read();
    expect(hot.proposal.status).toBe(200);
    expect(hot.delivery.status).toBe(200);
    expect(hot.delivery.body.history.length).toBeGreaterThanOrEqual(1);

    const later = await twoDaysOn(inst.id);
    // The run archived: only the earlier form's proposal keeps its action step in D1 (its foreign key's anchor).
    const steps = await env.DB.prepare("SELECT id FROM workflow_step_runs WHERE run_id = ?1").bind(runId).all<{ id: string }>();
    expect(steps.results).toEqual(earlierForm ? [{ id: stepId }] : []);
    if (movedFirst) {
      // The delivery's payload and attempts leave D1 first (enforcement/delivery-archive.ts): the case archive holds its lean row, no attempts.
      expect(await sweepDeliveryArchive(env, later, { installationId: inst.id })).toMatchObject({ moved: 1 });
      expect(await buildCaseArchive(env.DB, inst.id, intake.body.caseId)).toMatchObject({ body: { tables: { webhook_deliveries: [{ id: delivered.id, payload_sealed: "" }], webhook_attempts: [] } } });
      expect((await api(`/api/v1/webhook-deliveries/${delivered.id}`, { key: inst.apiKey })).body).toEqual(hot.delivery.body);
    }
    if (!movedFirst) {
      // A first attempt kept on the delivery's row (lib/delivery-attempts.ts) goes into the case's object as the attempt row it stands for, the row without its columns.
      const built = (await buildCaseArchive(env.DB, inst.id, intake.body.caseId))!.body.tables;
      expect(built.webhook_attempts).toEqual([expect.objectContaining({ id: `${delivered.id}:1`, delivery_id: delivered.id, attempt: 1, status_code: 200, via: "inline" })]);
      expect(Object.keys(built.webhook_deliveries[0]!).filter((column) => column.startsWith("first_"))).toEqual([]);
    }
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    const left = async () => (await env.DB.prepare("SELECT (SELECT COUNT(*) FROM action_proposals WHERE id = ?1) + (SELECT COUNT(*) FROM webhook_deliveries WHERE id = ?2) AS n").bind(proposal!.id, delivered.id).first<{ n: number }>())!.n;
    expect(await left()).toBe(0);
    // Read by the proposal's id: the case comes back, and the proposal reads as it did.
    const proposalAgain = await api(`/api/v1/action-proposals/${proposal!.id}`, { key: inst.apiKey });
    expect(proposalAgain.status).toBe(200);
    expect(proposalAgain.body).toEqual(hot.proposal.body);
    expect(await left()).toBe(2);
    // Back in D1 in the form it left in (the earlier form with its anchor step row).
    expect(await storedStep()).toBe(earlierForm ? stepId : null);
    expect((await env.DB.prepare("SELECT id FROM workflow_step_runs WHERE run_id = ?1").bind(runId).all()).results).toEqual(steps.results);
    // Archived again; read by the delivery's id, attempts and all.
    expect(await sweepCaseArchive(env, new Date(later.getTime() + 1_000), { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect(await left()).toBe(0);
    const deliveryAgain = await api(`/api/v1/webhook-deliveries/${delivered.id}`, { key: inst.apiKey });
    expect(deliveryAgain.status).toBe(200);
    expect(deliveryAgain.body).toEqual(hot.delivery.body);
    // Another installation finds neither, archived or hot.
    const other = await newInstallation("case-archive-action-other");
    expect((await api(`/api/v1/action-proposals/${proposal!.id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/webhook-deliveries/${delivered.id}`, { key: other.apiKey })).status).toBe(404);
  });

  it("a fast backtest reads reports of archived cases from R2, by id and by time, as it read them hot, and brings nothing back to D1", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-backtested");
    const version = await publish(inst.apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        // Reads the sealed description: the archived report's personal data opens as the hot one's did.
        { id: "bank", kind: "enrichment", config: { component: "keyword_bank", keywords: ["scam"] }, inputMapping: { text: "string(content.description)" } },
        { id: "scam", kind: "condition", config: { cases: [{ port: "scam", when: "steps.bank.data.matched && report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
        { id: "flagged", kind: "end", config: { terminal_code: "flagged" } },
        { id: "fine", kind: "end", config: { terminal_code: "fine" } },
      ],
      edges: [edge("start", "success", "bank"), edge("bank", "success", "scam"), edge("scam", "scam", "flagged"), edge("scam", "other", "fine")],
    });
    const backtest = async (body: Record<string, unknown>) => {
      const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: inst.apiKey, body });
      expect(started.status).toBe(202);
      await until(async () => (await api(`/api/v1/backtests/${started.body.id}`, { key: inst.apiKey })).body.state === "completed", "the backtest");
      const items = (await api(`/api/v1/backtests/${started.body.id}/results`, { key: inst.apiKey })).body.items as Array<Record<string, unknown>>;
      return items.map(({ backtestId: _b, evaluatedAt: _e, ...rest }) => rest);
    };
    const hot = await backtest({ reportIds: [ids.reportId] });
    expect(hot).toHaveLength(1);
    expect(hot[0]).toMatchObject({ reportId: ids.reportId, terminalCode: "flagged" });

    const later = await twoDaysOn(inst.id);
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    expect(await rowsOf(ids)).toEqual(NONE);
    // By id: the same result, and the case stays archived.
    expect(await backtest({ reportIds: [ids.reportId] })).toEqual(hot);
    expect(await rowsOf(ids)).toEqual(NONE);
    // By time: the archived report is in its range (found by its day ref), and only there.
    const day = (offset: number) => new Date(Date.now() + offset * DAY).toISOString();
    expect(await backtest({ from: day(-1), to: day(1) })).toEqual(hot);
    const before = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: inst.apiKey, body: { from: day(-3), to: day(-2) } });
    expect(before.body.progress.total).toBe(0);
    expect(await rowsOf(ids)).toEqual(NONE);
    // A durable backtest starts shadow runs, which need the report in D1: refused with what to do.
    const durable = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: inst.apiKey, body: { reportIds: [ids.reportId], engine: "durable" } });
    expect(durable.status).toBe(422);
    expect(durable.body.error.code).toBe("backtest.archived_reports_need_fast");
    // Another installation does not find the archived report, by id or by time.
    const other = await newInstallation("case-archive-backtest-other");
    const theirs = await publish(other.apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "end", kind: "end" },
      ],
      edges: [edge("start", "success", "end")],
    });
    expect((await api(`/api/v1/workflow-versions/${theirs.id}/backtests`, { key: other.apiKey, body: { reportIds: [ids.reportId] } })).status).toBe(404);
    expect((await api(`/api/v1/workflow-versions/${theirs.id}/backtests`, { key: other.apiKey, body: { from: day(-1), to: day(1) } })).body.progress.total).toBe(0);
  });

  it("on the schedule, cases go through the RUN_OPERATIONS queue: handed over once, archived by its consumer", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-queued");
    const later = await twoDaysOn(inst.id);
    expect(await queueCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ queued: 1 });
    // Handed over: the next run does not hand it again while the consumer has it.
    expect(await queueCaseArchive(env, new Date(later.getTime() + 1_000), { installationId: inst.id })).toMatchObject({ queued: 0 });
    await until(async () => (await rowsOf(ids)).cases === 0, "the consumer archived the case");
    expect(await rowsOf(ids)).toEqual(NONE);
    expect((await api("/api/v1/storage", { key: inst.apiKey })).body.archivedCases).toBe(1);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM case_archive_holds WHERE case_id = ?1").bind(ids.caseId).first<{ n: number }>())!.n).toBe(0);
  });

  it("is idempotent when killed between the object and the D1 batch, and a stale pass deletes nothing", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-halfway");
    const later = await twoDaysOn(inst.id);
    const rows = await rowsOf(ids);

    // The pass that dies after its object: everything still in D1, still read as before.
    const first = await writeCaseArchive(env, inst.id, ids.caseId);
    expect(first).not.toBeNull();
    const firstText = await (await env.WORKFLOW_ARTIFACTS.get(first!.key))!.text();
    expect(await rowsOf(ids)).toEqual(rows);

    // A pass whose snapshot is stale (a new report came in since) commits nothing.
    const stale = await writeCaseArchive(env, inst.id, ids.caseId);
    await api("/api/v1/reports", { key: inst.apiKey, body: { subject: { kind: "content", id: "post-halfway" }, category: "scams_and_fraud" } });
    expect(await commitCaseArchive(env, inst.id, ids.caseId, stale!, later)).toBe(false);
    expect(await rowsOf(ids)).toEqual(rows);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM case_archive_marks").first<{ n: number }>())!.n).toBe(0);
    // The newer report's run must end and be archived before the case can go; its activity is now.
    const newer = await env.DB.prepare("SELECT id FROM reports WHERE case_id = ?1 AND id <> ?2").bind(ids.caseId, ids.reportId).first<{ id: string }>();
    expect(newer).not.toBeNull();
    const newerRun = await env.DB.prepare("SELECT id FROM workflow_runs WHERE report_id = ?1").bind(newer!.id).first<{ id: string }>();
    await api(`/api/v1/runs/${newerRun!.id}/terminate`, { key: inst.apiKey, body: { reason: "not needed" } });
    const much = new Date(later.getTime() + 2 * DAY);
    await sweepRunArchive(env, much, { installationId: inst.id });
    for (let i = 0; i < 5 && ((await sweepMetricRollups(env, much)).more ?? 0) > 0; i++);
    for (let i = 0; i < 5 && ((await sweepTransparencyRollups(env, much)).more ?? 0) > 0; i++);

    expect(await sweepCaseArchive(env, much, { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    expect(await rowsOf(ids)).toEqual(NONE);
    const stored = JSON.parse(await (await env.WORKFLOW_ARTIFACTS.get(first!.key))!.text());
    expect(stored.tables.reports).toHaveLength(2);
    expect(JSON.parse(firstText).tables.reports).toHaveLength(1);
    // A second sweep has nothing left to do.
    expect(await sweepCaseArchive(env, much, { installationId: inst.id })).toMatchObject({ archived: 0, failed: 0 });
  });

  it("a row changed between the object and the commit (an erasure, a sealing) keeps the case in D1; the next pass archives what it holds now", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-changed");
    const later = await twoDaysOn(inst.id);
    const written = await writeCaseArchive(env, inst.id, ids.caseId);
    // Same number of rows, same case time: only a cell's contents change.
    await env.DB.prepare("UPDATE human_tasks SET response_json = ?2 WHERE id = ?1")
      .bind(ids.taskId, JSON.stringify({ verdict: "remove", note: "changed after the object was written" }))
      .run();
    expect(await commitCaseArchive(env, inst.id, ids.caseId, written!, later)).toBe(false);
    expect((await rowsOf(ids)).tasks).toBe(1);
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1 });
    const object = JSON.parse(await (await env.WORKFLOW_ARTIFACTS.get(caseArchiveKey(inst.id, ids.caseId)))!.text());
    expect(object.tables.human_tasks[0].response_json).toContain("changed after the object was written");
  });

  it("an Idempotency-Key reused while its report was archived: both reports stay readable, the key answers for the newer", async () => {
    const inst = await setup(0);
    const body = (subjectId: string) => ({ subject: { kind: "content", id: subjectId }, category: "scams_and_fraud" });
    const first = await api("/api/v1/reports", { key: inst.apiKey, body: body("post-key-a"), headers: { "idempotency-key": "key-reused" } });
    expect(first.status).toBe(201);
    await waitForRun(inst.apiKey, first.body.runs[0].runId, ["waiting", "succeeded"]).catch(() => undefined);
    await api(`/api/v1/runs/${first.body.runs[0].runId}/terminate`, { key: inst.apiKey, body: {} });
    const later = await twoDaysOn(inst.id);
    await env.DB.prepare("UPDATE human_tasks SET state = 'cancelled', updated_at = ?2 WHERE report_id = ?1 AND state IN ('open', 'claimed')")
      .bind(first.body.id, new Date(Date.now() - 60_000).toISOString())
      .run();
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1 });
    // The key is free in D1 now: a new report takes it.
    const second = await api("/api/v1/reports", { key: inst.apiKey, body: body("post-key-b"), headers: { "idempotency-key": "key-reused" } });
    expect(second.status).toBe(201);
    expect(second.body.id).not.toBe(first.body.id);
    // The archived one comes back whole, without the key the newer one holds.
    const old = await api(`/api/v1/reports/${first.body.id}/timeline`, { key: inst.apiKey });
    expect(old.status).toBe(200);
    const keys = await env.DB.prepare("SELECT id, idempotency_key AS k FROM reports WHERE id IN (?1, ?2)").bind(first.body.id, second.body.id).all<{ id: string; k: string | null }>();
    expect(Object.fromEntries(keys.results.map((r) => [r.id, r.k]))).toEqual({ [first.body.id]: null, [second.body.id]: "key-reused" });
    const replay = await api("/api/v1/reports", { key: inst.apiKey, body: body("post-key-b"), headers: { "idempotency-key": "key-reused" } });
    expect(replay.body.id).toBe(second.body.id);
  });

  it("a case larger than one bound value (2 MB in D1) comes back in chunks, exactly", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-large");
    const big = (tag: string) => JSON.stringify([`${tag}:${"x".repeat(600_000)}`]);
    await env.DB.prepare("UPDATE reports SET category_specification_json = ?2 WHERE id = ?1").bind(ids.reportId, big("a")).run();
    await env.DB.prepare("UPDATE human_tasks SET response_schema_json = ?2 WHERE id = ?1").bind(ids.taskId, big("b")).run();
    const second = await api("/api/v1/reports", { key: inst.apiKey, body: { subject: { kind: "content", id: "post-large" }, category: "scams_and_fraud" } });
    await api(`/api/v1/runs/${second.body.runs[0].runId}/terminate`, { key: inst.apiKey, body: {} });
    await env.DB.prepare("UPDATE reports SET category_specification_json = ?2 WHERE id = ?1").bind(second.body.id, big("c")).run();
    await env.DB.prepare("UPDATE human_tasks SET state = 'cancelled' WHERE report_id = ?1 AND state IN ('open', 'claimed')").bind(second.body.id).run();
    const rows = async () => (await env.DB.prepare("SELECT * FROM reports WHERE case_id = ?1 ORDER BY id").bind(ids.caseId).all()).results;
    const before = await rows();
    expect(before).toHaveLength(2);
    const later = new Date(Date.now() + 4 * DAY);
    await sweepRunArchive(env, later, { installationId: inst.id });
    for (let i = 0; i < 5 && ((await sweepMetricRollups(env, later)).more ?? 0) > 0; i++);
    for (let i = 0; i < 5 && ((await sweepTransparencyRollups(env, later)).more ?? 0) > 0; i++);
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect((await rowsOf(ids)).reports).toBe(0);
    expect((await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey })).status).toBe(200);
    expect(await rows()).toEqual(before);
  });

  it("a case holding a row of another installation stays in D1: the archive fails, says why, and holds it instead of retrying every minute", async () => {
    const inst = await setup(0);
    const other = await newInstallation("case-archive-foreign");
    const ids = await reviewedReport(inst, "post-foreign");
    const later = await twoDaysOn(inst.id);
    // A task of the case that names another installation (found through its run's step, which has no installation).
    await env.DB.prepare("UPDATE human_tasks SET installation_id = ?2 WHERE id = ?1").bind(ids.taskId, other.id).run();
    await expect(buildCaseArchive(env.DB, inst.id, ids.caseId)).rejects.toMatchObject({ code: "case_archive.foreign_row" });
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 0, failed: 1 });
    expect((await rowsOf(ids)).cases).toBe(1);
    const hold = await env.DB.prepare("SELECT not_before AS notBefore FROM case_archive_holds WHERE case_id = ?1").bind(ids.caseId).first<{ notBefore: string }>();
    expect(Date.parse(hold!.notBefore)).toBeGreaterThan(later.getTime());
    // Held: the next pass does not take it again.
    expect(await sweepCaseArchive(env, new Date(later.getTime() + 60_000), { installationId: inst.id })).toMatchObject({ archived: 0, failed: 0, skipped: 0 });
    expect(await env.WORKFLOW_ARTIFACTS.head(caseArchiveKey(inst.id, ids.caseId))).toBeNull();
  });

  it("a backup carries archived cases as rows; restored, they read as they did", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-backup");
    const later = await twoDaysOn(inst.id);
    const hotCase = (await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey })).body;
    const hotRun = (await api(`/api/v1/runs/${ids.runId}`, { key: inst.apiKey })).body;
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect(await rowsOf(ids)).toEqual(NONE);

    const exported = await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" });
    expect(exported.status).toBe(200);
    const backup = exported.body;
    // Exporting read nothing back into D1: the rows come from the archive object.
    expect(await rowsOf(ids)).toEqual(NONE);
    expect(backup.tables.reports.map((r: { id: string }) => r.id)).toContain(ids.reportId);
    expect(backup.tables.human_tasks.map((r: { id: string }) => r.id)).toContain(ids.taskId);
    expect(backup.tables.workflow_runs.map((r: { id: string }) => r.id)).toContain(ids.runId);
    expect(JSON.stringify(backup)).not.toContain(SECRET);
    // A case brought back to D1 is in the backup once.
    expect(backup.tables.cases.filter((r: { id: string }) => r.id === ids.caseId)).toHaveLength(1);
    await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey });
    expect((await rowsOf(ids)).cases).toBe(1);
    const both = (await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" })).body;
    expect(both.tables.reports.filter((r: { id: string }) => r.id === ids.reportId)).toHaveLength(1);
    expect(both.tables.human_tasks.filter((r: { id: string }) => r.id === ids.taskId)).toHaveLength(1);

    // Restored into a state folder without it: hot again, and read exactly as before.
    await env.DB.batch(installationDeleteStatements(env.DB, inst.id));
    await env.AUDIT_ANCHORS.delete(`audit/${inst.id}/head.json`);
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });
    expect(restored.status).toBe(201);
    expect((await rowsOf(ids)).reports).toBe(1);
    expect((await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey })).body).toEqual(hotCase);
    expect((await api(`/api/v1/runs/${ids.runId}`, { key: inst.apiKey })).body).toEqual(hotRun);
  });

  it("a named person's export and erasure reach their archived cases (brought back, then erased as hot ones)", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-person");
    const later = await twoDaysOn(inst.id);
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect(await rowsOf(ids)).toEqual(NONE);

    const exported = await api("/api/v1/personal-data/export", { key: inst.apiKey, body: { reporter: { id: "person-1" } } });
    expect(exported.status).toBe(200);
    expect(JSON.stringify(exported.body)).toContain(SECRET);
    expect((await rowsOf(ids)).reports).toBe(1);

    // Archived again, then erased on request: found although it was in R2 when asked.
    expect(await sweepCaseArchive(env, new Date(later.getTime() + 1_000), { installationId: inst.id })).toMatchObject({ archived: 1 });
    const erased = await api("/api/v1/personal-data/erase", { key: inst.apiKey, body: { reporter: { id: "person-1" } } });
    expect(erased.status).toBe(200);
    expect(erased.body.erased.reports).toBe(1);
    const report = await api(`/api/v1/reports/${ids.reportId}`, { key: inst.apiKey });
    expect(report.body).toMatchObject({ description: null, reporter: { known: false } });
    // Another person's request brings nothing back.
    expect(await sweepCaseArchive(env, new Date(later.getTime() + 2_000), { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect((await api("/api/v1/personal-data/export", { key: inst.apiKey, body: { reporter: { id: "someone-else" } } })).status).toBe(200);
    expect(await rowsOf(ids)).toEqual(NONE);
  });

  it("erasure after archiving: the period's keys destroyed, nothing of the archived report opens, brought back nothing of it is found, and the chain verifies", async () => {
    const inst = await setup(0);
    const ids = await reviewedReport(inst, "post-erased");
    const later = await twoDaysOn(inst.id);
    expect(await sweepCaseArchive(env, later, { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect(await rowsOf(ids)).toEqual(NONE);

    // Past the retention period: the period's keys go although the report is in R2, not D1.
    const muchLater = new Date(Date.now() + 400 * DAY);
    const swept = await sweepRetention(env, muchLater, { installationId: inst.id });
    expect(swept.keysDestroyed).toBeGreaterThanOrEqual(1);
    const period = dataKeyPeriod(new Date());
    const live = await env.DB.prepare("SELECT COUNT(*) AS n FROM data_keys WHERE installation_id = ?1 AND period = ?2 AND wrapped_key <> ''").bind(inst.id, period).first<{ n: number }>();
    expect(live!.n).toBe(0);

    const report = await api(`/api/v1/reports/${ids.reportId}`, { key: inst.apiKey });
    expect(report.status).toBe(200);
    expect(report.body).toMatchObject({ description: null, evidence: [], subject: { snapshot: null } });
    expect(JSON.stringify(report.body)).not.toContain(SECRET);

    // Brought back to D1, the report is what an erasure leaves: no person, no word of it finds it.
    expect((await api(`/api/v1/cases/${ids.caseId}`, { key: inst.apiKey })).status).toBe(200);
    const row = await env.DB.prepare("SELECT personal_data_erased_at AS erasedAt, reporter_key AS reporterKey, search_terms AS terms FROM reports WHERE id = ?1").bind(ids.reportId).first();
    expect(row).toMatchObject({ erasedAt: expect.any(String), reporterKey: null, terms: null });
    expect((await rowsOf(ids)).searchTerms).toBe(0);
    const word = SECRET.split(/[^\p{L}\p{N}]+/u).find((w) => w.length > 3)!;
    for (const q of ["person@example.org", "person-1", word]) {
      const found = await api(`/api/v1/search?type=report&q=${encodeURIComponent(q)}`, { key: inst.apiKey });
      expect(found.status, q).toBe(200);
      expect(found.body.items, q).toEqual([]);
    }
    const verify = await api("/api/v1/audit/verify?mode=full", { key: inst.apiKey });
    expect(verify.status).toBe(200);
    expect(verify.body).toMatchObject({ ok: true });
  });
});
