// The host walker: evaluates a graph inside the Worker, without a Workflows instance, with the
// very executors the runtime capability calls (kinds/executors.ts). It walks like the kernel
// (kernel/kernel.ts): one path per port, forks run as concurrent branches until their join, a
// finished node's outputs are read by later nodes under the same branch rule and the same
// sealing rule (a node that may not read content sees only the open view of a reader's output).
//
// Used for fast backtests (automation/backtest-fast.ts): authority is always `shadow`, so every
// effect is simulated exactly as in a durable shadow run, and nothing is written by the nodes.
// A node that waits for the outside world (a person's task, an external event) ends the walk with
// `needs_review`: what happens next depends on what someone answers. A delay is not waited for: a
// backtest asks what the version decides, not when.
import { AppError } from "../errors";
import { openView } from "./content-access";
import { nodeReads, nodeReadsContent, relatedAccountsOfReport } from "./execution-context";
import { semanticsOf } from "./expression-semantics";
import { evaluateInputMapping, type ExpressionContext, type RelatedAccounts } from "./expressions";
import { kindOf, shadowSimulation } from "./kinds/descriptors";
import { EXECUTORS, executorUnavailable, type NodeCall } from "./kinds/executors";
import type { AuthorizedRun } from "./runtime-authorize";
import { stepRunId } from "./runtime-authorize";
import type { JsonValue, WorkflowNodeV1 } from "./types";

export type WalkState = "completed" | "needs_review" | "failed";

export interface WalkResult {
  state: WalkState;
  /** What the version proposes: its last (simulated) decision's outcome, else the end node's terminal code. */
  outcome: string | null;
  terminalCode: string | null;
  /** The node the walk ended at (the end node, the waiting node, the failed node). */
  stoppedAt: string | null;
  errorCode: string | null;
  /** Nodes in the order they finished. */
  path: string[];
}

export interface WalkInput {
  env: Env;
  ctx: ExecutionContext;
  /** The run the walk stands for (in a backtest, a synthetic id: no workflow_runs row exists). */
  run: AuthorizedRun;
  /** `report` in expressions (the summary); null when the run has no report. */
  report: JsonValue;
  /** `content` for the nodes that may read it; loaded only when one of them asks. */
  content: () => Promise<JsonValue>;
}

/** A finished node's output on one branch. */
export interface Finished {
  branchKey: string;
  /** What a node that may read content sees (opened on demand when it was read back sealed). */
  full: JsonValue | (() => Promise<JsonValue>);
  /** What every other node sees. */
  open: JsonValue;
}

const DEFAULT_RETRIES = 2;
const RETRY_DELAY_MS = 200;

/** True when `candidate` is the branch itself or one of its ancestors ("" is the main branch). */
function onBranchPath(candidate: string, branchKey: string): boolean {
  return candidate === "" || candidate === branchKey || branchKey.startsWith(`${candidate}.`);
}

/**
 * Finished nodes' outputs, chosen for a node's context exactly as the runtime's context loader
 * chooses recorded rows (execution-context.ts): where a node ran on several branches, the output
 * on this branch's path wins; a content reader sees the whole output, every other node the open view.
 * The fast backtests' walker and the runtime's fused groups (runtime-fused.ts) share it.
 */
export class StepOutputs {
  private readonly byNode = new Map<string, Finished[]>();

  add(nodeId: string, finished: Finished): void {
    this.byNode.set(nodeId, [...(this.byNode.get(nodeId) ?? []), finished]);
  }

  /** `steps` for a node that names `reads` (null: every step) on `branchKey`. */
  async pick(reads: Set<string> | null, branchKey: string, readsContent: boolean): Promise<Record<string, JsonValue>> {
    const steps: Record<string, JsonValue> = {};
    for (const [id, finished] of this.byNode) {
      if (reads !== null && !reads.has(id)) continue;
      let chosen: Finished | undefined;
      for (const candidate of finished) {
        if (!chosen || (!onBranchPath(chosen.branchKey, branchKey) && onBranchPath(candidate.branchKey, branchKey))) chosen = candidate;
      }
      if (!chosen) continue;
      steps[id] = readsContent ? (typeof chosen.full === "function" ? await chosen.full() : chosen.full) : chosen.open;
    }
    return steps;
  }
}

