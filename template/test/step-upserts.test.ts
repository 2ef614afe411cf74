// Several step rows of one batch written by ONE statement (combineStepUpserts): it leaves exactly
// the rows the separate stepUpsert statements leave — every column, with its SQL type, in the
// same order — for new rows of each state and for rows written over existing ones, and a guard on
// the first still fails the whole batch or lets all of it through.
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { sealPersonalData } from "../src/cases/reports/report-crypto";
import type { AuthorizedRun } from "../src/workflows/runtime-authorize";
import { groupBatch, type NodeRecord } from "../src/workflows/runtime-group-records";
import { outputRecord, runtimeAudit, stepEventDetails, stepUpsert, type StepOutputRecord, type StepUpsertInput } from "../src/workflows/runtime-records";
import { combineStepUpserts } from "../src/workflows/step-upserts";
import type { WorkflowNodeV1 } from "../src/workflows/types";
import { newInstallation, publish, startRun, waitForRun, startEndGraph } from "./helpers";

let inst: { id: string; apiKey: string };
let versionId: string;

beforeAll(async () => {
  inst = await newInstallation("step-upserts");
  const version = await publish(inst.apiKey, startEndGraph);
  versionId = version.id;
});

/** A run that ended (its own steps are start and done; the tests write steps of other nodes on it). */
async function endedRun(): Promise<AuthorizedRun> {
  const started = await startRun(inst.apiKey, versionId);
  expect((await waitForRun(inst.apiKey, started.id)).state).toBe("succeeded");
  // stepUpsert reads the run's id only; the rest is what an authorized run carries.
  return { id: started.id, installationId: inst.id, workflowVersionId: versionId, authorityMode: "autonomous", state: "succeeded", inputJson: "{}", reportId: null, appealId: null, backtestId: null } as AuthorizedRun;
}

const node = (id: string, kind: WorkflowNodeV1["kind"] = "condition"): WorkflowNodeV1 => ({ id, kind, config: {} }) as WorkflowNodeV1;
const T1 = "2026-01-01T00:00:01.000Z";
const T2 = "2026-01-01T00:00:02.000Z";

/** A step's input as the runtime builds it: its id from run, node and branch; its output as outputRecord stores it. */
function step(
  run: AuthorizedRun,
  nodeId: string,
  state: StepUpsertInput["state"],
  at: string,
  extra: { output?: StepOutputRecord; errorCode?: string; digest?: string; branchKey?: string; kind?: WorkflowNodeV1["kind"] } = {},
): StepUpsertInput {
  const branchKey = extra.branchKey ?? "";
  return {
    id: `${run.id}:${nodeId}:${branchKey || "main"}:1`,
    run,
    node: node(nodeId, extra.kind),
    branchKey,
    state,
    at,
    ...(extra.output ? { output: extra.output, digest: extra.output.digest } : {}),
    ...(extra.digest ? { digest: extra.digest } : {}),
    ...(extra.errorCode ? { errorCode: extra.errorCode } : {}),
  };
}

/**
 * The run's step rows of the nodes the test wrote (not the run's own start and done), in the order
 * they went in: every column of SELECT *, each column's SQL type, with the run's id masked.
 */
async function rowsOf(run: AuthorizedRun) {
  const { results: columns } = await env.DB.prepare("SELECT name FROM pragma_table_info('workflow_step_runs') ORDER BY cid").all<{ name: string }>();
  const types = columns.map(({ name }) => `typeof(${name}) AS "type:${name}"`).join(", ");
  const { results } = await env.DB.prepare(`SELECT *, ${types} FROM workflow_step_runs WHERE run_id = ?1 AND node_id NOT IN ('start', 'done') ORDER BY rowid`).bind(run.id).all<Record<string, unknown>>();
  return JSON.parse(JSON.stringify(results).replaceAll(run.id, "RUN")) as Array<Record<string, unknown>>;
}

/** The same batches written on two runs: one statement per step row on the first, the step rows of each batch combined on the second. */
/** An ended run set running again: a fused group's guard writes only into a live run. */
async function liveRun(): Promise<AuthorizedRun> {
  const run = await endedRun();
  await env.DB.prepare("UPDATE workflow_runs SET state = 'running' WHERE id = ?1").bind(run.id).run();
  return { ...run, state: "running" };
}

