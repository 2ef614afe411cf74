// A console user's queue limits hold everywhere a report's, run's or appeal's work shows, not only
// at GET /reports/:id: run content, the run list, appeals, approvals; the audit trail (which names
// every queue's work) is not theirs to read.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { asUser, signIn } from "./attacker-fixture";
import { api, publish, removePostGraph, until } from "./helpers";
import { holesSetup, openTask } from "./holes-fixture";

describe("queue limits", () => {
  it("a moderator limited to another queue gets 404s for the run's content, appeal and proposal, the run is not listed, and the audit trail is refused", async () => {
    const s = await holesSetup("attack-queue-limits");
    const elsewhere = await api("/api/v1/queues", { key: s.apiKey, body: { name: "elsewhere", slaSeconds: 3600 } });
    const task = await openTask(s);
    const appeal = await api("/api/v1/appeals", { key: s.apiKey, body: { reportId: task.reportId, appellantRole: "notifier", reason: "Look again." } });
    expect(appeal.status).toBe(201);
    // A proposal of a run that put no work in either queue.
    const hook = await api("/api/v1/webhook-endpoints", { key: s.apiKey, body: { url: "https://hooks.product.test/ok/queue-limits", retryBaseSeconds: 0, maxAttempts: 5 } });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path: "/ok/queue-limits", secret: hook.body.secret }) });
    expect((await api("/api/v1/action-types", { key: s.apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true } })).status).toBe(201);
    const version = await publish(s.apiKey, removePostGraph);
    const assisted = await api("/api/v1/runs", { key: s.apiKey, body: { workflowVersionId: version.id, authorityMode: "assisted", input: { postId: "p-1" } } });
    const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: s.apiKey })).body.items.find((p: any) => p.runId === assisted.body.id), "a proposal");

    for (const [email, queueId] of [
      ["limited@example.org", elsewhere.body.id],
      ["work@example.org", s.workQueue],
    ]) {
      expect((await api("/api/v1/console-users", { key: s.apiKey, body: { email, role: "moderator", queueIds: [queueId] } })).status).toBe(201);
    }
    const limited = await signIn(s.installationId, "limited@example.org", "moderator");
    const work = await signIn(s.installationId, "work@example.org", "moderator");

    expect((await asUser(limited, `/runs/${task.runId}/content`)).status).toBe(404);
    expect((await asUser(limited, `/runs/${task.runId}`)).status).toBe(404);
    expect((await asUser(limited, "/runs?limit=200")).body.items.map((r: any) => r.id)).not.toContain(task.runId);
    expect((await asUser(limited, `/appeals/${appeal.body.id}`)).status).toBe(404);
    expect((await asUser(limited, "/action-proposals?state=approval_required")).body.items).toEqual([]);
    expect((await asUser(limited, `/action-proposals/${proposal.id}`)).status).toBe(404);
    expect((await asUser(limited, `/action-proposals/${proposal.id}/approve`, {})).status).toBe(404);
    const audit = await asUser(limited, "/audit-events");
    expect(audit.status).toBe(403);
    expect(audit.body.error.code).toBe("audit.queue_limited");

    // The moderator of the queue that holds the work sees it.
    expect((await asUser(work, `/runs/${task.runId}/content`)).status).toBe(200);
    expect((await asUser(work, "/runs?limit=200")).body.items.map((r: any) => r.id)).toContain(task.runId);
    expect((await asUser(work, `/appeals/${appeal.body.id}`)).status).toBe(200);
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: s.apiKey })).status).toBe(200);
  });
});
