// CEL expressions: JSON ↔ CEL number handling, typed errors, input mappings and step references.
import { describe, expect, it } from "vitest";
import { type ExpressionContext, ExpressionError, celToJson, compileExpression, evaluateInputMapping, evaluateWorkflowExpression, mentionsVariable, referencedSteps } from "../src/workflows/expressions";
import type { JsonValue } from "../src/workflows/types";

function context(input: JsonValue, steps: Record<string, JsonValue> = {}): ExpressionContext {
  return { input, report: null, run: { id: "run_1" }, steps, event: null };
}

const ctx = context({ count: 7, score: 2.5, category: "spam", tags: ["a", "b"], nested: { level: 3 } }, { enrich: { toxicity: 0.9 } });

/** The typed error an expression throws (fails the test if it returns). */
function failure(run: () => unknown): ExpressionError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ExpressionError);
    return error as ExpressionError;
  }
  expect.unreachable("expected the expression to fail");
}

describe("evaluateWorkflowExpression", () => {
  it("compares JSON numbers with CEL int literals", () => {
    expect(evaluateWorkflowExpression("input.count > 5", ctx)).toBe(true);
    expect(evaluateWorkflowExpression("input.count > 7", ctx)).toBe(false);
    expect(evaluateWorkflowExpression("input.count == 7", ctx)).toBe(true);
    expect(evaluateWorkflowExpression("input.score >= 2", ctx)).toBe(true);
    expect(evaluateWorkflowExpression("steps.enrich.toxicity > 0.5 && input.category == 'spam'", ctx)).toBe(true);
    expect(evaluateWorkflowExpression("input.category in ['spam', 'scam']", ctx)).toBe(true);
    expect(evaluateWorkflowExpression("'b' in input.tags", ctx)).toBe(true);
  });

  it("converts CEL integers (BigInt) to JSON numbers", () => {
    for (const [expression, expected] of [
      ["1 + 2", 3],
      ["size(input.tags)", 2],
      ["int(input.count) * 2", 14],
      ["9007199254740991", Number.MAX_SAFE_INTEGER],
      ["-9007199254740991", Number.MIN_SAFE_INTEGER],
      ["5u", 5],
      ["[1, 2, 3]", [1, 2, 3]],
      ["{'a': 1, 'b': [2]}", { a: 1, b: [2] }],
    ] as const) {
      const result = evaluateWorkflowExpression(expression, ctx);
      expect(result).toEqual(expected);
      expect(JSON.stringify(result)).toBe(JSON.stringify(expected));
    }
  });

  it("refuses integer results outside the safe JSON range with expression.result_invalid", () => {
    for (const expression of ["9007199254740992", "-9007199254740992", "9223372036854775807", "[1, 9007199254740993]", "18446744073709551615u"]) {
      expect(failure(() => evaluateWorkflowExpression(expression, ctx)).code).toBe("expression.result_invalid");
    }
  });

  it("refuses non-finite numbers and types, which JSON cannot hold", () => {
    expect(failure(() => evaluateWorkflowExpression("1.0 / 0.0", ctx)).code).toBe("expression.result_invalid");
    expect(failure(() => evaluateWorkflowExpression("type(1)", ctx)).code).toBe("expression.result_invalid");
  });

  it("converts optionals, bytes, timestamps and durations to JSON", () => {
    expect(evaluateWorkflowExpression("input.?missing", ctx)).toBeNull();
    expect(evaluateWorkflowExpression("input.?count", ctx)).toBe(7);
    expect(evaluateWorkflowExpression("optional.of(2)", ctx)).toBe(2);
    expect(evaluateWorkflowExpression("b'abc'", ctx)).toBe("YWJj");
    expect(evaluateWorkflowExpression("timestamp('2024-05-01T10:00:00Z')", ctx)).toBe("2024-05-01T10:00:00.000Z");
    expect(evaluateWorkflowExpression("duration('90s')", ctx)).toBe("90s");
  });

  it("converts large bytes results without overflowing the stack", () => {
    const text = "x".repeat(600_000);
    const result = evaluateWorkflowExpression("bytes(input.text)", context({ text }));
    expect(result).toBe(btoa(text));
  });

  it("keeps a __proto__ key of the data as data", () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as JsonValue;
    const result = evaluateWorkflowExpression("input", context(input)) as Record<string, JsonValue>;
    expect(Object.keys(result)).toEqual(["__proto__", "ok"]);
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect((result as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it("normalizes -0 so that the result round-trips through JSON", () => {
    const result = evaluateWorkflowExpression("-input.zero", context({ zero: 0 }));
    expect(Object.is(result, 0)).toBe(true);
  });

  it("reports a missing key as expression.failed with the node id", () => {
    const error = failure(() => evaluateWorkflowExpression("input.missing == 1", ctx, "route"));
    expect(error.code).toBe("expression.failed");
    expect(error.details).toEqual({ nodeId: "route" });
    expect(error.status).toBe(422);
  });

  it("reports a runtime type error as expression.failed", () => {
    expect(failure(() => evaluateWorkflowExpression("input.category > 1", ctx, "route")).code).toBe("expression.failed");
    expect(failure(() => evaluateWorkflowExpression("1 / 0", ctx)).code).toBe("expression.failed");
  });

  it("refuses a context over 1 MiB with expression.failed", () => {
    const error = failure(() => evaluateWorkflowExpression("true", context({ blob: "x".repeat(1_100_000) }), "big"));
    expect(error.code).toBe("expression.failed");
    expect(error.details).toEqual({ nodeId: "big" });
  });
});

describe("compileExpression", () => {
  it("refuses an undeclared variable at compile time", () => {
    const error = failure(() => compileExpression("foo == 1"));
    expect(error.code).toBe("expression.invalid");
    expect(error.message).toContain("foo");
  });

  it("refuses unknown functions and impossible operators at compile time", () => {
    for (const expression of ["lookup(input.id)", "1 + 'a'", "input.count > 5 ? 'x' : 1", "1 == 1.0"]) {
      expect(failure(() => compileExpression(expression)).code).toBe("expression.invalid");
    }
  });

  it("refuses syntax errors, non-strings, blanks and over-long text", () => {
    for (const expression of ["input.count >", "(", "'unterminated", 42, null, "", "   ", `${"1 + ".repeat(1_100)}1`]) {
      expect(failure(() => compileExpression(expression)).code).toBe("expression.invalid");
    }
  });

  it("accepts the expressions workflows use", () => {
    for (const expression of [
      "input.category == 'spam'",
      "has(input.nested.level)",
      "input.tags.exists(t, t == 'a')",
      "input.tags.all(t, size(t) > 0)",
      "size(input.tags) > 0",
      "input.category.startsWith('sp')",
      "input.category.matches('^s')",
      "string(input.count)",
      "steps.enrich.toxicity > 0.8 || input.count < 3",
      "event == null",
      "node_input.score > 1",
      "run.id != ''",
      "report == null",
      "input.?missing.orValue(1)",
      "!(input.count in [1, 2])",
      "input.tags.map(t, t + '!')",
    ]) {
      expect(typeof compileExpression(expression)).toBe("function");
    }
  });

  it("parses each text once (cached by text)", () => {
    expect(compileExpression("input.count > 1")).toBe(compileExpression("input.count > 1"));
  });
});

describe("celToJson", () => {
  it("maps Map keys to strings and refuses nesting deeper than 64", () => {
    expect(
      celToJson(
        new Map<unknown, unknown>([
          [1n, "a"],
          ["b", 2n],
        ]),
      ),
    ).toEqual({ 1: "a", b: 2 });
    let deep: unknown = 1;
    for (let i = 0; i < 70; i++) deep = [deep];
    expect(failure(() => celToJson(deep)).code).toBe("expression.result_invalid");
  });

  it("refuses values that are not data", () => {
    expect(failure(() => celToJson(() => 1)).code).toBe("expression.result_invalid");
    expect(failure(() => celToJson(Symbol("s"))).code).toBe("expression.result_invalid");
    expect(failure(() => celToJson(new (class Custom {})())).code).toBe("expression.result_invalid");
  });
});

describe("evaluateInputMapping", () => {
  it("evaluates every key into one JSON object", () => {
    expect(evaluateInputMapping({ text: "input.category", count: "input.count + 0.0", big: "input.count > 5" }, ctx, "n")).toEqual({ text: "spam", count: 7, big: true });
    expect(evaluateInputMapping(undefined, ctx)).toEqual({});
  });

  it("names the failing key and the node", () => {
    const error = failure(() => evaluateInputMapping({ ok: "input.count", broken: "input.nope" }, ctx, "enrich"));
    expect(error.code).toBe("expression.failed");
    expect(error.message).toMatch(/^inputMapping\.broken: /u);
    expect(error.details).toEqual({ nodeId: "enrich", key: "broken" });
  });

  it("keeps the code of a compile error", () => {
    const error = failure(() => evaluateInputMapping({ bad: "nope == 1" }, ctx, "enrich"));
    expect(error.code).toBe("expression.invalid");
    expect(error.details).toEqual({ nodeId: "enrich", key: "bad" });
  });

  it("a __proto__ key stays an own key and does not replace the prototype", () => {
    const mapping = JSON.parse('{"__proto__": "input.nested"}') as Record<string, string>;
    const out = evaluateInputMapping(mapping, ctx, "n");
    expect(Object.keys(out)).toEqual(["__proto__"]);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect((out as { level?: number }).level).toBeUndefined();
  });
});

describe("referencedSteps", () => {
  it("reads names from dot access and quoted indexes", () => {
    expect(referencedSteps("steps.a.score > 1")).toEqual(new Set(["a"]));
    expect(referencedSteps('steps["x-y"].ok')).toEqual(new Set(["x-y"]));
    expect(referencedSteps("steps['x'] == null")).toEqual(new Set(["x"]));
    expect(referencedSteps("steps.?c.orValue(1) == 1 && steps . d == 2")).toEqual(new Set(["c", "d"]));
    expect(referencedSteps("steps['a.b'].x && steps.enrich.y")).toEqual(new Set(["a.b", "enrich"]));
  });

  it("returns an empty set when steps is not read", () => {
    expect(referencedSteps("input.count > 1")).toEqual(new Set());
    expect(referencedSteps("input.my_steps.a == 1 && input.steps2.b == 2")).toEqual(new Set());
  });

  it("returns null (read everything) when the access is dynamic", () => {
    expect(referencedSteps("steps[input.k]")).toBeNull();
    expect(referencedSteps("size(steps) > 0")).toBeNull();
    expect(referencedSteps("'a' in steps")).toBeNull();
    expect(referencedSteps('steps["a\\"b"]')).toBeNull();
  });

  it("returns null for a macro or method on steps itself, not a step named like it", () => {
    expect(referencedSteps("steps.exists(k, k == 'a')")).toBeNull();
    expect(referencedSteps("steps.all(k, steps[k] != null)")).toBeNull();
    expect(referencedSteps("steps.exists (k, true)")).toBeNull();
    // A step may still be called "exists" and be read as a field.
    expect(referencedSteps("steps.exists.ok")).toEqual(new Set(["exists"]));
  });

  it("is conservative: whatever evaluation reads is in the set, or the set is null", () => {
    const steps = { a: { v: 1 }, b: { v: 2 }, "x-y": { v: 3 } };
    for (const expression of ["steps.a.v == 1", "steps['x-y'].v + steps.b.v > 0.0", "steps.exists(k, k == 'b')", "has(steps.a)"]) {
      const names = referencedSteps(expression);
      const visible = names === null ? steps : Object.fromEntries(Object.entries(steps).filter(([id]) => names.has(id)));
      expect(evaluateWorkflowExpression(expression, context({}, visible))).toEqual(evaluateWorkflowExpression(expression, context({}, steps)));
    }
  });
});

describe("mentionsVariable", () => {
  it("matches whole identifiers only", () => {
    expect(mentionsVariable("event.type == 'x'", "event")).toBe(true);
    expect(mentionsVariable("input.event_type == 'x'", "event")).toBe(false);
  });
});
