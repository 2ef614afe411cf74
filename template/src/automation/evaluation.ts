// Backtests: how a version would have decided past reports, next to what people decided.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError, notFound } from "../errors";
import { newId } from "../lib/crypto";
import { TERMINAL_RUN_STATES, getVersionRow } from "../workflows";
import { shadowReport } from "./shadow-report";

export const MAX_BACKTEST_REPORTS = 1_000;
const BACKTEST_CHUNK = 25;

/** Starts a backtest: shadow runs of the version over past reports (by ids or time range), queued in chunks. */
export async function startBacktest(env: Env, actor: Actor, workflowVersionId: string, input: { reportIds?: string[]; from?: string; to?: string; limit?: number }) {
  const version = await getVersionRow(env.DB, actor.installationId, workflowVersionId);
  if (!version) throw notFound("workflow_version");
  if (version.retiredAt) throw new AppError("workflow_version.retired", "The workflow version is retired.", { status: 409 });
  let reportIds: string[];
  if (input.reportIds?.length) {
    const { results } = await env.DB.prepare(`SELECT id FROM reports WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2)) ORDER BY created_at`)
      .bind(actor.installationId, JSON.stringify(input.reportIds))
      .all<{ id: string }>();
    reportIds = results.map((r) => r.id);
    // An id of another installation is not found, like one that does not exist (nothing tells them apart).
    if (reportIds.length !== new Set(input.reportIds).size) throw notFound("report");
  } else {
    if (!input.from && !input.to) throw new AppError("backtest.selection_required", "Give reportIds, or a time range (from, to).", { status: 422 });
    const { results } = await env.DB.prepare(`SELECT id FROM reports WHERE installation_id = ?1 AND (?2 IS NULL OR created_at >= ?2) AND (?3 IS NULL OR created_at < ?3)
      ORDER BY created_at LIMIT ?4`)
      .bind(actor.installationId, input.from ?? null, input.to ?? null, Math.min(input.limit ?? MAX_BACKTEST_REPORTS, MAX_BACKTEST_REPORTS))
      .all<{ id: string }>();
    reportIds = results.map((r) => r.id);
  }
  if (reportIds.length > MAX_BACKTEST_REPORTS) throw new AppError("backtest.too_large", `A backtest covers at most ${MAX_BACKTEST_REPORTS} reports.`, { status: 422 });
  const id = newId("bt");
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO backtests (id, installation_id, workflow_version_id, state, selection_json, total, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)`).bind(
      id,
      actor.installationId,
      workflowVersionId,
      reportIds.length === 0 ? "completed" : "running",
      JSON.stringify({ reportIds: input.reportIds ?? null, from: input.from ?? null, to: input.to ?? null }),
      reportIds.length,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `backtest:${id}:started`,
      action: "backtest.started",
      actor: actor.audit,
      target: { type: "backtest", id },
      details: { workflowVersionId, reports: reportIds.length },
      at,
    }),
  ]);
  const messages = [];
  for (let i = 0; i < reportIds.length; i += BACKTEST_CHUNK) {
    messages.push({ body: { backtestId: id, installationId: actor.installationId, actorKeyId: actor.audit.id, reportIds: reportIds.slice(i, i + BACKTEST_CHUNK) } });
  }
  for (let i = 0; i < messages.length; i += 100) await env.BACKTESTS.sendBatch(messages.slice(i, i + 100));
  return getBacktest(env, actor, id);
}

/** Progress (runs by state) and, once every run has finished, the shadow report of the backtest. */
export async function getBacktest(env: Env, actor: Actor, id: string) {
  const row = await env.DB.prepare(`SELECT id, workflow_version_id AS workflowVersionId, state, selection_json AS selectionJson, total, created_at AS createdAt, finished_at AS finishedAt
    FROM backtests WHERE installation_id = ?1 AND id = ?2`)
    .bind(actor.installationId, id)
    .first<{ id: string; workflowVersionId: string; state: string; selectionJson: string; total: number; createdAt: string; finishedAt: string | null }>();
  if (!row) throw notFound("backtest");
  const { results } = await env.DB.prepare(`SELECT state, COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND backtest_id = ?2 GROUP BY state`).bind(actor.installationId, id).all<{ state: string; n: number }>();
  const byState = Object.fromEntries(results.map((r) => [r.state, r.n]));
  const started = results.reduce((sum, r) => sum + r.n, 0);
  const finished = results.filter((r) => (TERMINAL_RUN_STATES as readonly string[]).includes(r.state) || r.state === "repair_required").reduce((sum, r) => sum + r.n, 0);
  let state = row.state;
  let finishedAt = row.finishedAt;
  if (state === "running" && finished >= row.total) {
    finishedAt = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE backtests SET state = 'completed', finished_at = ?3, updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND state = 'running'`).bind(actor.installationId, id, finishedAt),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `backtest:${id}:completed`,
        action: "backtest.completed",
        actor: { type: "system", id: "backtests" },
        target: { type: "backtest", id },
        details: { total: row.total, byState },
        at: finishedAt,
      }),
    ]);
    state = "completed";
  }
  return {
    id: row.id,
    workflowVersionId: row.workflowVersionId,
    state,
    selection: JSON.parse(row.selectionJson) as unknown,
    progress: { total: row.total, started, finished, byState },
    createdAt: row.createdAt,
    finishedAt,
    report: state === "completed" ? await shadowReport(env, actor, row.workflowVersionId, id) : null,
  };
}
