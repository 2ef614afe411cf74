// What the host checks of the kernel's control flow (the kernel is untrusted, ARCHITECTURE.md §
// security boundary): the branch keys a node can run under, derived from the graph and its fork
// plan exactly as the kernel derives them, and whether a node is reached by what the run has
// recorded (an edge from a finished predecessor, on a related branch, through the port it took).
// Pure; cached per parsed graph (versions are immutable).
import type { ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import { STEP_OUTPUT as OUTPUT } from "./step-output";

export interface RunPlan {
  /** nodeId → every branch key it can run under ("" is the main branch). */
  branches: Map<string, Set<string>>;
  /** nodeId → the edges into it: predecessor and the port it leaves by. */
  predecessors: Map<string, Array<{ from: string; port: string }>>;
}

const plans = new WeakMap<ParsedWorkflowGraph, RunPlan>();

/** The branch keys of every node, walking as the kernel walks: a fork's targets get `parent.target`. */
export function runPlan(graph: ParsedWorkflowGraph): RunPlan {
  const cached = plans.get(graph);
  if (cached) return cached;
  const byId = new Map(graph.nodes.map((node) => [node.id, node]));
  const outgoing = new Map<string, Map<string, string[]>>();
  const predecessors = new Map<string, Array<{ from: string; port: string }>>();
  for (const edge of graph.edges) {
    const ports = outgoing.get(edge.from.nodeId) ?? new Map<string, string[]>();
    ports.set(edge.from.port, [...(ports.get(edge.from.port) ?? []), edge.to.nodeId]);
    outgoing.set(edge.from.nodeId, ports);
    predecessors.set(edge.to.nodeId, [...(predecessors.get(edge.to.nodeId) ?? []), { from: edge.from.nodeId, port: edge.from.port }]);
  }
  const branches = new Map<string, Set<string>>();
  const seen = new Set<string>();
  // Iterative, so a long chain cannot overflow the stack.
  const stack: Array<[string, string, string | null]> = [];
  const start = graph.nodes.find((node) => node.kind === "start");
  if (start) stack.push([start.id, "", null]);
  while (stack.length > 0) {
    const [nodeId, branchKey, stopAt] = stack.pop()!;
    if (nodeId === stopAt) continue;
    const visit = `${nodeId}\u0000${branchKey}\u0000${stopAt ?? ""}`;
    if (seen.has(visit)) continue;
    seen.add(visit);
    const keys = branches.get(nodeId) ?? new Set<string>();
    keys.add(branchKey);
    branches.set(nodeId, keys);
    if (byId.get(nodeId)?.kind === "end") continue;
    for (const [port, targets] of outgoing.get(nodeId) ?? []) {
      if (targets.length === 1) {
        stack.push([targets[0]!, branchKey, stopAt]);
        continue;
      }
      const join = graph.plan.forkJoins[`${nodeId}:${port}`];
      if (!join) continue;
      for (const target of targets) stack.push([target, branchKey ? `${branchKey}.${target}` : target, join]);
      stack.push([join, branchKey, stopAt]);
    }
  }
  const plan = { branches, predecessors };
  plans.set(graph, plan);
  return plan;
}

/** Whether the graph lets `node` run under `branchKey` (an invented key is how an effect would repeat). */
export function branchAllowed(graph: ParsedWorkflowGraph, node: WorkflowNodeV1, branchKey: string): boolean {
  return runPlan(graph).branches.get(node.id)?.has(branchKey) ?? false;
}

const parentOf = (key: string): string => (key.includes(".") ? key.slice(0, key.lastIndexOf(".")) : "");

/** A finished step of a predecessor, as recorded by the host. */
export interface RecordedExit {
  nodeId: string;
  branchKey: string;
  port: string | null;
}

/**
 * Whether what the run has recorded leads to `node` on `branchKey`: a predecessor finished and
 * left by the port of an edge into it, on the same branch, on the parent branch (the node opens a
 * branch of a fork) or on a child branch (the node is the fork's join).
 */
export function reachedBy(graph: ParsedWorkflowGraph, node: WorkflowNodeV1, branchKey: string, recorded: readonly RecordedExit[]): boolean {
  if (node.kind === "start") return true;
  const edges = runPlan(graph).predecessors.get(node.id) ?? [];
  return recorded.some(
    (exit) =>
      edges.some((edge) => edge.from === exit.nodeId && edge.port === exit.port) &&
      (exit.branchKey === branchKey || branchKey === (exit.branchKey ? `${exit.branchKey}.${node.id}` : node.id) || (exit.branchKey !== "" && parentOf(exit.branchKey) === branchKey)),
  );
}

/** The nodes with an edge into `node` (whose finished steps say whether it is reached). */
export function predecessorIds(graph: ParsedWorkflowGraph, node: WorkflowNodeV1): string[] {
  return [...new Set((runPlan(graph).predecessors.get(node.id) ?? []).map((edge) => edge.from))];
}

/** The finished steps of a node's predecessors (statement keyed by run id, for the authorization batch). */
export function predecessorExitsStatement(db: D1Database, runId: string, graph: ParsedWorkflowGraph, node: WorkflowNodeV1): D1PreparedStatement {
  const from = predecessorIds(graph, node);
  return db
    .prepare(`
    SELECT s.node_id AS nodeId, s.branch_key AS branchKey, json_extract(${OUTPUT.json}, '$.port') AS port
    FROM workflow_step_runs s ${OUTPUT.join}
    WHERE ${OUTPUT.json} IS NOT NULL AND s.run_id = ?1 AND s.node_id IN (SELECT value FROM json_each(?2)) AND s.state IN ('succeeded', 'failed', 'timed_out')`)
    .bind(runId, JSON.stringify(from));
}
