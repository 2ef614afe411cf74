// Housekeeping on the schedule: each sweep fixes what it is for — a lapsed lease, a
// stuck dispatch, a wait whose deadline the engine missed, a stalled run, a pending delivery, an
// unsealed audit tail — and a second run finds nothing to do. The schedule records every sweep's
// counts in sweep_runs.
import { createExecutionContext, createScheduledController, env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import worker from "../src";
import { auditStatement, sweepAuditChains } from "../src/audit";
import { sweepLapsedLeases } from "../src/cases";
import { deliveryStatement, sweepPendingDeliveries } from "../src/enforcement";
import { runSchedule, SWEEPS } from "../src/schedule";
import { redispatchPendingRuns, sweepExpiredWaits, sweepStalledRuns } from "../src/workflows";
import { api, edge, newInstallation, publish, startRun, until, waitForRun, waitForWait, startEndGraph } from "./helpers";

const count = async (sql: string, ...binds: unknown[]) =>
  (
    await env.DB.prepare(sql)
      .bind(...binds)
      .first<{ n: number }>()
  )?.n ?? 0;

/** An ExecutionContext with the Worker's exports, as the scheduled event gets one (starting an instance needs them). */
function scheduledContext(): ExecutionContext {
  const ctx = createExecutionContext();
  if (!(ctx as { exports?: unknown }).exports) Object.defineProperty(ctx, "exports", { value: exports });
  return ctx;
}

const reviewGraph = (queue: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queue, response_schema: { type: "object" }, timeout_seconds: 3600 } },
    { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
});

const waitGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "await", kind: "wait_for_event", config: { event_type: "appeal.filed", timeout_seconds: 3600 } },
    { id: "received", kind: "end", config: { terminal_code: "received" } },
    { id: "late", kind: "end", config: { terminal_code: "timed_out" } },
  ],
  edges: [edge("start", "success", "await"), edge("await", "received", "received"), edge("await", "timeout", "late")],
};

describe("the lease sweep", () => {
  it("puts a lapsed lease back in its queue (open, no claimant, audited) and is a no-op the second time", async () => {
    const { apiKey } = await newInstallation();
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "leases", slaSeconds: 3600 } });
    const version = await publish(apiKey, reviewGraph("leases"));
    await startRun(apiKey, version.id);
    const task = await until(async () => (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items?.[0], "the task");
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: apiKey, body: { reviewer: "mod-a", leaseSeconds: 30 } })).status).toBe(200);
    // The reviewer walked away: the lease lapses.
    await env.DB.prepare("UPDATE human_tasks SET lease_expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?").bind(task.id).run();
    expect((await api(`/api/v1/queues/${queue.body.id}/stats`, { key: apiKey })).body).toMatchObject({ open: 1, claimed: 0 });

    expect(await sweepLapsedLeases(env)).toEqual({ released: 1 });
    const row = await env.DB.prepare("SELECT state, claimed_by AS claimedBy, lease_expires_at AS leaseExpiresAt FROM human_tasks WHERE id = ?").bind(task.id).first();
    expect(row).toEqual({ state: "open", claimedBy: null, leaseExpiresAt: null });
    const audit = await env.DB.prepare("SELECT actor_id AS actorId, details_json AS details FROM audit_events WHERE action = 'task.lease_lapsed' AND target_id = ?").bind(task.id).all();
    expect(audit.results).toHaveLength(1);
    expect(JSON.parse(String(audit.results[0]!.details))).toMatchObject({ reviewerId: expect.stringMatching(/^rvw_/u), leaseExpiresAt: "2000-01-01T00:00:00.000Z" });
    expect((await api(`/api/v1/queues/${queue.body.id}/stats`, { key: apiKey })).body).toMatchObject({ open: 1, claimed: 0 });

    expect(await sweepLapsedLeases(env)).toEqual({ released: 0 });
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'task.lease_lapsed' AND target_id = ?", task.id)).toBe(1);
    // A live lease is left alone, and the task can be claimed and completed as usual.
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: apiKey, body: { reviewer: "mod-b" } })).status).toBe(200);
    expect(await sweepLapsedLeases(env)).toEqual({ released: 0 });
    expect((await api(`/api/v1/tasks/${task.id}`, { key: apiKey })).body.claim.reviewer).toBe("mod-b");
  });
});

