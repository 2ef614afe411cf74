// Bulk repair: terminate, retry or migrate the runs matching a filter (version, state, error code,
// created before/after). A dry run answers the count and a sample. A real one snapshots the
// matching runs as items (so the set does not drift while it runs), then the RUN_OPERATIONS queue
// processes them in chunks, one message at a time: each item is done once (its update holds only
// while it is pending, and each repair holds only while its run is where it was found), so a
// message delivered twice, or two at once, repeats nothing. Progress is counted from the items.
// Not exported from the workflows index (it terminates through run-end.ts, which imports
// enforcement); src/index.ts takes the consumer from this module.
import { auditStatement, canonicalJson } from "../audit";
import { archiveCaseOrHold } from "../cases";
import type { Actor } from "../auth";
import { AppError, conflict, errorCode, notFound } from "../errors";
import { newId, sha256Hex } from "../lib/crypto";
import { withDeadline, yieldToRuntime } from "../lib/queue-work";
import { repairRun } from "./repair";
import { archiveRunMessage } from "./run-archive";
import { terminateRun } from "./run-end";
import { admitDeferredRun } from "./run-dispatch";
import { getVersionRow } from "./versions-queries";

export const RUN_OPERATION_ACTIONS = ["terminate", "retry", "migrate"] as const;
export type RunOperationAction = (typeof RUN_OPERATION_ACTIONS)[number];
export const MAX_OPERATION_RUNS = 10_000;
const CHUNK = 20;
const SAMPLE = 10;

export interface RunFilter {
  workflowVersionId?: string;
  state?: string;
  errorCode?: string;
  createdBefore?: string;
  createdAfter?: string;
}

export interface RunOperationRequest {
  action: RunOperationAction;
  filter: RunFilter;
  /** migrate: the version to continue on. */
  workflowVersionId?: string;
  reason: string;
  dryRun?: boolean;
}

/** The WHERE of a filter, from ?1 (installation) to ?7 (the action's own state set). */
function filterWhere(installationId: string, action: RunOperationAction, filter: RunFilter) {
  for (const [name, value] of [
    ["createdBefore", filter.createdBefore],
    ["createdAfter", filter.createdAfter],
  ] as const) {
    if (value !== undefined && Number.isNaN(Date.parse(value))) throw new AppError("run_operation.filter_invalid", `filter.${name} is not an ISO time.`, { status: 422 });
  }
  // Terminate takes any live run; retry and migrate only runs a repair can take.
  const states = action === "terminate" ? ["created", "dispatch_pending", "queued", "running", "waiting", "repair_required"] : ["repair_required", "failed"];
  return {
    sql: `r.installation_id = ?1 AND (?2 IS NULL OR r.workflow_version_id = ?2) AND (?3 IS NULL OR r.state = ?3) AND (?4 IS NULL OR r.error_code = ?4)
      AND (?5 IS NULL OR r.created_at < ?5) AND (?6 IS NULL OR r.created_at > ?6) AND r.state IN (SELECT value FROM json_each(?7))`,
    binds: [
      installationId,
      filter.workflowVersionId ?? null,
      filter.state ?? null,
      filter.errorCode ?? null,
      filter.createdBefore ? new Date(filter.createdBefore).toISOString() : null,
      filter.createdAfter ? new Date(filter.createdAfter).toISOString() : null,
      JSON.stringify(states),
    ],
  };
}

