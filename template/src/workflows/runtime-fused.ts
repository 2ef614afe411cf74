// Fused groups on the host (kernel protocol 3). The sandbox names only the node a group
// starts at; the host authorizes it exactly as executeNode does (run ↔ version ↔ artifact, mode,
// node and kind, branch, reached), then computes the group itself from the graph (fusion.ts) and
// walks it with the fast backtests' step outputs and context shape (walker.ts) and the very
// executors of one step per node. Every node gets the records one step per node would give it —
// step row, output, digest, `workflow.step_succeeded`, a content read's audit event, an end's run
// update — all in ONE D1 batch. A node already recorded (a retry, a repaired run's new instance)
// answers from its record and is written again never. A node that throws leaves the records of the
// nodes before it and the host's error on itself (capability's guard), and the kernel retries the
// group or calls failFused, which finds that node and takes its error port (runtime-fail.ts).
import { combineAuditStatements } from "../audit";
import { openPersonalData, openRunContent, REPORT_SUMMARY_BY_RUN_JSON_SQL, reportSummary, reportSummaryByRunStatementUnsafe, runContentStatementUnsafe, sealPersonalData, type ReportSummaryRow, type RunContentRow } from "../cases";
import { openView } from "./content-access";
import { contentReadStatement, nodeReads, nodeReadsContent, relatedAccountsOfReport } from "./execution-context";
import { fusable, groupRegion, MAX_FUSED_NODES, nextInGroup } from "./fusion";
import { EXECUTORS, executorUnavailable, type NodeCall } from "./kinds/executors";
import { branchAllowed, predecessorExitsStatement, predecessorIds, reachedBy, type RecordedExit } from "./run-plan";
import { RUN_END_OPEN_SQL } from "./run-end";
import { authorizedBranch, authorizedNode, authorizedRunWith, cleanIdentifier, denied, graphIfCached, stepRunId, type AuthorizedRun, type FoldedReads, type RunFolds, type RuntimeProps } from "./runtime-authorize";
import { mergeFolds, waitAfterGroup, waitAheadFolds } from "./runtime-wait-ahead";
import type { CallScope } from "./runtime-boundary";
import { recordNodeFailure } from "./runtime-fail";
import type { FusedOutput, RuntimeFailureRequest, RuntimeNodeRequest } from "./runtime-protocol";
import { FINISHED_STEP_STATES, now, outputRecord, runtimeAudit, stepEventDetails, type RecordedStep } from "./runtime-records";
import { STEP_OUTPUT as OUTPUT } from "./step-output";
import { groupBatch, LATEST_EVENT_JSON_SQL, type EventRow, type NodeRecord } from "./runtime-group-records";
import { combineStepUpserts } from "./step-upserts";
import type { JsonValue, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import { StepOutputs, walkContext } from "./walker";

export interface FusedHost {
  env: Env;
  ctx: ExecutionContext;
  props: RuntimeProps;
}

/** What a group starting at a node may read, decided once per graph and head. */
export interface GroupNeeds {
  region: Set<string>;
  /** null: every step row of the run (a node reads `steps` dynamically). */
  stepIds: string[] | null;
  sealed: boolean;
  event: boolean;
  report: boolean;
  content: boolean;
  /** The group may run an end node (which reads what the run still has open). */
  ends: boolean;
}

const needsCache = new WeakMap<ParsedWorkflowGraph, Map<string, GroupNeeds>>();

export function needsOf(graph: ParsedWorkflowGraph, head: WorkflowNodeV1): GroupNeeds {
  const byHead = needsCache.get(graph) ?? new Map<string, GroupNeeds>();
  needsCache.set(graph, byHead);
  const cached = byHead.get(head.id);
  if (cached) return cached;
  const region = groupRegion(graph, head);
  let ids: Set<string> | null = new Set(region.map((node) => node.id));
  const needs: GroupNeeds = { region: new Set(region.map((node) => node.id)), stepIds: null, sealed: false, event: false, report: false, content: false, ends: region.some((node) => node.kind === "end") };
  for (const node of region) {
    const reads = nodeReads(node);
    const readsContent = nodeReadsContent(graph, node);
    if (reads.steps === null) ids = null;
    else if (ids) for (const id of reads.steps) ids.add(id);
    needs.sealed ||= readsContent;
    needs.event ||= reads.event;
    needs.report ||= reads.report;
    needs.content ||= readsContent && reads.content;
  }
  needs.stepIds = ids ? [...ids] : null;
  byHead.set(head.id, needs);
  return needs;
}

export interface GroupRow extends RecordedStep {
  id: string;
  nodeId: string;
  branchKey: string;
  sealed: string | null;
}

type OptionalRead = "event" | "content";
const OPTIONAL_READS: readonly OptionalRead[] = ["event", "content"];

/** Where an optional read's result sits among optionalStatements' results; null when the group does not read it (or it was folded). */
function optionalReadIndex(needs: GroupNeeds, read: OptionalRead, eventFolded = false): number | null {
  if (!needs[read] || (read === "event" && eventFolded)) return null;
  return OPTIONAL_READS.slice(0, OPTIONAL_READS.indexOf(read)).filter((earlier) => needs[earlier] && !(earlier === "event" && eventFolded)).length;
}

/** The group's step rows (its own and those its nodes read), when not folded into the run's statement. */
function groupRowsStatement(db: D1Database, runId: string, needs: GroupNeeds): D1PreparedStatement {
  const sealed = needs.sealed ? OUTPUT.sealed : "NULL";
  const select = `SELECT s.id, s.node_id AS nodeId, s.branch_key AS branchKey, s.state, s.attempt, json_extract(${OUTPUT.json}, '$.port') AS port, ${OUTPUT.json} AS json, ${sealed} AS sealed
    FROM workflow_step_runs s ${OUTPUT.join} WHERE s.run_id = ?1`;
  return needs.stepIds === null ? db.prepare(select).bind(runId) : db.prepare(`${select} AND s.node_id IN (SELECT value FROM json_each(?2))`).bind(runId, JSON.stringify(needs.stepIds));
}

/**
 * The group's other reads (event, content), keyed by run id alone (sent with the authorization
 * when the graph is cached); no statement for what it does not read. The step rows, the head's
 * predecessors' exits, the run's report and what the run has open are folded into the run's own
 * statement (or read beside these when not prefetched).
 */
function optionalStatements(db: D1Database, runId: string, needs: GroupNeeds, eventFolded = false): D1PreparedStatement[] {
  return [
    ...(needs.event && !eventFolded ? [db.prepare(`SELECT id, type, payload_json AS payloadJson, created_at AS createdAt FROM workflow_events WHERE run_id = ?1 ORDER BY created_at DESC LIMIT 1`).bind(runId)] : []),
    ...(needs.content ? [runContentStatementUnsafe(db, runId)] : []),
  ];
}

function parseJson(text: string | null | undefined): JsonValue {
  if (!text) return null;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return null;
  }
}

