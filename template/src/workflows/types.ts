// The workflow graph contract (schemaVersion 1): node kinds, ports, run states, authority modes.

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export const NODE_KINDS = [
  "start", "end", "condition", "join", "delay", "delay_until", "enrichment", "ai_proposal",
  "human_task", "wait_for_event", "send_message", "decision", "handoff", "start_linked_workflow", "action",
] as const;
export type WorkflowNodeKind = (typeof NODE_KINDS)[number];

export const AUTHORITY_MODES = ["off", "shadow", "assisted", "autonomous"] as const;
export type WorkflowAuthorityMode = (typeof AUTHORITY_MODES)[number];

export const RUN_STATES = [
  "created", "dispatch_pending", "queued", "running", "waiting", "repair_required",
  "succeeded", "failed", "terminated", "superseded",
] as const;
export type WorkflowRunState = (typeof RUN_STATES)[number];
export const TERMINAL_RUN_STATES: readonly WorkflowRunState[] = ["succeeded", "failed", "terminated", "superseded"];

export const STEP_STATES = ["running", "waiting", "succeeded", "failed", "timed_out"] as const;
export type WorkflowStepState = (typeof STEP_STATES)[number];

/** Node kinds whose effect leaves the system; in `shadow` they are simulated. */
export const EFFECT_KINDS = ["human_task", "send_message", "decision", "handoff", "start_linked_workflow", "action"] as const;

/** Fixed output ports per kind; `condition` and `ai_proposal` declare theirs in config. */
export const FIXED_PORTS: Record<WorkflowNodeKind, readonly string[] | null> = {
  start: ["success"],
  end: [],
  condition: null,
  join: ["success"],
  delay: ["completed"],
  delay_until: ["completed"],
  enrichment: ["success"],
  ai_proposal: null,
  human_task: ["completed", "timeout"],
  wait_for_event: ["received", "timeout"],
  send_message: ["sent"],
  decision: ["recorded"],
  handoff: ["handed_off"],
  start_linked_workflow: ["started"],
  action: ["applied", "rejected", "expired"],
};

export interface TimeoutPolicy {
  timeout_seconds?: number;
  retries?: number;
}

export interface WorkflowNodeV1 {
  id: string;
  kind: WorkflowNodeKind;
  config: JsonObject;
  inputMapping?: Record<string, string>;
  errorPort?: string;
  timeoutPolicy?: TimeoutPolicy;
}

export interface WorkflowEdgeV1 {
  from: { nodeId: string; port: string };
  to: { nodeId: string };
}

export interface WorkflowGraphV1 {
  schemaVersion: 1;
  nodes: WorkflowNodeV1[];
  edges: WorkflowEdgeV1[];
}

/** What the validator derives once per version and the kernel and runtime rely on. */
export interface GraphPlan {
  /** fork key `${nodeId}:${port}` → the join node where its branches meet. */
  forkJoins: Record<string, string>;
}

export interface ParsedWorkflowGraph extends WorkflowGraphV1 {
  plan: GraphPlan;
}

export const NODE_ID_PATTERN = /^[A-Za-z0-9._:-]{1,100}$/u;
export const PORT_PATTERN = /^[A-Za-z0-9_-]{1,64}$/u;
export const MAX_NODES = 500;
export const MAX_GRAPH_BYTES = 256 * 1024;
export const MAX_WAIT_SECONDS = 31_536_000;

/** Ports a node can emit, including its declared error port. */
export function nodePorts(node: WorkflowNodeV1): string[] {
  const fixed = FIXED_PORTS[node.kind];
  let ports: string[];
  if (fixed) ports = [...fixed];
  else if (node.kind === "condition") {
    const casePorts = Array.isArray(node.config.case_ports) ? node.config.case_ports.filter((p): p is string => typeof p === "string") : [];
    const fallback = typeof node.config.default_port === "string" ? [node.config.default_port] : [];
    ports = [...casePorts, ...fallback];
  } else {
    ports = Array.isArray(node.config.result_ports) ? node.config.result_ports.filter((p): p is string => typeof p === "string") : [];
  }
  if (node.errorPort && !ports.includes(node.errorPort)) ports.push(node.errorPort);
  return ports;
}
