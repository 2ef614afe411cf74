// An action proposal's step is named by its id (`<step id>:proposal`): a proposal written now stores
// no step_run_id, and one of the earlier form (step_run_id stored) reads, gates and archives alike.
// A new proposal's run archive keeps no action-step anchor in D1; the earlier form's keeps its own.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { SCOPE_SQL } from "../src/cases/archive/case-scope";
import { prepareWorkflowAction } from "../src/enforcement";
import { ACTION_GATE_SQL, DELIVERY_SOURCES, proposalJsonSql, proposalRow } from "../src/enforcement/actions";
import { sweepRunArchive } from "../src/workflows/run-archive";
import type { AuthorizedRun, WorkflowNodeV1 } from "../src/workflows";
import { api, newInstallation, publish, removePostGraph, startRun, until, waitForRun } from "./helpers";

/** A sweep's clock a little ahead, so runs that just ended are past a 0-day window. */
const soon = () => new Date(Date.now() + 2_000);

const FORMS = [
  ["written now (no step_run_id)", false],
  ["of the earlier form (step_run_id stored)", true],
] as const;

/** An installation with a 0-day window, an endpoint the receiver accepts, the remove_post action type and the action graph. */
async function setup() {
  const inst = await newInstallation("proposal-step");
  expect((await api("/api/v1/storage/settings", { method: "PUT", key: inst.apiKey, body: { hotDays: 0 } })).status).toBe(200);
  const path = `/ok/proposal-step/${crypto.randomUUID()}`;
  const hook = await api("/api/v1/webhook-endpoints", { key: inst.apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(hook.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: hook.body.secret }) });
  expect((await api("/api/v1/action-types", { key: inst.apiKey, body: { key: "remove_post", name: "Remove post", endpointId: hook.body.id, reversible: true, requiresApproval: false } })).status).toBe(201);
  const version = await publish(inst.apiKey, removePostGraph);
  return { ...inst, versionId: version.id };
}

/** An assisted run waiting on its proposal; the proposal in the form asked for (the earlier one: its step_run_id stored, as the release before wrote it). */
async function waitingProposal(inst: { apiKey: string; versionId: string }, earlierForm: boolean, postId: string) {
  const run = await startRun(inst.apiKey, inst.versionId, { authorityMode: "assisted", input: { postId } });
  const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: inst.apiKey })).body.items.find((p: { runId: string }) => p.runId === run.id), "a proposal");
  const stepId = (await env.DB.prepare("SELECT id FROM workflow_step_runs WHERE run_id = ?1 AND node_id = 'remove'").bind(run.id).first<{ id: string }>())!.id;
  expect(proposal.id).toBe(`${stepId}:proposal`);
  const stored = async () => (await env.DB.prepare("SELECT step_run_id AS stepRunId FROM action_proposals WHERE id = ?1").bind(proposal.id).first<{ stepRunId: string | null }>())!.stepRunId;
  // Written now: the row names no step.
  expect(await stored()).toBeNull();
  if (earlierForm) {
    await env.DB.prepare("UPDATE action_proposals SET step_run_id = ?2 WHERE id = ?1").bind(proposal.id, stepId).run();
    expect(await stored()).toBe(stepId);
  }
  return { runId: run.id as string, stepId, proposal: proposal as { id: string } };
}

/** The send-time check's read and answer for a delivery (the gate every attempt runs). */
async function gate(delivery: { id: string; installationId: string; sourceId: string }) {
  const row = (await DELIVERY_SOURCES.gate!.statement(env.DB, delivery.id).first<Record<string, unknown>>()) ?? undefined;
  const refusal = await DELIVERY_SOURCES.gate!.refusal(env, { ...delivery, sourceType: "action" }, row);
  return { row, refusal };
}

