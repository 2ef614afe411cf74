// loadWorkflowExecutionContext: what a node's expressions may read, loaded at a cost that depends
// on what the node references, not on how long the run has been going. A node that reads content
// (content-access.ts) gets the report's content and the sealed outputs it names, opened here by
// the host, with the read recorded (`report.content_read`) in the batch that records the step.
import { auditStatement, RUNTIME_ACTOR } from "../audit";
import { openPersonalData, openRunContent, reportSummary, reportSummaryByRunStatementUnsafe, runContentStatementUnsafe, type ReportRow, type ReportSummaryRow, type RunContentRow } from "../cases";
import { analyseContent } from "./content-access";
import { RELATED_SIGNAL_KINDS, RelatedAccounts, type ExpressionContext } from "./expressions";
import { semanticsOf } from "./expression-semantics";
import { mentionsVariable, referencedSteps } from "./expressions";
import { kindOf, nodeExpressions } from "./kinds/descriptors";
import type { AuthorizedRun } from "./runtime-authorize";
import type { JsonValue, ParsedWorkflowGraph, WorkflowNodeV1 } from "./types";
import { STEP_OUTPUT as OUTPUT } from "./step-output";

interface NodeReads {
  /** null: every step output (an expression reads `steps` dynamically). */
  steps: Set<string> | null;
  event: boolean;
  report: boolean;
  content: boolean;
  /** `related.count(kind)`: the accounts sharing a signal with the report subject's owner. */
  related: boolean;
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
  let content = false;
  let related = false;
  for (const text of expressionsOf(node)) {
    const referenced = referencedSteps(text);
    if (referenced === null) steps = null;
    else if (steps) for (const id of referenced) steps.add(id);
    event ||= mentionsVariable(text, "event");
    report ||= mentionsVariable(text, "report");
    content ||= mentionsVariable(text, "content");
    related ||= mentionsVariable(text, "related");
  }
  const reads = { steps, event, report, content, related };
  readsCache.set(node, reads);
  return reads;
}

