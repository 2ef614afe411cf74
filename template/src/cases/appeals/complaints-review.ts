// DSA Art. 20(6): complaints are not decided solely by automated means. A workflow bound to
// `appeal.created` must pass a human_task (leaving it by `completed`: a timeout is no review) on
// every path from its start to a node that decides or enforces (decision, action), following the
// workflows it starts (start_linked_workflow) on a path that has not had its review yet. Checked
// when the trigger is created.
import { AppError } from "../../errors";
import { getVersionRow, type WorkflowNodeV1 } from "../../workflows";

/** The part of a published graph the check reads. */
interface WorkflowGraphV1 {
  nodes: WorkflowNodeV1[];
  edges: { from: { nodeId: string; port: string }; to: { nodeId: string } }[];
}

/** Node kinds that decide a complaint or enforce on it: a person must have reviewed before them. */
const DECIDING_KINDS = new Set(["decision", "action"]);
const MAX_LINK_DEPTH = 8;

type Load = (versionId: string) => Promise<WorkflowGraphV1 | null>;

/**
 * The first path (node ids, a linked workflow's as `version/node`) that reaches a deciding node
 * without passing a human_task; null when every path has its review.
 */
async function unreviewedPath(load: Load, graph: WorkflowGraphV1, stack: string[]): Promise<string[] | null> {
  const kinds = new Map(graph.nodes.map((n) => [n.id, n]));
  const next = new Map<string, { port: string; to: string }[]>(graph.nodes.map((n) => [n.id, []]));
  for (const edge of graph.edges) next.get(edge.from.nodeId)?.push({ port: edge.from.port, to: edge.to.nodeId });
  const start = graph.nodes.find((n) => n.kind === "start");
  if (!start) return null;
  const seen = new Set<string>();
  // Depth-first over the nodes reached without a review (graphs are DAGs); `path` is the walk to the node.
  const visit = async (id: string, path: string[]): Promise<string[] | null> => {
    if (seen.has(id)) return null;
    seen.add(id);
    const node = kinds.get(id);
    if (!node) return null;
    const here = [...path, id];
    if (DECIDING_KINDS.has(node.kind)) return here;
    if (node.kind === "start_linked_workflow") {
      const versionId = String(node.config.workflow_version_id ?? "");
      if (!stack.includes(versionId)) {
        const linked = stack.length >= MAX_LINK_DEPTH ? null : await load(versionId);
        if (!linked) return [...here, `${versionId} (linked workflow not found, or linked too deep to check)`];
        const inner = await unreviewedPath(load, linked, [...stack, versionId]);
        if (inner) return [...here, ...inner.map((step) => (step.includes("/") ? step : `${versionId}/${step}`))];
      }
    }
    for (const { port, to } of next.get(id) ?? []) {
      // A person reviewed only on a task's `completed` port; its timeout (or error) port was not reviewed.
      if (node.kind === "human_task" && port === "completed") continue;
      const found = await visit(to, here);
      if (found) return found;
    }
    return null;
  };
  return visit(start.id, []);
}

/** 422 `trigger.appeal_review_missing` naming the path that reaches a decision without a human_task. */
export async function assertComplaintReview(db: D1Database, installationId: string, version: { id: string; graphJson: string }): Promise<void> {
  const load: Load = async (versionId) => {
    const row = await getVersionRow(db, installationId, versionId);
    return row ? (JSON.parse(row.graphJson) as WorkflowGraphV1) : null;
  };
  const path = await unreviewedPath(load, JSON.parse(version.graphJson) as WorkflowGraphV1, [version.id]);
  if (!path) return;
  throw new AppError(
    "trigger.appeal_review_missing",
    `A workflow started by appeal.created must have a human_task on every path to a decision or action (DSA Art. 20(6): complaints are not decided by automation alone). This path has none: ${path.join(" → ")}. Add a human_task before it.`,
    { status: 422, details: [{ path: "$.workflowVersionId", code: "appeal_review_missing", nodePath: path }] },
  );
}
