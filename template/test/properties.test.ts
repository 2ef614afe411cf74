// Property-based tests: the validator and the CEL module answer every input with a typed result.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ExpressionContext, evaluateWorkflowExpression } from "../src/workflows/expressions";
import { NODE_KINDS } from "../src/workflows/kinds/descriptors";
import type { JsonValue } from "../src/workflows/types";
import { type GraphValidationResult, parseWorkflowGraph, validateWorkflowGraph } from "../src/workflows/validation";
import { edge } from "./helpers";

const EXPRESSION_CODES = ["expression.invalid", "expression.failed", "expression.result_invalid", "expression.too_costly", "expression.nesting_too_deep", "expression.input_too_large"];
const HOSTILE_KEYS = ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf", "toJSON"];
const DEEP = 10_000;

function codeOf(error: unknown): unknown {
  return typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
}

/** `{ ok: true, graph }` or `{ ok: false, errors }` where every error is `{ path, code, message }` strings. */
function expectWellFormed(result: GraphValidationResult): void {
  expect(typeof result).toBe("object");
  if (result.ok) {
    expect(Array.isArray(result.graph.nodes)).toBe(true);
    expect(Array.isArray(result.graph.edges)).toBe(true);
    expect(typeof result.graph.plan.forkJoins).toBe("object");
    return;
  }
  expect(result.ok).toBe(false);
  expect(Array.isArray(result.errors)).toBe(true);
  expect(result.errors.length).toBeGreaterThan(0);
  expect(result.errors.length).toBeLessThanOrEqual(100);
  for (const error of result.errors) {
    expect(typeof error.path).toBe("string");
    expect(error.path.startsWith("$")).toBe(true);
    expect(typeof error.code).toBe("string");
    expect(typeof error.message).toBe("string");
  }
}

/** parseWorkflowGraph returns, or throws workflow_graph.invalid with the same problems. */
function expectParseTyped(input: unknown): void {
  const result = validateWorkflowGraph(input);
  try {
    const graph = parseWorkflowGraph(input);
    expect(result.ok).toBe(true);
    expect(graph.schemaVersion).toBe(1);
  } catch (error) {
    expect(codeOf(error)).toBe("workflow_graph.invalid");
    expect(result.ok).toBe(false);
    if (!result.ok) expect((error as { details?: unknown }).details).toEqual(result.errors);
  }
}

/** Builds `levels` of nesting iteratively: `[[[…]]]` or `{"a":{"a":…}}` as JSON text. */
function deepJson(levels: number, kind: "array" | "object"): string {
  return kind === "array" ? "[".repeat(levels) + "]".repeat(levels) : `${'{"a":'.repeat(levels - 1)}{}${"}".repeat(levels - 1)}`;
}

