// Workflow runs: create (idempotent), read, send events (dispatch into Workflows: run-dispatch.ts;
// terminate: run-end.ts).
import { auditStatement, canonicalJson } from "../audit";
import { storedRunInput } from "./run-input";
import { hotOrArchived, isDataKeyDestroyed, openPersonalData } from "../cases";
import { AppError, conflict, notFound } from "../errors";
import { byteLength, newId, sha256Hex } from "../lib/crypto";
import { queueLimitOf, runInQueuesSql, type Actor } from "../auth";
import { signalRun } from "./instances";
import { startInstance, type StartInstance } from "./run-dispatch";
import { runChildren } from "./run-archive-read";
import { getRunByIdempotencyKey, getRunRow, runEventStatement, waitingWaitsForEvent, type RunRow } from "./runs-queries";
import type { JsonObject, WorkflowAuthorityMode } from "./types";
import { TERMINAL_RUN_STATES } from "./types";

export const MAX_RUN_INPUT_BYTES = 262_144;
export const MAX_EVENT_PAYLOAD_BYTES = 65_536;

export interface CreateRunInput {
  workflowVersionId: string;
  authorityMode: WorkflowAuthorityMode;
  input: JsonObject;
  reportId?: string;
  appealId?: string;
  backtestId?: string;
  idempotencyKey?: string;
  parent?: { runId: string; nodeId: string };
}

export function isTerminal(state: string): boolean {
  return (TERMINAL_RUN_STATES as readonly string[]).includes(state);
}

/**
 * Creates a run and starts its Workflows instance. With an idempotency key, a repeat returns the
 * first run (and finishes its dispatch if that had failed); the same key with a different request
 * is a 409. A dispatch failure leaves the run in `dispatch_pending` and answers 503. A run whose
 * instance this call started is answered `queued` and stays `dispatch_pending` in D1 until the
 * instance's first step moves it on (startInstance): no statement marks it in between, and a run
 * whose start was lost after all is the dispatch sweep's, as one whose dispatch failed.
 */
