// WorkflowRuntimeCapability: the only door from a workflow sandbox into the platform. Every call is
// authorized against D1 (run ↔ version ↔ artifact, authority mode, node and kind, run not terminal,
// identifiers) and its effects are written idempotently, with their audit event, in one batch.
import { WorkerEntrypoint } from "cloudflare:workers";
import { AppError } from "../errors";
import {
  endOutput, executeCondition, executorUnavailable, prepareDelay, runSucceededStatement, shadowSimulation, startLinkedWorkflow,
  type NodeCall,
} from "./node-executors";
import type {
  ActionProgress, NodeOutput, PreparedWait, RuntimeActionRequest, RuntimeCompleteActionRequest, RuntimeCompleteWaitRequest,
  RuntimeFailureRequest, RuntimeNodeRequest, RuntimeWaitRequest, WorkflowRuntimeApi,
} from "./runtime-protocol";
import { RETRYABLE_PREFIX } from "./runtime-protocol";
import {
  authorizedBranch, authorizedNode, authorizedRun, authorizedRunWith, cleanIdentifier, denied, graphIfCached, stepRunId,
  type AuthorizedRun, type RuntimeProps,
} from "./runtime-authorize";
import { assembleContext, contextStatements } from "./execution-context";
import type { ExpressionContext } from "./expressions";
import { now, recordStepResult, runProgress, runtimeAudit, stepUpsert } from "./runtime-records";
import { completeWaitStatements, prepareWaitRecord } from "./runtime-waits";
import { EFFECT_KINDS, type WorkflowNodeV1 } from "./types";
import {
  completeWorkflowAction, enqueueDeliveries, handoffWorkflowReport, prepareWorkflowAction, recordWorkflowDecision, sendWorkflowMessage,
  type EffectResult,
} from "../enforcement";
import type { EffectCall } from "../enforcement/effects";
import { loadWorkflowExecutionContext } from "./execution-context";
import { executeAiProposal, executeEnrichment } from "../automation/nodes";

/** Errors leave the capability as bare codes (permanent) or `retryable:code`; see runtime-protocol. */
async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof AppError) throw new Error(error.retryable ? `${RETRYABLE_PREFIX}${error.code}` : error.code);
    throw error;
  }
}

const WAIT_KINDS = ["human_task", "wait_for_event"];
/** Kinds whose executeNode evaluates expressions, so their context is worth prefetching. */
const CONTEXT_KINDS = ["condition", "end", "start_linked_workflow", "delay_until", "send_message", "decision", "handoff", "action", "enrichment", "ai_proposal"];
const EFFECT_EXECUTORS: Partial<Record<string, (call: EffectCall) => Promise<EffectResult>>> = {
  send_message: sendWorkflowMessage,
  decision: recordWorkflowDecision,
  handoff: handoffWorkflowReport,
};

/** Delivery ids an effect's output names, to put back on the queue if its first enqueue was lost. */
function deliveryIdsOf(output: Record<string, unknown>): string[] {
  const ids = Array.isArray(output.deliveryIds) ? output.deliveryIds : typeof output.deliveryId === "string" ? [output.deliveryId] : [];
  return ids.filter((id): id is string => typeof id === "string");
}

export class WorkflowRuntimeCapability extends WorkerEntrypoint<Env, RuntimeProps> implements WorkflowRuntimeApi {
  private async authorize(input: RuntimeNodeRequest, kind?: string): Promise<{ run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; context?: ExpressionContext }> {
    // With the graph cached, the node's context reads ride along with the authorization query.
    const cachedNode = CONTEXT_KINDS.includes(input.nodeKind) ? graphIfCached(this.ctx.props.workflowVersionId)?.nodes.find((n) => n.id === input.nodeId) : undefined;
    let parts: ReturnType<typeof contextStatements>["parts"] = [];
    const { run, results } = await authorizedRunWith(this.env, this.ctx.props, input, (runId) => {
      if (!cachedNode) return [];
      const reads = contextStatements(this.env.DB, runId, cachedNode);
      parts = reads.parts;
      return reads.statements;
    });
    const node = authorizedNode(run, input.nodeId, kind ?? input.nodeKind);
    const branchKey = authorizedBranch(input.branchKey);
    const context = cachedNode && node === cachedNode ? assembleContext({ run, branchKey }, parts, results) : undefined;
    return { run, node, branchKey, ...(context ? { context } : {}) };
  }

