// Reviewer QA figures, per reviewer and per category: agreement with QA (Wilson interval), accuracy
// on golden items (Wilson interval), Cohen's kappa between original and QA answers, and the median
// time per task (claim to completion).
import { reviewerLabel, type Actor } from "../../auth";
import { AppError } from "../../errors";
import { cohenKappa, confusionOf, wilson, type Kappa, type Proportion } from "../../automation";
import { labelName } from "./qa-sampling";
import { TASK_COMPLETED_BY_SQL } from "../queues/task-records";

const DEFAULT_WINDOW_DAYS = 30;
const TIME_SAMPLE = 20_000;

/** How agreement is defined, stated once for the API and the console. */
export const AGREEMENT_DEFINITION = "Two answers agree when the queue's compare field (default `outcome`) has the same value in both; a response without that field is compared whole (canonical JSON).";

interface QaPair {
  reviewer: string;
  qaReviewer: string | null;
  category: string | null;
  originalLabel: string;
  qaLabel: string;
  agreed: number;
}

interface GoldenResult {
  reviewer: string;
  category: string | null;
  correct: number;
}

interface TaskTime {
  reviewer: string;
  category: string | null;
  seconds: number;
}

export interface ReviewerFigures {
  tasksCompleted: number;
  medianSecondsPerTask: number | null;
  /** Of this reviewer's (or category's) answers that QA reviewed, the share QA agreed with. */
  qaAgreement: Proportion;
  /** Original vs QA answers, over the same pairs. */
  kappa: Kappa;
  /** Golden items answered right. */
  goldenAccuracy: Proportion;
  /** QA reviews this reviewer did of others' answers (per reviewer only). */
  qaReviewsDone?: number;
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const value = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return Math.round(value * 1000) / 1000;
}

function figuresOf(pairs: QaPair[], golden: GoldenResult[], times: TaskTime[]): ReviewerFigures {
  const { matrix, labels } = confusionOf(pairs.map((pair) => ({ proposed: labelName(pair.originalLabel), actual: labelName(pair.qaLabel) })));
  return {
    tasksCompleted: times.length,
    medianSecondsPerTask: median(times.map((time) => time.seconds)),
    qaAgreement: wilson(pairs.filter((pair) => pair.agreed === 1).length, pairs.length),
    kappa: cohenKappa(matrix, labels),
    goldenAccuracy: wilson(golden.filter((result) => result.correct === 1).length, golden.length),
  };
}

function groupBy<T>(rows: T[], key: (row: T) => string | null): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const name = key(row);
    if (name === null) continue;
    groups.set(name, [...(groups.get(name) ?? []), row]);
  }
  return groups;
}

/** The window's start: `since` (ISO 8601), default 30 days ago. */
export function windowStart(since: string | undefined, now = new Date()): string {
  if (since === undefined) return new Date(now.getTime() - DEFAULT_WINDOW_DAYS * 86_400_000).toISOString();
  const parsed = Date.parse(since);
  if (Number.isNaN(parsed)) throw new AppError("qa.since_invalid", "`since` must be an ISO 8601 date or time.", { status: 400 });
  return new Date(parsed).toISOString();
}

/**
 * Task times (?1 installation, ?2 since): each queue's tasks completed since then (and those of no
 * queue), one range of human_tasks_queue_ended per queue rather than a walk of every task the
 * installation completed (an ended task's last change is its completion: updated_at >= since holds
 * for each of them).
 */