interface OperationRow {
  id: string;
  installationId: string;
  action: RunOperationAction;
  filterJson: string;
  targetVersionId: string | null;
  reason: string;
  state: string;
  total: number;
  processed: number;
  succeeded: number;
  failed: number;
  skipped: number;
  actorJson: string;
  requestDigest: string;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

const OPERATION_COLUMNS = `id, installation_id AS installationId, action, filter_json AS filterJson, target_version_id AS targetVersionId, reason, state, total, processed,
  succeeded, failed, skipped, actor_json AS actorJson, request_digest AS requestDigest, created_at AS createdAt, updated_at AS updatedAt, finished_at AS finishedAt`;

function serializeOperation(row: OperationRow, failures: Array<{ runId: string; errorCode: string | null }> = []) {
  return {
    id: row.id,
    action: row.action,
    filter: JSON.parse(row.filterJson) as RunFilter,
    workflowVersionId: row.targetVersionId,
    reason: row.reason,
    state: row.state,
    progress: { total: row.total, processed: row.processed, succeeded: row.succeeded, failed: row.failed, skipped: row.skipped },
    failures,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    finishedAt: row.finishedAt,
  };
}

function operationRow(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT ${OPERATION_COLUMNS} FROM run_operations WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<OperationRow>();
}

/**
 * A dry run: the count and a sample of what the operation would take. Otherwise: the operation
 * recorded with its items, queued, answered with its progress (`Idempotency-Key` returns the first).
 */
export async function createRunOperation(env: Env, actor: Actor, request: RunOperationRequest, idempotencyKey?: string) {
  if (!(RUN_OPERATION_ACTIONS as readonly string[]).includes(request.action)) throw new AppError("run_operation.action_unknown", "action is one of: terminate, retry, migrate.", { status: 422 });
  const reason = typeof request.reason === "string" ? request.reason.trim() : "";
  if (reason.length === 0 || reason.length > 1_000) throw new AppError("run_operation.reason_required", "Say why: `reason`, 1 to 1000 characters.", { status: 422 });
  const filter = request.filter ?? {};
  if (filter.workflowVersionId && !(await getVersionRow(env.DB, actor.installationId, filter.workflowVersionId))) throw notFound("workflow_version");
  if (request.action === "migrate") {
    if (!request.workflowVersionId) throw new AppError("run_operation.version_required", "A migrate names the workflowVersionId to continue on.", { status: 422 });
    const target = await getVersionRow(env.DB, actor.installationId, request.workflowVersionId);
    if (!target) throw notFound("workflow_version");
    if (target.retiredAt) throw conflict("workflow_version.retired", "The target version is retired; pick a live version.");
  }
  const where = filterWhere(actor.installationId, request.action, filter);
  const [count, sample] = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(`SELECT COUNT(*) AS n FROM workflow_runs r WHERE ${where.sql}`).bind(...where.binds),
    env.DB.prepare(`SELECT r.id, r.state, r.workflow_version_id AS workflowVersionId, r.error_code AS errorCode, r.current_node_id AS currentNodeId, r.created_at AS createdAt
      FROM workflow_runs r WHERE ${where.sql} ORDER BY r.created_at, r.id LIMIT ${SAMPLE}`).bind(...where.binds),
  ]);
  const matching = Number(count!.results[0]?.n ?? 0);
  if (request.dryRun) return { dryRun: true as const, action: request.action, count: matching, sample: sample!.results, limit: MAX_OPERATION_RUNS };
  if (matching > MAX_OPERATION_RUNS) {
    throw new AppError("run_operation.too_many", `The filter matches ${matching} runs; one operation takes at most ${MAX_OPERATION_RUNS}. Narrow it (createdBefore/createdAfter).`, { status: 422 });
  }
  const requestDigest = `sha256:${await sha256Hex(canonicalJson({ a: request.action, f: filter, v: request.workflowVersionId ?? null, r: reason }))}`;
  const id = newId("rop");
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO run_operations (id, installation_id, action, filter_json, target_version_id, reason, state, total, actor_json, idempotency_key, request_digest, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', 0, ?7, ?8, ?9, ?10, ?10) ON CONFLICT(installation_id, idempotency_key) DO NOTHING`).bind(
      id,
      actor.installationId,
      request.action,
      canonicalJson(filter),
      request.workflowVersionId ?? null,
      reason,
      JSON.stringify(actor.audit),
      idempotencyKey ?? null,
      requestDigest,
      at,
    ),
    env.DB.prepare(`INSERT INTO run_operation_items (operation_id, run_id, seq, state, updated_at)
      SELECT ?8, r.id, ROW_NUMBER() OVER (ORDER BY r.created_at, r.id), 'pending', ?9 FROM workflow_runs r
      WHERE ${where.sql} AND EXISTS (SELECT 1 FROM run_operations WHERE id = ?8) LIMIT ${MAX_OPERATION_RUNS}`).bind(...where.binds, id, at),
    env.DB.prepare(`UPDATE run_operations SET total = (SELECT COUNT(*) FROM run_operation_items WHERE operation_id = ?1) WHERE id = ?1`).bind(id),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `run_operation:${id}:created`,
      action: "workflow.run_operation_created",
      actor: actor.audit,
      target: { type: "run_operation", id },
      details: { action: request.action, filter: { ...filter }, workflowVersionId: request.workflowVersionId ?? null, reason, matching },
      at,
    }),
  ]);
  const row = idempotencyKey
    ? await env.DB.prepare(`SELECT ${OPERATION_COLUMNS} FROM run_operations WHERE installation_id = ?1 AND idempotency_key = ?2`).bind(actor.installationId, idempotencyKey).first<OperationRow>()
    : await operationRow(env.DB, actor.installationId, id);
  if (!row) throw new AppError("run_operation.create_failed", "The operation could not be recorded.", { status: 500 });
  const replayed = row.id !== id;
  if (replayed && row.requestDigest !== requestDigest) throw conflict("idempotency_key.reused", "This Idempotency-Key was already used for a different request.");
  // Queued again on a replay too: a lost first send is harmless to repeat (items are done once).
  if (row.state !== "completed") await env.RUN_OPERATIONS.send({ operationId: row.id });
  return { dryRun: false as const, replayed, operation: serializeOperation(row) };
}

