// Performance cuts that must not change behaviour: an action's delivery written leased to
// the host that makes its first attempt (no claim round trip), the isolate's bound on inline
// attempts, and the short per-isolate cache of authenticated API keys (revocation in the same
// isolate is immediate), and the isolate's bounded copy of immutable artifact rows.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Actor } from "../src/auth";
import { decideProposal, DELIVERY_SOURCES } from "../src/enforcement/actions";
import { reserveInline, runDeliveryAttempt } from "../src/enforcement/delivery-inline";
import { sweepPendingDeliveries } from "../src/enforcement/webhooks";
import { installationDeleteStatements } from "../src/installations/backup";
import { ARTIFACT_CACHE_LIMIT, artifactRowCached, loadArtifactRow } from "../src/workflows/artifacts";
import { api, edge, newInstallation, publish, receiverLog, startRun, until, waitForRun } from "./helpers";

const actionGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post", approval_timeout_seconds: 3600 }, inputMapping: { postId: "input.postId" } },
    { id: "applied", kind: "end", config: { terminal_code: "applied" } },
    { id: "other", kind: "end", config: { terminal_code: "other" } },
  ],
  edges: [edge("start", "success", "remove"), edge("remove", "applied", "applied"), edge("remove", "rejected", "other"), edge("remove", "expired", "other"), edge("remove", "failed", "other")],
};

async function setup(path: string) {
  const { id: installationId, apiKey } = await newInstallation();
  const hook = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } })).status).toBe(201);
  return { installationId, apiKey, version: await publish(apiKey, actionGraph) };
}

type DeliveryRow = { id: string; state: string; attempts: number; next_attempt_at: string; created_at: string };

describe("an inline delivery written leased to its host", () => {
  it("is sent once by the host; a queue message meanwhile sends nothing; lost, the sweep recovers it after the lease", async () => {
    const { installationId, apiKey, version } = await setup("/ok/leased-lost");
    const run = await startRun(apiKey, version.id, { authorityMode: "assisted", input: { postId: "p1" } });
    const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items.find((p: { runId: string }) => p.runId === run.id), "a proposal");
    const actor: Actor = { installationId, scopes: ["admin"], audit: { type: "admin", id: "test" } };
    // The approval commits the delivery leased to this host's first attempt, which is then dropped (an isolate gone).
    await decideProposal(env, actor, proposal.id, { approve: true, approver: "mod" }, () => undefined);
    const row = await env.DB.prepare("SELECT id, state, attempts, next_attempt_at, created_at FROM webhook_deliveries WHERE installation_id = ?1").bind(installationId).first<DeliveryRow>();
    expect(row).toMatchObject({ state: "pending", attempts: 0 });
    // Leased: not due before the request timeout plus the claim margin have passed.
    expect(Date.parse(row!.next_attempt_at) - Date.parse(row!.created_at)).toBeGreaterThanOrEqual(60_000);
    // A queue message (a resend, a stray wake-up) during the lease waits for it and sends nothing.
    const early = await runDeliveryAttempt(env, row!.id, DELIVERY_SOURCES, "queue");
    expect(early.kind).toBe("retry");
    expect(await receiverLog("/ok/leased-lost")).toEqual([]);
    // The sweep leaves a leased row alone until its lease is over plus the grace.
    await sweepPendingDeliveries(env, new Date(Date.parse(row!.created_at) + 30_000));
    expect((await env.DB.prepare("SELECT next_attempt_at FROM webhook_deliveries WHERE id = ?1").bind(row!.id).first<{ next_attempt_at: string }>())?.next_attempt_at).toBe(row!.next_attempt_at);
    expect((await sweepPendingDeliveries(env, new Date(Date.parse(row!.next_attempt_at) + 61_000))).requeued).toBeGreaterThanOrEqual(1);
    const done = await waitForRun(apiKey, run.id);
    expect(done.output.terminalCode).toBe("applied");
    const log = await receiverLog("/ok/leased-lost");
    expect(log.map((entry) => [entry.webhookId, entry.status, entry.verified])).toEqual([[row!.id, 200, true]]);
    const history = (await api(`/api/v1/webhook-deliveries/${row!.id}`, { key: apiKey })).body.history;
    expect(history.map((a: { attempt: number; via: string }) => [a.attempt, a.via])).toEqual([[1, "queue"]]);
  });

  it("two autonomous actions in a row, each sent inline once with a valid signature (the signer cached by sealed secret)", async () => {
    const { apiKey, version } = await setup("/ok/leased-twice");
    for (const postId of ["a", "b"]) {
      const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { postId } })).id);
      expect(done.output.terminalCode).toBe("applied");
    }
    const log = await receiverLog("/ok/leased-twice");
    expect(log.map((entry) => [entry.data.params.postId, entry.verified, entry.status])).toEqual([
      ["a", true, 200],
      ["b", true, 200],
    ]);
    expect(new Set(log.map((entry) => entry.webhookId)).size).toBe(2);
    const { items } = (await api("/api/v1/webhook-deliveries", { key: apiKey })).body;
    for (const item of items) {
      const history = (await api(`/api/v1/webhook-deliveries/${item.id}`, { key: apiKey })).body.history;
      expect(history.map((a: { attempt: number; via: string }) => [a.attempt, a.via])).toEqual([[1, "inline"]]);
    }
  });

  it("an isolate reserves at most 8 inline attempts at once; a released one is free again", () => {
    // (A reservation whose work was dropped, as in the first test, holds its slot until its lease lapses.)
    const slots: NonNullable<ReturnType<typeof reserveInline>>[] = [];
    try {
      for (let slot = reserveInline(env); slot && slots.length < 20; slot = reserveInline(env)) slots.push(slot);
      expect(slots.length).toBeGreaterThan(0);
      expect(slots.length).toBeLessThanOrEqual(8);
      expect(reserveInline(env)).toBeNull();
      slots.pop()!.release();
      const again = reserveInline(env);
      expect(again).not.toBeNull();
      slots.push(again!);
    } finally {
      for (const slot of slots) slot.release();
    }
  });
});