async function bothWays(batches: (run: AuthorizedRun) => D1PreparedStatement[][], runOf: () => Promise<AuthorizedRun> = endedRun) {
  const [separate, combined] = [await runOf(), await runOf()];
  const counts: number[] = [];
  for (const batch of batches(separate)) await env.DB.batch(batch);
  for (const batch of batches(combined)) {
    const statements = combineStepUpserts(env.DB, batch);
    counts.push(statements.length);
    await env.DB.batch(statements);
  }
  return { separate: await rowsOf(separate), combined: await rowsOf(combined), counts, runs: { separate, combined } };
}

describe("combineStepUpserts", () => {
  it("new rows of each state: one statement leaves exactly the rows, columns and SQL types the separate upserts leave, in their order", async () => {
    const output = await outputRecord({ port: "next", score: 3, flags: [true, null], text: "é ünïcode ✓" });
    // A content-reading node's output: the open view in the row, the whole output sealed beside it.
    const { sealed } = await sealPersonalData(env, inst.id, "step_output:step-upserts", { port: "success", text: "reported words" });
    const sealedOutput = await outputRecord({ port: "success" }, sealed);
    const failedOutput = await outputRecord({ port: "error", errorCode: "expression.type_error" });
    const timedOutOutput = await outputRecord({ port: "timeout" });
    const { separate, combined, counts } = await bothWays((run) => [
      [
        stepUpsert(env.DB, step(run, "running", "running", T1)),
        stepUpsert(env.DB, step(run, "waiting", "waiting", T1, { kind: "wait_for_event" })),
        stepUpsert(env.DB, step(run, "succeeded", "succeeded", T1, { output })),
        stepUpsert(env.DB, step(run, "sealed", "succeeded", T1, { output: sealedOutput, kind: "enrichment", branchKey: "b1" })),
        stepUpsert(env.DB, step(run, "failed", "failed", T1, { output: failedOutput, errorCode: "expression.type_error" })),
        stepUpsert(env.DB, step(run, "timed_out", "timed_out", T2, { output: timedOutOutput, kind: "wait_for_event" })),
      ],
    ]);
    expect(counts).toEqual([1]);
    expect(combined).toEqual(separate);
    expect(separate.map((row) => row.node_id)).toEqual(["running", "waiting", "succeeded", "sealed", "failed", "timed_out"]);
    // What the comparison covers: integers stay integers, NULLs stay NULLs, texts stay texts.
    const byNode = new Map(combined.map((row) => [row.node_id, row]));
    expect(byNode.get("running")).toMatchObject({ state: "running", occurrence: 1, "type:occurrence": "integer", output_json: null, "type:output_size": "null", waiting_at: null, finished_at: null, started_at: T1, updated_at: T1 });
    expect(byNode.get("waiting")).toMatchObject({ state: "waiting", waiting_at: T1, finished_at: null });
    expect(byNode.get("succeeded")).toMatchObject({ output_json: output.json, output_size: output.sizeBytes, "type:output_size": "integer", output_digest: output.digest, output_sealed: null, finished_at: T1 });
    expect(byNode.get("sealed")).toMatchObject({ branch_key: "b1", node_type: "enrichment", output_json: '{"port":"success"}', output_sealed: sealed, "type:output_sealed": "text", output_size: sealedOutput.sizeBytes });
    expect(byNode.get("failed")).toMatchObject({ state: "failed", error_code: "expression.type_error", "type:error_code": "text" });
    expect(byNode.get("timed_out")).toMatchObject({ state: "timed_out", started_at: T2, finished_at: T2 });
  });

  it("rows written over existing ones: the same rules as separate upserts (waits and starts kept, a finished step not moved back, an output replaced or kept)", async () => {
    const first = await outputRecord({ port: "received", verdict: "keep" });
    const again = await outputRecord({ port: "received", verdict: "remove" });
    const { separate, combined, counts } = await bothWays((run) => [
      // What was recorded before: a wait, finished steps with an output, a running step.
      [
        stepUpsert(env.DB, step(run, "wait", "waiting", T1, { kind: "wait_for_event" })),
        stepUpsert(env.DB, step(run, "done-step", "succeeded", T1, { output: first })),
        stepUpsert(env.DB, step(run, "rewritten", "succeeded", T1, { output: first })),
        stepUpsert(env.DB, step(run, "kept", "succeeded", T1, { output: first })),
        stepUpsert(env.DB, step(run, "started", "running", T1)),
        stepUpsert(env.DB, step(run, "rewaited", "waiting", T1, { kind: "wait_for_event" })),
      ],
      [
        stepUpsert(env.DB, step(run, "wait", "succeeded", T2, { output: again, kind: "wait_for_event" })),
        stepUpsert(env.DB, step(run, "done-step", "waiting", T2)),
        stepUpsert(env.DB, step(run, "rewritten", "succeeded", T2, { output: again })),
        stepUpsert(env.DB, step(run, "kept", "failed", T2, { errorCode: "runtime.step_failed" })),
        stepUpsert(env.DB, step(run, "started", "failed", T2, { errorCode: "runtime.step_failed", digest: first.digest })),
        // A wait prepared again (a retried call): it keeps the time it first waited.
        stepUpsert(env.DB, step(run, "rewaited", "waiting", T2, { kind: "wait_for_event" })),
        // A step written twice in the batch: the second applies over the first, as a second statement would.
        stepUpsert(env.DB, step(run, "twice", "waiting", T1, { kind: "wait_for_event" })),
        stepUpsert(env.DB, step(run, "twice", "succeeded", T2, { output: again, kind: "wait_for_event" })),
      ],
    ]);
    expect(counts).toEqual([1, 1]);
    expect(combined).toEqual(separate);
    const byNode = new Map(combined.map((row) => [row.node_id, row]));
    expect(byNode.get("wait")).toMatchObject({ state: "succeeded", started_at: T1, waiting_at: T1, finished_at: T2, updated_at: T2, output_json: again.json });
    expect(byNode.get("done-step")).toMatchObject({ state: "succeeded", finished_at: T1, output_json: first.json, output_digest: first.digest });
    expect(byNode.get("rewritten")).toMatchObject({ state: "succeeded", output_json: again.json, output_digest: again.digest, output_size: again.sizeBytes, finished_at: T1 });
    expect(byNode.get("kept")).toMatchObject({ state: "failed", error_code: "runtime.step_failed", output_json: first.json, output_size: first.sizeBytes, output_digest: first.digest });
    expect(byNode.get("started")).toMatchObject({ state: "failed", started_at: T1, finished_at: T2, output_json: null });
    expect(byNode.get("rewaited")).toMatchObject({ state: "waiting", started_at: T1, waiting_at: T1, updated_at: T2 });
    expect(byNode.get("twice")).toMatchObject({ state: "succeeded", started_at: T1, waiting_at: T1, finished_at: T2, output_json: again.json });
    expect(combined.map((row) => row.node_id)).toEqual(["wait", "done-step", "rewritten", "kept", "started", "rewaited", "twice"]);
  });

  it("a fused group's batch: its guard, on the combined statement, fails the whole batch when a step finished and lets all of it through otherwise", async () => {
    const output = await outputRecord({ port: "next" });
    /** The group's batch as the runtime builds it (groupBatch: step row, its audit event, per node; the first carries the write guard). */
    const group = (run: AuthorizedRun, nodeIds: string[]) =>
      groupBatch(
        env.DB,
        run,
        nodeIds.map((nodeId, index) => {
          const input = step(run, nodeId, "succeeded", T2, { output });
          const record: NodeRecord = {
            node: input.node,
            stepId: input.id,
            at: T2,
            priorSteps: index,
            step: input,
            tail: [runtimeAudit(env.DB, run, { key: `step:${input.id}:succeeded`, action: "workflow.step_succeeded", details: stepEventDetails(input.node, "", output.digest, "next"), at: T2 })],
          };
          return record;
        }),
      );
    const events = async (run: AuthorizedRun) =>
      (await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE target_id = ?1 AND action = 'workflow.step_succeeded' AND json_extract(details_json, '$.nodeId') IN ('c1', 'c2', 'c3')").bind(run.id).first<{ n: number }>())!.n;

    // c2 finished before the group's batch: nothing of it is written, either way.
    for (const combine of [false, true]) {
      const run = await liveRun();
      await env.DB.batch([stepUpsert(env.DB, step(run, "c2", "succeeded", T1, { output }))]);
      const before = { rows: await rowsOf(run), events: await events(run) };
      const batch = group(run, ["c1", "c2", "c3"]);
      const statements = combine ? combineStepUpserts(env.DB, batch) : batch;
      if (combine) expect(statements).toHaveLength(batch.length - 2);
      await expect(env.DB.batch(statements)).rejects.toThrow(/malformed JSON/u);
      expect({ rows: await rowsOf(run), events: await events(run) }).toEqual(before);
    }

    // The run ended after the group was read: nothing of the group is written, either way.
    for (const combine of [false, true]) {
      const run = await endedRun();
      const before = { rows: await rowsOf(run), events: await events(run) };
      const batch = group(run, ["c1", "c2", "c3"]);
      await expect(env.DB.batch(combine ? combineStepUpserts(env.DB, batch) : batch)).rejects.toThrow(/malformed JSON/u);
      expect({ rows: await rowsOf(run), events: await events(run) }).toEqual(before);
    }

    // None finished, the run live: every row and event is written, the rows those of the separate statements.
    const { separate, combined, counts, runs } = await bothWays((run) => [group(run, ["c1", "c2", "c3"])], liveRun);
    expect([await events(runs.separate), await events(runs.combined)]).toEqual([3, 3]);
    expect(counts).toEqual([1 + 1 + 3]);
    expect(combined).toEqual(separate);
    expect(combined.map((row) => [row.node_id, row.state])).toEqual([
      ["c1", "succeeded"],
      ["c2", "succeeded"],
      ["c3", "succeeded"],
    ]);
  });

  it("a batch of 3 upserts and 2 other statements is 3 statements, the combined one where the first upsert stood; a guard on a later upsert leaves the batch as it is", async () => {
    const run = await endedRun();
    const count = env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE run_id = ?1 AND node_id NOT IN ('start', 'done')").bind(run.id);
    const touch = env.DB.prepare("UPDATE workflow_runs SET updated_at = ?2 WHERE id = ?1").bind(run.id, T2);
    const upserts = ["a", "b", "c"].map((nodeId) => stepUpsert(env.DB, step(run, nodeId, "running", T1)));
    const batch = [upserts[0]!, count, upserts[1]!, touch, upserts[2]!];
    const statements = combineStepUpserts(env.DB, batch);
    expect(statements).toHaveLength(3);
    expect(statements[1]).toBe(count);
    expect(statements[2]).toBe(touch);
    const answers = await env.DB.batch<{ n: number }>(statements);
    expect(answers).toHaveLength(3);
    // The statement that stood between the first upsert and the second now sees all three rows.
    expect(answers[1]!.results).toEqual([{ n: 3 }]);
    expect((await rowsOf(run)).map((row) => row.node_id)).toEqual(["a", "b", "c"]);

    // Only the first upsert may carry a guard: a guard on a later one must not be evaluated earlier.
    const guard = { sql: "(SELECT 1 WHERE ?12 IS NOT NULL)", bind: "x" };
    const guardedLater = [stepUpsert(env.DB, step(run, "d", "running", T1)), stepUpsert(env.DB, step(run, "e", "running", T1), guard)];
    const same = (statements: D1PreparedStatement[], expected: D1PreparedStatement[]) => expect(statements.length === expected.length && statements.every((statement, index) => statement === expected[index])).toBe(true);
    same(combineStepUpserts(env.DB, guardedLater), guardedLater);
    // A lone upsert stays as it is.
    same(combineStepUpserts(env.DB, [upserts[0]!, count]), [upserts[0]!, count]);
  });
});
