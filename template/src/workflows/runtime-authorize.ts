// Authorization for every runtime call: run ↔ version ↔ artifact, authority mode, node, state.
import type { WorkflowAuthorityMode, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import { TERMINAL_RUN_STATES } from "./types";
import type { RecordedExit } from "./run-plan";
import type { RecordedStep } from "./runtime-records";
import { parseWorkflowGraph } from "./validation";
import { runInputJson } from "./run-input";
import { STEP_OUTPUT as OUTPUT } from "./step-output";
import { stablePlanSql } from "../lib/stable-plan";

export interface RuntimeProps {
  artifactId: string;
  workflowVersionId: string;
}

export interface AuthorizedRun {
  id: string;
  installationId: string;
  workflowVersionId: string;
  authorityMode: WorkflowAuthorityMode;
  state: string;
  inputJson: string;
  reportId: string | null;
  appealId: string | null;
  backtestId: string | null;
  graph: ParsedWorkflowGraph;
}

/** A capability refusal: crosses RPC as a bare code, which the kernel treats as permanent. */
export function denied(code: string): Error {
  return new Error(code);
}

export function cleanIdentifier(value: unknown, name: string, maximum = 200): string {
  if (typeof value !== "string" || value.length < 1 || value.length > maximum || !/^[A-Za-z0-9._:-]+$/u.test(value)) {
    throw denied(`runtime.invalid_${name}`);
  }
  return value;
}

export function stepRunId(runId: string, nodeId: string, branchKey: string): string {
  return `${runId}:${nodeId}:${branchKey || "main"}:1`;
}

// Versions are immutable, so a version's parsed graph is cached for the life of the isolate.
const graphs = new Map<string, ParsedWorkflowGraph>();
const GRAPH_CACHE_LIMIT = 200;

function cachedGraph(versionId: string, graphJson: string): ParsedWorkflowGraph {
  const cached = graphs.get(versionId);
  if (cached) return cached;
  let parsed: unknown;
  try {
    parsed = JSON.parse(graphJson);
  } catch {
    throw denied("runtime.graph_invalid");
  }
  const graph = parseWorkflowGraph(parsed);
  if (graphs.size >= GRAPH_CACHE_LIMIT) graphs.delete(graphs.keys().next().value!);
  graphs.set(versionId, graph);
  return graph;
}

/** A version's parsed graph, from the isolate's cache (the caller read the version of its installation). */
export function getVersionGraph(versionId: string, graphJson: string): ParsedWorkflowGraph {
  return cachedGraph(versionId, graphJson);
}

/** The version's parsed graph if this isolate has it (versions are immutable). */
export function graphIfCached(versionId: string): ParsedWorkflowGraph | undefined {
  return graphs.get(versionId);
}

type RunRow = Omit<AuthorizedRun, "graph"> & {
  artifactId: string;
  graphJson: string;
  exitsJson?: string | null;
  stepJson?: string | null;
  waitJson?: string | null;
  eventJson?: string | null;
  groupJson?: string | null;
  runEndJson?: string | null;
  reportJson?: string | null;
  latestEventJson?: string | null;
  extraJson?: string | null;
  nextJson?: string | null;
  nextTypeJson?: string | null;
};

/**
 * Step reads folded into the run's own statement as scalar subqueries, so authorization and what
 * the call checks next (reached? already recorded?) are one statement and one snapshot.
 */
export interface RunFolds {
  /** The finished steps of these nodes (a node's predecessors): node, branch and the port each left by. */
  exitsOf?: readonly string[];
  /** The step row of this node on this branch: state, attempt, port, and what a replay answers with. */
  step?: { nodeId: string; branchKey: string };
  /** The wait of this step and, when the kernel names one, the event recorded for that very wait. */
  wait?: { stepId: string; eventId: string | null };
  /**
   * A fused group's step rows with their outputs (of these nodes, or every node with null; sealed
   * outputs only for a group that may open them). Not folded past GROUP_FOLD_MAX_BYTES of outputs:
   * the caller then reads them with a statement of their own.
   */
  group?: { nodeIds: readonly string[] | null; sealed: boolean };
  /** A scalar SQL expression over the run ?1 (run-end.ts RUN_END_OPEN_SQL): what a run ending now would cancel. */
  runEnd?: string;
  /** A scalar SQL expression over the run ?1 (cases' REPORT_SUMMARY_BY_RUN_JSON_SQL): the run's report for a node's context. */
  report?: string;
  /** A scalar SQL expression over the run ?1 (runtime-fused's LATEST_EVENT_JSON_SQL): the run's latest event for a node's context. */
  latestEvent?: string;
  /**
   * One more scalar SQL expression (a JSON value) the call needs once authorized, read in the same
   * statement: built with `param`, which binds a value and returns its placeholder; the run is `r`.
   */
  extra?: (param: (value: unknown) => string) => string;
  /** As `extra`, for what the host walks on to after the call's own node (runtime-ahead.ts: a wait's queue). */
  next?: (param: (value: unknown) => string) => string;
  /** As `next`, for an action the host walks on to (runtime-action-ahead.ts: its action type). */
  nextType?: (param: (value: unknown) => string) => string;
}

/** A step's wait as recorded. */
export interface RecordedWait {
  id: string;
  state: string;
  signalType: string;
  deadlineAt: string;
}

/** An event recorded for a wait. */
export interface RecordedEvent {
  id: string;
  type: string;
  payloadJson: string;
  createdAt: string;
}

/** What the folds read; present only for the folds asked for. */
export interface FoldedReads {
  exits?: RecordedExit[];
  /** undefined: no step row yet. */
  step?: RecordedStep;
  /** undefined: the step has no wait. */
  wait?: RecordedWait;
  /** undefined: no event of that id recorded for the step's wait. */
  event?: RecordedEvent;
  /** undefined: not folded (not asked for, or its outputs too large to fold). */
  group?: Array<Record<string, unknown>>;
  /** The `runEnd` expression's value (JSON text). */
  runEnd?: string;
  /** The `report` expression's value (JSON text, or null: the run has no report). */
  report?: string | null;
  /** The `latestEvent` expression's value (JSON text, or null: the run has no event). */
  latestEvent?: string | null;
  /** The `extra` expression's value (JSON text, or null). */
  extra?: string | null;
  /** The `next` expression's value (JSON text, or null). */
  next?: string | null;
  /** The `nextType` expression's value (JSON text, or null). */
  nextType?: string | null;
}

/** Outputs up to this many bytes are folded into the run's statement (one D1 value stays far under D1's limits). */
export const GROUP_FOLD_MAX_BYTES = 262_144;

const FINISHED_SQL = "'succeeded', 'failed', 'timed_out'";

function runStatement(db: D1Database, runId: string, folds: RunFolds = {}): D1PreparedStatement {
  const { sql, binds } = runQuery(runId, folds);
  return db.prepare(sql).bind(...binds);
}

/** The run's read with its folds (runStatement): its SQL, planned once (lib/stable-plan.ts), and its values. Exported for the plan tests. */
export function runQuery(runId: string, folds: RunFolds = {}): { sql: string; binds: unknown[] } {
  const binds: unknown[] = [runId];
  let exits = "NULL";
  if (folds.exitsOf) {
    binds.push(JSON.stringify(folds.exitsOf));
    exits = `(SELECT json_group_array(json_object('nodeId', s.node_id, 'branchKey', s.branch_key, 'port', json_extract(${OUTPUT.json}, '$.port')))
      FROM workflow_step_runs s ${OUTPUT.join}
      WHERE ${OUTPUT.json} IS NOT NULL AND s.run_id = ?1 AND s.node_id IN (SELECT value FROM json_each(?${binds.length})) AND s.state IN (${FINISHED_SQL}))`;
  }
  let step = "NULL";
  if (folds.step) {
    binds.push(folds.step.nodeId, folds.step.branchKey);
    // The output itself stays in its table: a replay answers with its port and (an effect's) delivery ids only.
    const json = OUTPUT.json;
    step = `(SELECT json_object('state', s.state, 'attempt', s.attempt, 'port', json_extract(${json}, '$.port'),
        'output', CASE WHEN ${json} IS NULL THEN NULL ELSE json_object('port', ${json} -> '$.port', 'deliveryIds', ${json} -> '$.deliveryIds', 'deliveryId', ${json} -> '$.deliveryId') END)
      FROM workflow_step_runs s ${OUTPUT.join}
      WHERE s.run_id = ?1 AND s.node_id = ?${binds.length - 1} AND s.branch_key = ?${binds.length})`;
  }
  let wait = "NULL";
  let event = "NULL";
  if (folds.wait) {
    binds.push(folds.wait.stepId, folds.wait.eventId);
    const [stepParam, eventParam] = [binds.length - 1, binds.length];
    wait = `(SELECT json_object('id', id, 'state', state, 'signalType', signal_type, 'deadlineAt', deadline_at) FROM workflow_waits WHERE step_run_id = ?${stepParam})`;
    event = `(SELECT json_object('id', e.id, 'type', e.type, 'payloadJson', e.payload_json, 'createdAt', e.created_at) FROM workflow_events e
      WHERE e.id = ?${eventParam} AND e.run_id = ?1 AND e.wait_id = (SELECT id FROM workflow_waits WHERE step_run_id = ?${stepParam}))`;
  }
  let group = "NULL";
  if (folds.group) {
    const sealed = folds.group.sealed ? OUTPUT.sealed : "NULL";
    let nodes = "";
    if (folds.group.nodeIds) {
      binds.push(JSON.stringify(folds.group.nodeIds));
      nodes = ` AND s.node_id IN (SELECT value FROM json_each(?${binds.length}))`;
    }
    // NULL (not folded) once the outputs exceed the bound; '[]' for no rows.
    group = `(SELECT CASE WHEN SUM(length(${OUTPUT.json}) + COALESCE(length(${sealed}), 0)) > ${GROUP_FOLD_MAX_BYTES} THEN NULL
        ELSE json_group_array(json_object('id', s.id, 'nodeId', s.node_id, 'branchKey', s.branch_key, 'state', s.state, 'attempt', s.attempt,
          'port', json_extract(${OUTPUT.json}, '$.port'), 'json', ${OUTPUT.json}, 'sealed', ${sealed})) END
      FROM workflow_step_runs s ${OUTPUT.join} WHERE s.run_id = ?1${nodes})`;
  }
  const runEnd = folds.runEnd ?? "NULL";
  const report = folds.report ?? "NULL";
  const latestEvent = folds.latestEvent ?? "NULL";
  const param = (value: unknown) => {
    binds.push(value);
    return `?${binds.length}`;
  };
  const extra = folds.extra ? folds.extra(param) : "NULL";
  const next = folds.next ? folds.next(param) : "NULL";
  const nextType = folds.nextType ? folds.nextType(param) : "NULL";
  return {
    sql: stablePlanSql(`
    SELECT r.id, r.installation_id AS installationId, r.workflow_version_id AS workflowVersionId,
      r.authority_mode AS authorityMode, r.state, r.input_json AS inputJson, r.report_id AS reportId,
      r.appeal_id AS appealId, r.backtest_id AS backtestId,
      v.artifact_id AS artifactId, v.graph_json AS graphJson, ${exits} AS exitsJson, ${step} AS stepJson, ${wait} AS waitJson, ${event} AS eventJson,
      ${group} AS groupJson, ${runEnd} AS runEndJson, ${report} AS reportJson, ${latestEvent} AS latestEventJson, ${extra} AS extraJson, ${next} AS nextJson, ${nextType} AS nextTypeJson
    FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id AND v.installation_id = r.installation_id
    WHERE r.id = ?1 LIMIT 1
  `),
    binds,
  };
}

function foldedReads(folds: RunFolds, row: RunRow): FoldedReads {
  const reads: FoldedReads = {};
  if (folds.exitsOf) reads.exits = JSON.parse(row.exitsJson ?? "[]") as RecordedExit[];
  if (folds.step && row.stepJson) {
    const step = JSON.parse(row.stepJson) as { state: string; attempt: number; port: string | null; output: Record<string, unknown> | null };
    reads.step = { state: step.state, attempt: step.attempt, port: step.port, json: step.output ? JSON.stringify(step.output) : null };
  }
  if (folds.wait && row.waitJson) reads.wait = JSON.parse(row.waitJson) as RecordedWait;
  if (folds.wait && row.eventJson) reads.event = JSON.parse(row.eventJson) as RecordedEvent;
  if (folds.group && row.groupJson) reads.group = JSON.parse(row.groupJson) as Array<Record<string, unknown>>;
  if (folds.runEnd && row.runEndJson) reads.runEnd = row.runEndJson;
  if (folds.report) reads.report = row.reportJson ?? null;
  if (folds.latestEvent) reads.latestEvent = row.latestEventJson ?? null;
  if (folds.extra) reads.extra = row.extraJson ?? null;
  if (folds.next) reads.next = row.nextJson ?? null;
  if (folds.nextType) reads.nextType = row.nextTypeJson ?? null;
  return reads;
}

function checkRun(props: RuntimeProps, input: { authorityMode: unknown }, row: RunRow | null | undefined): AuthorizedRun {
  if (!row || row.workflowVersionId !== props.workflowVersionId || row.artifactId !== props.artifactId) throw denied("runtime.capability_denied");
  if (row.authorityMode !== input.authorityMode) throw denied("runtime.authority_mismatch");
  if ((TERMINAL_RUN_STATES as readonly string[]).includes(row.state)) throw denied("runtime.run_terminal");
  return {
    id: row.id,
    installationId: row.installationId,
    workflowVersionId: row.workflowVersionId,
    authorityMode: row.authorityMode,
    state: row.state,
    inputJson: runInputJson(row.inputJson, row.reportId),
    reportId: row.reportId,
    appealId: row.appealId,
    backtestId: row.backtestId,
    graph: cachedGraph(row.workflowVersionId, row.graphJson),
  };
}

/** Loads the run and checks it against the capability's props and the caller's claims. */
export async function authorizedRun(env: Env, props: RuntimeProps, input: { runId: unknown; authorityMode: unknown }): Promise<AuthorizedRun> {
  return (await authorizedRunFolded(env, props, input, {})).run;
}

/** authorizedRun plus the folded step reads, returned only when authorization passes. */
export async function authorizedRunFolded(env: Env, props: RuntimeProps, input: { runId: unknown; authorityMode: unknown }, folds: RunFolds): Promise<{ run: AuthorizedRun; folded: FoldedReads }> {
  const runId = cleanIdentifier(input.runId, "run_id");
  const row = await runStatement(env.DB, runId, folds).first<RunRow>();
  const run = checkRun(props, input, row);
  return { run, folded: foldedReads(folds, row!) };
}

/**
 * Authorization (with its folded step reads) plus `extra` reads of the same run in one round
 * trip. The extra rows are returned only when authorization passes; they are read by run id, so
 * they can be prepared beforehand.
 */
export async function authorizedRunWith(
  env: Env,
  props: RuntimeProps,
  input: { runId: unknown; authorityMode: unknown },
  folds: RunFolds,
  extra: (runId: string) => D1PreparedStatement[],
): Promise<{ run: AuthorizedRun; folded: FoldedReads; results: Array<D1Result<Record<string, unknown>>> }> {
  const runId = cleanIdentifier(input.runId, "run_id");
  const statements = extra(runId);
  if (statements.length === 0) return { ...(await authorizedRunFolded(env, props, input, folds)), results: [] };
  const [runResult, ...results] = await env.DB.batch<Record<string, unknown>>([runStatement(env.DB, runId, folds), ...statements]);
  const row = runResult!.results[0] as RunRow | undefined;
  const run = checkRun(props, input, row);
  return { run, folded: foldedReads(folds, row!), results };
}

/** The graph node the caller names, which must exist and (when given) be of the claimed kind. */
export function authorizedNode(run: AuthorizedRun, nodeIdValue: unknown, nodeKindValue?: unknown): WorkflowNodeV1 {
  const nodeId = cleanIdentifier(nodeIdValue, "node_id", 100);
  const node = run.graph.nodes.find((candidate) => candidate.id === nodeId);
  if (!node || (nodeKindValue !== undefined && node.kind !== nodeKindValue)) throw denied("runtime.node_denied");
  return node;
}

export function authorizedBranch(value: unknown): string {
  return value === undefined || value === "" ? "" : cleanIdentifier(value, "branch_key", 100);
}
