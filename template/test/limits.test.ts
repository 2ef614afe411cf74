// The limits that bind at volume: one writer for each installation's R2 anchor, sweeps that drain
// their backlog, run admission that waits at the Workflows creation rate, and analytics computed
// from rollups. Each test creates its own installations and counts only what it created.
import { createExecutionContext, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepAuditChains } from "../src/audit/chain-sweep";
import { runSchedule, type Sweep } from "../src/schedule";
import type { Actor } from "../src/auth";
import { rollupTransparencyDay } from "../src/metrics";
import { transparencyReport } from "../src/metrics/transparency";
import { sweepRunArchive } from "../src/workflows/run-archive";
import { DISPATCH_BACKOFF_BASE_S, dispatchRun, type StartInstance } from "../src/workflows/run-dispatch";
import { createRun } from "../src/workflows/runs";
import { getRunRow } from "../src/workflows/runs-queries";
import { api, personKey, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

const anchorObject = (installationId: string) => env.AUDIT_ANCHORS.head(`audit/${installationId}/head.json`);
const anchorDue = async (installationId: string) => env.DB.prepare("SELECT seq FROM audit_anchor_due WHERE installation_id = ?").bind(installationId).first<{ seq: number }>();
const newestCheckpoint = async (installationId: string) =>
  env.DB.prepare("SELECT seq, head_hash AS headHash FROM audit_checkpoints WHERE installation_id = ? ORDER BY seq DESC LIMIT 1").bind(installationId).first<{ seq: number; headHash: string }>();

describe("one anchor writer per installation", () => {
  it("after-write seals checkpoint in D1 and leave the anchor to the schedule, which moves it once", async () => {
    const { id, apiKey } = await newInstallation();
    for (let index = 0; index < 3; index++) {
      expect((await api("/api/v1/workflows", { key: apiKey, body: { name: `wf-${index}` } })).status).toBe(201);
      // Past the after-write coalescing window, so every write's own seal runs.
      await new Promise((resolve) => setTimeout(resolve, 2_100));
    }
    // Every write was linked and checkpointed in D1; R2 was never written.
    const checkpoint = await newestCheckpoint(id);
    expect(checkpoint?.seq).toBeGreaterThanOrEqual(3);
    expect(await anchorObject(id)).toBeNull();
    expect((await anchorDue(id))?.seq).toBe(checkpoint!.seq);
    // The scheduled sweep is the writer: one put, the due mark gone.
    const summary = await sweepAuditChains(env);
    expect(summary.anchored).toBeGreaterThanOrEqual(1);
    const anchored = await anchorObject(id);
    expect(anchored).not.toBeNull();
    expect(await (await env.AUDIT_ANCHORS.get(`audit/${id}/head.json`))!.json()).toMatchObject({ seq: checkpoint!.seq, headHash: checkpoint!.headHash });
    expect(await anchorDue(id)).toBeNull();
    // More writes: the anchor object is untouched until the next sweep.
    expect((await api("/api/v1/workflows", { key: apiKey, body: { name: "later" } })).status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await anchorObject(id))?.etag).toBe(anchored!.etag);
    expect(await anchorDue(id)).not.toBeNull();
  }, 30_000);

  it("a verification right after the anchor moved does not write it again within a second; the mark stays for the sweep", async () => {
    const { id, apiKey } = await newInstallation();
    expect((await api("/api/v1/workflows", { key: apiKey, body: { name: "one" } })).status).toBe(201);
    const first = await api("/api/v1/audit/verify", { key: apiKey });
    expect(first.body).toMatchObject({ ok: true, anchored: true });
    const held = await anchorObject(id);
    expect(held).not.toBeNull();
    expect((await api("/api/v1/workflows", { key: apiKey, body: { name: "two" } })).status).toBe(201);
    const second = await api("/api/v1/audit/verify", { key: apiKey });
    expect(second.body).toMatchObject({ ok: true });
    const after = await anchorObject(id);
    if (Date.now() - held!.uploaded.getTime() < 900) {
      // Within the second: the anchor stayed, and the schedule will move it.
      expect(after!.etag).toBe(held!.etag);
      expect(await anchorDue(id)).not.toBeNull();
    }
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await sweepAuditChains(env);
    const checkpoint = await newestCheckpoint(id);
    expect(await (await env.AUDIT_ANCHORS.get(`audit/${id}/head.json`))!.json()).toMatchObject({ seq: checkpoint!.seq });
    expect(await anchorDue(id)).toBeNull();
    expect((await api("/api/v1/audit/verify?mode=full", { key: apiKey })).body).toMatchObject({ ok: true });
  }, 30_000);
});

