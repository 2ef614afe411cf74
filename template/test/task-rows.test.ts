// Lean task rows (migration 0064): the response schema stored once per installation, the completer
// not written twice, rows of the previous form read as before, and the plans of the queries whose
// indexes changed.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { COMPLETION_TIMES_SQL } from "../src/cases/queues/queues";
import { QUEUE_LISTING_SQL } from "../src/cases/queues/tasks";
import { TASK_TIMES_SQL } from "../src/cases/qa/qa-figures";
import { MINUTES_SQL } from "../src/cases/wellness/wellness";
import { ROLLUP_SQL } from "../src/metrics/rollup";
import { api, edge, newInstallation, publish } from "./helpers";

const reviewSchema = { type: "object", additionalProperties: false, required: ["verdict"], properties: { verdict: { enum: ["remove", "keep"] }, note: { type: "string", maxLength: 20 } } };
/** The schema as the runtime stores it (canonical JSON: keys sorted). */
const canonicalSchema = JSON.stringify({
  additionalProperties: false,
  properties: { note: { maxLength: 20, type: "string" }, verdict: { enum: ["remove", "keep"] } },
  required: ["verdict"],
  type: "object",
});

async function setup(label: string) {
  const installation = await newInstallation(`task-rows-${label}`);
  const apiKey = installation.apiKey;
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `review-${label}`, slaSeconds: 3600 } });
  expect(queue.status).toBe(201);
  const version = await publish(apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: reviewSchema, timeout_seconds: 86_400 }, inputMapping: { category: "report.category" } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
  });
  const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  const review = await api("/api/v1/api-keys", { key: apiKey, body: { name: "review tool", scopes: ["review", "read"] } });
  expect(review.status).toBe(201);
  return { installationId: installation.id, apiKey, reviewKey: review.body.apiKey as string, queueId: queue.body.id as string };
}

