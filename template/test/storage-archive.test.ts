// Storage in tiers: ended runs past their installation's hot window move their steps, outputs,
// waits, events and repairs into one R2 object (src/workflows/run-archive.ts), and every read path
// answers for them as it did while they were hot.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sealPersonalData } from "../src/cases/reports/report-crypto";
import { backupDigest, installationDeleteStatements, settleRunsArchivedMeanwhile } from "../src/installations/backup";
import { SWEEPS } from "../src/schedule";
import { eraseArchivedSealedOutputsStatement } from "../src/workflows";
import { ARCHIVED_RUNS_SQL } from "../src/workflows/storage";
import { commitRunArchive, queueRunArchive, runArchiveKey, sweepRunArchive, writeRunArchive } from "../src/workflows/run-archive";
import { RUN_BY_INSTANCE_SQL } from "../src/workflows/runs-queries";
import { outputRowsSql, stepRowColumns } from "../src/workflows/step-output";
import { ADMIN_TOKEN, api, edge, newInstallation, publish, setSealedOutput, startRun, until, waitForRun, waitForWait } from "./helpers";

const waitGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "await", kind: "wait_for_event", config: { event_type: "moderator.decision", timeout_seconds: 3600 } },
    { id: "verdict", kind: "condition", inputMapping: { verdict: "steps.await.event.payload.verdict" }, config: { cases: [{ port: "remove", when: "node_input.verdict == 'remove'" }], case_ports: ["remove"], default_port: "keep" } },
    { id: "removed", kind: "end", config: { terminal_code: "removed" } },
    { id: "kept", kind: "end", config: { terminal_code: "kept" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "await"), edge("await", "received", "verdict"), edge("await", "timeout", "expired"), edge("verdict", "remove", "removed"), edge("verdict", "keep", "kept")],
};

/** A sweep's clock a little ahead, so runs that just ended are past a 0-day window. */
const soon = () => new Date(Date.now() + 2_000);

async function installation(hotDays: number | null) {
  const inst = await newInstallation("storage");
  if (hotDays !== null) expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays } })).status).toBe(200);
  const version = await publish(inst.apiKey, waitGraph);
  return { ...inst, versionId: version.id };
}

/**
 * An ended run with everything an archive holds: steps, an event, a satisfied wait, a sealed
 * output (as a content-reading node leaves it) and a repair record.
 */
async function endedRun(inst: { id: string; apiKey: string; versionId: string }) {
  const run = await startRun(inst.apiKey, inst.versionId);
  await waitForWait(inst.apiKey, run.id);
  expect((await api(`/api/v1/runs/${run.id}/events`, { key: inst.apiKey, body: { type: "moderator.decision", payload: { verdict: "remove" } } })).status).toBe(202);
  const done = await waitForRun(inst.apiKey, run.id);
  expect(done.state).toBe("succeeded");
  const stepId = done.steps.find((s: { nodeId: string }) => s.nodeId === "verdict").id as string;
  const { sealed } = await sealPersonalData(env, inst.id, `step_output:${stepId}`, { text: "content the node read" });
  await setSealedOutput(stepId, sealed);
  await env.DB.prepare(
    `INSERT INTO workflow_run_repairs (id, installation_id, run_id, seq, action, node_id, branch_key, port, from_version_id, to_version_id, previous_state, previous_error_code, instance_id, reason, actor_json, operation_id, created_at)
     VALUES (?1, ?2, ?3, 1, 'retry', 'verdict', '', NULL, ?4, ?4, 'repair_required', 'node.failed', ?3, 'a retry before it succeeded', '{"type":"api_key","id":"key_x"}', NULL, ?5)`,
  )
    .bind(`rep_${crypto.randomUUID()}`, inst.id, run.id, inst.versionId, new Date().toISOString())
    .run();
  return run.id;
}

