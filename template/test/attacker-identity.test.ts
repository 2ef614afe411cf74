// Identity is the authenticated principal: an API key's reviewer name is a label inside that key's
// own space, so a key cannot release, take over or complete a console moderator's lease by sending
// their name, cannot spend their exposure cap, and whoever answered a run's review task does not
// approve the action it led to.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { asUser, keyWith, signIn } from "./attacker-fixture";
import { api, edge, publish, until } from "./helpers";
import { holesSetup, openTask } from "./holes-fixture";

describe("leases and exposure follow the principal, not the name sent", () => {
  it("a review key sending a moderator's email neither releases nor takes over their live lease", async () => {
    const s = await holesSetup("attack-lease-name");
    const moderator = await signIn(s.installationId, "mod@example.org", "moderator");
    const task = await openTask(s);
    const claimed = await asUser(moderator, `/tasks/${task.id}/claim`, {});
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
    expect(claimed.body.claim.reviewer).toBe("mod@example.org");

    const release = await api(`/api/v1/tasks/${task.id}/release`, { key: s.reviewKey, body: { reviewer: "mod@example.org" } });
    expect(release.status, JSON.stringify(release.body)).toBe(409);
    expect(release.body.error.code).toBe("task.not_claimed_by_you");
    const claim = await api(`/api/v1/tasks/${task.id}/claim`, { key: s.reviewKey, body: { reviewer: "mod@example.org" } });
    expect(claim.status, JSON.stringify(claim.body)).toBe(409);
    const complete = await api(`/api/v1/tasks/${task.id}/complete`, { key: s.reviewKey, body: { reviewer: "mod@example.org", response: { outcome: "keep" } } });
    expect(complete.status, JSON.stringify(complete.body)).toBe(409);
    expect(complete.body.error.code).toBe("task.lease_required");
    const held = await api(`/api/v1/tasks/${task.id}`, { key: s.apiKey });
    expect(held.body).toMatchObject({ state: "claimed", claim: { reviewer: "mod@example.org" } });
  });

  it("exposure a key's claims add under a moderator's name is the key's, not the moderator's", async () => {
    const s = await holesSetup("attack-exposure-name");
    const moderator = await signIn(s.installationId, "mod2@example.org", "moderator");
    const task = await openTask(s);
    const claimed = await api(`/api/v1/tasks/${task.id}/claim`, { key: s.reviewKey, body: { reviewer: "mod2@example.org" } });
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
    expect(claimed.body.claim.reviewer).toBe("mod2@example.org");
    // An hour of holding, without waiting an hour (or less, just after midnight UTC).
    const row = await env.DB.prepare("SELECT claimed_at AS claimedAt FROM human_tasks WHERE id = ?1").bind(task.id).first<{ claimedAt: string }>();
    const now = new Date();
    const minutes = Math.min(60, (now.getTime() - Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())) / 60_000 - 1);
    const earlier = new Date(Date.parse(row!.claimedAt) - minutes * 60_000).toISOString();
    await env.DB.batch([
      env.DB.prepare("UPDATE human_tasks SET claimed_at = ?2 WHERE id = ?1").bind(task.id, earlier),
      env.DB.prepare("UPDATE review_exposure SET started_at = ?3 WHERE task_id = ?1 AND started_at = ?2").bind(task.id, row!.claimedAt, earlier),
    ]);
    const minutesOf = (status: any) => status.categories.find((c: any) => c.category === "scams_and_fraud")?.exposureMinutes ?? 0;
    const mine = await asUser(moderator, "/wellness/exposure");
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    expect(minutesOf(mine.body)).toBe(0);
    const keys = await api("/api/v1/wellness/exposure?reviewer=mod2@example.org", { key: s.reviewKey });
    expect(minutesOf(keys.body)).toBeGreaterThan(minutes - 2);
  });
});

describe("four eyes on approvals", () => {
  it("the key that answered a run's review task cannot approve the action it led to, under any approver name; another key can", async () => {
    const s = await holesSetup("attack-self-approval");
    const hook = await api("/api/v1/webhook-endpoints", { key: s.apiKey, body: { url: "https://hooks.product.test/ok/self-approval", retryBaseSeconds: 0, maxAttempts: 5 } });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: "/ok/self-approval", secret: hook.body.secret }) });
    const type = await api("/api/v1/action-types", { key: s.apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: true } });
    expect(type.status, JSON.stringify(type.body)).toBe(201);
    const version = await publish(s.apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "work", response_schema: { type: "object" }, timeout_seconds: 3600 } },
        { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post", approval_timeout_seconds: 3600 }, inputMapping: { postId: "input.postId" } },
        { id: "applied", kind: "end", config: { terminal_code: "applied" } },
        { id: "other", kind: "end", config: { terminal_code: "other" } },
      ],
      edges: [
        edge("start", "success", "review"),
        edge("review", "completed", "remove"),
        edge("review", "timeout", "other"),
        edge("remove", "applied", "applied"),
        edge("remove", "rejected", "other"),
        edge("remove", "expired", "other"),
        edge("remove", "failed", "other"),
      ],
    });
    const run = await api("/api/v1/runs", { key: s.apiKey, body: { workflowVersionId: version.id, authorityMode: "assisted", input: { postId: "p-9" } } });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    const task = await until(async () => (await api(`/api/v1/queues/${s.workQueue}/tasks`, { key: s.reviewKey })).body.items.find((t: any) => t.runId === run.body.id), "the review task");
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: s.reviewKey, body: { reviewer: "alice" } })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: s.reviewKey, body: { reviewer: "alice", response: { remove: true } } })).status).toBe(200);
    const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: s.apiKey })).body.items.find((p: any) => p.runId === run.body.id), "a proposal");

    const self = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: s.reviewKey, body: { approver: "bob" } });
    expect(self.status, JSON.stringify(self.body)).toBe(403);
    expect(self.body.error.code).toBe("action_proposal.own_review");
    const other = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: await keyWith(s.apiKey, ["review"]), body: { approver: "carol" } });
    expect(other.status, JSON.stringify(other.body)).toBe(200);
  });
});
