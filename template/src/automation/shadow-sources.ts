// Where a shadow report's proposals come from: succeeded shadow runs of a version (durable: its
// runs, or one durable backtest's), or one fast backtest's results (the host walker's verdicts,
// no run per report). Both give the same items: a report, its category, source and date, what the
// version proposed and the latest decision a person made on it. Only ids and verdicts, no content.
import { runOutputJson, STEP_OUTPUT as OUTPUT } from "../workflows";

export const MAX_EVALUATED = 100_000;
const PAGE = 2_000;

export const SHADOW_ENGINES = ["durable", "fast"] as const;
export type ShadowEngine = (typeof SHADOW_ENGINES)[number];

export interface EvaluatedItem {
  reportId: string;
  category: string;
  source: string;
  /** When the report was made (ISO 8601), for the slices by week. */
  reportedAt: string;
  /** The outcome the version proposed; null when the evaluation ended without one. */
  proposed: string | null;
  /** The latest decision a person (not automation) made on the report; null when none yet. */
  human: string | null;
}

export interface Evaluation {
  engine: ShadowEngine;
  /** Evaluations that reached an end (succeeded shadow runs; completed fast results): the items. */
  items: EvaluatedItem[];
  /** Fast engine: evaluations stopped at a node that waits ("needs review"); not compared. */
  needsReview: number;
  /** Evaluations that failed (fast: a node failed; durable: runs failed or in repair); not compared. */
  failed: number;
  /** More than MAX_EVALUATED evaluations: the newest (durable) or first by report id (fast) are kept. */
  truncated: boolean;
}

const HUMAN_OUTCOME = (installation: string, report: string) => `(SELECT d.outcome FROM decisions d WHERE d.installation_id = ${installation} AND d.report_id = ${report}
  AND d.automated_decision = 'not_automated' ORDER BY d.decided_at DESC, d.created_at DESC LIMIT 1)`;

interface DurableRow {
  runId: string;
  runCreatedAt: string;
  reportId: string;
  category: string;
  source: string;
  reportedAt: string;
  outputJson: string | null;
  decisionJson: string | null;
  human: string | null;
}

/** The outcome a shadow run proposes: its (simulated) decision's outcome, else its end node's terminal code. */
function proposedOutcome(row: DurableRow): string | null {
  // The run's output may be stored in its compact form (workflows/run-input.ts).
  for (const json of [row.decisionJson, runOutputJson(row.outputJson)]) {
    if (!json) continue;
    const value = JSON.parse(json) as { outcome?: unknown; terminalCode?: unknown };
    if (typeof value.outcome === "string") return value.outcome;
    if (typeof value.terminalCode === "string") return value.terminalCode;
  }
  return null;
}

/** Succeeded shadow runs of a version (optionally of one durable backtest), newest first, in pages. */
export async function durableEvaluation(db: D1Database, installationId: string, workflowVersionId: string, backtestId: string | null): Promise<Evaluation> {
  const items: EvaluatedItem[] = [];
  let cursor: [string, string] | null = null;
  let truncated = false;
  for (;;) {
    const { results }: { results: DurableRow[] } = await db
      .prepare(`
      SELECT r.id AS runId, r.created_at AS runCreatedAt, r.report_id AS reportId, r.output_json AS outputJson,
        rep.category, rep.source, rep.created_at AS reportedAt,
        (SELECT ${OUTPUT.json} FROM workflow_step_runs s ${OUTPUT.join}
          WHERE s.run_id = r.id AND ${OUTPUT.json} IS NOT NULL AND s.node_type = 'decision' AND s.state = 'succeeded' ORDER BY s.finished_at DESC LIMIT 1) AS decisionJson,
        ${HUMAN_OUTCOME("r.installation_id", "r.report_id")} AS human
      FROM workflow_runs r JOIN reports rep ON rep.id = r.report_id AND rep.installation_id = r.installation_id
      WHERE r.installation_id = ?1 AND r.workflow_version_id = ?2 AND r.authority_mode = 'shadow' AND r.state = 'succeeded'
        AND (?3 IS NULL OR r.backtest_id = ?3) AND (?4 IS NULL OR (r.created_at, r.id) < (?4, ?5))
      ORDER BY r.created_at DESC, r.id DESC LIMIT ?6`)
      .bind(installationId, workflowVersionId, backtestId, cursor?.[0] ?? null, cursor?.[1] ?? null, PAGE)
      .all<DurableRow>();
    for (const row of results) {
      if (items.length === MAX_EVALUATED) {
        truncated = true;
        break;
      }
      items.push({ reportId: row.reportId, category: row.category, source: row.source, reportedAt: row.reportedAt, proposed: proposedOutcome(row), human: row.human });
    }
    const last = results.at(-1);
    if (truncated || results.length < PAGE || !last) break;
    cursor = [last.runCreatedAt, last.runId];
  }
  const failedRow = await db
    .prepare(`SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND workflow_version_id = ?2 AND authority_mode = 'shadow'
      AND state IN ('failed', 'repair_required') AND report_id IS NOT NULL AND (?3 IS NULL OR backtest_id = ?3)`)
    .bind(installationId, workflowVersionId, backtestId)
    .first<{ n: number }>();
  return { engine: "durable", items, needsReview: 0, failed: failedRow?.n ?? 0, truncated };
}