describe("a proposal's step, named by its id", () => {
  it.each(FORMS)("a proposal %s reads its step, is gated by it while the run lives, and its run's archive keeps an anchor only for the earlier form", async (_, earlierForm) => {
    const inst = await setup();
    const { runId, stepId, proposal } = await waitingProposal(inst, earlierForm, "p-archive");
    // Every reader's row names the step: the stored one, or the id's.
    expect(await proposalRow(env.DB, proposal.id)).toMatchObject({ id: proposal.id, stepRunId: stepId, runId });
    const json = await env.DB.prepare(`SELECT ${proposalJsonSql("?1")} AS row`)
      .bind(proposal.id)
      .first<{ row: string }>();
    expect(JSON.parse(json!.row)).toMatchObject({ id: proposal.id, stepRunId: stepId });

    expect((await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: inst.apiKey, body: { approver: "lead-mod" } })).status).toBe(200);
    expect((await waitForRun(inst.apiKey, runId)).output.terminalCode).toBe("applied");
    const hot = (await api(`/api/v1/action-proposals/${proposal.id}`, { key: inst.apiKey })).body;
    expect(hot).toMatchObject({ state: "applied", decidedBy: "lead-mod" });
    const delivery = { id: hot.deliveryId as string, installationId: inst.id, sourceId: proposal.id };
    // Before the archive the gate finds the step row by the proposal's step, in either form.
    expect((await gate(delivery)).row).toMatchObject({ id: proposal.id, stepRunId: stepId, runState: "succeeded", stepState: "succeeded" });

    expect(await sweepRunArchive(env, soon(), { installationId: inst.id })).toMatchObject({ archived: 1, failed: 0 });
    const left = await env.DB.prepare("SELECT id, node_id AS nodeId, state FROM workflow_step_runs WHERE run_id = ?1").bind(runId).all();
    // Only a proposal of the earlier form still points at its step row by foreign key, and keeps it.
    expect(left.results).toEqual(earlierForm ? [{ id: stepId, nodeId: "remove", state: "succeeded" }] : []);

    // Archived: the proposal reads as it did; a decision and a send answer the run's end, in either form.
    expect((await api(`/api/v1/action-proposals/${proposal.id}`, { key: inst.apiKey })).body).toEqual(hot);
    const again = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: inst.apiKey, body: { approver: "lead-mod" } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("action_proposal.run_finished");
    const after = await gate(delivery);
    expect(after.row).toMatchObject({ id: proposal.id, stepRunId: stepId, runState: "succeeded", stepState: earlierForm ? "succeeded" : null });
    expect(after.refusal).toBe("run_finished");
    expect(await proposalRow(env.DB, proposal.id)).toMatchObject({ state: "applied", stepRunId: stepId });
  });

  it.each(FORMS)("a proposal %s whose node has left is refused and cancelled (the step found by the proposal's step)", async (_, earlierForm) => {
    const inst = await setup();
    const { runId, stepId, proposal } = await waitingProposal(inst, earlierForm, "p-left");
    // The node left (its step ended) while the run is still live.
    await env.DB.prepare("UPDATE workflow_step_runs SET state = 'succeeded' WHERE id = ?1").bind(stepId).run();
    const refused = await api(`/api/v1/action-proposals/${proposal.id}/approve`, { key: inst.apiKey, body: { approver: "lead-mod" } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("action_proposal.cancelled");
    expect(await env.DB.prepare("SELECT state, cancel_reason AS reason FROM action_proposals WHERE id = ?1").bind(proposal.id).first()).toEqual({ state: "cancelled", reason: "node_error_port" });
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE source_type = 'action' AND source_id = ?1").bind(proposal.id).first()).toEqual({ n: 0 });
    expect((await api(`/api/v1/runs/${runId}/terminate`, { key: inst.apiKey, body: { reason: "test over" } })).status).toBeLessThan(300);
  });

  it.each(FORMS)("one proposal per step: preparing the step's action again, its proposal %s already there, writes no second row", async (_, earlierForm) => {
    const inst = await setup();
    const { runId, stepId, proposal } = await waitingProposal(inst, earlierForm, "p-once");
    const before = await env.DB.prepare("SELECT * FROM action_proposals WHERE run_id = ?1").bind(runId).all();
    const run = { id: runId, installationId: inst.id, authorityMode: "assisted", reportId: null } as unknown as AuthorizedRun;
    const node = removePostGraph.nodes.find((n) => n.id === "remove") as unknown as WorkflowNodeV1;
    // As a call that did not see the step's row would: no read first, straight to the insert.
    const prepared = await prepareWorkflowAction(env, { run, node, stepId, context: { input: { postId: "p-once" }, report: null, run: null, steps: {}, event: null }, stepRecorded: false, park: [] });
    expect(prepared.progress).toMatchObject({ status: "approval_required", proposalId: proposal.id });
    expect((await env.DB.prepare("SELECT * FROM action_proposals WHERE run_id = ?1").bind(runId).all()).results).toEqual(before.results);
    if (earlierForm) {
      // The previous release's insert (its step stored, conflicting on it), as its Worker sends it
      // between the migration and the deployment: the conflict target still exists, and nothing is written.
      const old = await env.DB.prepare(
        `INSERT INTO action_proposals (id, installation_id, run_id, step_run_id, node_id, action_type_id, action_type_key, report_id, authority_mode, state,
          params_json, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at)
        SELECT id, installation_id, run_id, ?2, node_id, action_type_id, action_type_key, report_id, authority_mode, state, params_json, NULL, '', '', expires_at, created_at, updated_at
        FROM action_proposals WHERE id = ?1
        ON CONFLICT(step_run_id) DO NOTHING`,
      )
        .bind(proposal.id, stepId)
        .run();
      expect(old.meta.changes).toBe(0);
      expect((await env.DB.prepare("SELECT * FROM action_proposals WHERE run_id = ?1").bind(runId).all()).results).toEqual(before.results);
    }
    expect((await api(`/api/v1/runs/${runId}/terminate`, { key: inst.apiKey, body: { reason: "test over" } })).status).toBeLessThan(300);
  });

  it("the queries that find a proposal's step use an index: the send-time gate by the steps' key, a case's proposals by run, the earlier form's anchors by step_run_id's unique index", async () => {
    const plan = async (sql: string, ...binds: unknown[]) =>
      (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .bind(...binds)
          .all<{ detail: string }>()
      ).results.map((row) => row.detail);
    const gatePlan = await plan(ACTION_GATE_SQL, "dlv_plan");
    expect(gatePlan.some((d) => /SEARCH s USING INDEX sqlite_autoindex_workflow_step_runs_1 \(id=\?\)/u.test(d))).toBe(true);
    expect(gatePlan.some((d) => /SEARCH p USING INDEX sqlite_autoindex_action_proposals_1 \(id=\?\)/u.test(d))).toBe(true);
    expect(gatePlan.some((d) => /^SCAN/u.test(d))).toBe(false);
    const scopePlan = await plan(`${SCOPE_SQL} SELECT id FROM pr`, "case_plan", "inst_plan");
    expect(scopePlan.some((d) => /SEARCH action_proposals USING (COVERING )?INDEX action_proposals_run \(run_id=\?\)/u.test(d))).toBe(true);
    // The run archive's "still pointed at" test for a step row (and the foreign key's check when one is deleted).
    const anchorPlan = await plan("SELECT 1 FROM action_proposals x WHERE x.step_run_id = ?1", "step_plan");
    expect(anchorPlan.some((d) => /USING (COVERING )?INDEX sqlite_autoindex_action_proposals_2 \(step_run_id=\?\)/u.test(d))).toBe(true);
  });
});