/** An operation and its progress, with the runs that failed (first 50). */
export async function getRunOperation(env: Env, actor: Actor, id: string) {
  const row = await operationRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("run_operation");
  const { results } = await env.DB.prepare(`SELECT run_id AS runId, error_code AS errorCode FROM run_operation_items WHERE operation_id = ?1 AND state = 'failed' ORDER BY seq LIMIT 50`)
    .bind(id)
    .all<{ runId: string; errorCode: string | null }>();
  return serializeOperation(row, results);
}

/** Codes that mean the run is no longer one the operation takes (someone else got there first). */
const SKIPPED = new Set(["run.not_repairable", "run.terminal", "run.repair_conflict", "run.not_found"]);

/** One chunk of an operation's pending items; queues the next chunk, or completes the operation. */
export async function processRunOperation(env: Env, ctx: ExecutionContext, operationId: string): Promise<{ done: number; remaining: number }> {
  const op = await env.DB.prepare(`SELECT ${OPERATION_COLUMNS} FROM run_operations WHERE id = ?1`).bind(operationId).first<OperationRow>();
  if (!op || op.state === "completed") return { done: 0, remaining: 0 };
  const actor: Actor = { installationId: op.installationId, scopes: ["admin"], audit: JSON.parse(op.actorJson) as Actor["audit"] };
  const { results: items } = await env.DB.prepare(`SELECT run_id AS runId FROM run_operation_items WHERE operation_id = ?1 AND state = 'pending' ORDER BY seq LIMIT ${CHUNK}`).bind(operationId).all<{ runId: string }>();
  const at = () => new Date().toISOString();
  if (op.state === "queued") await env.DB.prepare(`UPDATE run_operations SET state = 'running', updated_at = ?2 WHERE id = ?1 AND state = 'queued'`).bind(operationId, at()).run();
  for (const item of items) {
    let state: "succeeded" | "failed" | "skipped" = "succeeded";
    let code: string | null = null;
    try {
      if (op.action === "terminate") await terminateRun(env, actor, item.runId);
      else
        await repairRun(env, ctx, actor, item.runId, {
          action: op.action,
          reason: op.reason,
          operationId,
          ...(op.targetVersionId ? { workflowVersionId: op.targetVersionId } : {}),
        });
    } catch (error) {
      code = errorCode(error);
      state = SKIPPED.has(code) ? "skipped" : "failed";
    }
    await env.DB.prepare(`UPDATE run_operation_items SET state = ?3, error_code = ?4, updated_at = ?5 WHERE operation_id = ?1 AND run_id = ?2 AND state = 'pending'`).bind(operationId, item.runId, state, code, at()).run();
    await yieldToRuntime();
  }
  const counts = await env.DB.prepare(`SELECT COUNT(*) AS remaining FROM run_operation_items WHERE operation_id = ?1 AND state = 'pending'`).bind(operationId).first<{ remaining: number }>();
  const remaining = counts?.remaining ?? 0;
  const finishedAt = at();
  await env.DB.batch([
    env.DB.prepare(`UPDATE run_operations SET
        processed = (SELECT COUNT(*) FROM run_operation_items WHERE operation_id = ?1 AND state != 'pending'),
        succeeded = (SELECT COUNT(*) FROM run_operation_items WHERE operation_id = ?1 AND state = 'succeeded'),
        failed = (SELECT COUNT(*) FROM run_operation_items WHERE operation_id = ?1 AND state = 'failed'),
        skipped = (SELECT COUNT(*) FROM run_operation_items WHERE operation_id = ?1 AND state = 'skipped'),
        state = CASE WHEN ?2 = 0 THEN 'completed' ELSE 'running' END,
        finished_at = CASE WHEN ?2 = 0 THEN ?3 ELSE NULL END, updated_at = ?3
      WHERE id = ?1 AND state != 'completed'`).bind(operationId, remaining, finishedAt),
    ...(remaining === 0
      ? [
          auditStatement(env.DB, {
            installationId: op.installationId,
            idempotencyKey: `run_operation:${operationId}:completed`,
            action: "workflow.run_operation_completed",
            actor: actor.audit,
            target: { type: "run_operation", id: operationId },
            details: { action: op.action, total: op.total },
            at: finishedAt,
          }),
        ]
      : []),
  ]);
  if (remaining > 0) await env.RUN_OPERATIONS.send({ operationId });
  return { done: items.length, remaining };
}