interface FastRow {
  reportId: string;
  state: "completed" | "needs_review" | "failed";
  outcome: string | null;
  category: string;
  source: string;
  reportedAt: string;
  human: string | null;
}

/** One fast backtest's results, by report id, in pages: completed ones are items, the others counted apart. */
export async function fastEvaluation(db: D1Database, installationId: string, backtestId: string): Promise<Evaluation> {
  const items: EvaluatedItem[] = [];
  let needsReview = 0;
  let failed = 0;
  let evaluated = 0;
  let truncated = false;
  let cursor = "";
  for (;;) {
    const { results }: { results: FastRow[] } = await db
      .prepare(`
      SELECT br.report_id AS reportId, br.state, br.outcome, rep.category, rep.source, rep.created_at AS reportedAt,
        ${HUMAN_OUTCOME("br.installation_id", "br.report_id")} AS human
      FROM backtest_results br JOIN reports rep ON rep.id = br.report_id AND rep.installation_id = br.installation_id
      WHERE br.installation_id = ?1 AND br.backtest_id = ?2 AND br.report_id > ?3
      ORDER BY br.report_id LIMIT ?4`)
      .bind(installationId, backtestId, cursor, PAGE)
      .all<FastRow>();
    for (const row of results) {
      if (evaluated === MAX_EVALUATED) {
        truncated = true;
        break;
      }
      evaluated += 1;
      if (row.state === "needs_review") needsReview += 1;
      else if (row.state === "failed") failed += 1;
      else items.push({ reportId: row.reportId, category: row.category, source: row.source, reportedAt: row.reportedAt, proposed: row.outcome, human: row.human });
    }
    const last = results.at(-1);
    if (truncated || results.length < PAGE || !last) break;
    cursor = last.reportId;
  }
  return { engine: "fast", items, needsReview, failed, truncated };
}

/** A backtest of the installation: its version and engine; null when it is not theirs or does not exist. */
export async function backtestSource(db: D1Database, installationId: string, backtestId: string) {
  return db.prepare(`SELECT workflow_version_id AS workflowVersionId, engine FROM backtests WHERE installation_id = ?1 AND id = ?2`).bind(installationId, backtestId).first<{ workflowVersionId: string; engine: ShadowEngine }>();
}

/** The ISO 8601 week (UTC) of a time: "2026-W49"; the days of 1 January 2027 (a Friday) belong to 2026-W53. */
export function isoWeek(at: string): string {
  const time = new Date(at);
  // The week belongs to the year of its Thursday.
  const day = new Date(Date.UTC(time.getUTCFullYear(), time.getUTCMonth(), time.getUTCDate()));
  day.setUTCDate(day.getUTCDate() + 4 - (day.getUTCDay() || 7));
  const year = day.getUTCFullYear();
  const week = Math.floor((day.getTime() - Date.UTC(year, 0, 1)) / 86_400_000 / 7) + 1;
  return `${year}-W${String(week).padStart(2, "0")}`;
}