const straight = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "done", kind: "end", config: { terminal_code: "done" } },
  ],
  edges: [edge("start", "success", "done")],
};

describe("sweeps whose work grows with their backlog", () => {
  const cron = { cron: "* * * * *", scheduledTime: Date.now() + 5_000 };

  it("a backlog of five slices is drained in one scheduled run, and the next run finds nothing", async () => {
    const inst = await newInstallation("backlog");
    expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
    const version = await publish(inst.apiKey, straight);
    const runs: string[] = [];
    for (let index = 0; index < 9; index++) runs.push((await startRun(inst.apiKey, version.id)).id);
    for (const id of runs) expect((await waitForRun(inst.apiKey, id)).state).toBe("succeeded");
    // The real run-archive sweep, scoped to this installation, two runs a slice: nine need five slices.
    const archive: Sweep = { name: "workflows.archive_runs", run: (env, now) => sweepRunArchive(env, now, { limit: 2, installationId: inst.id }), more: (s) => s.more === 1 };
    const first = await runSchedule(env, { ...cron, scheduledTime: Date.now() + 5_000 }, [archive]);
    expect(first.sweeps[0]).toMatchObject({ ok: true, summary: { archived: 9, failed: 0, slices: 5, more: 0 } });
    const archived = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ? AND archived_at IS NOT NULL").bind(inst.id).first<{ n: number }>();
    expect(archived?.n).toBe(9);
    // Idempotent: the next run has one empty slice.
    const second = await runSchedule(env, { ...cron, scheduledTime: Date.now() + 5_000 }, [archive]);
    expect(second.sweeps[0]).toMatchObject({ ok: true, summary: { archived: 0, slices: 1, more: 0 } });
  }, 60_000);

  it("further slices stop at the time budget and at MAX_SLICES; a sweep without `more` runs once", async () => {
    let calls = 0;
    const endless: Sweep = {
      name: "test.endless",
      run: async () => {
        calls += 1;
        return { done: 1, more: 1 };
      },
      more: (s) => s.more === 1,
    };
    let once = 0;
    const plain: Sweep = {
      name: "test.plain",
      run: async () => {
        once += 1;
        return { done: 1, more: 1 };
      },
    };
    const run = await runSchedule(env, cron, [endless, plain]);
    expect(run.sweeps[0]!.summary).toEqual({ done: 10, more: 1, slices: 10 });
    expect(once).toBe(1);
    // No budget left: the first slice only.
    calls = 0;
    const slow: Sweep = {
      name: "test.slow",
      run: async () => {
        await new Promise((r) => setTimeout(r, 50));
        calls += 1;
        return { more: 1 };
      },
      more: (s) => s.more === 1,
    };
    const limited = await runSchedule(env, cron, [slow], undefined, { budgetMs: 120 });
    expect(limited.sweeps[0]!.summary).toMatchObject({ more: 1 });
    expect(calls).toBeLessThan(4);
    // The D1 query budget: slices of 30 queries within 100 stop after three (a fourth would pass it).
    const querying: Sweep = {
      name: "test.querying",
      run: async (e) => {
        for (let index = 0; index < 30; index++) await e.DB.prepare("SELECT 1").first();
        return { more: 1 };
      },
      more: (s) => s.more === 1,
    };
    const queried = await runSchedule(env, cron, [querying], undefined, { queryBudget: 100 });
    expect(queried.sweeps[0]!.summary).toMatchObject({ slices: 3, more: 1 });
    // A later slice that throws keeps the earlier slices' work and marks the sweep failed.
    let slice = 0;
    const flaky: Sweep = {
      name: "test.flaky",
      run: async () => {
        slice += 1;
        if (slice === 3) throw new Error("boom");
        return { done: 1, more: 1 };
      },
      more: (s) => s.more === 1,
    };
    const failed = await runSchedule(env, cron, [flaky]);
    expect(failed.sweeps[0]).toMatchObject({ ok: false, summary: { done: 2, slices: 2 } });
  });
});

