// The capability's side of the sandbox boundary shared by every runtime module: what a call
// concerns once authorized (CallScope), how its errors leave (guard: a code, never a message; the
// host's own account kept on the step), and what the kernel learns of a step or an action.
import { AppError } from "../errors";
import { nodeReadsContent } from "./execution-context";
import { stepRunId, type AuthorizedRun } from "./runtime-authorize";
import { encodeHostError, type ActionProgress, type NodeOutput } from "./runtime-protocol";
import { hostErrorStatement, now } from "./runtime-records";
import type { WorkflowNodeV1 } from "./types";

/** The step a call concerns, once authorized: where the host records its own error message. */
export interface CallScope {
  run?: AuthorizedRun;
  node?: WorkflowNodeV1;
  branchKey?: string;
  /** Statements that must be written even if the call fails (the record of a content read). */
  pending?: D1PreparedStatement[];
}

/**
 * What the kernel learns of a step: the port it leaves by (and, for the protocols that need them,
 * wait descriptors). Step data stays in D1, so the Workflows engine's own history never holds it.
 */
export function forKernel(output: Record<string, unknown>): NodeOutput {
  return { port: String(output.port) };
}

/** What the kernel learns of an action's progress (its port once known, or what to wait for). */
export function progressForKernel(progress: ActionProgress): ActionProgress {
  const view: ActionProgress = { port: progress.port, status: progress.status };
  if (!progress.port) delete (view as Partial<ActionProgress>).port;
  if (progress.proposalId) view.proposalId = progress.proposalId;
  if (progress.eventType) view.eventType = progress.eventType;
  if (progress.timeoutMs) view.timeoutMs = progress.timeoutMs;
  return view;
}

/** Quoted values leave the error message of a node that read content: it could quote the content. */
function withoutQuotes(message: string): string {
  return message.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/gu, '"…"');
}

/**
 * Errors leave the capability through the boundary's codec (runtime-protocol): a code the kernel
 * can act on, never a message. The host keeps its own message and details on the step, so the
 * run's error says what is wrong without trusting anything the sandbox reports back.
 */
export async function guard<T>(db: D1Database, scope: CallScope, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof AppError && scope.run && scope.node) {
      const stepId = stepRunId(scope.run.id, scope.node.id, scope.branchKey ?? "");
      if (nodeReadsContent(scope.run.graph, scope.node)) error.message = withoutQuotes(error.message);
      await db.batch([hostErrorStatement(db, { id: stepId, run: scope.run, node: scope.node, branchKey: scope.branchKey ?? "", error, at: now() }), ...(scope.pending ?? [])]).catch(() => undefined);
    } else if (scope.pending?.length) {
      await db.batch(scope.pending).catch(() => undefined);
    }
    throw encodeHostError(error);
  }
}
