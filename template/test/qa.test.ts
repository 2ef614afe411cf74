// Reviewer QA and golden items: deterministic keyed sampling of completed tasks into a
// QA queue for a blind second review, golden items that look like any task, the figures per
// reviewer and category, and their place outside metrics and runs.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { qaDisagreements } from "../src/cases/qa/qa";
import { answerLabel, isSampled, labelName, qaSamplingKey, samplingHash } from "../src/cases/qa/qa-sampling";
import { rollupHour } from "../src/metrics";
import { api, edge, newInstallation, publish, waitForRun } from "./helpers";

const responseSchema = {
  type: "object",
  required: ["outcome"],
  additionalProperties: false,
  properties: { outcome: { enum: ["remove", "keep"] }, note: { type: "string", maxLength: 500 } },
};

const graph = (queue: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queue, response_schema: responseSchema, timeout_seconds: 3600 }, inputMapping: { category: "report.category", subject: "input.report.subject.id" } },
    { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
});

async function setup() {
  const installation = await newInstallation("qa");
  const apiKey = installation.apiKey;
  const work = await api("/api/v1/queues", { key: apiKey, body: { name: "scams", slaSeconds: 3600, priority: 5 } });
  const qa = await api("/api/v1/queues", { key: apiKey, body: { name: "scams-qa", slaSeconds: 7200 } });
  const version = await publish(apiKey, graph("scams"));
  const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  const intake = await api("/api/v1/api-keys", { key: apiKey, body: { name: "product", scopes: ["reports:write"] } });
  const reviewer = await api("/api/v1/api-keys", { key: apiKey, body: { name: "console", scopes: ["review", "personal_data:read"] } });
  // A second reviewer's own key: QA of one's own answer is refused by the principal, not the name.
  const qaReviewer = await api("/api/v1/api-keys", { key: apiKey, body: { name: "qa console", scopes: ["review", "personal_data:read"] } });
  return {
    installationId: installation.id,
    apiKey,
    workQueue: work.body.id as string,
    qaQueue: qa.body.id as string,
    versionId: version.id,
    triggerId: trigger.body.id as string,
    intakeKey: intake.body.apiKey as string,
    reviewKey: reviewer.body.apiKey as string,
    qaKey: qaReviewer.body.apiKey as string,
  };
}

type Setup = Awaited<ReturnType<typeof setup>>;