async function taskOf(s: Awaited<ReturnType<typeof setup>>): Promise<string> {
  const report = await api("/api/v1/reports", { key: s.apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
  expect(report.status).toBe(201);
  for (let i = 0; i < 400; i++) {
    const row = await env.DB.prepare("SELECT id FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2").bind(s.installationId, report.body.id).first<{ id: string }>();
    if (row) return row.id;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("no task appeared");
}

type RawRow = { schemaJson: string; schemaId: number | null; completedBy: string | null; claimedBy: string | null };
const raw = (taskId: string) =>
  env.DB.prepare("SELECT response_schema_json AS schemaJson, response_schema_number AS schemaId, completed_by AS completedBy, claimed_by AS claimedBy FROM human_tasks WHERE id = ?1").bind(taskId).first<RawRow>();

const claim = (s: { reviewKey: string }, taskId: string, reviewer = "rita") => api(`/api/v1/tasks/${taskId}/claim`, { key: s.reviewKey, body: { reviewer } });
const complete = (s: { reviewKey: string }, taskId: string, response: unknown, reviewer = "rita") => api(`/api/v1/tasks/${taskId}/complete`, { key: s.reviewKey, body: { reviewer, response } });

/** EXPLAIN QUERY PLAN of `sql` with as many of `binds` as it has parameters (`?N`). */
async function planOf(sql: string, binds: unknown[]): Promise<string[]> {
  const count = Math.max(0, ...[...sql.matchAll(/\?(\d+)/gu)].map((m) => Number(m[1])));
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...binds.slice(0, count))
    .all<{ detail: string }>();
  return results.map((row) => row.detail);
}

/**
 * No step of the plan reads human_tasks whole or walks all of an installation's tasks (the live ones,
 * human_tasks_open_due, are the backlog: that walk is the gauges' own).
 */
function expectNoTaskWalk(details: string[]) {
  const text = details.join(" | ");
  expect(
    details.some((d) => /^SCAN (human_tasks|t)\b(?! USING)/u.test(d)),
    text,
  ).toBe(false);
  expect(
    details.some((d) => /USING (COVERING )?INDEX human_tasks_(?!open_due)\w+ \(installation_id=\?\)$/u.test(d)),
    text,
  ).toBe(false);
}

describe("task rows: the response schema once per installation", () => {
  it("tasks of the same node share one numbered schema row; the task answers the node's schema", async () => {
    const s = await setup("shared");
    const [a, b] = [await taskOf(s), await taskOf(s)];
    const [rowA, rowB] = [await raw(a), await raw(b)];
    expect(rowA).toMatchObject({ schemaJson: "", schemaId: expect.any(Number) });
    expect(rowB!.schemaId).toBe(rowA!.schemaId);
    const schemas = await env.DB.prepare("SELECT number, schema_json AS schemaJson FROM task_response_schemas WHERE installation_id = ?1").bind(s.installationId).all<{ number: number; schemaJson: string }>();
    expect(schemas.results).toEqual([{ number: rowA!.schemaId, schemaJson: canonicalSchema }]);
    const read = await api(`/api/v1/tasks/${a}`, { key: s.apiKey });
    expect(read.status).toBe(200);
    expect(read.body.responseSchema).toEqual(JSON.parse(canonicalSchema));
    const listed = await api(`/api/v1/queues/${s.queueId}/tasks`, { key: s.apiKey });
    expect(listed.body.items.map((t: any) => t.responseSchema)).toEqual([JSON.parse(canonicalSchema), JSON.parse(canonicalSchema)]);
  });

  it("a task opened when its schema's row is missing (a recording batch that failed) holds the schema itself and answers it", async () => {
    const s = await setup("missing");
    await taskOf(s);
    await env.DB.prepare("DELETE FROM task_response_schemas WHERE installation_id = ?1").bind(s.installationId).run();
    const taskId = await taskOf(s);
    const row = await raw(taskId);
    // Either the schema was recorded again (a new isolate) and the row holds its number, or the row holds the schema: never neither.
    const recorded = await env.DB.prepare("SELECT schema_json AS schemaJson FROM task_response_schemas WHERE installation_id = ?1 AND number = ?2").bind(s.installationId, row!.schemaId).first<{ schemaJson: string }>();
    if (row!.schemaJson === "") expect(recorded?.schemaJson).toBe(canonicalSchema);
    else expect(row).toMatchObject({ schemaJson: canonicalSchema, schemaId: null });
    const read = await api(`/api/v1/tasks/${taskId}`, { key: s.apiKey });
    expect(read.body.responseSchema).toEqual(JSON.parse(canonicalSchema));
  });

  it("another installation with the same schema has its own row; its tasks never read the first one's", async () => {
    const first = await setup("tenant-a");
    const second = await setup("tenant-b");
    const taskA = await taskOf(first);
    const taskB = await taskOf(second);
    const [rowA, rowB] = [await raw(taskA), await raw(taskB)];
    const owners = await env.DB.prepare("SELECT installation_id AS installationId FROM task_response_schemas WHERE installation_id IN (?1, ?2) ORDER BY installation_id")
      .bind(first.installationId, second.installationId)
      .all<{ installationId: string }>();
    expect(owners.results.map((r) => r.installationId).sort()).toEqual([first.installationId, second.installationId].sort());
    // A different schema under the second installation's number changes only the second's task.
    await env.DB.prepare("UPDATE task_response_schemas SET schema_json = ?3 WHERE installation_id = ?1 AND number = ?2")
      .bind(second.installationId, rowB!.schemaId, JSON.stringify({ type: "object" }))
      .run();
    expect((await api(`/api/v1/tasks/${taskB}`, { key: second.apiKey })).body.responseSchema).toEqual({ type: "object" });
    expect((await api(`/api/v1/tasks/${taskA}`, { key: first.apiKey })).body.responseSchema).toEqual(JSON.parse(canonicalSchema));
    expect(rowA!.schemaJson).toBe("");
    expect((await api(`/api/v1/tasks/${taskA}`, { key: second.apiKey })).status).toBe(404);
  });

  it("a completed task's response is checked against the numbered schema (422, nothing written), and the completer is the claimant", async () => {
    const s = await setup("validate");
    const taskId = await taskOf(s);
    expect((await claim(s, taskId)).status).toBe(200);
    const bad = await complete(s, taskId, { verdict: "maybe", extra: 1 });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("task.response_invalid");
    expect(bad.body.error.details.map((d: { path: string }) => d.path)).toEqual(expect.arrayContaining(["$.verdict"]));
    expect((await raw(taskId))!.completedBy).toBeNull();
    const tooLong = await complete(s, taskId, { verdict: "keep", note: "x".repeat(21) });
    expect(tooLong.status).toBe(422);
    const done = await complete(s, taskId, { verdict: "remove" });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ state: "completed", completedBy: "rita", response: { verdict: "remove" } });
    const row = await raw(taskId);
    expect(row).toMatchObject({ completedBy: "", claimedBy: expect.stringMatching(/^api_key:[^/]+\/rita$/u) });
    expect((await api(`/api/v1/tasks/${taskId}`, { key: s.apiKey })).body).toMatchObject({ completedBy: "rita", completedAt: done.body.completedAt });
    // The same completion again changes nothing and answers the same.
    const again = await complete(s, taskId, { verdict: "remove" });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ completedBy: "rita", completedAt: done.body.completedAt });
    // The audit event of the completion was written (its guard reads the completer as stored).
    const audit = await api(`/api/v1/audit-events?targetType=task&targetId=${encodeURIComponent(taskId)}`, { key: s.apiKey });
    expect(audit.status).toBe(200);
    expect(audit.body.items.map((e: { action: string }) => e.action)).toContain("task.completed");
    // Figures that name the completer read the claimant: the queue's time to complete and the QA figures' task times.
    expect((await api(`/api/v1/queues/${s.queueId}/stats`, { key: s.apiKey })).body.timeToComplete.sample).toBe(1);
    const figures = await api("/api/v1/qa/reviewers", { key: s.apiKey });
    expect(figures.status).toBe(200);
    expect(figures.body.reviewers.map((r: { reviewer: string }) => r.reviewer)).toContain("rita");
  });
});