export async function createRun(
  env: Env,
  ctx: ExecutionContext,
  actor: Actor,
  input: CreateRunInput,
  options: {
    start?: StartInstance;
    /**
     * The version as this request already read it (versionJsonSql), when every row the run names
     * (its report, appeal) is one this request read of the installation: no statement reads it again.
     */
    version?: ReadVersion;
  } = {},
): Promise<{ run: RunRow; replayed: boolean }> {
  const version: VersionForRun | null = options.version ? { ...options.version, report: 1, appeal: 1, backtest: 1, parent: 1 } : await versionForRun(env.DB, actor.installationId, input);
  if (!version) throw notFound("workflow_version");
  if (version.retiredAt) throw conflict("workflow_version.retired", "The workflow version is retired; publish or pick a live version.");
  assertReferencesInInstallation(version);
  const inputJson = canonicalJson(input.input);
  if (byteLength(inputJson) > MAX_RUN_INPUT_BYTES) throw new AppError("run.input_too_large", `Run input may be at most ${MAX_RUN_INPUT_BYTES} bytes.`, { status: 413 });
  const fullDigest = await sha256Hex(canonicalJson({ v: input.workflowVersionId, m: input.authorityMode, i: input.input, r: input.reportId ?? null, a: input.appealId ?? null }));
  // Compared only when the same Idempotency-Key comes again: kept for keyed runs alone, as its
  // first 128 bits (a row of an earlier release holds `sha256:` and all 256).
  const requestDigest = input.idempotencyKey === undefined ? null : fullDigest.slice(0, 32);
  const id = newId("run");
  const at = new Date().toISOString();
  const [inserted] = await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO workflow_runs (
        id, installation_id, workflow_version_id, authority_mode, state, input_json, report_id, appeal_id, backtest_id,
        parent_run_id, parent_node_id, idempotency_key, request_digest, created_at, updated_at, instance_id
      ) VALUES (?1, ?2, ?3, ?4, 'dispatch_pending', ?5, ?6, ?12, ?13, ?7, ?8, ?9, ?10, ?11, ?11, NULL)
      ON CONFLICT(installation_id, idempotency_key) DO NOTHING
    `).bind(
      id,
      actor.installationId,
      input.workflowVersionId,
      input.authorityMode,
      storedRunInput(inputJson, input.reportId ?? null),
      input.reportId ?? null,
      input.parent?.runId ?? null,
      input.parent?.nodeId ?? null,
      input.idempotencyKey ?? null,
      requestDigest,
      at,
      input.appealId ?? null,
      input.backtestId ?? null,
    ),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `run:${id}:created`,
        action: "workflow.run_created",
        actor: actor.audit,
        target: { type: "workflow_run", id },
        details: { workflowVersionId: input.workflowVersionId, workflowName: version.workflowName, version: version.version, authorityMode: input.authorityMode, parentRunId: input.parent?.runId ?? null },
        at,
      },
      { table: "workflow_runs", id },
    ),
  ]);
  // A run this call inserted is the row just written (no read back); a repeat reads the first one.
  const run =
    (inserted?.meta.changes ?? 0) === 1
      ? insertedRun(actor.installationId, version, input, { id, inputJson, requestDigest, at })
      : input.idempotencyKey
        ? await getRunByIdempotencyKey(env.DB, actor.installationId, input.idempotencyKey)
        : await getRunRow(env.DB, actor.installationId, id);
  if (!run) throw new AppError("run.create_failed", "The run could not be created.", { status: 500 });
  const replayed = run.id !== id;
  if (replayed && !sameRequest(run.requestDigest, fullDigest)) {
    throw conflict("idempotency_key.reused", "This Idempotency-Key was already used for a different request.");
  }
  if (run.state !== "dispatch_pending" && run.state !== "created") return { run, replayed };
  // The version read above is live and the run's (a replay's run has the same version: its digest names it).
  const versionLive = run.workflowVersionId === input.workflowVersionId && run.artifactId === version.artifactId;
  // Started by this call (or found started): its instance is queued in Workflows, which is what the
  // answer says. A deferred run (its admission was written) or one that moved on meanwhile is read again.
  const started = await startInstance(env, ctx, run, options.start, versionLive);
  if (started === "started" || started === "exists") return { run: { ...run, state: "queued" }, replayed };
  return { run: (await getRunRow(env.DB, actor.installationId, run.id))!, replayed };
}

/** The version a run is created for, with whether each row the run names is the installation's (one statement). */
interface VersionForRun {
  workflowId: string;
  workflowName: string;
  version: number;
  artifactId: string;
  retiredAt: string | null;
  report: number;
  appeal: number;
  backtest: number;
  parent: number;
}

/** The version a run is created for, as read in another statement of the same request (versionJsonSql). */
export type ReadVersion = Pick<VersionForRun, "workflowId" | "workflowName" | "version" | "artifactId" | "retiredAt">;

/**
 * What versionForRun reads of the version `versionId` of installation `installation` (two SQL
 * expressions), as one JSON value (null: no such version, or its artifact is missing), for a
 * statement of the caller's that reads it beside what it reads anyway (intake's triggers).
 */
export function versionJsonSql(installation: string, versionId: string): string {
  return `(SELECT json_object('workflowId', v.workflow_id, 'workflowName', w.name, 'version', v.version, 'artifactId', v.artifact_id, 'retiredAt', v.retired_at)
    FROM workflow_versions v JOIN workflows w ON w.id = v.workflow_id JOIN workflow_artifacts a ON a.id = v.artifact_id
    WHERE v.installation_id = ${installation} AND v.id = ${versionId})`;
}

function versionForRun(db: D1Database, installationId: string, input: CreateRunInput): Promise<VersionForRun | null> {
  return db
    .prepare(`SELECT v.workflow_id AS workflowId, w.name AS workflowName, v.version, v.artifact_id AS artifactId, v.retired_at AS retiredAt,
      (?3 IS NULL OR EXISTS (SELECT 1 FROM reports WHERE installation_id = ?1 AND id = ?3)) AS report,
      (?4 IS NULL OR EXISTS (SELECT 1 FROM appeals WHERE installation_id = ?1 AND id = ?4)) AS appeal,
      (?5 IS NULL OR EXISTS (SELECT 1 FROM backtests WHERE installation_id = ?1 AND id = ?5)) AS backtest,
      (?6 IS NULL OR EXISTS (SELECT 1 FROM workflow_runs WHERE installation_id = ?1 AND id = ?6)) AS parent
    FROM workflow_versions v JOIN workflows w ON w.id = v.workflow_id JOIN workflow_artifacts a ON a.id = v.artifact_id
    WHERE v.installation_id = ?1 AND v.id = ?2`)
    .bind(installationId, input.workflowVersionId, input.reportId ?? null, input.appealId ?? null, input.backtestId ?? null, input.parent?.runId ?? null)
    .first<VersionForRun>();
}

/** Whether a keyed run's stored request digest (128 bits, or `sha256:` and 256 from an earlier release) is this request's. */
function sameRequest(stored: string | null, fullDigest: string): boolean {
  return stored === (stored?.startsWith("sha256:") ? `sha256:${fullDigest}` : fullDigest.slice(0, 32));
}

/** The row createRun's INSERT wrote, as getRunRow would read it. */
function insertedRun(installationId: string, version: VersionForRun, input: CreateRunInput, row: { id: string; inputJson: string; requestDigest: string | null; at: string }): RunRow {
  return {
    id: row.id,
    installationId,
    workflowVersionId: input.workflowVersionId,
    artifactId: version.artifactId,
    authorityMode: input.authorityMode,
    state: "dispatch_pending",
    inputJson: row.inputJson,
    outputJson: null,
    errorCode: null,
    errorSummary: null,
    errorDetailsJson: null,
    reportId: input.reportId ?? null,
    parentRunId: input.parent?.runId ?? null,
    parentNodeId: input.parent?.nodeId ?? null,
    idempotencyKey: input.idempotencyKey ?? null,
    requestDigest: row.requestDigest,
    currentNodeId: null,
    instanceId: row.id,
    repairCount: 0,
    createdAt: row.at,
    startedAt: null,
    finishedAt: null,
    updatedAt: row.at,
    workflowId: version.workflowId,
    workflowName: version.workflowName,
    workflowVersion: version.version,
    archivedAt: null,
    archiveDigest: null,
    archiveSealedErasedAt: null,
  };
}

/**
 * Every row a run names (its report, appeal, backtest, parent run) must be the caller's
 * installation's: the runtime later reads them by the run alone (`report` in expressions,
 * content, effects), so a foreign id taken here would be a read across installations. 404 otherwise.
 * Checked in the statement that reads the version (versionForRun).
 */
function assertReferencesInInstallation(found: VersionForRun): void {
  if (!found.report) throw notFound("report");
  if (!found.appeal) throw notFound("appeal");
  if (!found.backtest) throw notFound("backtest");
  if (!found.parent) throw notFound("run");
}

function parseJson(text: string | null): unknown {
  return text === null ? null : JSON.parse(text);
}

export function serializeRun(run: RunRow) {
  return {
    id: run.id,
    workflowVersionId: run.workflowVersionId,
    workflowId: run.workflowId ?? null,
    workflowName: run.workflowName ?? null,
    workflowVersion: run.workflowVersion ?? null,
    authorityMode: run.authorityMode,
    state: run.state,
    input: parseJson(run.inputJson),
    output: parseJson(run.outputJson),
    // The host's own account (message, and details such as a validator's paths); never the sandbox's.
    error: run.errorCode ? { code: run.errorCode, summary: run.errorSummary, ...(run.errorDetailsJson ? { details: parseJson(run.errorDetailsJson) } : {}) } : null,
    reportId: run.reportId,
    parentRunId: run.parentRunId,
    currentNodeId: run.currentNodeId,
    instanceId: run.instanceId,
    repairCount: run.repairCount,
    createdAt: run.createdAt,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    updatedAt: run.updatedAt,
  };
}

/**
 * A run with its steps (node, kind, branch, state, output, digest, times) and waits. An archived
 * run (run-archive.ts) answers the same, from its R2 object.
 */
export async function getRunDetail(env: Env, actor: Actor, runId: string) {
  const run = await hotOrArchived(env, actor.installationId, "run", runId, () => getRunRow(env.DB, actor.installationId, runId));
  if (!run) throw notFound("run");
  await assertRunInQueues(env.DB, actor, runId);
  const { steps, waits, repairs } = await runChildren(env, run);
  return {
    ...serializeRun(run),
    // A step that read content shows its open view; the rest is sealed (`sealed: true`, opened by getRunContent).
    steps: steps.map(({ outputJson, sealedJson, ...step }) => ({ ...step, branchKey: step.branchKey || "main", output: parseJson(outputJson), sealed: sealedJson !== null })),
    waits,
    // Each repair: what, from which node, who and why, and the instance it started.
    repairs,
  };
}

/** A console user limited to some queues sees a run only through them (`runInQueuesSql`); any other run is a 404. */
export async function assertRunInQueues(db: D1Database, actor: Actor, runId: string): Promise<void> {
  const queues = queueLimitOf(actor);
  if (queues === null) return;
  const seen = await db
    .prepare(`SELECT 1 AS x FROM workflow_runs r WHERE r.installation_id = ?1 AND r.id = ?2 AND ${runInQueuesSql("r", "?3")}`)
    .bind(actor.installationId, runId, queues)
    .first();
  if (!seen) throw notFound("run");
}

/** The sealed outputs of a run's steps, opened for a reader of personal data; the access is audited. */
export async function getRunContent(env: Env, actor: Actor, runId: string) {
  const run = await hotOrArchived(env, actor.installationId, "run", runId, () => getRunRow(env.DB, actor.installationId, runId));
  if (!run) throw notFound("run");
  await assertRunInQueues(env.DB, actor, runId);
  const steps = (await runChildren(env, run)).steps.filter((step) => step.sealedJson !== null);
  const items = [];
  for (const step of steps) {
    let output: unknown;
    try {
      output = await openPersonalData<unknown>(env, actor.installationId, `step_output:${step.id}`, step.sealedJson!);
    } catch (error) {
      // Sealed under a period key retention destroyed: erased, so not listed (as a dropped output is not).
      if (isDataKeyDestroyed(error)) continue;
      throw error;
    }
    items.push({ stepId: step.id, nodeId: step.nodeId, kind: step.kind, branchKey: step.branchKey || "main", output });
  }
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `run:${run.id}:content_viewed:${crypto.randomUUID()}`,
    action: "workflow.run_content_viewed",
    actor: actor.audit,
    target: { type: "workflow_run", id: run.id },
    details: { steps: items.map((item) => item.stepId) },
    at: new Date().toISOString(),
  }).run();
  return { runId: run.id, items };
}

/**
 * Records an event for every wait of the run that listens for `type`, then signals the instance.
 * The event is in D1 before it is sent, so completeWait can verify it.
 */
export async function sendRunEvent(env: Env, actor: Actor, runId: string, event: { type: string; payload: JsonObject }) {
  const run = await hotOrArchived(env, actor.installationId, "run", runId, () => getRunRow(env.DB, actor.installationId, runId));
  if (!run) throw notFound("run");
  if (isTerminal(run.state)) throw conflict("run.terminal", `The run is ${run.state} and takes no more events.`);
  const payloadJson = canonicalJson(event.payload);
  if (byteLength(payloadJson) > MAX_EVENT_PAYLOAD_BYTES) throw new AppError("run.event_too_large", `An event payload may be at most ${MAX_EVENT_PAYLOAD_BYTES} bytes.`, { status: 413 });
  const waits = await waitingWaitsForEvent(env.DB, run.id, event.type);
  if (waits.length === 0) throw conflict("run.no_matching_wait", "The run is not waiting for an event of this type.");
  const at = new Date().toISOString();
  const deliveries = waits.map((wait) => ({ wait, eventId: newId("evt") }));
  await env.DB.batch([
    ...deliveries.map(({ wait, eventId }) =>
      runEventStatement(env.DB, {
        id: eventId,
        installationId: actor.installationId,
        runId: run.id,
        waitId: wait.id,
        type: event.type,
        payloadJson,
        at,
      }),
    ),
    ...deliveries.map(({ wait, eventId }) =>
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `event:${eventId}:recorded`,
        action: "workflow.event_recorded",
        actor: actor.audit,
        target: { type: "workflow_run", id: run.id },
        details: { eventId, waitId: wait.id, type: event.type },
        at,
      }),
    ),
  ]);
  for (const { wait, eventId } of deliveries) await signalRunEvent(env, run.id, wait.signalType, eventId);
  return { delivered: deliveries.map(({ wait, eventId }) => ({ eventId, waitId: wait.id })) };
}

/**
 * Wakes the run's wait on `signalType` with the id of an event recorded for it (never the event
 * itself). `instanceId`: the run's current instance when the caller read it after recording the
 * event (COALESCE(instance_id, id) of its run row), which spares reading it again.
 */
export async function signalRunEvent(env: Env, runId: string, signalType: string, eventId: string, instanceId?: string): Promise<void> {
  await signalRun(env, runId, { type: signalType, payload: { eventId } }, instanceId);
}