  private call(run: AuthorizedRun, node: WorkflowNodeV1, branchKey: string, context?: ExpressionContext): NodeCall {
    return { env: this.env, ctx: this.ctx, run, node, branchKey, ...(context ? { preloaded: context } : {}) };
  }

  /** Executes one node that needs no wait; delay kinds are prepared with `input.prepare`. */
  async executeNode(input: RuntimeNodeRequest): Promise<NodeOutput> {
    return guard(async () => {
      const { run, node, branchKey, context } = await this.authorize(input);
      const stepId = stepRunId(run.id, node.id, branchKey);
      const call = this.call(run, node, branchKey, context);
      if (node.kind === "action") throw denied("runtime_method_denied");
      const isEffect = (EFFECT_KINDS as readonly string[]).includes(node.kind);
      const simulated = run.authorityMode === "shadow" && isEffect ? shadowSimulation(node) : null;
      if (!simulated && WAIT_KINDS.includes(node.kind)) throw denied("runtime_method_denied");
      if ((node.kind === "delay" || node.kind === "delay_until") && input.input?.prepare === true) {
        const prepared = await prepareDelay(call);
        const at = now();
        await this.env.DB.batch([
          stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "waiting", at }),
          runProgress(this.env.DB, run.id, node.id, "waiting", at),
          runtimeAudit(this.env.DB, run, { key: `step:${stepId}:delay_scheduled`, action: "workflow.delay_scheduled", details: { nodeId: node.id, branchKey, resumeAt: prepared.resumeAt }, at }),
        ]);
        return prepared;
      }
      let output: Record<string, unknown>;
      const extra: D1PreparedStatement[] = [];
      const effect = simulated ? undefined : EFFECT_EXECUTORS[node.kind];
      if (effect) {
        // An effect runs once: a repeated call returns what was recorded (and re-queues its deliveries).
        const recorded = await this.env.DB.prepare(`SELECT o.inline_json AS json FROM workflow_step_outputs o JOIN workflow_step_runs s ON s.id = o.step_run_id
          WHERE o.step_run_id = ?1 AND s.state = 'succeeded'`).bind(stepId).first<{ json: string }>();
        if (recorded) {
          const replayed = JSON.parse(recorded.json) as NodeOutput;
          await this.requeuePending(deliveryIdsOf(replayed));
          return replayed;
        }
        const result = await effect({ env: this.env, run, node, stepId, context: await loadWorkflowExecutionContext(this.env, call) });
        await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output: result.output, extra: result.statements });
        await enqueueDeliveries(this.env, result.deliveryIds);
        return result.output as NodeOutput;
      }
      if (simulated) output = simulated;
      else {
        switch (node.kind) {
          case "start":
            output = { port: "success" };
            break;
          case "join":
            output = { port: "success" };
            break;
          case "delay":
          case "delay_until":
            output = { port: "completed" };
            break;
          case "condition":
            output = await executeCondition(call);
            break;
          case "start_linked_workflow":
            output = await startLinkedWorkflow(call);
            break;
          case "enrichment":
            output = await executeEnrichment(call);
            break;
          case "ai_proposal":
            output = await executeAiProposal(call);
            break;
          case "end":
            output = await endOutput(call);
            extra.push(runSucceededStatement(this.env.DB, run.id, node.id, output, now()));
            break;
          default:
            throw executorUnavailable(node.kind);
        }
      }
      await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output, extra });
      return output as NodeOutput;
    });
  }

  private async requeuePending(deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    const { results } = await this.env.DB.prepare(`SELECT id FROM webhook_deliveries WHERE state = 'pending' AND id IN (SELECT value FROM json_each(?1))`)
      .bind(JSON.stringify(deliveryIds)).all<{ id: string }>();
    await enqueueDeliveries(this.env, results.map((row) => row.id));
  }

  /** Step and run wait while a proposal waits for approval or delivery. */
  private async parkOnAction(run: AuthorizedRun, node: WorkflowNodeV1, branchKey: string, stepId: string): Promise<void> {
    const at = now();
    await this.env.DB.batch([
      stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "waiting", at }),
      runProgress(this.env.DB, run.id, node.id, "waiting", at),
    ]);
  }

  /** Records a wait (and, for human_task, its task) before the kernel parks on waitForEvent. */
  async prepareWait(input: RuntimeWaitRequest): Promise<PreparedWait> {
    return guard(async () => {
      if (!WAIT_KINDS.includes(input.nodeKind)) throw denied("runtime_node_denied");
      const { run, node, branchKey } = await this.authorize(input);
      if (run.authorityMode === "shadow" && node.kind === "human_task") throw denied("shadow_human_wait_prohibited");
      return prepareWaitRecord(this.env, { run, node, branchKey, stepId: stepRunId(run.id, node.id, branchKey) });
    });
  }

  /** Closes a prepared wait with a recorded event (verified in D1) or its timeout. */
  async completeWait(input: RuntimeCompleteWaitRequest): Promise<NodeOutput> {
    return guard(async () => {
      const run = await authorizedRun(this.env, this.ctx.props, input);
      const node = authorizedNode(run, input.nodeId);
      if (!WAIT_KINDS.includes(node.kind)) throw denied("runtime_wait_node_denied");
      const branchKey = authorizedBranch(input.branchKey);
      const stepId = stepRunId(run.id, node.id, branchKey);
      const completion = await completeWaitStatements(this.env, { run, node, stepId, eventResult: input.eventResult });
      if (completion.replay) return completion.output;
      await recordStepResult(this.env.DB, {
        run, node, branchKey, stepId, output: completion.output, state: completion.timedOut ? "timed_out" : "succeeded", extra: completion.statements,
      });
      return completion.output;
    });
  }

  /** `off` refuses, `shadow` simulates, `assisted` proposes, `autonomous` delivers unless the type needs approval. */
  async prepareAction(input: RuntimeActionRequest): Promise<ActionProgress> {
    return guard(async () => {
      const { run, node, branchKey, context } = await this.authorize(input, "action");
      const stepId = stepRunId(run.id, node.id, branchKey);
      if (run.authorityMode === "off") throw new AppError("action_authority_insufficient", "Automation in mode off may not take actions.", { status: 403 });
      if (run.authorityMode === "shadow") {
        const output = shadowSimulation(node)!;
        await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output });
        return output as ActionProgress;
      }
      // The step row exists before the proposal that references it.
      await stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "running", at: now() }).run();
      const progress = await prepareWorkflowAction(this.env, { run, node, stepId, context: await loadWorkflowExecutionContext(this.env, { run, node, branchKey, ...(context ? { preloaded: context } : {}) }) });
      if (progress.port) await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output: progress });
      else await this.parkOnAction(run, node, branchKey, stepId);
      return progress;
    });
  }

  /** After an approval or delivery wait: the proposal's recorded state decides the port. */
  async completeAction(input: RuntimeCompleteActionRequest): Promise<ActionProgress> {
    return guard(async () => {
      const { run, node, branchKey } = await this.authorize(input, "action");
      const stepId = stepRunId(run.id, node.id, branchKey);
      const expected = `${stepId}:proposal`;
      if (cleanIdentifier(input.proposalId, "proposal_id", 500) !== expected) throw denied("action_proposal_denied");
      const progress = await completeWorkflowAction(this.env, { proposalId: expected, eventResult: input.eventResult });
      if (progress.port) await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output: progress });
      else await this.parkOnAction(run, node, branchKey, stepId);
      return progress;
    });
  }

  /** After retries: the node's error port, or the run goes to repair_required (and this throws). */
  async failNode(input: RuntimeFailureRequest): Promise<NodeOutput> {
    return guard(async () => {
      const { run, node, branchKey } = await this.authorize(input);
      const errorCode = cleanIdentifier(input.errorCode, "error_code", 100);
      const stepId = stepRunId(run.id, node.id, branchKey);
      if (node.errorPort) {
        const output = { port: node.errorPort, errorCode, exhausted: true };
        await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output, state: "failed", errorCode });
        return output;
      }
      const at = now();
      await this.env.DB.batch([
        stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "failed", errorCode, at }),
        this.env.DB.prepare(`
          UPDATE workflow_runs SET state = 'repair_required', error_code = ?2, error_summary = ?3, current_node_id = ?4,
            updated_at = ?5, revision = revision + 1
          WHERE id = ?1 AND state NOT IN ('succeeded', 'failed', 'terminated', 'superseded')
        `).bind(run.id, errorCode, `Node ${node.id} failed (${errorCode}) and declares no error port.`, node.id, at),
        runtimeAudit(this.env.DB, run, { key: `step:${stepId}:repair_required`, action: "workflow.run_repair_required", details: { nodeId: node.id, branchKey, errorCode }, at }),
      ]);
      throw denied("workflow_node_failure_unhandled");
    });
  }
}