/** One chunk's bound; past it the message is retried, and the chunk's pending items are taken again. */
const CHUNK_DEADLINE_MS = 300_000;

/**
 * The RUN_OPERATIONS queue consumer: one chunk per message, acked or retried on its own; a
 * failure is retried (nothing done twice). The items of a chunk run one at a time with a yield to
 * the runtime between them (src/lib/queue-work.ts).
 */
export async function consumeRunOperations(
  batch: MessageBatch<{ operationId?: unknown; dispatchRunId?: unknown; installationId?: unknown; archiveCaseId?: unknown; archiveRunId?: unknown; at?: unknown }>,
  env: Env,
  ctx: ExecutionContext,
): Promise<void> {
  for (const message of batch.messages) {
    // An ended run the schedule handed over to be archived (run-archive.ts).
    const archiveRunId = typeof message.body?.archiveRunId === "string" ? message.body.archiveRunId : null;
    if (archiveRunId) {
      const outcome = typeof message.body.installationId === "string" ? await archiveRunMessage(env, message.body.installationId, archiveRunId) : "skipped";
      if (outcome === "failed") message.retry({ delaySeconds: 30 });
      else message.ack();
      continue;
    }
    // A closed case the schedule handed over (cases/archive): archived, or held if something of it is live.
    const archiveCaseId = typeof message.body?.archiveCaseId === "string" ? message.body.archiveCaseId : null;
    if (archiveCaseId) {
      // Judged as of the schedule's moment (its own clock; a message only this platform sends), never
      // more than a few days ahead of this isolate's: the local bench runs the schedule days ahead.
      const at = typeof message.body.at === "number" && Number.isFinite(message.body.at) ? new Date(Math.min(message.body.at, Date.now() + 3 * 86_400_000)) : new Date();
      const outcome = typeof message.body.installationId === "string" ? await archiveCaseOrHold(env, message.body.installationId, archiveCaseId, at) : "skipped";
      if (outcome === "failed") message.retry({ delaySeconds: 30 });
      else message.ack();
      continue;
    }
    // A run whose create was refused for Workflows' creation rate: its try after the backoff (runs.ts, deferDispatch).
    const dispatchRunId = typeof message.body?.dispatchRunId === "string" ? message.body.dispatchRunId : null;
    if (dispatchRunId) {
      try {
        if (typeof message.body.installationId === "string") await admitDeferredRun(env, ctx, message.body.installationId, dispatchRunId);
        message.ack();
      } catch (error) {
        console.error("run_admission_failed", dispatchRunId, errorCode(error));
        message.retry({ delaySeconds: 5 });
      }
      continue;
    }
    const operationId = typeof message.body?.operationId === "string" ? message.body.operationId : null;
    if (!operationId) {
      message.ack();
      continue;
    }
    try {
      await withDeadline(processRunOperation(env, ctx, operationId), CHUNK_DEADLINE_MS);
      message.ack();
    } catch (error) {
      console.error("run_operation_failed", operationId, errorCode(error));
      message.retry({ delaySeconds: 5 });
    }
  }
  await yieldToRuntime();
}
