// Wellness limits: the daily exposure cap per category, counted from claims, respected by /next.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepExposureFolds } from "../src/cases/wellness/exposure-fold";
import { exposureStatus } from "../src/cases/wellness/wellness";
import { api, edge, newInstallation, publish } from "./helpers";

const reviewSchema = { type: "object", required: ["verdict"], properties: { verdict: { enum: ["remove", "keep"] } } };

async function setup(label: string, wellness: "standard" | "strict" = "standard") {
  const installation = await newInstallation(`wellness-${label}`);
  const apiKey = installation.apiKey;
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `review-${label}`, slaSeconds: 3600, wellness } });
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
  const review = await api("/api/v1/api-keys", { key: apiKey, body: { name: "review tool", scopes: ["review"] } });
  return { installationId: installation.id, apiKey, reviewKey: review.body.apiKey as string, queueId: queue.body.id as string };
}

/** Files a report of the category and waits for its task, so tasks are due in the order they are filed. */
async function taskOf(s: Awaited<ReturnType<typeof setup>>, category: string): Promise<string> {
  const report = await api("/api/v1/reports", { key: s.apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category } });
  expect(report.status).toBe(201);
  for (let i = 0; i < 400; i++) {
    const row = await env.DB.prepare("SELECT id FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2").bind(s.installationId, report.body.id).first<{ id: string }>();
    if (row) return row.id;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("no task appeared");
}

/** Moves a claim back in time, in the task and in its exposure record (instead of waiting). */
async function backdateClaim(taskId: string, minutes: number) {
  const row = await env.DB.prepare("SELECT claimed_at AS claimedAt FROM human_tasks WHERE id = ?1").bind(taskId).first<{ claimedAt: string }>();
  const earlier = new Date(Date.parse(row!.claimedAt) - minutes * 60_000).toISOString();
  await env.DB.batch([
    env.DB.prepare("UPDATE human_tasks SET claimed_at = ?2 WHERE id = ?1").bind(taskId, earlier),
    env.DB.prepare("UPDATE review_exposure SET started_at = ?3 WHERE task_id = ?1 AND started_at = ?2").bind(taskId, row!.claimedAt, earlier),
  ]);
}

const next = (s: { reviewKey: string; queueId: string }, reviewer: string) => api(`/api/v1/queues/${s.queueId}/next`, { key: s.reviewKey, body: { reviewer } });
const exposure = async (s: { reviewKey: string }, reviewer: string) => (await api(`/api/v1/wellness/exposure?reviewer=${reviewer}`, { key: s.reviewKey })).body;
const minutesOf = (status: any, category: string): number => status.categories.find((c: any) => c.category === category)?.exposureMinutes ?? 0;

/** Minutes since UTC midnight: a claim backdated further would fall partly into yesterday. */
function roomToday(): number {
  const now = new Date();
  return (now.getTime() - Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())) / 60_000;
}

function nextMidnight(): string {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)).toISOString();
}

