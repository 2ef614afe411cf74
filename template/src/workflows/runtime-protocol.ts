// The sandbox boundary: every message the kernel (inside the dynamic worker) may send to the host,
// the host's entrypoints into the sandbox, the protocol version, and the one codec for errors that
// cross it. The kernel bundles this file, so it imports nothing of the host (types only).
import type { WorkflowAuthorityMode } from "./types";

/** A node as the compiler embeds it in the artifact: what the kernel needs to walk the graph. */
export interface KernelNode {
  id: string;
  kind: string;
  /** Protocol 2: how the kernel drives it (kinds/descriptor.ts `KernelProtocol`). */
  protocol: "step" | "delay" | "wait" | "action";
  /** Protocol 2: an effect, run as a plain (simulated) step in shadow mode. */
  effect: boolean;
  /** Protocol 3: the node starts (or continues) a fused group (fusion.ts), when the version fuses. */
  fuse?: boolean;
  config: Record<string, unknown>;
  errorPort?: string;
  timeoutPolicy?: { timeout_seconds?: number; retries?: number };
}

export interface KernelGraph {
  nodes: KernelNode[];
  edges: Array<{ from: { nodeId: string; port: string }; to: { nodeId: string } }>;
  plan: { forkJoins: Record<string, string> };
}

export interface RuntimeNodeRequest {
  runId: string;
  nodeId: string;
  nodeKind: string;
  branchKey?: string;
  authorityMode: WorkflowAuthorityMode;
  /** Only `{ prepare: true }` for delay and delay_until; other input comes from the node's mapping. */
  input?: { prepare?: boolean };
  /** Protocol 4: the version fuses and the kernel follows an answer's `ahead`, so the host may walk on past the node into a group. */
  walk?: boolean;
}

/** The host checks that the named node's kind uses the wait protocol. */
export type RuntimeWaitRequest = RuntimeNodeRequest;

export type WaitResult = { status: "received"; event: unknown } | { status: "timed_out" };

export interface RuntimeCompleteWaitRequest {
  runId: string;
  nodeId: string;
  branchKey?: string;
  authorityMode: WorkflowAuthorityMode;
  eventResult: WaitResult;
  /** Protocol 4: as RuntimeNodeRequest's. */
  walk?: boolean;
}

/** The host checks that the named node is an action. */
export type RuntimeActionRequest = RuntimeNodeRequest;

export interface RuntimeCompleteActionRequest extends RuntimeActionRequest {
  proposalId: string;
  eventResult: WaitResult;
}

export interface RuntimeFailureRequest extends RuntimeNodeRequest {
  errorCode: string;
}

/** Protocol 3: where a fused group ended, the node the kernel continues from and its port. */
export interface FusedOutput {
  nodeId: string;
  port: string;
  /** Protocol 4: see Ahead. */
  ahead?: Ahead;
}

/**
 * Protocol 4: where the host walked on, in the same call and the same D1 batch, past the node the
 * kernel named (after it left by its port, to the single node that follows, on the main path):
 * - `port`: it ran the fused group from `head` (fusion.ts) to `nodeId`, which left by `port`;
 * - `wait`: it prepared the wait of `head` (= `nodeId`), as prepareWait would have;
 * - `action`: it prepared the action of `head` (= `nodeId`), as prepareAction would have.
 * `onward`: after a group, where it walked on from there. The kernel continues from the last of
 * these as if it had made those calls itself; a host that walks on nowhere answers as protocol 3.
 */
export interface Ahead {
  head: string;
  nodeId: string;
  port?: string;
  wait?: PreparedWait;
  action?: ActionProgress;
  onward?: Ahead;
}

/** What a node step returns: at least the port it leaves by. */
export interface NodeOutput {
  port: string;
  /** Protocol 4: see Ahead. */
  ahead?: Ahead;
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
  /** Protocol 3: runs the fused group the host computes from the named node. */
  executeFused(input: RuntimeNodeRequest): Promise<FusedOutput>;
  /** Protocol 3: after the group's retries, the failing node's error port (or repair_required). */
  failFused(input: RuntimeFailureRequest): Promise<FusedOutput>;
}

/** Parameters the kernel's starter passes to `WORKFLOWS.create`. */
export interface KernelParams {
  runId: string;
  authorityMode: WorkflowAuthorityMode;
}

/** Parameters the host passes to the kernel's starter to create a run's Workflows instance. */
export interface KernelStartParams {
  instanceId: string;
  runId: string;
  authorityMode: WorkflowAuthorityMode;
}

/** The artifact's default entrypoint, as the host calls it. */
export interface KernelStarterEntrypoint extends Rpc.WorkerEntrypointBranded {
  start(params: KernelStartParams): Promise<{ id: string }>;
}

/**
 * The kernel↔host protocol this host compiles artifacts with, and every protocol it still serves
 * (an artifact embeds its kernel, so versions published earlier keep theirs):
 * 1. the kernel branches on node kinds;
 * 2. the compiler embeds each node's `protocol` (descriptors) and the kernel branches on it only;
 *    effects in shadow run as plain steps;
 * 3. nodes marked `fuse` start a fused group (`executeFused`, `failFused`): one step, one call;
 * 4. the kernel asks the host to walk on (`walk`) and follows an answer's `ahead`: the group
 *    after a wait or an action, and the wait or action after a group, in the same call.
 */
export const KERNEL_PROTOCOL = 4;
export const SUPPORTED_KERNEL_PROTOCOLS: readonly number[] = [1, 2, 3, 4];

/**
 * Errors cross the boundary as `Error(message)` only (classes and fields do not survive RPC).
 * The host throws `code` for a permanent failure and `retryable:code` for a transient one; the
 * host's message and details never cross (it records them itself).
 */
export const RETRYABLE_PREFIX = "retryable:";
const CODE_PATTERN = /^[a-z][a-z0-9_.]{0,99}$/u;

/** Host side: an error with a `code` (an AppError) becomes its code; anything else passes unchanged. */
export function encodeHostError(error: unknown): unknown {
  if (error instanceof Error && typeof (error as { code?: unknown }).code === "string") {
    const { code, retryable } = error as Error & { code: string; retryable?: boolean };
    return new Error(retryable ? `${RETRYABLE_PREFIX}${code}` : code);
  }
  return error;
}

/**
 * Kernel side: what a thrown error means. A bare code is permanent; `retryable:code` and anything
 * else may be transient. The engine rethrows a failed step's error as "<Name>: <message>".
 */
export function decodeBoundaryError(error: unknown): { code: string; permanent: boolean } {
  const raw = error instanceof Error ? error.message : String(error);
  if (CODE_PATTERN.test(raw)) return { code: raw, permanent: true };
  const message = raw.replace(/^(?:[A-Za-z]*Error: )+/u, "");
  const retryable = message.startsWith(RETRYABLE_PREFIX);
  const bare = retryable ? message.slice(RETRYABLE_PREFIX.length) : message;
  return { code: CODE_PATTERN.test(bare) ? bare : "workflow.step_failed", permanent: false };
}
