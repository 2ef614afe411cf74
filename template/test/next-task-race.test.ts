// `/next` when reviewers ask at once: each read brings the queue's first few claimable tasks in
// SLA order, and a reviewer who loses the first of them to another is given the next one from the
// same read by the same claim batch, without reading the queue again or asking why a claim took nothing.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Actor } from "../src/auth";
import { candidatesSql, CLAIM_FIRST_SQL, claimNextTask } from "../src/cases/queues/task-leases";
import { completeTask } from "../src/cases/queues/tasks";
import { CLAIM_EXPOSURE_SQL } from "../src/cases/wellness/wellness";
import { auditEventsSql } from "../src/audit/events";
import { rowGuardClause } from "../src/lib/d1";
import { api, edge, newInstallation, publish } from "./helpers";
import { watchedEnv } from "./d1-watch";

const reviewSchema = { type: "object", required: ["verdict"], properties: { verdict: { enum: ["remove", "keep"] } } };

async function queueWithTasks(label: string, count: number) {
  const installation = await newInstallation(`next-race-${label}`);
  const apiKey = installation.apiKey;
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `review-${label}`, slaSeconds: 3600 } });
  expect(queue.status).toBe(201);
  const version = await publish(apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: reviewSchema, timeout_seconds: 86_400 } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
  });
  expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
  for (let i = 0; i < count; i++) {
    expect((await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: `acct-${label}-${i}` }, category: "scams_and_fraud" } })).status).toBe(201);
  }
  let tasks: Array<{ id: string }> = [];
  for (let i = 0; i < 400 && tasks.length < count; i++) {
    tasks = (await env.DB.prepare("SELECT id FROM human_tasks WHERE installation_id = ?1 ORDER BY due_at, priority DESC, id").bind(installation.id).all<{ id: string }>()).results;
    if (tasks.length < count) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(tasks).toHaveLength(count);
  const actor: Actor = { installationId: installation.id, scopes: ["review"], audit: { type: "api_key", id: `key_${label}` } };
  return { installationId: installation.id, queueId: queue.body.id as string, tasks: tasks.map((t) => t.id), actor };
}

/**
 * The test's env that counts `/next`'s queue reads (its candidate statement), refusal reads, round
 * trips and statements and, once, lets another reviewer take `stolen` (one task or several) right
 * after the first queue read: the race `/next` loses in production.
 */
function racingEnv(stolen: () => string | string[]) {
  const seen = { candidateReads: 0, refusalReads: 0, roundTrips: 0, statements: 0 };
  let raced = false;
  const racing = watchedEnv(async ({ sqls, batch }) => {
    const [sql, statements] = [batch ? null : sqls[0], sqls.length];
    seen.roundTrips += 1;
    seen.statements += statements;
    if (sql?.includes("SELECT state, lease_expires_at AS leaseExpiresAt")) seen.refusalReads += 1;
    if (!sql?.includes("AS lane")) return;
    seen.candidateReads += 1;
    if (raced) return;
    raced = true;
    await env.DB.prepare("UPDATE human_tasks SET state = 'claimed', claimed_by = 'api_key:other/rival', claimed_at = ?2, lease_expires_at = ?3 WHERE id IN (SELECT value FROM json_each(?1))")
      .bind(JSON.stringify([stolen()].flat()), new Date().toISOString(), new Date(Date.now() + 600_000).toISOString())
      .run();
  });
  return { env: racing, seen };
}

/** The installation's `task.claimed` events and exposure rows, by task. */
async function claimRecords(installationId: string) {
  const events = (
    await env.DB.prepare("SELECT target_id AS taskId, details_json AS detailsJson FROM audit_events WHERE installation_id = ?1 AND action = 'task.claimed' ORDER BY seq").bind(installationId).all<{ taskId: string; detailsJson: string }>()
  ).results;
  const exposure = (
    await env.DB.prepare("SELECT task_id AS taskId, reviewer, category, started_at AS startedAt, lease_expires_at AS leaseExpiresAt FROM review_exposure WHERE installation_id = ?1 ORDER BY started_at, task_id")
      .bind(installationId)
      .all<{ taskId: string; reviewer: string; category: string; startedAt: string; leaseExpiresAt: string }>()
  ).results;
  return { events, exposure };
}

