// Metrics: rows seeded through the API, the hourly rollup, GET /metrics compared
// with counts computed here from the same rows.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bucketQuantile, histogramBucket, rollupHour, sweepMetricRollups } from "../src/metrics";
import worker from "../src/index";
import { api, personKey, edge, newInstallation, publish, waitForRun } from "./helpers";

const HOUR = 3_600_000;
const hourOf = (iso: string) => Math.floor(Date.parse(iso) / HOUR) * HOUR;

const reviewGraph = (queue: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queue, response_schema: { type: "object", required: ["verdict"], properties: { verdict: { enum: ["remove", "keep"] } } }, timeout_seconds: 3600 } },
    { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
});

const report = (id: string, category: string, source: string) => ({ subject: { kind: "content", id }, category, source, reporter: { id: "user-1", contact: "person@example.org" }, description: "see this" });

async function waitForTasks(key: string, queueId: string, count: number): Promise<any[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { body } = await api(`/api/v1/queues/${queueId}/tasks?limit=100`, { key });
    if ((body.items?.length ?? 0) >= count) return body.items;
    if (Date.now() > deadline) throw new Error(`only ${body.items?.length ?? 0} of ${count} tasks appeared`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function seed() {
  const { id: installationId, apiKey } = await newInstallation("metrics");
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "scams_desk", slaSeconds: 3600 } });
  expect(queue.status).toBe(201);
  const version = await publish(apiKey, reviewGraph("scams_desk"), "scam review");
  const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "report.category == 'scams_and_fraud'", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  const reports = [
    report("p1", "scams_and_fraud", "notice"),
    report("p2", "scams_and_fraud", "notice"),
    report("p3", "scams_and_fraud", "trusted_flagger"),
    report("p4", "scams_and_fraud", "voluntary"),
    report("p5", "animal_welfare", "notice"),
    report("p6", "animal_welfare", "notice"),
    report("p7", "illegal_or_harmful_speech", "trusted_flagger"),
  ];
  const created: any[] = [];
  for (const body of reports) {
    const r = await api("/api/v1/reports", { key: apiKey, body });
    expect(r.status).toBe(201);
    created.push(r.body);
  }
  const tasks = await waitForTasks(apiKey, queue.body.id, 4);
  // Two tasks claimed, one of them completed; a decision by a person; two appeals, one overturned.
  expect((await api(`/api/v1/tasks/${tasks[0].id}/claim`, { key: apiKey, body: { reviewer: "ana" } })).status).toBe(200);
  expect((await api(`/api/v1/tasks/${tasks[0].id}/complete`, { key: apiKey, body: { reviewer: "ana", response: { verdict: "remove" } } })).status).toBe(200);
  expect((await api(`/api/v1/tasks/${tasks[1].id}/claim`, { key: apiKey, body: { reviewer: "bo" } })).status).toBe(200);
  await waitForRun(apiKey, tasks[0].runId);
  expect((await api("/api/v1/decisions", { key: await personKey(apiKey), body: { reportId: created[4].id, outcome: "no_action" } })).status).toBe(201);
  for (const r of [created[0], created[1]]) expect((await api("/api/v1/appeals", { key: apiKey, body: { reportId: r.id, reason: "not a scam" } })).status).toBe(201);
  const appeals = await env.DB.prepare(`SELECT id FROM appeals WHERE installation_id = ?1 ORDER BY id`).bind(installationId).all<{ id: string }>();
  // The appeal's decision is not what this test is about: mark one overturned in place.
  await env.DB.prepare(`UPDATE appeals SET state = 'overturned', decided_at = ?2 WHERE id = ?1`).bind(appeals.results[0]!.id, new Date().toISOString()).run();
  // One open task past its due time: an SLA breach.
  await env.DB.prepare(`UPDATE human_tasks SET due_at = ?2 WHERE id = ?1`)
    .bind(tasks[2].id, new Date(Date.parse(tasks[2].createdAt) + 1).toISOString())
    .run();
  return { installationId, apiKey, queueId: queue.body.id as string, versionId: version.id };
}

/** Rolls up every hour from the installation's creation to the hour of `until` (inclusive). */
async function rollAll(installationId: string, until = Date.now()) {
  const { createdAt } = (await env.DB.prepare(`SELECT created_at AS createdAt FROM installations WHERE id = ?1`).bind(installationId).first<{ createdAt: string }>())!;
  const hours: number[] = [];
  for (let h = hourOf(createdAt); h <= until; h += HOUR) hours.push(h);
  // As the schedule would once the last of these hours has ended.
  const after = new Date(hours.at(-1)! + HOUR);
  for (const h of hours) await rollupHour(env.DB, installationId, h, after);
  return { from: new Date(hours[0]!).toISOString(), to: new Date(hours.at(-1)! + HOUR).toISOString(), hours };
}