describe("exposure caps", () => {
  it("are set and read by admins; an unknown category or a reviewer key is refused; the change is audited", async () => {
    const s = await setup("caps");
    expect((await api("/api/v1/wellness/caps", { key: s.apiKey })).body).toMatchObject({ defaultMinutes: null, categories: {} });
    const put = await api("/api/v1/wellness/caps", { key: s.apiKey, method: "PUT", body: { defaultMinutes: 240, categories: { self_harm: 30, animal_welfare: null } } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ defaultMinutes: 240, categories: { self_harm: 30, animal_welfare: null } });
    expect(put.body.effective).toMatchObject({ self_harm: 30, animal_welfare: null, scams_and_fraud: 240 });
    expect((await api("/api/v1/wellness/caps", { key: s.apiKey })).body.effective.violence).toBe(240);
    const unknown = await api("/api/v1/wellness/caps", { key: s.apiKey, method: "PUT", body: { categories: { gore: 10 } } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.code).toBe("request.invalid");
    expect((await api("/api/v1/wellness/caps", { key: s.reviewKey, method: "PUT", body: { defaultMinutes: 1 } })).status).toBe(403);
    // A replacement drops what it leaves out: the default goes, self_harm keeps its own cap.
    const replaced = await api("/api/v1/wellness/caps", { key: s.apiKey, method: "PUT", body: { categories: { self_harm: 45 } } });
    expect(replaced.body).toMatchObject({ defaultMinutes: null, categories: { self_harm: 45 } });
    expect(replaced.body.effective.scams_and_fraud).toBeNull();
    const audited = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'wellness.caps_updated'").bind(s.installationId).first<{ n: number }>();
    expect(audited!.n).toBe(2);
  });
});

describe("/next and the exposure cap", () => {
  it("skips a capped category to other work, then refuses with the typed error; another reviewer still gets the capped task", async () => {
    const s = await setup("next");
    const harm1 = await taskOf(s, "self_harm");
    const harm2 = await taskOf(s, "self_harm");
    const scam = await taskOf(s, "scams_and_fraud");

    const first = await next(s, "mod-a");
    expect(first.status).toBe(200);
    expect(first.body.id).toBe(harm1);
    expect(first.body.wellness.skipped).toEqual([]);

    // mod-a has held the self-harm task for 40 minutes (or since midnight, early in the UTC day).
    const held = Math.min(40, Math.floor(roomToday()) - 1);
    const cap = held >= 31 ? 30 : 0;
    if (held > 0) await backdateClaim(harm1, held);
    expect((await api("/api/v1/wellness/caps", { key: s.apiKey, method: "PUT", body: { categories: { self_harm: cap } } })).status).toBe(200);
    const status = await exposure(s, "mod-a");
    expect(minutesOf(status, "self_harm")).toBeGreaterThanOrEqual(Math.max(0, held));
    expect(minutesOf(status, "self_harm")).toBeLessThan(Math.max(0, held) + 5);
    expect(status.capped).toEqual(["self_harm"]);
    expect(status.resetsAt).toBe(nextMidnight());

    // The next self-harm task is due first, but mod-a gets the scam task, and is told why.
    const second = await next(s, "mod-a");
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(scam);
    expect(second.body.wellness.skipped).toEqual([{ category: "self_harm", reason: "exposure_cap_reached", exposureMinutes: expect.any(Number), capMinutes: cap, waitingTasks: 1 }]);
    expect(second.body.wellness.resetsAt).toBe(nextMidnight());

    // Only capped work is left for mod-a: a clear refusal naming the category and the reset.
    const refused = await next(s, "mod-a");
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("wellness.exposure_cap_reached");
    expect(refused.body.error.message).toContain("self_harm");
    expect(refused.body.error.details).toMatchObject({ capped: [{ category: "self_harm", capMinutes: cap, waitingTasks: 1 }], resetsAt: nextMidnight() });
    expect((await env.DB.prepare("SELECT state FROM human_tasks WHERE id = ?1").bind(harm2).first<{ state: string }>())!.state).toBe("open");

    // Another reviewer has no exposure: the capped category's task is theirs.
    const other = await next(s, "mod-b");
    expect(other.status).toBe(200);
    expect(other.body.id).toBe(harm2);
    expect(other.body.wellness.skipped).toEqual([]);
    // Nothing left at all is the plain empty queue, for both.
    expect((await next(s, "mod-b")).body.error.code).toBe("queue.empty");
    expect((await next(s, "mod-a")).body.error.code).toBe("queue.empty");
  });

  it("counts exposure from claims at a fixed instant: to the release, to the lease's end when it lapsed, to the completion, only the day's part, per category", async () => {
    const s = await setup("counting");
    const [released, lapsed, old, midnight] = [await taskOf(s, "violence"), await taskOf(s, "violence"), await taskOf(s, "violence"), await taskOf(s, "violence")];
    const other = await taskOf(s, "scams_and_fraud");
    const claim = async (task: string, reviewer: string) => expect((await api(`/api/v1/tasks/${task}/claim`, { key: s.reviewKey, body: { reviewer } })).status).toBe(200);
    const release = async (task: string) => expect((await api(`/api/v1/tasks/${task}/release`, { key: s.reviewKey, body: { reviewer: "mod-c" } })).status).toBe(200);
    // The records are made through the API, then placed around a fixed instant T (noon UTC) and
    // counted at T: the figures do not depend on when the test runs.
    const T = Date.parse("2026-03-10T12:00:00.000Z");
    const minutesBeforeT = (minutes: number) => new Date(T - minutes * 60_000).toISOString();
    const place = (task: string, times: { startedAt: string; endedAt?: string | null; leaseExpiresAt?: string }) =>
      // A key's reviewer is recorded as the key's own (`api_key:<id>/<name>`): the name is a label in it.
      env.DB.prepare("UPDATE review_exposure SET started_at = ?3, ended_at = ?4, lease_expires_at = COALESCE(?5, lease_expires_at) WHERE task_id = ?1 AND (reviewer = ?2 OR reviewer LIKE '%/' || ?2)")
        .bind(task, "mod-c", times.startedAt, times.endedAt ?? null, times.leaseExpiresAt ?? null)
        .run();

    // Held 30 to 10 minutes before T, then released: 20 minutes.
    await claim(released, "mod-c");
    await release(released);
    await place(released, { startedAt: minutesBeforeT(30), endedAt: minutesBeforeT(10) });
    // Claimed 40 minutes before T, its lease lapsed 30 minutes before T, taken by someone else since: 10 minutes.
    await claim(lapsed, "mod-c");
    await env.DB.prepare("UPDATE human_tasks SET lease_expires_at = ?2 WHERE id = ?1")
      .bind(lapsed, new Date(Date.now() - 60_000).toISOString())
      .run();
    await claim(lapsed, "mod-d");
    await place(lapsed, { startedAt: minutesBeforeT(40), endedAt: null, leaseExpiresAt: minutesBeforeT(30) });
    // Held and released two days before T: nothing on T's day.
    await claim(old, "mod-c");
    await release(old);
    await place(old, { startedAt: minutesBeforeT(2 * 1440 + 60), endedAt: minutesBeforeT(2 * 1440) });
    // Held from 13 to 11 hours before T, across midnight: only the hour after midnight counts.
    await claim(midnight, "mod-c");
    await release(midnight);
    await place(midnight, { startedAt: minutesBeforeT(13 * 60), endedAt: minutesBeforeT(11 * 60) });
    // Another category, claimed 25 minutes before T and completed 5 minutes before T: 20 minutes, apart.
    await claim(other, "mod-c");
    expect((await api(`/api/v1/tasks/${other}/complete`, { key: s.reviewKey, body: { reviewer: "mod-c", response: { verdict: "keep" } } })).status).toBe(200);
    await place(other, { startedAt: minutesBeforeT(25), endedAt: null });
    await env.DB.prepare("UPDATE human_tasks SET claimed_at = ?2, completed_at = ?3 WHERE id = ?1").bind(other, minutesBeforeT(25), minutesBeforeT(5)).run();

    const recorded = async (name: string) =>
      (await env.DB.prepare("SELECT reviewer FROM review_exposure WHERE installation_id = ?1 AND (reviewer = ?2 OR reviewer LIKE '%/' || ?2) LIMIT 1").bind(s.installationId, name).first<{ reviewer: string }>())!.reviewer;
    const status = await exposureStatus(env.DB, s.installationId, await recorded("mod-c"), new Date(T));
    expect(minutesOf(status, "violence")).toBeCloseTo(20 + 10 + 0 + 60, 1);
    expect(minutesOf(status, "scams_and_fraud")).toBeCloseTo(20, 1);
    expect(status.resetsAt).toBe("2026-03-11T00:00:00.000Z");
    expect(status.capped).toEqual([]);
    // mod-d's own claim of the lapsed task is theirs, not mod-c's.
    expect(minutesOf(await exposureStatus(env.DB, s.installationId, await recorded("mod-d"), new Date(T)), "violence")).toBe(0);
  });

  it("a claim that ended with its task is folded into the task's row by the schedule: the same minutes before, halfway and after, a released or taken-over claim stays a row, and a second pass does nothing", async () => {
    const s = await setup("folding");
    const [released, completed, lapsed] = [await taskOf(s, "violence"), await taskOf(s, "violence"), await taskOf(s, "violence")];
    const other = await taskOf(s, "scams_and_fraud");
    const claim = async (task: string, reviewer: string) => expect((await api(`/api/v1/tasks/${task}/claim`, { key: s.reviewKey, body: { reviewer } })).status).toBe(200);
    const complete = async (task: string, reviewer: string) => expect((await api(`/api/v1/tasks/${task}/complete`, { key: s.reviewKey, body: { reviewer, response: { verdict: "keep" } } })).status).toBe(200);
    const T = Date.parse("2026-03-10T12:00:00.000Z");
    const ago = (minutes: number) => new Date(T - minutes * 60_000).toISOString();
    // Places a claim of `reviewer` (and, when it ended with the task, the task's own times) around T.
    const place = async (task: string, reviewer: string, times: { startedAt: string; endedAt?: string; leaseExpiresAt?: string; completedAt?: string }) => {
      const row = await env.DB.prepare("SELECT started_at AS startedAt FROM review_exposure WHERE task_id = ?1 AND reviewer LIKE '%/' || ?2").bind(task, reviewer).first<{ startedAt: string }>();
      await env.DB.batch([
        env.DB.prepare("UPDATE review_exposure SET started_at = ?3, ended_at = ?4, lease_expires_at = COALESCE(?5, lease_expires_at) WHERE task_id = ?1 AND reviewer LIKE '%/' || ?2").bind(
          task,
          reviewer,
          times.startedAt,
          times.endedAt ?? null,
          times.leaseExpiresAt ?? null,
        ),
        env.DB.prepare("UPDATE human_tasks SET claimed_at = ?3, completed_at = COALESCE(?4, completed_at) WHERE id = ?1 AND claimed_at = ?2").bind(task, row!.startedAt, times.startedAt, times.completedAt ?? null),
      ]);
    };
    // Held 30 to 10 minutes before T, released: 20 minutes, a row that stays.
    await claim(released, "mod-e");
    expect((await api(`/api/v1/tasks/${released}/release`, { key: s.reviewKey, body: { reviewer: "mod-e" } })).status).toBe(200);
    await place(released, "mod-e", { startedAt: ago(30), endedAt: ago(10) });
    // Claimed 50 minutes before T and completed 40 before: 10 minutes, folded.
    await claim(completed, "mod-e");
    await complete(completed, "mod-e");
    await place(completed, "mod-e", { startedAt: ago(50), completedAt: ago(40) });
    // mod-e's lease lapsed (60 to 55 before T) and mod-f took the task and completed it: mod-e's 5
    // minutes stay a row, mod-f's claim is folded.
    await claim(lapsed, "mod-e");
    await env.DB.prepare("UPDATE human_tasks SET lease_expires_at = ?2 WHERE id = ?1")
      .bind(lapsed, new Date(Date.now() - 60_000).toISOString())
      .run();
    await place(lapsed, "mod-e", { startedAt: ago(60), leaseExpiresAt: ago(55) });
    await claim(lapsed, "mod-f");
    await complete(lapsed, "mod-f");
    await place(lapsed, "mod-f", { startedAt: ago(20), completedAt: ago(15) });
    // Another category: claimed 25 minutes before T, completed 5 before: 20 minutes, folded.
    await claim(other, "mod-e");
    await complete(other, "mod-e");
    await place(other, "mod-e", { startedAt: ago(25), completedAt: ago(5) });

    const reviewer = async (name: string) => (await env.DB.prepare("SELECT claimed_by AS who FROM human_tasks WHERE installation_id = ?1 AND claimed_by LIKE '%/' || ?2 LIMIT 1").bind(s.installationId, name).first<{ who: string }>())!.who;
    const [modE, modF] = [await reviewer("mod-e"), await reviewer("mod-f")];
    const minutes = async () => {
      const e = await exposureStatus(env.DB, s.installationId, modE, new Date(T));
      const f = await exposureStatus(env.DB, s.installationId, modF, new Date(T));
      return { eViolence: minutesOf(e, "violence"), eScams: minutesOf(e, "scams_and_fraud"), fViolence: minutesOf(f, "violence") };
    };
    const claimRows = async () => (await env.DB.prepare("SELECT task_id AS taskId, reviewer FROM review_exposure WHERE installation_id = ?1 ORDER BY started_at").bind(s.installationId).all<{ taskId: string; reviewer: string }>()).results;
    const counted = await minutes();
    expect(counted.eViolence).toBeCloseTo(20 + 10 + 5, 1);
    expect(counted.eScams).toBeCloseTo(20, 1);
    expect(counted.fViolence).toBeCloseTo(5, 1);
    expect(await claimRows()).toHaveLength(5);

    // Stopped after every slice of one task, the minutes never change.
    let passes = 0;
    for (;;) {
      const pass = await sweepExposureFolds(env, new Date(), 1);
      passes++;
      expect(await minutes()).toEqual(counted);
      if (pass.more === 0) break;
      expect(passes).toBeLessThan(50);
    }
    // Left: the released claim and mod-e's lapsed one; the three that ended with their task are on the task.
    expect(await claimRows()).toEqual([
      { taskId: lapsed, reviewer: modE },
      { taskId: released, reviewer: modE },
    ]);
    const folded = (await env.DB.prepare("SELECT id, exposure_category AS category FROM human_tasks WHERE installation_id = ?1 ORDER BY id").bind(s.installationId).all<{ id: string; category: string | null }>()).results;
    expect(Object.fromEntries(folded.map((row) => [row.id, row.category]))).toEqual({ [released]: null, [completed]: "violence", [lapsed]: "violence", [other]: "scams_and_fraud" });
    // Nothing is left to look at: another pass changes nothing.
    expect(await sweepExposureFolds(env, new Date())).toEqual({ folded: 0, looked: 0, more: 0 });
    expect(await minutes()).toEqual(counted);
  });

  it("another installation's caps are not applied, its queues are a 404, and its claims are not counted", async () => {
    const a = await setup("tenant-a");
    const b = await setup("tenant-b");
    expect((await api("/api/v1/wellness/caps", { key: a.apiKey, method: "PUT", body: { defaultMinutes: 0 } })).status).toBe(200);
    const aTask = await taskOf(a, "self_harm");
    const bTask = await taskOf(b, "self_harm");
    // In A every category is capped at 0 minutes: mod-a gets nothing there.
    const refusedInA = await next(a, "mod-a");
    expect(refusedInA.status).toBe(409);
    expect(refusedInA.body.error.code).toBe("wellness.exposure_cap_reached");
    // B has no caps of its own and does not see A's.
    expect((await api("/api/v1/wellness/caps", { key: b.apiKey })).body).toMatchObject({ defaultMinutes: null, categories: {} });
    expect((await api("/api/v1/wellness/caps", { key: b.apiKey })).body.effective.self_harm).toBeNull();
    expect((await api(`/api/v1/queues/${a.queueId}/next`, { key: b.reviewKey, body: { reviewer: "mod-a" } })).status).toBe(404);
    const inB = await next(b, "mod-a");
    expect(inB.status).toBe(200);
    expect(inB.body.id).toBe(bTask);
    expect(inB.body.wellness.skipped).toEqual([]);
    await backdateClaim(bTask, 5);
    // B's claim is B's: the same reviewer name in A has no exposure there.
    expect(minutesOf(await exposure(b, "mod-a"), "self_harm")).toBeGreaterThan(0);
    expect(minutesOf(await exposure(a, "mod-a"), "self_harm")).toBe(0);
    expect((await env.DB.prepare("SELECT state FROM human_tasks WHERE id = ?1").bind(aTask).first<{ state: string }>())!.state).toBe("open");
  });
});

describe("a task's display", () => {
  it("is its queue's profile on the claim's and the completion's answer, as a read of the task shows it (strict and standard)", async () => {
    for (const wellness of ["strict", "standard"] as const) {
      const s = await setup(`display-${wellness}`, wellness);
      const task = await taskOf(s, "scams_and_fraud");
      const claimed = await api(`/api/v1/tasks/${task}/claim`, { key: s.reviewKey, body: { reviewer: "mod-d" } });
      expect(claimed.status).toBe(200);
      const read = await api(`/api/v1/tasks/${task}`, { key: s.reviewKey });
      expect(read.body.display.profile).toBe(wellness);
      expect(claimed.body.display).toEqual(read.body.display);
      const completed = await api(`/api/v1/tasks/${task}/complete`, { key: s.reviewKey, body: { reviewer: "mod-d", response: { verdict: "keep" } } });
      expect(completed.status).toBe(200);
      expect(completed.body.display).toEqual(read.body.display);
      expect(Object.keys(completed.body)).not.toContain("queueWellness");
    }
  });
});
