// Backtests: how a version would have decided past reports, next to what people decided.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { archivedReportCases, archivedReportsInRange } from "../cases";
import { AppError, errorCode, notFound } from "../errors";
import { newId } from "../lib/crypto";
import { TERMINAL_RUN_STATES, getVersionRow } from "../workflows";
import { type BacktestChunkMessage, chunkInsertStatements, chunkMessage, sendChunked } from "./backtest-chunks";
import { shadowReport } from "./shadow-report";

/** A durable backtest starts one Workflows instance per report. */
export const MAX_BACKTEST_REPORTS = 1_000;
/** A fast one evaluates reports in the Worker (backtest-fast.ts). */
export const MAX_FAST_BACKTEST_REPORTS = 100_000;
const BACKTEST_CHUNK = 25;
/** Reports per message of a fast backtest (backtest-fast.ts evaluates one message per invocation step). */
const FAST_CHUNK = 250;
/** Ids per lookup of a selection by ids. */
const ID_SLICE = 10_000;

export type BacktestEngine = "fast" | "durable";

interface StartInput {
  reportIds?: string[];
  from?: string;
  to?: string;
  limit?: number;
  engine?: BacktestEngine;
}

/**
 * Starts a backtest of the version over past reports (by ids or time range), queued in chunks:
 * `fast` (the default) evaluates them with the host walker, `durable` starts a shadow run each.
 */