describe("task rows written in the previous form", () => {
  it("a task holding its schema itself (no number) answers it, and a response is checked against it", async () => {
    const s = await setup("legacy-schema");
    const taskId = await taskOf(s);
    // The previous release's row: the schema in the row, no number.
    const legacy = { type: "object", required: ["verdict"], properties: { verdict: { enum: ["escalate"] } } };
    await env.DB.prepare("UPDATE human_tasks SET response_schema_json = ?2, response_schema_number = NULL WHERE id = ?1").bind(taskId, JSON.stringify(legacy)).run();
    expect((await api(`/api/v1/tasks/${taskId}`, { key: s.apiKey })).body.responseSchema).toEqual(legacy);
    expect((await claim(s, taskId)).status).toBe(200);
    expect((await complete(s, taskId, { verdict: "remove" })).status).toBe(422);
    const done = await complete(s, taskId, { verdict: "escalate" });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ state: "completed", completedBy: "rita", responseSchema: legacy });
  });

  it("a task completed by the previous release (the completer's name in completed_by) answers that name; one the run closed answers none", async () => {
    const s = await setup("legacy-completer");
    const named = await taskOf(s);
    expect((await claim(s, named)).status).toBe(200);
    expect((await complete(s, named, { verdict: "keep" })).status).toBe(200);
    const principal = (await raw(named))!.claimedBy!;
    // As the previous release wrote it: the completer spelled out (here another label than the claim's).
    await env.DB.prepare("UPDATE human_tasks SET completed_by = ?2 WHERE id = ?1")
      .bind(named, principal.replace(/\/rita$/u, "/former"))
      .run();
    expect((await api(`/api/v1/tasks/${named}`, { key: s.apiKey })).body.completedBy).toBe("former");
    // A claimed task the run closed (no answer): completed_by stays NULL, and no completer is shown.
    const closed = await taskOf(s);
    expect((await claim(s, closed)).status).toBe(200);
    await env.DB.prepare("UPDATE human_tasks SET state = 'completed', completed_at = ?2, updated_at = ?2 WHERE id = ?1").bind(closed, new Date().toISOString()).run();
    expect((await api(`/api/v1/tasks/${closed}`, { key: s.apiKey })).body).toMatchObject({ state: "completed", completedBy: null });
  });
});

