// WorkflowRuntimeCapability: the only door from a workflow sandbox into the platform. Every call is
// authorized against D1 (run ↔ version ↔ artifact, authority mode, node and kind, run not terminal,
// identifiers) and its effects are written idempotently, with their audit event, in one batch.
import { WorkerEntrypoint } from "cloudflare:workers";
import { AppError } from "../errors";
import { actionTypeJsonSql, enqueueDeliveries, completeWorkflowAction, foldedActionType, prepareWorkflowAction, proposalIdOf, proposalJsonSql, type ProposalRow } from "../enforcement";
import { findQueueJsonSql, REPORT_SUMMARY_BY_RUN_JSON_SQL, sealPersonalData, type QueueRow } from "../cases";
import { openView } from "./content-access";
import { assembleContext, contextStatements, loadNodeContext, nodeReads, nodeReadsContent, type ContextReads, type LoadedContext } from "./execution-context";
import { kindOf, shadowSimulation } from "./kinds/descriptors";
import { EXECUTORS, executorUnavailable, type NodeCall } from "./kinds/executors";
import { executeFusedGroup, failFusedGroup } from "./runtime-fused";
import { forKernel, guard, progressForKernel, type CallScope } from "./runtime-boundary";
import { recordAndWalk, walkFrom } from "./runtime-ahead";
import { recordNodeFailure } from "./runtime-fail";
import type {
  ActionProgress,
  FusedOutput,
  NodeOutput,
  PreparedWait,
  RuntimeActionRequest,
  RuntimeCompleteActionRequest,
  RuntimeCompleteWaitRequest,
  RuntimeFailureRequest,
  RuntimeNodeRequest,
  RuntimeWaitRequest,
  WorkflowRuntimeApi,
} from "./runtime-protocol";
import { authorizedBranch, authorizedNode, authorizedRunFolded, authorizedRunWith, cleanIdentifier, denied, graphIfCached, stepRunId, type AuthorizedRun, type FoldedReads, type RunFolds, type RuntimeProps } from "./runtime-authorize";
import { branchAllowed, predecessorExitsStatement, predecessorIds, reachedBy, type RecordedExit } from "./run-plan";
import { FINISHED_STEP_STATES, now, recordedStepStatement, recordStepResult, runProgress, runtimeAudit, stepStartedStatement, stepUpsert, type RecordedStep, type StepResultInput } from "./runtime-records";
import { completeWaitStatements, prepareWaitRecord } from "./runtime-waits";
import type { WorkflowNodeV1 } from "./types";

/** How long a replayed (already finished) wait parks before completeWait answers from its record. */
const REPLAYED_WAIT_MS = 1_000;

const isWait = (node: WorkflowNodeV1) => kindOf(node.kind)?.protocol === "wait";

/** A claimed identifier if well-formed, else undefined: a read keyed by it is folded into authorization, whose own checks refuse it in their order. */
function wellFormed(check: () => string): string | undefined {
  try {
    return check();
  } catch {
    return undefined;
  }
}

/** Delivery ids an effect's output names, to put back on the queue if its first enqueue was lost. */
function deliveryIdsOf(output: Record<string, unknown>): string[] {
  const ids = Array.isArray(output.deliveryIds) ? output.deliveryIds : typeof output.deliveryId === "string" ? [output.deliveryId] : [];
  return ids.filter((id): id is string => typeof id === "string");
}

