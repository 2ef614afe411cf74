// The workflow graph contract (schemaVersion 1): nodes, edges, run states, authority modes. What
// each node kind is (ports, config, protocol) lives in kinds/descriptors.ts.

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export type { WorkflowNodeKind } from "./kinds/descriptors";
import type { WorkflowNodeKind } from "./kinds/descriptors";

export const AUTHORITY_MODES = ["off", "shadow", "assisted", "autonomous"] as const;
export type WorkflowAuthorityMode = (typeof AUTHORITY_MODES)[number];

export const RUN_STATES = ["created", "dispatch_pending", "queued", "running", "waiting", "repair_required", "succeeded", "failed", "terminated", "superseded"] as const;
export type WorkflowRunState = (typeof RUN_STATES)[number];
export const TERMINAL_RUN_STATES: readonly WorkflowRunState[] = ["succeeded", "failed", "terminated", "superseded"];

export const STEP_STATES = ["running", "waiting", "succeeded", "failed", "timed_out"] as const;
export type WorkflowStepState = (typeof STEP_STATES)[number];

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

/**
 * What CEL's numeric operators mean (expression-semantics.ts). A graph without the field has
 * `cel`, the meaning every version published before it existed keeps.
 */
export const EXPRESSION_SEMANTICS = ["cel", "json-numbers-1"] as const;
export type ExpressionSemantics = (typeof EXPRESSION_SEMANTICS)[number];

export interface WorkflowGraphV1 {
  schemaVersion: 1;
  /** Absent means `cel`; stored as declared so a published version keeps its meaning. */
  expressionSemantics?: ExpressionSemantics;
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