describe("the dispatch sweep", () => {
  it("starts a run left dispatch_pending, once; the run then runs to its end", async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const version = await publish(apiKey, startEndGraph);
    // What createRun leaves when starting the instance failed and nobody repeated the request.
    const runId = `run_${crypto.randomUUID().replace(/-/gu, "")}`;
    const before = new Date(Date.now() - 5 * 60_000).toISOString();
    await env.DB.prepare(`INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'autonomous', 'dispatch_pending', '{}', ?4, ?4)`)
      .bind(runId, installationId, version.id, before)
      .run();
    const fresh = `run_${crypto.randomUUID().replace(/-/gu, "")}`;
    await env.DB.prepare(`INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'autonomous', 'dispatch_pending', '{}', ?4, ?4)`)
      .bind(fresh, installationId, version.id, new Date().toISOString())
      .run();

    const first = await redispatchPendingRuns(env, scheduledContext());
    // `deferred`: creates refused for the Workflows creation rate; `more`: a full slice left more.
    expect(first).toEqual({ redispatched: 1, failed: 0, deferred: 0, more: 0 });
    const run = await waitForRun(apiKey, runId);
    expect(run).toMatchObject({ state: "succeeded", output: { terminalCode: "done" } });
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.run_redispatched' AND target_id = ?", runId)).toBe(1);
    // A dispatch younger than the grace may still be in its request: left alone.
    expect((await api(`/api/v1/runs/${fresh}`, { key: apiKey })).body.state).toBe("dispatch_pending");

    expect(await redispatchPendingRuns(env, scheduledContext())).toEqual({ redispatched: 0, failed: 0, deferred: 0, more: 0 });
    expect(await count("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ? AND node_id = 'done'", runId)).toBe(1);
    // Later, the fresh one is old enough too.
    expect(await redispatchPendingRuns(env, scheduledContext(), new Date(Date.now() + 5 * 60_000))).toEqual({ redispatched: 1, failed: 0, deferred: 0, more: 0 });
    expect(await waitForRun(apiKey, fresh)).toMatchObject({ state: "succeeded" });
  });
});

describe("the deadline sweep", () => {
  it("closes a wait whose deadline the engine missed: the run leaves by its timeout port, once", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph);
    const run = await startRun(apiKey, version.id);
    const { wait } = await waitForWait(apiKey, run.id);
    // The engine's timer is an hour out; in D1 the deadline passed two minutes ago (as after a lost timer).
    await env.DB.prepare("UPDATE workflow_waits SET deadline_at = ?2 WHERE id = ?1")
      .bind(wait.id, new Date(Date.now() - 2 * 60_000).toISOString())
      .run();

    expect(await sweepExpiredWaits(env)).toEqual({ closed: 1, failed: 0 });
    expect(await sweepExpiredWaits(env)).toEqual({ closed: 0, failed: 0 });
    const ended = await waitForRun(apiKey, run.id);
    expect(ended).toMatchObject({ state: "succeeded", output: { terminalCode: "timed_out" } });
    expect(ended.steps.find((step: any) => step.nodeId === "await")).toMatchObject({ state: "timed_out" });
    expect(ended.waits.find((w: any) => w.id === wait.id)).toMatchObject({ state: "timed_out" });
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.wait_deadline_passed' AND target_id = ?", run.id)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.wait_timed_out' AND target_id = ?", run.id)).toBe(1);
    expect(await sweepExpiredWaits(env)).toEqual({ closed: 0, failed: 0 });
  });

  it("a review task past its deadline expires and the run leaves by the timeout port", async () => {
    const { apiKey } = await newInstallation();
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "deadlines", slaSeconds: 60 } });
    const version = await publish(apiKey, reviewGraph("deadlines"));
    const run = await startRun(apiKey, version.id);
    const { wait } = await waitForWait(apiKey, run.id);
    await env.DB.prepare("UPDATE workflow_waits SET deadline_at = ?2 WHERE id = ?1")
      .bind(wait.id, new Date(Date.now() - 2 * 60_000).toISOString())
      .run();
    expect(await sweepExpiredWaits(env)).toEqual({ closed: 1, failed: 0 });
    expect(await waitForRun(apiKey, run.id)).toMatchObject({ state: "succeeded", output: { terminalCode: "expired" } });
    expect((await api(`/api/v1/queues/${queue.body.id}/tasks?state=expired`, { key: apiKey })).body.items).toHaveLength(1);
    expect(await sweepExpiredWaits(env)).toEqual({ closed: 0, failed: 0 });
  });

  it("leaves a wait alone before its deadline", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph);
    const run = await startRun(apiKey, version.id);
    await waitForWait(apiKey, run.id);
    expect(await sweepExpiredWaits(env)).toEqual({ closed: 0, failed: 0 });
    expect((await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body.state).toBe("waiting");
  });
});