function deepValue(levels: number): unknown {
  let value: unknown = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

// ---- arbitraries: graph-shaped objects ---------------------------------------------------------

const idArb = fc.oneof({ arbitrary: fc.constantFrom("start", "a", "b", "c", "j", "done", ...HOSTILE_KEYS), weight: 4 }, { arbitrary: fc.string({ maxLength: 6 }), weight: 1 }, { arbitrary: fc.anything({ maxDepth: 1 }), weight: 1 });
const portArb = fc.oneof({ arbitrary: fc.constantFrom("success", "completed", "timeout", "received", "yes", "no", "error", "applied", ...HOSTILE_KEYS), weight: 4 }, { arbitrary: fc.string({ maxLength: 5 }), weight: 1 });
const expressionArb = fc.oneof(fc.constantFrom("input.x == 1", "true", "steps.a.ok", "foo", "(", "", "steps[input.k]"), fc.string({ maxLength: 12 }), fc.integer());
const keyArb = fc.oneof(fc.constantFrom(...HOSTILE_KEYS, "seconds", "event_type", "cases", "case_ports", "default_port", "timestamp", "text"), fc.string({ maxLength: 5 }));
const hostileRecord = (value: fc.Arbitrary<unknown>) => fc.dictionary(keyArb, value, { maxKeys: 5 });
const configArb = fc.oneof(
  {
    arbitrary: fc.record(
      {
        cases: fc.array(fc.record({ port: portArb, when: expressionArb }), { maxLength: 3 }),
        case_ports: fc.array(portArb, { maxLength: 3 }),
        default_port: portArb,
        result_ports: fc.array(portArb, { maxLength: 3 }),
        seconds: fc.oneof(fc.integer(), fc.double()),
        timeout_seconds: fc.integer(),
        event_type: fc.string({ maxLength: 8 }),
        provider_id: fc.string({ maxLength: 4 }),
        component: fc.string({ maxLength: 4 }),
        action_type: fc.string({ maxLength: 4 }),
        workflow_version_id: fc.string({ maxLength: 4 }),
        template: fc.string({ maxLength: 4 }),
        recipient: fc.string({ maxLength: 4 }),
        queue_id: fc.string({ maxLength: 4 }),
        terminal_code: fc.string({ maxLength: 4 }),
        response_schema: fc.anything({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    ),
    weight: 3,
  },
  { arbitrary: hostileRecord(fc.anything({ maxDepth: 2 })), weight: 1 },
  { arbitrary: fc.anything({ maxDepth: 3 }), weight: 1 },
);
const nodeArb = fc.oneof(
  {
    arbitrary: fc.record(
      {
        id: idArb,
        kind: fc.oneof({ arbitrary: fc.constantFrom(...NODE_KINDS), weight: 5 }, fc.constantFrom(...HOSTILE_KEYS), fc.anything({ maxDepth: 1 })),
        config: configArb,
        inputMapping: fc.oneof({ arbitrary: hostileRecord(expressionArb), weight: 3 }, fc.anything({ maxDepth: 1 })),
        errorPort: portArb,
        timeoutPolicy: fc.oneof(fc.record({ timeout_seconds: fc.integer(), retries: fc.integer() }, { requiredKeys: [] }), fc.anything({ maxDepth: 1 })),
      },
      { requiredKeys: ["id", "kind"] },
    ),
    weight: 6,
  },
  { arbitrary: fc.anything({ maxDepth: 2 }), weight: 1 },
);
const edgeArb = fc.oneof({ arbitrary: fc.record({ from: fc.record({ nodeId: idArb, port: portArb }), to: fc.record({ nodeId: idArb }) }), weight: 6 }, { arbitrary: fc.anything({ maxDepth: 2 }), weight: 1 });
const graphArb = fc.record(
  {
    schemaVersion: fc.oneof({ arbitrary: fc.constant(1), weight: 5 }, fc.anything({ maxDepth: 1 })),
    nodes: fc.oneof({ arbitrary: fc.array(nodeArb, { maxLength: 8 }), weight: 8 }, fc.anything({ maxDepth: 1 })),
    edges: fc.oneof({ arbitrary: fc.array(edgeArb, { maxLength: 12 }), weight: 8 }, fc.anything({ maxDepth: 1 })),
  },
  { requiredKeys: [] },
);

// ---- arbitraries: valid graphs (a chain of random kinds, some steps forking into two branches) --

/** A valid node of each kind that has fixed ports, with the ports it must connect. */
const VALID: Record<string, { node: Record<string, unknown>; ports: string[] }> = {
  condition: { node: { kind: "condition", config: { cases: [{ port: "yes", when: "input.flag == true" }], case_ports: ["yes"], default_port: "no" } }, ports: ["yes", "no"] },
  delay: { node: { kind: "delay", config: { seconds: 60 } }, ports: ["completed"] },
  delay_until: { node: { kind: "delay_until", inputMapping: { timestamp: "input.at" } }, ports: ["completed"] },
  enrichment: { node: { kind: "enrichment", config: { component: "builtin.text_stats" }, errorPort: "error" }, ports: ["success", "error"] },
  ai_proposal: { node: { kind: "ai_proposal", config: { provider_id: "p", result_ports: ["remove", "keep"] } }, ports: ["remove", "keep"] },
  human_task: { node: { kind: "human_task", config: { queue_id: "q" } }, ports: ["completed", "timeout"] },
  wait_for_event: { node: { kind: "wait_for_event", config: { event_type: "appeal.filed" } }, ports: ["received", "timeout"] },
  send_message: { node: { kind: "send_message", config: { template: "t", recipient: "reporter" } }, ports: ["sent"] },
  decision: { node: { kind: "decision", config: { outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Removed." } }, ports: ["recorded"] },
  handoff: { node: { kind: "handoff", config: { queue_id: "q" } }, ports: ["handed_off"] },
  start_linked_workflow: { node: { kind: "start_linked_workflow", config: { workflow_version_id: "wv" } }, ports: ["started"] },
  action: { node: { kind: "action", config: { action_type: "remove" } }, ports: ["applied", "rejected", "expired"] },
};
const kindArb = fc.constantFrom(...Object.keys(VALID));
const stepArb = fc.oneof(
  kindArb.map((kind) => ({ fork: false as const, kinds: [kind] })),
  fc.tuple(kindArb, kindArb).map((kinds) => ({ fork: true as const, kinds })),
);
const idsArb = fc
  .uniqueArray(fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,12}$/u), fc.constantFrom("constructor", "toString", "hasOwnProperty", "valueOf", "prototype")), { minLength: 40, maxLength: 40 })
  .map((ids) => ids.filter((id) => !["start", "done", "__proto__"].includes(id)));

const validGraphArb = fc.tuple(fc.array(stepArb, { minLength: 1, maxLength: 6 }), idsArb, fc.infiniteStream(fc.nat())).map(([steps, ids, shuffle]) => {
  let next = 0;
  const fresh = () => ids[next++] ?? `n${next}`;
  const nodes: Array<Record<string, unknown>> = [{ id: "start", kind: "start" }];
  const edges: Array<ReturnType<typeof edge>> = [];
  const forkJoins: Record<string, string> = {};
  let tails: Array<{ id: string; ports: string[] }> = [{ id: "start", ports: ["success"] }];
  const connect = (to: string) => {
    for (const tail of tails) for (const port of tail.ports) edges.push(edge(tail.id, port, to));
  };
  for (const step of steps) {
    if (!step.fork) {
      const id = fresh();
      nodes.push({ ...VALID[step.kinds[0]!]!.node, id });
      connect(id);
      tails = [{ id, ports: VALID[step.kinds[0]!]!.ports }];
      continue;
    }
    const split = fresh();
    const meet = fresh();
    nodes.push({ id: split, kind: "enrichment", config: { component: "builtin.text_stats" } }, { id: meet, kind: "join" });
    connect(split);
    for (const kind of step.kinds) {
      const id = fresh();
      nodes.push({ ...VALID[kind]!.node, id });
      edges.push(edge(split, "success", id));
      for (const port of VALID[kind]!.ports) edges.push(edge(id, port, meet));
    }
    forkJoins[`${split}:success`] = meet;
    tails = [{ id: meet, ports: ["success"] }];
  }
  nodes.push({ id: "done", kind: "end" });
  connect("done");
  // Order must not matter: shuffle nodes and edges deterministically from the stream.
  const order = <T>(list: T[]): T[] =>
    list
      .map((item) => [shuffle.next().value as number, item] as const)
      .sort((x, y) => x[0] - y[0])
      .map(([, item]) => item);
  return { graph: { schemaVersion: 1, nodes: order(nodes), edges: order(edges) }, forkJoins };
});

describe("validateWorkflowGraph never throws", () => {
  it("answers fc.anything() with a well-formed result", () => {
    fc.assert(
      fc.property(fc.anything({ withNullPrototype: true, withObjectString: true, withBigInt: true, withBoxedValues: true, withMap: true, withSet: true, withDate: true, withTypedArray: true, withSparseArray: true }), (input) => {
        expectWellFormed(validateWorkflowGraph(input));
        expectParseTyped(input);
      }),
      { numRuns: 1000 },
    );
  });

  it("answers random graph-shaped objects (hostile keys included), also after a JSON round trip", () => {
    fc.assert(
      fc.property(graphArb, fc.boolean(), (graph, viaJson) => {
        const input: unknown = viaJson ? JSON.parse(JSON.stringify(graph)) : graph;
        expectWellFormed(validateWorkflowGraph(input));
        expectParseTyped(input);
      }),
      { numRuns: 1000 },
    );
  });

  it("accepts every chain of valid nodes and plans each fork's join, whatever the order", () => {
    fc.assert(
      fc.property(validGraphArb, ({ graph, forkJoins }) => {
        const result = validateWorkflowGraph(graph);
        if (!result.ok) throw new Error(`expected valid: ${JSON.stringify(result.errors.slice(0, 3))}`);
        expect(result.graph.plan.forkJoins).toEqual(forkJoins);
        expect(result.graph.nodes).toHaveLength(graph.nodes.length);
      }),
      { numRuns: 300 },
    );
  });

  it("refuses a valid graph with any one edge removed (a port is left unconnected or a node unreachable)", () => {
    fc.assert(
      fc.property(validGraphArb, fc.nat(), ({ graph }, pick) => {
        const edges = graph.edges.filter((_, i) => i !== pick % graph.edges.length);
        const result = validateWorkflowGraph({ ...graph, edges });
        expectWellFormed(result);
        const codes = new Set(result.ok ? [] : result.errors.map((e) => e.code));
        expect(codes.size).toBeGreaterThan(0);
        for (const code of codes) expect(["port_unconnected", "node_unreachable"]).toContain(code);
      }),
      { numRuns: 300 },
    );
  });

  it("answers a valid graph with one part replaced by anything", () => {
    fc.assert(
      fc.property(validGraphArb, fc.nat(), fc.constantFrom("node", "config", "edge", "kind", "id", "inputMapping"), fc.anything({ maxDepth: 3 }), ({ graph }, pick, part, value) => {
        const nodes = graph.nodes.map((node) => ({ ...node }));
        const edges = [...graph.edges] as unknown[];
        const target = nodes[pick % nodes.length]!;
        if (part === "node") nodes[pick % nodes.length] = value as Record<string, unknown>;
        else if (part === "edge") edges[pick % edges.length] = value;
        else target[part] = value;
        expectWellFormed(validateWorkflowGraph({ ...graph, nodes, edges }));
      }),
      { numRuns: 500 },
    );
  });
});

// ---- CEL ---------------------------------------------------------------------------------------

const FIELDS = ["count", "category", "tags", "score", "flag", "nested", "missing", "__proto__", "constructor"];
// fast-check's JsonValue allows optional keys; the values it generates are plain JSON.
const jsonArb = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue>;
const contextArb: fc.Arbitrary<ExpressionContext> = fc.record({
  input: fc.oneof({ arbitrary: fc.dictionary(fc.constantFrom(...FIELDS), jsonArb, { maxKeys: 6 }), weight: 4 }, jsonArb),
  report: jsonArb,
  run: jsonArb,
  steps: fc.dictionary(fc.oneof(fc.constantFrom("a", "b", ...HOSTILE_KEYS), fc.string({ maxLength: 4 })), jsonArb, { maxKeys: 4 }),
  event: jsonArb,
});

const TOKENS = [
  "input",
  "steps",
  "event",
  "report",
  "run",
  "node_input",
  ".",
  "?",
  ":",
  "(",
  ")",
  "[",
  "]",
  "{",
  "}",
  ",",
  "==",
  "!=",
  "<",
  ">=",
  "&&",
  "||",
  "!",
  "-",
  "+",
  "*",
  "/",
  "%",
  "in",
  "count",
  "tags",
  "size",
  "has",
  "exists",
  "map",
  "'a'",
  '"b"',
  "1",
  "0",
  "2.5",
  "1u",
  "b'x'",
  "true",
  "null",
  "x",
  "__proto__",
  "constructor",
  "9223372036854775807",
  "9007199254740993",
  "duration('1s')",
  "type",
  "dyn",
  "int",
  "string",
];
const soupArb = fc.array(fc.constantFrom(...TOKENS), { minLength: 1, maxLength: 14 }).map((tokens) => tokens.join(" "));

type Grammar = { expr: string; leaf: string; cmp: string; and: string; or: string; inList: string; not: string; list: string };
const accessArb = fc.array(fc.constantFrom(...FIELDS), { minLength: 1, maxLength: 3 }).map((fields) => `input.${fields.join(".")}`);
const stringArb = fc.stringMatching(/^[a-z _-]{0,6}$/u).map((s) => `'${s}'`);
const intArb = fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.bigInt({ min: -(2n ** 63n) + 1n, max: 2n ** 63n - 1n })).map(String);
const grammar = fc.letrec<Grammar>((tie) => ({
  expr: fc.oneof({ depthSize: "small", withCrossShrink: true }, tie("leaf"), tie("cmp"), tie("and"), tie("or"), tie("inList"), tie("not")),
  leaf: fc.oneof(accessArb, stringArb, intArb, fc.constantFrom("true", "false", "null"), tie("list")),
  list: fc.array(fc.oneof(accessArb, stringArb, intArb), { maxLength: 4 }).map((items) => `[${items.join(", ")}]`),
  cmp: fc.tuple(tie("expr"), fc.constantFrom("==", "!=", "<", "<=", ">", ">="), tie("expr")).map(([a, op, b]) => `(${a}) ${op} (${b})`),
  and: fc.tuple(tie("expr"), tie("expr")).map(([a, b]) => `(${a}) && (${b})`),
  or: fc.tuple(tie("expr"), tie("expr")).map(([a, b]) => `(${a}) || (${b})`),
  inList: fc.tuple(tie("expr"), fc.oneof(tie("list"), accessArb)).map(([a, b]) => `(${a}) in ${b}`),
  not: tie("expr").map((a) => `!(${a})`),
}));

/** A result is JSON that survives JSON.stringify/parse unchanged; a failure is one of the three codes. */
function expectTypedOutcome(expression: string, context: ExpressionContext): "value" | "error" {
  let result: JsonValue;
  try {
    result = evaluateWorkflowExpression(expression, context, "node-1");
  } catch (error) {
    expect(error).toBeInstanceOf(Error);
    expect(EXPRESSION_CODES).toContain(codeOf(error));
    return "error";
  }
  expect(result).not.toBeUndefined();
  expect(JSON.parse(JSON.stringify(result))).toStrictEqual(result);
  return "value";
}

describe("evaluateWorkflowExpression answers every text with JSON or a typed error", () => {
  it("random strings", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: "binary", maxLength: 40 })), contextArb, (text, context) => {
        expectTypedOutcome(text, context);
      }),
      { numRuns: 1000 },
    );
  });

  it("token soup", () => {
    fc.assert(
      fc.property(soupArb, contextArb, (text, context) => {
        expectTypedOutcome(text, context);
      }),
      { numRuns: 1000 },
    );
  });

  it("well-formed expressions from a small grammar", () => {
    const outcomes = { value: 0, error: 0 };
    fc.assert(
      fc.property(grammar.expr, contextArb, (text, context) => {
        outcomes[expectTypedOutcome(text, context)]++;
      }),
      { numRuns: 1000 },
    );
    // The grammar is worth something only if it reaches evaluation, not just the parser.
    expect(outcomes.value).toBeGreaterThan(0);
  });
});

