// The graph's shape beyond single nodes: topological order, cycles, reachability, the fork/join
// plan and branch-key lengths. Used by validation.ts; problems go into its collector.
import type { WorkflowEdgeV1, WorkflowNodeV1 } from "./types";

const MAX_BRANCH_KEY = 100;

export interface ProblemSink {
  add(path: string, code: string, message: string): void;
}

/** Kahn's algorithm: a topological order, or the nodes left on a cycle. */
export function topologicalOrder(nodes: WorkflowNodeV1[], edges: WorkflowEdgeV1[]): { order: string[]; cyclic: string[] } {
  const indegree = new Map(nodes.map((n) => [n.id, 0]));
  const next = new Map<string, string[]>(nodes.map((n) => [n.id, []]));
  for (const edge of edges) {
    indegree.set(edge.to.nodeId, indegree.get(edge.to.nodeId)! + 1);
    next.get(edge.from.nodeId)!.push(edge.to.nodeId);
  }
  const ready = nodes.filter((n) => indegree.get(n.id) === 0).map((n) => n.id);
  const order: string[] = [];
  while (ready.length > 0) {
    const id = ready.pop()!;
    order.push(id);
    for (const target of next.get(id)!) {
      const remaining = indegree.get(target)! - 1;
      indegree.set(target, remaining);
      if (remaining === 0) ready.push(target);
    }
  }
  return { order, cyclic: nodes.filter((n) => indegree.get(n.id)! > 0).map((n) => n.id) };
}

/**
 * One cycle among the nodes Kahn's algorithm left over (each has a predecessor among them, but
 * some only lie downstream of a cycle): walks predecessors until a node repeats. `edgeIndex` is
 * the first edge of that cycle in `edges`; `nodes` are its nodes in order.
 */
export function findCycle(cyclic: string[], edges: WorkflowEdgeV1[]): { edgeIndex: number; nodes: string[] } {
  const remaining = new Set(cyclic);
  const incoming = new Map<string, number>();
  edges.forEach((edge, i) => {
    if (remaining.has(edge.from.nodeId) && remaining.has(edge.to.nodeId) && !incoming.has(edge.to.nodeId)) incoming.set(edge.to.nodeId, i);
  });
  const visitedAt = new Map<string, number>();
  const trail: number[] = [];
  let id = cyclic[0]!;
  while (!visitedAt.has(id)) {
    visitedAt.set(id, trail.length);
    const edgeIndex = incoming.get(id)!;
    trail.push(edgeIndex);
    id = edges[edgeIndex]!.from.nodeId;
  }
  const cycle = trail.slice(visitedAt.get(id)).reverse();
  return { edgeIndex: Math.min(...cycle), nodes: cycle.map((i) => edges[i]!.from.nodeId) };
}

export function reachableFrom(startId: string, edges: WorkflowEdgeV1[]): Set<string> {
  const seen = new Set([startId]);
  const stack = [startId];
  while (stack.length > 0) {
    const id = stack.pop()!;
    for (const edge of edges) {
      if (edge.from.nodeId === id && !seen.has(edge.to.nodeId)) {
        seen.add(edge.to.nodeId);
        stack.push(edge.to.nodeId);
      }
    }
  }
  return seen;
}

/**
 * Matches each fork (a port with several edges) to the nearest join that every path of every
 * branch reaches: the first join in topological order that post-dominates all branch starts.
 */
export function planForks(nodes: Map<string, WorkflowNodeV1>, edges: WorkflowEdgeV1[], order: string[], problems: ProblemSink, pathOf: (nodeId: string) => string): Record<string, string> {
  const position = new Map(order.map((id, i) => [id, i]));
  const successors = new Map<string, string[]>([...nodes.keys()].map((id) => [id, []]));
  for (const edge of edges) successors.get(edge.from.nodeId)!.push(edge.to.nodeId);
  // Joins that lie on every path from a node to the end of the graph.
  const postJoins = new Map<string, Set<string>>();
  for (let i = order.length - 1; i >= 0; i--) {
    const id = order[i]!;
    const next = successors.get(id)!;
    const sets = next.map((target) => postJoins.get(target)!);
    const own = new Set<string>(sets.length === 0 ? [] : [...sets[0]!].filter((j) => sets.every((set) => set.has(j))));
    if (nodes.get(id)!.kind === "join") own.add(id);
    postJoins.set(id, own);
  }
  const forkJoins: Record<string, string> = {};
  const joinOwner = new Map<string, string>();
  const byPort = new Map<string, WorkflowEdgeV1[]>();
  for (const edge of edges) {
    const key = `${edge.from.nodeId}:${edge.from.port}`;
    byPort.set(key, [...(byPort.get(key) ?? []), edge]);
  }
  for (const [key, portEdges] of byPort) {
    if (portEdges.length < 2) continue;
    // Duplicate edges were refused earlier, so every edge of a fork leads to a different node.
    const forkPath = pathOf(portEdges[0]!.from.nodeId);
    const sets = portEdges.map((edge) => postJoins.get(edge.to.nodeId)!);
    const candidates = [...sets[0]!].filter((j) => sets.every((set) => set.has(j)));
    const nearest = candidates.sort((a, b) => position.get(a)! - position.get(b)!)[0];
    if (!nearest) {
      problems.add(forkPath, "fork_join_missing", `The branches forked at ${key} do not all reach one join node; every path of every branch must meet at a join.`);
      continue;
    }
    if (joinOwner.has(nearest)) {
      problems.add(forkPath, "join_shared", `Join ${nearest} closes both ${joinOwner.get(nearest)} and ${key}; give each fork its own join.`);
      continue;
    }
    joinOwner.set(nearest, key);
    forkJoins[key] = nearest;
  }
  for (const node of nodes.values()) {
    if (node.kind === "join" && !joinOwner.has(node.id)) {
      problems.add(pathOf(node.id), "join_unmatched", `Join ${node.id} is not the meeting point of any fork.`);
    }
  }
  return forkJoins;
}

/** Walks the graph as the kernel will and refuses branch keys longer than the runtime accepts. */
export function checkBranchKeys(startId: string, edges: WorkflowEdgeV1[], forkJoins: Record<string, string>, problems: ProblemSink, pathOf: (nodeId: string) => string): void {
  const seen = new Set<string>();
  const stack: Array<{ id: string; key: string; stop: string | null }> = [{ id: startId, key: "", stop: null }];
  while (stack.length > 0) {
    const { id, key, stop } = stack.pop()!;
    const memo = `${id}|${key}|${stop}`;
    if (id === stop || seen.has(memo)) continue;
    seen.add(memo);
    if (key.length > MAX_BRANCH_KEY) {
      problems.add(pathOf(id), "branch_nesting_too_deep", `Branch key ${key.slice(0, 40)}… exceeds ${MAX_BRANCH_KEY} characters; nest fewer forks or use shorter node ids.`);
      return;
    }
    const ports = new Map<string, WorkflowEdgeV1[]>();
    for (const edge of edges) if (edge.from.nodeId === id) ports.set(edge.from.port, [...(ports.get(edge.from.port) ?? []), edge]);
    for (const [port, portEdges] of ports) {
      const join = forkJoins[`${id}:${port}`];
      if (portEdges.length > 1 && join) {
        for (const edge of portEdges) stack.push({ id: edge.to.nodeId, key: key ? `${key}.${edge.to.nodeId}` : edge.to.nodeId, stop: join });
        stack.push({ id: join, key, stop });
      } else {
        for (const edge of portEdges) stack.push({ id: edge.to.nodeId, key, stop });
      }
    }
  }
}