/** A node's expression context, in the shape the runtime's context loader builds. */
export function walkContext(run: AuthorizedRun, parts: { input: JsonValue; steps: Record<string, JsonValue>; report: JsonValue; event: JsonValue; content: JsonValue; readsContent: boolean; related?: RelatedAccounts }): ExpressionContext {
  return {
    input: parts.input,
    report: parts.report,
    run: { id: run.id, workflowVersionId: run.workflowVersionId, authorityMode: run.authorityMode },
    steps: parts.steps,
    event: parts.event,
    ...(parts.readsContent ? { content: parts.content } : {}),
    ...(parts.related ? { related: parts.related } : {}),
    semantics: semanticsOf(run.graph),
  };
}

/**
 * Whether a node of this kind stops a shadow walk: it waits for someone outside (a person's task,
 * an external event). A durable shadow run simulates a task as completed without asking anyone;
 * the walker says instead that the version sends the report to review.
 */
export function waitsInShadow(node: Pick<WorkflowNodeV1, "kind">): boolean {
  return kindOf(node.kind)?.protocol === "wait";
}

class Stop extends Error {
  constructor(
    readonly state: WalkState,
    readonly nodeId: string,
    readonly errorCode: string | null = null,
  ) {
    super(state);
  }
}

export class GraphWalk {
  private readonly nodes = new Map<string, WorkflowNodeV1>();
  private readonly outgoing = new Map<string, string[]>();
  private readonly outputs = new StepOutputs();
  private readonly path: string[] = [];
  private content: Promise<JsonValue> | null = null;
  private lastDecision: { outcome: string } | null = null;
  private ended: { nodeId: string; terminalCode: string } | null = null;
  /** The run's input, parsed once for every node's context. */
  private readonly runInput: JsonValue;

  constructor(private readonly input: WalkInput) {
    this.runInput = JSON.parse(input.run.inputJson) as JsonValue;
    for (const node of input.run.graph.nodes) this.nodes.set(node.id, node);
    for (const edge of input.run.graph.edges) {
      const key = `${edge.from.nodeId}:${edge.from.port}`;
      this.outgoing.set(key, [...(this.outgoing.get(key) ?? []), edge.to.nodeId]);
    }
  }

  async run(): Promise<WalkResult> {
    const start = this.input.run.graph.nodes.find((node) => node.kind === "start");
    if (!start) throw new AppError("workflow_graph.invalid", "The graph has no start node.");
    try {
      await this.walk(start.id, "", null);
    } catch (error) {
      if (!(error instanceof Stop)) throw error;
      return this.result(error.state, error.nodeId, error.errorCode);
    }
    return this.result("completed", this.ended?.nodeId ?? null, null);
  }

  private result(state: WalkState, stoppedAt: string | null, errorCode: string | null): WalkResult {
    const terminalCode = state === "completed" ? (this.ended?.terminalCode ?? null) : null;
    return {
      state,
      outcome: state === "completed" ? (this.lastDecision?.outcome ?? terminalCode) : null,
      terminalCode,
      stoppedAt,
      errorCode,
      path: [...this.path],
    };
  }

  /** Follows one path until it reaches `stopAt` (its fork's join) or an end node (as the kernel does). */
  private async walk(fromId: string, branchKey: string, stopAt: string | null): Promise<void> {
    let nodeId = fromId;
    for (;;) {
      if (nodeId === stopAt || this.ended) return;
      const node = this.nodes.get(nodeId);
      if (!node) throw new AppError("workflow_graph.invalid", `Node ${nodeId} is not in the graph.`);
      const port = await this.execute(node, branchKey);
      if (node.kind === "end") return;
      const targets = this.outgoing.get(`${node.id}:${port}`) ?? [];
      if (targets.length === 0) throw new Stop("failed", node.id, "workflow.port_unconnected");
      if (targets.length === 1) {
        nodeId = targets[0]!;
        continue;
      }
      const join = this.input.run.graph.plan.forkJoins[`${node.id}:${port}`];
      if (!join) throw new Stop("failed", node.id, "workflow.fork_unplanned");
      await Promise.all(targets.map((target) => this.walk(target, branchKey ? `${branchKey}.${target}` : target, join)));
      nodeId = join;
    }
  }

  /** The run's content: opened on the first read, then shared by every later reader. */
  private openContent(): Promise<JsonValue> {
    this.content ??= this.input.content();
    return this.content;
  }