/** The test's env whose D1 binding counts the statements and round trips sent through it (each statement of a batch counts). */
function countingEnv() {
  const sent = { statements: 0, roundTrips: 0 };
  const counting = watchedEnv(({ sqls }) => {
    sent.roundTrips += 1;
    sent.statements += sqls.length;
  });
  return { env: counting, sent };
}

describe("/next's statements", () => {
  it("without contention or caps, /next reads the queue, the reviewer's exposure and its candidates in one statement, then claims in one batch", async () => {
    const s = await queueWithTasks("quiet", 2);
    const counting = countingEnv();
    const claimed = await claimNextTask(counting.env, s.actor, s.queueId, { reviewer: "mod-q" });
    expect(claimed?.id).toBe(s.tasks[0]);
    expect(counting.sent.roundTrips).toBe(2);
  });

  it("a reviewer capped in the category of the queue's first tasks is given the first task of another category, and told which category it passed over", async () => {
    // More capped tasks first than one read of candidates brings: the capped categories are read past.
    const s = await queueWithTasks("capped", 5);
    // The first four tasks' reports become another category, in which the reviewer has reached a one-minute cap.
    await env.DB.prepare("UPDATE reports SET category = 'violence' WHERE id IN (SELECT report_id FROM human_tasks WHERE id IN (SELECT value FROM json_each(?1)))")
      .bind(JSON.stringify(s.tasks.slice(0, 4)))
      .run();
    await env.DB.prepare("INSERT INTO exposure_caps (installation_id, category, cap_minutes, updated_by, updated_at) VALUES (?1, 'violence', 1, 'test', ?2)").bind(s.installationId, new Date().toISOString()).run();
    const started = new Date(Date.now() - 5 * 60_000).toISOString();
    await env.DB.prepare("INSERT INTO review_exposure (id, installation_id, task_id, reviewer, category, started_at, lease_expires_at, ended_at, created_at) VALUES ('exp_t', ?1, ?4, 'api_key:key_capped/mod-c', 'violence', ?2, ?3, ?3, ?2)")
      .bind(s.installationId, started, new Date(Date.now() - 60_000).toISOString(), s.tasks[0])
      .run();
    const claimed = await claimNextTask(env, s.actor, s.queueId, { reviewer: "mod-c" });
    expect(claimed?.id).toBe(s.tasks[4]);
    expect(claimed?.wellness.skipped).toMatchObject([{ category: "violence", waitingTasks: 4 }]);
    // With only capped work left, the answer is the typed refusal.
    await expect(claimNextTask(env, s.actor, s.queueId, { reviewer: "mod-c" })).rejects.toMatchObject({ code: "wellness.exposure_cap_reached" });
  });
});

describe("the completion's statements", () => {
  it("a reviewer's answer reads the task (with its step's wait) once and writes it, the run's event and task.completed in one batch; the run's instance comes from the update, not a read", async () => {
    const s = await queueWithTasks("complete", 1);
    const claimed = await claimNextTask(env, s.actor, s.queueId, { reviewer: "mod-x" });
    const sent: Array<string | null> = [];
    const watching = watchedEnv(({ sqls, batch }) => {
      sent.push(batch ? `batch of ${sqls.length}` : sqls[0]!.replace(/\s+/gu, " ").trim());
    });
    const done = await completeTask(watching, s.actor, claimed!.id, { reviewer: "mod-x", response: { verdict: "keep" } });
    expect(done.state).toBe("completed");
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^SELECT id, queue_id AS queueId/u);
    expect(sent[1]).toBe("batch of 3");
    // The signal reached the run's instance: the run goes on through its `completed` port and ends.
    let state = "";
    for (let i = 0; i < 400 && state !== "succeeded"; i++) {
      state = (await env.DB.prepare("SELECT state FROM workflow_runs WHERE installation_id = ?1").bind(s.installationId).first<{ state: string }>())!.state;
      if (state !== "succeeded") await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(state).toBe("succeeded");
  });
});

