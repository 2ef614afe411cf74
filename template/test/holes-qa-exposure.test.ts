// Hole: a QA task had no report, so no category: its claims counted toward no exposure cap and
// /next handed it out past the cap of its original's category. A QA task is limited and counted
// like the task it copies.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api } from "./helpers";
import { answer, holesSetup, openIn, openTask, sampleEverything } from "./holes-fixture";

describe("QA tasks and exposure caps", () => {
  it("/next passes over a QA task of a capped category, and a claim of one counts in that category", async () => {
    const s = await holesSetup("holes-qa-exposure");
    await sampleEverything(s);
    const task = await openTask(s, "scams_and_fraud");
    await answer(s.reviewKey, task.id, "alice");
    const [qaTask] = await openIn(s.otherKey, s.qaQueue);
    expect(qaTask).toBeTruthy();

    // A cap of 0 minutes: the reviewer is at the cap for scams from the start of the day.
    expect((await api("/api/v1/wellness/caps", { key: s.apiKey, method: "PUT", body: { categories: { scams_and_fraud: 0 } } })).status).toBe(200);
    const next = await api(`/api/v1/queues/${s.qaQueue}/next`, { key: s.otherKey, body: { reviewer: "dave" } });
    expect(next.status, JSON.stringify(next.body)).toBe(409);
    expect(next.body.error.code).toBe("wellness.exposure_cap_reached");
    expect(next.body.error.details.capped).toEqual([expect.objectContaining({ category: "scams_and_fraud", waitingTasks: 1 })]);

    // A direct claim is counted (not refused), in the original's category.
    const claim = await api(`/api/v1/tasks/${qaTask.id}/claim`, { key: s.otherKey, body: { reviewer: "dave" } });
    expect(claim.status, JSON.stringify(claim.body)).toBe(200);
    const rows = await env.DB.prepare("SELECT category FROM review_exposure WHERE installation_id = ?1 AND task_id = ?2").bind(s.installationId, qaTask.id).all<{ category: string }>();
    expect(rows.results.map((row) => row.category)).toEqual(["scams_and_fraud"]);
    const status = await api(`/api/v1/wellness/exposure?reviewer=dave`, { key: s.otherKey });
    expect(status.body.capped).toContain("scams_and_fraud");
  });
});
