// The D1 statements the runtime writes per step. Each capability method puts its statements in one
// batch (one transaction), keyed so that a repeated call leaves one row, one output, one event.
import { auditStatement, canonicalJson, combineAuditStatements, RUNTIME_ACTOR } from "../audit";
import { sealPersonalData } from "../cases";
import type { AppError } from "../errors";
import { openView } from "./content-access";
import { byteLength, sha256Hex } from "../lib/crypto";
import type { AuthorizedRun } from "./runtime-authorize";
import { STEP_OUTPUT as OUTPUT } from "./step-output";
import { registerStepUpsert, STEP_UPSERT_COLUMNS, STEP_UPSERT_CONFLICT, stepRowValues, type StepUpsertGuard } from "./step-upserts";
import type { WorkflowNodeV1 } from "./types";

export function now(): string {
  return new Date().toISOString();
}

export interface StepOutputRecord {
  /** The open view (the whole output unless the node read content). */
  json: string;
  /** The whole output, sealed, when the open view holds part of it back. */
  sealed: string | null;
  digest: string;
  sizeBytes: number;
}

/** A step output as stored: the digest covers the open view and the sealed part as stored (never the plaintext). */
export async function outputRecord(output: Record<string, unknown>, sealed: string | null = null): Promise<StepOutputRecord> {
  const json = canonicalJson(output);
  const digest = `sha256:${await sha256Hex(sealed ? `${json}\n${sealed}` : json)}`;
  return { json, sealed, digest, sizeBytes: byteLength(json) + (sealed ? byteLength(sealed) : 0) };
}

export type StepUpsertInput = {
  id: string;
  run: AuthorizedRun;
  node: WorkflowNodeV1;
  branchKey: string;
  state: "running" | "waiting" | "succeeded" | "failed" | "timed_out";
  digest?: string;
  errorCode?: string;
  at: string;
  /** The step's output, kept in its row (migration 0070); its digest is `digest`. */
  output?: StepOutputRecord;
};

/**
 * The step row, and its output when it has one, in one statement (a repeated call leaves one row,
 * one output: an output written again replaces the one before, a call without one keeps it).
 * With `guard` (SQL over ?12, bound to `guard.bind`), the upsert is an INSERT … SELECT whose
 * WHERE evaluates the guard first: a guard that raises fails the statement, and so its batch.
 */
export function stepUpsert(db: D1Database, step: StepUpsertInput, guard?: StepUpsertGuard): D1PreparedStatement {
  const columns = "?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, ?10, ?11, ?9, ?13, ?14, ?15";
  const values = guard ? `SELECT ${columns} WHERE ${guard.sql}` : `VALUES (${columns})`;
  const row = stepRowValues(step);
  const statement = db
    .prepare(`
    INSERT INTO workflow_step_runs (
      ${STEP_UPSERT_COLUMNS}
    ) ${values}
    ${STEP_UPSERT_CONFLICT}
  `)
    .bind(...row.slice(0, 11), guard ? guard.bind : null, ...row.slice(11));
  // Registered so that combineStepUpserts (step-upserts.ts) can write several of a batch as one statement.
  return registerStepUpsert(statement, [row], guard);
}

/** A step's row as started (running), unless the step has one already: written only when a call fails before its own records. */
export function stepStartedStatement(db: D1Database, step: { id: string; run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; at: string }): D1PreparedStatement {
  return db
    .prepare(`
    INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, branch_key, occurrence, state, started_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, 1, 'running', ?6, ?6)
    ON CONFLICT(run_id, node_id, branch_key, occurrence) DO NOTHING
  `)
    .bind(step.id, step.run.id, step.node.id, step.node.kind, step.branchKey, step.at);
}

/**
 * Moves a live run to running/waiting; never touches a terminal or repair_required run. Its
 * revision moves once per step (`group`: the steps recorded in the same batch, and when the first of them started).
 */
