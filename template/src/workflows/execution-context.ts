// loadWorkflowExecutionContext: what a node's expressions may read, loaded at a cost that depends
// on what the node references, not on how long the run has been going.
import { reportSummary, reportSummaryByRunStatementUnsafe, type ReportRow } from "../cases";
import type { ExpressionContext } from "./expressions";
import { mentionsVariable, referencedSteps } from "./expressions";
import { nodeExpressions } from "./kinds/descriptors";
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
  return nodeExpressions(node).flatMap((expression) => (typeof expression.text === "string" ? [expression.text] : []));
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

type ContextPart = "steps" | "event" | "report";

/**
 * The reads a node's context needs, as statements keyed by run id alone, so the capability can
 * send them in one batch with its authorization query (their rows are used only if that passes).
 */
export function contextStatements(db: D1Database, runId: string, node: WorkflowNodeV1): { parts: ContextPart[]; statements: D1PreparedStatement[] } {
  const reads = nodeReads(node);
  const parts: ContextPart[] = [];
  const statements: D1PreparedStatement[] = [];
  const wanted = reads.steps === null ? null : [...reads.steps];
  if (wanted === null || wanted.length > 0) {
    parts.push("steps");
    statements.push(
      wanted === null
        ? db
            .prepare(`
          SELECT s.node_id AS nodeId, s.branch_key AS branchKey, o.inline_json AS json
          FROM workflow_step_runs s JOIN workflow_step_outputs o ON o.step_run_id = s.id
          WHERE s.run_id = ?1`)
            .bind(runId)
        : db
            .prepare(`
          SELECT s.node_id AS nodeId, s.branch_key AS branchKey, o.inline_json AS json
          FROM workflow_step_runs s JOIN workflow_step_outputs o ON o.step_run_id = s.id
          WHERE s.run_id = ?1 AND s.node_id IN (SELECT value FROM json_each(?2))`)
            .bind(runId, JSON.stringify(wanted)),
    );
  }
  if (reads.event) {
    parts.push("event");
    statements.push(
      db
        .prepare(`
      SELECT id, type, payload_json AS payloadJson, created_at AS createdAt FROM workflow_events
      WHERE run_id = ?1 ORDER BY created_at DESC LIMIT 1`)
        .bind(runId),
    );
  }
  if (reads.report) {
    parts.push("report");
    statements.push(reportSummaryByRunStatementUnsafe(db, runId));
  }
  return { parts, statements };
}

/** Builds the context from the rows of `contextStatements`, in the same order. */
export function assembleContext(input: { run: AuthorizedRun; branchKey: string }, parts: ContextPart[], results: Array<D1Result<Record<string, unknown>>>): ExpressionContext {
  const { run, branchKey } = input;
  const steps: Record<string, JsonValue> = {};
  let event: JsonValue = null;
  let report: JsonValue = null;
  parts.forEach((part, index) => {
    const rows = results[index]?.results ?? [];
    if (part === "steps") {
      const chosen = new Map<string, { branchKey: string; json: string }>();
      for (const row of rows as Array<{ nodeId: string; branchKey: string; json: string }>) {
        const previous = chosen.get(row.nodeId);
        if (!previous || (!onBranchPath(previous.branchKey, branchKey) && onBranchPath(row.branchKey, branchKey))) chosen.set(row.nodeId, row);
      }
      for (const [id, row] of chosen) steps[id] = parseJson(row.json);
    } else if (part === "event") {
      const row = rows[0] as { id: string; type: string; payloadJson: string; createdAt: string } | undefined;
      if (row) event = { id: row.id, type: row.type, payload: parseJson(row.payloadJson), receivedAt: row.createdAt };
    } else {
      const row = rows[0] as ReportRow | undefined;
      if (row) report = reportSummary(row) as unknown as JsonValue;
    }
  });
  return {
    input: parseJson(run.inputJson) ?? {},
    report,
    run: { id: run.id, workflowVersionId: run.workflowVersionId, authorityMode: run.authorityMode },
    steps,
    event,
  };
}

/**
 * Builds `{ input, report, run, steps, event }` for one node. Only the step outputs its
 * expressions name are read (one indexed query); where a node ran in several branches, the
 * output on this branch's path wins.
 */
export async function loadWorkflowExecutionContext(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; preloaded?: ExpressionContext }): Promise<ExpressionContext> {
  if (input.preloaded) return input.preloaded;
  const { parts, statements } = contextStatements(env.DB, input.run.id, input.node);
  const results = statements.length > 0 ? await env.DB.batch<Record<string, unknown>>(statements) : [];
  return assembleContext(input, parts, results);
}