describe("/next under contention", () => {
  it("a reviewer whose first candidate another takes meanwhile is given the next task in SLA order from the same read: one queue read, no read of why the claim failed", async () => {
    const s = await queueWithTasks("lost", 3);
    const racing = racingEnv(() => s.tasks[0]!);
    const claimed = await claimNextTask(racing.env, s.actor, s.queueId, { reviewer: "mod-a" });
    expect(claimed?.id).toBe(s.tasks[1]);
    expect(claimed?.state).toBe("claimed");
    expect(racing.seen.candidateReads).toBe(1);
    expect(racing.seen.refusalReads).toBe(0);
    // The rival's task stays the rival's; the audit trail holds one claim, by this reviewer, of the task it got.
    const rows = (await env.DB.prepare("SELECT id, claimed_by AS claimedBy FROM human_tasks WHERE installation_id = ?1 ORDER BY due_at, priority DESC, id").bind(s.installationId).all<{ id: string; claimedBy: string | null }>()).results;
    expect(rows.map((r) => r.claimedBy)).toEqual(["api_key:other/rival", "api_key:key_lost/mod-a", null]);
    const claims = (await env.DB.prepare("SELECT target_id AS targetId FROM audit_events WHERE installation_id = ?1 AND action = 'task.claimed'").bind(s.installationId).all<{ targetId: string }>()).results;
    expect(claims.map((c) => c.targetId)).toEqual([s.tasks[1]]);
  });

  it("a lost race costs no statement: the claim's one batch of three takes the next candidate, and its audit event and exposure row name the task it took", async () => {
    const s = await queueWithTasks("one-batch", 3);
    const racing = racingEnv(() => s.tasks[0]!);
    const claimed = await claimNextTask(racing.env, s.actor, s.queueId, { reviewer: "mod-b" });
    expect(claimed?.id).toBe(s.tasks[1]);
    // The read, then one batch: the update, the audit event, the exposure row.
    expect(racing.seen.roundTrips).toBe(2);
    expect(racing.seen.statements).toBe(4);
    const { events, exposure } = await claimRecords(s.installationId);
    expect(events.map((e) => e.taskId)).toEqual([s.tasks[1]]);
    expect(JSON.parse(events[0]!.detailsJson)).toEqual({ reviewerId: expect.any(String), leaseExpiresAt: claimed!.claim!.leaseExpiresAt });
    expect(exposure).toEqual([{ taskId: s.tasks[1], reviewer: "api_key:key_one-batch/mod-b", category: "scams_and_fraud", startedAt: claimed!.claim!.claimedAt, leaseExpiresAt: claimed!.claim!.leaseExpiresAt }]);
  });

  it("only when others took every candidate of its read does /next read the queue again, and then it claims the next task with one more batch", async () => {
    const s = await queueWithTasks("all-taken", 5);
    const racing = racingEnv(() => s.tasks.slice(0, 4));
    const claimed = await claimNextTask(racing.env, s.actor, s.queueId, { reviewer: "mod-c" });
    expect(claimed?.id).toBe(s.tasks[4]);
    expect(racing.seen.candidateReads).toBe(2);
    expect(racing.seen.refusalReads).toBe(0);
    // Read, a batch that took nothing, the second read, the batch that claimed.
    expect(racing.seen.roundTrips).toBe(4);
    expect(racing.seen.statements).toBe(8);
    const { events, exposure } = await claimRecords(s.installationId);
    expect(events.map((e) => e.taskId)).toEqual([s.tasks[4]]);
    expect(exposure.map((x) => x.taskId)).toEqual([s.tasks[4]]);
  });

  it("a reviewer asking twice at once is given the same task twice (the second a renewal of its lease), with one exposure row for it", async () => {
    const s = await queueWithTasks("twice", 3);
    const [first, second] = await Promise.all([claimNextTask(env, s.actor, s.queueId, { reviewer: "mod-t" }), claimNextTask(env, s.actor, s.queueId, { reviewer: "mod-t" })]);
    expect(first?.id).toBe(s.tasks[0]);
    expect(second?.id).toBe(s.tasks[0]);
    const { events, exposure } = await claimRecords(s.installationId);
    expect(new Set(events.map((e) => e.taskId))).toEqual(new Set([s.tasks[0]]));
    expect(exposure.map((x) => x.taskId)).toEqual([s.tasks[0]]);
    const rows = (await env.DB.prepare("SELECT claimed_by AS claimedBy FROM human_tasks WHERE installation_id = ?1 ORDER BY due_at, priority DESC, id").bind(s.installationId).all<{ claimedBy: string | null }>()).results;
    expect(rows.map((r) => r.claimedBy)).toEqual(["api_key:key_twice/mod-t", null, null]);
  });

  it("reviewers asking at once each get a different task, in SLA order, until the queue is empty", async () => {
    const s = await queueWithTasks("burst", 4);
    const answers = await Promise.all(["a", "b", "c", "d", "e"].map((reviewer) => claimNextTask(env, s.actor, s.queueId, { reviewer })));
    const got = answers.filter((a) => a !== null).map((a) => a!.id);
    expect(got.sort()).toEqual([...s.tasks].sort());
    expect(answers.filter((a) => a === null)).toHaveLength(1);
  });

  it("reviewers asking at once: each claim leaves one audit event and one exposure row, by its reviewer, of the task it took", async () => {
    const s = await queueWithTasks("records", 4);
    const answers = await Promise.all(["a", "b", "c", "d"].map((reviewer) => claimNextTask(env, s.actor, s.queueId, { reviewer })));
    const got = new Map(answers.map((a) => [a!.id, a!]));
    expect([...got.keys()].sort()).toEqual([...s.tasks].sort());
    const { events, exposure } = await claimRecords(s.installationId);
    expect(events.map((e) => e.taskId).sort()).toEqual([...s.tasks].sort());
    for (const event of events) expect(JSON.parse(event.detailsJson).leaseExpiresAt).toBe(got.get(event.taskId)!.claim!.leaseExpiresAt);
    expect(exposure.map((x) => x.taskId).sort()).toEqual([...s.tasks].sort());
    for (const x of exposure) expect(x).toMatchObject({ reviewer: `api_key:key_records/${got.get(x.taskId)!.claim!.reviewer}`, startedAt: got.get(x.taskId)!.claim!.claimedAt });
  });
});