describe("the stalled-run sweep", () => {
  it("flags a run with no progress past its node's timeout once per stall (workflow.run_stalled)", async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const version = await publish(apiKey, startEndGraph);
    const patient = await publish(apiKey, { ...startEndGraph, nodes: [{ id: "start", kind: "start", timeoutPolicy: { timeout_seconds: 86_400, retries: 0 } }, startEndGraph.nodes[1]] });
    const insert = (id: string, versionId: string, updatedAt: string) =>
      env.DB.prepare(`INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, current_node_id, created_at, updated_at)
        VALUES (?1, ?2, ?3, 'autonomous', 'running', '{}', 'start', ?4, ?4)`)
        .bind(id, installationId, versionId, updatedAt)
        .run();
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const stuck = `run_${crypto.randomUUID().replace(/-/gu, "")}`;
    const slow = `run_${crypto.randomUUID().replace(/-/gu, "")}`;
    await insert(stuck, version.id, hourAgo); // 300 s × 3 attempts allowed: stalled
    await insert(slow, patient.id, hourAgo); // a day allowed: not stalled

    const first = await sweepStalledRuns(env);
    expect(first.stalled).toBe(1);
    expect(await sweepStalledRuns(env)).toMatchObject({ stalled: 0 });
    const events = await env.DB.prepare("SELECT target_id AS runId, details_json AS details FROM audit_events WHERE action = 'workflow.run_stalled' AND installation_id = ?").bind(installationId).all();
    expect(events.results.map((row) => row.runId)).toEqual([stuck]);
    expect(JSON.parse(String(events.results[0]!.details))).toMatchObject({ state: "running", nodeId: "start", lastProgressAt: hourAgo });
    expect((await env.DB.prepare("SELECT stalled_at AS stalledAt FROM workflow_runs WHERE id = ?").bind(stuck).first())?.stalledAt).toBe(hourAgo);

    // It moved, then stalled again: a new stall, flagged again.
    const later = new Date(Date.now() - 1_800_000).toISOString();
    await env.DB.prepare("UPDATE workflow_runs SET updated_at = ?2 WHERE id = ?1").bind(stuck, later).run();
    expect((await sweepStalledRuns(env)).stalled).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.run_stalled' AND target_id = ?", stuck)).toBe(2);
  });
});

describe("the stalled-run sweep, waiting runs", () => {
  it("flags a waiting run whose wait is still open well after its deadline event", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph);
    const run = await startRun(apiKey, version.id);
    const { run: detail, wait } = await waitForWait(apiKey, run.id);
    // The deadline passed ten minutes ago and its event was recorded five minutes ago, yet the run never woke.
    await env.DB.batch([
      env.DB.prepare("UPDATE workflow_waits SET deadline_at = ?2 WHERE id = ?1").bind(wait.id, new Date(Date.now() - 600_000).toISOString()),
      env.DB.prepare("INSERT INTO workflow_events (id, installation_id, run_id, wait_id, type, payload_json, created_at) SELECT ?1, installation_id, id, ?2, 'workflow.wait_deadline', '{}', ?3 FROM workflow_runs WHERE id = ?4").bind(
        `${wait.id}:deadline`,
        wait.id,
        new Date(Date.now() - 300_000).toISOString(),
        run.id,
      ),
    ]);
    expect((await sweepStalledRuns(env)).stalled).toBe(1);
    expect((await sweepStalledRuns(env)).stalled).toBe(0);
    const flagged = await env.DB.prepare("SELECT details_json AS details FROM audit_events WHERE action = 'workflow.run_stalled' AND target_id = ?").bind(run.id).all();
    expect(flagged.results).toHaveLength(1);
    expect(JSON.parse(String(flagged.results[0]!.details))).toMatchObject({ state: "waiting", nodeId: "await", lastProgressAt: detail.updatedAt });
  });
});

