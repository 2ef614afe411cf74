// SQL for workflow runs, steps, waits and events. Every function that reads tenant data takes the
// installation id; the ones that do not (host-internal) say so with `Unsafe`.
import { auditStatement, RUNTIME_ACTOR, type AuditEventInput } from "../audit";
import { runInQueuesSql } from "../auth";
import { runEndTaskStatements } from "../cases";
import { rowGuardClause, type RowGuard } from "../lib/d1";
import { runInputJson, runOutputJson } from "./run-input";
import { STEP_OUTPUT as OUTPUT } from "./step-output";

export interface RunRow {
  id: string;
  installationId: string;
  workflowVersionId: string;
  artifactId: string;
  authorityMode: string;
  state: string;
  inputJson: string;
  outputJson: string | null;
  errorCode: string | null;
  errorSummary: string | null;
  errorDetailsJson: string | null;
  reportId: string | null;
  parentRunId: string | null;
  parentNodeId: string | null;
  idempotencyKey: string | null;
  requestDigest: string | null;
  currentNodeId: string | null;
  /** The run's current Workflows instance (the run id until a repair starts another). */
  instanceId: string;
  repairCount: number;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
  /** The workflow's id, name and the version's number (lists show names, not only ids). */
  workflowId?: string | null;
  workflowName?: string | null;
  workflowVersion?: number | null;
  /** Storage tiers (run-archive.ts): when the child rows moved to R2, the object's digest, and when retention erased its sealed outputs. Not part of the API's run. */
  archivedAt?: string | null;
  archiveDigest?: string | null;
  archiveSealedErasedAt?: string | null;
}

const RUN_COLUMNS = `
  r.id, r.installation_id AS installationId, r.workflow_version_id AS workflowVersionId,
  v.artifact_id AS artifactId, r.authority_mode AS authorityMode, r.state,
  r.input_json AS inputJson, r.output_json AS outputJson, r.error_code AS errorCode,
  r.error_summary AS errorSummary, r.error_details_json AS errorDetailsJson, r.report_id AS reportId, r.parent_run_id AS parentRunId,
  r.parent_node_id AS parentNodeId, r.idempotency_key AS idempotencyKey, r.request_digest AS requestDigest,
  r.current_node_id AS currentNodeId, COALESCE(r.instance_id, r.id) AS instanceId, r.repair_count AS repairCount, r.created_at AS createdAt, r.started_at AS startedAt,
  r.finished_at AS finishedAt, r.updated_at AS updatedAt,
  r.archived_at AS archivedAt, r.archive_digest AS archiveDigest, r.archive_sealed_erased_at AS archiveSealedErasedAt,
  v.workflow_id AS workflowId, v.version AS workflowVersion,
  (SELECT w.name FROM workflows w WHERE w.id = v.workflow_id AND w.installation_id = r.installation_id) AS workflowName`;

/** A row as read, its input and output in canonical JSON whichever form they are stored in (run-input.ts). */
function withInput(row: RunRow | null): RunRow | null {
  return row ? { ...row, inputJson: runInputJson(row.inputJson, row.reportId), outputJson: runOutputJson(row.outputJson) } : null;
}

export async function getRunRow(db: D1Database, installationId: string, runId: string): Promise<RunRow | null> {
  return withInput(
    await db
      .prepare(`SELECT ${RUN_COLUMNS} FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id AND v.installation_id = r.installation_id
    WHERE r.installation_id = ?1 AND r.id = ?2`)
      .bind(installationId, runId)
      .first<RunRow>(),
  );
}

export async function getRunByIdempotencyKey(db: D1Database, installationId: string, key: string): Promise<RunRow | null> {
  return withInput(
    await db
      .prepare(`SELECT ${RUN_COLUMNS} FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id AND v.installation_id = r.installation_id
    WHERE r.installation_id = ?1 AND r.idempotency_key = ?2`)
      .bind(installationId, key)
      .first<RunRow>(),
  );
}

/** Runs newest first; `queues` (a queue-limited console user's, `queueLimitOf`) keeps only the runs those queues hold work of. */
export async function listRunRows(db: D1Database, installationId: string, options: { limit: number; before?: { createdAt: string; id: string }; state?: string; workflowVersionId?: string; queues?: string | null }): Promise<RunRow[]> {
  const { results } = await db
    .prepare(`SELECT ${RUN_COLUMNS} FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id AND v.installation_id = r.installation_id
    WHERE r.installation_id = ?1
      AND (?2 IS NULL OR r.created_at < ?2 OR (r.created_at = ?2 AND r.id < ?3))
      AND (?4 IS NULL OR r.state = ?4)
      AND (?5 IS NULL OR r.workflow_version_id = ?5)
      AND ${runInQueuesSql("r", "?7")}
    ORDER BY r.created_at DESC, r.id DESC LIMIT ?6`)
    .bind(installationId, options.before?.createdAt ?? null, options.before?.id ?? null, options.state ?? null, options.workflowVersionId ?? null, options.limit, options.queues ?? null)
    .all<RunRow>();
  return results.map((row) => withInput(row)!);
}

