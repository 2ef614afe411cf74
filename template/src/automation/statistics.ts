// Agreement statistics a policy lead can act on: Wilson score intervals for proportions,
// per-outcome precision, recall and F1 from a confusion matrix, and Cohen's kappa between two
// raters (a version and people, or two reviewers). Pure functions: every figure comes with the
// counts behind it, and a figure over zero cases is null, never 0 or 1.

/** z for a two-sided 95% interval. */
export const Z_95 = 1.959963984540054;

export interface Proportion {
  /** successes / trials, null when trials is 0. */
  value: number | null;
  /** The 95% Wilson score interval; [0, 1] carries no information, so it is null too at 0 trials. */
  low: number | null;
  high: number | null;
  successes: number;
  trials: number;
}

/** A proportion with its Wilson score interval (good at small n and at 0 or 100%, unlike the normal one). */
export function wilson(successes: number, trials: number, z = Z_95): Proportion {
  if (!Number.isInteger(successes) || !Number.isInteger(trials) || successes < 0 || trials < 0 || successes > trials) {
    throw new RangeError(`wilson: successes ${successes} of ${trials} trials is not a proportion`);
  }
  if (trials === 0) return { value: null, low: null, high: null, successes, trials };
  const p = successes / trials;
  const z2 = z * z;
  const denominator = 1 + z2 / trials;
  const centre = (p + z2 / (2 * trials)) / denominator;
  const half = (z * Math.sqrt((p * (1 - p)) / trials + z2 / (4 * trials * trials))) / denominator;
  // At 0 (or all) successes the bound is exactly 0 (or 1); rounding would leave 5.6e-17 there.
  const low = successes === 0 ? 0 : Math.max(0, centre - half);
  const high = successes === trials ? 1 : Math.min(1, centre + half);
  return { value: p, low, high, successes, trials };
}

/** rows: what the version (or the first rater) said; columns: what people (the second rater) said. */
export type ConfusionMatrix = Record<string, Record<string, number>>;

export interface Pair {
  proposed: string;
  actual: string;
}

export function confusionOf(pairs: Iterable<Pair>): { matrix: ConfusionMatrix; labels: string[]; n: number } {
  const matrix: ConfusionMatrix = {};
  const labels = new Set<string>();
  let n = 0;
  for (const { proposed, actual } of pairs) {
    labels.add(proposed);
    labels.add(actual);
    matrix[proposed] ??= {};
    matrix[proposed][actual] = (matrix[proposed][actual] ?? 0) + 1;
    n += 1;
  }
  return { matrix, labels: [...labels].sort(), n };
}

const cell = (matrix: ConfusionMatrix, row: string, column: string) => matrix[row]?.[column] ?? 0;

export interface OutcomeFigures {
  outcome: string;
  /** Proposed and decided alike. */
  truePositives: number;
  /** Proposed, but people decided otherwise. */
  falsePositives: number;
  /** Decided by people, but the version proposed otherwise. */
  falseNegatives: number;
  /** Of the cases the version proposed this outcome for, the share people agreed with. */
  precision: Proportion;
  /** Of the cases people decided this outcome for, the share the version proposed it. */
  recall: Proportion;
  /**
   * Harmonic mean of precision and recall, 2·tp / (2·tp + fp + fn): 0 when the version never
   * proposes an outcome people chose (precision has no cases, but the miss is real), null only
   * when neither side ever chose the outcome.
   */
  f1: number | null;
}

export function outcomeFigures(matrix: ConfusionMatrix, labels: readonly string[]): OutcomeFigures[] {
  return labels.map((outcome) => {
    const tp = cell(matrix, outcome, outcome);
    const proposed = labels.reduce((sum, column) => sum + cell(matrix, outcome, column), 0);
    const actual = labels.reduce((sum, row) => sum + cell(matrix, row, outcome), 0);
    const precision = wilson(tp, proposed);
    const recall = wilson(tp, actual);
    const f1 = proposed + actual === 0 ? null : (2 * tp) / (proposed + actual);
    return { outcome, truePositives: tp, falsePositives: proposed - tp, falseNegatives: actual - tp, precision, recall, f1 };
  });
}

export interface Kappa {
  /** (po − pe) / (1 − pe); null with no pairs, or when chance agreement is certain (pe = 1). */
  kappa: number | null;
  /** Observed agreement po. */
  observed: number | null;
  /** Agreement expected by chance pe, from each rater's marginal shares. */
  expected: number | null;
  n: number;
}

/** Cohen's kappa of the two raters of a confusion matrix. */
export function cohenKappa(matrix: ConfusionMatrix, labels: readonly string[]): Kappa {
  let n = 0;
  let agreed = 0;
  const rows = new Map<string, number>();
  const columns = new Map<string, number>();
  for (const row of labels) {
    for (const column of labels) {
      const count = cell(matrix, row, column);
      n += count;
      if (row === column) agreed += count;
      rows.set(row, (rows.get(row) ?? 0) + count);
      columns.set(column, (columns.get(column) ?? 0) + count);
    }
  }
  if (n === 0) return { kappa: null, observed: null, expected: null, n };
  const observed = agreed / n;
  let expected = 0;
  for (const label of labels) expected += ((rows.get(label) ?? 0) / n) * ((columns.get(label) ?? 0) / n);
  const kappa = expected >= 1 ? null : (observed - expected) / (1 - expected);
  return { kappa, observed, expected, n };
}