async function hotRows(runId: string) {
  const n = async (sql: string) => (await env.DB.prepare(sql).bind(runId).first<{ n: number }>())!.n;
  return {
    steps: await n("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ?1"),
    outputs: await n(`SELECT COUNT(*) AS n FROM (${outputRowsSql("s.run_id = ?1")})`),
    waits: await n("SELECT COUNT(*) AS n FROM workflow_waits WHERE run_id = ?1"),
    events: await n("SELECT COUNT(*) AS n FROM workflow_events WHERE run_id = ?1"),
    repairs: await n("SELECT COUNT(*) AS n FROM workflow_run_repairs WHERE run_id = ?1"),
  };
}

const runRow = (runId: string) =>
  env.DB.prepare("SELECT archived_at AS archivedAt, archive_digest AS digest, archive_bytes AS bytes FROM workflow_runs WHERE id = ?1").bind(runId).first<{ archivedAt: string | null; digest: string | null; bytes: number | null }>();

describe("the archive tier", () => {
  it("an archived run reads exactly as its hot form: detail, content (audited), and the storage figures move", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    const hot = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    const hotContent = await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey });
    expect(hot.body.waits).toHaveLength(1);
    expect(hot.body.repairs).toHaveLength(1);
    expect(hotContent.body.items).toEqual([expect.objectContaining({ nodeId: "verdict", output: { text: "content the node read" } })]);
    const before = (await api("/api/v1/storage", { key: inst.apiKey })).body;
    expect(before).toMatchObject({ hotDays: 0, archivedRuns: 0, archiveBytes: 0 });
    expect(before.daysUntilFull).toBeGreaterThan(0);
    expect(before.oldestHotRecordAt).not.toBeNull();
    expect(before.d1.tables.find((t: { name: string }) => t.name === "workflow_step_runs").rows).toBe(hot.body.steps.length);

    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    expect(await hotRows(runId)).toEqual({ steps: 0, outputs: 0, waits: 0, events: 0, repairs: 0 });
    const row = (await runRow(runId))!;
    expect(row.archivedAt).not.toBeNull();
    const object = await env.WORKFLOW_ARTIFACTS.get(runArchiveKey(inst.id, runId));
    const stored = JSON.parse(await object!.text());
    expect(stored).toMatchObject({ format: "safest-tools.run-archive", schemaVersion: 1, installationId: inst.id, runId });
    // The run row keeps the first 128 bits of the object's digest.
    expect(stored.digest).toMatch(/^sha256:[0-9a-f]{64}$/u);
    expect(row.digest).toBe(stored.digest.slice(7, 39));
    // Sealed parts stay sealed exactly as stored.
    expect(JSON.stringify(stored)).not.toContain("content the node read");
    expect(stored.tables.workflow_events).toHaveLength(1);

    const archived = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    expect(archived.status).toBe(200);
    expect(archived.body).toEqual(hot.body);
    const archivedContent = await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey });
    expect(archivedContent.status).toBe(200);
    expect(archivedContent.body).toEqual(hotContent.body);
    const viewed = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'workflow.run_content_viewed' AND target_id = ?2").bind(inst.id, runId).first<{ n: number }>();
    expect(viewed!.n).toBe(2);

    const after = (await api("/api/v1/storage", { key: inst.apiKey })).body;
    expect(after.archivedRuns).toBe(1);
    expect(after.archiveBytes).toBe(row.bytes);
    expect(after.archiveBytes).toBeGreaterThan(0);
    expect(after.d1.tables.find((t: { name: string }) => t.name === "workflow_step_runs").rows).toBe(0);
    expect(after.d1.bytesEstimate).toBeLessThan(before.d1.bytesEstimate);
    expect(typeof after.d1.estimateMethod).toBe("string");
    // Fewer bytes per run: the same growth fills D1 later. No hot run left.
    expect(after.daysUntilFull).toBeGreaterThan(before.daysUntilFull);
    expect(after.oldestHotRecordAt).toBeNull();
    // The run row stays (lists read it); a second sweep finds nothing more to do.
    expect((await api(`/api/v1/runs?limit=5`, { key: inst.apiKey })).body.items.map((r: { id: string }) => r.id)).toContain(runId);
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 0, failed: 0 });
  });

  it("an export that read a run's rows just before the run was archived carries it as archived: its row's mark, D1's rows now", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    const all = async (sql: string) => (await env.DB.prepare(sql).bind(runId).all<Record<string, string | number | null>>()).results;
    // What the export read first, while the run was hot.
    const tables: Record<string, Array<Record<string, string | number | null>>> = {
      workflow_runs: await all("SELECT * FROM workflow_runs WHERE id = ?1"),
      workflow_step_runs: await all(`SELECT ${stepRowColumns()} FROM workflow_step_runs WHERE run_id = ?1`),
      workflow_step_outputs: await all(outputRowsSql("s.run_id = ?1")),
      workflow_waits: await all("SELECT * FROM workflow_waits WHERE run_id = ?1"),
      workflow_events: await all("SELECT * FROM workflow_events WHERE run_id = ?1"),
      workflow_run_repairs: await all("SELECT * FROM workflow_run_repairs WHERE run_id = ?1"),
    };
    expect(tables.workflow_step_outputs!.length).toBeGreaterThan(0);
    // The archive moves the run before the export read the rest.
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect(await settleRunsArchivedMeanwhile(env.DB, inst.id, tables)).toBe(1);
    const row = (await runRow(runId))!;
    expect(tables.workflow_runs![0]).toMatchObject({ archived_at: row.archivedAt, archive_digest: row.digest, archive_bytes: row.bytes });
    expect(tables.workflow_step_outputs).toEqual([]);
    expect(tables.workflow_events).toEqual([]);
    expect(tables.workflow_waits).toEqual([]);
    expect(tables.workflow_step_runs).toEqual(await all(`SELECT ${stepRowColumns()} FROM workflow_step_runs WHERE run_id = ?1`));
    // Nothing archived meanwhile: nothing changes.
    expect(await settleRunsArchivedMeanwhile(env.DB, inst.id, tables)).toBe(0);
  });

  it("on the schedule, runs go through the RUN_OPERATIONS queue: handed over once, archived by its consumer", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    const hot = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    expect(await queueRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ queued: 1 });
    // Handed over: not handed again while the consumer has it.
    expect(await queueRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ queued: 0 });
    await until(async () => (await runRow(runId))?.archivedAt, "the consumer archived the run");
    expect(await hotRows(runId)).toEqual({ steps: 0, outputs: 0, waits: 0, events: 0, repairs: 0 });
    expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(hot.body);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM run_archive_queue WHERE run_id = ?1").bind(runId).first<{ n: number }>())!.n).toBe(0);
  });

  it("is idempotent when killed between the object and the D1 batch: same object, rows gone once, detail unchanged", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    const hot = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    const rowsBefore = await hotRows(runId);

    // The pass that dies after its object: the object is there, every row still in D1.
    const first = await writeRunArchive(env, inst.id, runId);
    const firstBytes = await (await env.WORKFLOW_ARTIFACTS.get(first.key))!.text();
    expect(await hotRows(runId)).toEqual(rowsBefore);
    expect((await runRow(runId))!.archivedAt).toBeNull();
    expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(hot.body);

    // Even an object cut short under the right metadata (a write that died midway) is written again, never trusted.
    await env.WORKFLOW_ARTIFACTS.put(first.key, firstBytes.slice(0, 100), { customMetadata: { digest: first.digest, schemaVersion: "1" } });
    // The next pass finishes it, with the very same object.
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    expect(await (await env.WORKFLOW_ARTIFACTS.get(first.key))!.text()).toBe(firstBytes);
    // The row keeps the first 128 bits of the object's digest.
    expect(first.digest).toMatch(/^sha256:[0-9a-f]{64}$/u);
    expect((await runRow(runId))!.digest).toBe(first.digest.slice(7, 39));
    expect(await hotRows(runId)).toEqual({ steps: 0, outputs: 0, waits: 0, events: 0, repairs: 0 });
    // A late commit of the first pass deletes nothing more and marks nothing twice.
    expect(await commitRunArchive(env, inst.id, runId, first)).toBe(false);
    expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(hot.body);
    // A row archived by an earlier release keeps the whole digest: it reads the same.
    const setDigest = (digest: string) => env.DB.prepare("UPDATE workflow_runs SET archive_digest = ?2 WHERE id = ?1").bind(runId, digest).run();
    await setDigest(first.digest);
    expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(hot.body);
    // A row whose 128 bits name another object refuses this one.
    await setDigest(`${first.digest.slice(7, 38)}${first.digest[38] === "0" ? "1" : "0"}`);
    const refused = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    expect(refused.status).toBe(500);
    expect(refused.body.error.code).toBe("run_archive.corrupt");
    await setDigest(first.digest.slice(7, 39));
  });

  it("leaves runs inside the window and runs still live in D1", async () => {
    const windowed = await installation(null); // the default window, 7 days
    expect((await api("/api/v1/storage/settings", { key: windowed.apiKey })).body).toMatchObject({ hotDays: 7, isDefault: true });
    expect((await api("/api/v1/storage", { key: windowed.apiKey })).body).toMatchObject({ hotDays: 7, runHistoryMinutes: 60, deliveryPayloadMinutes: 60 });
    const young = await endedRun(windowed);
    expect(await sweepRunArchive(env, soon(), { installationId: windowed.id })).toMatchObject({ archived: 0 });
    expect((await runRow(young))!.archivedAt).toBeNull();
    // Within the hour after it ended, its step history stays in D1.
    expect(await sweepRunArchive(env, new Date(Date.now() + 50 * 60_000), { installationId: windowed.id })).toMatchObject({ archived: 0 });
    expect((await runRow(young))!.archivedAt).toBeNull();
    // An hour on, the history moves to R2 (the run row stays in D1 with its case for the 7 days).
    expect(await sweepRunArchive(env, new Date(Date.now() + 61 * 60_000), { installationId: windowed.id })).toMatchObject({ archived: 1 });
    expect((await runRow(young))!.archivedAt).not.toBeNull();
    // A failed run keeps its history for the whole window: a repair needs it in D1.
    const failed = await endedRun(windowed);
    await env.DB.prepare("UPDATE workflow_runs SET state = 'failed' WHERE id = ?1").bind(failed).run();
    expect(await sweepRunArchive(env, new Date(Date.now() + 2 * 86_400_000), { installationId: windowed.id })).toMatchObject({ archived: 0 });
    expect((await runRow(failed))!.archivedAt).toBeNull();
    expect(await sweepRunArchive(env, new Date(Date.now() + 8 * 86_400_000), { installationId: windowed.id })).toMatchObject({ archived: 1 });

    const zero = await installation(0);
    const live = await startRun(zero.apiKey, zero.versionId);
    await waitForWait(zero.apiKey, live.id);
    expect(await sweepRunArchive(env, soon(), { installationId: zero.id })).toMatchObject({ archived: 0 });
    expect((await runRow(live.id))!.archivedAt).toBeNull();
    expect((await hotRows(live.id)).waits).toBe(1);
    await api(`/api/v1/runs/${live.id}/terminate`, { method: "POST", key: zero.apiKey });
    await waitForRun(zero.apiKey, live.id, ["terminated"]);
  });

  it("a run's instance is found by two index lookups: repaired runs' instances in the partial unique index, every other run by its id", async () => {
    const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN ${RUN_BY_INSTANCE_SQL}`).bind("run_plan").all<{ detail: string }>();
    const details = plan.results.map((row) => row.detail).join(" | ");
    expect(details).toMatch(/USING INDEX workflow_runs_instance \(instance_id=\?\)/u);
    expect(details).toMatch(/USING INDEX sqlite_autoindex_workflow_runs_1 \(id=\?\)/u);
    expect(details).not.toMatch(/SCAN workflow_runs/u);
  });

  it("GET /storage counts archived runs by a range of the installation's run index (no index of its own; never a scan of the table)", async () => {
    const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN ${ARCHIVED_RUNS_SQL}`).bind("inst_plan").all<{ detail: string }>();
    const details = plan.results.map((row) => row.detail);
    expect(
      details.some((d) => /USING (COVERING )?INDEX workflow_runs_(installation|repairable) \(installation_id=\?/u.test(d)),
      details.join(" | "),
    ).toBe(true);
    expect(
      details.some((d) => /^SCAN workflow_runs\b(?! USING)/u.test(d)),
      details.join(" | "),
    ).toBe(false);
    expect(await env.DB.prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND name = 'workflow_runs_archived'").first()).toBeNull();
  });

  it("another installation's archived run is a 404, its figures its own", async () => {
    const owner = await installation(0);
    const runId = await endedRun(owner);
    expect(await sweepRunArchive(env, soon(), { installationId: owner.id })).toMatchObject({ archived: 1 });
    const other = await newInstallation("storage-other");
    const detail = await api(`/api/v1/runs/${runId}`, { key: other.apiKey });
    expect(detail.status).toBe(404);
    expect(detail.body.error.code).toBe("run.not_found");
    expect((await api(`/api/v1/runs/${runId}/content`, { key: other.apiKey })).status).toBe(404);
    expect((await api("/api/v1/storage", { key: other.apiKey })).body).toMatchObject({ archivedRuns: 0, archiveBytes: 0, oldestHotRecordAt: null, daysUntilFull: null });
  });

  it("an archived failed run is not repaired (run.archived)", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1 });
    await env.DB.prepare("UPDATE workflow_runs SET state = 'failed' WHERE id = ?1").bind(runId).run();
    const repaired = await api(`/api/v1/runs/${runId}/repair`, { key: inst.apiKey, body: { action: "retry", reason: "try again" } });
    expect(repaired.status).toBe(409);
    expect(repaired.body.error.code).toBe("run.archived");
  });
});