export function runProgress(db: D1Database, runId: string, nodeId: string, state: "running" | "waiting", at: string, group?: { revisions: number; startedAt: string }): D1PreparedStatement {
  return db
    .prepare(`
    UPDATE workflow_runs SET state = ?4, current_node_id = ?2,
      started_at = COALESCE(started_at, ?6), waiting_at = CASE WHEN ?4 = 'waiting' THEN ?3 ELSE NULL END,
      updated_at = ?3, revision = revision + ?5
    WHERE id = ?1 AND state IN ('created', 'dispatch_pending', 'queued', 'running', 'waiting')
  `)
    .bind(runId, nodeId, at, state, group?.revisions ?? 1, group?.startedAt ?? at);
}

export function runtimeAudit(db: D1Database, run: AuthorizedRun, event: { key: string; action: string; details: Record<string, unknown>; at: string }): D1PreparedStatement {
  return auditStatement(db, {
    installationId: run.installationId,
    idempotencyKey: event.key,
    action: event.action,
    actor: RUNTIME_ACTOR,
    target: { type: "workflow_run", id: run.id },
    details: event.details,
    at: event.at,
  });
}

/**
 * What a step's audit event records, as it always has: the node, its kind, the branch, the port it
 * left by (the way the run went, in the signed trail itself: an output's digest can no longer be
 * checked once retention erases the output) and the digest of its output.
 */
export function stepEventDetails(node: { id: string; kind: string }, branchKey: string, outputDigest: string, port: unknown): Record<string, unknown> {
  return { nodeId: node.id, kind: node.kind, branchKey, port: typeof port === "string" ? port : null, outputDigest };
}

export type StepResultInput = {
  run: AuthorizedRun;
  node: WorkflowNodeV1;
  branchKey: string;
  stepId: string;
  output: Record<string, unknown>;
  /** The whole output sealed, when `output` is its open view. */
  sealed?: string | null;
  state?: "succeeded" | "failed" | "timed_out";
  errorCode?: string;
};

/**
 * A finished step's statements, unwritten: its row (with its output), the run's progress, its
 * audit event; its stored output; and `step`, to write its row again with a guard (stepUpsert).
 */
export async function stepResultParts(
  db: D1Database,
  input: StepResultInput,
  group?: { revisions: number; startedAt: string },
): Promise<{ upsert: D1PreparedStatement; progress: D1PreparedStatement; audit: D1PreparedStatement; record: StepOutputRecord; step: StepUpsertInput }> {
  const at = now();
  const record = await outputRecord(input.output, input.sealed ?? null);
  const state = input.state ?? "succeeded";
  const step: StepUpsertInput = { id: input.stepId, run: input.run, node: input.node, branchKey: input.branchKey, state, digest: record.digest, errorCode: input.errorCode, at, output: record };
  return {
    upsert: stepUpsert(db, step),
    progress: runProgress(db, input.run.id, input.node.id, "running", at, group),
    audit: runtimeAudit(db, input.run, {
      key: `step:${input.stepId}:${state}`,
      action: `workflow.step_${state}`,
      details: stepEventDetails(input.node, input.branchKey, record.digest, input.output.port),
      at,
    }),
    record,
    step,
  };
}

/** A finished step: step row (with its output) and audit event in one batch, plus any extra statements (runs of unguarded audit events combined). */
export async function recordStepResult(db: D1Database, input: StepResultInput & { extra?: D1PreparedStatement[] }): Promise<void> {
  const parts = await stepResultParts(db, input);
  // The step's event and the extra statements' unguarded events go in as one statement.
  await db.batch(combineAuditStatements(db, [parts.upsert, parts.progress, parts.audit, ...(input.extra ?? [])]));
}

/**
 * The host's own account of a step's failure (code, message, details), kept on the step row when
 * the host throws, so a run's error never depends on what the sandbox reports. A step that already
 * finished keeps its state.
 */
export function hostErrorStatement(db: D1Database, step: { id: string; run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; error: AppError; at: string }): D1PreparedStatement {
  const details = step.error.details === undefined ? null : canonicalJson(step.error.details).slice(0, 8_000);
  return db
    .prepare(`
    INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, branch_key, occurrence, state, error_code, error_message, error_details_json, started_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, 1, 'running', ?6, ?7, ?8, ?9, ?9)
    ON CONFLICT(run_id, node_id, branch_key, occurrence) DO UPDATE SET
      error_code = excluded.error_code, error_message = excluded.error_message, error_details_json = excluded.error_details_json, updated_at = excluded.updated_at
    WHERE workflow_step_runs.state IN ('running', 'waiting')
  `)
    .bind(step.id, step.run.id, step.node.id, step.node.kind, step.branchKey, step.error.code, step.error.message.slice(0, 1_000), details, step.at);
}