describe("/next's plan", () => {
  it("its candidates, capped or not and with or without their categories, are index walks of the queue's tasks (no scan of human_tasks)", async () => {
    for (const category of [true, false]) {
      const sql = candidatesSql({ installation: "?1", queue: "?2", now: "?3", capped: 4, label: "?5", principal: "?6", limit: "?7" }, category);
      const plan = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind("ins", "q", "2026-01-01", "[]", "l", "p", 4).all<{ detail: string }>()).results.map((row) => row.detail);
      const text = plan.join("\n");
      expect(text).toMatch(/SEARCH t USING (COVERING )?INDEX/u);
      expect(text).not.toMatch(/\bSCAN t\b(?! USING)/u);
    }
  });

  it("the claim's update, audit event and exposure row walk the list of candidates and look each task up by its key (no scan of human_tasks)", async () => {
    for (const [sql, binds] of [
      [CLAIM_FIRST_SQL, ["ins", '["a","b"]', "r", "2026-01-01", "2026-01-02", "p", "l"]],
      [CLAIM_EXPOSURE_SQL, ["ins", '[["a","x"],["b","y"]]', "r", "2026-01-01"]],
    ] as const) {
      const plan = (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .bind(...binds)
          .all<{ detail: string }>()
      ).results.map((row) => row.detail);
      const text = plan.join("\n");
      expect(text).toMatch(/SCAN c VIRTUAL TABLE/u);
      expect(text).toMatch(/SEARCH t USING INDEX sqlite_autoindex_human_tasks_1 \(id=\?\)/u);
      expect(text).not.toMatch(/\bSCAN (t|human_tasks)\b/u);
    }
    // The claim's events, each guarded by its task's row (auditEachTargetStatement): a key lookup per event.
    const guard = rowGuardClause({ table: "human_tasks", where: { installation_id: "ins", claimed_by: "r", lease_expires_at: "x", updated_at: "y" } }, 3, "e.target_id");
    const plan = (
      await env.DB.prepare(`EXPLAIN QUERY PLAN ${auditEventsSql(guard.sql.replace(/^WHERE /u, "AND "))}`)
        .bind("ins", "[]", ...guard.binds)
        .all<{ detail: string }>()
    ).results.map((row) => row.detail);
    expect(plan.join("\n")).toMatch(/SEARCH human_tasks (EXISTS )?USING INDEX sqlite_autoindex_human_tasks_1 \(id=\?\)/u);
    expect(plan.join("\n")).not.toMatch(/\bSCAN (human_tasks|audit_events)\b/u);
  });
});