describe("a report's lifecycle", () => {
  it("a run whose task (of the form before migration 0068) was answered is archived; the task's step row stays for its foreign key, slimmed, the task still reads", async () => {
    const inst = await installation(0);
    const queue = await api("/api/v1/queues", { key: inst.apiKey, body: { name: "archive-q", slaSeconds: 3600 } });
    expect(queue.status).toBe(201);
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: queue.body.id, response_schema: { type: "object" }, timeout_seconds: 3600 } },
        { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
        { id: "expired", kind: "end", config: { terminal_code: "expired" } },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
    };
    const version = await publish(inst.apiKey, graph);
    const run = await startRun(inst.apiKey, version.id);
    await waitForWait(inst.apiKey, run.id);
    const written = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(run.id).first<{ id: string }>())!;
    // A task of the earlier form, as the release before wrote it: its step stored (one written now
    // names its step by its id and leaves no anchor: test/task-step.test.ts).
    const task = { id: written.id, stepRunId: written.id.slice(0, -":task".length) };
    expect((await env.DB.prepare("UPDATE human_tasks SET step_run_id = ?2 WHERE id = ?1").bind(task.id, task.stepRunId).run()).meta.changes).toBe(1);
    // Still waiting for its person: live, not archived.
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 0 });
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: inst.apiKey, body: { reviewer: "mod-ana" } })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: inst.apiKey, body: { reviewer: "mod-ana", response: { verdict: "keep" } } })).status).toBe(200);
    expect((await waitForRun(inst.apiKey, run.id)).state).toBe("succeeded");
    const hot = await api(`/api/v1/runs/${run.id}`, { key: inst.apiKey });
    const hotTask = await api(`/api/v1/tasks/${task.id}`, { key: inst.apiKey });

    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    const left = await env.DB.prepare("SELECT id, node_id AS nodeId, state, output_digest AS digest, started_at AS startedAt, finished_at AS finishedAt FROM workflow_step_runs WHERE run_id = ?1").bind(run.id).all<{ id: string }>();
    // The one row left anchors the task's foreign key: it names the step, and what it recorded is the archive's.
    expect(left.results).toEqual([{ id: task.stepRunId, nodeId: "review", state: "succeeded", digest: null, startedAt: null, finishedAt: null }]);
    expect(await hotRows(run.id)).toMatchObject({ outputs: 0, waits: 0, events: 0 });
    // Read from the archive, the step keeps its digest and times.
    expect((await api(`/api/v1/runs/${run.id}`, { key: inst.apiKey })).body).toEqual(hot.body);
    expect(hot.body.steps.find((step: { nodeId: string }) => step.nodeId === "review")).toMatchObject({ outputDigest: expect.stringMatching(/^sha256:/u), startedAt: expect.any(String), finishedAt: expect.any(String) });
    expect((await api(`/api/v1/tasks/${task.id}`, { key: inst.apiKey })).body).toEqual(hotTask.body);
  });
});