export async function startBacktest(env: Env, actor: Actor, workflowVersionId: string, input: StartInput) {
  const version = await getVersionRow(env.DB, actor.installationId, workflowVersionId);
  if (!version) throw notFound("workflow_version");
  if (version.retiredAt) throw new AppError("workflow_version.retired", "The workflow version is retired.", { status: 409 });
  const engine: BacktestEngine = input.engine ?? "fast";
  const maximum = engine === "fast" ? MAX_FAST_BACKTEST_REPORTS : MAX_BACKTEST_REPORTS;
  let reportIds: string[];
  if (input.reportIds?.length) {
    const wanted = [...new Set(input.reportIds)];
    if (wanted.length > maximum) throw new AppError("backtest.too_large", `A ${engine} backtest covers at most ${maximum} reports.`, { status: 422 });
    // In slices: a bound parameter holds at most 2 MB on D1 (100,000 ids are about 4 MB of JSON).
    const found: Array<{ id: string; createdAt: string }> = [];
    for (let i = 0; i < wanted.length; i += ID_SLICE) {
      const { results } = await env.DB.prepare(`SELECT id, created_at AS createdAt FROM reports WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2))`)
        .bind(actor.installationId, JSON.stringify(wanted.slice(i, i + ID_SLICE)))
        .all<{ id: string; createdAt: string }>();
      found.push(...results);
    }
    found.sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1));
    reportIds = found.map((r) => r.id);
    if (reportIds.length !== wanted.length) {
      // Reports of archived cases: a fast backtest reads them from the archive (archived-reports.ts).
      const hot = new Set(reportIds);
      const missing = wanted.filter((id) => !hot.has(id));
      const archived = await archivedReportCases(env, actor.installationId, missing);
      // An id of another installation is not found, like one that does not exist (nothing tells them apart).
      if (archived.size !== missing.length) throw notFound("report");
      if (engine !== "fast") throw archivedNeedsFast(archived.size);
      reportIds.push(...missing);
    }
  } else {
    if (!input.from && !input.to) throw new AppError("backtest.selection_required", "Give reportIds, or a time range (from, to).", { status: 422 });
    if ((input.limit ?? 0) > maximum) throw new AppError("backtest.too_large", `A ${engine} backtest covers at most ${maximum} reports; lower limit or use engine "fast".`, { status: 422 });
    const { results } = await env.DB.prepare(`SELECT id, created_at AS createdAt FROM reports WHERE installation_id = ?1 AND (?2 IS NULL OR created_at >= ?2) AND (?3 IS NULL OR created_at < ?3)
      ORDER BY created_at, id LIMIT ?4`)
      .bind(actor.installationId, input.from ?? null, input.to ?? null, Math.min(input.limit ?? maximum, maximum))
      .all<{ id: string; createdAt: string }>();
    // Reports of archived cases in the range, from their day refs in R2; with the hot ones, oldest first.
    const limit = Math.min(input.limit ?? maximum, maximum);
    const archived = await archivedReportsInRange(env, actor.installationId, { from: input.from, to: input.to }, limit, new Set(results.map((r) => r.id)));
    if (archived.length > 0 && engine !== "fast") throw archivedNeedsFast(archived.length);
    reportIds = [...results, ...archived]
      .sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1))
      .slice(0, limit)
      .map((r) => r.id);
  }
  const id = newId("bt");
  const at = new Date().toISOString();
  const size = engine === "fast" ? FAST_CHUNK : BACKTEST_CHUNK;
  const chunks: string[][] = [];
  for (let i = 0; i < reportIds.length; i += size) chunks.push(reportIds.slice(i, i + size));
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO backtests (id, installation_id, workflow_version_id, engine, state, selection_json, total, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)`).bind(
      id,
      actor.installationId,
      workflowVersionId,
      engine,
      reportIds.length === 0 ? "completed" : "running",
      JSON.stringify({ reportIds: input.reportIds ? `${input.reportIds.length} ids` : null, from: input.from ?? null, to: input.to ?? null, limit: input.limit ?? null }),
      reportIds.length,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `backtest:${id}:started`,
      action: "backtest.started",
      actor: actor.audit,
      target: { type: "backtest", id },
      details: { workflowVersionId, engine, reports: reportIds.length },
      at,
    }),
    // The chunks' outbox (backtest-chunks.ts): a chunk whose message is lost is sent again.
    ...chunkInsertStatements(env.DB, engine, id, actor.installationId, actor.audit.id, chunks, at),
  ]);
  const messages = chunks.map((chunk, seq) => ({ body: chunkMessage(engine, id, actor.installationId, actor.audit.id, seq, chunk) }));
  const queue = engine === "fast" ? env.FAST_BACKTESTS : env.BACKTESTS;
  try {
    // A sendBatch holds at most 100 messages and 256 KB: batches are cut by count and by size.
    await sendChunked(queue as Queue<BacktestChunkMessage>, messages);
  } catch (error) {
    // Chunks already queued find the backtest failed and do nothing: it never sits half-queued as running.
    await env.DB.prepare(`UPDATE backtests SET state = 'failed', error_code = 'backtest.enqueue_failed', finished_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'running'`).bind(id, new Date().toISOString()).run();
    throw new AppError("backtest.enqueue_failed", `The backtest could not be queued (${errorCode(error)}); start it again.`, { status: 503, retryable: true });
  }
  return getBacktest(env, actor, id);
}

/** A durable backtest starts shadow runs, which need their reports in D1: archived ones are read by the fast engine only. */
function archivedNeedsFast(count: number): AppError {
  return new AppError("backtest.archived_reports_need_fast", `${count} of the selected reports belong to archived cases; a durable backtest cannot run them. Use engine "fast", which reads them from the archive.`, {
    status: 422,
    details: { archivedReports: count },
  });
}

/** Stops a running backtest: chunks not yet evaluated are skipped (durable runs already started finish). */
export async function cancelBacktest(env: Env, actor: Actor, id: string) {
  const row = await env.DB.prepare(`SELECT state FROM backtests WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<{ state: string }>();
  if (!row) throw notFound("backtest");
  if (row.state !== "running") throw new AppError("backtest.not_running", `The backtest is ${row.state}; only a running backtest can be cancelled.`, { status: 409 });
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE backtests SET state = 'cancelled', cancelled_at = ?3, finished_at = ?3, updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND state = 'running'`).bind(actor.installationId, id, at),
    auditStatement(env.DB, { installationId: actor.installationId, idempotencyKey: `backtest:${id}:cancelled`, action: "backtest.cancelled", actor: actor.audit, target: { type: "backtest", id }, details: {}, at }),
  ]);
  return getBacktest(env, actor, id);
}

const RESULT_STATES = ["completed", "needs_review", "failed"] as const;

/** A fast backtest's results, one per report, in report order (cursor: the last report id). */
export async function listBacktestResults(env: Env, actor: Actor, id: string, query: { limit?: number; cursor?: string; state?: string }) {
  const row = await env.DB.prepare(`SELECT engine FROM backtests WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<{ engine: string }>();
  if (!row) throw notFound("backtest");
  if (row.engine !== "fast") throw new AppError("backtest.results_durable", "A durable backtest's results are its shadow runs: list them with GET /api/v1/runs?backtestId=….", { status: 409 });
  if (query.state && !(RESULT_STATES as readonly string[]).includes(query.state)) throw new AppError("backtest.state_invalid", `state must be one of ${RESULT_STATES.join(", ")}.`, { status: 422 });
  const limit = Math.min(Math.max(query.limit ?? 100, 1), 1000);
  const { results } = await env.DB.prepare(`SELECT report_id AS reportId, state, outcome, terminal_code AS terminalCode, stopped_at AS stoppedAt, error_code AS errorCode, path_json AS pathJson, evaluated_at AS evaluatedAt
    FROM backtest_results WHERE installation_id = ?1 AND backtest_id = ?2 AND (?3 IS NULL OR report_id > ?3) AND (?4 IS NULL OR state = ?4) ORDER BY report_id LIMIT ?5`)
    .bind(actor.installationId, id, query.cursor ?? null, query.state ?? null, limit + 1)
    .all<{ reportId: string; state: string; outcome: string | null; terminalCode: string | null; stoppedAt: string | null; errorCode: string | null; pathJson: string; evaluatedAt: string }>();
  const page = results.slice(0, limit);
  return {
    items: page.map(({ pathJson, ...rest }) => ({ ...rest, path: JSON.parse(pathJson) as string[] })),
    nextCursor: results.length > limit ? page.at(-1)!.reportId : null,
  };
}