describe("an action's type read with its run", () => {
  it("a report's run delivers to the type's endpoint, signed, naming the report's subject and the type's reversibility", async () => {
    const path = "/ok/type-folded";
    const { apiKey } = await setup(path);
    const byReport = {
      ...actionGraph,
      nodes: actionGraph.nodes.map((node) => (node.id === "remove" ? { ...node, inputMapping: { postId: "report.subject.id" } } : node)),
    };
    const version = await publish(apiKey, byReport);
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-folded" }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    const log = await until(async () => {
      const entries = await receiverLog(path);
      return entries.length > 0 ? entries : undefined;
    }, "a delivery");
    expect(log.map((entry) => [entry.verified, entry.status])).toEqual([[true, 200]]);
    expect(log[0]!.data).toMatchObject({ actionType: "remove_post", reportId: report.body.id, subject: { kind: "content", id: "post-folded" }, params: { postId: "post-folded" }, reversible: true });
  });
});

describe("a triggered run's version read with its trigger", () => {
  it("starts the run of the trigger's version as named in its audit event; once the version is retired, a report's trigger is refused with the typed error", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const file = (id: string) => api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id }, category: "scams_and_fraud" } });
    const first = await file("post-v1");
    expect(first.body.runs).toHaveLength(1);
    const run = await waitForRun(apiKey, first.body.runs[0].runId);
    expect(run).toMatchObject({ state: "succeeded", workflowVersionId: version.id, reportId: first.body.id });
    const created = await env.DB.prepare("SELECT details_json AS details FROM audit_events WHERE action = 'workflow.run_created' AND target_id = ?1").bind(run.id).first<{ details: string }>();
    expect(JSON.parse(created!.details)).toMatchObject({ workflowVersionId: version.id, version: version.version });
    expect((await api(`/api/v1/workflow-versions/${version.id}/retire`, { key: apiKey, method: "POST" })).status).toBe(200);
    const second = await file("post-v2");
    expect(second.status).toBe(201);
    expect(second.body.runs).toEqual([{ triggerId: expect.any(String), error: "workflow_version.retired" }]);
  });
});

describe("API keys cached per isolate", () => {
  it("a key revoked through this isolate is refused at once, however recently it was used", async () => {
    const { apiKey } = await newInstallation();
    const created = await api("/api/v1/api-keys", { key: apiKey, body: { name: "intake", scopes: ["reports:write", "read"] } });
    const key = created.body.apiKey as string;
    expect((await api("/api/v1/reports", { key })).status).toBe(200);
    expect((await api("/api/v1/reports", { key })).status).toBe(200); // served from the cache now
    expect((await api(`/api/v1/api-keys/${created.body.id}/revoke`, { key: apiKey, body: {} })).status).toBe(200);
    const refused = await api("/api/v1/reports", { key });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("auth.unauthenticated");
    expect((await api("/api/v1/reports", { key: apiKey })).status).toBe(200);
  });

  it("the keys of an installation removed through this isolate are refused at once", async () => {
    const { id, apiKey } = await newInstallation();
    expect((await api("/api/v1/reports", { key: apiKey })).status).toBe(200);
    await env.DB.batch(installationDeleteStatements(env.DB, id));
    expect((await api("/api/v1/reports", { key: apiKey })).status).toBe(401);
  });

  it("a cached key keeps its scopes: a read-only key is still refused a write", async () => {
    const { apiKey } = await newInstallation();
    const reader = (await api("/api/v1/api-keys", { key: apiKey, body: { name: "reader", scopes: ["read"] } })).body.apiKey as string;
    expect((await api("/api/v1/reports", { key: reader })).status).toBe(200);
    const write = await api("/api/v1/reports", { key: reader, body: { subject: { kind: "content", id: "c1" }, category: "scams_and_fraud" } });
    expect(write.status).toBe(403);
    expect(write.body.error.code).toBe("auth.scope_missing");
  });
});