/** Whether this node of the graph reads content (or outputs sealed because they derive from it). */
export function nodeReadsContent(graph: Pick<ParsedWorkflowGraph, "nodes">, node: WorkflowNodeV1): boolean {
  return analyseContent(graph.nodes).readers.has(node.id);
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

type ContextPart = "steps" | "event" | "report" | "content" | "related";

/**
 * The most a `related.count(kind)` answers: a count saturates at RELATED_COUNT_CAP, so 1000 reads
 * "1000 or more". Counting stops there (a spam wave of N accounts sharing one IP would otherwise
 * cost every one of its runs a walk of all N holders: O(N²) reads for the wave); a threshold above
 * the cap can never be met.
 */
export const RELATED_COUNT_CAP = 1000;

/**
 * Per signal kind, how many other accounts of the installation share a signal with the owner of a
 * report's subject (as the account page's `related.count`), at most RELATED_COUNT_CAP each: one seek
 * of account_signals per signal of the owner, stopped once the cap's distinct accounts are found.
 * `reportSql` and `installationSql` name the report and its installation. No owner, or no shared
 * signal: every count 0.
 */
function relatedCountsSql(reportSql: string, installationSql: string): string {
  return RELATED_SIGNAL_KINDS.map(
    (kind) => `SELECT '${kind}' AS kind, COUNT(*) AS n FROM (SELECT DISTINCT o.account_key
    FROM reports r
      JOIN account_signals mine ON mine.installation_id = r.installation_id AND mine.account_key = r.subject_owner_key AND mine.kind = '${kind}'
      JOIN account_signals o ON o.installation_id = mine.installation_id AND o.signal = mine.signal AND o.account_key <> mine.account_key
    WHERE r.id = ${reportSql} AND r.installation_id = ${installationSql} AND r.subject_owner_key IS NOT NULL
    LIMIT ${RELATED_COUNT_CAP})`,
  ).join("\n  UNION ALL ");
}

/**
 * The related-account counts read for a run, kept for the rest of its evaluation (in this isolate),
 * by run id (unique across installations; only a run's own authorized reads put its counts here):
 * every node of the run that names `related` after the first reads them from here, not from D1, and
 * sees the same counts. Bounded (the oldest run's counts are dropped first).
 */
const relatedByRun = new Map<string, RelatedAccounts>();
const RELATED_MEMO_RUNS = 256;

function rememberRelated(runId: string, related: RelatedAccounts): RelatedAccounts {
  relatedByRun.delete(runId);
  relatedByRun.set(runId, related);
  if (relatedByRun.size > RELATED_MEMO_RUNS) relatedByRun.delete(relatedByRun.keys().next().value!);
  return related;
}

/** The related-account counts of a run's report (keyed by the run id alone, as the other context reads). */
function relatedByRunStatement(db: D1Database, runId: string): D1PreparedStatement {
  return db.prepare(relatedCountsSql(`(SELECT w.report_id FROM workflow_runs w WHERE w.id = ?1)`, `(SELECT w.installation_id FROM workflow_runs w WHERE w.id = ?1)`)).bind(runId);
}

/**
 * The related-account counts of a run's report of the installation (the host walker's, which has no
 * run row), read once per run (`runId`) and remembered for its later nodes.
 */
export async function relatedAccountsOfReport(db: D1Database, installationId: string, reportId: string | null, runId?: string): Promise<RelatedAccounts> {
  if (!reportId) return new RelatedAccounts({});
  const known = runId ? relatedByRun.get(runId) : undefined;
  if (known) return known;
  const { results } = await db.prepare(relatedCountsSql("?2", "?1")).bind(installationId, reportId).all<{ kind: string; n: number }>();
  const related = relatedOf(results);
  return runId ? rememberRelated(runId, related) : related;
}

function relatedOf(rows: Array<Record<string, unknown>>): RelatedAccounts {
  return new RelatedAccounts(Object.fromEntries(rows.map((row) => [String(row.kind), Math.min(Number(row.n), RELATED_COUNT_CAP)])));
}

export interface ContextReads {
  parts: ContextPart[];
  statements: D1PreparedStatement[];
  readsContent: boolean;
  /** The report is read by the caller's own statement (its JSON given to assembleContext), not by one of these. */
  reportFolded?: boolean;
  /** The run's related-account counts, remembered from an earlier node (then not read again). */
  related?: RelatedAccounts;
}

/**
 * The reads a node's context needs, as statements keyed by run id alone, so the capability can
 * send them in one batch with its authorization query (their rows are used only if that passes).
 */
export function contextStatements(db: D1Database, runId: string, node: WorkflowNodeV1, graph: Pick<ParsedWorkflowGraph, "nodes">, options: { foldReport?: boolean } = {}): ContextReads {
  const reads = nodeReads(node);
  const readsContent = nodeReadsContent(graph, node);
  const parts: ContextPart[] = [];
  const statements: D1PreparedStatement[] = [];
  const wanted = reads.steps === null ? null : [...reads.steps];
  // Sealed outputs travel (still sealed) only to a node that may open them.
  const sealedColumn = readsContent ? OUTPUT.sealed : "NULL";
  if (wanted === null || wanted.length > 0) {
    parts.push("steps");
    statements.push(
      wanted === null
        ? db
            .prepare(`
          SELECT s.id, s.node_id AS nodeId, s.branch_key AS branchKey, ${OUTPUT.json} AS json, ${sealedColumn} AS sealed
          FROM workflow_step_runs s ${OUTPUT.join}
          WHERE s.run_id = ?1 AND ${OUTPUT.json} IS NOT NULL`)
            .bind(runId)
        : db
            .prepare(`
          SELECT s.id, s.node_id AS nodeId, s.branch_key AS branchKey, ${OUTPUT.json} AS json, ${sealedColumn} AS sealed
          FROM workflow_step_runs s ${OUTPUT.join}
          WHERE s.run_id = ?1 AND s.node_id IN (SELECT value FROM json_each(?2)) AND ${OUTPUT.json} IS NOT NULL`)
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
  const reportFolded = reads.report && options.foldReport === true;
  if (reads.report && !reportFolded) {
    parts.push("report");
    statements.push(reportSummaryByRunStatementUnsafe(db, runId));
  }
  if (readsContent && reads.content) {
    parts.push("content");
    statements.push(runContentStatementUnsafe(db, runId));
  }
  const remembered = reads.related ? relatedByRun.get(runId) : undefined;
  if (reads.related && !remembered) {
    parts.push("related");
    statements.push(relatedByRunStatement(db, runId));
  }
  return { parts, statements, readsContent, ...(reportFolded ? { reportFolded } : {}), ...(remembered ? { related: remembered } : {}) };
}

/** The audit event of a node opening content: one per run and node (one per backtest and node for backtest runs). */
export function contentReadStatement(db: D1Database, run: AuthorizedRun, node: WorkflowNodeV1): D1PreparedStatement {
  const purpose = kindOf(node.kind)?.content?.purpose ?? node.kind;
  const details = { runId: run.id, nodeId: node.id, kind: node.kind, purpose, workflowVersionId: run.workflowVersionId, reportId: run.reportId, appealId: run.appealId };
  return auditStatement(db, {
    installationId: run.installationId,
    idempotencyKey: run.backtestId ? `backtest:${run.backtestId}:content_read:${node.id}` : `run:${run.id}:content_read:${node.id}`,
    action: "report.content_read",
    actor: RUNTIME_ACTOR,
    target: run.backtestId ? { type: "backtest", id: run.backtestId } : run.reportId ? { type: "report", id: run.reportId } : { type: "workflow_run", id: run.id },
    details: run.backtestId ? { ...details, backtestId: run.backtestId } : details,
    at: new Date().toISOString(),
  });
}

export interface LoadedContext {
  context: ExpressionContext;
  /** For the batch that records the step: the content read's audit event, when content was opened. */
  statements: D1PreparedStatement[];
}

/** Builds the context from the rows of `contextStatements`, in the same order. */
export async function assembleContext(
  env: Env,
  input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string },
  reads: Pick<ContextReads, "parts" | "readsContent" | "reportFolded" | "related">,
  results: Array<D1Result<Record<string, unknown>>>,
  /** With `reads.reportFolded`: the REPORT_SUMMARY_BY_RUN_JSON_SQL value the caller read (null: no report). */
  foldedReport?: string | null,
): Promise<LoadedContext> {
  const { run, branchKey } = input;
  const steps: Record<string, JsonValue> = {};
  let event: JsonValue = null;
  let report: JsonValue = reads.reportFolded && foldedReport ? (reportSummary(JSON.parse(foldedReport) as ReportSummaryRow) as unknown as JsonValue) : null;
  let content: JsonValue | undefined;
  let related: RelatedAccounts | undefined = reads.related;
  for (const [index, part] of reads.parts.entries()) {
    const rows = results[index]?.results ?? [];
    if (part === "steps") {
      const chosen = new Map<string, { id: string; branchKey: string; json: string; sealed: string | null }>();
      for (const row of rows as Array<{ id: string; nodeId: string; branchKey: string; json: string; sealed: string | null }>) {
        const previous = chosen.get(row.nodeId);
        if (!previous || (!onBranchPath(previous.branchKey, branchKey) && onBranchPath(row.branchKey, branchKey))) chosen.set(row.nodeId, row);
      }
      for (const [id, row] of chosen) {
        steps[id] = reads.readsContent && row.sealed ? await openPersonalData<JsonValue>(env, run.installationId, `step_output:${row.id}`, row.sealed) : parseJson(row.json);
      }
    } else if (part === "event") {
      const row = rows[0] as { id: string; type: string; payloadJson: string; createdAt: string } | undefined;
      if (row) event = { id: row.id, type: row.type, payload: parseJson(row.payloadJson), receivedAt: row.createdAt };
    } else if (part === "report") {
      const row = rows[0] as ReportRow | undefined;
      if (row) report = reportSummary(row) as unknown as JsonValue;
    } else if (part === "related") {
      related = rememberRelated(run.id, relatedOf(rows));
    } else {
      content = (await openRunContent(env, run.installationId, rows[0] as RunContentRow | undefined)) as unknown as JsonValue;
    }
  }
  const context: ExpressionContext = {
    input: parseJson(run.inputJson) ?? {},
    report,
    run: { id: run.id, workflowVersionId: run.workflowVersionId, authorityMode: run.authorityMode },
    steps,
    event,
    ...(reads.readsContent ? { content: content ?? null } : {}),
    ...(related ? { related } : {}),
    semantics: semanticsOf(run.graph),
  };
  return { context, statements: reads.readsContent ? [contentReadStatement(env.DB, run, input.node)] : [] };
}

/** Loads a node's context in one batch (content opened and its read returned for the step's batch). */
export async function loadNodeContext(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string }): Promise<LoadedContext> {
  const reads = contextStatements(env.DB, input.run.id, input.node, input.run.graph);
  const results = reads.statements.length > 0 ? await env.DB.batch<Record<string, unknown>>(reads.statements) : [];
  return assembleContext(env, input, reads, results);
}

/**
 * Builds `{ input, report, run, steps, event, content? }` for one node. Only the step outputs its
 * expressions name are read (one indexed query); where a node ran in several branches, the
 * output on this branch's path wins. The capability preloads the context of every node that
 * reads content; loaded here instead, the read is recorded at once.
 */
export async function loadWorkflowExecutionContext(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; branchKey: string; preloaded?: ExpressionContext }): Promise<ExpressionContext> {
  if (input.preloaded) return input.preloaded;
  const loaded = await loadNodeContext(env, input);
  if (loaded.statements.length > 0) await env.DB.batch(loaded.statements);
  return loaded.context;
}