export class WorkflowRuntimeCapability extends WorkerEntrypoint<Env, RuntimeProps> implements WorkflowRuntimeApi {
  /**
   * Authorizes the call; with `withContext`, also loads the node's expression context (read in the
   * same round trip as authorization when the version's graph is cached). Content opened for it is
   * recorded by `scope.pending`, written with the step's record or, if the call fails, on its own.
   */
  private async authorize(
    input: RuntimeNodeRequest,
    scope: CallScope,
    options: { kind?: string; withContext?: boolean; reached?: boolean; extra?: (claimed: WorkflowNodeV1) => RunFolds["extra"]; more?: (claimed: WorkflowNodeV1) => RunFolds | null } = {},
  ): Promise<{ run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; loaded?: LoadedContext; recorded?: RecordedStep; extra?: string | null; folded?: FoldedReads }> {
    const descriptor = kindOf(input.nodeKind);
    // A simulated effect evaluates nothing, so it reads nothing.
    const wantsContext = options.withContext === true && descriptor?.readsContext === true && !(input.authorityMode === "shadow" && descriptor.shadow);
    const checkReached = options.reached !== false;
    const cachedGraph = graphIfCached(this.ctx.props.workflowVersionId);
    const cachedNode = cachedGraph?.nodes.find((n) => n.id === input.nodeId);
    let reads: ContextReads | undefined;
    // With the graph cached, the predecessors' exits and the node's own step are read in the run's
    // statement, and the context's reads in the same batch; the node is checked against the
    // claim below, and the folded reads are used only if it is the node they were read for.
    const claimedBranch = wellFormed(() => authorizedBranch(input.branchKey));
    const folds: RunFolds = checkReached && cachedNode && cachedGraph && claimedBranch !== undefined ? { exitsOf: predecessorIds(cachedGraph, cachedNode), step: { nodeId: cachedNode.id, branchKey: claimedBranch } } : {};
    // What the method reads next, keyed by the claimed (cached) node; used only if that node is authorized.
    const extra = cachedNode && options.extra ? options.extra(cachedNode) : undefined;
    if (extra) folds.extra = extra;
    const more = cachedNode && options.more ? options.more(cachedNode) : null;
    if (more) Object.assign(folds, more);
    // The context's report is read in the run's statement too.
    if (cachedNode && cachedGraph && wantsContext && nodeReads(cachedNode).report) folds.report = REPORT_SUMMARY_BY_RUN_JSON_SQL;
    const { run, folded, results } = await authorizedRunWith(this.env, this.ctx.props, input, folds, (runId) => {
      if (!cachedNode || !cachedGraph || !wantsContext) return [];
      reads = contextStatements(this.env.DB, runId, cachedNode, cachedGraph, { foldReport: folds.report !== undefined });
      return reads.statements;
    });
    const node = authorizedNode(run, input.nodeId, options.kind ?? input.nodeKind);
    const branchKey = authorizedBranch(input.branchKey);
    // The kernel's control flow is a claim: the branch must be one the graph's plan gives the node,
    // and the node must follow from what the run has recorded.
    if (!branchAllowed(run.graph, node, branchKey)) throw denied("runtime.branch_denied");
    Object.assign(scope, { run, node, branchKey });
    const prefetched = cachedNode === node;
    const extraRead = { ...(prefetched && extra ? { extra: folded.extra ?? null } : {}), ...(prefetched && more ? { folded } : {}) };
    let recorded: RecordedStep | undefined;
    if (checkReached) {
      const [exits, own] =
        prefetched && folded.exits
          ? [folded.exits, folded.step]
          : await this.env.DB.batch<Record<string, unknown>>([predecessorExitsStatement(this.env.DB, run.id, run.graph, node), recordedStepStatement(this.env.DB, run.id, node.id, branchKey)]).then(
              ([a, b]) => [a!.results as unknown as RecordedExit[], b!.results[0] as RecordedStep | undefined] as const,
            );
      if (!reachedBy(run.graph, node, branchKey, exits)) throw denied("runtime.node_not_reached");
      recorded = own;
    }
    // A finished step is answered from its record (see executeNode), so nothing is opened for it.
    const finished = recorded?.json != null && FINISHED_STEP_STATES.includes(recorded.state);
    if (!wantsContext || finished) return { run, node, branchKey, ...(recorded ? { recorded } : {}), ...extraRead };
    const loaded = reads && prefetched ? await assembleContext(this.env, { run, node, branchKey }, reads, results, folded.report) : await loadNodeContext(this.env, { run, node, branchKey });
    scope.pending = loaded.statements;
    return { run, node, branchKey, loaded, ...(recorded ? { recorded } : {}), ...extraRead };
  }

