// /bench/expression-budget: the cost of the expression budget on evaluation. The same condition is
// evaluated N times through evaluateWorkflowExpression (compile cache with the cost estimate made
// once, the context-size check, and — for an expression whose estimate needs them — the bounded
// list/string walk) and through the path without a budget: a cel-js Environment configured as
// expressions.ts configures its own, its parse cache, the same 1 MiB context check and the same
// JSON conversion, but no estimate and no bounds. Date.now() under wrangler's local engines is the
// wall clock, so each side is timed over many evaluations.
import { Environment } from "@marcbachmann/cel-js";
import { celToJson, EXPRESSION_VARIABLES, type ExpressionContext, evaluateWorkflowExpression } from "../src/workflows/expressions";

const plain = (() => {
  const env = new Environment({
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
    limits: { maxAstNodes: 2_000, maxDepth: 48, maxListElements: 500, maxMapEntries: 500, maxCallArguments: 16 },
  });
  for (const name of EXPRESSION_VARIABLES) env.registerVariable(name, "dyn");
  return env;
})();
const plainCache = new Map<string, (context: Record<string, unknown>) => unknown>();

function evaluateWithoutBudget(expression: string, context: ExpressionContext): unknown {
  let compiled = plainCache.get(expression);
  if (!compiled) {
    const parsed = plain.parse(expression);
    parsed.check();
    compiled = parsed as unknown as (context: Record<string, unknown>) => unknown;
    plainCache.set(expression, compiled);
  }
  if (JSON.stringify(context).length > 1_048_576) throw new Error("context too large");
  return celToJson(compiled(context as unknown as Record<string, unknown>));
}

/** A condition node's context: a report summary, the run input, two recorded steps. */
function typicalContext(): ExpressionContext {
  const report = { id: "rpt_1", category: "scams_and_fraud", subject: { kind: "content", id: "post-1" }, caseReportCount: 3 };
  return {
    input: { report },
    report,
    run: { id: "run_1", authorityMode: "shadow" },
    steps: {
      enrich: { port: "success", output: { toxicity: 0.91, labels: ["spam", "scam", "links"], matches: Array.from({ length: 20 }, (_, i) => `term-${i}`) } },
      history: { port: "success", output: { priorReports: 4, priorActions: 1 } },
    },
    event: null,
  };
}

export const BUDGET_CASES = {
  /** The typical condition: field reads and comparisons (its estimate needs no size bounds). */
  typical: "report.category == 'scams_and_fraud' && steps.enrich.output.toxicity > 0.8 && steps.history.output.priorReports >= 3",
  /** A comprehension over a step's list: its estimate needs the bounded walk of the context. */
  comprehension: "steps.enrich.output.labels.exists(l, l == 'scam') && steps.enrich.output.matches.size() > 10",
} as const;

export function expressionBudget(body: { rounds?: number; repeats?: number; firstRepeat?: number }): Response {
  const rounds = Math.min(Math.max(Number(body.rounds) || 100_000, 1_000), 1_000_000);
  const repeats = Math.min(Math.max(Number(body.repeats) || 5, 1), 15);
  // Which side goes first alternates with the repeat's index, counted across requests.
  const firstRepeat = Math.max(0, Math.floor(Number(body.firstRepeat) || 0));
  const context = typicalContext();
  const out: Record<string, { withBudgetMs: number[]; withoutBudgetMs: number[]; result: unknown }> = {};
  for (const [name, expression] of Object.entries(BUDGET_CASES)) {
    const withBudget = evaluateWorkflowExpression(expression, context);
    const without = evaluateWithoutBudget(expression, context);
    if (JSON.stringify(withBudget) !== JSON.stringify(without)) throw new Error(`${name}: the two paths disagree`);
    out[name] = { withBudgetMs: [], withoutBudgetMs: [], result: withBudget };
  }
  for (let repeat = 0; repeat < repeats; repeat++) {
    for (const [name, expression] of Object.entries(BUDGET_CASES)) {
      // Interleaved, alternating which side goes first.
      const sides: Array<["withBudgetMs" | "withoutBudgetMs", () => unknown]> = [
        ["withBudgetMs", () => evaluateWorkflowExpression(expression, context)],
        ["withoutBudgetMs", () => evaluateWithoutBudget(expression, context)],
      ];
      if ((firstRepeat + repeat) % 2 === 1) sides.reverse();
      for (const [side, run] of sides) {
        const began = Date.now();
        for (let i = 0; i < rounds; i++) run();
        out[name]![side].push((Date.now() - began) / rounds);
      }
    }
  }
  return Response.json({ rounds, repeats, cases: out, expressions: BUDGET_CASES });
}