describe("the outbox and audit sweeps", () => {
  it("re-queues a pending delivery that lost its message, once", async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: "https://hooks.product.test/ok/sweeps-outbox", retryBaseSeconds: 0, maxAttempts: 5 } });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: "/ok/sweeps-outbox", secret: endpoint.body.secret }) });
    const delivery = await deliveryStatement(env, {
      installationId,
      endpointId: endpoint.body.id,
      eventType: "message.send",
      sourceType: "message",
      sourceId: `msg-${crypto.randomUUID()}`,
      data: { text: "hello" },
      at: new Date(Date.now() - 3 * 60_000).toISOString(),
    });
    await env.DB.batch([delivery.statement]); // committed, never queued
    expect((await sweepPendingDeliveries(env)).requeued).toBe(1);
    expect((await sweepPendingDeliveries(env)).requeued).toBe(0);
    await until(async () => (await env.DB.prepare("SELECT state FROM webhook_deliveries WHERE id = ?").bind(delivery.id).first<{ state: string }>())?.state === "delivered", "the delivery");
    const log = (await (await env.RECEIVER.fetch("http://receiver/_control/log?path=/ok/sweeps-outbox")).json()) as { webhookId: string; verified: boolean }[];
    expect(log.filter((entry) => entry.webhookId === delivery.id && entry.verified)).toHaveLength(1);
  });

  it("seals an unsealed audit tail, and the second run seals nothing", async () => {
    const { id: installationId } = await newInstallation();
    await sweepAuditChains(env); // whatever the installation's creation left
    const at = new Date().toISOString();
    await env.DB.batch(
      [1, 2, 3].map((n) => auditStatement(env.DB, { installationId, idempotencyKey: `sweeps:tail:${n}:${crypto.randomUUID()}`, action: "test.tail", actor: { type: "system", id: "test" }, target: { type: "test", id: String(n) }, at })),
    );
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ? AND hash IS NULL", installationId)).toBe(3);
    const first = await sweepAuditChains(env);
    expect(first.sealed).toBe(3);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ? AND hash IS NULL", installationId)).toBe(0);
    expect((await sweepAuditChains(env)).sealed).toBe(0);
  });
});

describe("the schedule records what each sweep did", () => {
  it("one sweep_runs row per sweep per scheduled run, with its counts", async () => {
    const scheduledTime = new Date();
    await worker.scheduled(createScheduledController({ scheduledTime, cron: "* * * * *" }), env, scheduledContext());
    const { results } = await env.DB.prepare("SELECT name, ok, counts_json AS counts, ms FROM sweep_runs WHERE ran_at = ? ORDER BY id").bind(scheduledTime.toISOString()).all<{
      name: string;
      ok: number;
      counts: string;
      ms: number;
    }>();
    expect(results.map((row) => row.name)).toEqual(SWEEPS.map((sweep) => sweep.name));
    expect(results.every((row) => row.ok === 1 && row.ms >= 0)).toBe(true);
    expect(Object.keys(JSON.parse(results.find((row) => row.name === "cases.lapsed_leases")!.counts))).toEqual(["released"]);
    // A repeatable sweep's counts also say how many slices it ran this minute and whether it left more.
    expect(Object.keys(JSON.parse(results.find((row) => row.name === "workflows.redispatch")!.counts))).toEqual(["redispatched", "failed", "deferred", "more", "slices"]);
  });
});

describe("the schedule and request handling", () => {
  it("yields to the runtime between sweeps: a timer set during one sweep has fired before the next starts", async () => {
    let timerFired = false;
    let firedBeforeSecond: boolean | null = null;
    const sweeps = [
      {
        name: "test.first",
        run: async () => {
          setTimeout(() => {
            timerFired = true;
          }, 0);
          return { started: 1 };
        },
      },
      {
        name: "test.second",
        run: async () => {
          firedBeforeSecond = timerFired;
          return { started: 1 };
        },
      },
    ];
    const run = await runSchedule(env, { cron: "* * * * *", scheduledTime: Date.now() }, sweeps);
    expect(run.ok).toBe(true);
    // Without the yield the second sweep starts in the same turn of the event loop, before any timer
    // (or socket) is looked at: under wrangler dev, a whole scheduled run held requests back.
    expect(firedBeforeSecond).toBe(true);
  });
});