  private call(run: AuthorizedRun, node: WorkflowNodeV1, branchKey: string, loaded?: LoadedContext): NodeCall {
    return {
      env: this.env,
      ctx: this.ctx,
      run,
      node,
      branchKey,
      stepId: stepRunId(run.id, node.id, branchKey),
      readsContent: nodeReadsContent(run.graph, node),
      ...(loaded ? { preloaded: loaded.context } : {}),
    };
  }

  /** The output as stored: its open view, and the whole output sealed when the view holds part of it back. */
  private async stored(call: NodeCall, output: Record<string, unknown>): Promise<{ output: Record<string, unknown>; sealed: string | null }> {
    const view = openView(call.node, call.readsContent === true, output);
    if (!view.sealed) return { output, sealed: null };
    const { sealed } = await sealPersonalData(this.env, call.run.installationId, `step_output:${call.stepId}`, output);
    return { output: view.open, sealed };
  }

  /** Executes one node of the `step` protocol (or a simulated effect); `delay` kinds are prepared with `input.prepare`. */
  async executeNode(input: RuntimeNodeRequest): Promise<NodeOutput> {
    const scope: CallScope = {};
    return guard(this.env.DB, scope, async () => {
      const { run, node, branchKey, loaded, recorded } = await this.authorize(input, scope, { withContext: kindOf(input.nodeKind)?.protocol !== "delay" || input.input?.prepare === true });
      const call = this.call(run, node, branchKey, loaded);
      const { stepId } = call;
      const descriptor = kindOf(node.kind)!;
      const executor = EXECUTORS[node.kind];
      const preparing = descriptor.protocol === "delay" && input.input?.prepare === true;
      // A step the host already finished answers with what it recorded (a retry after a lost answer
      // must not take another port, and an effect runs once; its deliveries are queued again).
      // A finished delay (replayed by a repaired run's new instance) does not wait again.
      if (preparing && recorded?.json && FINISHED_STEP_STATES.includes(recorded.state)) {
        scope.pending = [];
        return { port: "completed", resumeAt: now(), prepared: true } as NodeOutput;
      }
      if (!preparing && recorded?.json && FINISHED_STEP_STATES.includes(recorded.state)) {
        const replayed = JSON.parse(recorded.json) as NodeOutput;
        if (executor.once) await this.requeuePending(deliveryIdsOf(replayed));
        scope.pending = [];
        return forKernel(replayed);
      }
      const simulated = run.authorityMode === "shadow" ? shadowSimulation(node) : null;
      if (simulated) {
        await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output: simulated });
        return forKernel(simulated);
      }
      if (descriptor.protocol === "wait" || descriptor.protocol === "action") throw denied("runtime.method_denied");
      if (preparing) {
        const prepared = await executor.prepare!(call);
        const at = now();
        await this.env.DB.batch([
          stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "waiting", at }),
          runProgress(this.env.DB, run.id, node.id, "waiting", at),
          runtimeAudit(this.env.DB, run, { key: `step:${stepId}:delay_scheduled`, action: "workflow.delay_scheduled", details: { nodeId: node.id, branchKey, resumeAt: prepared.resumeAt }, at }),
        ]);
        return prepared;
      }
      if (!executor.execute) throw executorUnavailable(node.kind);
      const result = await executor.execute(call);
      const stored = await this.stored(call, result.output);
      await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output: stored.output, sealed: stored.sealed, extra: [...(result.statements ?? []), ...(scope.pending ?? [])] });
      scope.pending = [];
      if (result.deliveryIds?.length) await enqueueDeliveries(this.env, result.deliveryIds);
      return forKernel(result.output);
    });
  }

  private async requeuePending(deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    const { results } = await this.env.DB.prepare(`SELECT id FROM webhook_deliveries WHERE state = 'pending' AND id IN (SELECT value FROM json_each(?1))`).bind(JSON.stringify(deliveryIds)).all<{ id: string }>();
    await enqueueDeliveries(
      this.env,
      results.map((row) => row.id),
    );
  }

  /** What walking on from a claimed node reads (authorize's `more`). */
  private readonly walkFolds = (claimed: WorkflowNodeV1): RunFolds | null => walkFrom(this.ctx.props.workflowVersionId, claimed.id)?.folds ?? null;

  private recordAndWalk<T extends NodeOutput>(result: StepResultInput, folded: FoldedReads | undefined, extra: D1PreparedStatement[], answer: T): Promise<T> {
    return recordAndWalk({ env: this.env, ctx: this.ctx, props: this.ctx.props }, result, folded, extra, answer);
  }

  /** Step and run wait while a proposal waits for approval or delivery. */
  private async parkOnAction(run: AuthorizedRun, node: WorkflowNodeV1, branchKey: string, stepId: string): Promise<void> {
    const at = now();
    await this.env.DB.batch([stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "waiting", at }), runProgress(this.env.DB, run.id, node.id, "waiting", at)]);
  }

  /** Records a wait (and, for human_task, its task) before the kernel parks on waitForEvent. */
  async prepareWait(input: RuntimeWaitRequest): Promise<PreparedWait> {
    const scope: CallScope = {};
    return guard(this.env.DB, scope, async () => {
      if (kindOf(input.nodeKind)?.protocol !== "wait") throw denied("runtime.node_denied");
      if (input.authorityMode === "shadow" && kindOf(input.nodeKind)!.shadow) throw denied("runtime.shadow_human_wait_prohibited");
      // A human task's queue (by id or name) is read with the authorization.
      const queueOf = (claimed: WorkflowNodeV1): RunFolds["extra"] =>
        claimed.kind === "human_task" && typeof claimed.config.queue_id === "string" ? (param) => findQueueJsonSql("r.installation_id", param(claimed.config.queue_id)) : undefined;
      const { run, node, branchKey, loaded, recorded, extra } = await this.authorize(input, scope, { withContext: true, extra: queueOf });
      // A wait that already finished (a repaired run's new instance walking past it, or a wait a
      // person routed) is not waited for again: a short timeout, then completeWait answers from the record.
      if (recorded?.json && FINISHED_STEP_STATES.includes(recorded.state)) {
        scope.pending = [];
        return { eventType: "w_replayed", timeoutMs: REPLAYED_WAIT_MS };
      }
      const queue = extra === undefined ? {} : { queue: extra === null ? null : (JSON.parse(extra) as QueueRow) };
      const prepared = await prepareWaitRecord(this.env, { run, node, branchKey, stepId: stepRunId(run.id, node.id, branchKey), stepRecorded: recorded !== undefined, ...(loaded ? { loaded } : {}), ...queue });
      scope.pending = [];
      return prepared;
    });
  }

  /** Closes a prepared wait with a recorded event (verified in D1) or its timeout. */
  async completeWait(input: RuntimeCompleteWaitRequest): Promise<NodeOutput> {
    const scope: CallScope = {};
    return guard(this.env.DB, scope, async () => {
      // The wait's own step is read in the run's statement, keyed by the claimed (well-formed) node and branch.
      const claimedNode = wellFormed(() => cleanIdentifier(input.nodeId, "node_id", 100));
      const claimedBranch = wellFormed(() => authorizedBranch(input.branchKey));
      const claimedRun = wellFormed(() => cleanIdentifier(input.runId, "run_id"));
      const claimed = input.eventResult?.status === "received" ? (input.eventResult.event as { eventId?: unknown } | null) : null;
      const eventId = typeof claimed?.eventId === "string" ? claimed.eventId : null;
      // The step, its wait and the event the kernel names are read with the run, keyed by the claimed
      // (well-formed) run, node and branch; they are used only once those claims are authorized below.
      const folds: RunFolds =
        claimedRun !== undefined && claimedNode !== undefined && claimedBranch !== undefined ? { step: { nodeId: claimedNode, branchKey: claimedBranch }, wait: { stepId: stepRunId(claimedRun, claimedNode, claimedBranch), eventId } } : {};
      // What the group after the wait reads, for a kernel that follows the host's walk (runtime-ahead.ts).
      const walking = input.walk === true && claimedBranch === "" ? walkFrom(this.ctx.props.workflowVersionId, claimedNode) : null;
      if (walking) Object.assign(folds, walking.folds);
      const { run, folded } = await authorizedRunFolded(this.env, this.ctx.props, input, folds);
      const node = authorizedNode(run, input.nodeId);
      if (!isWait(node)) throw denied("runtime.wait_node_denied");
      const branchKey = authorizedBranch(input.branchKey);
      Object.assign(scope, { run, node, branchKey });
      const stepId = stepRunId(run.id, node.id, branchKey);
      const own = folded.step;
      if (own?.json && FINISHED_STEP_STATES.includes(own.state)) return forKernel(JSON.parse(own.json) as NodeOutput);
      const prefetched = folds.wait?.stepId === stepId ? { wait: folded.wait, event: folded.event, eventId } : undefined;
      const completion = await completeWaitStatements(this.env, { run, node, stepId, eventResult: input.eventResult, ...(prefetched ? { prefetched } : {}) });
      if (completion.replay) return forKernel(completion.output);
      const result = { run, node, branchKey, stepId, output: completion.output, state: completion.timedOut ? ("timed_out" as const) : ("succeeded" as const) };
      return this.recordAndWalk(result, walking?.node === node ? folded : undefined, completion.statements, forKernel(completion.output));
    });
  }

  /** `off` refuses, `shadow` simulates, `assisted` proposes, `autonomous` delivers unless the type needs approval. */
  async prepareAction(input: RuntimeActionRequest): Promise<ActionProgress> {
    const scope: CallScope = {};
    return guard(this.env.DB, scope, async () => {
      // The node's action type is read in the run's statement too, and used only if that node is authorized.
      const typeOf = (claimed: WorkflowNodeV1): RunFolds["extra"] => (claimed.kind === "action" ? (param) => actionTypeJsonSql(param(String(claimed.config.action_type))) : undefined);
      const walking = input.walk === true && (input.branchKey === undefined || input.branchKey === "");
      const { run, node, branchKey, loaded, recorded, extra, folded } = await this.authorize(input, scope, { kind: "action", withContext: true, extra: typeOf, ...(walking ? { more: this.walkFolds } : {}) });
      const stepId = stepRunId(run.id, node.id, branchKey);
      if (recorded?.port && FINISHED_STEP_STATES.includes(recorded.state)) return progressForKernel({ port: recorded.port, status: "recorded" });
      if (run.authorityMode === "off") throw new AppError("action.authority_insufficient", "Automation in mode off may not take actions.", { status: 403 });
      if (run.authorityMode === "shadow") {
        // Kernels of protocol 1 call prepareAction in shadow; later ones simulate through executeNode.
        const output = shadowSimulation(node)!;
        await recordStepResult(this.env.DB, { run, node, branchKey, stepId, output });
        return progressForKernel(output as ActionProgress);
      }
      const context = loaded?.context ?? (await loadNodeContext(this.env, { run, node, branchKey })).context;
      // A new proposal waits, so its step's row (which it references) is written parked, with the run,
      // ahead of it in the batch that writes it. Should the call fail before that batch, the step is
      // still recorded as started (guard writes scope.pending), so failNode takes the error port.
      const at = now();
      scope.pending = [...(scope.pending ?? []), stepStartedStatement(this.env.DB, { id: stepId, run, node, branchKey, at })];
      const { progress, parked } = await prepareWorkflowAction(this.env, {
        run,
        node,
        stepId,
        context,
        stepRecorded: recorded !== undefined,
        ...(extra === undefined ? {} : { typeRead: foldedActionType(extra) }),
        park: [stepUpsert(this.env.DB, { id: stepId, run, node, branchKey, state: "waiting", at })],
        parkRun: [runProgress(this.env.DB, run.id, node.id, "waiting", at)],
      });
      // Delivered at once (or refused): the action's port is known, and the host may walk on.
      if (progress.port) return this.recordAndWalk({ run, node, branchKey, stepId, output: progress }, walking ? folded : undefined, [], progressForKernel(progress));
      if (!parked) await this.parkOnAction(run, node, branchKey, stepId);
      return progressForKernel(progress);
    });
  }

  /** After an approval or delivery wait: the proposal's recorded state decides the port. */
  async completeAction(input: RuntimeCompleteActionRequest): Promise<ActionProgress> {
    const scope: CallScope = {};
    return guard(this.env.DB, scope, async () => {
      // The proposal the kernel names is read with the authorization, and used only if it is this step's.
      const claimed = wellFormed(() => cleanIdentifier(input.proposalId, "proposal_id", 500));
      const walking = input.walk === true && (input.branchKey === undefined || input.branchKey === "");
      const { run, node, branchKey, recorded, extra, folded } = await this.authorize(input, scope, {
        kind: "action",
        extra: () => (claimed === undefined ? undefined : (param) => proposalJsonSql(param(claimed))),
        ...(walking ? { more: this.walkFolds } : {}),
      });
      const stepId = stepRunId(run.id, node.id, branchKey);
      const expected = proposalIdOf(stepId);
      if (cleanIdentifier(input.proposalId, "proposal_id", 500) !== expected) throw denied("runtime.action_proposal_denied");
      // A repeat of a call that finished the step (its answer lost): the port it recorded, nothing written again.
      if (recorded?.port && FINISHED_STEP_STATES.includes(recorded.state)) return progressForKernel({ port: recorded.port, status: "recorded" });
      const prefetched = extra === undefined ? {} : { prefetched: extra === null ? null : (JSON.parse(extra) as ProposalRow) };
      const progress = await completeWorkflowAction(this.env, { proposalId: expected, eventResult: input.eventResult, ...prefetched });
      if (progress.port) return this.recordAndWalk({ run, node, branchKey, stepId, output: progress }, walking ? folded : undefined, [], progressForKernel(progress));
      await this.parkOnAction(run, node, branchKey, stepId);
      return progressForKernel(progress);
    });
  }

  /**
   * After retries: the node's error port, or the run goes to repair_required (and this throws;
   * runtime-fail.ts).
   */
  /** Protocol 3: the fused group the host computes from the named node, as one call (runtime-fused.ts). */
  async executeFused(input: RuntimeNodeRequest): Promise<FusedOutput> {
    const scope: CallScope = {};
    return guard(this.env.DB, scope, () => executeFusedGroup({ env: this.env, ctx: this.ctx, props: this.ctx.props }, input, scope));
  }

  /** Protocol 3: after a group's retries, its failing node's error port (or repair_required). */
  async failFused(input: RuntimeFailureRequest): Promise<FusedOutput> {
    return guard(this.env.DB, {}, () => failFusedGroup({ env: this.env, ctx: this.ctx, props: this.ctx.props }, input));
  }

  async failNode(input: RuntimeFailureRequest): Promise<NodeOutput> {
    return guard(this.env.DB, {}, async () => {
      const { run, node, branchKey, recorded: step } = await this.authorize(input, {});
      const errorCode = cleanIdentifier(input.errorCode, "error_code", 100);
      // A finished step stays as it finished: the kernel learns the port the host recorded.
      if (step?.port && FINISHED_STEP_STATES.includes(step.state)) return forKernel({ port: step.port });
      // A wait or an action fails only once it started (its prepare recorded the step, or the host's error did).
      const protocol = kindOf(node.kind)!.protocol;
      if ((protocol === "wait" || protocol === "action") && !step && run.authorityMode !== "shadow") throw denied("runtime.node_not_started");
      return recordNodeFailure(this.env, { run, node, branchKey, step, errorCode });
    });
  }
}
