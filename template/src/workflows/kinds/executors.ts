// How the host executes each node kind once the capability has authorized the call. Descriptors
// (descriptors.ts) say what a kind is; this says what it does. Wait and action kinds are driven by
// their protocol's capability methods (runtime-waits.ts, enforcement's actions), not by `execute`.
import { canonicalJson } from "../../audit";
import { AppError } from "../../errors";
import { executeAiProposal, executeEnrichment } from "../../automation";
import { handoffWorkflowReport, recordWorkflowDecision, reportToCyberTipline, sendWorkflowMessage } from "../../enforcement";
import { loadWorkflowExecutionContext } from "../execution-context";
import { evaluateInputMapping, evaluateWorkflowExpression, type ExpressionContext } from "../expressions";
import type { PreparedDelay } from "../runtime-protocol";
import type { AuthorizedRun } from "../runtime-authorize";
import { runEndStatements } from "../run-end";
import { createRun } from "../runs";
import { storedRunOutput } from "../run-input";
import { MAX_WAIT_SECONDS, type WorkflowNodeV1 } from "../types";
import { conditionCases, type WorkflowNodeKind } from "./descriptors";

export interface NodeCall {
  env: Env;
  ctx: ExecutionContext;
  run: AuthorizedRun;
  node: WorkflowNodeV1;
  branchKey: string;
  stepId: string;
  /** Whether the node reads the report's content (or sealed outputs derived from it). */
  readsContent?: boolean;
  /** Context read together with authorization, when the graph was cached. */
  preloaded?: ExpressionContext;
  /** What the run still has open (run-end.ts RUN_END_OPEN_SQL), read with authorization, for an end node. */
  runEndOpen?: string;
  /**
   * An end node closing a fused group: the group's nodes (the end included) and when its first
   * began. The end's update then moves the run as the group's progress would have (runtime-fused.ts).
   */
  groupProgress?: { nodes: number; startedAt: string };
}

/** A node's output, the statements for the batch that records it, and deliveries to enqueue after it. */
export interface StepResult {
  output: Record<string, unknown>;
  statements?: D1PreparedStatement[];
  deliveryIds?: string[];
}

export interface KindExecutor {
  execute?: (call: NodeCall) => Promise<StepResult>;
  /** An effect runs once: a repeated call returns the recorded output (and re-queues its deliveries). */
  once?: boolean;
  /** `delay` protocol: when the sleep ends. */
  prepare?: (call: NodeCall) => Promise<PreparedDelay>;
}

const pass = (port: string): KindExecutor => ({ execute: async () => ({ output: { port } }) });

async function context(call: NodeCall): Promise<ExpressionContext> {
  return loadWorkflowExecutionContext(call.env, call);
}

/** Evaluates every case; exactly zero (default port) or one may be true. */
async function executeCondition(call: NodeCall): Promise<StepResult> {
  const { node } = call;
  const loaded = await context(call);
  const nodeInput = evaluateInputMapping(node.inputMapping, loaded, node.id);
  const full = { ...loaded, node_input: nodeInput };
  const matched: string[] = [];
  for (const candidate of conditionCases(node.config)) {
    const result = evaluateWorkflowExpression(candidate.when, full, node.id);
    if (typeof result !== "boolean") throw new AppError("condition.result_not_boolean", `Case ${candidate.port} of ${node.id} did not evaluate to a boolean.`);
    if (result) matched.push(candidate.port);
  }
  if (matched.length > 1) throw new AppError("condition.not_mutually_exclusive", `More than one case of ${node.id} is true: ${matched.join(", ")}.`, { details: { matched } });
  return { output: { port: matched[0] ?? String(node.config.default_port), matched: matched[0] ?? null, input: nodeInput } };
}

/** The moment a delay ends: `seconds` from now, or the mapped timestamp (a past time resumes at once). */
async function prepareDelay(call: NodeCall): Promise<PreparedDelay> {
  const { node } = call;
  let resumeAt: number;
  if (node.kind === "delay") {
    resumeAt = Date.now() + Number(node.config.seconds) * 1_000;
  } else {
    const mapped = evaluateInputMapping(node.inputMapping, await context(call), node.id);
    const parsed = typeof mapped.timestamp === "string" ? Date.parse(mapped.timestamp) : Number.NaN;
    if (!Number.isFinite(parsed)) throw new AppError("delay.timestamp_invalid", `inputMapping.timestamp of ${node.id} is not an ISO time.`);
    if (parsed > Date.now() + MAX_WAIT_SECONDS * 1_000) throw new AppError("delay.timestamp_invalid", `The delay of ${node.id} ends more than a year from now.`);
    resumeAt = Math.max(parsed, Date.now());
  }
  return { port: "completed", resumeAt: new Date(resumeAt).toISOString(), prepared: true };
}

