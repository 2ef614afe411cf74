// The node kinds as the console uses them: the server's own descriptors (ports, labels, config
// fields, defaults; src/workflows/kinds/descriptors.ts, pure data), plus the editor's helpers.
import { DEFAULT_RESPONSE_SCHEMA, KINDS, NODE_KINDS, nodePorts, type WorkflowNodeKind } from "../../../src/workflows/kinds/descriptors";
import type { Graph, GraphNode } from "../api";

export { DEFAULT_RESPONSE_SCHEMA, NODE_KINDS };
export { cleanGraph, editorSemantics, newGraph } from "./new-graph";
export type NodeKind = WorkflowNodeKind;
/** Label, group and description per kind (and everything else the descriptor says). */
export const KIND_INFO = KINDS;

/** Output ports of a node, its error port included. */
export function portsOf(node: GraphNode): string[] {
  return nodePorts({ kind: node.kind, config: (node.config ?? {}) as never, ...(node.errorPort ? { errorPort: node.errorPort } : {}) });
}

/** A new node of `kind`, with the descriptor's defaults: as little as possible to be valid. */
export function newNode(kind: NodeKind, id: string): GraphNode {
  const { config, inputMapping } = KINDS[kind].defaults;
  return { id, kind, config: structuredClone(config ?? {}) as GraphNode["config"], ...(inputMapping ? { inputMapping: { ...inputMapping } } : {}) };
}

export function uniqueId(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** Layered layout: each node one column right of its furthest predecessor from start. */
export function autoLayout(graph: Pick<Graph, "nodes" | "edges">): Record<string, { x: number; y: number }> {
  const depth = new Map<string, number>();
  const outgoing = new Map<string, string[]>();
  for (const e of graph.edges) outgoing.set(e.from.nodeId, [...(outgoing.get(e.from.nodeId) ?? []), e.to.nodeId]);
  const start = graph.nodes.find((n) => n.kind === "start");
  const order: string[] = [];
  const visit = (id: string, d: number, guard: Set<string>) => {
    if (guard.has(id)) return;
    if ((depth.get(id) ?? -1) >= d) return;
    depth.set(id, d);
    order.push(id);
    guard.add(id);
    for (const next of outgoing.get(id) ?? []) visit(next, d + 1, guard);
    guard.delete(id);
  };
  if (start) visit(start.id, 0, new Set());
  let extra = Math.max(0, ...depth.values()) + 1;
  for (const n of graph.nodes) if (!depth.has(n.id)) depth.set(n.id, extra++);
  const rows = new Map<number, number>();
  const positions: Record<string, { x: number; y: number }> = {};
  for (const n of graph.nodes) {
    const d = depth.get(n.id)!;
    const row = rows.get(d) ?? 0;
    rows.set(d, row + 1);
    positions[n.id] = { x: 40 + d * 280, y: 40 + row * 150 };
  }
  return positions;
}

/** Problems from the validator, by node id (through the node's index in the graph that was checked). */
export interface PinnedProblem {
  path: string;
  /** The path inside the node, e.g. "config.cases[0].when"; "" for the node itself. */
  field: string;
  code: string;
  message: string;
}

export function pinProblems(graph: Graph, problems: Array<{ path: string; code: string; message: string }>) {
  const byNode: Record<string, PinnedProblem[]> = {};
  const global: PinnedProblem[] = [];
  const edgeProblems: Record<number, PinnedProblem[]> = {};
  for (const problem of problems) {
    const nodeMatch = /^\$\.nodes\[(\d+)\]\.?(.*)$/u.exec(problem.path);
    const edgeMatch = /^\$\.edges\[(\d+)\]\.?(.*)$/u.exec(problem.path);
    if (nodeMatch) {
      const node = graph.nodes[Number(nodeMatch[1])];
      if (node) {
        const id = node.id;
        byNode[id] ??= [];
        byNode[id].push({ ...problem, field: nodeMatch[2] ?? "" });
        continue;
      }
    }
    if (edgeMatch) {
      const index = Number(edgeMatch[1]);
      const edge = graph.edges[index];
      edgeProblems[index] ??= [];
      edgeProblems[index].push({ ...problem, field: edgeMatch[2] ?? "" });
      if (edge && graph.nodes.some((n) => n.id === edge.from.nodeId)) {
        const from = edge.from.nodeId;
        byNode[from] ??= [];
        byNode[from].push({ ...problem, field: `edge:${edge.from.port}` });
        continue;
      }
    }
    global.push({ ...problem, field: "" });
  }
  return { byNode, global, edgeProblems };
}

export function fieldProblems(problems: PinnedProblem[] | undefined, field: string): string | undefined {
  const hits = (problems ?? []).filter((p) => p.field === field || p.field.startsWith(`${field}.`) || p.field.startsWith(`${field}[`));
  return hits.length ? hits.map((p) => p.message).join(" ") : undefined;
}
