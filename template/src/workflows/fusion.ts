// Fused steps: consecutive nodes that neither wait nor have effects run as one Workflows
// step and one capability call. This module is the one definition of what fuses, shared by the
// compiler (which marks such nodes in the artifact) and the host (which computes every group
// itself from the graph: the sandbox only names the node a group starts at). Pure; cached per
// parsed graph (versions are immutable).
import type { ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";

/** How a version runs its fusable nodes: `fused` (the default) or one Workflows step per node. */
export const STEP_MODES = ["fused", "per_node"] as const;
export type StepMode = (typeof STEP_MODES)[number];

/** At most this many nodes per group: one D1 batch stays far under D1's limits per invocation. */
export const MAX_FUSED_NODES = 100;

const FLOW_KINDS: ReadonlySet<string> = new Set(["start", "condition", "join", "end"]);

/**
 * Whether a node may run inside a fused group: flow nodes and built-in enrichment (a host
 * function, no sandbox, no egress), with the default step policy (a node with its own retries or
 * timeout keeps its own step, so those mean what they say).
 */
export function fusable(node: WorkflowNodeV1): boolean {
  if (node.timeoutPolicy !== undefined) return false;
  if (FLOW_KINDS.has(node.kind)) return true;
  return node.kind === "enrichment" && typeof node.config.component === "string" && node.config.component_version_id === undefined;
}

interface FusionPlan {
  /** Nodes a group may not enter (only start at): every fork's join, where a branch's walk stops. */
  joins: Set<string>;
  /** `nodeId:port` → its targets. */
  targets: Map<string, string[]>;
  byId: Map<string, WorkflowNodeV1>;
  /** head → every node a group starting there can reach (for one read of what they need). */
  regions: Map<string, WorkflowNodeV1[]>;
}

const plans = new WeakMap<ParsedWorkflowGraph, FusionPlan>();

function planOf(graph: ParsedWorkflowGraph): FusionPlan {
  const cached = plans.get(graph);
  if (cached) return cached;
  const targets = new Map<string, string[]>();
  for (const edge of graph.edges) {
    const key = `${edge.from.nodeId}:${edge.from.port}`;
    targets.set(key, [...(targets.get(key) ?? []), edge.to.nodeId]);
  }
  const plan: FusionPlan = { joins: new Set(Object.values(graph.plan.forkJoins)), targets, byId: new Map(graph.nodes.map((node) => [node.id, node])), regions: new Map() };
  plans.set(graph, plan);
  return plan;
}

/**
 * The node a group continues with after `node` left by `port`, or null where the group ends: at an
 * end node, a fork (several targets: the kernel starts the branches), a port without an edge, a
 * node that does not fuse, or a fork's join (the kernel's walk of a branch stops there).
 */
export function nextInGroup(graph: ParsedWorkflowGraph, node: WorkflowNodeV1, port: string): WorkflowNodeV1 | null {
  if (node.kind === "end") return null;
  const plan = planOf(graph);
  const targets = plan.targets.get(`${node.id}:${port}`) ?? [];
  if (targets.length !== 1) return null;
  const next = plan.byId.get(targets[0]!);
  if (!next || !fusable(next) || plan.joins.has(next.id)) return null;
  return next;
}

/** Every node a group starting at `head` may run (each port followed), `head` first. */
export function groupRegion(graph: ParsedWorkflowGraph, head: WorkflowNodeV1): WorkflowNodeV1[] {
  const plan = planOf(graph);
  const cached = plan.regions.get(head.id);
  if (cached) return cached;
  const region: WorkflowNodeV1[] = [];
  const seen = new Set<string>();
  const stack = [head];
  while (stack.length > 0 && region.length < MAX_FUSED_NODES * 4) {
    const node = stack.pop()!;
    if (seen.has(node.id)) continue;
    seen.add(node.id);
    region.push(node);
    const ports = new Set(graph.edges.filter((edge) => edge.from.nodeId === node.id).map((edge) => edge.from.port));
    for (const port of ports) {
      const next = nextInGroup(graph, node, port);
      if (next) stack.push(next);
    }
  }
  plan.regions.set(head.id, region);
  return region;
}