/** Files `n` reports and waits until each has its open task in the work queue. */
async function openTasks(s: Setup, n: number): Promise<any[]> {
  const reportIds: string[] = [];
  for (let i = 0; i < n; i++) {
    const intake = await api("/api/v1/reports", { key: s.intakeKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}`, snapshot: { text: "cheap pills" } }, category: "scams_and_fraud" } });
    expect(intake.status).toBe(201);
    reportIds.push(intake.body.id);
  }
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { body } = await api(`/api/v1/queues/${s.workQueue}/tasks?limit=200`, { key: s.reviewKey });
    const tasks = body.items.filter((t: any) => reportIds.includes(t.reportId));
    if (tasks.length === n) return tasks;
    if (Date.now() > deadline) throw new Error(`only ${tasks.length} of ${n} tasks appeared`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function answer(s: Setup, taskId: string, reviewer: string, response: unknown, key = s.reviewKey) {
  const claimed = await api(`/api/v1/tasks/${taskId}/claim`, { key, body: { reviewer } });
  expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
  const done = await api(`/api/v1/tasks/${taskId}/complete`, { key, body: { reviewer, response } });
  expect(done.status, JSON.stringify(done.body)).toBe(200);
  return done.body;
}

const qaTasks = async (s: Setup, state = "open") => (await api(`/api/v1/queues/${s.qaQueue}/tasks?state=${state}&limit=200`, { key: s.reviewKey })).body.items as any[];
const setRate = (s: Setup, rate: number) => api(`/api/v1/queues/${s.workQueue}/qa-settings`, { method: "PUT", key: s.apiKey, body: { qaQueueId: s.qaQueue, rate } });
const eventsOf = async (runId: string) => (await env.DB.prepare(`SELECT COUNT(*) AS n FROM workflow_events WHERE run_id = ?1`).bind(runId).first<{ n: number }>())!.n;

describe("QA sampling", () => {
  it("samples a share within tolerance of the rate over 1,000 task ids, the same every time, and depends on the key", () => {
    const key = qaSamplingKey(env);
    const ids = Array.from({ length: 1000 }, (_, i) => `run_${i.toString(16).padStart(32, "0")}:review:main:1:task`);
    for (const rate of [0.05, 0.2, 0.5]) {
      const sampled = ids.filter((id) => isSampled(key, id, rate)).length;
      // Binomial(1000, rate): within 4 standard deviations of the mean.
      const sd = Math.sqrt(1000 * rate * (1 - rate));
      expect(Math.abs(sampled - 1000 * rate), `rate ${rate}: ${sampled} sampled`).toBeLessThan(4 * sd);
      expect(ids.filter((id) => isSampled(key, id, rate)).length).toBe(sampled);
    }
    expect(ids.filter((id) => isSampled(key, id, 0)).length).toBe(0);
    expect(ids.filter((id) => isSampled(key, id, 1)).length).toBe(1000);
    // The comparison is on the first 32 bits: a task is sampled exactly when hash < rate·2^32.
    const id = ids[7]!;
    expect(isSampled(key, id, (samplingHash(key, id) + 1) / 2 ** 32)).toBe(true);
    expect(isSampled(key, id, samplingHash(key, id) / 2 ** 32)).toBe(false);
    const other = new Uint8Array(32).fill(7);
    expect(ids.map((i) => samplingHash(other, i))).not.toEqual(ids.map((i) => samplingHash(key, i)));
  });

  it("compares answers on the compare field (default outcome), else on the whole response", async () => {
    expect(await answerLabel({ outcome: "remove", note: "a" })).toBe(await answerLabel({ note: "b", outcome: "remove" }));
    expect(await answerLabel({ outcome: "remove" })).not.toBe(await answerLabel({ outcome: "keep" }));
    expect(labelName(await answerLabel({ outcome: "keep" }))).toBe("keep");
    // Without the field: the canonical JSON of the whole response (key order does not matter), kept as a digest.
    const whole = await answerLabel({ verdict: "remove", note: "private words" });
    expect(whole).toBe(await answerLabel({ note: "private words", verdict: "remove" }));
    expect(whole).not.toContain("private");
    expect(whole).not.toBe(await answerLabel({ verdict: "remove", note: "other" }));
    expect(await answerLabel({ verdict: "remove", note: "x" }, "verdict")).toBe(await answerLabel({ verdict: "remove", note: "y" }, "verdict"));
  });

  it("a sampled completion creates a blind QA task in the QA queue; an unsampled one does not", async () => {
    const s = await setup();
    const tasks = await openTasks(s, 6);
    expect((await setRate(s, 0.5)).status).toBe(200);
    const key = qaSamplingKey(env);
    const expected = tasks.filter((t) => isSampled(key, t.id, 0.5)).map((t) => t.id);
    for (const task of tasks) await answer(s, task.id, "mod-ana", { outcome: "remove", note: "note by mod-ana" });
    const qa = await qaTasks(s);
    const origins = await env.DB.prepare(`SELECT qa_task_id AS qaTaskId, original_task_id AS originalTaskId FROM qa_reviews WHERE installation_id = ?1`).bind(s.installationId).all<{ qaTaskId: string; originalTaskId: string }>();
    expect(origins.results.map((r) => r.originalTaskId).sort()).toEqual([...expected].sort());
    expect(qa.map((t) => t.id).sort()).toEqual(origins.results.map((r) => r.qaTaskId).sort());
    // Every completed task's run resumed as usual, sampled or not.
    for (const task of tasks) expect((await waitForRun(s.apiKey, task.runId)).output.terminalCode).toBe("reviewed");

    // Both branches for certain: rate 1 samples the next completion, rate 0 none.
    const [one, two] = await openTasks(s, 2);
    await setRate(s, 1);
    await answer(s, one.id, "mod-ana", { outcome: "keep" });
    await setRate(s, 0);
    await answer(s, two.id, "mod-ana", { outcome: "keep" });
    const after = await qaTasks(s);
    expect(after).toHaveLength(qa.length + 1);

    // Blind: the same context, no run, report, answer or first reviewer anywhere in what the QA reviewer reads.
    const qaRow = (await env.DB.prepare(`SELECT qa_task_id AS id FROM qa_reviews WHERE original_task_id = ?1`).bind(one.id).first<{ id: string }>())!;
    const read = await api(`/api/v1/tasks/${qaRow.id}`, { key: s.reviewKey });
    const original = await api(`/api/v1/tasks/${one.id}`, { key: s.reviewKey });
    expect(read.body).toMatchObject({ queueId: s.qaQueue, runId: null, reportId: null, appealId: null, state: "open", response: null, completedBy: null, claim: null, taskType: original.body.taskType });
    expect(read.body.context).toEqual(original.body.context);
    expect(read.body.responseSchema).toEqual(original.body.responseSchema);
    const listed = after.find((t) => t.id === qaRow.id);
    for (const view of [read.body, listed]) {
      const text = JSON.stringify(view);
      for (const secret of ["mod-ana", one.id, one.runId, one.reportId]) expect(text, `QA task shows ${secret}`).not.toContain(secret);
    }
  });

  it("the first reviewer cannot take their own QA task; another reviewer answers it, agreement is recorded and no run resumes", async () => {
    const s = await setup();
    const [task] = await openTasks(s, 1);
    await setRate(s, 1);
    await answer(s, task.id, "mod-ana", { outcome: "remove" });
    const run = await waitForRun(s.apiKey, task.runId);
    const [qa] = await qaTasks(s);
    expect(qa).toBeDefined();
    const own = await api(`/api/v1/queues/${s.qaQueue}/next`, { key: s.reviewKey, body: { reviewer: "mod-ana" } });
    expect(own.status).toBe(404);
    expect(own.body.error.code).toBe("queue.empty");
    const claim = await api(`/api/v1/tasks/${qa.id}/claim`, { key: s.reviewKey, body: { reviewer: "mod-ana" } });
    expect(claim.status).toBe(403);
    expect(claim.body.error.code).toBe("qa.own_task");
    const events = await eventsOf(task.runId);
    // The same key under another name is still the first reviewer.
    const renamed = await api(`/api/v1/tasks/${qa.id}/claim`, { key: s.reviewKey, body: { reviewer: "mod-bo" } });
    expect(renamed.status).toBe(403);
    expect(renamed.body.error.code).toBe("qa.own_task");
    const next = await api(`/api/v1/queues/${s.qaQueue}/next`, { key: s.qaKey, body: { reviewer: "mod-bo" } });
    expect(next.status).toBe(200);
    expect(next.body.id).toBe(qa.id);
    const done = await api(`/api/v1/tasks/${qa.id}/complete`, { key: s.qaKey, body: { reviewer: "mod-bo", response: { outcome: "keep" } } });
    expect(done.status).toBe(200);
    expect(done.body.state).toBe("completed");
    // A repeat changes nothing; a QA task's completion signals no run and samples nothing.
    expect((await api(`/api/v1/tasks/${qa.id}/complete`, { key: s.qaKey, body: { reviewer: "mod-bo", response: { outcome: "keep" } } })).status).toBe(200);
    expect(await eventsOf(task.runId)).toBe(events);
    expect((await api(`/api/v1/runs/${task.runId}`, { key: s.apiKey })).body.state).toBe(run.state);
    expect(await qaTasks(s)).toHaveLength(0);
    const review = await env.DB.prepare(`SELECT agreed, qa_reviewer AS qaReviewer FROM qa_reviews WHERE qa_task_id = ?1`).bind(qa.id).first();
    // The QA reviewer as its identity: the key, with the name its client gave as a label.
    expect(review).toEqual({ agreed: 0, qaReviewer: expect.stringMatching(/^api_key:[^/]+\/mod-bo$/u) });

    const figures = await api(`/api/v1/qa/reviewers`, { key: s.apiKey });
    expect(figures.status).toBe(200);
    const ana = figures.body.reviewers.find((r: any) => r.reviewer === "mod-ana");
    expect(ana.qaAgreement).toMatchObject({ successes: 0, trials: 1, value: 0 });
    expect(ana.qaAgreement.high).toBeGreaterThan(0.5);
    expect(ana.kappa.n).toBe(1);
    expect(ana.tasksCompleted).toBe(1);
    expect(ana.medianSecondsPerTask).toBeGreaterThanOrEqual(0);
    expect(figures.body.reviewers.find((r: any) => r.reviewer === "mod-bo").qaReviewsDone).toBe(1);
    expect(figures.body.categories.find((c: any) => c.category === "scams_and_fraud").qaAgreement.trials).toBe(1);
    // For demotion: one QA review of a task this trigger's run created, one disagreement.
    expect(await qaDisagreements(env, s.installationId, "2000-01-01T00:00:00.000Z")).toEqual([{ workflowVersionId: s.versionId, triggerId: s.triggerId, authorityMode: "autonomous", reviews: 1, disagreements: 1 }]);
    expect(await qaDisagreements(env, "inst_other", "2000-01-01T00:00:00.000Z")).toEqual([]);
  });

  it("kappa between reviewers and agreement come from the original and QA answers", async () => {
    const s = await setup();
    const tasks = await openTasks(s, 4);
    await setRate(s, 1);
    const firsts = ["remove", "remove", "keep", "keep"];
    const seconds = ["remove", "keep", "keep", "keep"];
    for (const [i, task] of tasks.entries()) await answer(s, task.id, "mod-ana", { outcome: firsts[i] });
    const byOriginal = await env.DB.prepare(`SELECT qa_task_id AS qa, original_task_id AS original FROM qa_reviews WHERE installation_id = ?1`).bind(s.installationId).all<{ qa: string; original: string }>();
    for (const [i, task] of tasks.entries()) await answer(s, byOriginal.results.find((r) => r.original === task.id)!.qa, "mod-bo", { outcome: seconds[i] }, s.qaKey);
    const { body } = await api(`/api/v1/qa/reviewers`, { key: s.apiKey });
    const ana = body.reviewers.find((r: any) => r.reviewer === "mod-ana");
    expect(ana.qaAgreement).toMatchObject({ successes: 3, trials: 4 });
    // po = 3/4; pe = (2/4·1/4) + (2/4·3/4) = 1/2; kappa = (3/4 − 1/2) / (1 − 1/2) = 1/2.
    expect(ana.kappa.observed).toBeCloseTo(0.75, 12);
    expect(ana.kappa.expected).toBeCloseTo(0.5, 12);
    expect(ana.kappa.kappa).toBeCloseTo(0.5, 12);
    expect(body.overall.kappa.kappa).toBeCloseTo(0.5, 12);
  });
});

describe("golden items", () => {
  it("look like any task in the task API, listings and /next; are scored; resume no run; stay out of metrics", async () => {
    const s = await setup();
    const [source, ordinary] = await openTasks(s, 2);
    await answer(s, source.id, "mod-ana", { outcome: "remove" });
    const sourceRun = await waitForRun(s.apiKey, source.runId);
    const events = await eventsOf(source.runId);
    // Only admins write golden items, with an answer the task's schema accepts.
    expect((await api("/api/v1/qa/golden-items", { key: s.reviewKey, body: { sourceTaskId: source.id, answer: { outcome: "remove" } } })).status).toBe(403);
    const invalid = await api("/api/v1/qa/golden-items", { key: s.apiKey, body: { sourceTaskId: source.id, answer: { outcome: "ban" } } });
    expect(invalid.status).toBe(422);
    expect(invalid.body.error.code).toBe("golden.answer_invalid");
    const first = await api("/api/v1/qa/golden-items", { key: s.apiKey, body: { sourceTaskId: source.id, answer: { outcome: "remove" } } });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const second = await api("/api/v1/qa/golden-items", { key: s.apiKey, body: { sourceTaskId: source.id, answer: { outcome: "remove" } } });
    expect(second.status).toBe(201);
    const goldenIds = [first.body.taskId, second.body.taskId];
    expect(new Set([...goldenIds, source.id]).size).toBe(3);

    // Every field of every view: the same keys as an ordinary open task, nothing that says golden.
    const ordinaryRead = (await api(`/api/v1/tasks/${ordinary.id}`, { key: s.reviewKey })).body;
    const listing = (await api(`/api/v1/queues/${s.workQueue}/tasks`, { key: s.reviewKey })).body.items as any[];
    const views: any[] = [];
    for (const id of goldenIds) {
      views.push(
        (await api(`/api/v1/tasks/${id}`, { key: s.reviewKey })).body,
        listing.find((t) => t.id === id),
      );
    }
    const next = await api(`/api/v1/queues/${s.workQueue}/next`, { key: s.reviewKey, body: { reviewer: "mod-bo" } });
    expect(next.status).toBe(200);
    const claimedGolden = goldenIds.includes(next.body.id) ? next.body.id : null;
    // /next wraps the task with what the wellness caps skipped: the same for any task it hands out.
    const { wellness: _skipped, ...handedOut } = next.body;
    views.push(handedOut);
    const idForm = /^run_[0-9A-Za-z]+:review:main:\d+:task$/u;
    for (const view of views) {
      expect(view).toBeDefined();
      expect(Object.keys(view).sort()).toEqual(Object.keys(ordinaryRead).sort());
      expect(view.id).toMatch(idForm);
      expect(view.runId).toMatch(/^run_/u);
      expect(view.reportId).toMatch(/^rpt_/u);
      expect(view.taskType).toBe(ordinaryRead.taskType);
      expect(view.responseSchema).toEqual(ordinaryRead.responseSchema);
      expect(view.priority).toBe(ordinaryRead.priority);
      const text = JSON.stringify(view).toLowerCase();
      for (const tell of ["golden", "gold_", first.body.id.toLowerCase(), second.body.id.toLowerCase(), "mod-ana"]) expect(text, `a golden task shows ${tell}`).not.toContain(tell);
    }
    expect(ordinaryRead.id).toMatch(idForm);
    // The report's timeline lists the source task once, not its golden copies.
    const timeline = await api(`/api/v1/reports/${source.reportId}/timeline`, { key: s.reviewKey });
    expect(timeline.body.items.filter((i: any) => i.kind === "task").map((i: any) => i.id)).toEqual([source.id]);
    // The audit trail (readable with `review`) never names a golden task as golden.
    const audit = await api(`/api/v1/audit-events?limit=500`, { key: s.reviewKey });
    for (const event of audit.body.items.filter((e: any) => e.action.startsWith("golden_item."))) expect(JSON.stringify(event)).not.toContain(goldenIds[0]);
    // A reviewer does not see golden items' events at all (their times would match the tasks'); an admin does.
    expect(audit.body.items.filter((e: any) => e.target?.type === "golden_item")).toEqual([]);
    const adminAudit = await api(`/api/v1/audit-events?limit=500&targetType=golden_item`, { key: s.apiKey });
    expect(adminAudit.body.items.length).toBeGreaterThan(0);
    // The run the golden copies borrowed still resolves like any run.
    expect((await api(`/api/v1/runs/${views[0].runId}`, { key: s.reviewKey })).status).toBe(200);

    // Answer both: one right, one wrong (releasing whatever /next handed out first).
    if (!claimedGolden) expect((await api(`/api/v1/tasks/${next.body.id}/release`, { key: s.reviewKey, body: { reviewer: "mod-bo" } })).status).toBe(200);
    else expect((await api(`/api/v1/tasks/${claimedGolden}/release`, { key: s.reviewKey, body: { reviewer: "mod-bo" } })).status).toBe(200);
    await setRate(s, 1);
    await answer(s, goldenIds[0], "mod-bo", { outcome: "remove" });
    await answer(s, goldenIds[1], "mod-bo", { outcome: "keep" });
    expect(await eventsOf(source.runId)).toBe(events);
    expect((await api(`/api/v1/runs/${source.runId}`, { key: s.apiKey })).body.state).toBe(sourceRun.state);
    // Golden completions are never sampled for QA.
    expect(await qaTasks(s)).toHaveLength(0);

    const figures = (await api(`/api/v1/qa/reviewers`, { key: s.apiKey })).body;
    const bo = figures.reviewers.find((r: any) => r.reviewer === "mod-bo");
    expect(bo.goldenAccuracy).toMatchObject({ successes: 1, trials: 2, value: 0.5 });
    expect(figures.reviewers.find((r: any) => r.reviewer === "mod-ana").goldenAccuracy.trials).toBe(0);
    const items = (await api(`/api/v1/qa/golden-items`, { key: s.apiKey })).body.items;
    expect(items.map((i: any) => i.result?.correct).sort()).toEqual([false, true]);
    expect((await api(`/api/v1/qa/golden-items`, { key: s.reviewKey })).status).toBe(403);

    // Metrics: the hour's rollup counts the two workflow tasks, not the golden ones.
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    await rollupHour(env.DB, s.installationId, hour, new Date(hour + 3_600_000));
    const rows = await env.DB.prepare(`SELECT metric, dims, value FROM metric_rollups WHERE installation_id = ?1 AND metric IN ('tasks.ended', 'queue.depth', 'queue.first_action_seconds')`)
      .bind(s.installationId)
      .all<{ metric: string; dims: string; value: number }>();
    const total = (metric: string, queue: string) => rows.results.filter((r) => r.metric === metric && JSON.parse(r.dims).queue === queue).reduce((sum, r) => sum + r.value, 0);
    expect(total("tasks.ended", s.workQueue)).toBe(1);
    expect(total("queue.depth", s.workQueue)).toBe(1);
    expect(total("queue.first_action_seconds", s.workQueue)).toBe(1);
    const stats = await api(`/api/v1/queues/${s.workQueue}/stats`, { key: s.apiKey });
    expect(stats.body.timeToComplete.sample).toBe(1);
  });
});

describe("tenancy", () => {
  it("another installation's queue settings, golden items and figures are a 404 or empty", async () => {
    const a = await setup();
    const b = await setup();
    expect((await setRate(a, 0.05)).status).toBe(200);
    const read = await api(`/api/v1/queues/${a.workQueue}/qa-settings`, { key: b.apiKey });
    expect(read.status).toBe(404);
    expect(read.body.error.code).toBe("queue.not_found");
    const write = await api(`/api/v1/queues/${a.workQueue}/qa-settings`, { method: "PUT", key: b.apiKey, body: { qaQueueId: b.qaQueue, rate: 1 } });
    expect(write.status).toBe(404);
    const foreignQa = await api(`/api/v1/queues/${b.workQueue}/qa-settings`, { method: "PUT", key: b.apiKey, body: { qaQueueId: a.qaQueue, rate: 1 } });
    expect(foreignQa.status).toBe(404);
    expect((await api(`/api/v1/queues/${a.workQueue}/qa-settings`, { key: a.apiKey })).body).toMatchObject({ queueId: a.workQueue, qaQueueId: a.qaQueue, rate: 0.05, compareField: "outcome" });
    expect((await api(`/api/v1/qa/settings`, { key: b.apiKey })).body.items).toEqual([]);
    const [task] = await openTasks(a, 1);
    const golden = await api("/api/v1/qa/golden-items", { key: b.apiKey, body: { sourceTaskId: task.id, answer: { outcome: "keep" } } });
    expect(golden.status).toBe(404);
    expect(golden.body.error.code).toBe("task.not_found");
    expect((await api(`/api/v1/queues/${a.workQueue}/qa-settings`, { method: "PUT", key: a.apiKey, body: { qaQueueId: a.workQueue, rate: 1 } })).body.error.code).toBe("qa.same_queue");
    expect((await api(`/api/v1/qa/reviewers?since=yesterday`, { key: a.apiKey })).body.error.code).toBe("qa.since_invalid");
  });
});