  private related: Promise<RelatedAccounts> | undefined;

  /** The node's context: the outputs it names on its branch's path, `content` if it may read it. */
  private async context(node: WorkflowNodeV1, branchKey: string, readsContent: boolean): Promise<ExpressionContext> {
    const reads = nodeReads(node);
    const steps = await this.outputs.pick(reads.steps, branchKey, readsContent);
    const content = readsContent && reads.content ? await this.openContent() : null;
    // Related accounts as they are now (a backtest over past reports sees today's signals).
    // Read once per walk: every node of it that names `related` sees the same counts.
    if (reads.related) this.related ??= relatedAccountsOfReport(this.input.env.DB, this.input.run.installationId, this.input.run.reportId);
    const related = reads.related ? await this.related : undefined;
    return walkContext(this.input.run, { input: this.runInput, steps, report: reads.report ? this.input.report : null, event: null, content, readsContent, ...(related ? { related } : {}) });
  }

  /** One node: simulated (effects), stopped at (waits), passed (delays), or executed by its executor. */
  private async execute(node: WorkflowNodeV1, branchKey: string): Promise<string> {
    const descriptor = kindOf(node.kind);
    if (!descriptor) throw new Stop("failed", node.id, "node.kind_unknown");
    const readsContent = nodeReadsContent(this.input.run.graph, node);
    let output: Record<string, unknown>;
    const simulated = shadowSimulation(node);
    if (waitsInShadow(node)) {
      throw new Stop("needs_review", node.id);
    } else if (simulated) {
      output = simulated;
    } else if (descriptor.protocol === "delay") {
      output = { port: "completed" };
    } else if (node.kind === "end") {
      output = await this.end(node, branchKey, readsContent);
    } else {
      output = await this.attempt(node, branchKey, readsContent);
    }
    if (node.kind === "decision" && typeof output.outcome === "string") this.lastDecision = { outcome: output.outcome };
    const open = openView(node, readsContent, output).open;
    this.outputs.add(node.id, { branchKey, full: output as JsonValue, open: open as JsonValue });
    this.path.push(node.id);
    return String(output.port);
  }

  private async end(node: WorkflowNodeV1, branchKey: string, readsContent: boolean): Promise<Record<string, unknown>> {
    const terminalCode = typeof node.config.terminal_code === "string" ? node.config.terminal_code : "complete";
    this.ended ??= { nodeId: node.id, terminalCode };
    if (!node.inputMapping || Object.keys(node.inputMapping).length === 0) return { port: "terminal", terminalCode };
    return { port: "terminal", terminalCode, result: evaluateInputMapping(node.inputMapping, await this.context(node, branchKey, readsContent), node.id) };
  }

  /** The executor, retried like the kernel's step (transient errors only); then the error port or a failed walk. */
  private async attempt(node: WorkflowNodeV1, branchKey: string, readsContent: boolean): Promise<Record<string, unknown>> {
    const executor = EXECUTORS[node.kind];
    if (!executor.execute) throw new Stop("failed", node.id, executorUnavailable(node.kind).code);
    const retries = node.timeoutPolicy?.retries ?? DEFAULT_RETRIES;
    const { env, ctx, run } = this.input;
    for (let attempt = 0; ; attempt++) {
      try {
        const call: NodeCall = { env, ctx, run, node, branchKey, stepId: stepRunId(run.id, node.id, branchKey), readsContent, preloaded: await this.context(node, branchKey, readsContent) };
        return (await executor.execute(call)).output;
      } catch (error) {
        const permanent = error instanceof AppError && !error.retryable;
        if (!permanent && attempt < retries) {
          await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS * 2 ** attempt));
          continue;
        }
        const errorCode = error instanceof AppError ? error.code : "workflow.step_failed";
        if (node.errorPort) return { port: node.errorPort, errorCode, exhausted: true };
        throw new Stop("failed", node.id, errorCode);
      }
    }
  }
}

/** Walks the run's graph in shadow (see the module's comment). */
export function walkShadow(input: WalkInput): Promise<WalkResult> {
  if (input.run.authorityMode !== "shadow") throw new AppError("walker.authority_unsupported", "The host walker evaluates graphs in shadow only.", { status: 500 });
  return new GraphWalk(input).run();
}
