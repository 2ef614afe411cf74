// loadWorkflowExecutionContext: what a node's expressions may read, loaded at a cost that depends
// on what the node references, not on how long the run has been going.
import { getReportSummaryRowUnsafe } from "../cases/reports-queries";
import { reportSummary } from "../cases/reports";
import type { ExpressionContext } from "./expressions";
import { mentionsVariable, referencedSteps } from "./expressions";
import type { AuthorizedRun } from "./runtime-authorize";
import type { JsonValue, WorkflowNodeV1 } from "./types";

interface NodeReads {
  /** null: every step output (an expression reads `steps` dynamically). */
  steps: Set<string> | null;
  event: boolean;
  report: boolean;
}

// Nodes come from the per-version graph cache, so their analysis is cached by identity.
const readsCache = new WeakMap<WorkflowNodeV1, NodeReads>();

function expressionsOf(node: WorkflowNodeV1): string[] {
  const texts = Object.values(node.inputMapping ?? {});
  if (node.kind === "condition" && Array.isArray(node.config.cases)) {
    for (const entry of node.config.cases) {
      if (entry && typeof entry === "object" && !Array.isArray(entry) && typeof entry.when === "string") texts.push(entry.when);
    }
  }
  return texts;
}

export function nodeReads(node: WorkflowNodeV1): NodeReads {
  const cached = readsCache.get(node);
  if (cached) return cached;
  let steps: Set<string> | null = new Set();
  let event = false;
  let report = false;
  for (const text of expressionsOf(node)) {
    const referenced = referencedSteps(text);
    if (referenced === null) steps = null;
    else if (steps) for (const id of referenced) steps.add(id);
    event ||= mentionsVariable(text, "event");
    report ||= mentionsVariable(text, "report");
  }
  const reads = { steps, event, report };
  readsCache.set(node, reads);
  return reads;
}

function parseJson(text: string | null | undefined): JsonValue {
  if (!text) return null;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return null;
  }
}

/** True when `candidate` is the branch itself or one of its ancestors ("" is the main branch). */
function onBranchPath(candidate: string, branchKey: string): boolean {
  return candidate === "" || candidate === branchKey || branchKey.startsWith(`${candidate}.`);
}

/**
 * Builds `{ input, report, run, steps, event }` for one node. Only the step outputs its
 * expressions name are read (one indexed query); where a node ran in several branches, the
 * output on this branch's path wins.
 */
export async function loadWorkflowExecutionContext(
  env: Env,
  input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string },
): Promise<ExpressionContext> {
  const { run, node, branchKey } = input;
  const reads = nodeReads(node);
  const steps: Record<string, JsonValue> = {};
  const wanted = reads.steps === null ? null : [...reads.steps];
  if (wanted === null || wanted.length > 0) {
    const query = wanted === null
      ? env.DB.prepare(`
          SELECT s.node_id AS nodeId, s.branch_key AS branchKey, o.inline_json AS json
          FROM workflow_step_runs s JOIN workflow_step_outputs o ON o.step_run_id = s.id
          WHERE s.run_id = ?1`).bind(run.id)
      : env.DB.prepare(`
          SELECT s.node_id AS nodeId, s.branch_key AS branchKey, o.inline_json AS json
          FROM workflow_step_runs s JOIN workflow_step_outputs o ON o.step_run_id = s.id
          WHERE s.run_id = ?1 AND s.node_id IN (SELECT value FROM json_each(?2))`).bind(run.id, JSON.stringify(wanted));
    const { results } = await query.all<{ nodeId: string; branchKey: string; json: string }>();
    const chosen = new Map<string, { branchKey: string; json: string }>();
    for (const row of results) {
      const previous = chosen.get(row.nodeId);
      if (!previous || (!onBranchPath(previous.branchKey, branchKey) && onBranchPath(row.branchKey, branchKey))) chosen.set(row.nodeId, row);
    }
    for (const [id, row] of chosen) steps[id] = parseJson(row.json);
  }
  let event: JsonValue = null;
  if (reads.event) {
    const row = await env.DB.prepare(`
      SELECT id, type, payload_json AS payloadJson, created_at AS createdAt FROM workflow_events
      WHERE run_id = ?1 ORDER BY created_at DESC LIMIT 1
    `).bind(run.id).first<{ id: string; type: string; payloadJson: string; createdAt: string }>();
    if (row) event = { id: row.id, type: row.type, payload: parseJson(row.payloadJson), receivedAt: row.createdAt };
  }
  let report: JsonValue = null;
  if (reads.report && run.reportId) {
    const row = await getReportSummaryRowUnsafe(env.DB, run.reportId);
    if (row) report = reportSummary(row) as unknown as JsonValue;
  }
  return {
    input: parseJson(run.inputJson) ?? {},
    report,
    run: { id: run.id, workflowVersionId: run.workflowVersionId, authorityMode: run.authorityMode },
    steps,
    event,
  };
}