describe("run admission waits at the Workflows creation rate", () => {
  it("a create refused for the rate three times leaves the run pending with a growing backoff; the queue then starts it, once", async () => {
    const inst = await newInstallation("admission");
    const version = await publish(inst.apiKey, straight);
    const actor: Actor = { installationId: inst.id, scopes: ["admin"], audit: { type: "system", id: "test" } };
    // The Workflows create as a trigger storm meets it: refused for the rate.
    let refused = 0;
    const refusing: StartInstance = async () => {
      refused += 1;
      throw new Error("Workflows: too many requests, rate limited; try again later");
    };
    const ctx = createExecutionContext();
    const { run } = await createRun(env, ctx, actor, { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, idempotencyKey: `storm:${crypto.randomUUID()}` }, { start: refusing });
    expect(run.state).toBe("dispatch_pending");
    const admission = () => env.DB.prepare("SELECT state, dispatch_attempts AS attempts, dispatch_after AS after FROM workflow_runs WHERE id = ?").bind(run.id).first<{ state: string; attempts: number; after: string }>();
    const afterFirst = (await admission())!;
    expect(afterFirst).toMatchObject({ state: "dispatch_pending", attempts: 1 });
    // Two more refusals (as the queue's tries would meet them): still pending, never failed, the backoff grows.
    for (let index = 0; index < 2; index++) expect(await dispatchRun(env, ctx, (await getRunRow(env.DB, inst.id, run.id))!, refusing)).toBe("deferred");
    const afterThird = (await admission())!;
    expect(refused).toBe(3);
    expect(afterThird).toMatchObject({ state: "dispatch_pending", attempts: 3 });
    expect(afterThird.after > afterFirst.after).toBe(true);
    // Each deferral is due its backoff after it was written (base × 2^refusals before it, plus up to a
    // quarter of jitter), and the third was written after the first: their due times lie at least
    // 4 × base − 1.25 × base apart, whatever the clock says.
    expect(Date.parse(afterThird.after) - Date.parse(afterFirst.after)).toBeGreaterThanOrEqual((4 * DISPATCH_BACKOFF_BASE_S - Math.ceil(1.25 * DISPATCH_BACKOFF_BASE_S)) * 1000);
    // The creates are allowed again: the RUN_OPERATIONS message of the last refusal starts it after
    // its backoff (the earlier messages find it not due yet and do nothing).
    const done = await waitForRun(inst.apiKey, run.id, ["succeeded", "failed", "repair_required", "terminated"], 30_000);
    expect(done.state).toBe("succeeded");
    expect(done.instanceId).toBe(run.id);
    expect(done.steps.filter((step: { nodeId: string }) => step.nodeId === "start")).toHaveLength(1);
    const created = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ? AND action = 'workflow.run_created' AND target_id = ?").bind(inst.id, run.id).first<{ n: number }>();
    expect(created?.n).toBe(1);
    // A late try (a redelivered message) finds it started and does nothing.
    const { admitDeferredRun } = await import("../src/workflows/run-dispatch");
    expect(await admitDeferredRun(env, ctx, inst.id, run.id, refusing)).toBe("not_pending");
    expect(refused).toBe(3);
  }, 45_000);
});