/** The message and details the host recorded for this step, if it recorded `code`. */
export async function recordedHostError(db: D1Database, stepId: string, code: string): Promise<{ message: string; detailsJson: string | null } | null> {
  const row = await db
    .prepare(`SELECT error_code AS code, error_message AS message, error_details_json AS detailsJson FROM workflow_step_runs WHERE id = ?1`)
    .bind(stepId)
    .first<{ code: string | null; message: string | null; detailsJson: string | null }>();
  return row && row.code === code && row.message ? { message: row.message, detailsJson: row.detailsJson } : null;
}

/**
 * Splits and seals enrichment and AI proposal outputs written before content sealing (migration
 * 0007 marks them `legacy`) once their run has finished: the open view stays, the rest is sealed
 * as if the node had read content. Bounded and idempotent.
 */
export async function sealLegacyStepOutputs(env: Env, limit = 100): Promise<{ sealed: number; kept: number }> {
  const { results } = await env.DB.prepare(`
    SELECT o.step_run_id AS stepId, o.inline_json AS json, s.node_type AS kind, r.installation_id AS installationId
    FROM workflow_step_outputs o JOIN workflow_step_runs s ON s.id = o.step_run_id JOIN workflow_runs r ON r.id = s.run_id
    WHERE o.data_classification_json = '["legacy"]' AND r.state IN ('succeeded', 'failed', 'terminated', 'superseded')
    LIMIT ?1`)
    .bind(limit)
    .all<{ stepId: string; json: string; kind: string; installationId: string }>();
  const statements: D1PreparedStatement[] = [];
  let sealedCount = 0;
  for (const row of results) {
    const output = JSON.parse(row.json) as Record<string, unknown>;
    const view = openView({ id: "legacy", kind: row.kind as WorkflowNodeV1["kind"], config: {} }, true, output);
    if (!view.sealed) {
      statements.push(env.DB.prepare(`UPDATE workflow_step_outputs SET data_classification_json = '[]' WHERE step_run_id = ?1 AND data_classification_json = '["legacy"]'`).bind(row.stepId));
      continue;
    }
    const { sealed } = await sealPersonalData(env, row.installationId, `step_output:${row.stepId}`, output);
    const record = await outputRecord(view.open, sealed);
    statements.push(
      env.DB.prepare(`UPDATE workflow_step_outputs SET inline_json = ?2, sealed_json = ?3, digest = ?4, size_bytes = ?5, data_classification_json = '["content"]'
        WHERE step_run_id = ?1 AND data_classification_json = '["legacy"]'`).bind(row.stepId, record.json, record.sealed, record.digest, record.sizeBytes),
    );
    sealedCount += 1;
  }
  if (statements.length > 0) await env.DB.batch(statements);
  return { sealed: sealedCount, kept: statements.length - sealedCount };
}

/** A step as recorded: its state, and the port and output it finished with (null while it runs). */
export interface RecordedStep {
  state: string;
  /** 1, or more once a repair ran the step again. */
  attempt: number;
  port: string | null;
  json: string | null;
}

/** The step row of a node on a branch, with its output (statement keyed by run id, for the authorization batch). */
export function recordedStepStatement(db: D1Database, runId: string, nodeId: string, branchKey: unknown): D1PreparedStatement {
  const key = typeof branchKey === "string" && branchKey !== "" ? branchKey : "";
  return db
    .prepare(`SELECT s.state, s.attempt, json_extract(${OUTPUT.json}, '$.port') AS port, ${OUTPUT.json} AS json FROM workflow_step_runs s ${OUTPUT.join}
      WHERE s.run_id = ?1 AND s.node_id = ?2 AND s.branch_key = ?3`)
    .bind(runId, nodeId, key);
}

export const FINISHED_STEP_STATES: readonly string[] = ["succeeded", "failed", "timed_out"];
