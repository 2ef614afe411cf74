// Walking on (kernel protocol 4). When a wait or an action finishes, the host runs the fused group
// that follows it (fusion.ts) in the same call: what the group reads comes with the call's own
// authorization (folded into the run's statement), and its records go into the call's one batch,
// where the run moves once for both. The kernel then continues where the group ended (`ahead`).
// The host walks on only where nothing can differ from the kernel making the calls itself: the
// main path, a group whose nodes have no step row yet and read no content (a read of content is on
// the record even when the walk is dropped), every read folded. Anything else — a node that
// throws included — drops the walk: the call records its own step alone and the kernel calls
// executeFused as protocol 3 does, which meets the same error with its retries and error port.
import { combineAuditStatements } from "../audit";
import { REPORT_SUMMARY_BY_RUN_JSON_SQL, taskIdOf, type ReportSummaryRow } from "../cases";
import { nextInGroup } from "./fusion";
import { kindOf } from "./kinds/descriptors";
import { progressForKernel, type CallScope } from "./runtime-boundary";
import { graphIfCached, type FoldedReads, type AuthorizedRun, type RunFolds } from "./runtime-authorize";
import { needsOf, walkGroup, type FusedHost, type GroupRow } from "./runtime-fused";
import { groupBatch, groupGuard, LATEST_EVENT_JSON_SQL, stepsGuard, type EventRow, type NodeRecord } from "./runtime-group-records";
import type { Ahead, NodeOutput } from "./runtime-protocol";
import { now, stepResultParts, stepUpsert, type StepResultInput } from "./runtime-records";
import { combineStepUpserts } from "./step-upserts";
import { RUN_END_OPEN_SQL } from "./run-end";
import { mergeFolds, waitAfterGroup, waitAheadFolds } from "./runtime-wait-ahead";
import { actionAfterGroup, actionAheadFolds, prepareActionAhead, type PendingAction } from "./runtime-action-ahead";
import type { JsonValue, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";

const foldsCache = new WeakMap<ParsedWorkflowGraph, Map<string, RunFolds | null>>();

/** The groups a walk past `node` may run: for each of its ports, the node that follows if a group may start there and reads no content. */
function heads(graph: ParsedWorkflowGraph, node: WorkflowNodeV1): WorkflowNodeV1[] {
  const ports = new Set(graph.edges.filter((edge) => edge.from.nodeId === node.id).map((edge) => edge.from.port));
  const found = new Map<string, WorkflowNodeV1>();
  for (const port of ports) {
    const head = nextInGroup(graph, node, port);
    if (!head) continue;
    const needs = needsOf(graph, head);
    if (!needs.sealed && !needs.content) found.set(head.id, head);
  }
  return [...found.values()];
}

/** What the groups after `node` read (their step rows and the rows their nodes read, report, latest event, what an end would close); null where none can follow. */
function groupFolds(graph: ParsedWorkflowGraph, node: WorkflowNodeV1): RunFolds | null {
  const found = heads(graph, node);
  if (found.length === 0) return null;
  let ids: Set<string> | null = new Set();
  const wanted = { report: false, event: false, ends: false };
  for (const head of found) {
    const needs = needsOf(graph, head);
    if (needs.stepIds === null) ids = null;
    if (ids) for (const id of [...needs.stepIds!, ...needs.region]) ids.add(id);
    wanted.report ||= needs.report;
    wanted.event ||= needs.event;
    wanted.ends ||= needs.ends;
  }
  return {
    group: { nodeIds: ids ? [...ids] : null, sealed: false },
    ...(wanted.report ? { report: REPORT_SUMMARY_BY_RUN_JSON_SQL } : {}),
    ...(wanted.event ? { latestEvent: LATEST_EVENT_JSON_SQL } : {}),
    ...(wanted.ends ? { runEnd: RUN_END_OPEN_SQL } : {}),
  };
}

/**
 * What a call on `node` reads with its authorization so that it can walk on: the groups after it
 * (groupFolds), a wait or an action after one of those groups, and the groups after such an
 * action. Null where no group can follow. Cached per graph and node.
 */
export function aheadFolds(graph: ParsedWorkflowGraph, node: WorkflowNodeV1): RunFolds | null {
  const byNode = foldsCache.get(graph) ?? new Map<string, RunFolds | null>();
  foldsCache.set(graph, byNode);
  if (byNode.has(node.id)) return byNode.get(node.id)!;
  const folds = groupFolds(graph, node);
  if (folds) {
    for (const head of heads(graph, node)) {
      const waits = waitAheadFolds(graph, head);
      if (waits) mergeFolds(folds, waits.folds);
      const actions = actionAheadFolds(graph, head);
      if (!actions) continue;
      mergeFolds(folds, actions.folds);
      for (const action of actions.actions) {
        const after = groupFolds(graph, action);
        if (after) mergeFolds(folds, after);
      }
    }
  }
  byNode.set(node.id, folds);
  return folds;
}

/** Where the walk went: the group's records (not written), a wait's after it, and what the kernel learns. */
export interface Walked {
  records: NodeRecord[];
  /** The statements of the wait prepared after the group (which then moves the run), if any. */
  after: D1PreparedStatement[] | null;
  /** The action after the group, to prepare with the call's records (which it then moves the run for), if any. */
  action: PendingAction | null;
  ahead: Ahead;
}

/**
 * Runs the group after `node` (which finished in this call, leaving by `port`, with output
 * `open`), from the reads `aheadFolds` folded into the call's authorization. Null when the host
 * does not walk on (see the module's comment); never throws.
 */
export async function walkOn(
  host: FusedHost,
  input: {
    run: AuthorizedRun;
    node: WorkflowNodeV1;
    branchKey: string;
    port: string;
    folded: FoldedReads;
    open: JsonValue;
    prior?: Array<{ nodeId: string; open: JsonValue }>;
    priorSteps?: number;
    /** false: the group only, no wait or action after it (their reads were not folded for this node). */
    onward?: boolean;
  },
): Promise<Walked | null> {
  const { run, node, branchKey, folded } = input;
  if (branchKey !== "" || folded.group === undefined) return null;
  const head = nextInGroup(run.graph, node, input.port);
  if (!head) return null;
  // A group that reads content is not walked into (heads): its read is on the record even if the walk is dropped.
  const needs = needsOf(run.graph, head);
  if (needs.sealed || needs.content) return null;
  const rows = folded.group as unknown as GroupRow[];
  if (rows.some((row) => row.branchKey === branchKey && needs.region.has(row.nodeId))) return null;
  if ((needs.report && folded.report === undefined) || (needs.event && folded.latestEvent === undefined)) return null;
  const reportRow = needs.report && folded.report ? (JSON.parse(folded.report) as ReportSummaryRow) : null;
  const eventRow = needs.event && folded.latestEvent ? (JSON.parse(folded.latestEvent) as EventRow) : undefined;
  // The walk's own scope: its failure records nothing (the call records its own step alone).
  const scope: CallScope = {};
  try {
    const prior = [...(input.prior ?? []), { nodeId: node.id, open: input.open }];
    const walked = await walkGroup(host, { run, head, branchKey, rows, eventRow, reportRow, ...(needs.ends && folded.runEnd ? { runEndOpen: folded.runEnd } : {}), priorSteps: input.priorSteps ?? 1, prior }, scope);
    if (walked.records.length === 0) return null;
    const onward = input.onward !== false;
    const waits = onward ? waitAheadFolds(run.graph, head) : null;
    const after = waits ? await waitAfterGroup(host, { run, branchKey, walked, folded, queueRef: waits.queueRef }) : null;
    const actions = after || !onward ? null : actionAheadFolds(run.graph, head);
    const action = actions ? await actionAfterGroup({ run, branchKey, walked, folded, typeKey: actions.typeKey, prior }) : null;
    return { records: walked.records, after: after?.statements ?? null, action, ahead: { head: head.id, nodeId: walked.node.id, port: walked.port, ...(after ? { onward: after.ahead } : {}) } };
  } catch {
    return null;
  }
}

/** The node a call names and what walking on from it reads, when the version's graph is cached and a group can follow it. */
export function walkFrom(workflowVersionId: string, nodeId: string | undefined): { node: WorkflowNodeV1; folds: RunFolds } | null {
  const graph = graphIfCached(workflowVersionId);
  const node = nodeId === undefined ? undefined : graph?.nodes.find((candidate) => candidate.id === nodeId);
  const folds = graph && node ? aheadFolds(graph, node) : null;
  return node && folds ? { node, folds } : null;
}

/** Whether a batch failed on a write guard (SQLite's json() on malformed text: stepsGuard). */
function isGuardRaised(error: unknown): boolean {
  return /malformed JSON/u.test(String(error));
}

/** RUN_END_OPEN_SQL's value without a wait and a task this call closed. */
function withoutClosed(openJson: string, waitId: string, taskId: string): string {
  const open = JSON.parse(openJson) as Record<string, unknown>;
  const list = (value: unknown): string[] => (typeof value === "string" ? (JSON.parse(value) as string[]) : Array.isArray(value) ? (value as string[]) : []);
  return JSON.stringify({ ...open, waits: list(open.waits).filter((id) => id !== waitId), tasks: list(open.tasks).filter((id) => id !== taskId) });
}

/**
 * Records a finished wait or action (with `extra`, its own statements) and, given the reads
 * folded for it, the group that follows in the same batch: the run then moves once, where the
 * group ends — or where the wait or action after that group parks it. Answers `answer`, with where
 * the host walked to. `carried`: outputs and run moves of steps recorded earlier in this call
 * whose batch left the run's move to this one.
 */
export async function recordAndWalk<T extends NodeOutput>(
  host: FusedHost,
  result: StepResultInput,
  folded: FoldedReads | undefined,
  extra: D1PreparedStatement[],
  answer: T,
  carried?: { prior: Array<{ nodeId: string; open: JsonValue }>; revisions: number; startedAt: string },
): Promise<T> {
  const db = host.env.DB;
  // What a run ending in this call would close was read before this call closed its own wait (and task).
  if (folded?.runEnd && kindOf(result.node.kind)?.protocol === "wait") folded = { ...folded, runEnd: withoutClosed(folded.runEnd, `${result.stepId}:wait`, taskIdOf(result.stepId)) };
  const parts = await stepResultParts(db, result, carried ? { revisions: carried.revisions + 1, startedAt: carried.startedAt } : undefined);
  const open = JSON.parse(parts.record.json) as JsonValue;
  // After an action walked to in this call, only the group after it was folded (aheadFolds): no wait or action beyond.
  const walked = folded ? await walkOn(host, { ...result, port: String(result.output.port), folded, open, ...(carried ? { prior: carried.prior, priorSteps: carried.revisions + 1, onward: false } : {}) }) : null;
  // This step alone, as one step per node records it. Its row is guarded: a step that finished
  // meanwhile (a concurrent duplicate of this call) fails the batch, so nothing is written twice;
  // a repeat after the step finished is answered from its record before it gets here.
  const alone = () => combineAuditStatements(db, [stepUpsert(db, parts.step, stepsGuard(null, [result.stepId])), parts.progress, parts.audit, ...extra]);
  if (!walked) {
    await db.batch(alone());
    return answer;
  }
  // The group's write guard (with this step's own row: it must not have finished meanwhile either)
  // goes on this step's row, the batch's first, so that every step row of the batch is one statement
  // (step-upserts.ts). A run no longer live or a step finished meanwhile fails the batch: this
  // step is then recorded alone (for a step finished meanwhile that fails too, and the kernel's
  // retry is answered from the step's record), and the kernel walks the group itself.
  const records = () =>
    combineStepUpserts(db, [stepUpsert(db, parts.step, groupGuard(result.run, walked.records, [result.stepId])), parts.audit, ...extra, ...groupBatch(db, result.run, walked.records, { guard: false, progress: walked.after === null })]);
  const recordAlone = async <A>(answered: A): Promise<A> => {
    await db.batch(alone());
    return answered;
  };
  if (walked.action) {
    // The action after the group: prepared with these records (the run moved to the group's end) at the head of its proposal's batch.
    let acted: Awaited<ReturnType<typeof prepareActionAhead>>;
    try {
      acted = await prepareActionAhead(host.env, walked.action, { leading: combineAuditStatements(db, records()) });
    } catch (error) {
      if (!isGuardRaised(error)) throw error;
      return recordAlone(answer);
    }
    if (!acted) return { ...answer, ahead: walked.ahead };
    const { run, node, prior } = walked.action;
    const progress = acted.progress.port
      ? await recordAndWalk(host, { run, node, branchKey: "", stepId: acted.stepId, output: acted.progress }, folded, [], progressForKernel(acted.progress), { prior, revisions: 0, startedAt: now() })
      : progressForKernel(acted.progress);
    return { ...answer, ahead: { ...walked.ahead, onward: { head: node.id, nodeId: node.id, action: progress } } };
  }
  // Unguarded audit events (the step's, the group's) go in as one statement.
  try {
    await db.batch(combineAuditStatements(db, combineStepUpserts(db, [...records(), ...(walked.after ?? [])])));
  } catch (error) {
    if (!isGuardRaised(error)) throw error;
    return recordAlone(answer);
  }
  return { ...answer, ahead: walked.ahead };
}