interface AuthorizedGroup {
  run: AuthorizedRun;
  head: WorkflowNodeV1;
  branchKey: string;
  rows: GroupRow[];
  /** The optional reads' results, in optionalStatements' order (the event's only when not folded). */
  results: Array<D1Result<Record<string, unknown>>>;
  /** The run's latest event when it was folded into the run's statement (undefined: not folded, or none). */
  foldedEvent?: EventRow;
  eventFolded: boolean;
  /** RUN_END_OPEN_SQL's value, for a group that may end the run. */
  runEndOpen?: string;
  /** The run's report (summary columns), for a group that reads it; null without one. */
  report: ReportSummaryRow | null;
  /** What was folded for a wait after the group (runtime-ahead.ts), when the kernel walks on. */
  ahead?: { folded: FoldedReads; queueRef: string | null };
}

/** Authorizes the head as executeNode authorizes a node, and reads what the group needs in the same statement or round trip. */
async function authorizeGroup(host: FusedHost, input: RuntimeNodeRequest, scope: CallScope): Promise<AuthorizedGroup> {
  const db = host.env.DB;
  const cachedGraph = graphIfCached(host.props.workflowVersionId);
  const cachedHead = cachedGraph?.nodes.find((node) => node.id === input.nodeId);
  const prefetch = cachedGraph && cachedHead ? { graph: cachedGraph, head: cachedHead, needs: needsOf(cachedGraph, cachedHead) } : null;
  const folds: RunFolds = prefetch
    ? {
        exitsOf: predecessorIds(prefetch.graph, prefetch.head),
        group: { nodeIds: prefetch.needs.stepIds, sealed: prefetch.needs.sealed },
        ...(prefetch.needs.ends ? { runEnd: RUN_END_OPEN_SQL } : {}),
        ...(prefetch.needs.report ? { report: REPORT_SUMMARY_BY_RUN_JSON_SQL } : {}),
        ...(prefetch.needs.event ? { extra: () => LATEST_EVENT_JSON_SQL } : {}),
      }
    : {};
  // What a wait after the group reads, when the kernel walks on (runtime-ahead.ts).
  const waitAfter = prefetch && input.walk === true && (input.branchKey === undefined || input.branchKey === "") ? waitAheadFolds(prefetch.graph, prefetch.head) : null;
  if (waitAfter) mergeFolds(folds, waitAfter.folds);
  const foldEvent = prefetch?.needs.event === true;
  const { run, folded, results: prefetched } = await authorizedRunWith(host.env, host.props, input, folds, (runId) => (prefetch ? optionalStatements(db, runId, prefetch.needs, foldEvent) : []));
  const head = authorizedNode(run, input.nodeId, input.nodeKind);
  if (!fusable(head)) throw denied("runtime.fuse_denied");
  const branchKey = authorizedBranch(input.branchKey);
  if (!branchAllowed(run.graph, head, branchKey)) throw denied("runtime.branch_denied");
  Object.assign(scope, { run, node: head, branchKey });
  const needs = needsOf(run.graph, head);
  let exits: RecordedExit[];
  let rows: GroupRow[];
  let results: Array<D1Result<Record<string, unknown>>>;
  let runEndOpen = folded.runEnd;
  let report: ReportSummaryRow | null = null;
  let eventFolded = false;
  let foldedEvent: EventRow | undefined;
  if (cachedHead === head && folded.exits) {
    [exits, results] = [folded.exits, prefetched];
    if (foldEvent) {
      eventFolded = true;
      foldedEvent = folded.extra ? (JSON.parse(folded.extra) as EventRow) : undefined;
    }
    if (needs.report && folded.report) report = JSON.parse(folded.report) as ReportSummaryRow;
    // Outputs too large to fold are read on their own.
    rows = (folded.group ?? (await groupRowsStatement(db, run.id, needs).all()).results) as unknown as GroupRow[];
  } else {
    const reportReads = needs.report ? [reportSummaryByRunStatementUnsafe(db, run.id)] : [];
    const [exitRows, rowResult, ...rest] = await db.batch<Record<string, unknown>>([predecessorExitsStatement(db, run.id, run.graph, head), groupRowsStatement(db, run.id, needs), ...reportReads, ...optionalStatements(db, run.id, needs)]);
    [exits, rows, results] = [exitRows!.results as unknown as RecordedExit[], rowResult!.results as unknown as GroupRow[], rest.slice(reportReads.length)];
    if (needs.report) report = (rest[0]!.results[0] as ReportSummaryRow | undefined) ?? null;
    runEndOpen = undefined;
  }
  if (!reachedBy(run.graph, head, branchKey, exits)) throw denied("runtime.node_not_reached");
  const ahead = waitAfter && cachedHead === head && folded.group !== undefined ? { folded, queueRef: waitAfter.queueRef } : undefined;
  return { run, head, branchKey, rows, results, report, eventFolded, ...(foldedEvent ? { foldedEvent } : {}), ...(runEndOpen ? { runEndOpen } : {}), ...(ahead ? { ahead } : {}) };
}