/** env with its DB counted: statements run and rows read (D1's meta.rows_read), batches included. */
function countingEnv() {
  const stats = { statements: 0, rowsRead: 0 };
  const targets = new WeakMap<object, D1PreparedStatement>();
  const track = <T extends { meta?: { rows_read?: number } }>(result: T) => {
    stats.statements += 1;
    stats.rowsRead += result.meta?.rows_read ?? 0;
    return result;
  };
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, property) {
        if (property === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        if (property === "all" || property === "run") return async () => track(await target.all());
        if (property === "first")
          return async (column?: string) => {
            const row = (track(await target.all()).results[0] ?? null) as Record<string, unknown> | null;
            return column ? (row?.[column] ?? null) : row;
          };
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    targets.set(proxy, statement);
    return proxy;
  };
  const DB = new Proxy(env.DB, {
    get(target, property) {
      if (property === "prepare") return (sql: string) => wrap(target.prepare(sql));
      if (property === "batch") return async (statements: D1PreparedStatement[]) => (await target.batch(statements.map((s) => targets.get(s) ?? s))).map((result) => track(result));
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { env: { ...env, DB } as Env, stats };
}

describe("the transparency report over a long period reads daily rollups", () => {
  const DAY = 86_400_000;
  const SHIFT_DAYS = 60;
  /** Moves every row the report counts of this installation SHIFT_DAYS back, as if written then. */
  const backdate = async (installationId: string) => {
    const shift = `'-${SHIFT_DAYS} days'`;
    const at = (column: string) => `${column} = strftime('%Y-%m-%dT%H:%M:%fZ', ${column}, ${shift})`;
    await env.DB.batch([
      env.DB.prepare(`UPDATE reports SET ${at("created_at")} WHERE installation_id = ? AND created_at > ?`).bind(installationId, new Date(Date.now() - DAY).toISOString()),
      env.DB.prepare(`UPDATE decisions SET ${at("created_at")} WHERE installation_id = ? AND created_at > ?`).bind(installationId, new Date(Date.now() - DAY).toISOString()),
      env.DB.prepare(`UPDATE appeals SET ${at("created_at")}, decided_at = CASE WHEN decided_at IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', decided_at, ${shift}) END WHERE installation_id = ? AND created_at > ?`).bind(
        installationId,
        new Date(Date.now() - DAY).toISOString(),
      ),
    ]);
  };
  const notice = async (key: string, subject: string, category = "violence") => {
    const response = await api("/api/v1/reports", { key, body: { subject: { kind: "content", id: subject }, category, source: "notice" } });
    expect(response.status).toBe(201);
    return response.body.id as string;
  };
  const decide = async (key: string, reportId: string, body: Record<string, unknown>) => {
    const response = await api("/api/v1/decisions", { key, body: { reportId, statement: "Against the rules.", ...body } });
    expect(response.status).toBe(201);
    return response.body.id as string;
  };
  const withoutMedians = (report: any) => {
    const sections = structuredClone(report.sections);
    delete sections.notices.timeToAct.medianSeconds;
    for (const value of Object.values(sections.notices.timeToAct.bySubmitter) as any[]) delete value.medianSeconds;
    delete sections.complaints.medianSecondsToDecide;
    return sections;
  };

  it("gives the same counts as the rows, and reads as many rows with three times the reports", async () => {
    const inst = await newInstallation("transparency-rollups");
    const actor: Actor = { installationId: inst.id, scopes: ["admin"], audit: { type: "system", id: "test" } };
    const reports = [await notice(inst.apiKey, "a-1"), await notice(inst.apiKey, "a-2", "scams_and_fraud"), await notice(inst.apiKey, "a-3")];
    const removed = await decide(inst.apiKey, reports[0]!, { outcome: "remove", restrictions: { visibility: ["content_removed"] } });
    await decide(inst.apiKey, reports[1]!, { outcome: "suspend", restrictions: { account: "suspended" }, ground: "illegal_content", legalGround: "Criminal code s. 1" });
    const filed = await api("/api/v1/appeals", { key: inst.apiKey, body: { decisionId: removed, reason: "I disagree." } });
    expect(filed.status).toBe(201);
    expect((await api(`/api/v1/appeals/${filed.body.id}/resolve`, { key: await personKey(inst.apiKey), body: { outcome: "upheld" } })).status).toBe(200);
    await backdate(inst.id);
    const day = Math.floor((Date.now() - SHIFT_DAYS * DAY) / DAY) * DAY;
    const month = { from: new Date(day - 10 * DAY).toISOString(), to: new Date(day + 10 * DAY).toISOString() };
    const year = { from: new Date(Date.now() - 399 * DAY).toISOString(), to: new Date().toISOString() };

    // A short period: from the rows, as before.
    const short = await transparencyReport(env, actor, month);
    expect(short.computedFrom).toBe("rows");
    expect(short.sections.notices.received.total).toBe(3);
    // The long period before any day is rolled up: the rows as well, through the same statements.
    const unrolled = await transparencyReport(env, actor, year);
    expect(unrolled.computedFrom).toBe("daily_rollups");
    expect(withoutMedians(unrolled)).toEqual(withoutMedians(short));
    // Rolled up (the written rows may straddle midnight: the day before and after too).
    for (const d of [day - DAY, day, day + DAY]) await rollupTransparencyDay(env.DB, inst.id, d);
    const counted = countingEnv();
    const rolled = await transparencyReport(counted.env, actor, year);
    expect(withoutMedians(rolled)).toEqual(withoutMedians(short));
    expect(rolled.sections.notices.timeToAct.actedOn).toBe(2);
    expect(rolled.sections.complaints.decided.total).toBe(1);
    const first = { ...counted.stats };
    const liveBefore = countingEnv();
    await transparencyReport(liveBefore.env, actor, month);

    // Three times the notices, in the same groups, rolled up again: the long report reads no more.
    for (let index = 0; index < 6; index++) await notice(inst.apiKey, `b-${index}`);
    await backdate(inst.id);
    for (const d of [day - DAY, day, day + DAY]) await rollupTransparencyDay(env.DB, inst.id, d);
    const again = countingEnv();
    const bigger = await transparencyReport(again.env, actor, year);
    expect(bigger.sections.notices.received.total).toBe(9);
    expect(again.stats.statements).toBe(first.statements);
    expect(again.stats.rowsRead).toBe(first.rowsRead);
    // The same period from the rows reads more with more reports (the cost the rollups avoid).
    const live = countingEnv();
    expect((await transparencyReport(live.env, actor, month)).sections.notices.received.total).toBe(9);
    expect(live.stats.rowsRead).toBeGreaterThan(liveBefore.stats.rowsRead);
  }, 60_000);
});
