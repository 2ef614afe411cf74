// The kernel: the generic interpreter compiled into every workflow artifact. It runs inside the
// dynamic worker (untrusted, no network) and walks the graph with step.do / sleep / waitForEvent,
// asking env.RUNTIME to authorize and perform every node. It imports nothing from the host.
import { WorkerEntrypoint, WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep, type WorkflowStepConfig } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import {
  decodeBoundaryError,
  type ActionProgress,
  type Ahead,
  type FusedOutput,
  type KernelGraph,
  type KernelNode,
  type KernelParams,
  type KernelStartParams,
  type NodeOutput,
  type PreparedDelay,
  type PreparedWait,
  type WaitResult,
  type WorkflowRuntimeApi,
} from "../runtime-protocol";

// Injected by the compiler as the module's first statement: the graph of this version.
declare const GRAPH: KernelGraph;

interface KernelEnv {
  RUNTIME: WorkflowRuntimeApi;
  WORKFLOWS: Workflow<KernelParams>;
}

const DEFAULT_RETRIES = 2;
const DEFAULT_TIMEOUT_SECONDS = 300;
/** Approval, then delivery, with room for a spurious wake-up or two. */
const MAX_ACTION_ROUNDS = 6;

/** The entrypoint the host calls to create this version's Workflows instance for a run. */
export default class WorkflowStarter extends WorkerEntrypoint<KernelEnv> {
  async start(params: KernelStartParams): Promise<{ id: string }> {
    const instance = await this.env.WORKFLOWS.create({ id: params.instanceId, params: { runId: params.runId, authorityMode: params.authorityMode } });
    return { id: await instance.id };
  }
}

export class TenantWorkflow extends WorkflowEntrypoint<KernelEnv, KernelParams> {
  override async run(event: Readonly<WorkflowEvent<KernelParams>>, step: WorkflowStep): Promise<unknown> {
    const walker = new GraphWalker(this.env.RUNTIME, step, event.payload);
    return walker.run();
  }
}

class GraphWalker {
  private readonly nodes = new Map<string, KernelNode>();
  private readonly outgoing = new Map<string, string[]>();
  private readonly fuses = GRAPH.nodes.some((node) => node.fuse === true);

  constructor(
    private readonly runtime: WorkflowRuntimeApi,
    private readonly step: WorkflowStep,
    private readonly params: KernelParams,
  ) {
    for (const node of GRAPH.nodes) this.nodes.set(node.id, node);
    for (const edge of GRAPH.edges) {
      const key = `${edge.from.nodeId}:${edge.from.port}`;
      this.outgoing.set(key, [...(this.outgoing.get(key) ?? []), edge.to.nodeId]);
    }
  }

  async run(): Promise<unknown> {
    const start = GRAPH.nodes.find((node) => node.kind === "start");
    if (!start) throw new NonRetryableError("workflow_graph.invalid");
    return this.walk(start.id, "", null);
  }

  /** Follows one path until it reaches `stopAt` (its fork's join) or an end node. */
  private async walk(fromId: string, branchKey: string, stopAt: string | null): Promise<unknown> {
    let nodeId = fromId;
    // Where the host walked on in its last answer (protocol 4), for the node the walk reaches next.
    let ahead: Ahead | undefined;
    for (;;) {
      if (nodeId === stopAt) return null;
      const head = this.nodes.get(nodeId);
      if (!head) throw new NonRetryableError("workflow_graph.invalid");
      const carried = ahead?.head === nodeId ? ahead : undefined;
      // A fused group ends where the host says (the last node it ran); the walk continues from there.
      const { node, output } = carried ? await this.resume(head, branchKey, carried) : head.fuse ? await this.executeFused(head, branchKey) : { node: head, output: await this.execute(head, branchKey) };
      ahead = output.ahead;
      if (node.kind === "end") return output;
      const targets = this.outgoing.get(`${node.id}:${output.port}`) ?? [];
      if (targets.length === 0) throw new NonRetryableError("workflow.port_unconnected");
      if (targets.length === 1) {
        nodeId = targets[0]!;
        continue;
      }
      const join = GRAPH.plan.forkJoins[`${node.id}:${output.port}`];
      if (!join) throw new NonRetryableError("workflow.fork_unplanned");
      await Promise.all(targets.map((target) => this.walk(target, branchKey ? `${branchKey}.${target}` : target, join)));
      nodeId = join;
    }
  }

