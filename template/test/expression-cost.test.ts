// Expression cost: a static budget at publish and trigger creation, bounded context
// sizes for expressions whose estimate needs them, and matches() on a linear-time matcher.
import { describe, expect, it } from "vitest";
import triage from "../examples/triage.json";
import { CONTEXT_LIST_LIMIT, EXPRESSION_COST_BUDGET, estimateExpressionCost } from "../src/workflows/expression-cost";
import { compileExpression, type ExpressionContext, ExpressionError, evaluateWorkflowExpression } from "../src/workflows/expressions";
import type { JsonValue } from "../src/workflows/types";
import { api, edge, newInstallation, publish } from "./helpers";

const context = (input: JsonValue): ExpressionContext => ({ input, report: null, run: null, steps: {}, event: null });

function failure(run: () => unknown): ExpressionError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ExpressionError);
    return error as ExpressionError;
  }
  expect.unreachable("expected the expression to be refused");
}

// Three comprehensions over lists from the context: a few hundred characters, and on today's
// code 1000³ steps of a synchronous evaluation inside POST /reports or the host.
const NESTED = "input.a.exists(x, input.b.exists(y, input.c.exists(z, x == y && y == z && z == 'never')))";

function conditionGraph(when: string) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "route", kind: "condition", config: { cases: [{ port: "hit", when }], case_ports: ["hit"], default_port: "miss" } },
      { id: "hit", kind: "end", config: { terminal_code: "hit" } },
      { id: "miss", kind: "end", config: { terminal_code: "miss" } },
    ],
    edges: [edge("start", "success", "route"), edge("route", "hit", "hit"), edge("route", "miss", "miss")],
  };
}

describe("expression cost budget", () => {
  it("refuses at publish a condition of nested comprehensions (CPU exhaustion by comprehension nesting), naming its path", async () => {
    const { apiKey } = await newInstallation();
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "nested" } });
    const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: conditionGraph(NESTED) } });
    expect(version.status).toBe(422);
    expect(version.body.error.code).toBe("workflow_graph.invalid");
    expect(version.body.error.details).toContainEqual(expect.objectContaining({ path: "$.nodes[1].config.cases[0].when", code: "expression.too_costly" }));
  });

  it("refuses a trigger whose when would run nested comprehensions on every report (intake CPU exhaustion)", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, conditionGraph("true"));
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: NESTED.replaceAll("input.", "report."), workflowVersionId: version.id, authorityMode: "shadow" } });
    expect(trigger.status).toBe(422);
    expect(trigger.body.error.code).toBe("trigger.when_too_costly");
    expect(trigger.body.error.details[0]).toMatchObject({ path: "$.when", code: "expression.too_costly", budget: EXPRESSION_COST_BUDGET });
    expect(trigger.body.error.details[0].estimatedCost).toBeGreaterThan(EXPRESSION_COST_BUDGET);
  });

  it("refuses comprehensions nested four deep even over tiny literal lists (nesting limit)", () => {
    const error = failure(() => compileExpression("[1].all(a, [1].all(b, [1].all(c, [1].all(d, a == d))))"));
    expect(error.code).toBe("expression.nesting_too_deep");
  });

  it("refuses doubling a string through cel.bind until it is too large to build (memory exhaustion by concatenation)", () => {
    const doubling = "cel.bind(a, input.s + input.s, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, d.size() > 0))))";
    expect(failure(() => compileExpression(doubling)).code).toBe("expression.too_costly");
  });

  it("fails a bounded expression on a context list over the bound instead of walking it (oversized list)", () => {
    const expression = "input.items.exists(x, x == 'needle')";
    expect(estimateExpressionCost((compileExpression(expression) as unknown as { ast: unknown }).ast).bounded).toBe(true);
    expect(evaluateWorkflowExpression(expression, context({ items: ["hay", "needle"] }))).toBe(true);
    const error = failure(() => evaluateWorkflowExpression(expression, context({ items: Array(CONTEXT_LIST_LIMIT + 1).fill("hay") }), "route"));
    expect(error.code).toBe("expression.input_too_large");
    expect(error.details).toMatchObject({ nodeId: "route", bound: "list_length", limit: CONTEXT_LIST_LIMIT });
  });

  it("keeps typical conditions within the budget and free of size bounds", () => {
    for (const expression of ["input.category == 'spam'", "steps.enrich.toxicity > 0.8 && report.category in ['spam', 'scams_and_fraud']", "input.text.contains('scam')", "size(input.tags) > 2"]) {
      const { cost, bounded } = estimateExpressionCost((compileExpression(expression) as unknown as { ast: unknown }).ast);
      expect(bounded).toBe(false);
      expect(cost).toBeLessThanOrEqual(EXPRESSION_COST_BUDGET);
    }
    for (const node of triage.nodes as Array<{ config?: { cases?: Array<{ when: string }> } }>) for (const c of node.config?.cases ?? []) expect(() => compileExpression(c.when)).not.toThrow();
  });
});

describe("matches() on a linear-time matcher", () => {
  it("answers a catastrophic-backtracking pattern on a long subject (ReDoS)", () => {
    // With RegExp, (a+)+$ against 64 a's and a '!' backtracks through 2^64 ways and never returns.
    expect(evaluateWorkflowExpression("input.s.matches('(a+)+$')", context({ s: `${"a".repeat(64)}!` }))).toBe(false);
    expect(evaluateWorkflowExpression("input.s.matches('(x+x+)+y')", context({ s: "x".repeat(5_000) }))).toBe(false);
    expect(evaluateWorkflowExpression("input.s.matches('(a|aa)+$')", context({ s: "a".repeat(5_000) }))).toBe(true);
  });

  it("refuses at compile time the constructs that need backtracking (backreferences, lookaround)", () => {
    for (const pattern of ["(a)\\\\1", "(?=a)a", "(?!b)a", "(?<=a)b", "(?<!a)b"]) {
      const error = failure(() => compileExpression(`input.s.matches('${pattern}')`));
      expect(error.code).toBe("expression.invalid");
      expect(error.message).toMatch(/matches\(\)/u);
    }
  });

  it("refuses a pattern only known at run time as too costly (an attacker-chosen regular expression)", () => {
    expect(failure(() => compileExpression("input.s.matches(input.pattern)")).code).toBe("expression.too_costly");
  });

  it("keeps RE2 semantics: unanchored search, classes, flags, anchors, repetition", () => {
    const cases: Array<[string, string, boolean]> = [
      ["scam|fraud", "a fraud here", true],
      ["^scam", "not a scam", false],
      ["(?i)^SCAM", "scam pills", true],
      ["\\\\d{3}-\\\\d{4}", "call 555-1234", true],
      ["\\\\bcat\\\\b", "concat", false],
      ["[^a-z]", "abc", false],
      ["colou?r$", "colour", true],
      ["a.c", "a😀c", true],
      ["(?s)a.c", "a\\nc", true],
      ["a.c", "a\\nc", false],
    ];
    for (const [pattern, subject, expected] of cases) expect(evaluateWorkflowExpression(`input.s.matches('${pattern}')`, context({ s: JSON.parse(`"${subject}"`) }))).toBe(expected);
  });
});
