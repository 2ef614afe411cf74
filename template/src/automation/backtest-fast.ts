// Fast backtests: a version evaluated over past reports by the host walker (workflows/walker.ts),
// with the same node executors as durable shadow runs, but no Workflows instance per report. A
// chunk of report ids is one BACKTESTS message; its consumer evaluates a few reports at a time
// (a component or a model answers over the network), writes one result row per report in one
// statement, and counts progress in the same batch. Redelivery is harmless: reports already
// evaluated are skipped, rows are INSERT OR IGNORE, and the completion is recorded once.
import { auditStatement } from "../audit";
import { archivedReportRows, openRunContent, reportRowsStatement, reportSummary, type ReportRow } from "../cases";
import { errorCode } from "../errors";
import { yieldToRuntime } from "../lib/queue-work";
import { analyseContent, contentReadStatement, getVersionGraph, getVersionRow, type JsonValue } from "../workflows";
// The walker runs the node executors, which call automation and enforcement: like the runtime
// capability, it is imported from its module, and this consumer from src/index.ts, not an index.
import { walkShadow, type WalkResult } from "../workflows/walker";

/** Reports of one chunk evaluated at once. */
const FAST_PARALLEL = 8;

export interface FastChunk {
  backtestId: string;
  installationId: string;
  engine: "fast";
  reportIds: string[];
  /** The chunk's row in backtest_chunks (absent in messages queued before migration 0029). */
  seq?: number;
}

interface BacktestRow {
  versionId: string;
  state: string;
  total: number;
}

interface ResultRow {
  r: string;
  s: WalkResult["state"];
  o: string | null;
  t: string | null;
  n: string | null;
  e: string | null;
  p: string;
}

/** Evaluates one chunk; throws (so the message is retried) only when it could not record its results. */
export async function consumeFastChunk(env: Env, ctx: ExecutionContext, chunk: FastChunk, beat: () => Promise<void> = async () => {}): Promise<void> {
  const { backtestId, installationId } = chunk;
  const backtest = await env.DB.prepare(`SELECT workflow_version_id AS versionId, state, total FROM backtests WHERE id = ?1 AND installation_id = ?2 AND engine = 'fast'`).bind(backtestId, installationId).first<BacktestRow>();
  // Gone, cancelled or finished: nothing to do.
  if (backtest?.state !== "running") return;
  const version = await getVersionRow(env.DB, installationId, backtest.versionId);
  if (!version) return;
  const graph = getVersionGraph(version.id, version.graphJson);
  const [reports, done] = await env.DB.batch<Record<string, unknown>>([
    reportRowsStatement(env.DB, installationId, chunk.reportIds),
    env.DB.prepare(`SELECT report_id AS reportId FROM backtest_results WHERE backtest_id = ?1 AND report_id IN (SELECT value FROM json_each(?2))`).bind(backtestId, JSON.stringify(chunk.reportIds)),
  ]);
  const evaluated = new Set((done!.results as Array<{ reportId: string }>).map((row) => row.reportId));
  const found = reports!.results as unknown as ReportRow[];
  // Reports whose cases were archived since they were selected (or before): read from R2, as they were.
  if (found.length < chunk.reportIds.length) {
    const hot = new Set(found.map((row) => row.id));
    found.push(
      ...(await archivedReportRows(
        env,
        installationId,
        chunk.reportIds.filter((id) => !hot.has(id)),
      )),
    );
  }
  const pending = found.filter((row) => !evaluated.has(row.id));
  const present = new Set(found.map((row) => row.id));
  // A report deleted since the selection was made has nothing to evaluate: it is recorded as such.
  const rows: ResultRow[] = chunk.reportIds.filter((id) => !present.has(id) && !evaluated.has(id)).map((id) => ({ r: id, s: "failed", o: null, t: null, n: null, e: "report.not_found", p: "[]" }));
  const reached = new Set<string>();
  for (let i = 0; i < pending.length; i += FAST_PARALLEL) {
    const slice = pending.slice(i, i + FAST_PARALLEL);
    const results = await Promise.all(slice.map((row) => evaluate(env, ctx, { installationId, backtestId, versionId: version.id, graph, row })));
    // Evaluation is mostly CPU: between slices the runtime serves requests (lib/queue-work.ts says why).
    await yieldToRuntime();
    // A long chunk (model calls) says it is still being evaluated (backtest-chunks.ts).
    await beat();
    for (const [index, result] of results.entries()) {
      for (const nodeId of result.path) reached.add(nodeId);
      // A node that failed ran (and may have opened content); one the walk stopped at did not.
      if (result.state === "failed" && result.stoppedAt) reached.add(result.stoppedAt);
      rows.push({ r: slice[index]!.id, s: result.state, o: result.outcome, t: result.terminalCode, n: result.stoppedAt, e: result.errorCode, p: JSON.stringify(result.path) });
    }
    // Cancelled while this chunk was evaluated: keep what was evaluated, start nothing more.
    if (i + FAST_PARALLEL < pending.length && !(await stillRunning(env, installationId, backtestId))) break;
  }
  const at = new Date().toISOString();
  // A node that read content records it once per backtest (as in durable backtest runs).
  const readers = analyseContent(graph.nodes).readers;
  const run = syntheticRun({ installationId, backtestId, versionId: version.id, graph, reportId: null });
  const contentReads = graph.nodes.filter((node) => readers.has(node.id) && reached.has(node.id)).map((node) => contentReadStatement(env.DB, run, node));
  const statements = [
    env.DB.prepare(`INSERT OR IGNORE INTO backtest_results (backtest_id, report_id, installation_id, state, outcome, terminal_code, stopped_at, error_code, path_json, evaluated_at)
      SELECT ?1, json_extract(value, '$.r'), ?2, json_extract(value, '$.s'), json_extract(value, '$.o'), json_extract(value, '$.t'), json_extract(value, '$.n'),
        json_extract(value, '$.e'), json_extract(value, '$.p'), ?3 FROM json_each(?4)`).bind(backtestId, installationId, at, JSON.stringify(rows)),
    env.DB.prepare(`UPDATE backtests SET processed = (SELECT COUNT(*) FROM backtest_results WHERE backtest_id = ?1), updated_at = ?2 WHERE id = ?1`).bind(backtestId, at),
    ...contentReads,
  ];
  await env.DB.batch(statements);
  await completeIfDone(env, installationId, backtestId);
}