  private base(node: KernelNode, branchKey: string): string {
    return `${node.id}:${branchKey || "main"}:1`;
  }

  private request(node: KernelNode, branchKey: string) {
    return {
      runId: this.params.runId,
      nodeId: node.id,
      nodeKind: node.kind,
      authorityMode: this.params.authorityMode,
      // A version that fuses (steps "fused") lets the host walk on into its groups; per_node keeps one step per node.
      ...(this.fuses ? { walk: true } : {}),
      ...(branchKey ? { branchKey } : {}),
    };
  }

  /** Goes on where the host walked to: a group it ran, or a wait or action it prepared. */
  private async resume(head: KernelNode, branchKey: string, ahead: Ahead): Promise<{ node: KernelNode; output: NodeOutput }> {
    if (ahead.port !== undefined) {
      const node = this.nodes.get(ahead.nodeId);
      if (!node) throw new NonRetryableError("workflow_graph.invalid");
      return { node, output: { port: ahead.port, ...(ahead.onward ? { ahead: ahead.onward } : {}) } };
    }
    if (ahead.nodeId !== head.id || (!ahead.wait && !ahead.action)) throw new NonRetryableError("workflow.ahead_invalid");
    return { node: head, output: await this.execute(head, branchKey, ahead) };
  }

  private stepConfig(node: KernelNode): WorkflowStepConfig {
    const policy = node.timeoutPolicy ?? {};
    return {
      retries: { limit: policy.retries ?? DEFAULT_RETRIES, delay: "1 second", backoff: "exponential" },
      timeout: `${policy.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS} seconds`,
    };
  }

  /** step.do where a permanent host error is not retried. */
  private doStep<T>(name: string, node: KernelNode, work: () => Promise<T>): Promise<T> {
    return this.step.do(name, this.stepConfig(node), async () => {
      try {
        return (await work()) as never;
      } catch (error) {
        const decoded = decodeBoundaryError(error);
        if (decoded.permanent) throw new NonRetryableError(decoded.code);
        throw error;
      }
    }) as Promise<T>;
  }

  /** Runs a node's steps (from the prepared wait or action the host walked to); a failure after retries goes to the node's error port via failNode. */
  private async execute(node: KernelNode, branchKey: string, ahead?: Ahead): Promise<NodeOutput> {
    const base = this.base(node, branchKey);
    try {
      return await this.executeSteps(node, branchKey, base, ahead);
    } catch (error) {
      const errorCode = decodeBoundaryError(error).code;
      // failNode decides: the error port's output, or repair_required (it then throws, ending the run).
      return this.step.do(`${base}:fail`, { retries: { limit: 2, delay: "1 second", backoff: "exponential" } }, async () => {
        try {
          return (await this.runtime.failNode({ ...this.request(node, branchKey), errorCode })) as never;
        } catch (failure) {
          const decoded = decodeBoundaryError(failure);
          throw new NonRetryableError(decoded.permanent ? decoded.code : "workflow.node_failed");
        }
      }) as Promise<NodeOutput>;
    }
  }

