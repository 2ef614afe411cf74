// Hole: the rule that keeps a person from QA-reviewing their own answer compared the reviewer
// *name* an API key's client sends, so one key could answer as "alice" and QA it as "bob". The
// rule is the authenticated principal's (key id, console user id); a name only adds to it.
import { describe, expect, it } from "vitest";
import { api } from "./helpers";
import { answer, holesSetup, openIn, openTask, sampleEverything } from "./holes-fixture";

describe("QA of one's own answer", () => {
  it("is refused to the same API key under another reviewer name, by claim and by /next", async () => {
    const s = await holesSetup("holes-qa-identity");
    await sampleEverything(s);
    const task = await openTask(s);
    await answer(s.reviewKey, task.id, "alice");
    const [qaTask] = await openIn(s.reviewKey, s.qaQueue);
    expect(qaTask).toBeTruthy();

    const renamed = await api(`/api/v1/tasks/${qaTask.id}/claim`, { key: s.reviewKey, body: { reviewer: "bob" } });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(403);
    expect(renamed.body.error.code).toBe("qa.own_task");
    const unnamed = await api(`/api/v1/tasks/${qaTask.id}/claim`, { key: s.reviewKey, body: {} });
    expect(unnamed.status).toBe(403);
    const next = await api(`/api/v1/queues/${s.qaQueue}/next`, { key: s.reviewKey, body: { reviewer: "carol" } });
    expect(next.status, JSON.stringify(next.body)).toBe(404);
    expect(next.body.error.code).toBe("queue.empty");

    // Another principal takes it, whatever name it gives (even the original's).
    const other = await api(`/api/v1/queues/${s.qaQueue}/next`, { key: s.otherKey, body: { reviewer: "dave" } });
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    expect(other.body.id).toBe(qaTask.id);
  });

  it("is refused at completion too: the first key cannot complete a QA task another key claimed, under that key's name", async () => {
    const s = await holesSetup("holes-qa-identity-complete");
    await sampleEverything(s);
    const task = await openTask(s);
    await answer(s.reviewKey, task.id, "alice");
    const [qaTask] = await openIn(s.reviewKey, s.qaQueue);
    const claimed = await api(`/api/v1/tasks/${qaTask.id}/claim`, { key: s.otherKey, body: { reviewer: "carol" } });
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
    const hijack = await api(`/api/v1/tasks/${qaTask.id}/complete`, { key: s.reviewKey, body: { reviewer: "carol", response: { outcome: "remove" } } });
    expect(hijack.status, JSON.stringify(hijack.body)).toBe(403);
    expect(hijack.body.error.code).toBe("qa.own_task");
    // The claimant completes it.
    const done = await api(`/api/v1/tasks/${qaTask.id}/complete`, { key: s.otherKey, body: { reviewer: "carol", response: { outcome: "keep" } } });
    expect(done.status, JSON.stringify(done.body)).toBe(200);
  });

  it("is still refused under the original's name from another key", async () => {
    const s = await holesSetup("holes-qa-identity-name");
    await sampleEverything(s);
    const task = await openTask(s);
    await answer(s.reviewKey, task.id, "erin");
    const [qaTask] = await openIn(s.reviewKey, s.qaQueue);
    const sameName = await api(`/api/v1/tasks/${qaTask.id}/claim`, { key: s.otherKey, body: { reviewer: "erin" } });
    expect(sameName.status).toBe(403);
  });
});