describe("artifact rows cached per isolate", () => {
  const waiting = {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "await", kind: "wait_for_event", config: { event_type: "appeal.filed", timeout_seconds: 3600 } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "await"), edge("await", "received", "done"), edge("await", "timeout", "done")],
  };

  /** The test env with a DB that records the statements prepared through it. */
  function countingEnv() {
    const prepared: string[] = [];
    const db = {
      prepare: (sql: string) => {
        prepared.push(sql);
        return env.DB.prepare(sql);
      },
    } as unknown as D1Database;
    return { prepared, env: { ...env, DB: db } as Env };
  }

  it("a start whose version was read live takes the row from the isolate; another installation's id never gets it; a Workflows load and a retired version still go to D1", async () => {
    const a = await newInstallation("a");
    const b = await newInstallation("b");
    const version = await publish(a.apiKey, waiting);
    await startRun(a.apiKey, version.id);
    const counted = countingEnv();
    const row = await loadArtifactRow(counted.env, version.artifact.id, version.id, { installationId: a.id });
    expect(row).toMatchObject({ id: version.artifact.id, installationId: a.id, bundleDigest: version.artifact.digest, status: "ready" });
    expect(counted.prepared).toHaveLength(0);
    // Another installation's id: not served from the isolate, and D1 refuses it too.
    await expect(loadArtifactRow(counted.env, version.artifact.id, version.id, { installationId: b.id })).rejects.toMatchObject({ code: "workflow_artifact.not_ready" });
    expect(counted.prepared).toHaveLength(1);
    const refused = await api("/api/v1/runs", { key: b.apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous" } });
    expect(refused.status).toBe(404);
    expect(refused.body.error.code).toBe("workflow_version.not_found");
    // A Workflows instance loading its version (no live read behind it) reads D1 every time.
    expect((await loadArtifactRow(counted.env, version.artifact.id, version.id)).id).toBe(version.artifact.id);
    expect(counted.prepared).toHaveLength(2);
    // Retired: D1 refuses the load, and a new run is refused before any load.
    expect((await api(`/api/v1/workflow-versions/${version.id}/retire`, { key: a.apiKey, method: "POST" })).status).toBe(200);
    await expect(loadArtifactRow(counted.env, version.artifact.id, version.id)).rejects.toMatchObject({ code: "workflow_artifact.not_ready" });
    const retired = await api("/api/v1/runs", { key: a.apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous" } });
    expect(retired.body.error.code).toBe("workflow_version.retired");
  });

  it(`keeps at most ${ARTIFACT_CACHE_LIMIT} rows, the oldest first out`, async () => {
    const { id: installationId, apiKey } = await newInstallation();
    const workflow = await api("/api/v1/workflows", { body: { name: `wf-${crypto.randomUUID()}` }, key: apiKey });
    const versions: Array<{ id: string; artifact: { id: string } }> = [];
    for (let i = 0; i <= ARTIFACT_CACHE_LIMIT; i++) {
      const published = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph: waiting }, key: apiKey });
      expect(published.status).toBe(201);
      versions.push(published.body);
    }
    const [first, ...rest] = versions;
    await loadArtifactRow(env, first!.artifact.id, first!.id);
    expect(artifactRowCached(first!.artifact.id, first!.id)).toBe(true);
    for (const version of rest) await loadArtifactRow(env, version.artifact.id, version.id);
    expect(artifactRowCached(first!.artifact.id, first!.id)).toBe(false);
    expect(rest.every((version) => artifactRowCached(version.artifact.id, version.id))).toBe(true);
    // Evicted, it is read from D1 again (and kept again).
    const counted = countingEnv();
    expect((await loadArtifactRow(counted.env, first!.artifact.id, first!.id, { installationId })).id).toBe(first!.artifact.id);
    expect(counted.prepared).toHaveLength(1);
    expect(artifactRowCached(first!.artifact.id, first!.id)).toBe(true);
  });
});