const all = async <T>(sql: string, ...binds: unknown[]) =>
  (
    await env.DB.prepare(sql)
      .bind(...binds)
      .all<T>()
  ).results;
const countBy = <T>(rows: T[], key: (row: T) => string) => {
  const counts: Record<string, number> = {};
  for (const row of rows) counts[key(row)] = (counts[key(row)] ?? 0) + 1;
  return counts;
};
const seriesTotals = (body: any, metric: string, key: (dims: any) => string) =>
  Object.fromEntries(
    body.series
      .filter((s: any) => s.metric === metric)
      .map((s: any) => [key(s.dims), s.total])
      .filter(([, total]: [string, number]) => total !== 0),
  );

describe("metrics rolled up per hour", () => {
  it("equal the counts computed from the rows", async () => {
    const { installationId, apiKey, queueId, versionId } = await seed();
    const range = await rollAll(installationId);
    const res = await api(`/api/v1/metrics?from=${range.from}&to=${range.to}&step=hour`, { key: apiKey });
    expect(res.status).toBe(200);
    const body = res.body;
    expect(body.steps).toHaveLength(range.hours.length);

    const reports = await all<{ category: string; source: string }>(`SELECT category, source FROM reports WHERE installation_id = ?1`, installationId);
    expect(seriesTotals(body, "reports.received", (d) => `${d.category}/${d.source}`)).toEqual(countBy(reports, (r) => `${r.category}/${r.source}`));
    expect(body.summary.reports).toBe(7);

    const runs = await all<{ mode: string; version: string; state: string; code: string | null }>(
      `SELECT authority_mode AS mode, workflow_version_id AS version, state, error_code AS code FROM workflow_runs WHERE installation_id = ?1`,
      installationId,
    );
    expect(seriesTotals(body, "runs.created", (d) => `${d.mode}/${d.version}`)).toEqual(countBy(runs, (r) => `${r.mode}/${r.version}`));
    expect(seriesTotals(body, "runs.created", (d) => d.version)).toEqual({ [versionId]: 4 });
    const ended = runs.filter((r) => ["succeeded", "failed", "terminated", "repair_required", "superseded"].includes(r.state));
    expect(seriesTotals(body, "runs.ended", (d) => `${d.state}/${d.code}/${d.version}`)).toEqual(countBy(ended, (r) => `${r.state}/${r.code}/${r.version}`));
    expect(ended.length).toBe(1);

    // Queue gauges at the end of the last hour; the time to first action from the tasks' own times.
    const tasks = await all<{ state: string; createdAt: string; claimedAt: string | null; completedAt: string | null; dueAt: string; updatedAt: string }>(
      `SELECT state, created_at AS createdAt, claimed_at AS claimedAt, completed_at AS completedAt, due_at AS dueAt, updated_at AS updatedAt FROM human_tasks WHERE installation_id = ?1`,
      installationId,
    );
    const depth = body.series.find((s: any) => s.metric === "queue.depth" && s.dims.queue === queueId);
    const open = tasks.filter((t) => t.state === "open" || t.state === "claimed");
    expect(depth.total).toBe(open.length);
    expect(depth.total).toBe(3);
    const oldest = body.series.find((s: any) => s.metric === "queue.oldest_seconds" && s.dims.queue === queueId);
    const end = Date.parse(range.to);
    expect(oldest.total).toBe(Math.round(Math.max(...open.map((t) => (end - Date.parse(t.createdAt)) / 1000))));
    const breaches = tasks.filter((t) => Date.parse(t.dueAt) < end && !(t.state === "completed" && t.completedAt! <= t.dueAt) && !(t.state === "cancelled" && t.updatedAt <= t.dueAt));
    expect(seriesTotals(body, "tasks.sla_breaches", (d) => d.queue)).toEqual({ [queueId]: breaches.length });
    expect(breaches.length).toBe(1);
    expect(seriesTotals(body, "tasks.ended", (d) => `${d.queue}/${d.state}`)).toEqual({ [`${queueId}/completed`]: 1 });

    const firstActions = tasks.filter((t) => t.claimedAt ?? t.completedAt).map((t) => (Date.parse((t.claimedAt ?? t.completedAt)!) - Date.parse(t.createdAt)) / 1000);
    expect(firstActions).toHaveLength(2);
    const buckets = new Map<number, number>();
    for (const s of firstActions) buckets.set(histogramBucket(s), (buckets.get(histogramBucket(s)) ?? 0) + 1);
    const histogram = body.histograms.find((h: any) => h.metric === "queue.first_action_seconds" && h.dims.queue === queueId);
    expect(histogram.total).toEqual({ count: 2, p50: bucketQuantile(buckets, 0.5), p90: bucketQuantile(buckets, 0.9) });
    // The bucket bound holds the exact percentile: p90 of two values is the larger one.
    expect(histogram.total.p90).toBeGreaterThan(Math.max(...firstActions));

    const decisions = await all<{ automated: string }>(`SELECT automated_decision AS automated FROM decisions WHERE installation_id = ?1`, installationId);
    expect(seriesTotals(body, "decisions.made", (d) => `${d.automated}/${d.mode}`)).toEqual(countBy(decisions, (d) => `${d.automated}/manual`));
    expect(body.summary.automationShare.not_automated).toBe(1);
    expect(seriesTotals(body, "appeals.created", () => "all")).toEqual({ all: 2 });
    expect(seriesTotals(body, "appeals.decided", (d) => d.outcome)).toEqual({ overturned: 1 });
    expect(body.summary.overturnRate).toBe(1);
    expect(body.summary.deliveriesPending).toBe(0);

    // Names, not only ids.
    expect(body.names.queues[queueId]).toBe("scams_desk");
    expect(body.names.versions[versionId]).toMatchObject({ workflowName: "scam review", version: 1 });
    expect(body.rolledThrough).toBe(range.to);

    // Per day (metric_rollups_daily): the same totals, series by series, and the same histograms.
    const daily = await api(`/api/v1/metrics?from=${range.from}&to=${range.to}&step=day`, { key: apiKey });
    expect(daily.status).toBe(200);
    const totals = (b: any) => Object.fromEntries(b.series.map((s: any) => [`${s.metric} ${JSON.stringify(s.dims)}`, s.total]));
    expect(totals(daily.body)).toEqual(totals(body));
    expect(daily.body.histograms.map((h: any) => h.total)).toEqual(body.histograms.map((h: any) => h.total));
    expect(daily.body.summary).toEqual(body.summary);
    const some = await api(`/api/v1/metrics?from=${range.from}&to=${range.to}&step=day&metrics=reports.received,queue.depth`, { key: apiKey });
    expect(some.body.series.every((s: any) => ["reports.received", "queue.depth"].includes(s.metric))).toBe(true);
    expect(some.body.summary).toMatchObject({ reports: 7, openTasks: 3 });
  });

  it("recomputing an hour replaces it, and the sweep rolls each complete hour once", async () => {
    const { installationId, apiKey, queueId } = await seed();
    const range = await rollAll(installationId);
    const read = async () => (await api(`/api/v1/metrics?from=${range.from}&to=${range.to}`, { key: apiKey })).body;
    const before = await read();
    for (const h of range.hours) await rollupHour(env.DB, installationId, h, new Date(Date.parse(range.to)));
    expect(await read()).toEqual(before);

    // A task completes: recomputing its hour moves it out of the queue's depth.
    const { items } = (await api(`/api/v1/queues/${queueId}/tasks?state=claimed`, { key: apiKey })).body;
    expect((await api(`/api/v1/tasks/${items[0].id}/complete`, { key: apiKey, body: { reviewer: "bo", response: { verdict: "keep" } } })).status).toBe(200);
    // Its run ends after the answer, on its own: the rollup below must see it ended.
    await waitForRun(apiKey, items[0].runId);
    await rollAll(installationId);
    const after = await read();
    expect(after.summary.openTasks).toBe(before.summary.openTasks - 1);
    expect(after.series.filter((s: any) => s.metric === "reports.received").map((s: any) => s.total)).toEqual(before.series.filter((s: any) => s.metric === "reports.received").map((s: any) => s.total));

    // The sweep: the hours up to the last complete one, then nothing until the next hour ends.
    const now = new Date(range.hours.at(-1)! + HOUR + 60_000);
    await env.DB.prepare(`DELETE FROM metric_rollup_hours WHERE installation_id = ?1`).bind(installationId).run();
    const first = await sweepMetricRollups(env, now, 1000);
    expect(first.hours).toBeGreaterThanOrEqual(range.hours.length);
    const marks = await all<{ hour: string }>(`SELECT hour FROM metric_rollup_hours WHERE installation_id = ?1 ORDER BY hour`, installationId);
    expect(marks.map((m) => Date.parse(m.hour))).toEqual(range.hours);
    expect(await sweepMetricRollups(env, now, 1000)).toMatchObject({ hours: 0 });
    expect(await read()).toEqual(after);
  });

  it("are per installation, need the read scope, and refuse a bad range", async () => {
    const { installationId, apiKey } = await seed();
    const range = await rollAll(installationId);
    const other = await newInstallation("other");
    const theirs = await api(`/api/v1/metrics?from=${range.from}&to=${range.to}`, { key: other.apiKey });
    expect(theirs.status).toBe(200);
    expect(theirs.body.series).toEqual([]);
    expect(theirs.body.summary.reports).toBe(0);
    const reader = await api("/api/v1/api-keys", { key: apiKey, body: { name: "dashboard", scopes: ["read"] } });
    expect((await api("/api/v1/metrics", { key: reader.body.apiKey })).status).toBe(200);
    const intake = await api("/api/v1/api-keys", { key: apiKey, body: { name: "intake", scopes: ["reports:write"] } });
    expect((await api("/api/v1/metrics", { key: intake.body.apiKey })).status).toBe(403);
    const bad = async (query: string) => (await api(`/api/v1/metrics?${query}`, { key: apiKey })).body.error.code;
    expect(await bad("from=yesterday")).toBe("metrics.invalid_time");
    expect(await bad(`from=${range.to}&to=${range.from}`)).toBe("metrics.invalid_range");
    expect(await bad("from=2020-01-01&to=2026-01-01&step=hour")).toBe("metrics.range_too_large");
    expect(await bad("metrics=reports.received,nope")).toBe("metrics.unknown_metric");
    expect(await bad("step=week")).toBe("request.invalid_step");
  });

  it("POST /metrics/rollup writes the current hour so far and leaves it to the schedule", async () => {
    const { installationId, apiKey } = await seed();
    const rolled = await api("/api/v1/metrics/rollup", { key: apiKey, body: {} });
    expect(rolled.status).toBe(200);
    expect(rolled.body.hours).toBe(24);
    const metrics = await api("/api/v1/metrics", { key: apiKey });
    expect(metrics.body.summary).toMatchObject({ reports: 7, openTasks: 3, appeals: 2 });
    // The current hour is not complete: not marked, so the sweep computes it again once it ends.
    const current = new Date(Math.floor(Date.now() / HOUR) * HOUR).toISOString();
    expect(await all(`SELECT hour FROM metric_rollup_hours WHERE installation_id = ?1 AND hour = ?2`, installationId, current)).toEqual([]);
    const reader = await api("/api/v1/api-keys", { key: apiKey, body: { name: "dashboard", scopes: ["read"] } });
    expect((await api("/api/v1/metrics/rollup", { key: reader.body.apiKey, body: {} })).status).toBe(403);
    expect((await api("/api/v1/metrics/rollup", { key: apiKey, body: { from: "2020-01-01T00:00:00Z" } })).body.error.code).toBe("metrics.range_too_large");
  });

  it("logs one JSON line per request with its route, status and ids, and answers x-request-id", async () => {
    const { apiKey } = await seed();
    const lines: string[] = [];
    const original = console.log;
    console.log = (...args: unknown[]) => {
      lines.push(args.map(String).join(" "));
    };
    let res: Response;
    try {
      // The tests run with REQUEST_LOG "off"; this request goes through the handler with it on.
      const ctx = createExecutionContext();
      res = await worker.fetch(new Request("http://safest.test/api/v1/queues", { headers: { authorization: `Bearer ${apiKey}`, "cf-ray": "8f0e1d2c3b4a5968-AMS" } }), { ...env, REQUEST_LOG: "on" } as Env, ctx);
      await waitOnExecutionContext(ctx);
    } finally {
      console.log = original;
    }
    expect(res.headers.get("x-request-id")).toBe("8f0e1d2c3b4a5968-AMS");
    const line = lines
      .map((l) => {
        try {
          return JSON.parse(l);
        } catch {
          return null;
        }
      })
      .find((l) => l?.event === "http.request" && l.requestId === "8f0e1d2c3b4a5968-AMS");
    expect(line).toMatchObject({ method: "GET", route: "/api/v1/queues", status: 200 });
    expect(typeof line.ms).toBe("number");
    expect(line.installationId).toMatch(/./u);
    expect(JSON.stringify(line)).not.toContain(apiKey);
  });

  it("the runs list and the report timeline show names", async () => {
    const { apiKey, queueId } = await seed();
    const runs = (await api("/api/v1/runs", { key: apiKey })).body.items;
    expect(runs[0]).toMatchObject({ workflowName: "scam review", workflowVersion: 1 });
    const { items } = (await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body;
    const timeline = (await api(`/api/v1/reports/${items[0].reportId}/timeline`, { key: apiKey })).body.items;
    expect(timeline.find((i: any) => i.kind === "task").summary).toContain("task in scams_desk");
    expect(timeline.find((i: any) => i.kind === "run").summary).toContain("run of scam review v1");
  });
});
