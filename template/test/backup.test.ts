// Backup and restore: an installation exported to one document, its rows removed,
// restored from the document; the audit chain verifies, sealed data opens, tasks are listed.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../src/audit";
import { installationDeleteStatements } from "../src/installations/backup";
import { sha256Hex } from "../src/lib/crypto";
import { ADMIN_TOKEN, api, edge, newInstallation, publish, waitForRun } from "./helpers";

const reviewGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: "backup-q", response_schema: { type: "object" }, timeout_seconds: 3600 }, inputMapping: { category: "report.category" } },
    { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
};

const DESCRIPTION = "This account keeps posting scam links to my DMs";

/** A graph over the inline limit, so its artifact lives in R2 (`WORKFLOW_ARTIFACTS`). */
function largeGraph() {
  const filler = `${crypto.randomUUID()} ${"x".repeat(4_000)}`;
  const nodes: unknown[] = [{ id: "start", kind: "start" }];
  const edges = [];
  let previous = "start";
  let port = "success";
  for (let i = 0; i < 20; i++) {
    nodes.push({ id: `n${i}`, kind: "condition", config: { cases: [], case_ports: [], default_port: "next", description: filler } });
    edges.push(edge(previous, port, `n${i}`));
    previous = `n${i}`;
    port = "next";
  }
  nodes.push({ id: "done", kind: "end" });
  edges.push(edge(previous, port, "done"));
  return { schemaVersion: 1, nodes, edges };
}

async function installationWithData() {
  const { id, apiKey } = await newInstallation("backup");
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "backup-q", slaSeconds: 3600 } });
  expect(queue.status).toBe(201);
  const version = await publish(apiKey, reviewGraph);
  const large = await publish(apiKey, largeGraph());
  const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status).toBe(201);
  const report = await api("/api/v1/reports", {
    key: apiKey,
    body: { subject: { kind: "content", id: "post-9", snapshot: { text: "cheap pills" } }, category: "scams_and_fraud", reporter: { id: "user-1", contact: "person@example.org" }, description: DESCRIPTION },
  });
  expect(report.status).toBe(201);
  let task: { id: string } | undefined;
  for (let attempt = 0; attempt < 300 && !task; attempt++) {
    task = (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items?.[0];
    if (!task) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(task).toBeDefined();
  return { id, apiKey, queueId: queue.body.id as string, reportId: report.body.id as string, taskId: task!.id, largeVersionId: large.id, artifactKey: `artifacts/${large.artifact.digest.slice(7)}.js` };
}

/** Removes every row of the installation and its R2 anchor, as if restoring into a fresh state folder. */
async function removeInstallation(id: string) {
  await env.DB.batch(installationDeleteStatements(env.DB, id));
  await env.AUDIT_ANCHORS.delete(`audit/${id}/head.json`);
  const left = await env.DB.prepare("SELECT (SELECT COUNT(*) FROM installations WHERE id = ?1) + (SELECT COUNT(*) FROM audit_events WHERE installation_id = ?1) + (SELECT COUNT(*) FROM reports WHERE installation_id = ?1) AS n")
    .bind(id)
    .first<{ n: number }>();
  expect(left?.n).toBe(0);
}

const restore = (backup: unknown) => api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });

