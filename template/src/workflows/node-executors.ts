// What each node kind does when the runtime executes it. Kinds whose executors arrive in later
// work fail with `node_executor_unavailable`, never a pretend success.
import { canonicalJson } from "../audit";
import { AppError } from "../errors";
import { evaluateInputMapping, evaluateWorkflowExpression, type ExpressionContext } from "./expressions";
import { loadWorkflowExecutionContext } from "./execution-context";
import type { AuthorizedRun } from "./runtime-authorize";
import { createRun } from "./runs";
import type { WorkflowNodeV1 } from "./types";
import { MAX_WAIT_SECONDS } from "./types";

export interface NodeCall {
  env: Env;
  ctx: ExecutionContext;
  run: AuthorizedRun;
  node: WorkflowNodeV1;
  branchKey: string;
  /** Context read together with authorization, when the graph was cached. */
  preloaded?: ExpressionContext;
}

/** Output of an effect node in shadow mode: nothing leaves the system. */
export function shadowSimulation(node: WorkflowNodeV1): Record<string, unknown> | null {
  const ports: Partial<Record<WorkflowNodeV1["kind"], string>> = {
    human_task: "completed",
    send_message: "sent",
    decision: "recorded",
    handoff: "handed_off",
    start_linked_workflow: "started",
    action: "applied",
  };
  const port = ports[node.kind];
  if (!port) return null;
  // A simulated decision says what it would have decided, so shadow runs can be evaluated.
  const outcome = node.kind === "decision" && typeof node.config.outcome === "string" ? { outcome: node.config.outcome } : {};
  return { port, status: "simulated", simulated: true, effectSuppressed: true, simulationCode: `shadow_${node.kind}_suppressed`, ...outcome };
}

export function executorUnavailable(kind: string): AppError {
  return new AppError("node_executor_unavailable", `Nodes of kind ${kind} cannot execute on this platform version yet.`, { status: 501 });
}

function conditionCases(node: WorkflowNodeV1): { port: string; when: string }[] {
  const cases = Array.isArray(node.config.cases) ? node.config.cases : [];
  return cases.flatMap((entry) => entry && typeof entry === "object" && !Array.isArray(entry) && typeof entry.port === "string" && typeof entry.when === "string"
    ? [{ port: entry.port, when: entry.when }] : []);
}

/** Evaluates every case; exactly zero (default port) or one may be true. */
export async function executeCondition(call: NodeCall): Promise<Record<string, unknown>> {
  const { node } = call;
  const context = await loadWorkflowExecutionContext(call.env, call);
  const nodeInput = evaluateInputMapping(node.inputMapping, context, node.id);
  const full = { ...context, node_input: nodeInput };
  const matched: string[] = [];
  for (const candidate of conditionCases(node)) {
    const result = evaluateWorkflowExpression(candidate.when, full, node.id);
    if (typeof result !== "boolean") throw new AppError("condition_result_not_boolean", `Case ${candidate.port} of ${node.id} did not evaluate to a boolean.`);
    if (result) matched.push(candidate.port);
  }
  if (matched.length > 1) throw new AppError("condition_not_mutually_exclusive", `More than one case of ${node.id} is true: ${matched.join(", ")}.`, { details: { matched } });
  const port = matched[0] ?? String(node.config.default_port);
  return { port, matched: matched[0] ?? null, input: nodeInput };
}

/** The moment a delay ends: `seconds` from now, or the mapped timestamp (a past time resumes at once). */
export async function prepareDelay(call: NodeCall): Promise<{ port: string; resumeAt: string; prepared: true }> {
  const { node } = call;
  let resumeAt: number;
  if (node.kind === "delay") {
    resumeAt = Date.now() + Number(node.config.seconds) * 1_000;
  } else {
    const context = await loadWorkflowExecutionContext(call.env, call);
    const mapped = evaluateInputMapping(node.inputMapping, context, node.id);
    const parsed = typeof mapped.timestamp === "string" ? Date.parse(mapped.timestamp) : Number.NaN;
    if (!Number.isFinite(parsed)) throw new AppError("delay_timestamp_invalid", `inputMapping.timestamp of ${node.id} is not an ISO time.`);
    if (parsed > Date.now() + MAX_WAIT_SECONDS * 1_000) throw new AppError("delay_timestamp_invalid", `The delay of ${node.id} ends more than a year from now.`);
    resumeAt = Math.max(parsed, Date.now());
  }
  return { port: "completed", resumeAt: new Date(resumeAt).toISOString(), prepared: true };
}

/** Starts (once per node and branch) a run of another version of the same installation. */
export async function startLinkedWorkflow(call: NodeCall): Promise<Record<string, unknown>> {
  const { env, ctx, run, node, branchKey } = call;
  const context = await loadWorkflowExecutionContext(env, call);
  const payload = evaluateInputMapping(node.inputMapping, context, node.id);
  const { run: linked, replayed } = await createRun(env, ctx, {
    installationId: run.installationId,
    scopes: [],
    audit: { type: "system", id: "workflow-runtime" },
  }, {
    workflowVersionId: String(node.config.workflow_version_id),
    authorityMode: run.authorityMode,
    input: payload,
    ...(run.reportId ? { reportId: run.reportId } : {}),
    idempotencyKey: `linked:${run.id}:${node.id}:${branchKey || "main"}`,
    parent: { runId: run.id, nodeId: node.id },
  });
  return { port: "started", linkedRunId: linked.id, workflowVersionId: linked.workflowVersionId, idempotentReplay: replayed };
}

/** The end node's output: its terminal code plus, when mapped, the run's result data. */
export async function endOutput(call: NodeCall): Promise<Record<string, unknown>> {
  const { node } = call;
  const terminalCode = typeof node.config.terminal_code === "string" ? node.config.terminal_code : "complete";
  if (!node.inputMapping || Object.keys(node.inputMapping).length === 0) return { port: "terminal", terminalCode };
  const context = await loadWorkflowExecutionContext(call.env, call);
  return { port: "terminal", terminalCode, result: evaluateInputMapping(node.inputMapping, context, node.id) };
}

export function runSucceededStatement(db: D1Database, runId: string, nodeId: string, output: Record<string, unknown>, at: string): D1PreparedStatement {
  return db.prepare(`
    UPDATE workflow_runs SET state = 'succeeded', output_json = ?2, current_node_id = ?3, finished_at = ?4,
      waiting_at = NULL, updated_at = ?4, revision = revision + 1
    WHERE id = ?1 AND state NOT IN ('succeeded', 'failed', 'terminated', 'superseded')
  `).bind(runId, canonicalJson(output), nodeId, at);
}
