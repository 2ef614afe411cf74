// Walking on to an action (kernel protocol 4): a group walked after a finished wait that ends
// where an action follows (a reviewer's verdict, then the removal) prepares that action in the same
// call, as prepareAction would: the proposal, its delivery and audit event, and the action's step
// parked, in ONE batch with everything the call recorded before it. An action delivered at once
// (its first attempt awaited by this host) is then recorded with the group after it, as
// prepareAction records it. What the action reads (its type, its step rows, report, latest event)
// comes with the call's authorization. The host prepares it only where nothing can differ from the
// kernel calling prepareAction itself (the main path, autonomous or assisted, no step row yet, no
// content, no related accounts, every read folded); an error before the batch leaves the action
// to prepareAction and writes what came before it alone.
import { REPORT_SUMMARY_BY_RUN_JSON_SQL, reportSummary, type ReportSummaryRow } from "../cases";
import { actionTypeJsonSql, foldedActionType, prepareWorkflowAction, type ActionTypeRead } from "../enforcement";
import { nodeReads, nodeReadsContent } from "./execution-context";
import type { ExpressionContext } from "./expressions";
import { groupRegion } from "./fusion";
import { kindOf } from "./kinds/descriptors";
import { stepRunId, type AuthorizedRun, type FoldedReads, type RunFolds } from "./runtime-authorize";
import type { WalkedGroup } from "./runtime-fused";
import type { ActionProgress } from "./runtime-protocol";
import { now, runProgress, stepUpsert } from "./runtime-records";
import { combineStepUpserts } from "./step-upserts";
import { LATEST_EVENT_JSON_SQL } from "./runtime-group-records";
import { singleNext } from "./runtime-wait-ahead";
import type { JsonValue, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import { walkContext } from "./walker";

const actionable = (graph: ParsedWorkflowGraph, node: WorkflowNodeV1) => kindOf(node.kind)?.protocol === "action" && !nodeReadsContent(graph, node) && !nodeReads(node).related;

interface ActionFolds {
  folds: RunFolds;
  /** The action type folded (`nextType`), of the first action after the group. */
  typeKey: string | null;
  /** The actions that may follow the group. */
  actions: WorkflowNodeV1[];
}

const cache = new WeakMap<ParsedWorkflowGraph, Map<string, ActionFolds | null>>();

/** What an action after a group starting at `head` reads; null where no action can follow. Cached per graph and head. */
export function actionAheadFolds(graph: ParsedWorkflowGraph, head: WorkflowNodeV1): ActionFolds | null {
  const byHead = cache.get(graph) ?? new Map<string, ActionFolds | null>();
  cache.set(graph, byHead);
  if (byHead.has(head.id)) return byHead.get(head.id)!;
  const region = groupRegion(graph, head);
  const inRegion = new Set(region.map((node) => node.id));
  const actions = new Map<string, WorkflowNodeV1>();
  for (const node of region) {
    for (const port of new Set(graph.edges.filter((edge) => edge.from.nodeId === node.id).map((edge) => edge.from.port))) {
      const next = singleNext(graph, node, port);
      if (next && !inRegion.has(next.id) && actionable(graph, next)) actions.set(next.id, next);
    }
  }
  let found: ActionFolds | null = null;
  const first = [...actions.values()][0];
  if (first) {
    let ids: Set<string> | null = new Set(actions.keys());
    const typeKey = String(first.config.action_type);
    const folds: RunFolds = { nextType: (param) => actionTypeJsonSql(param(typeKey)) };
    for (const action of actions.values()) {
      const reads = nodeReads(action);
      if (reads.steps === null) ids = null;
      else if (ids) for (const id of reads.steps) ids.add(id);
      if (reads.report) folds.report = REPORT_SUMMARY_BY_RUN_JSON_SQL;
      if (reads.event) folds.latestEvent = LATEST_EVENT_JSON_SQL;
    }
    folds.group = { nodeIds: ids ? [...ids] : null, sealed: false };
    found = { folds, typeKey, actions: [...actions.values()] };
  }
  byHead.set(head.id, found);
  return found;
}

/** The action after a walked group, with what preparing it needs. */
export interface PendingAction {
  run: AuthorizedRun;
  node: WorkflowNodeV1;
  context: ExpressionContext;
  typeRead: ActionTypeRead;
  /** The outputs recorded in this call, for a group the host walks to after the action. */
  prior: Array<{ nodeId: string; open: JsonValue }>;
}

/**
 * The action after the walked group with the context its mapping reads (the call's folded report
 * and latest event, the group's outputs), or null where the host leaves it to prepareAction.
 */
export async function actionAfterGroup(input: { run: AuthorizedRun; branchKey: string; walked: WalkedGroup; folded: FoldedReads; typeKey: string | null; prior: Array<{ nodeId: string; open: JsonValue }> }): Promise<PendingAction | null> {
  const { run, branchKey, walked, folded } = input;
  if (branchKey !== "" || folded.group === undefined || folded.nextType === undefined) return null;
  const next = singleNext(run.graph, walked.node, walked.port);
  if (!next || !actionable(run.graph, next) || String(next.config.action_type) !== input.typeKey) return null;
  if (run.authorityMode !== "autonomous" && run.authorityMode !== "assisted") return null;
  if (folded.group.some((row) => row.branchKey === branchKey && row.nodeId === next.id)) return null;
  const reads = nodeReads(next);
  if ((reads.report && folded.report === undefined) || (reads.event && folded.latestEvent === undefined)) return null;
  try {
    const steps = await walked.outputs.pick(reads.steps, branchKey, false);
    const report: JsonValue = reads.report && folded.report ? (reportSummary(JSON.parse(folded.report) as ReportSummaryRow) as unknown as JsonValue) : null;
    const latest = reads.event && folded.latestEvent ? (JSON.parse(folded.latestEvent) as { id: string; type: string; payloadJson: string; createdAt: string }) : null;
    const event: JsonValue = latest ? { id: latest.id, type: latest.type, payload: JSON.parse(latest.payloadJson) as JsonValue, receivedAt: latest.createdAt } : null;
    const context = walkContext(run, { input: (JSON.parse(run.inputJson) as JsonValue) ?? {}, steps, report, event, content: null, readsContent: false });
    const prior = [...input.prior, ...walked.records.map((record) => ({ nodeId: record.node.id, open: JSON.parse(record.step.output!.json) as JsonValue }))];
    // The type folded is the first action's after any group of the call: this one's only if its key is this node's.
    const typeRead = foldedActionType(folded.nextType);
    if (typeRead === null || typeRead.key !== String(next.config.action_type)) return null;
    return { run, node: next, context, typeRead, prior };
  } catch {
    return null;
  }
}

/**
 * Prepares the pending action with `leading` (everything the call recorded before it, the run
 * moved to where the group ended) at the head of the proposal's batch. Answers the action's
 * progress; null when it failed before that batch, after writing `leading` on its own (the kernel
 * then prepares the action itself).
 */
export async function prepareActionAhead(env: Env, pending: PendingAction, batches: { leading: D1PreparedStatement[] }): Promise<{ progress: ActionProgress; stepId: string } | null> {
  const { run, node } = pending;
  const db = env.DB;
  const stepId = stepRunId(run.id, node.id, "");
  const at = now();
  let committed = false;
  try {
    const { progress } = await prepareWorkflowAction(env, {
      run,
      node,
      stepId,
      context: pending.context,
      stepRecorded: false,
      typeRead: pending.typeRead,
      // The action's step row joins the step rows before it in one statement (step-upserts.ts).
      park: combineStepUpserts(db, [...batches.leading, stepUpsert(db, { id: stepId, run, node, branchKey: "", state: "waiting", at })]),
      parkRun: [runProgress(db, run.id, node.id, "waiting", at)],
      onCommitted: () => {
        committed = true;
      },
    });
    return { progress, stepId };
  } catch (error) {
    // Its batch was written (the records with it): the call fails, and its retry answers from the records.
    if (committed || /malformed JSON/u.test(String(error))) throw error;
    await db.batch(batches.leading);
    return null;
  }
}
