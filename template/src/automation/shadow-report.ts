// The shadow report: how a version decided (in shadow runs, or in one backtest, durable or fast),
// next to what people decided on the same reports; with per-outcome precision, recall and F1
// (Wilson intervals), Cohen's kappa, the counts behind them, and slices by category, source, week.
import type { Actor } from "../auth";
import { notFound } from "../errors";
import { getVersionRow } from "../workflows";
import { backtestSource, durableEvaluation, type EvaluatedItem, type Evaluation, fastEvaluation, isoWeek } from "./shadow-sources";
import { cohenKappa, confusionOf, type Kappa, type OutcomeFigures, outcomeFigures, type Proportion, wilson } from "./statistics";

/** A compared report: the version proposed an outcome and a person decided one. */
export interface ComparedItem extends EvaluatedItem {
  proposed: string;
  human: string;
  week: string;
}

export interface SliceFigures {
  /** The category, source or ISO week ("2026-W49"); "" for the whole report. */
  key: string;
  compared: number;
  /** Share of compared reports where the version proposed what people decided. */
  agreement: Proportion;
  kappa: Kappa;
  outcomes: OutcomeFigures[];
}

export const SLICE_DIMENSIONS = ["category", "source", "week"] as const;
export type SliceDimension = (typeof SLICE_DIMENSIONS)[number];

export function sliceFigures(key: string, items: readonly ComparedItem[]): SliceFigures & { labels: string[]; confusionMatrix: Record<string, Record<string, number>> } {
  const { matrix, labels, n } = confusionOf(items.map((item) => ({ proposed: item.proposed, actual: item.human })));
  const agreed = items.reduce((sum, item) => sum + (item.proposed === item.human ? 1 : 0), 0);
  return { key, compared: n, agreement: wilson(agreed, n), kappa: cohenKappa(matrix, labels), outcomes: outcomeFigures(matrix, labels), labels, confusionMatrix: matrix };
}

/** The compared items of an evaluation, and how many were left out for want of a human decision or a proposal. */
export function comparedItems(evaluation: Evaluation) {
  const compared: ComparedItem[] = [];
  let withoutHuman = 0;
  let withoutProposal = 0;
  for (const item of evaluation.items) {
    if (item.human === null) withoutHuman += 1;
    else if (item.proposed === null) withoutProposal += 1;
    else compared.push({ ...item, proposed: item.proposed, human: item.human, week: isoWeek(item.reportedAt) });
  }
  return { compared, withoutHuman, withoutProposal };
}

/** Every figure of an evaluation (pure: the report without its ids). */
export function reportFigures(evaluation: Evaluation) {
  const { compared, withoutHuman, withoutProposal } = comparedItems(evaluation);
  const overall = sliceFigures("", compared);
  const slices = {} as Record<SliceDimension, SliceFigures[]>;
  for (const dimension of SLICE_DIMENSIONS) {
    const groups = new Map<string, ComparedItem[]>();
    for (const item of compared) {
      const key = item[dimension];
      const group = groups.get(key);
      if (group) group.push(item);
      else groups.set(key, [item]);
    }
    slices[dimension] = [...groups.keys()].sort().map((key) => {
      const { labels: _labels, confusionMatrix: _matrix, ...figures } = sliceFigures(key, groups.get(key) ?? []);
      return figures;
    });
  }
  return {
    engine: evaluation.engine,
    // Kept from the first shadow report: evaluations that reached an end, compared, agreed.
    shadowRuns: evaluation.items.length,
    runsCompared: overall.compared,
    agreements: overall.agreement.successes,
    agreementRate: overall.agreement.value,
    withoutHumanDecision: withoutHuman,
    withoutProposal,
    labels: overall.labels,
    confusionMatrix: overall.confusionMatrix,
    needsReview: evaluation.needsReview,
    failed: evaluation.failed,
    truncated: evaluation.truncated,
    agreement: overall.agreement,
    kappa: overall.kappa,
    outcomes: overall.outcomes,
    slices,
    compared,
  };
}

/** The evaluation behind a version's shadow report, or one backtest's (of this installation, of this version). */
export async function loadEvaluation(env: Env, actor: Actor, workflowVersionId: string, backtestId: string | null): Promise<Evaluation> {
  const version = await getVersionRow(env.DB, actor.installationId, workflowVersionId);
  if (!version) throw notFound("workflow_version");
  if (backtestId === null) return durableEvaluation(env.DB, actor.installationId, workflowVersionId, null);
  const backtest = await backtestSource(env.DB, actor.installationId, backtestId);
  if (!backtest || backtest.workflowVersionId !== workflowVersionId) throw notFound("backtest");
  return backtest.engine === "fast" ? fastEvaluation(env.DB, actor.installationId, backtestId) : durableEvaluation(env.DB, actor.installationId, workflowVersionId, backtestId);
}

/**
 * Compares a version's evaluations (its shadow runs, or one backtest's, durable or fast) with the
 * latest decision a person made on each report: runs compared, agreement (Wilson interval), the
 * confusion matrix of proposed (rows) against human (columns) outcomes, per-outcome precision,
 * recall and F1, Cohen's kappa, and the same by category, source and ISO week of the report.
 * Needs-review and failed evaluations are counted, never compared. Read-only.
 */
export async function shadowReport(env: Env, actor: Actor, workflowVersionId: string, backtestId: string | null = null) {
  const { compared: _compared, ...figures } = reportFigures(await loadEvaluation(env, actor, workflowVersionId, backtestId));
  return { workflowVersionId, ...(backtestId ? { backtestId } : {}), ...figures };
}
