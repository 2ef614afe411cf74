// Waits: prepared before the kernel parks on waitForEvent, completed only by an event recorded in
// D1 for that very wait, or by its timeout.
import { closeStepTaskStatement, findQueueRow, openTaskStatements, taskIdOf, type QueueRow } from "../cases";
import { AppError } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { loadNodeContext, type LoadedContext } from "./execution-context";
import { evaluateInputMapping } from "./expressions";
import { denied, type AuthorizedRun, type RecordedEvent, type RecordedWait } from "./runtime-authorize";
import type { NodeOutput, PreparedWait, WaitResult } from "./runtime-protocol";
import { now, runProgress, runtimeAudit, stepUpsert } from "./runtime-records";
import { deadlineEventId, waitOfStepUnsafe } from "./runs-queries";
import type { WorkflowNodeV1 } from "./types";
import { STEP_OUTPUT as OUTPUT } from "./step-output";

const DEFAULT_WAIT_SECONDS = 86_400;
const WAIT_DEADLINE_SKEW_MS = 2_000;

/** The Workflows event type for a wait: derived, so only the host can name it. */
async function signalType(waitId: string): Promise<string> {
  return `w_${(await sha256Hex(waitId)).slice(0, 40)}`;
}

export async function prepareWaitRecord(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; stepId: string; loaded?: LoadedContext; stepRecorded: boolean; queue?: QueueRow | null }): Promise<PreparedWait> {
  const { stepId, node } = input;
  // A wait is written in the batch that records its step, so a step with no row has no wait to look for.
  const existing = input.stepRecorded ? await waitOfStepUnsafe(env.DB, stepId) : null;
  if (existing) {
    // A repeated prepare returns the recorded wait and writes nothing.
    const taskId = node.kind === "human_task" ? taskIdOf(stepId) : undefined;
    return { eventType: existing.signalType, timeoutMs: Math.max(1_000, Date.parse(existing.deadlineAt) - Date.now()), ...(taskId ? { taskId } : {}) };
  }
  const { prepared, statements } = await newWaitStatements(env, input);
  await env.DB.batch(statements);
  return prepared;
}

/**
 * A new wait's statements, unwritten: its step (waiting), the wait, the run waiting (moved
 * once per step: the steps of a group recorded in the same batch count too), its audit event,
 * and a human_task's task.
 */
export async function newWaitStatements(
  env: Env,
  input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; stepId: string; loaded?: LoadedContext; queue?: QueueRow | null; group?: { revisions: number; startedAt: string } },
): Promise<{ prepared: PreparedWait; statements: D1PreparedStatement[] }> {
  const { run, node, branchKey, stepId } = input;
  const waitId = `${stepId}:wait`;
  const taskId = node.kind === "human_task" ? taskIdOf(stepId) : undefined;
  const configured = node.config.timeout_seconds ?? node.timeoutPolicy?.timeout_seconds ?? DEFAULT_WAIT_SECONDS;
  const timeoutSeconds = Number(configured);
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1 || timeoutSeconds > 31_536_000) throw denied("runtime.wait_timeout_invalid");
  const eventType = node.kind === "human_task" ? "task.completed" : String(node.config.event_type);
  const signal = await signalType(waitId);
  const at = now();
  const deadlineAt = new Date(Date.now() + timeoutSeconds * 1_000).toISOString();
  const statements: D1PreparedStatement[] = [
    stepUpsert(env.DB, { id: stepId, run, node, branchKey, state: "waiting", at }),
    env.DB.prepare(`
      INSERT INTO workflow_waits (id, run_id, step_run_id, wait_type, event_type, signal_type, state, deadline_at, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'waiting', ?7, ?8)
      ON CONFLICT(step_run_id) DO NOTHING
    `).bind(waitId, run.id, stepId, node.kind === "human_task" ? "human_task" : "event", eventType, signal, deadlineAt, at),
    runProgress(env.DB, run.id, node.id, "waiting", at, input.group),
    runtimeAudit(env.DB, run, { key: `wait:${waitId}:prepared`, action: "workflow.wait_prepared", details: { nodeId: node.id, branchKey, eventType, deadlineAt, ...(taskId ? { taskId } : {}) }, at }),
  ];
  if (taskId) statements.push(...(await humanTaskStatements(env, { run, node, branchKey, stepId, taskId, at, deadlineAt, loaded: input.loaded, ...(input.queue !== undefined ? { queue: input.queue } : {}) })));
  return { prepared: { eventType: signal, timeoutMs: timeoutSeconds * 1_000, ...(taskId ? { taskId } : {}) }, statements };
}

/**
 * The task row of a human_task: in its queue (by id or name), due by the queue's SLA, expiring at
 * the node's timeout, with the node's evaluated inputMapping as the reviewer's context (sealed),
 * and the record of the content the mapping read.
 */