/** Progress and, once every report is evaluated, the shadow report of the backtest. */
export async function getBacktest(env: Env, actor: Actor, id: string) {
  const row = await env.DB.prepare(`SELECT id, workflow_version_id AS workflowVersionId, engine, state, selection_json AS selectionJson, total, processed, error_code AS errorCode,
      created_at AS createdAt, finished_at AS finishedAt, cancelled_at AS cancelledAt
    FROM backtests WHERE installation_id = ?1 AND id = ?2`)
    .bind(actor.installationId, id)
    .first<{
      id: string;
      workflowVersionId: string;
      engine: BacktestEngine;
      state: string;
      selectionJson: string;
      total: number;
      processed: number;
      errorCode: string | null;
      createdAt: string;
      finishedAt: string | null;
      cancelledAt: string | null;
    }>();
  if (!row) throw notFound("backtest");
  const progress = row.engine === "fast" ? await fastProgress(env, actor, row) : await durableProgress(env, actor, row);
  const state = progress.state;
  return {
    id: row.id,
    workflowVersionId: row.workflowVersionId,
    engine: row.engine,
    state,
    selection: JSON.parse(row.selectionJson) as unknown,
    progress: progress.figures,
    createdAt: row.createdAt,
    finishedAt: progress.finishedAt,
    cancelledAt: row.cancelledAt,
    errorCode: row.errorCode,
    report: state === "completed" ? await shadowReport(env, actor, row.workflowVersionId, id) : null,
  };
}

async function fastProgress(env: Env, actor: Actor, row: { id: string; state: string; total: number; processed: number; finishedAt: string | null }) {
  const { results } = await env.DB.prepare(`SELECT state, COUNT(*) AS n FROM backtest_results WHERE installation_id = ?1 AND backtest_id = ?2 GROUP BY state`).bind(actor.installationId, row.id).all<{ state: string; n: number }>();
  const byState = Object.fromEntries(results.map((r) => [r.state, r.n]));
  return { state: row.state, finishedAt: row.finishedAt, figures: { total: row.total, processed: row.processed, byState } };
}

/** Runs by state; the first status read after the last run finished marks the backtest completed. */
async function durableProgress(env: Env, actor: Actor, row: { id: string; state: string; total: number; finishedAt: string | null }) {
  const id = row.id;
  const { results } = await env.DB.prepare(`SELECT state, COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND backtest_id = ?2 GROUP BY state`).bind(actor.installationId, id).all<{ state: string; n: number }>();
  const byState = Object.fromEntries(results.map((r) => [r.state, r.n]));
  const started = results.reduce((sum, r) => sum + r.n, 0);
  const finished = results.filter((r) => (TERMINAL_RUN_STATES as readonly string[]).includes(r.state) || r.state === "repair_required").reduce((sum, r) => sum + r.n, 0);
  let state = row.state;
  let finishedAt = row.finishedAt;
  if (state === "running" && finished >= row.total) {
    finishedAt = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE backtests SET state = 'completed', processed = ?4, finished_at = ?3, updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND state = 'running'`).bind(actor.installationId, id, finishedAt, finished),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `backtest:${id}:completed`,
        action: "backtest.completed",
        actor: { type: "system", id: "backtests" },
        target: { type: "backtest", id },
        details: { engine: "durable", total: row.total, byState },
        at: finishedAt,
      }),
    ]);
    state = "completed";
  }
  return { state, finishedAt, figures: { total: row.total, started, finished, processed: finished, byState } };
}