// ---- hostile nesting ---------------------------------------------------------------------------

describe("10,000-deep nesting is refused with a typed error", () => {
  it("a node config nested 10,000 levels → config_too_deep", () => {
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "e", kind: "enrichment", config: { component: "x", deep: deepValue(DEEP) } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "e"), edge("e", "success", "done")],
    };
    const result = validateWorkflowGraph(graph);
    expect(result).toEqual({ ok: false, errors: [{ path: "$.nodes[1].config", code: "config_too_deep", message: expect.any(String) }] });
  });

  it("a CEL expression with 10,000 nested parentheses → expression.invalid", () => {
    const context: ExpressionContext = { input: {}, report: null, run: null, steps: {}, event: null };
    for (const text of [`${"(".repeat(DEEP)}1${")".repeat(DEEP)}`, `${"(".repeat(2_000)}1${")".repeat(2_000)}`, `${"[".repeat(2_000)}${"]".repeat(2_000)}`, `${"!".repeat(4_000)}true`, `input${".a".repeat(1_500)}`]) {
      let code: unknown;
      try {
        evaluateWorkflowExpression(text, context);
      } catch (error) {
        code = codeOf(error);
      }
      expect(code).toBe("expression.invalid");
    }
  });

  it("a JSON graph body nested 10,000 deep anywhere", () => {
    const valid = '{"id":"start","kind":"start"},{"id":"done","kind":"end"}';
    const link = '{"from":{"nodeId":"start","port":"success"},"to":{"nodeId":"done"}}';
    const cases: Array<[body: (deep: string) => string, code: string, path: string]> = [
      [(deep) => `{"schemaVersion":1,"nodes":[${valid}],"edges":[${link}],"meta":${deep}}`, "graph_too_deep", "$"],
      [(deep) => `{"schemaVersion":1,"nodes":[${valid},${deep}],"edges":[${link}]}`, "graph_too_deep", "$.nodes[2]"],
      [(deep) => `{"schemaVersion":1,"nodes":[${valid},{"id":"x","kind":"end","inputMapping":{"v":${deep}}}],"edges":[${link}]}`, "graph_too_deep", "$.nodes[2]"],
      [(deep) => `{"schemaVersion":1,"nodes":[{"id":"start","kind":"start","config":${deep}},{"id":"done","kind":"end"}],"edges":[${link}]}`, "config_too_deep", "$.nodes[0].config"],
      [(deep) => `{"schemaVersion":1,"nodes":[${valid}],"edges":[{"from":{"nodeId":"start","port":${deep}},"to":{"nodeId":"done"}}]}`, "graph_too_deep", "$.edges[0]"],
      [(deep) => `{"schemaVersion":${deep},"nodes":[${valid}],"edges":[${link}]}`, "graph_too_deep", "$"],
    ];
    for (const [body, code, path] of cases) {
      for (const kind of ["array", "object"] as const) {
        const input: unknown = JSON.parse(body(deepJson(DEEP, kind)));
        expect(validateWorkflowGraph(input)).toEqual({ ok: false, errors: [{ path, code, message: expect.any(String) }] });
        expect(() => parseWorkflowGraph(input)).toThrow(expect.objectContaining({ code: "workflow_graph.invalid" }));
      }
    }
    // The whole body as one deep value is not a graph object at all.
    expect(validateWorkflowGraph(JSON.parse(deepJson(DEEP, "array")))).toEqual({ ok: false, errors: [{ path: "$", code: "graph_invalid", message: expect.any(String) }] });
    expect(validateWorkflowGraph(JSON.parse(deepJson(DEEP, "object")))).toEqual({ ok: false, errors: [{ path: "$", code: "graph_too_deep", message: expect.any(String) }] });
  });

  it("a cyclic object (from a JavaScript caller) → graph_too_deep, not a stack overflow", () => {
    const node: Record<string, unknown> = { id: "start", kind: "start" };
    node.self = node;
    expect(validateWorkflowGraph({ schemaVersion: 1, nodes: [node], edges: [] })).toEqual({ ok: false, errors: [{ path: "$.nodes[0]", code: "graph_too_deep", message: expect.any(String) }] });
  });

  it("an expression context nested 10,000 deep → expression.failed, or a value when it fits", () => {
    const context: ExpressionContext = { input: deepValue(DEEP) as JsonValue, report: null, run: null, steps: {}, event: null };
    for (const text of ["true", "input", "input.a.a.a"]) {
      let code: unknown = "none";
      try {
        const result = evaluateWorkflowExpression(text, context, "deep");
        expect(JSON.parse(JSON.stringify(result))).toStrictEqual(result);
      } catch (error) {
        code = codeOf(error);
      }
      expect(["none", ...EXPRESSION_CODES]).toContain(code);
    }
    // A result nested past 64 levels is refused even when the context is small enough.
    const shallow: ExpressionContext = { input: deepValue(100) as JsonValue, report: null, run: null, steps: {}, event: null };
    let code: unknown;
    try {
      evaluateWorkflowExpression("input", shallow);
    } catch (error) {
      code = codeOf(error);
    }
    expect(code).toBe("expression.result_invalid");
  });
});
