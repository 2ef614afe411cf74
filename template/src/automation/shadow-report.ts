// The shadow report: how a version decided (in shadow runs, or in one backtest), next to what
// people decided on the same reports.
import type { Actor } from "../auth";
import { notFound } from "../errors";
import { getVersionRow } from "../workflows";

const MAX_COMPARED = 10_000;

interface ComparedRow {
  runId: string;
  reportId: string;
  outputJson: string | null;
  decisionJson: string | null;
  humanOutcome: string | null;
}

/** The outcome a shadow run proposes: its (simulated) decision's outcome, else its end node's terminal code. */
function proposedOutcome(row: ComparedRow): string | null {
  for (const json of [row.decisionJson, row.outputJson]) {
    if (!json) continue;
    const value = JSON.parse(json) as { outcome?: unknown; terminalCode?: unknown };
    if (typeof value.outcome === "string") return value.outcome;
    if (typeof value.terminalCode === "string") return value.terminalCode;
  }
  return null;
}

/**
 * Compares succeeded shadow runs of a version (optionally of one backtest) with the latest decision
 * a person made on the same report: runs compared, agreement rate, and the confusion matrix of
 * proposed (rows) against human (columns) outcomes.
 */
export async function shadowReport(env: Env, actor: Actor, workflowVersionId: string, backtestId: string | null = null) {
  const version = await getVersionRow(env.DB, actor.installationId, workflowVersionId);
  if (!version) throw notFound("workflow_version");
  const { results } = await env.DB.prepare(`
    SELECT r.id AS runId, r.report_id AS reportId, r.output_json AS outputJson,
      (SELECT o.inline_json FROM workflow_step_runs s JOIN workflow_step_outputs o ON o.step_run_id = s.id
        WHERE s.run_id = r.id AND s.node_type = 'decision' AND s.state = 'succeeded' ORDER BY s.finished_at DESC LIMIT 1) AS decisionJson,
      (SELECT d.outcome FROM decisions d WHERE d.installation_id = r.installation_id AND d.report_id = r.report_id
        AND d.automated_decision = 'not_automated' ORDER BY d.decided_at DESC LIMIT 1) AS humanOutcome
    FROM workflow_runs r
    WHERE r.installation_id = ?1 AND r.workflow_version_id = ?2 AND r.authority_mode = 'shadow' AND r.state = 'succeeded'
      AND r.report_id IS NOT NULL AND (?3 IS NULL OR r.backtest_id = ?3)
    ORDER BY r.created_at LIMIT ?4
  `)
    .bind(actor.installationId, workflowVersionId, backtestId, MAX_COMPARED)
    .all<ComparedRow>();
  const matrix: Record<string, Record<string, number>> = {};
  const labels = new Set<string>();
  let compared = 0;
  let agreements = 0;
  let withoutHuman = 0;
  let withoutProposal = 0;
  for (const row of results) {
    const proposed = proposedOutcome(row);
    if (row.humanOutcome === null) {
      withoutHuman += 1;
      continue;
    }
    if (proposed === null) {
      withoutProposal += 1;
      continue;
    }
    compared += 1;
    if (proposed === row.humanOutcome) agreements += 1;
    labels.add(proposed);
    labels.add(row.humanOutcome);
    matrix[proposed] ??= {};
    matrix[proposed][row.humanOutcome] = (matrix[proposed][row.humanOutcome] ?? 0) + 1;
  }
  return {
    workflowVersionId,
    ...(backtestId ? { backtestId } : {}),
    shadowRuns: results.length,
    runsCompared: compared,
    agreements,
    agreementRate: compared === 0 ? null : agreements / compared,
    withoutHumanDecision: withoutHuman,
    withoutProposal,
    labels: [...labels].sort(),
    confusionMatrix: matrix,
  };
}
