// A workflow task's step is named by its id (`<step id>:task`): a task written now stores no
// step_run_id, and one of the previous form (step_run_id stored, as the release before wrote it)
// reads, completes, closes and archives alike. A new task's run archive keeps no review-step anchor
// in D1; the previous form's keeps its own.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { SCOPE_SQL } from "../src/cases/archive/case-scope";
import { taskStepSql } from "../src/cases/queues/task-ids";
import { CLOSE_STEP_TASK_SQL, closeStepTaskStatement, openTaskStatements } from "../src/cases/queues/task-records";
import { getTaskRow } from "../src/cases/queues/tasks";
import { sweepRunArchive } from "../src/workflows/run-archive";
import { api, edge, newInstallation, publish, until, waitForRun } from "./helpers";

/** A sweep's clock a little ahead, so runs that just ended are past a 0-day window. */
const soon = () => new Date(Date.now() + 2_000);

const FORMS = [
  ["written now (no step_run_id)", false],
  ["of the previous form (step_run_id stored)", true],
] as const;

const reviewSchema = { type: "object", required: ["verdict"], properties: { verdict: { enum: ["remove", "keep"] } } };

/** An installation with a 0-day window, a queue, a reviewer key and a trigger running report → review → done (the review's timeout as asked). */
async function setup(label: string, timeoutSeconds = 86_400) {
  const inst = await newInstallation(`task-step-${label}`);
  expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
  const queue = await api("/api/v1/queues", { key: inst.apiKey, body: { name: `review-${label}`, slaSeconds: 3600 } });
  expect(queue.status).toBe(201);
  const version = await publish(inst.apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: reviewSchema, timeout_seconds: timeoutSeconds }, inputMapping: { category: "report.category" } },
      { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
      { id: "late", kind: "end", config: { terminal_code: "expired" } },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "late")],
  });
  const trigger = await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  const review = await api("/api/v1/api-keys", { key: inst.apiKey, body: { name: "review tool", scopes: ["review", "read"] } });
  expect(review.status).toBe(201);
  return { installationId: inst.id, apiKey: inst.apiKey, reviewKey: review.body.apiKey as string, queueId: queue.body.id as string };
}

type Setup = Awaited<ReturnType<typeof setup>>;

const storedStep = async (taskId: string) => (await env.DB.prepare("SELECT step_run_id AS stepRunId FROM human_tasks WHERE id = ?1").bind(taskId).first<{ stepRunId: string | null }>())!.stepRunId;

/**
 * A report's review task, open, in the form asked for: written now (its row names no step), or
 * turned into the previous release's row (its step_run_id stored; only while it is still open, so
 * what follows acts on a row of that form).
 */
