// A node that failed after its retries, as the host records it: its error port's output, or the
// run goes to repair_required. Shared by failNode (one step per node) and failFused (a fused group).
import { cancelStepProposalStatements } from "../enforcement";
import { denied, stepRunId, type AuthorizedRun } from "./runtime-authorize";
import type { NodeOutput } from "./runtime-protocol";
import { now, recordedHostError, recordStepResult, runtimeAudit, stepUpsert, type RecordedStep } from "./runtime-records";
import type { WorkflowNodeV1 } from "./types";

/**
 * The error's message and details are the host's own, recorded when it threw; the code the
 * kernel reports is used only when the host recorded that very code for this step. Without an
 * error port this records repair_required and throws `workflow.node_failure_unhandled`.
 */
export async function recordNodeFailure(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; step: RecordedStep | undefined; errorCode: string }): Promise<NodeOutput> {
  const { run, node, branchKey, step, errorCode } = input;
  const stepId = stepRunId(run.id, node.id, branchKey);
  const recorded = await recordedHostError(env.DB, stepId, errorCode);
  // One structured line per step error (ids and the code only, never a message or data).
  console.error(JSON.stringify({ event: "run.step_error", installationId: run.installationId, runId: run.id, nodeId: node.id, kind: node.kind, branchKey, errorCode, to: node.errorPort ? "error_port" : "repair_required" }));
  if (node.errorPort) {
    const output = { port: node.errorPort, errorCode, exhausted: true };
    // An action sent to its error port leaves no proposal to approve.
    const cancel = node.kind === "action" ? cancelStepProposalStatements(env.DB, { installationId: run.installationId, runId: run.id, stepId, reason: "node_error_port", at: now() }) : [];
    await recordStepResult(env.DB, { run, node, branchKey, stepId, output, state: "failed", errorCode, extra: cancel });
    return { port: node.errorPort };
  }
  const at = now();
  const summary = recorded ? `Node ${node.id} failed (${errorCode}): ${recorded.message}` : `Node ${node.id} failed (${errorCode}) and declares no error port.`;
  await env.DB.batch([
    stepUpsert(env.DB, { id: stepId, run, node, branchKey, state: "failed", errorCode, at }),
    env.DB.prepare(`
      UPDATE workflow_runs SET state = 'repair_required', error_code = ?2, error_summary = ?3, error_details_json = ?6, current_node_id = ?4,
        updated_at = ?5, revision = revision + 1
      WHERE id = ?1 AND state NOT IN ('succeeded', 'failed', 'terminated', 'superseded')
    `).bind(run.id, errorCode, summary.slice(0, 2000), node.id, at, recorded?.detailsJson ?? null),
    runtimeAudit(env.DB, run, { key: `step:${stepId}:repair_required${(step?.attempt ?? 1) > 1 ? `:${step!.attempt}` : ""}`, action: "workflow.run_repair_required", details: { nodeId: node.id, branchKey, errorCode }, at }),
    // The failed node's own proposal ends; the run's other waits and tasks stay for a repair.
    ...(node.kind === "action" ? cancelStepProposalStatements(env.DB, { installationId: run.installationId, runId: run.id, stepId, reason: "node_failed", at }) : []),
  ]);
  throw denied("workflow.node_failure_unhandled");
}
