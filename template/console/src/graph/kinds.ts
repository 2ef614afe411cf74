// The 15 node kinds of the graph format (template/src/workflows/types.ts, docs/graph-format.md):
// their ports, a sensible starting config, and what the config panel asks for.
import type { Graph, GraphNode } from "../api";

export const NODE_KINDS = [
  "start", "end", "condition", "join", "delay", "delay_until", "enrichment", "ai_proposal",
  "human_task", "wait_for_event", "send_message", "decision", "handoff", "start_linked_workflow", "action",
] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

export const FIXED_PORTS: Record<NodeKind, readonly string[] | null> = {
  start: ["success"], end: [], condition: null, join: ["success"], delay: ["completed"], delay_until: ["completed"],
  enrichment: ["success"], ai_proposal: null, human_task: ["completed", "timeout"], wait_for_event: ["received", "timeout"],
  send_message: ["sent"], decision: ["recorded"], handoff: ["handed_off"], start_linked_workflow: ["started"], action: ["applied", "rejected", "expired"],
};

export const KIND_INFO: Record<NodeKind, { label: string; group: "Flow" | "Automation" | "People" | "Effects"; description: string }> = {
  start: { label: "Start", group: "Flow", description: "Where every run begins (exactly one)." },
  end: { label: "End", group: "Flow", description: "Finishes the run with a terminal code; its input mapping is the result." },
  condition: { label: "Condition", group: "Flow", description: "Routes by CEL cases; exactly one case or the default port." },
  join: { label: "Join", group: "Flow", description: "Where the branches of a fork meet again." },
  delay: { label: "Delay", group: "Flow", description: "Waits a number of seconds." },
  delay_until: { label: "Delay until", group: "Flow", description: "Waits until a time computed by CEL." },
  enrichment: { label: "Enrichment", group: "Automation", description: "Runs a component (built-in bank or your own sandboxed code)." },
  ai_proposal: { label: "AI proposal", group: "Automation", description: "Asks a model to choose one of its result ports, with a rationale." },
  human_task: { label: "Human task", group: "People", description: "Puts a task in a review queue and waits for the answer." },
  wait_for_event: { label: "Wait for event", group: "People", description: "Waits for an event sent to the run." },
  send_message: { label: "Send message", group: "Effects", description: "Sends a templated message to the reporter, the owner or an address." },
  decision: { label: "Decision", group: "Effects", description: "Records a decision with its DSA statement of reasons." },
  handoff: { label: "Handoff", group: "Effects", description: "Hands the case to another queue or an external recipient." },
  start_linked_workflow: { label: "Linked workflow", group: "Effects", description: "Starts a run of another workflow version." },
  action: { label: "Action", group: "Effects", description: "Proposes an enforcement action (approval, delivery, confirmation)." },
};

const isStringArray = (value: unknown): string[] => (Array.isArray(value) ? value.filter((p): p is string => typeof p === "string") : []);

/** Output ports of a node, its error port included (mirrors nodePorts on the server). */
export function portsOf(node: GraphNode): string[] {
  const fixed = FIXED_PORTS[node.kind as NodeKind];
  let ports: string[];
  if (fixed) ports = [...fixed];
  else if (node.kind === "condition") {
    ports = [...isStringArray(node.config?.case_ports)];
    if (typeof node.config?.default_port === "string") ports.push(node.config.default_port);
  } else ports = isStringArray(node.config?.result_ports);
  if (node.errorPort && !ports.includes(node.errorPort)) ports.push(node.errorPort);
  return ports;
}

export const DEFAULT_RESPONSE_SCHEMA = {
  type: "object",
  required: ["outcome"],
  additionalProperties: false,
  properties: {
    outcome: { enum: ["remove", "keep", "escalate"] },
    note: { type: "string", maxLength: 2000 },
  },
};

/** A new node of `kind`, with a config that needs as little as possible to be valid. */
export function newNode(kind: NodeKind, id: string): GraphNode {
  const node: GraphNode = { id, kind, config: {} };
  switch (kind) {
    case "end": node.config = { terminal_code: "complete" }; break;
    case "condition": node.config = { cases: [{ port: "yes", when: "report.category == 'scams_and_fraud'" }], case_ports: ["yes"], default_port: "no" }; break;
    case "delay": node.config = { seconds: 3600 }; break;
    case "delay_until": node.inputMapping = { timestamp: "input.at" }; break;
    case "enrichment": node.config = { component: "subject_history" }; break;
    case "ai_proposal": node.config = { provider_id: "", instructions: "Decide whether the reported content breaks the policy.", result_ports: ["violation", "no_violation"] }; break;
    case "human_task": node.config = { response_schema: DEFAULT_RESPONSE_SCHEMA, timeout_seconds: 86_400 }; break;
    case "wait_for_event": node.config = { event_type: "external.update", timeout_seconds: 86_400 }; break;
    case "send_message": node.config = { template: "Thank you for your report. We have reviewed it.", recipient: "reporter" }; break;
    case "decision": node.config = { outcome: "content_removed", statement: "The content breaks the policy on {{category}}.", restrictions: { visibility: ["content_removed"] } }; break;
    case "handoff": node.config = { queue_id: "" }; break;
    case "start_linked_workflow": node.config = { workflow_version_id: "" }; break;
    case "action": node.config = { action_type: "", approval_timeout_seconds: 86_400 }; break;
    default: break;
  }
  return node;
}

export function uniqueId(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** A graph without empty optional parts, as the server expects it. */
export function cleanGraph(nodes: GraphNode[], edges: Graph["edges"]): Graph {
  return {
    schemaVersion: 1,
    nodes: nodes.map((n) => {
      const out: GraphNode = { id: n.id, kind: n.kind };
      if (n.config && Object.keys(n.config).length > 0) out.config = n.config;
      if (n.inputMapping && Object.keys(n.inputMapping).length > 0) out.inputMapping = n.inputMapping;
      if (n.errorPort) out.errorPort = n.errorPort;
      if (n.timeoutPolicy && Object.keys(n.timeoutPolicy).length > 0) out.timeoutPolicy = n.timeoutPolicy;
      return out;
    }),
    edges,
  };
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
        (byNode[node.id] ??= []).push({ ...problem, field: nodeMatch[2] ?? "" });
        continue;
      }
    }
    if (edgeMatch) {
      const index = Number(edgeMatch[1]);
      const edge = graph.edges[index];
      (edgeProblems[index] ??= []).push({ ...problem, field: edgeMatch[2] ?? "" });
      if (edge && graph.nodes.some((n) => n.id === edge.from.nodeId)) {
        (byNode[edge.from.nodeId] ??= []).push({ ...problem, field: `edge:${edge.from.port}` });
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