describe("task rows: plans of the queries whose indexes changed", () => {
  const inst = "inst_plan";
  const iso = new Date().toISOString();

  it("the queue's listing still walks human_tasks_queue_listing in order (no sort); each task's schema is one primary-key lookup", async () => {
    for (const cursor of [
      ["", 101, ""],
      [iso, 50, "task_x"],
    ]) {
      const details = await planOf(QUEUE_LISTING_SQL, [inst, "q_plan", "open", ...cursor, 51, iso]);
      const text = details.join(" | ");
      expect(
        details.some((d) => /human_tasks_queue_listing \(installation_id=\? AND queue_id=\? AND state=\?/u.test(d)),
        text,
      ).toBe(true);
      expect(
        details.some((d) => /TEMP B-TREE/u.test(d)),
        text,
      ).toBe(false);
      expect(
        details.some((d) => /SEARCH s USING PRIMARY KEY \(installation_id=\? AND number=\?\)/u.test(d)),
        text,
      ).toBe(true);
      expectNoTaskWalk(details);
    }
  });

  it("queue stats' time to complete and the QA figures' task times read human_tasks_queue_ended, one range per queue", async () => {
    const stats = await planOf(COMPLETION_TIMES_SQL, [inst, "q_plan", iso]);
    expect(
      stats.some((d) => /human_tasks_queue_ended \(queue_id=\? AND updated_at>\?\)/u.test(d)),
      stats.join(" | "),
    ).toBe(true);
    expect(
      stats.some((d) => /TEMP B-TREE/u.test(d)),
      stats.join(" | "),
    ).toBe(false);
    expectNoTaskWalk(stats);
    const times = await planOf(TASK_TIMES_SQL, [inst, iso]);
    expect(
      times.some((d) => /human_tasks_queue_ended \(queue_id=\? AND updated_at>\?\)/u.test(d)),
      times.join(" | "),
    ).toBe(true);
    expectNoTaskWalk(times);
  });

  it("the tasks rollups (gauges, first actions, ended, SLA breaches) read per-queue ranges, never the installation's tasks", async () => {
    const statements = ROLLUP_SQL.filter((sql) => sql.includes("human_tasks"));
    expect(statements.length).toBe(4);
    for (const sql of statements) {
      const details = await planOf(sql, [inst, iso, iso, iso]);
      expectNoTaskWalk(details);
      expect(
        details.some((d) => /human_tasks_(queue_ended|queue_listing)/u.test(d)),
        details.join(" | "),
      ).toBe(true);
    }
    const firstActions = await planOf(ROLLUP_SQL.find((sql) => sql.includes("queue.first_action_seconds"))!, [inst, iso, iso, iso]);
    expect(
      firstActions.some((d) => /human_tasks_queue_listing \(installation_id=\? AND queue_id=\? AND state=\?\)/u.test(d)),
      firstActions.join(" | "),
    ).toBe(true);
    expect(
      firstActions.some((d) => /human_tasks_queue_ended \(queue_id=\? AND updated_at>\?\)/u.test(d)),
      firstActions.join(" | "),
    ).toBe(true);
  });

  it("a reviewer's folded claims and a report's tasks read their narrowed indexes", async () => {
    const minutes = await planOf(MINUTES_SQL, [inst, "api_key:key_x/rita", iso, iso, iso, iso]);
    expect(
      minutes.some((d) => /human_tasks_folded_exposure \(claimed_by=\? AND claimed_at>\? AND claimed_at<\?\)/u.test(d)),
      minutes.join(" | "),
    ).toBe(true);
    // The report's tasks, as the timeline, the queue check of a report and erasure read them.
    for (const sql of [
      "SELECT 1 AS x FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2 AND queue_id IN (SELECT value FROM json_each(?3)) LIMIT 1",
      "SELECT id FROM human_tasks WHERE +installation_id = ?1 AND report_id IN (SELECT value FROM json_each(?2)) UNION SELECT id FROM human_tasks WHERE installation_id = ?1 AND appeal_id IN (SELECT value FROM json_each(?3))",
    ]) {
      const details = await planOf(sql, [inst, "rpt_x", "[]"]);
      expect(
        details.some((d) => /human_tasks_report \(report_id=\?\)/u.test(d)),
        details.join(" | "),
      ).toBe(true);
      expectNoTaskWalk(details);
    }
    const gone = await env.DB.prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND name IN ('human_tasks_ended', 'human_tasks_queue_completed', 'human_tasks_first_action')").all();
    expect(gone.results).toEqual([]);
  });
});