const finishedRow = (row: GroupRow | undefined): row is GroupRow & { json: string } => row?.json != null && FINISHED_STEP_STATES.includes(row.state);

/** Runs the group from the named node; returns the node it ended at and the port it left by. */
export async function executeFusedGroup(host: FusedHost, input: RuntimeNodeRequest, scope: CallScope): Promise<FusedOutput> {
  const { env } = host;
  const { run, head, branchKey, rows, results, runEndOpen, report: reportRow, eventFolded, foldedEvent, ahead } = await authorizeGroup(host, input, scope);
  const needs = needsOf(run.graph, head);
  const firstRow = (read: OptionalRead) => {
    const index = optionalReadIndex(needs, read, eventFolded);
    return index === null ? undefined : results[index]!.results[0];
  };
  const eventRow = eventFolded ? foldedEvent : (firstRow("event") as EventRow | undefined);
  const walked = await walkGroup(host, { run, head, branchKey, rows, eventRow, reportRow, contentRow: firstRow("content") as RunContentRow | undefined, ...(runEndOpen ? { runEndOpen } : {}), priorSteps: 0 }, scope);
  // The wait that follows the group, prepared in the same batch for a kernel that walks on (runtime-ahead.ts).
  const after = ahead ? await waitAfterGroup(host, { run, branchKey, walked, folded: ahead.folded, queueRef: ahead.queueRef }) : null;
  // Every node's unguarded audit events (step_succeeded and the like) go in as one statement.
  // The group's step rows and the wait's go in as one statement too (step-upserts.ts).
  const batch = combineAuditStatements(env.DB, combineStepUpserts(env.DB, [...groupBatch(env.DB, run, walked.records, { progress: after === null }), ...(after?.statements ?? [])]));
  if (batch.length > 0) await env.DB.batch(batch);
  return { nodeId: walked.node.id, port: walked.port, ...(after ? { ahead: after.ahead } : {}) };
}