/** Starts (once per node and branch) a run of another version of the same installation. */
async function startLinkedWorkflow(call: NodeCall): Promise<StepResult> {
  const { env, ctx, run, node, branchKey } = call;
  const payload = evaluateInputMapping(node.inputMapping, await context(call), node.id);
  const { run: linked, replayed } = await createRun(
    env,
    ctx,
    {
      installationId: run.installationId,
      scopes: [],
      audit: { type: "system", id: "workflow-runtime" },
    },
    {
      workflowVersionId: String(node.config.workflow_version_id),
      authorityMode: run.authorityMode,
      input: payload,
      ...(run.reportId ? { reportId: run.reportId } : {}),
      idempotencyKey: `linked:${run.id}:${node.id}:${branchKey || "main"}`,
      parent: { runId: run.id, nodeId: node.id },
    },
  );
  return { output: { port: "started", linkedRunId: linked.id, workflowVersionId: linked.workflowVersionId, idempotentReplay: replayed } };
}

/**
 * The end node: its terminal code plus, when mapped, the run's result; the run succeeds in the
 * same batch, and whatever it still had open (waits, tasks, proposals of other branches) is cancelled.
 */
async function endRun(call: NodeCall): Promise<StepResult> {
  const { env, run, node, runEndOpen, groupProgress } = call;
  const terminalCode = typeof node.config.terminal_code === "string" ? node.config.terminal_code : "complete";
  const mapped = node.inputMapping && Object.keys(node.inputMapping).length > 0;
  const output = mapped ? { port: "terminal", terminalCode, result: evaluateInputMapping(node.inputMapping, await context(call), node.id) } : { port: "terminal", terminalCode };
  const at = new Date().toISOString();
  // A fused group that ends the run moves it with this update alone: its started_at, and one
  // revision per node of the group as well as this one's (as one step per node would).
  const succeeded = env.DB.prepare(`
    UPDATE workflow_runs SET state = 'succeeded', output_json = ?2, current_node_id = ?3, started_at = COALESCE(started_at, ?5), finished_at = ?4,
      waiting_at = NULL, updated_at = ?4, revision = revision + ?6
    WHERE id = ?1 AND state NOT IN ('succeeded', 'failed', 'terminated', 'superseded')
  `).bind(run.id, storedRunOutput(canonicalJson(output)), node.id, at, groupProgress?.startedAt ?? at, 1 + (groupProgress?.nodes ?? 0));
  // What other branches left open (a wait, a task, a proposal) ends with the run, in the same batch.
  return { output, statements: [succeeded, ...(await runEndStatements(env.DB, { installationId: run.installationId, runId: run.id, runState: "succeeded", at, ...(runEndOpen ? { open: runEndOpen } : {}) }))] };
}

/** An effect executor of the enforcement domain, given the node's loaded context. */
function effect(run: typeof sendWorkflowMessage): KindExecutor {
  return {
    once: true,
    execute: async (call) => run({ env: call.env, run: call.run, node: call.node, stepId: call.stepId, context: await context(call) }),
  };
}

const automation = (run: (call: NodeCall) => Promise<Record<string, unknown>>): KindExecutor => ({ execute: async (call) => ({ output: await run(call) }) });

export const EXECUTORS: Record<WorkflowNodeKind, KindExecutor> = {
  start: pass("success"),
  end: { execute: endRun },
  condition: { execute: executeCondition },
  join: pass("success"),
  delay: { ...pass("completed"), prepare: prepareDelay },
  delay_until: { ...pass("completed"), prepare: prepareDelay },
  enrichment: automation(executeEnrichment),
  ai_proposal: automation(executeAiProposal),
  human_task: {},
  wait_for_event: {},
  send_message: effect(sendWorkflowMessage),
  decision: effect(recordWorkflowDecision),
  handoff: effect(handoffWorkflowReport),
  ncmec_report: effect(reportToCyberTipline),
  start_linked_workflow: { execute: startLinkedWorkflow },
  action: {},
};

export function executorUnavailable(kind: string): AppError {
  return new AppError("node.executor_unavailable", `Nodes of kind ${kind} cannot execute on this platform version yet.`, { status: 501 });
}