export async function listStepRows(db: D1Database, runId: string) {
  const { results } = await db
    .prepare(`
    SELECT s.id, s.node_id AS nodeId, s.node_type AS kind, s.branch_key AS branchKey, s.state, s.attempt,
      s.output_digest AS outputDigest, s.error_code AS errorCode, ${OUTPUT.json} AS outputJson, ${OUTPUT.sealed} AS sealedJson,
      s.started_at AS startedAt, s.waiting_at AS waitingAt, s.finished_at AS finishedAt, s.updated_at AS updatedAt
    FROM workflow_step_runs s ${OUTPUT.join}
    WHERE s.run_id = ?1 ORDER BY s.started_at, s.rowid`) // a fused group records its nodes in one batch, often in one millisecond: the order they ran
    .bind(runId)
    .all<{
      id: string;
      nodeId: string;
      kind: string;
      branchKey: string;
      state: string;
      attempt: number;
      outputDigest: string | null;
      errorCode: string | null;
      outputJson: string | null;
      sealedJson: string | null;
      startedAt: string | null;
      waitingAt: string | null;
      finishedAt: string | null;
      updatedAt: string;
    }>();
  return results;
}

export async function listWaitRows(db: D1Database, runId: string) {
  const { results } = await db
    .prepare(`
    SELECT w.id, w.step_run_id AS stepRunId, w.wait_type AS waitType, w.event_type AS eventType, w.state,
      w.deadline_at AS deadlineAt, w.created_at AS createdAt, w.satisfied_at AS satisfiedAt
    FROM workflow_waits w WHERE w.run_id = ?1 ORDER BY w.created_at, w.id`)
    .bind(runId)
    .all<{
      id: string;
      stepRunId: string;
      waitType: string;
      eventType: string;
      state: string;
      deadlineAt: string;
      createdAt: string;
      satisfiedAt: string | null;
    }>();
  return results;
}

export async function waitingWaitsForEvent(db: D1Database, runId: string, eventType: string) {
  const { results } = await db
    .prepare(`
    SELECT id, signal_type AS signalType FROM workflow_waits
    WHERE run_id = ?1 AND state = 'waiting' AND wait_type = 'event' AND event_type = ?2
    ORDER BY created_at, id`)
    .bind(runId, eventType)
    .all<{ id: string; signalType: string }>();
  return results;
}

/** SQL for the wait of the step `stepRunIdSql` names in the run `runIdSql` names, as a JSON object of waitOfStepUnsafe's columns (null when none): read beside the row that names the step (a row naming another run's step finds no wait). */
export const waitOfStepJsonSql = (stepRunIdSql: string, runIdSql: string) =>
  `(SELECT json_object('id', id, 'state', state, 'signalType', signal_type, 'deadlineAt', deadline_at) FROM workflow_waits WHERE step_run_id = ${stepRunIdSql} AND run_id = ${runIdSql})`;

/** Host-internal: the wait of a step (a human_task's, for the task it belongs to). */
export function waitOfStepUnsafe(db: D1Database, stepRunId: string) {
  return db.prepare(`SELECT id, state, signal_type AS signalType, deadline_at AS deadlineAt FROM workflow_waits WHERE step_run_id = ?1`).bind(stepRunId).first<{ id: string; state: string; signalType: string; deadlineAt: string }>();
}

/** Host-internal: the first event recorded for a wait (re-sent when a completion is repeated). */
export function firstEventOfWaitUnsafe(db: D1Database, waitId: string) {
  return db.prepare(`SELECT id FROM workflow_events WHERE wait_id = ?1 ORDER BY created_at LIMIT 1`).bind(waitId).first<{ id: string }>();
}

/**
 * Records an event for a wait (before the run is signalled, so completeWait can verify it). With
 * `onlyIf`, only when that row exists by then in the batch (e.g. the task the event completes).
 */
/** The id of the event the schedule records when a wait's deadline passed (workflows/sweeps.ts): completeWait takes it as the timeout. */
export function deadlineEventId(waitId: string): string {
  return `${waitId}:deadline`;
}

export function runEventStatement(db: D1Database, event: { id: string; installationId: string; runId: string; waitId: string; type: string; payloadJson: string; at: string }, onlyIf?: RowGuard): D1PreparedStatement {
  const guard = onlyIf ? rowGuardClause(onlyIf, 8) : { sql: "", binds: [] };
  return db
    .prepare(`
    INSERT INTO workflow_events (id, installation_id, run_id, wait_id, type, payload_json, created_at)
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 ${guard.sql}
  `)
    .bind(event.id, event.installationId, event.runId, event.waitId, event.type, event.payloadJson, event.at, ...guard.binds);
}

/** The waits a run's end cancels (?1 the run): what runEndWaitStatements reads when not given `ids`. */
export const RUN_END_WAITS_SQL = `SELECT id FROM workflow_waits WHERE run_id = ?1 AND state = 'waiting'`;