async function humanTaskStatements(
  env: Env,
  input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; stepId: string; taskId: string; at: string; deadlineAt: string; loaded: LoadedContext | undefined; queue?: QueueRow | null },
): Promise<D1PreparedStatement[]> {
  const { run, node } = input;
  const queueRef = typeof node.config.queue_id === "string" ? node.config.queue_id : null;
  if (!queueRef) throw new AppError("human_task.queue_required", `human_task ${node.id} names no queue_id.`);
  // The queue as the capability read it with its authorization, or read here.
  const queue = input.queue !== undefined ? input.queue : await findQueueRow(env.DB, run.installationId, queueRef);
  if (!queue) throw new AppError("human_task.queue_unknown", `The queue of human_task ${node.id} does not exist in this installation.`);
  const loaded = input.loaded ?? (await loadNodeContext(env, { run, node, branchKey: input.branchKey }));
  const context = evaluateInputMapping(node.inputMapping, loaded.context, node.id);
  const task = await openTaskStatements(env, {
    installationId: run.installationId,
    taskId: input.taskId,
    stepId: input.stepId,
    runId: run.id,
    taskType: String(node.config.task_type ?? "review"),
    queue,
    priority: Number.isInteger(node.config.priority) ? Number(node.config.priority) : queue.priority,
    context,
    responseSchema: node.config.response_schema ?? { type: "object" },
    at: input.at,
    expiresAt: input.deadlineAt,
  });
  return [...task, ...loaded.statements];
}

export type WaitCompletion = { replay: true; output: NodeOutput } | { replay: false; output: NodeOutput; timedOut: boolean; statements: D1PreparedStatement[] };

/** Verifies the completion against the recorded wait and event; returns the output and statements. */
export async function completeWaitStatements(
  env: Env,
  input: { run: AuthorizedRun; node: WorkflowNodeV1; stepId: string; eventResult: WaitResult; prefetched?: { wait: RecordedWait | undefined; event: RecordedEvent | undefined; eventId: string | null } },
): Promise<WaitCompletion> {
  const { run, node, stepId, eventResult, prefetched } = input;
  const wait = prefetched ? prefetched.wait : await waitOfStepUnsafe(env.DB, stepId);
  if (!wait) throw denied("runtime.wait_not_prepared");
  if (wait.state !== "waiting") {
    const stored = await env.DB.prepare(`SELECT ${OUTPUT.json} AS json FROM workflow_step_runs s ${OUTPUT.join} WHERE s.id = ?1`).bind(stepId).first<{ json: string | null }>();
    if (wait.state === "cancelled" || !stored?.json) throw denied("runtime.wait_closed");
    return { replay: true, output: JSON.parse(stored.json) as NodeOutput };
  }
  const at = now();
  let output: NodeOutput;
  // Whether the wait ends with its task's completion (see below).
  let taskCompleted = false;
  // The deadline event the schedule records when the engine missed a deadline (workflows/sweeps.ts)
  // is a timeout, held to the same recorded deadline.
  const deadlineEvent = eventResult?.status === "received" && (eventResult.event as { eventId?: unknown } | null)?.eventId === deadlineEventId(wait.id);
  const timedOut = eventResult?.status === "timed_out" || deadlineEvent;
  // The kernel's "timed out" is a claim: the recorded deadline decides (a little clock skew allowed;
  // an early claim is retried, so an honest kernel whose clock runs ahead still gets through).
  if (timedOut && Date.now() + WAIT_DEADLINE_SKEW_MS < Date.parse(wait.deadlineAt)) {
    throw new AppError("runtime.wait_not_due", `The wait of ${node.id} has not reached its deadline (${wait.deadlineAt}).`, { retryable: true });
  }
  if (timedOut) {
    output = { port: "timeout", status: "timed_out" };
  } else if (eventResult?.status === "received") {
    const claimed = eventResult.event as { eventId?: unknown } | null;
    const eventId = typeof claimed?.eventId === "string" ? claimed.eventId : null;
    const event =
      eventId === null
        ? null
        : prefetched && prefetched.eventId === eventId
          ? prefetched.event
          : await env.DB.prepare(`
      SELECT id, type, payload_json AS payloadJson, created_at AS createdAt FROM workflow_events WHERE id = ?1 AND run_id = ?2 AND wait_id = ?3
    `)
              .bind(eventId, run.id, wait.id)
              .first<{ id: string; type: string; payloadJson: string; createdAt: string }>();
    if (!event) throw denied("runtime.wait_event_denied");
    taskCompleted = node.kind === "human_task" && event.type === "task.completed";
    output = {
      port: node.kind === "human_task" ? "completed" : "received",
      status: "received",
      event: { id: event.id, type: event.type, payload: JSON.parse(event.payloadJson) as unknown, receivedAt: event.createdAt },
    };
  } else {
    throw denied("runtime.wait_result_invalid");
  }
  const statements = [
    env.DB.prepare(`UPDATE workflow_waits SET state = ?2, satisfied_at = ?3 WHERE id = ?1 AND state = 'waiting'`).bind(wait.id, timedOut ? "timed_out" : "satisfied", at),
    runtimeAudit(env.DB, run, { key: `wait:${wait.id}:closed`, action: timedOut ? "workflow.wait_timed_out" : "workflow.wait_satisfied", details: { nodeId: node.id, waitId: wait.id }, at }),
  ];
  // A human task's wait takes only the host's events (its wait type is not `event`, which runs'
  // events API reaches), and a `task.completed` one is recorded only in the batch that completes the
  // step's task (cases/queues/tasks.ts completeTask): that task is no longer open, so there is
  // nothing to close. A timeout (the deadline's event included) closes it as expired.
  if (node.kind === "human_task" && !taskCompleted) {
    statements.push(closeStepTaskStatement(env.DB, { runId: run.id, stepId, timedOut, at }));
  }
  return { replay: false, output, timedOut, statements };
}