/** What a group's walk starts from: its authorized head, the step rows it read, and its other reads. */
export interface GroupStart {
  run: AuthorizedRun;
  head: WorkflowNodeV1;
  branchKey: string;
  rows: GroupRow[];
  eventRow: EventRow | undefined;
  reportRow: ReportSummaryRow | null;
  contentRow?: RunContentRow | undefined;
  runEndOpen?: string;
  /** Steps recorded in the same batch before the group's (a wait or action the host walked on from): they move the run's revision too. */
  priorSteps: number;
  /** Outputs of those steps, not in `rows` yet. */
  prior?: Array<{ nodeId: string; open: JsonValue }>;
}

/**
 * Walks the group from its head with the executors of one step per node, and returns its records
 * (not written), the node it ended at and the port it left by. A node already recorded answers
 * from its record. A node that throws leaves `scope.pending` with the records before it.
 */
export async function walkGroup(host: FusedHost, start: GroupStart, scope: CallScope): Promise<WalkedGroup> {
  const { env, ctx } = host;
  const { run, head, branchKey, rows, eventRow, reportRow, runEndOpen, priorSteps } = start;
  const needs = needsOf(run.graph, head);
  const outputs = new StepOutputs();
  const own = new Map<string, GroupRow>();
  for (const row of rows) {
    if (row.branchKey === branchKey) own.set(row.nodeId, row);
    if (row.json == null) continue;
    const open = parseJson(row.json);
    const sealed = row.sealed;
    outputs.add(row.nodeId, { branchKey: row.branchKey, open, full: sealed ? () => openPersonalData<JsonValue>(env, run.installationId, `step_output:${row.id}`, sealed) : open });
  }
  for (const prior of start.prior ?? []) outputs.add(prior.nodeId, { branchKey, open: prior.open, full: prior.open });
  const event: JsonValue = eventRow ? { id: eventRow.id, type: eventRow.type, payload: parseJson(eventRow.payloadJson), receivedAt: eventRow.createdAt } : null;
  const report: JsonValue = needs.report && reportRow ? (reportSummary(reportRow) as unknown as JsonValue) : null;
  // The run's content: opened on the first read, then shared by every later reader in the group.
  let content: Promise<JsonValue> | null = null;
  const openContent = (): Promise<JsonValue> => {
    content ??= openRunContent(env, run.installationId, start.contentRow) as Promise<unknown> as Promise<JsonValue>;
    return content;
  };
  const runInput = parseJson(run.inputJson) ?? {};
  const records: NodeRecord[] = [];

  let node = head;
  let port: string;
  for (let count = 1; ; count++) {
    scope.node = node;
    const row = own.get(node.id);
    if (finishedRow(row)) {
      // Recorded already: answered from its record, written never again.
      port = String(row.port);
    } else {
      const readsContent = nodeReadsContent(run.graph, node);
      const reads = nodeReads(node);
      // Opening content is recorded with the step, or (if the node throws) with the host's error.
      const contentRead = readsContent ? [contentReadStatement(env.DB, run, node)] : [];
      try {
        const opened = readsContent && reads.content ? await openContent() : null;
        const steps = await outputs.pick(reads.steps, branchKey, readsContent);
        // Related accounts: read for the node that names them (one indexed read; few nodes do).
        const related = reads.related ? await relatedAccountsOfReport(env.DB, run.installationId, run.reportId, run.id) : undefined;
        const context = walkContext(run, { input: runInput, steps, report: reads.report ? report : null, event: reads.event ? event : null, content: opened ?? null, readsContent, ...(related ? { related } : {}) });
        const executor = EXECUTORS[node.kind];
        if (!executor.execute) throw executorUnavailable(node.kind);
        const stepId = stepRunId(run.id, node.id, branchKey);
        const ending = node.kind === "end" ? { groupProgress: { nodes: priorSteps + records.length + 1, startedAt: records[0]?.at ?? now() }, ...(runEndOpen ? { runEndOpen } : {}) } : {};
        const call: NodeCall = { env, ctx, run, node, branchKey, stepId, readsContent, preloaded: context, ...ending };
        const result = await executor.execute(call);
        const view = openView(node, readsContent, result.output);
        const sealed = view.sealed ? (await sealPersonalData(env, run.installationId, `step_output:${stepId}`, result.output)).sealed : null;
        const stored = view.sealed ? view.open : result.output;
        const record = await outputRecord(stored, sealed);
        const at = now();
        port = String(result.output.port);
        records.push({
          node,
          stepId,
          at,
          priorSteps,
          step: { id: stepId, run, node, branchKey, state: "succeeded", digest: record.digest, at, output: record },
          tail: [
            runtimeAudit(env.DB, run, {
              key: `step:${stepId}:succeeded`,
              action: "workflow.step_succeeded",
              details: stepEventDetails(node, branchKey, record.digest, result.output.port),
              at,
            }),
            ...(result.statements ?? []),
            ...contentRead,
          ],
        });
        const open = parseJson(record.json);
        outputs.add(node.id, { branchKey, open, full: view.sealed ? (JSON.parse(JSON.stringify(result.output)) as JsonValue) : open });
      } catch (error) {
        // The nodes before this one keep their records; the guard writes them with this node's error.
        scope.pending = combineAuditStatements(env.DB, [...groupBatch(env.DB, run, records), ...contentRead]);
        throw error;
      }
    }
    const next = count < MAX_FUSED_NODES ? nextInGroup(run.graph, node, port) : null;
    if (!next || !needs.region.has(next.id)) break;
    node = next;
  }
  return { records, node, port, outputs, event, report, priorSteps };
}

