// Walking on to a wait (kernel protocol 4): a fused group that ends where a wait follows (a human
// review after the start, say) prepares that wait in the same call and batch, as prepareWait would:
// its step, the wait, its task and audit event, and the run waiting — moved once for the group and
// the wait. What the wait reads (its step rows, report, latest event, a human task's queue) comes
// with the group's own authorization. The host prepares it only where nothing can differ from the
// kernel calling prepareWait itself (the main path, no step row yet, no content, no related
// accounts, every read folded); anything else, an error included, leaves it to prepareWait.
import { findQueueJsonSql, REPORT_SUMMARY_BY_RUN_JSON_SQL, reportSummary, type QueueRow, type ReportSummaryRow } from "../cases";
import { nodeReads, nodeReadsContent } from "./execution-context";
import { groupRegion } from "./fusion";
import { kindOf } from "./kinds/descriptors";
import { stepRunId, type AuthorizedRun, type FoldedReads, type RunFolds } from "./runtime-authorize";
import type { FusedHost, WalkedGroup } from "./runtime-fused";
import { LATEST_EVENT_JSON_SQL } from "./runtime-group-records";
import type { Ahead } from "./runtime-protocol";
import { now } from "./runtime-records";
import { newWaitStatements } from "./runtime-waits";
import type { JsonValue, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import type { ExpressionContext } from "./expressions";
import { walkContext } from "./walker";

/** The single node `node` leads to by `port`, unless it is a fork, a fork's join or nothing. */
export function singleNext(graph: ParsedWorkflowGraph, node: WorkflowNodeV1, port: string): WorkflowNodeV1 | null {
  if (node.kind === "end") return null;
  const targets = graph.edges.filter((edge) => edge.from.nodeId === node.id && edge.from.port === port);
  if (targets.length !== 1) return null;
  const next = graph.nodes.find((candidate) => candidate.id === targets[0]!.to.nodeId);
  if (!next || Object.values(graph.plan.forkJoins).includes(next.id)) return null;
  return next;
}

/** Whether the host may prepare this node's wait ahead of the kernel. */
function waitable(graph: ParsedWorkflowGraph, node: WorkflowNodeV1): boolean {
  const reads = nodeReads(node);
  return kindOf(node.kind)?.protocol === "wait" && !nodeReadsContent(graph, node) && !reads.related;
}

/** Folds `more` into `folds`: step rows of both (every row if either reads every row); the other reads added. */
export function mergeFolds(folds: RunFolds, more: RunFolds): void {
  if (more.group) {
    const ids = folds.group ? (folds.group.nodeIds === null || more.group.nodeIds === null ? null : [...new Set([...folds.group.nodeIds, ...more.group.nodeIds])]) : more.group.nodeIds;
    folds.group = { nodeIds: ids, sealed: folds.group?.sealed ?? more.group.sealed };
  }
  for (const key of ["report", "latestEvent", "runEnd", "next", "nextType"] as const) if (more[key] && !folds[key]) (folds as Record<string, unknown>)[key] = more[key];
}

/** The nodes a group starting at `head` can lead to (each the single node after one of its nodes' ports, outside the group) that `accept` takes. */
/** `compute(graph, head)` kept per graph (while it lives) and head in `cache`: what a walk past `head` reads depends on nothing else. */
export function perGraphAndHead<T>(cache: WeakMap<ParsedWorkflowGraph, Map<string, T>>, graph: ParsedWorkflowGraph, head: WorkflowNodeV1, compute: () => T): T {
  let byHead = cache.get(graph);
  if (!byHead) {
    byHead = new Map();
    cache.set(graph, byHead);
  }
  if (!byHead.has(head.id)) byHead.set(head.id, compute());
  return byHead.get(head.id)!;
}

export function nodesAfterGroup(graph: ParsedWorkflowGraph, head: WorkflowNodeV1, accept: (node: WorkflowNodeV1) => boolean): WorkflowNodeV1[] {
  const region = groupRegion(graph, head);
  const inRegion = new Set(region.map((node) => node.id));
  const found = new Map<string, WorkflowNodeV1>();
  for (const node of region) {
    for (const port of new Set(graph.edges.filter((edge) => edge.from.nodeId === node.id).map((edge) => edge.from.port))) {
      const next = singleNext(graph, node, port);
      if (next && !inRegion.has(next.id) && accept(next)) found.set(next.id, next);
    }
  }
  return [...found.values()];
}

/** What `nodes` read, as folds: their own step rows and the rows they read, the report, the latest event. */
export function readsFolds(nodes: readonly WorkflowNodeV1[]): RunFolds {
  let ids: Set<string> | null = new Set(nodes.map((node) => node.id));
  const folds: RunFolds = {};
  for (const node of nodes) {
    const reads = nodeReads(node);
    if (reads.steps === null) ids = null;
    else if (ids) for (const id of reads.steps) ids.add(id);
    if (reads.report) folds.report = REPORT_SUMMARY_BY_RUN_JSON_SQL;
    if (reads.event) folds.latestEvent = LATEST_EVENT_JSON_SQL;
  }
  folds.group = { nodeIds: ids ? [...ids] : null, sealed: false };
  return folds;
}

/**
 * The expression context of `node` after the walked group, from the call's folded reads and the
 * outputs recorded in the call; null when a read it needs was not folded.
 */
export async function contextAfterGroup(run: AuthorizedRun, node: WorkflowNodeV1, walked: WalkedGroup, folded: FoldedReads): Promise<ExpressionContext | null> {
  const reads = nodeReads(node);
  if ((reads.report && folded.report === undefined) || (reads.event && folded.latestEvent === undefined && walked.event === null)) return null;
  const steps = await walked.outputs.pick(reads.steps, "", false);
  const report: JsonValue = reads.report && folded.report ? (reportSummary(JSON.parse(folded.report) as ReportSummaryRow) as unknown as JsonValue) : null;
  const latest = folded.latestEvent ? (JSON.parse(folded.latestEvent) as { id: string; type: string; payloadJson: string; createdAt: string }) : null;
  const event: JsonValue = !reads.event ? null : latest ? { id: latest.id, type: latest.type, payload: JSON.parse(latest.payloadJson) as JsonValue, receivedAt: latest.createdAt } : walked.event;
  return walkContext(run, { input: (JSON.parse(run.inputJson) as JsonValue) ?? {}, steps, report, event, content: null, readsContent: false });
}

interface WaitFolds {
  folds: RunFolds;
  /** The queue folded (`next`), of the first human task after the group. */
  queueRef: string | null;
}

const cache = new WeakMap<ParsedWorkflowGraph, Map<string, WaitFolds | null>>();

/** What a wait after a group starting at `head` reads, folded into the group's authorization; null where no wait can follow. Cached per graph and head. */
export function waitAheadFolds(graph: ParsedWorkflowGraph, head: WorkflowNodeV1): WaitFolds | null {
  return perGraphAndHead(cache, graph, head, () => {
    const waits = nodesAfterGroup(graph, head, (node) => waitable(graph, node));
    if (waits.length === 0) return null;
    const folds = readsFolds(waits);
    // The queue of the first human task only (one `next` fold); another's is read by prepareWait.
    const human = waits.find((wait) => wait.kind === "human_task" && typeof wait.config.queue_id === "string");
    const queueRef = human ? String(human.config.queue_id) : null;
    if (queueRef !== null) folds.next = (param) => findQueueJsonSql("r.installation_id", param(queueRef));
    return { folds, queueRef };
  });
}

/**
 * The statements of the wait after the walked group (unwritten; the run waiting moves it once per
 * step of the group too) and what the kernel learns, or null where the host leaves the wait to
 * prepareWait. Never throws.
 */
export async function waitAfterGroup(
  host: FusedHost,
  input: { run: AuthorizedRun; branchKey: string; walked: WalkedGroup; folded: FoldedReads; queueRef: string | null },
): Promise<{ statements: D1PreparedStatement[]; ahead: Ahead } | null> {
  const { run, branchKey, walked, folded } = input;
  if (branchKey !== "" || folded.group === undefined) return null;
  const next = singleNext(run.graph, walked.node, walked.port);
  if (!next || !waitable(run.graph, next)) return null;
  // A human wait in shadow is refused by prepareWait; it is left to say so.
  if (run.authorityMode === "shadow" && kindOf(next.kind)!.shadow) return null;
  if (folded.group.some((row) => row.branchKey === branchKey && row.nodeId === next.id)) return null;
  let queue: QueueRow | null | undefined;
  if (next.kind === "human_task") {
    if (input.queueRef === null || next.config.queue_id !== input.queueRef || folded.next === undefined) return null;
    queue = folded.next === null ? null : (JSON.parse(folded.next) as QueueRow);
    // The queue folded is the first human task's after any group of the call: this one's only if it is the node's.
    if (queue === null || (queue.id !== input.queueRef && queue.name !== input.queueRef)) return null;
  }
  try {
    const context = await contextAfterGroup(run, next, walked, folded);
    if (!context) return null;
    const { prepared, statements } = await newWaitStatements(host.env, {
      run,
      node: next,
      branchKey,
      stepId: stepRunId(run.id, next.id, branchKey),
      loaded: { context, statements: [] },
      ...(queue !== undefined ? { queue } : {}),
      group: { revisions: walked.priorSteps + walked.records.length + 1, startedAt: walked.records[0]?.at ?? now() },
    });
    return { statements, ahead: { head: next.id, nodeId: next.id, wait: prepared } };
  } catch {
    return null;
  }
}