/**
 * For the batch that ends a run (after its state change): every wait still waiting is cancelled,
 * each with a `workflow.wait_cancelled` audit event. The update holds only once the run is
 * terminal in that batch. Not for `repair_required`: a repaired run resumes its waits.
 */
export async function runEndWaitStatements(db: D1Database, input: { installationId: string; runId: string; runState: string; at: string; actor?: AuditEventInput["actor"]; ids?: string[] }): Promise<D1PreparedStatement[]> {
  const results = input.ids ? input.ids.map((id) => ({ id })) : (await db.prepare(RUN_END_WAITS_SQL).bind(input.runId).all<{ id: string }>()).results;
  if (results.length === 0) return [];
  return [
    db
      .prepare(`UPDATE workflow_waits SET state = 'cancelled', satisfied_at = ?2 WHERE run_id = ?1 AND state = 'waiting'
        AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND state IN ('succeeded', 'failed', 'terminated', 'superseded'))`)
      .bind(input.runId, input.at),
    ...results.map((row) =>
      auditStatement(
        db,
        {
          installationId: input.installationId,
          idempotencyKey: `wait:${row.id}:cancelled`,
          action: "workflow.wait_cancelled",
          actor: input.actor ?? RUNTIME_ACTOR,
          target: { type: "workflow_run", id: input.runId },
          details: { waitId: row.id, reason: `run_${input.runState}` },
          at: input.at,
        },
        { table: "workflow_waits", id: row.id, where: { state: "cancelled", satisfied_at: input.at } },
      ),
    ),
  ];
}

/**
 * Host-internal: the sandbox ended a run with an error. Never overrides a terminal or repair state.
 * Its waits and tasks end in the same batch. Its open action proposals cannot be cancelled here
 * (enforcement imports this domain's index, which reaches this module through the loader): they
 * are refused at approval and at send time (`action_proposal.run_finished`), see
 * enforcement's runEndProposalStatements.
 */
/**
 * The run an instance belongs to (?1): a repaired run stores its instance; any other stores NULL,
 * its instance being its own id. Two index lookups (workflow_runs_instance, the primary key).
 */
export const RUN_BY_INSTANCE_SQL = `SELECT id, installation_id AS installationId FROM workflow_runs WHERE instance_id = ?1 OR (instance_id IS NULL AND id = ?1)`;

export async function markRunFailedUnsafe(env: Env, instanceId: string, code: string): Promise<void> {
  const at = new Date().toISOString();
  // By instance: an instance a repair replaced cannot fail the run that moved on.
  const run = await env.DB.prepare(RUN_BY_INSTANCE_SQL).bind(instanceId).first<{ id: string; installationId: string }>();
  if (!run) return;
  const runId = run.id;
  const ended = { installationId: run.installationId, runId, runState: "failed", at };
  await env.DB.batch([
    env.DB.prepare(`
      UPDATE workflow_runs SET state = 'failed', error_code = ?2, error_summary = 'The workflow ended with an error.',
        finished_at = ?3, updated_at = ?3, revision = revision + 1
      WHERE id = ?1 AND COALESCE(instance_id, id) = ?4 AND state NOT IN ('succeeded', 'failed', 'terminated', 'superseded', 'repair_required')`).bind(runId, code.slice(0, 100), at, instanceId),
    auditStatement(
      env.DB,
      {
        installationId: run.installationId,
        idempotencyKey: `run:${runId}:failed`,
        action: "workflow.run_failed",
        actor: RUNTIME_ACTOR,
        target: { type: "workflow_run", id: runId },
        details: { errorCode: code.slice(0, 100) },
        at,
      },
      { table: "workflow_runs", id: runId, where: { state: "failed", updated_at: at } },
    ),
    ...(await runEndWaitStatements(env.DB, ended)),
    ...(await runEndTaskStatements(env.DB, ended)),
  ]);
}

/** The run's repair history, oldest first. */
export async function listRunRepairs(db: D1Database, installationId: string, runId: string) {
  const { results } = await db
    .prepare(`SELECT id, seq, action, node_id AS nodeId, branch_key AS branchKey, port, from_version_id AS fromVersionId, to_version_id AS toVersionId,
      previous_state AS previousState, previous_error_code AS previousErrorCode, instance_id AS instanceId, reason, actor_json AS actorJson, operation_id AS operationId, created_at AS createdAt
      FROM workflow_run_repairs WHERE installation_id = ?1 AND run_id = ?2 ORDER BY seq`)
    .bind(installationId, runId)
    .all<{
      id: string;
      seq: number;
      action: string;
      nodeId: string | null;
      branchKey: string | null;
      port: string | null;
      fromVersionId: string;
      toVersionId: string;
      previousState: string;
      previousErrorCode: string | null;
      instanceId: string;
      reason: string;
      actorJson: string;
      operationId: string | null;
      createdAt: string;
    }>();
  return results.map(({ actorJson, ...row }) => ({ ...row, actor: JSON.parse(actorJson) as unknown }));
}
