// What report intake sends to D1, counted statement by statement, up to its trigger's run being
// started: the case's upsert answers the triggers, the request's audit events are one insert, and
// nothing marks the run between its insert and its instance's first step. The records are the ones
// intake always wrote (the report, its case, notice, receipt, terms, each audited once, the run
// and workflow.run_created); a replay writes none of them again, and a run whose instance was never
// created is still found by the dispatch sweep and run to its end.
import { createExecutionContext, env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { auditStatement, mergeAuditStatements } from "../src/audit";
import type { Actor } from "../src/auth";
import { caseUpsertSql, intakeReport, type ReportInput } from "../src/cases/reports/reports";
import { createRun, redispatchPendingRuns } from "../src/workflows";
import { api, newInstallation, publish, waitForRun, startEndGraph } from "./helpers";
import { watchedEnv } from "./d1-watch";

/** An ExecutionContext with the Worker's exports (starting an instance needs them). */
function context(): ExecutionContext {
  const ctx = createExecutionContext();
  if (!(ctx as { exports?: unknown }).exports) Object.defineProperty(ctx, "exports", { value: exports });
  return ctx;
}

/** The test's env whose D1 binding records every statement sent through it (each statement of a batch on its own) and every round trip. */
function countingEnv() {
  const sent = { statements: [] as string[], roundTrips: 0 };
  const counting = watchedEnv(({ sqls }) => {
    sent.roundTrips += 1;
    sent.statements.push(...sqls);
  });
  return { env: counting, sent };
}

/** A notice whose notifier left a contact (so intake records a receipt, unsent: no message.send endpoint), with a description (search terms). */
const notice = (subjectId: string): ReportInput => ({
  subject: { kind: "content", id: subjectId, snapshot: { text: "double your crypto" } },
  category: "scams_and_fraud",
  source: "notice",
  reporter: { id: "reporter-1", contact: "reporter-1@example.org" },
  description: "a fake investment site",
});

/** An installation with one trigger that starts a start → end workflow for every report, warmed by two reports (so intake assumes its senders). */
async function installationWithTrigger(label: string) {
  const inst = await newInstallation(`intake-statements-${label}`);
  const version = await publish(inst.apiKey, startEndGraph);
  const trigger = await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  for (const subject of ["warm-1", "warm-2"]) expect((await api("/api/v1/reports", { key: inst.apiKey, body: notice(`${label}-${subject}`) })).status).toBe(201);
  const actor: Actor = { installationId: inst.id, scopes: ["reports:write"], audit: { type: "api_key", id: `key_${label}` } };
  return { ...inst, versionId: version.id, triggerId: trigger.body.id as string, actor };
}

const auditActions = async (installationId: string, targets: string[]) =>
  (
    await env.DB.prepare("SELECT action, target_id AS target FROM audit_events WHERE installation_id = ?1 AND target_id IN (SELECT value FROM json_each(?2)) ORDER BY seq")
      .bind(installationId, JSON.stringify(targets))
      .all<{ action: string; target: string }>()
  ).results;

describe("report intake's statements", () => {
  it("a notice with a receipt and a matching trigger is recorded and its run started in 8 statements: the triggers answered by the case's upsert, one audit insert, no queued update", async () => {
    const s = await installationWithTrigger("count");
    const counting = countingEnv();
    const outcome = await intakeReport(counting.env, context(), s.actor, notice("counted-1"));
    const statements = counting.sent.statements;
    // The case, the report, the notice, the receipt message, the audit events, the search terms; the run and workflow.run_created.
    expect(statements.map((sql) => sql.replace(/\s+/gu, " ").trim().slice(0, 40))).toHaveLength(8);
    expect(counting.sent.roundTrips).toBe(2);
    expect(statements.filter((sql) => /^\s*SELECT\b[\s\S]*\bFROM triggers\b/u.test(sql))).toEqual([]);
    expect(statements.filter((sql) => sql.includes("INSERT INTO audit_events"))).toHaveLength(2);
    expect(statements.filter((sql) => sql.includes("state = 'queued'"))).toEqual([]);
    // What the request answers and records is what intake always answered and recorded.
    expect(outcome.replayed).toBe(false);
    expect(outcome.runs).toEqual([{ triggerId: s.triggerId, runId: expect.stringMatching(/^run_/u), state: "queued" }]);
    const runId = outcome.runs[0]!.runId!;
    const messageId = `${outcome.report.id}:notice_receipt`;
    expect(await auditActions(s.id, [outcome.report.id, messageId, runId])).toEqual([
      { action: "report.received", target: outcome.report.id },
      { action: "notifier.message_unsent", target: messageId },
      { action: "workflow.run_created", target: runId },
    ]);
    const rows = await env.DB.prepare(
      `SELECT (SELECT COUNT(*) FROM notifier_notices WHERE report_id = ?1) AS notices, (SELECT COUNT(*) FROM messages WHERE id = ?2) AS messages,
        (SELECT COUNT(*) FROM search_terms WHERE record_id = ?1) AS terms, (SELECT report_count FROM cases WHERE id = ?3) AS caseReports`,
    )
      .bind(outcome.report.id, messageId, outcome.report.caseId)
      .first<{ notices: number; messages: number; terms: number; caseReports: number }>();
    expect(rows).toMatchObject({ notices: 1, messages: 1, caseReports: 1 });
    expect(rows!.terms).toBeGreaterThan(0);
    // The run goes from dispatch_pending to running with its instance's first step, and ends.
    const done = await waitForRun(s.apiKey, runId);
    expect(done.state).toBe("succeeded");
    expect(done.reportId).toBe(outcome.report.id);
  });

  it("the triggers the case's upsert answers are every enabled one, oldest first, each evaluated as before: a false `when` starts nothing, a disabled trigger is not read", async () => {
    const s = await installationWithTrigger("triggers");
    const trigger = async (when: string, enabled = true) => {
      const created = await api("/api/v1/triggers", { key: s.apiKey, body: { event: "report.created", when, workflowVersionId: s.versionId, authorityMode: "autonomous", enabled } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      return created.body.id as string;
    };
    await trigger("report.evidenceCount > 5");
    await trigger("true", false);
    const firstOfCase = await trigger("report.source == 'notice' && report.caseReportCount == 1");
    const outcome = await intakeReport(env, context(), s.actor, notice("triggers-1"));
    expect(outcome.runs.map((run) => run.triggerId)).toEqual([s.triggerId, firstOfCase]);
    expect(outcome.runs.every((run) => run.state === "queued" && run.runId)).toBe(true);
    // The second report of the subject: its case's count is 2, so the last trigger does not match.
    const again = await intakeReport(env, context(), s.actor, notice("triggers-1"));
    expect(again.report.caseReportCount).toBe(2);
    expect(again.runs.map((run) => run.triggerId)).toEqual([s.triggerId]);
  });

  it("the case's upsert reads the triggers, their versions and workflows each by an index, never a table walk", async () => {
    const binds = [null, "inst", "content", "post-1", null, null, null, null, null, null, "key-1", null, "2026-01-01T00:00:00.000Z", null, null, null, null, "case_1", "subject-key"];
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${caseUpsertSql(18, undefined)}`)
      .bind(...binds)
      .all<{ detail: string }>();
    const details = results.map((row) => row.detail);
    expect(details.filter((detail) => /^SCAN (triggers|workflow_versions|workflows|workflow_artifacts)\b/u.test(detail))).toEqual([]);
    expect(details.some((detail) => detail.startsWith("SEARCH triggers USING INDEX triggers_event"))).toBe(true);
  });

  it("a replay of the notice under its Idempotency-Key answers the first report and run and writes nothing again", async () => {
    const s = await installationWithTrigger("replay");
    const key = `intake-replay-${crypto.randomUUID()}`;
    const first = await intakeReport(env, context(), s.actor, notice("replayed-1"), key);
    const counting = countingEnv();
    const again = await intakeReport(counting.env, context(), s.actor, notice("replayed-1"), key);
    expect(again.replayed).toBe(true);
    expect(again.report.id).toBe(first.report.id);
    expect(again.runs.map((run) => run.runId)).toEqual(first.runs.map((run) => run.runId));
    const counted = await env.DB.prepare(
      `SELECT (SELECT COUNT(*) FROM reports WHERE installation_id = ?1 AND subject_id = 'replayed-1') AS reports,
        (SELECT COUNT(*) FROM workflow_runs WHERE installation_id = ?1 AND report_id = ?2) AS runs,
        (SELECT COUNT(*) FROM messages WHERE installation_id = ?1 AND report_id = ?2) AS messages,
        (SELECT report_count FROM cases WHERE id = ?3) AS caseReports,
        (SELECT COUNT(*) FROM audit_events WHERE installation_id = ?1 AND action IN ('report.received', 'notifier.message_unsent', 'workflow.run_created')) AS events`,
    )
      .bind(s.id, first.report.id, first.report.caseId)
      .first<{ reports: number; runs: number; messages: number; caseReports: number; events: number }>();
    // Two warm-up reports and this one: each received, told unsent, and its run created, once.
    expect(counted).toEqual({ reports: 1, runs: 1, messages: 1, caseReports: 1, events: 9 });
    // The replay read its report and the triggers in one round trip beside its batch.
    expect(counting.sent.statements.filter((sql) => /^\s*SELECT\b[\s\S]*\bFROM triggers\b/u.test(sql))).toHaveLength(1);
  });

  it("a run whose instance was never created stays dispatch_pending, and the dispatch sweep starts it and it runs to its end", async () => {
    const s = await installationWithTrigger("lost");
    const ctx = context();
    // The create is lost (the isolate went away after the run's batch): nothing reaches Workflows.
    const { run } = await createRun(env, ctx, s.actor, { workflowVersionId: s.versionId, authorityMode: "autonomous", input: {}, idempotencyKey: `lost:${crypto.randomUUID()}` }, { start: async () => undefined as never });
    expect(run.state).toBe("queued");
    const stored = () => env.DB.prepare("SELECT state FROM workflow_runs WHERE id = ?").bind(run.id).first<{ state: string }>();
    expect((await stored())?.state).toBe("dispatch_pending");
    // A minute and more later, the sweep finds it pending and dispatches it.
    let swept = { redispatched: 0, failed: 0, deferred: 0, more: 1 };
    for (let slice = 0; slice < 40 && swept.more; slice++) swept = await redispatchPendingRuns(env, ctx, new Date(Date.now() + 120_000), 25);
    const done = await waitForRun(s.apiKey, run.id);
    expect(done.state).toBe("succeeded");
    const redispatched = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'workflow.run_redispatched' AND target_id = ?2").bind(s.id, run.id).first<{ n: number }>();
    expect(redispatched?.n).toBe(1);
  });
});

describe("the dispatch sweep and a run slow to take its first step", () => {
  it("finds its instance already there: marks it queued, neither counts nor audits it as redispatched", async () => {
    const s = await installationWithTrigger("slow");
    const ctx = context();
    const { run } = await createRun(env, ctx, s.actor, { workflowVersionId: s.versionId, authorityMode: "autonomous", input: {}, idempotencyKey: `slow:${crypto.randomUUID()}` }, { start: async () => undefined as never });
    // Its instance exists (created, not yet at its first step): Workflows answers a create of that id so.
    const exists = async () => {
      throw new Error("instance.already_exists: an instance with this id already exists");
    };
    const swept = await redispatchPendingRuns(env, ctx, new Date(Date.now() + 120_000), 25, exists);
    expect(swept).toMatchObject({ redispatched: 0, failed: 0, deferred: 0 });
    expect((await env.DB.prepare("SELECT state FROM workflow_runs WHERE id = ?").bind(run.id).first<{ state: string }>())?.state).toBe("queued");
    const audited = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.run_redispatched' AND target_id = ?1").bind(run.id).first<{ n: number }>();
    expect(audited?.n).toBe(0);
  });
});

describe("createRun's start, with no write after it", () => {
  it("a repeat whose run moved on before its create reached the sandbox's binding answers the run as it stands, not a 503", async () => {
    const s = await installationWithTrigger("moved-on");
    const ctx = context();
    const input = { workflowVersionId: s.versionId, authorityMode: "autonomous" as const, input: {}, idempotencyKey: `moved:${crypto.randomUUID()}` };
    // The first call's create is lost: the run is left dispatch_pending.
    const { run } = await createRun(env, ctx, s.actor, input, { start: async () => undefined as never });
    // The repeat reads it pending; by the time its create is checked, the run has taken its first step (as its instance would).
    const repeat = await createRun(env, ctx, s.actor, input, {
      start: async (_env, _ctx, started) => {
        await env.DB.prepare("UPDATE workflow_runs SET state = 'running', started_at = ?2, updated_at = ?2 WHERE id = ?1").bind(started.runId, new Date().toISOString()).run();
        throw new Error("runtime.instance_denied");
      },
    });
    expect(repeat.replayed).toBe(true);
    expect(repeat.run).toMatchObject({ id: run.id, state: "running" });
  });
});

describe("mergeAuditStatements", () => {
  it("writes a batch's audit events in one statement, each only if the row it is guarded on exists, numbered without a gap", async () => {
    const { id } = await newInstallation("merge-audit");
    const at = new Date().toISOString();
    const event = (key: string, action: string) => ({ installationId: id, idempotencyKey: `${key}:${crypto.randomUUID()}`, action, actor: { type: "system" as const, id: "test" }, target: { type: "test", id: key }, details: { key }, at });
    const before = (await env.DB.prepare("SELECT COALESCE(MAX(seq), 0) AS seq FROM audit_events WHERE installation_id = ?").bind(id).first<{ seq: number }>())!.seq;
    // A guard on a row that exists (the installation's key), one on a report that does not, and an unguarded event.
    const keyId = (await env.DB.prepare("SELECT id FROM api_keys WHERE installation_id = ?").bind(id).first<{ id: string }>())!.id;
    const statements = mergeAuditStatements(env.DB, [
      env.DB.prepare("SELECT 1 AS before"),
      auditStatement(env.DB, event("kept", "test.kept"), { table: "api_keys", id: keyId, where: { installation_id: id } }),
      auditStatement(env.DB, event("dropped", "test.dropped"), { table: "reports", id: "rpt_missing" }),
      auditStatement(env.DB, event("plain", "test.plain")),
      env.DB.prepare("SELECT 1 AS after"),
    ]);
    expect(statements).toHaveLength(3);
    await env.DB.batch(statements);
    const rows = (await env.DB.prepare("SELECT seq, action FROM audit_events WHERE installation_id = ?1 AND seq > ?2 ORDER BY seq").bind(id, before).all<{ seq: number; action: string }>()).results;
    expect(rows).toEqual([
      { seq: before + 1, action: "test.kept" },
      { seq: before + 2, action: "test.plain" },
    ]);
  });
});