  /** One step and one capability call for the group the host computes from `head`; failFused after its retries. */
  private async executeFused(head: KernelNode, branchKey: string): Promise<{ node: KernelNode; output: NodeOutput }> {
    const base = this.base(head, branchKey);
    let result: FusedOutput;
    try {
      result = await this.doStep(`${base}:fused`, head, () => this.runtime.executeFused(this.request(head, branchKey)));
    } catch (error) {
      const errorCode = decodeBoundaryError(error).code;
      result = (await this.step.do(`${base}:fused:fail`, { retries: { limit: 2, delay: "1 second", backoff: "exponential" } }, async () => {
        try {
          return (await this.runtime.failFused({ ...this.request(head, branchKey), errorCode })) as never;
        } catch (failure) {
          const decoded = decodeBoundaryError(failure);
          throw new NonRetryableError(decoded.permanent ? decoded.code : "workflow.node_failed");
        }
      })) as FusedOutput;
    }
    const node = this.nodes.get(result.nodeId);
    if (!node) throw new NonRetryableError("workflow_graph.invalid");
    return { node, output: { port: result.port, ...(result.ahead ? { ahead: result.ahead } : {}) } };
  }

  /** The kernel knows each node's protocol, not its kind: the host decides what a kind does. */
  private async executeSteps(node: KernelNode, branchKey: string, base: string, ahead?: Ahead): Promise<NodeOutput> {
    const request = this.request(node, branchKey);
    const protocol = this.params.authorityMode === "shadow" && node.effect ? "step" : node.protocol;
    if (ahead?.wait && protocol === "wait") {
      const eventResult = await this.waitFor(`${base}:wait`, ahead.wait.eventType, ahead.wait.timeoutMs);
      return this.doStep(base, node, () => this.runtime.completeWait({ ...request, eventResult }));
    }
    if (ahead?.action && protocol === "action") return this.executeAction(node, branchKey, base, ahead.action);
    if (ahead) throw new NonRetryableError("workflow.ahead_invalid");
    switch (protocol) {
      case "delay": {
        const prepared = await this.doStep(`${base}:prepare`, node, () => this.runtime.executeNode({ ...request, input: { prepare: true } }) as Promise<PreparedDelay>);
        await this.step.sleepUntil(`${base}:sleep`, new Date(prepared.resumeAt));
        return this.doStep(base, node, () => this.runtime.executeNode(request));
      }
      case "wait": {
        const prepared = await this.doStep(`${base}:prepare`, node, () => this.runtime.prepareWait(request) as Promise<PreparedWait>);
        const eventResult = await this.waitFor(`${base}:wait`, prepared.eventType, prepared.timeoutMs);
        return this.doStep(base, node, () => this.runtime.completeWait({ ...request, eventResult }));
      }
      case "action":
        return this.executeAction(node, branchKey, base);
      default:
        return this.doStep(base, node, () => this.runtime.executeNode(request));
    }
  }

  private async waitFor(name: string, type: string, timeoutMs: number): Promise<WaitResult> {
    try {
      const event = await this.step.waitForEvent<{ eventId?: string }>(name, { type, timeout: timeoutMs });
      return { status: "received", event: event.payload };
    } catch {
      // waitForEvent rejects only when its timeout elapses; the host re-checks the wait on completion.
      return { status: "timed_out" };
    }
  }

  /** prepareAction, then waits (approval, delivery) each closed by completeAction until a port is known. */
  private async executeAction(node: KernelNode, branchKey: string, base: string, prepared?: ActionProgress): Promise<NodeOutput> {
    const request = this.request(node, branchKey);
    let progress = prepared ?? (await this.doStep(`${base}:prepare`, node, () => this.runtime.prepareAction(request) as Promise<ActionProgress>));
    for (let round = 1; !progress.port; round++) {
      const { proposalId, eventType, timeoutMs } = progress;
      if (round > MAX_ACTION_ROUNDS || !proposalId || !eventType || !timeoutMs) throw new NonRetryableError("action.progress_invalid");
      const eventResult = await this.waitFor(`${base}:wait:${round}`, eventType, timeoutMs);
      progress = await this.doStep(`${base}:complete:${round}`, node, () => this.runtime.completeAction({ ...request, proposalId, eventResult }) as Promise<ActionProgress>);
    }
    return progress;
  }
}
