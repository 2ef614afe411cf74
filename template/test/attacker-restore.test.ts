// A restore trusts no reference a backup makes: a row naming another installation's rows (its own
// id, or a foreign key) is refused, and a backup cut down to no audit trail is refused rather than
// restored as "verified".
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../src/audit";
import { installationDeleteStatements } from "../src/installations/backup";
import { sha256Hex } from "../src/lib/crypto";
import { ADMIN_TOKEN, api, edge, newInstallation, publish } from "./helpers";

const graph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "done")],
};

async function exportedAndRemoved(name: string) {
  const { id, apiKey } = await newInstallation(name);
  const version = await publish(apiKey, graph);
  expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } })).status).toBe(201);
  const backup = (await api("/api/v1/installation/export", { key: apiKey, method: "POST" })).body;
  await env.DB.batch(installationDeleteStatements(env.DB, id));
  await env.AUDIT_ANCHORS.delete(`audit/${id}/head.json`);
  return { id, backup };
}

async function redigest(backup: any) {
  backup.manifest.digest = `sha256:${await sha256Hex(canonicalJson({ tables: backup.tables, objects: backup.objects }))}`;
  return backup;
}

const restore = (backup: unknown) => api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup });

describe("restore refuses what a backup may not claim", () => {
  it("a row naming another installation's row (a foreign key, or its own id) is refused, and nothing is written", async () => {
    const victim = await newInstallation("restore-victim");
    const victimVersion = await publish(victim.apiKey, graph);
    const { id, backup } = await exportedAndRemoved("restore-crafted");

    const byReference = structuredClone(backup);
    byReference.tables.triggers[0].workflow_version_id = victimVersion.id;
    const refused = await restore(await redigest(byReference));
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body.error.code).toBe("installation_import.foreign_reference");

    const byId = structuredClone(backup);
    byId.tables.workflow_versions[0].id = victimVersion.id;
    byId.tables.triggers[0].workflow_version_id = victimVersion.id;
    const claimed = await restore(await redigest(byId));
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(422);
    expect(claimed.body.error.code).toBe("installation_import.foreign_reference");

    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM installations WHERE id = ?1").bind(id).first<{ n: number }>()).toEqual({ n: 0 });
    expect((await restore(backup)).status).toBe(201);
  });

  it("a task or proposal named for another installation's run (the id its next task or proposal would take) is refused, and nothing is written", async () => {
    const victim = await newInstallation("restore-step-victim");
    const victimVersion = await publish(victim.apiKey, graph);
    expect((await api("/api/v1/triggers", { key: victim.apiKey, body: { event: "report.created", workflowVersionId: victimVersion.id, authorityMode: "shadow" } })).status).toBe(201);
    const report = await api("/api/v1/reports", { key: victim.apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    const victimRun = report.body.runs[0].runId as string;
    expect(victimRun).toMatch(/^run_/u);
    const { id, backup } = await exportedAndRemoved("restore-step-crafted");
    for (const [table, row] of [
      ["human_tasks", { id: `${victimRun}:review:main:1:task`, installation_id: id, task_type: "review", state: "open", origin: "workflow" }],
      ["action_proposals", { id: `${victimRun}:act:main:1:proposal`, installation_id: id, state: "pending" }],
    ] as const) {
      const crafted = structuredClone(backup);
      crafted.tables[table] = [...(crafted.tables[table] ?? []), row];
      const refused = await restore(await redigest(crafted));
      expect(refused.status, JSON.stringify(refused.body)).toBe(422);
      expect(refused.body.error.code).toBe("installation_import.foreign_reference");
      expect(refused.body.error.message).toContain(victimRun);
    }
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM installations WHERE id = ?1").bind(id).first<{ n: number }>()).toEqual({ n: 0 });
    expect((await restore(backup)).status).toBe(201);
  });

  it("a step, wait, decision or message of the backup named for another installation's run is refused, and nothing is written", async () => {
    const victim = await newInstallation("restore-steprow-victim");
    const victimVersion = await publish(victim.apiKey, graph);
    expect((await api("/api/v1/triggers", { key: victim.apiKey, body: { event: "report.created", workflowVersionId: victimVersion.id, authorityMode: "shadow" } })).status).toBe(201);
    const victimReport = await api("/api/v1/reports", { key: victim.apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
    const victimRun = victimReport.body.runs[0].runId as string;
    // The crafted file's own installation has a run, so the planted rows hang off a run of the backup.
    const own = await newInstallation("restore-steprow-crafted");
    const ownVersion = await publish(own.apiKey, graph);
    expect((await api("/api/v1/triggers", { key: own.apiKey, body: { event: "report.created", workflowVersionId: ownVersion.id, authorityMode: "shadow" } })).status).toBe(201);
    const ownReport = await api("/api/v1/reports", { key: own.apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
    const ownRun = ownReport.body.runs[0].runId as string;
    const backup = (await api("/api/v1/installation/export", { key: own.apiKey, method: "POST" })).body;
    expect(backup.tables.workflow_runs.map((row: any) => row.id)).toContain(ownRun);
    await env.DB.batch(installationDeleteStatements(env.DB, own.id));
    await env.AUDIT_ANCHORS.delete(`audit/${own.id}/head.json`);
    const step = `${victimRun}:review:main:1`;
    const at = new Date().toISOString();
    for (const [table, row] of [
      ["workflow_step_runs", { id: step, run_id: ownRun, node_id: "review", node_type: "human_task", branch_key: "", occurrence: 1, state: "succeeded", started_at: at, updated_at: at }],
      ["workflow_waits", { id: `${ownRun}:review:main:1:wait`, run_id: ownRun, step_run_id: step, wait_type: "human_task", event_type: "task.completed", state: "waiting", created_at: at }],
      ["workflow_waits", { id: `${step}:wait`, run_id: ownRun, step_run_id: `${ownRun}:review:main:1`, wait_type: "human_task", event_type: "task.completed", state: "waiting", created_at: at }],
      ["decisions", { id: "dec_planted", installation_id: own.id, step_run_id: step }],
      ["messages", { id: "msg_planted", installation_id: own.id, step_run_id: step }],
    ] as const) {
      const crafted = structuredClone(backup);
      crafted.tables[table] = [...(crafted.tables[table] ?? []), row];
      const refused = await restore(await redigest(crafted));
      expect(refused.status, `${table}: ${JSON.stringify(refused.body)}`).toBe(422);
      expect(refused.body.error.code).toBe("installation_import.foreign_reference");
      expect(refused.body.error.message).toContain(victimRun);
    }
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM installations WHERE id = ?1").bind(own.id).first<{ n: number }>()).toEqual({ n: 0 });
    expect((await restore(backup)).status).toBe(201);
  });

  it("a backup stripped of its audit trail is refused, not restored as verified", async () => {
    const { backup } = await exportedAndRemoved("restore-stripped");
    const stripped = structuredClone(backup);
    stripped.tables.audit_events = [];
    stripped.tables.audit_segments = [];
    stripped.tables.audit_checkpoints = [];
    stripped.objects = stripped.objects.filter((object: any) => object.bucket !== "AUDIT_ANCHORS");
    const refused = await restore(await redigest(stripped));
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body.error.code).toBe("installation_import.audit_missing");
    expect((await restore(backup)).status).toBe(201);
  });
});

describe("an export seals people's names and answers", () => {
  it("an admin key's export holds no console user's email, reviewer's name or task response in plain text; a restore opens them", async () => {
    const { id, apiKey } = await newInstallation("export-sealed");
    const email = `person-${crypto.randomUUID().slice(0, 8)}@example.org`;
    expect((await api("/api/v1/console-users", { key: apiKey, body: { email, name: "Priya Plaintext", role: "moderator" } })).status).toBe(201);
    const reviewerKey = (await api("/api/v1/api-keys", { key: apiKey, body: { name: "tool", scopes: ["review", "read"], reviewer: "Rita Recorded" } })).body.apiKey as string;
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "q", slaSeconds: 3600 } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: { type: "object" }, timeout_seconds: 3600 } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
    });
    await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {} } });
    let task: any;
    for (let i = 0; i < 200 && !task; i++) {
      task = (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items[0];
      if (!task) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewerKey, body: {} })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: reviewerKey, body: { response: { note: "answer-marker-7731" } } })).status).toBe(200);

    const exported = await api("/api/v1/installation/export", { key: apiKey, method: "POST" });
    expect(exported.status).toBe(200);
    const text = JSON.stringify(exported.body);
    for (const secret of [email, "Priya Plaintext", "Rita Recorded", "answer-marker-7731"]) expect(text).not.toContain(secret);

    await env.DB.batch(installationDeleteStatements(env.DB, id));
    await env.AUDIT_ANCHORS.delete(`audit/${id}/head.json`);
    expect((await restore(exported.body)).status).toBe(201);
    expect((await api("/api/v1/console-users", { key: apiKey })).body.items.map((u: any) => u.email)).toContain(email);
    expect((await api(`/api/v1/tasks/${task.id}`, { key: apiKey })).body.response).toEqual({ note: "answer-marker-7731" });
  });
});