describe("backup and restore", () => {
  it("round trip: the restored audit chain verifies, sealed data opens and tasks are listed", async () => {
    const a = await installationWithData();
    const exported = await api("/api/v1/installation/export", { key: a.apiKey, method: "POST" });
    expect(exported.status, JSON.stringify(exported.body)).toBe(200);
    const backup = exported.body;
    expect(backup.manifest).toMatchObject({ format: "safest-tools.installation-backup/1", installationId: a.id, digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/u) });
    expect(backup.manifest.requires.join(" ")).toContain("REPORT_MASTER_KEY");
    // Data keys: the period's, and the installation's own, which wraps the reporter's key (person_data_keys).
    expect(backup.manifest.counts).toMatchObject({ installations: 1, reports: 1, human_tasks: 1, data_keys: 2, person_data_keys: 1 });
    expect(backup.manifest.counts.audit_events).toBeGreaterThan(3);
    expect(backup.objects).toContainEqual(expect.objectContaining({ bucket: "AUDIT_ANCHORS", key: `audit/${a.id}/head.json` }));
    expect(backup.tables.audit_events.some((row: { action: string }) => row.action === "installation.exported")).toBe(true);
    // Sealed columns travel as the ciphertext they are at rest.
    expect(JSON.stringify(backup.tables.reports)).not.toContain(DESCRIPTION);
    expect(JSON.stringify(backup)).not.toContain("person@example.org");

    const refused = await restore(backup);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("installation_import.exists");

    expect(backup.objects).toContainEqual(expect.objectContaining({ bucket: "WORKFLOW_ARTIFACTS", key: a.artifactKey }));
    await removeInstallation(a.id);
    await env.WORKFLOW_ARTIFACTS.delete(a.artifactKey);
    expect((await api(`/api/v1/queues/${a.queueId}/tasks`, { key: a.apiKey })).status).toBe(401);

    const restored = await restore(backup);
    expect(restored.status).toBe(201);
    expect(restored.body).toMatchObject({ installationId: a.id, auditChain: { ok: true, mode: "full" } });
    expect(restored.body.auditChain.events).toBe(backup.manifest.counts.audit_events);

    const verify = await api("/api/v1/audit/verify?mode=full", { key: a.apiKey });
    expect(verify.body).toMatchObject({ ok: true });
    expect(verify.body.events).toBe(backup.manifest.counts.audit_events + 1); // + installation.restored
    const report = await api(`/api/v1/reports/${a.reportId}`, { key: a.apiKey });
    expect(report.status).toBe(200);
    expect(JSON.stringify(report.body)).toContain(DESCRIPTION);
    const tasks = await api(`/api/v1/queues/${a.queueId}/tasks`, { key: a.apiKey });
    expect(tasks.body.items.map((t: { id: string }) => t.id)).toEqual([a.taskId]);
    // The large artifact is back in R2, digest-checked when a run loads it.
    const read = await api(`/api/v1/workflow-versions/${a.largeVersionId}`, { key: a.apiKey });
    expect(read.body.artifact.storage).toBe("r2");
    const run = await api("/api/v1/runs", { key: a.apiKey, body: { workflowVersionId: a.largeVersionId, authorityMode: "shadow", input: {} } });
    expect(run.status).toBe(201);
    expect((await waitForRun(a.apiKey, run.body.id)).state).toBe("succeeded");
    const task = await api(`/api/v1/tasks/${a.taskId}`, { key: a.apiKey });
    expect(task.status).toBe(200);
    expect(JSON.stringify(task.body)).toContain("scams_and_fraud");
  });

  it("refuses a file changed after export, and keeps nothing of a backup whose chain does not verify", async () => {
    const a = await installationWithData();
    const backup = (await api("/api/v1/installation/export", { key: a.apiKey, method: "POST" })).body;
    await removeInstallation(a.id);

    const edited = structuredClone(backup);
    const event = edited.tables.audit_events.find((row: { action: string }) => row.action === "report.received" || row.action === "report.created") ?? edited.tables.audit_events[1];
    event.details_json = JSON.stringify({ edited: true });
    const digestOnly = await restore(edited);
    expect(digestOnly.status).toBe(422);
    expect(digestOnly.body.error.code).toBe("installation_import.digest_mismatch");

    // The same edit with a digest recomputed to match: the entry MAC gives it away.
    edited.manifest.digest = `sha256:${await sha256Hex(canonicalJson({ tables: edited.tables, objects: edited.objects }))}`;
    const broken = await restore(edited);
    expect(broken.status).toBe(422);
    expect(broken.body.error.code).toBe("installation_import.chain_broken");
    expect(broken.body.error.details).toMatchObject({ ok: false, firstBroken: { reason: "entry_mac_mismatch" } });
    const left = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1").bind(a.id).first<{ n: number }>();
    expect(left?.n).toBe(0);
    expect(await env.AUDIT_ANCHORS.head(`audit/${a.id}/head.json`)).toBeNull();

    // The untouched file still restores.
    expect((await restore(backup)).status).toBe(201);
  });

  it("exports only to the installation's admin, and restores only with the admin token", async () => {
    const a = await newInstallation("backup-scopes");
    const reader = await api("/api/v1/api-keys", { key: a.apiKey, body: { name: "reader", scopes: ["read"] } });
    expect((await api("/api/v1/installation/export", { key: reader.body.apiKey, method: "POST" })).status).toBe(403);
    const backup = (await api("/api/v1/installation/export", { key: a.apiKey, method: "POST" })).body;
    expect((await api("/api/v1/installations/import", { key: a.apiKey, body: backup })).status).toBe(401);
  });
});