async function openTask(s: Setup, previousForm: boolean) {
  const report = await api("/api/v1/reports", { key: s.apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
  expect(report.status).toBe(201);
  const task = await until(() => env.DB.prepare("SELECT id, run_id AS runId FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2").bind(s.installationId, report.body.id).first<{ id: string; runId: string }>(), "a task");
  const stepId = (await env.DB.prepare("SELECT id FROM workflow_step_runs WHERE run_id = ?1 AND node_id = 'review'").bind(task.runId).first<{ id: string }>())!.id;
  expect(task.id).toBe(`${stepId}:task`);
  // Written now: the row names no step.
  expect(await storedStep(task.id)).toBeNull();
  const apiBefore = (await api(`/api/v1/tasks/${task.id}`, { key: s.reviewKey })).body;
  if (previousForm) {
    const converted = await env.DB.prepare("UPDATE human_tasks SET step_run_id = ?2 WHERE id = ?1 AND state = 'open'").bind(task.id, stepId).run();
    expect(converted.meta.changes).toBe(1);
    expect(await storedStep(task.id)).toBe(stepId);
    // The task API answers the same for either form.
    expect((await api(`/api/v1/tasks/${task.id}`, { key: s.reviewKey })).body).toEqual(apiBefore);
  }
  const caseId = (await env.DB.prepare("SELECT case_id AS caseId FROM reports WHERE id = ?1").bind(report.body.id).first<{ caseId: string }>())!.caseId;
  return { taskId: task.id, runId: task.runId, stepId, caseId };
}

/** The run's step rows left in D1 after its archive. */
async function stepsLeft(runId: string) {
  return (await env.DB.prepare("SELECT id, node_id AS nodeId FROM workflow_step_runs WHERE run_id = ?1 ORDER BY id").bind(runId).all()).results;
}

describe("a workflow task's step, named by its id", () => {
  it.each(FORMS)("a task %s reads its step, completes and resumes its run, and its run's archive keeps a review-step anchor only for the previous form", async (_, previousForm) => {
    const s = await setup(`done-${previousForm}`);
    const { taskId, runId, stepId, caseId } = await openTask(s, previousForm);
    // Every reader's row names the step: the stored one, or the id's.
    expect(await getTaskRow(env.DB, s.installationId, taskId)).toMatchObject({ id: taskId, runId, stepRunId: stepId, origin: "workflow" });
    const joined = await env.DB.prepare(`SELECT s.node_id AS nodeId FROM human_tasks t JOIN workflow_step_runs s ON s.id = ${taskStepSql("t")} WHERE t.id = ?1`)
      .bind(taskId)
      .first();
    expect(joined).toEqual({ nodeId: "review" });

    expect((await api(`/api/v1/tasks/${taskId}/claim`, { key: s.reviewKey, body: { reviewer: "rita" } })).status).toBe(200);
    // Completion finds the run's wait by the task's step, and the run resumes through `completed`.
    const completed = await api(`/api/v1/tasks/${taskId}/complete`, { key: s.reviewKey, body: { reviewer: "rita", response: { verdict: "keep" } } });
    expect(completed.status).toBe(200);
    expect(completed.body).toMatchObject({ id: taskId, state: "completed", response: { verdict: "keep" } });
    expect((await waitForRun(s.apiKey, runId)).output.terminalCode).toBe("reviewed");
    const hot = (await api(`/api/v1/tasks/${taskId}`, { key: s.reviewKey })).body;
    // The case's scope finds the task (its run's workflow tasks), in either form.
    const scope = await env.DB.prepare(`${SCOPE_SQL} SELECT id FROM ta`).bind(caseId, s.installationId).all<{ id: string }>();
    expect(scope.results.map((r) => r.id)).toEqual([taskId]);

    expect(await sweepRunArchive(env, soon(), { installationId: s.installationId })).toMatchObject({ archived: 1, failed: 0 });
    // Only a task of the previous form still points at its step row by foreign key, and keeps it.
    expect(await stepsLeft(runId)).toEqual(previousForm ? [{ id: stepId, nodeId: "review" }] : []);
    // Archived: the task reads as it did, its step named as before.
    expect((await api(`/api/v1/tasks/${taskId}`, { key: s.reviewKey })).body).toEqual(hot);
    expect(await getTaskRow(env.DB, s.installationId, taskId)).toMatchObject({ state: "completed", stepRunId: stepId });
    expect(await storedStep(taskId)).toBe(previousForm ? stepId : null);
    // A late completion of an archived run's task changes nothing (its run waits no more).
    const late = await api(`/api/v1/tasks/${taskId}/complete`, { key: s.reviewKey, body: { reviewer: "rita", response: { verdict: "remove" } } });
    expect(late.status).toBe(409);
    expect((await api(`/api/v1/tasks/${taskId}`, { key: s.reviewKey })).body).toEqual(hot);
    // The case's scope still finds it, with its step row gone or not.
    expect((await env.DB.prepare(`${SCOPE_SQL} SELECT id FROM ta`).bind(caseId, s.installationId).all<{ id: string }>()).results.map((r) => r.id)).toEqual([taskId]);
  });

  it.each(FORMS)("a task %s is cancelled by its run's end, and the run's archive keeps an anchor only for the previous form", async (_, previousForm) => {
    const s = await setup(`cancel-${previousForm}`);
    const { taskId, runId, stepId } = await openTask(s, previousForm);
    expect((await api(`/api/v1/runs/${runId}/terminate`, { key: s.apiKey, body: { reason: "test over" } })).status).toBeLessThan(300);
    await waitForRun(s.apiKey, runId);
    expect((await api(`/api/v1/tasks/${taskId}`, { key: s.reviewKey })).body).toMatchObject({ id: taskId, state: "cancelled" });
    expect(await sweepRunArchive(env, soon(), { installationId: s.installationId })).toMatchObject({ archived: 1, failed: 0 });
    expect(await stepsLeft(runId)).toEqual(previousForm ? [{ id: stepId, nodeId: "review" }] : []);
    expect(await getTaskRow(env.DB, s.installationId, taskId)).toMatchObject({ state: "cancelled", stepRunId: stepId });
  });

  it.each(FORMS)("a task %s expires when its step's wait times out (found by its id), and the run's archive keeps an anchor only for the previous form", async (_, previousForm) => {
    const s = await setup(`expire-${previousForm}`, 2);
    const { taskId, runId, stepId } = await openTask(s, previousForm);
    expect((await waitForRun(s.apiKey, runId)).output.terminalCode).toBe("expired");
    expect((await api(`/api/v1/tasks/${taskId}`, { key: s.reviewKey })).body).toMatchObject({ id: taskId, state: "expired" });
    expect(await sweepRunArchive(env, soon(), { installationId: s.installationId })).toMatchObject({ archived: 1, failed: 0 });
    expect(await stepsLeft(runId)).toEqual(previousForm ? [{ id: stepId, nodeId: "review" }] : []);
  });

  it.each(FORMS)("one task per step: opening the step's task again, its task %s already there, writes no second row", async (_, previousForm) => {
    const s = await setup(`once-${previousForm}`);
    const { taskId, runId, stepId } = await openTask(s, previousForm);
    const rows = () => env.DB.prepare("SELECT * FROM human_tasks WHERE run_id = ?1").bind(runId).all();
    const before = await rows();
    expect(before.results).toHaveLength(1);
    const again = await openTaskStatements(env, {
      installationId: s.installationId,
      taskId,
      stepId,
      runId,
      taskType: "review",
      queue: { id: s.queueId, slaSeconds: 3600 },
      priority: 0,
      context: { again: true },
      responseSchema: reviewSchema,
      at: new Date().toISOString(),
      expiresAt: null,
    });
    const results = await env.DB.batch(again);
    expect(results.at(-1)!.meta.changes).toBe(0);
    expect((await rows()).results).toEqual(before.results);
    // A task whose id does not name its step is refused before anything is written.
    await expect(
      openTaskStatements(env, {
        installationId: s.installationId,
        taskId: `${stepId}x:task`,
        stepId,
        runId,
        taskType: "review",
        queue: { id: s.queueId, slaSeconds: 3600 },
        priority: 0,
        context: {},
        responseSchema: reviewSchema,
        at: new Date().toISOString(),
        expiresAt: null,
      }),
    ).rejects.toThrow();
    if (previousForm) {
      // The previous release's insert (its step stored, conflicting on it), as its Worker sends it
      // between the migration and the deployment: the conflict target still exists, and nothing is written.
      const old = await env.DB.prepare(
        `INSERT INTO human_tasks (id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, priority,
          context_json, context_sealed, context_digest, response_schema_number, response_schema_json, due_at, expires_at, created_at, updated_at)
        SELECT id, installation_id, report_id, appeal_id, run_id, ?2, task_type, 'open', queue_id, priority, '{}', context_sealed, '', response_schema_number, response_schema_json, due_at, expires_at, created_at, updated_at
        FROM human_tasks WHERE id = ?1
        ON CONFLICT(step_run_id) DO NOTHING`,
      )
        .bind(taskId, stepId)
        .run();
      expect(old.meta.changes).toBe(0);
      expect((await rows()).results).toEqual(before.results);
    }
    // A workflow task names its step, stored or by its id: the table refuses one that does neither.
    await expect(
      env.DB.prepare(
        `INSERT INTO human_tasks (id, installation_id, run_id, task_type, state, queue_id, context_json, context_digest, response_schema_json, due_at, created_at, updated_at)
        VALUES (?1, ?2, ?3, 'review', 'open', ?4, '{}', '', '{}', 'x', 'x', 'x')`,
      )
        .bind(`${stepId}:other`, s.installationId, runId, s.queueId)
        .run(),
    ).rejects.toThrow(/CHECK/u);
    expect((await api(`/api/v1/runs/${runId}/terminate`, { key: s.apiKey, body: { reason: "test over" } })).status).toBeLessThan(300);
  });

  it("closing a step's task names its run: a row of that id under another run is left as it is", async () => {
    const s = await setup("close-run");
    const { taskId, runId, stepId } = await openTask(s, false);
    const at = new Date().toISOString();
    const other = await closeStepTaskStatement(env.DB, { runId: "run_someoneElse", stepId, timedOut: true, at }).run();
    expect(other.meta.changes).toBe(0);
    expect((await getTaskRow(env.DB, s.installationId, taskId))?.state).toBe("open");
    const own = await closeStepTaskStatement(env.DB, { runId, stepId, timedOut: true, at }).run();
    expect(own.meta.changes).toBe(1);
    expect((await getTaskRow(env.DB, s.installationId, taskId))?.state).toBe("expired");
  });

  it("QA and golden tasks have no step: the derived step is the stored one (none), whatever their id looks like", async () => {
    const step = async (id: string, stepRunId: string | null, origin: string) =>
      (await env.DB.prepare(`SELECT ${taskStepSql("t")} AS step FROM (SELECT ?1 AS id, ?2 AS step_run_id, ?3 AS origin) t`)
        .bind(id, stepRunId, origin)
        .first<{ step: string | null }>())!.step;
    expect(await step("qa_abc:task", null, "qa")).toBeNull();
    expect(await step("run_x:review:main:2:task", null, "golden")).toBeNull();
    expect(await step("run_x:review:main:1:task", null, "workflow")).toBe("run_x:review:main:1");
    expect(await step("run_x:review:main:1:task", "run_x:review:main:1", "workflow")).toBe("run_x:review:main:1");
  });

  it("the step lookups use the primary key: closing a step's task, a task's step row, the wait of its step; a case's tasks by run; the previous form's anchors by step_run_id's unique index", async () => {
    const plan = async (sql: string, ...binds: unknown[]) =>
      (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .bind(...binds)
          .all<{ detail: string }>()
      ).results.map((row) => row.detail);
    const close = await plan(CLOSE_STEP_TASK_SQL, "step_plan:task", 0, "2026-01-01T00:00:00.000Z", "step_plan");
    expect(close.some((d) => /SEARCH human_tasks USING INDEX sqlite_autoindex_human_tasks_1 \(id=\?\)/u.test(d))).toBe(true);
    expect(close.some((d) => /^SCAN/u.test(d))).toBe(false);
    const join = await plan(`SELECT s.node_id FROM human_tasks t JOIN workflow_step_runs s ON s.id = ${taskStepSql("t")} WHERE t.id = ?1`, "step_plan:task");
    expect(join.some((d) => /SEARCH t USING INDEX sqlite_autoindex_human_tasks_1 \(id=\?\)/u.test(d))).toBe(true);
    expect(join.some((d) => /SEARCH s USING INDEX sqlite_autoindex_workflow_step_runs_1 \(id=\?\)/u.test(d))).toBe(true);
    expect(join.some((d) => /^SCAN/u.test(d))).toBe(false);
    const wait = await plan(`SELECT (SELECT id FROM workflow_waits WHERE step_run_id = ${taskStepSql()}) FROM human_tasks WHERE installation_id = ?1 AND id = ?2`, "inst_plan", "step_plan:task");
    expect(wait.some((d) => /SEARCH workflow_waits USING (COVERING )?INDEX sqlite_autoindex_workflow_waits_\d \(step_run_id=\?\)/u.test(d))).toBe(true);
    expect(wait.some((d) => /^SCAN/u.test(d))).toBe(false);
    const scope = await plan(`${SCOPE_SQL} SELECT id FROM ta`, "case_plan", "inst_plan");
    expect(scope.some((d) => /SEARCH human_tasks USING INDEX human_tasks_run \(run_id=\?\)/u.test(d))).toBe(true);
    expect(scope.some((d) => /SCAN human_tasks\b(?! USING)/u.test(d))).toBe(false);
    // The run archive's "still pointed at" test for a step row (and the foreign key's check when one is deleted).
    const anchor = await plan("SELECT 1 FROM human_tasks x WHERE x.step_run_id = ?1", "step_plan");
    expect(anchor.some((d) => /USING (COVERING )?INDEX sqlite_autoindex_human_tasks_2 \(step_run_id=\?\)/u.test(d))).toBe(true);
  });
});