async function stillRunning(env: Env, installationId: string, backtestId: string): Promise<boolean> {
  const row = await env.DB.prepare(`SELECT state FROM backtests WHERE id = ?1 AND installation_id = ?2`).bind(backtestId, installationId).first<{ state: string }>();
  return row?.state === "running";
}

/** Marks the backtest completed (once, audited) when every report of the selection has its result. */
export async function completeIfDone(env: Env, installationId: string, backtestId: string): Promise<void> {
  const row = await env.DB.prepare(`SELECT state, total, processed FROM backtests WHERE id = ?1 AND installation_id = ?2`).bind(backtestId, installationId).first<{ state: string; total: number; processed: number }>();
  if (row?.state !== "running" || row.processed < row.total) return;
  const at = new Date().toISOString();
  const { results } = await env.DB.prepare(`SELECT state, COUNT(*) AS n FROM backtest_results WHERE backtest_id = ?1 GROUP BY state`).bind(backtestId).all<{ state: string; n: number }>();
  await env.DB.batch([
    env.DB.prepare(`UPDATE backtests SET state = 'completed', finished_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'running'`).bind(backtestId, at),
    auditStatement(env.DB, {
      installationId,
      idempotencyKey: `backtest:${backtestId}:completed`,
      action: "backtest.completed",
      actor: { type: "system", id: "backtests" },
      target: { type: "backtest", id: backtestId },
      details: { engine: "fast", total: row.total, byState: Object.fromEntries(results.map((r) => [r.state, r.n])) },
      at,
    }),
  ]);
}

function syntheticRun(input: { installationId: string; backtestId: string; versionId: string; graph: ReturnType<typeof getVersionGraph>; reportId: string | null; inputJson?: string }) {
  return {
    // No workflow_runs row stands behind it: the id names the backtest and the report.
    id: `bt:${input.backtestId}:${input.reportId ?? "all"}`,
    installationId: input.installationId,
    workflowVersionId: input.versionId,
    authorityMode: "shadow" as const,
    state: "running",
    inputJson: input.inputJson ?? "{}",
    reportId: input.reportId,
    appealId: null,
    backtestId: input.backtestId,
    graph: input.graph,
  };
}

/** One report through the walker; an unexpected error is the report's failed result, not the chunk's. */
async function evaluate(env: Env, ctx: ExecutionContext, input: { installationId: string; backtestId: string; versionId: string; graph: ReturnType<typeof getVersionGraph>; row: ReportRow }): Promise<WalkResult> {
  const { row } = input;
  const summary = reportSummary(row);
  const { caseReportCount: _count, ...report } = summary;
  const run = syntheticRun({ ...input, reportId: row.id, inputJson: JSON.stringify({ report }) });
  try {
    return await walkShadow({
      env,
      ctx,
      run,
      report: summary as unknown as JsonValue,
      content: async () => (await openRunContent(env, input.installationId, { reportId: row.id, reportSealed: row.personalData, appealId: null, appealSealed: null })) as unknown as JsonValue,
    });
  } catch (error) {
    return { state: "failed", outcome: null, terminalCode: null, stoppedAt: null, errorCode: errorCode(error), path: [] };
  }
}
