import { actionTypeJsonSql, foldedActionType, prepareWorkflowAction, type ActionTypeRead } from "../enforcement";
import { nodeReads, nodeReadsContent } from "./execution-context";
import type { ExpressionContext } from "./expressions";
import { kindOf } from "./kinds/descriptors";
import { stepRunId, type AuthorizedRun, type FoldedReads, type RunFolds } from "./runtime-authorize";
import type { WalkedGroup } from "./runtime-fused";
import type { ActionProgress } from "./runtime-protocol";
import { now, runProgress, stepUpsert } from "./runtime-records";
import { combineStepUpserts } from "./step-upserts";
import { contextAfterGroup, nodesAfterGroup, readsFolds, singleNext, perGraphAndHead } from "./runtime-wait-ahead";
import type { JsonValue, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";

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
  return perGraphAndHead(cache, graph, head, () => {
    const actions = nodesAfterGroup(graph, head, (node) => actionable(graph, node));
    const first = actions[0];
    if (!first) return null;
    // The type of the first action only (one `nextType` fold); another's is read by prepareAction.
    const typeKey = String(first.config.action_type);
    return { folds: { ...readsFolds(actions), nextType: (param) => actionTypeJsonSql(param(typeKey)) }, typeKey, actions };
  });
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
  try {
    const context = await contextAfterGroup(run, next, walked, folded);
    if (!context) return null;
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