export const TASK_TIMES_SQL = `
      SELECT ${TASK_COMPLETED_BY_SQL("t")} AS reviewer, COALESCE(r.category, qr.category, g.category) AS category, (julianday(t.completed_at) - julianday(t.claimed_at)) * 86400.0 AS seconds
      FROM (SELECT id FROM queues WHERE installation_id = ?1 UNION ALL SELECT NULL) q
        CROSS JOIN human_tasks t ON t.queue_id IS q.id AND t.state IN ('completed', 'expired', 'cancelled') AND t.updated_at >= ?2 AND +t.installation_id = ?1
        LEFT JOIN reports r ON r.id = t.report_id AND r.installation_id = t.installation_id
        LEFT JOIN qa_reviews qr ON qr.qa_task_id = t.id
        LEFT JOIN golden_items g ON g.task_id = t.id
      WHERE t.state = 'completed' AND t.completed_at >= ?2 AND t.completed_by IS NOT NULL AND t.claimed_at IS NOT NULL
      ORDER BY t.completed_at DESC LIMIT ${TIME_SAMPLE}
`;

/**
 * Figures per reviewer and per category since `since`: QA pairs by when the QA review was done,
 * golden results and task times by completion (time per task: claim to completion, over at most
 * 20,000 completed tasks of every kind). Categories are the reports' (a QA task's is its original's).
 */
export async function reviewerFigures(env: Env, actor: Actor, options: { since?: string }) {
  const since = windowStart(options.since);
  const [qa, golden, times] = await env.DB.batch([
    env.DB.prepare(`SELECT original_reviewer AS reviewer, qa_reviewer AS qaReviewer, category, original_label AS originalLabel, qa_label AS qaLabel, agreed
      FROM qa_reviews WHERE installation_id = ?1 AND qa_completed_at >= ?2 AND agreed IS NOT NULL LIMIT 50000`).bind(actor.installationId, since),
    env.DB.prepare(`SELECT completed_by AS reviewer, category, correct FROM golden_items WHERE installation_id = ?1 AND completed_at >= ?2 AND correct IS NOT NULL LIMIT 50000`).bind(actor.installationId, since),
    env.DB.prepare(TASK_TIMES_SQL).bind(actor.installationId, since),
  ]);
  // Reviewers by the name they are shown under (an API key's reviewer name, a console user's email).
  const pairs = (qa!.results as QaPair[]).map((pair) => ({ ...pair, reviewer: reviewerLabel(pair.reviewer), qaReviewer: reviewerLabel(pair.qaReviewer) }));
  const goldenResults = (golden!.results as GoldenResult[]).map((result) => ({ ...result, reviewer: reviewerLabel(result.reviewer) }));
  const taskTimes = (times!.results as TaskTime[]).map((time) => ({ ...time, reviewer: reviewerLabel(time.reviewer), seconds: Math.max(0, time.seconds) }));
  const reviewers = new Set<string>([...pairs.map((p) => p.reviewer), ...goldenResults.map((g) => g.reviewer), ...taskTimes.map((t) => t.reviewer)]);
  const pairsBy = groupBy(pairs, (p) => p.reviewer);
  const goldenBy = groupBy(goldenResults, (g) => g.reviewer);
  const timesBy = groupBy(taskTimes, (t) => t.reviewer);
  const qaDoneBy = groupBy(pairs, (p) => p.qaReviewer);
  const categories = new Set<string>([...pairs, ...goldenResults, ...taskTimes].map((row) => row.category ?? "uncategorised"));
  const category = (row: { category: string | null }) => row.category ?? "uncategorised";
  const pairsByCategory = groupBy(pairs, category);
  const goldenByCategory = groupBy(goldenResults, category);
  const timesByCategory = groupBy(taskTimes, category);
  return {
    since,
    agreement: AGREEMENT_DEFINITION,
    overall: figuresOf(pairs, goldenResults, taskTimes),
    reviewers: [...reviewers].sort().map((reviewer) => ({
      reviewer,
      ...figuresOf(pairsBy.get(reviewer) ?? [], goldenBy.get(reviewer) ?? [], timesBy.get(reviewer) ?? []),
      qaReviewsDone: qaDoneBy.get(reviewer)?.length ?? 0,
    })),
    categories: [...categories].sort().map((name) => ({ category: name, ...figuresOf(pairsByCategory.get(name) ?? [], goldenByCategory.get(name) ?? [], timesByCategory.get(name) ?? []) })),
  };
}