describe("archived runs elsewhere", () => {
  it("travel in a backup: the export carries the archive object, the restore serves the run as before", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1 });
    const archived = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    const key = runArchiveKey(inst.id, runId);
    const exported = await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" });
    expect(exported.status, JSON.stringify(exported.body)).toBe(200);
    expect(exported.body.objects).toContainEqual(expect.objectContaining({ bucket: "WORKFLOW_ARTIFACTS", key }));
    expect(exported.body.tables.storage_settings).toHaveLength(1);

    await env.DB.batch(installationDeleteStatements(env.DB, inst.id));
    await env.AUDIT_ANCHORS.delete(`audit/${inst.id}/head.json`);
    await env.WORKFLOW_ARTIFACTS.delete(key);
    // A file whose archive object was edited (its manifest digest recomputed, as anyone can), or
    // that lost it, is refused before anything is written.
    const forged = structuredClone(exported.body);
    const object = forged.objects.find((o: { key: string }) => o.key === key);
    const text = new TextDecoder().decode(Uint8Array.from(atob(object.base64), (c) => c.charCodeAt(0)));
    object.base64 = btoa(String.fromCharCode(...new TextEncoder().encode(text.replace('"schemaVersion":1', '"schemaVersion":2'))));
    forged.manifest.digest = await backupDigest(forged.tables, forged.objects);
    const refused = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: forged });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("installation_import.object_invalid");
    const lost = structuredClone(exported.body);
    lost.objects = lost.objects.filter((o: { key: string }) => o.key !== key);
    lost.manifest.digest = await backupDigest(lost.tables, lost.objects);
    expect((await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: lost })).body.error.code).toBe("installation_import.object_invalid");
    expect(await env.DB.prepare("SELECT 1 FROM installations WHERE id = ?1").bind(inst.id).first()).toBeNull();

    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: exported.body });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(archived.body);
    expect((await api("/api/v1/storage", { key: inst.apiKey })).body).toMatchObject({ hotDays: 0, archivedRuns: 1 });
  });

  it("erasing a run's sealed outputs after it was archived stops serving the archived copies", async () => {
    const inst = await installation(0);
    const runId = await endedRun(inst);
    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1 });
    expect((await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey })).body.items).toHaveLength(1);
    await eraseArchivedSealedOutputsStatement(env.DB, inst.id, [runId], new Date().toISOString()).run();
    expect((await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey })).body.items).toEqual([]);
    const detail = await api(`/api/v1/runs/${runId}`, { key: inst.apiKey });
    expect(detail.body.steps.every((s: { sealed: boolean }) => !s.sealed)).toBe(true);
  });
});

describe("storage settings", () => {
  it("validates hotDays and is on the schedule", async () => {
    const { apiKey } = await newInstallation("storage-settings");
    for (const hotDays of [-1, 3651]) {
      const bad = await api("/api/v1/storage/settings", { method: "PUT", key: apiKey, body: { hotDays } });
      expect(bad.status).toBe(422);
      expect(bad.body.error.code).toBe("storage.hot_days_invalid");
    }
    for (const hotDays of ["7", 1.5, null]) {
      const bad = await api("/api/v1/storage/settings", { method: "PUT", key: apiKey, body: { hotDays } });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe("request.invalid");
    }
    const ok = await api("/api/v1/storage/settings", { method: "PUT", key: apiKey, body: { hotDays: 30 } });
    expect(ok.body).toMatchObject({ hotDays: 30, isDefault: false });
    expect((await api("/api/v1/storage", { key: apiKey })).body.hotDays).toBe(30);
    expect(SWEEPS.map((s) => s.name)).toContain("workflows.archive_runs");
  });
});
