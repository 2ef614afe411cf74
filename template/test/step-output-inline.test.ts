// A step's output kept in its own step row (migration 0070): a finished step writes no
// workflow_step_outputs row, and everything that reads outputs — the run detail and content, the
// run's archive object, a backup, erasure — answers the same for it as for a step of the earlier
// form (an outputs row), which still reads, archives, exports and erases.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sealPersonalData } from "../src/cases/reports/report-crypto";
import type { Row } from "../src/installations/backup";
import { openBackupColumns } from "../src/installations/backup-seal";
import { eraseSealedOutputsStatements, outputRowsSql, STEP_OUTPUT_COLUMN_NAMES, sealedOutputsOfUnsafe, stepOutputSql } from "../src/workflows";
import { STEP_ROW_COLUMN_NAMES } from "../src/lib/step-row-columns";
import { buildRunArchive, runArchiveKey, sweepRunArchive } from "../src/workflows/run-archive";
import { api, asOldFormOutputs, edge, newInstallation, publish, setSealedOutput, STEP_OUTPUT, until, waitForRun } from "./helpers";

const SECRET = "words the content-reading node saw";

/** An installation whose reports start a run that ends at once (hot window 0: an ended run archives on the next sweep). */
async function setup(label: string) {
  const inst = await newInstallation(`step-output-${label}`);
  expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
  const version = await publish(inst.apiKey, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "check", kind: "condition", config: { cases: [{ port: "yes", when: "true" }], case_ports: ["yes"], default_port: "no" } },
      { id: "done", kind: "end", config: { terminal_code: "done" } },
      { id: "other", kind: "end", config: { terminal_code: "other" } },
    ],
    edges: [edge("start", "success", "check"), edge("check", "yes", "done"), edge("check", "no", "other")],
  });
  expect((await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
  return inst;
}

/** A report whose run ended, with a sealed part on its start step's output (as a content-reading node leaves it). */
async function endedRun(inst: { id: string; apiKey: string }, post: string) {
  const created = await api("/api/v1/reports", { key: inst.apiKey, body: { subject: { kind: "content", id: post }, category: "scams_and_fraud" } });
  expect(created.status).toBe(201);
  const reportId = created.body.id as string;
  const runId = await until(async () => (await env.DB.prepare("SELECT id FROM workflow_runs WHERE report_id = ?1").bind(reportId).first<{ id: string }>())?.id, "the trigger's run");
  expect((await waitForRun(inst.apiKey, runId)).state).toBe("succeeded");
  const stepId = `${runId}:start:main:1`;
  const { sealed } = await sealPersonalData(env, inst.id, `step_output:${stepId}`, { text: SECRET });
  await setSealedOutput(stepId, sealed);
  return { reportId, runId, stepId, sealed };
}

const count = async (sql: string, ...binds: unknown[]) =>
  (await env.DB.prepare(sql)
    .bind(...binds)
    .first<{ n: number }>())!.n;
const outputRowsOf = (runId: string) => count("SELECT COUNT(*) AS n FROM workflow_step_outputs WHERE step_run_id IN (SELECT id FROM workflow_step_runs WHERE run_id = ?1)", runId);
const inlineOutputsOf = (runId: string) => count("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ?1 AND output_json IS NOT NULL", runId);

/** A backup's step rows and outputs of one run, with the sealed backup columns opened. */
async function exportedSteps(inst: { id: string; apiKey: string }, runId: string) {
  const exported = await api("/api/v1/installation/export", { key: inst.apiKey, method: "POST" });
  expect(exported.status).toBe(200);
  const tables = exported.body.tables as Record<string, Row[]>;
  await openBackupColumns(env, inst.id, tables);
  const steps = tables.workflow_step_runs!.filter((row) => row.run_id === runId);
  const ids = new Set(steps.map((row) => row.id));
  const outputs = tables.workflow_step_outputs!.filter((row) => ids.has(row.step_run_id ?? null)).sort((a, b) => String(a.step_run_id).localeCompare(String(b.step_run_id)));
  return { steps, outputs, count: exported.body.manifest.counts.workflow_step_outputs as number };
}

describe("a step's output in its own step row", () => {
  it("a finished step writes no workflow_step_outputs row, and its output reads back as the earlier form's: run detail, archive object, backup", async () => {
    const inst = await setup("forms");
    const { runId, stepId } = await endedRun(inst, "post-forms");
    const steps = await count("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ?1", runId);
    expect(steps).toBe(3);
    expect(await outputRowsOf(runId)).toBe(0);
    expect(await inlineOutputsOf(runId)).toBe(steps);

    const detail = (await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body;
    expect(detail.steps.map((s: { nodeId: string; output: { port?: string } }) => [s.nodeId, s.output.port])).toEqual([
      ["start", "success"],
      ["check", "yes"],
      ["done", "terminal"],
    ]);
    const content = (await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey })).body;
    expect(content.items).toEqual([expect.objectContaining({ nodeId: "start", output: { text: SECRET } })]);
    const archive = await buildRunArchive(env.DB, inst.id, runId);
    // The object carries outputs as outputs rows and step rows without the output's columns.
    expect(archive.body.tables.workflow_step_outputs).toHaveLength(steps);
    expect(archive.body.tables.workflow_step_outputs.find((row) => row.step_run_id === stepId)).toMatchObject({ data_classification_json: '["content"]' });
    for (const row of archive.body.tables.workflow_step_runs) expect(Object.keys(row)).not.toContain("output_json");
    const backup = await exportedSteps(inst, runId);
    expect(backup.outputs).toHaveLength(steps);
    for (const row of backup.steps) expect(Object.keys(row)).not.toContain("output_json");

    // The same run with its outputs in the earlier form (as a release before migration 0070 wrote them).
    expect(await asOldFormOutputs(runId)).toBe(steps);
    expect(await outputRowsOf(runId)).toBe(steps);
    expect(await inlineOutputsOf(runId)).toBe(0);
    expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(detail);
    expect((await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey })).body).toEqual(content);
    // Byte for byte the same object, whichever form D1 held.
    expect((await buildRunArchive(env.DB, inst.id, runId)).text).toBe(archive.text);
    const oldBackup = await exportedSteps(inst, runId);
    expect(oldBackup.steps).toEqual(backup.steps);
    expect(oldBackup.outputs).toEqual(backup.outputs);
    expect(oldBackup.count).toBe(backup.count);
  });

  it("erasure drops the sealed part in either form; both forms archive and read back from the archive as they read hot", async () => {
    const inst = await setup("erase");
    const inline = await endedRun(inst, "post-inline");
    const old = await endedRun(inst, "post-old");
    await asOldFormOutputs(old.runId);
    expect(await outputRowsOf(inline.runId)).toBe(0);
    expect(await outputRowsOf(old.runId)).toBe(3);

    const found = await sealedOutputsOfUnsafe(env.DB, inst.id, { reportIds: [inline.reportId, old.reportId], appealIds: [] });
    expect(found.stepRunIds.sort()).toEqual([inline.stepId, old.stepId].sort());
    await env.DB.batch(eraseSealedOutputsStatements(env.DB, inst.id, found.stepRunIds));
    // Nothing of the sealed part stays in either form; the open view stays.
    expect(await env.DB.prepare("SELECT output_sealed AS sealed, output_json IS NOT NULL AS kept FROM workflow_step_runs WHERE id = ?1").bind(inline.stepId).first()).toEqual({ sealed: null, kept: 1 });
    expect(await env.DB.prepare("SELECT sealed_json AS sealed, inline_json IS NOT NULL AS kept FROM workflow_step_outputs WHERE step_run_id = ?1").bind(old.stepId).first()).toEqual({ sealed: null, kept: 1 });
    for (const { stepId } of [inline, old]) {
      expect(await env.DB.prepare(`SELECT ${STEP_OUTPUT.sealed} AS sealed FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.id = ?1`).bind(stepId).first()).toEqual({ sealed: null });
    }
    expect((await sealedOutputsOfUnsafe(env.DB, inst.id, { reportIds: [inline.reportId, old.reportId], appealIds: [] })).stepRunIds).toEqual([]);

    const hot: Record<string, unknown> = {};
    for (const { runId } of [inline, old]) {
      const content = (await api(`/api/v1/runs/${runId}/content`, { key: inst.apiKey })).body;
      expect(JSON.stringify(content)).not.toContain(SECRET);
      expect(content.items).toEqual([]);
      hot[runId] = (await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body;
    }
    // The erased output archives as the earlier form's would: classified content, no sealed part.
    const inlineArchive = (await buildRunArchive(env.DB, inst.id, inline.runId)).body.tables.workflow_step_outputs;
    const oldArchive = (await buildRunArchive(env.DB, inst.id, old.runId)).body.tables.workflow_step_outputs;
    const strip = (rows: Array<Record<string, unknown>>, runId: string) => rows.map(({ created_at: _at, digest: _digest, ...row }) => ({ ...row, step_run_id: String(row.step_run_id).replace(runId, "run") }));
    expect(strip(inlineArchive, inline.runId)).toEqual(strip(oldArchive, old.runId));
    expect(inlineArchive.find((row) => row.step_run_id === inline.stepId)).toMatchObject({ sealed_json: null, data_classification_json: '["content"]' });

    expect(await sweepRunArchive(env, new Date(Date.now() + 2_000), { installationId: inst.id })).toMatchObject({ archived: 2, failed: 0 });
    for (const { runId } of [inline, old]) {
      expect(await count("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ?1", runId)).toBe(0);
      expect(await outputRowsOf(runId)).toBe(0);
      const object = JSON.parse(await (await env.WORKFLOW_ARTIFACTS.get(runArchiveKey(inst.id, runId)))!.text());
      expect(object.tables.workflow_step_outputs).toHaveLength(3);
      expect((await api(`/api/v1/runs/${runId}`, { key: inst.apiKey })).body).toEqual(hot[runId]);
    }
  });

  it("reading a step's output in either form seeks: the step by its run or id, the outputs row by its key", async () => {
    const OUTPUT = stepOutputSql();
    const planOf = async (sql: string, binds: unknown[]) =>
      (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .bind(...binds)
          .all<{ detail: string }>()
      ).results.map((row) => row.detail);
    const scans = (plan: string[]) => plan.filter((d) => /^SCAN (s|o|workflow_step_runs|workflow_step_outputs)\b/u.test(d));
    // A run's steps with their outputs (the run detail, the group read), its archive's outputs rows, and one step by id.
    for (const [sql, binds] of [
      [`SELECT s.id, ${OUTPUT.json} AS json, ${OUTPUT.sealed} AS sealed FROM workflow_step_runs s ${OUTPUT.join} WHERE s.run_id = ?1 ORDER BY s.started_at, s.rowid`, ["run"]],
      [outputRowsSql("s.run_id = ?1"), ["run"]],
      [`SELECT COUNT(*) AS n FROM workflow_step_runs s ${OUTPUT.join} WHERE s.run_id = ?1 AND ${OUTPUT.sealed} IS NOT NULL`, ["run"]],
      [`SELECT ${OUTPUT.json} AS json FROM workflow_step_runs s ${OUTPUT.join} WHERE s.id = ?1`, ["step"]],
    ] as Array<[string, unknown[]]>) {
      const plan = await planOf(sql, binds);
      expect(scans(plan), plan.join("\n")).toEqual([]);
      expect(
        plan.some((d) => /^SEARCH o USING INDEX sqlite_autoindex_workflow_step_outputs_1 \(step_run_id=\?\)/u.test(d)),
        plan.join("\n"),
      ).toBe(true);
    }
  });

  it("the step row's columns that leave D1 and the output's columns are every column of workflow_step_runs, each once", async () => {
    const { results } = await env.DB.prepare("SELECT name FROM pragma_table_info('workflow_step_runs') ORDER BY cid").all<{ name: string }>();
    // A column a later migration adds must be named in one of the two lists, or archives and backups would leave it out.
    expect([...STEP_ROW_COLUMN_NAMES, ...STEP_OUTPUT_COLUMN_NAMES].sort()).toEqual(results.map((row) => row.name).sort());
  });
});