/** A group walked: its records (not written), where it ended, and what its nodes read (for a wait the host prepares after it). */
export interface WalkedGroup {
  records: NodeRecord[];
  node: WorkflowNodeV1;
  port: string;
  outputs: StepOutputs;
  event: JsonValue;
  report: JsonValue;
  priorSteps: number;
}

/**
 * After a group's retries: follows the group from its head through what the host recorded to the
 * first node that did not finish, and fails that node as failNode would (its error port, or
 * repair_required). A group that finished answers where it ended.
 */
export async function failFusedGroup(host: FusedHost, input: RuntimeFailureRequest): Promise<FusedOutput> {
  const { run, head, branchKey, rows } = await authorizeGroup(host, input, {});
  const errorCode = cleanIdentifier(input.errorCode, "error_code", 100);
  const own = new Map(rows.filter((row) => row.branchKey === branchKey).map((row) => [row.nodeId, row]));
  const region = needsOf(run.graph, head).region;
  let node = head;
  for (let count = 1; ; count++) {
    const row = own.get(node.id);
    if (!finishedRow(row)) {
      const output = await recordNodeFailure(host.env, { run, node, branchKey, step: row, errorCode });
      return { nodeId: node.id, port: output.port };
    }
    const port = String(row.port);
    const next = count < MAX_FUSED_NODES ? nextInGroup(run.graph, node, port) : null;
    if (!next || !region.has(next.id)) return { nodeId: node.id, port };
    node = next;
  }
}
