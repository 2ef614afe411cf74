// The sandbox boundary: every message the kernel (inside the dynamic worker) may send to the host.
// The kernel imports only types from here; the host's WorkflowRuntimeCapability implements it.
import type { WorkflowAuthorityMode } from "./types";

export interface RuntimeNodeRequest {
  runId: string;
  nodeId: string;
  nodeKind: string;
  branchKey?: string;
  authorityMode: WorkflowAuthorityMode;
  /** Only `{ prepare: true }` for delay and delay_until; other input comes from the node's mapping. */
  input?: { prepare?: boolean };
}

export interface RuntimeWaitRequest {
  runId: string;
  nodeId: string;
  nodeKind: "human_task" | "wait_for_event";
  branchKey?: string;
  authorityMode: WorkflowAuthorityMode;
}

export type WaitResult = { status: "received"; event: unknown } | { status: "timed_out" };

export interface RuntimeCompleteWaitRequest {
  runId: string;
  nodeId: string;
  branchKey?: string;
  authorityMode: WorkflowAuthorityMode;
  eventResult: WaitResult;
}

export interface RuntimeActionRequest extends RuntimeNodeRequest {
  nodeKind: "action";
}

export interface RuntimeCompleteActionRequest extends RuntimeActionRequest {
  proposalId: string;
  eventResult: WaitResult;
}

export interface RuntimeFailureRequest extends RuntimeNodeRequest {
  errorCode: string;
}

/** What a node step returns: at least the port it leaves by. */
export interface NodeOutput {
  port: string;
  [key: string]: unknown;
}

export interface PreparedWait {
  /** The Workflows event type the kernel waits for (derived per wait, `[A-Za-z0-9_-]`). */
  eventType: string;
  timeoutMs: number;
  taskId?: string;
}

export interface PreparedDelay extends NodeOutput {
  /** ISO time the delay ends. */
  resumeAt: string;
}

export interface ActionProgress extends NodeOutput {
  status: string;
  proposalId?: string;
  eventType?: string;
  timeoutMs?: number;
}

/** The host object bound as `env.RUNTIME` in every loaded workflow worker. */
export interface WorkflowRuntimeApi {
  executeNode(input: RuntimeNodeRequest): Promise<NodeOutput>;
  prepareWait(input: RuntimeWaitRequest): Promise<PreparedWait>;
  completeWait(input: RuntimeCompleteWaitRequest): Promise<NodeOutput>;
  prepareAction(input: RuntimeActionRequest): Promise<ActionProgress>;
  completeAction(input: RuntimeCompleteActionRequest): Promise<ActionProgress>;
  failNode(input: RuntimeFailureRequest): Promise<NodeOutput>;
}

/** Parameters the kernel's starter passes to `WORKFLOWS.create`. */
export interface KernelParams {
  runId: string;
  authorityMode: WorkflowAuthorityMode;
}

/**
 * Errors cross the boundary as `Error(message)` only (classes and fields do not survive RPC).
 * The host throws `code` for a permanent failure and `retryable:code` for a transient one.
 */
export const RETRYABLE_PREFIX = "retryable:";
