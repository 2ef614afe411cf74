// Section "expressions": the cost of the expression budget on evaluation. In the
// Worker, a typical condition (field reads and comparisons) is evaluated through
// evaluateWorkflowExpression — cost estimate cached with the parsed form, plus the bounded-size
// walk of the context when the estimate needs it — and through the same path without a budget
// (bench/expression-budget.ts), interleaved; the ratio of the medians is the budget's cost. A
// comprehension over a step's list (whose estimate does need the walk) is reported beside it.
import { log, median, results, round, TARGETS, verdict } from "./lib.mjs";

const ROUNDS = 100_000;
const REPEATS = 7;
export const EXPRESSION_BUDGET_TARGET = 1.1;

export async function sectionExpressions(api, adminToken) {
  log(`expressions: a typical condition and a comprehension, ${ROUNDS} evaluations × ${REPEATS} per side`);
  await api("/bench/expression-budget", { body: { rounds: 2_000, repeats: 1 }, key: adminToken }); // warm-up
  // One request per repeat: a single request of every repeat held the Worker's event loop for ~8 s of
  // synchronous evaluation, and after the runtime sections' load wrangler's dev server then
  // restarted the Worker under the next request ("Your worker restarted mid-request").
  let measured = null;
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    const one = await api("/bench/expression-budget", { body: { rounds: ROUNDS, repeats: 1, firstRepeat: repeat }, key: adminToken });
    if (!measured) measured = one;
    else for (const [name, times] of Object.entries(one.cases)) for (const side of ["withBudgetMs", "withoutBudgetMs"]) measured.cases[name][side].push(...times[side]);
  }
  const figures = {};
  for (const [name, { withBudgetMs, withoutBudgetMs }] of Object.entries(measured.cases)) {
    const withUs = median(withBudgetMs) * 1_000;
    const withoutUs = median(withoutBudgetMs) * 1_000;
    // The repeats are interleaved: the per-repeat ratio cancels slow phases of a noisy machine.
    const paired = median(withBudgetMs.map((value, index) => value / withoutBudgetMs[index]));
    figures[name] = { withBudgetUs: round(withUs, 3), withoutBudgetUs: round(withoutUs, 3), ratio: round(paired, 3) };
  }
  Object.assign(results, {
    expressionBudgetOverNone: figures.typical.ratio,
    expressionBudgetTypicalUs: figures.typical,
    expressionBudgetComprehensionUs: figures.comprehension,
    expressionBudgetRounds: ROUNDS * REPEATS,
    expressionBudgetExpressions: measured.expressions,
  });
  TARGETS.expressionBudgetOverNone ??= EXPRESSION_BUDGET_TARGET;
}

export function expressionLines() {
  if (results.expressionBudgetOverNone === undefined) return [];
  const typical = results.expressionBudgetTypicalUs;
  const comprehension = results.expressionBudgetComprehensionUs;
  return [
    `expression budget: typical condition ${typical.withBudgetUs} µs with the budget, ${typical.withoutBudgetUs} µs without; ratio ${results.expressionBudgetOverNone} (target ≤ ${EXPRESSION_BUDGET_TARGET}) ${verdict(results.expressionBudgetOverNone, EXPRESSION_BUDGET_TARGET)}  (${results.expressionBudgetRounds} evaluations per side in the Worker, interleaved; a comprehension whose estimate needs the bounded-size walk: ${comprehension.withBudgetUs} µs vs ${comprehension.withoutBudgetUs} µs, ratio ${comprehension.ratio})`,
  ];
}
