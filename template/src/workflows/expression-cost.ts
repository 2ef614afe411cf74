// The cost of a CEL expression, bounded before it runs (cel-js has no runtime metering).
//
// A static estimate over the checked AST, in the manner of the CEL spec's cost model: every node
// costs 1, a comprehension costs its step times the largest size its list (or map) can have, and
// functions that walk strings or lists cost in proportion to the sizes they can see. Sizes come
// from a *shape* per node: how long it can be as a list or map, as a string or bytes, in total
// (all it holds), and what its elements can be. Context data has one of two shapes:
//
// - unbounded: whatever fits in the 1 MiB context (every size ≤ 1,048,576). An expression within
//   the budget under this shape runs as it is: its cost holds for every context.
// - bounded: lists and maps ≤ CONTEXT_LIST_LIMIT entries, strings ≤ CONTEXT_STRING_LIMIT. An
//   expression that only fits the budget under this shape is marked `bounded`, and evaluation
//   first checks the context against those bounds (expression.input_too_large otherwise).
//
// An expression over the budget under both is refused (expression.too_costly), as is one that
// nests comprehensions deeper than MAX_COMPREHENSION_NESTING. `matches()` runs on the linear-time
// matcher of lib/linear-regex (its pattern, when literal, is compiled and sized here).
import { compilePattern, MAX_PROGRAM_SIZE, PatternError } from "../lib/linear-regex";

/** Units of work one evaluation may cost; a unit is about one AST node (≈ 40 ns in cel-js 8). */
export const EXPRESSION_COST_BUDGET = 1_000_000;
export const MAX_COMPREHENSION_NESTING = 3;
export const CONTEXT_LIST_LIMIT = 1_000;
export const CONTEXT_STRING_LIMIT = 65_536;
const CONTEXT_BYTES = 1_048_576;
/** Work per character walked (cel-go's string traversal factor). */
const TRAVERSAL = 0.1;
/** Work per character and program instruction of the linear matcher (measured: up to ≈ 40 ns). */
const REGEX_STEP = 1;
const SCALAR_TEXT = 32; // string(x) of a number, timestamp, duration or bool
/** The name `matches` is given in the AST so that cel-js calls the linear matcher instead of RegExp. */
export const LINEAR_MATCHES = "__matches_linear";

interface Shape {
  /** Entries as a list or map. */
  list: number;
  /** Length as a string (UTF-16 units) or bytes. */
  string: number;
  /** Everything it holds: characters, entries and scalars, summed. */
  total: number;
  /** Its elements (list items, map keys and values); absent: the same bounds as itself. */
  elem?: Shape;
}

interface Mode {
  any: Shape;
}

const SCALAR: Shape = { list: 0, string: 0, total: 1 };
const UNBOUNDED: Mode = { any: { list: CONTEXT_BYTES, string: CONTEXT_BYTES, total: CONTEXT_BYTES } };
const BOUNDED: Mode = { any: { list: CONTEXT_LIST_LIMIT, string: CONTEXT_STRING_LIMIT, total: CONTEXT_BYTES } };
const NAMESPACES = new Set(["cel", "optional", "google"]);
const MACROS = new Set(["all", "exists", "exists_one", "map", "filter"]);

interface Ast {
  op: string;
  args: unknown;
  start?: number;
}

const isAst = (value: unknown): value is Ast => typeof value === "object" && value !== null && typeof (value as Ast).op === "string";
const elemOf = (shape: Shape): Shape => shape.elem ?? { list: shape.list, string: shape.string, total: shape.total };
const str = (length: number): Shape => ({ list: 0, string: length, total: length + 1 });

/** The shape with every size at most `limit`. */
function cap(shape: Shape, limit: number): Shape {
  const out: Shape = { list: Math.min(shape.list, limit), string: Math.min(shape.string, limit), total: Math.min(shape.total, limit) };
  if (shape.elem) out.elem = cap(shape.elem, limit);
  return out;
}

function join(a: Shape, b: Shape): Shape {
  const out: Shape = { list: Math.max(a.list, b.list), string: Math.max(a.string, b.string), total: Math.max(a.total, b.total) };
  if (a.elem || b.elem) out.elem = join(elemOf(a), elemOf(b));
  return out;
}

export class CostRefusal extends Error {
  constructor(
    readonly code: "expression.too_costly" | "expression.nesting_too_deep" | "expression.invalid",
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

interface Result {
  cost: number;
  shape: Shape;
}

class Estimator {
  constructor(private readonly mode: Mode) {}

  run(ast: Ast): Result {
    return this.node(ast, new Map(), 0);
  }

  private node(ast: Ast, scope: Map<string, Shape>, nesting: number): Result {
    const args = ast.args;
    const list = Array.isArray(args) ? (args as unknown[]) : [];
    const child = (value: unknown) => (isAst(value) ? this.node(value, scope, nesting) : { cost: 0, shape: SCALAR });
    switch (ast.op) {
      case "value":
        if (typeof args === "string") return { cost: 1, shape: str(args.length) };
        if (args instanceof Uint8Array) return { cost: 1, shape: str(args.length) };
        return { cost: 1, shape: SCALAR };
      case "id": {
        const name = String(args);
        const bound = scope.get(name);
        if (bound) return { cost: 1, shape: bound };
        return { cost: 1, shape: NAMESPACES.has(name) ? SCALAR : this.mode.any };
      }
      case ".":
      case ".?": {
        const target = child(list[0]);
        return { cost: 1 + target.cost, shape: elemOf(target.shape) };
      }
      case "[]":
      case "[?]": {
        const [target, index] = [child(list[0]), child(list[1])];
        return { cost: 1 + target.cost + index.cost, shape: elemOf(target.shape) };
      }
      case "list": {
        let cost = 1;
        let total = 1;
        let elem: Shape = { list: 0, string: 0, total: 0 };
        for (const item of list) {
          const r = child(item);
          cost += r.cost + 1;
          total += r.shape.total;
          elem = join(elem, r.shape);
        }
        return { cost, shape: { list: list.length, string: 0, total, elem } };
      }
      case "map": {
        let cost = 1;
        let total = 1;
        let elem: Shape = { list: 0, string: 0, total: 0 };
        for (const entry of list) {
          for (const part of entry as unknown[]) {
            const r = child(part);
            cost += r.cost;
            total += r.shape.total;
            elem = join(elem, r.shape);
          }
          cost += 1;
        }
        return { cost, shape: { list: list.length, string: 0, total, elem } };
      }
      case "?:": {
        const [c, a, b] = [child(list[0]), child(list[1]), child(list[2])];
        return { cost: 1 + c.cost + Math.max(a.cost, b.cost), shape: join(a.shape, b.shape) };
      }
      case "+": {
        const [a, b] = [child(list[0]), child(list[1])];
        const shape: Shape = { list: a.shape.list + b.shape.list, string: a.shape.string + b.shape.string, total: a.shape.total + b.shape.total };
        if (a.shape.elem || b.shape.elem) shape.elem = join(elemOf(a.shape), elemOf(b.shape));
        return { cost: 1 + a.cost + b.cost + shape.total * TRAVERSAL, shape };
      }
      case "==":
      case "!=":
      case "<":
      case "<=":
      case ">":
      case ">=": {
        const [a, b] = [child(list[0]), child(list[1])];
        return { cost: 1 + a.cost + b.cost + Math.min(a.shape.total, b.shape.total) * TRAVERSAL, shape: SCALAR };
      }
      case "in": {
        const [a, b] = [child(list[0]), child(list[1])];
        const compare = 1 + Math.min(a.shape.total, elemOf(b.shape).total) * TRAVERSAL;
        return { cost: 1 + a.cost + b.cost + b.shape.list * compare, shape: SCALAR };
      }
      case "call":
        return this.call(ast, scope, nesting);
      case "rcall":
        return this.rcall(ast, scope, nesting);
      default: {
        // Arithmetic, logic and negation: each operand once, a scalar out.
        let cost = 1;
        for (const item of list) cost += child(item).cost;
        if (isAst(args)) cost += child(args).cost;
        return { cost, shape: SCALAR };
      }
    }
  }

  private call(ast: Ast, scope: Map<string, Shape>, nesting: number): Result {
    const [name, rawArgs] = ast.args as [string, unknown[]];
    const args = rawArgs.map((a) => (isAst(a) ? this.node(a, scope, nesting) : { cost: 0, shape: SCALAR }));
    const cost = 1 + args.reduce((sum, a) => sum + a.cost, 0);
    const first = args[0]?.shape ?? SCALAR;
    switch (name) {
      case "dyn":
        return { cost, shape: first };
      case "string":
        return { cost: cost + first.string * TRAVERSAL, shape: str(Math.max(first.string * 3, SCALAR_TEXT)) };
      case "bytes":
        return { cost: cost + first.string * TRAVERSAL, shape: str(first.string * 3) };
      default:
        // has, size, type, bool, int, uint, double, timestamp, duration: read their argument once.
        return { cost: cost + args.reduce((sum, a) => sum + a.shape.string, 0) * TRAVERSAL, shape: SCALAR };
    }
  }

  private rcall(ast: Ast, scope: Map<string, Shape>, nesting: number): Result {
    const [name, receiverAst, rawArgs] = ast.args as [string, Ast, unknown[]];
    if (MACROS.has(name) && isAst(rawArgs[0]) && rawArgs[0].op === "id") return this.comprehension(ast, scope, nesting);
    if (name === "bind" && receiverAst.op === "id" && receiverAst.args === "cel" && isAst(rawArgs[0])) {
      const value = this.node(rawArgs[1] as Ast, scope, nesting);
      const inner = new Map(scope).set(String(rawArgs[0].args), value.shape);
      const body = this.node(rawArgs[2] as Ast, inner, nesting);
      return { cost: 1 + value.cost + body.cost, shape: body.shape };
    }
    const receiver = this.node(receiverAst, scope, nesting);
    const args = rawArgs.map((a) => (isAst(a) ? this.node(a, scope, nesting) : { cost: 0, shape: SCALAR }));
    const cost = 1 + receiver.cost + args.reduce((sum, a) => sum + a.cost, 0);
    const r = receiver.shape;
    const a0 = args[0]?.shape ?? SCALAR;
    switch (name) {
      case LINEAR_MATCHES: {
        const pattern = rawArgs[0];
        let size = MAX_PROGRAM_SIZE;
        if (isAst(pattern) && pattern.op === "value" && typeof pattern.args === "string") {
          try {
            size = compilePattern(pattern.args).size;
          } catch (error) {
            if (error instanceof PatternError) throw new CostRefusal("expression.invalid", `matches(): ${error.message}.`, { at: ast.start });
            throw error;
          }
        }
        return { cost: cost + a0.string * TRAVERSAL + (r.string + 1) * size * REGEX_STEP, shape: SCALAR };
      }
      case "startsWith":
      case "endsWith":
        return { cost: cost + Math.min(r.string, a0.string) * TRAVERSAL, shape: SCALAR };
      case "contains":
      case "indexOf":
      case "lastIndexOf":
      case "size":
        return { cost: cost + (r.string + a0.string) * TRAVERSAL, shape: SCALAR };
      case "lowerAscii":
      case "upperAscii":
        // Case mapping can lengthen a string (ß → SS, ΐ → three characters).
        return { cost: cost + r.string * TRAVERSAL, shape: str(r.string * 3) };
      case "trim":
      case "substring":
        return { cost: cost + r.string * TRAVERSAL, shape: str(r.string) };
      case "split": {
        const parts = r.string + 1;
        return { cost: cost + r.string * TRAVERSAL + parts, shape: { list: parts, string: 0, total: parts + r.string, elem: str(r.string) } };
      }
      case "join": {
        const length = r.total + r.list * a0.string;
        return { cost: cost + length * TRAVERSAL, shape: str(length) };
      }
      case "json": {
        // bytes.json(): any value that many bytes can spell.
        const n = r.string;
        return { cost: cost + n * TRAVERSAL * 10, shape: { list: n, string: n, total: n } };
      }
      case "hex":
      case "base64":
      case "string":
        return { cost: cost + r.string * TRAVERSAL, shape: str(r.string * 2 + 4) };
      case "of":
      case "value":
        return { cost, shape: name === "of" ? a0 : r };
      case "or":
      case "orValue":
        return { cost, shape: join(r, a0) };
      default:
        // Timestamp and duration accessors, hasValue, bytes.at, optional.none: scalars.
        return { cost: cost + (r.string + a0.string) * TRAVERSAL, shape: SCALAR };
    }
  }

  private comprehension(ast: Ast, scope: Map<string, Shape>, nesting: number): Result {
    const [name, receiverAst, rawArgs] = ast.args as [string, Ast, Ast[]];
    if (nesting + 1 > MAX_COMPREHENSION_NESTING) {
      throw new CostRefusal("expression.nesting_too_deep", `Comprehensions (all, exists, exists_one, map, filter) may nest at most ${MAX_COMPREHENSION_NESTING} deep.`, {
        at: ast.start,
        limit: MAX_COMPREHENSION_NESTING,
      });
    }
    const iterable = this.node(receiverAst, scope, nesting);
    const n = iterable.shape.list;
    const element = elemOf(iterable.shape);
    const step = (bound: Shape) => {
      const inner = new Map(scope).set(String(rawArgs[0]!.args), bound);
      let cost = 1;
      let last: Shape = SCALAR;
      for (const part of rawArgs.slice(1)) {
        const r = this.node(part, inner, nesting + 1);
        cost += r.cost;
        last = r.shape;
      }
      return { cost, last };
    };
    const full = step(element);
    const last = full.last;
    // Every element at its largest is n × f(E). But the elements share the iterable's total T, so
    // with f split into a concave and a convex part (sizes meet min, +, ×), the sum is also at most
    // n·f(T/n) (concave part, spread evenly) + n·f(0) + (T/E)·(f(E) − f(0)) (convex part,
    // concentrated in T/E largest elements). Keep the smaller of the two bounds.
    let perElements = n * full.cost;
    if (n > 0 && element.total > 0) {
      const spread = step(cap(element, iterable.shape.total / n)).cost;
      const empty = step(SCALAR).cost;
      perElements = Math.min(perElements, n * spread + n * empty + (iterable.shape.total / element.total) * Math.max(0, full.cost - empty));
    }
    const cost = 1 + iterable.cost + perElements;
    if (name === "map") return { cost, shape: { list: n, string: 0, total: n * (1 + last.total), elem: last } };
    if (name === "filter") return { cost, shape: { list: n, string: 0, total: iterable.shape.total, elem: element } };
    return { cost, shape: SCALAR };
  }
}

export interface ExpressionCost {
  /** The estimate that holds (under the bounded shape when `bounded`). */
  cost: number;
  /** Evaluation must first check the context against CONTEXT_LIST_LIMIT and CONTEXT_STRING_LIMIT. */
  bounded: boolean;
}

/** Estimates a checked AST; throws `CostRefusal` when it is over budget under either shape. */
export function estimateExpressionCost(ast: unknown): ExpressionCost {
  if (!isAst(ast)) return { cost: 1, bounded: false };
  const unbounded = new Estimator(UNBOUNDED).run(ast).cost;
  if (unbounded <= EXPRESSION_COST_BUDGET) return { cost: Math.ceil(unbounded), bounded: false };
  const bounded = new Estimator(BOUNDED).run(ast).cost;
  if (bounded <= EXPRESSION_COST_BUDGET) return { cost: Math.ceil(bounded), bounded: true };
  const estimate = Math.min(Math.ceil(bounded), Number.MAX_SAFE_INTEGER);
  throw new CostRefusal(
    "expression.too_costly",
    `The expression may cost up to ${estimate} units per evaluation (budget ${EXPRESSION_COST_BUDGET}, with lists ≤ ${CONTEXT_LIST_LIMIT} and strings ≤ ${CONTEXT_STRING_LIMIT}); nest fewer comprehensions or walk smaller lists and strings.`,
    { estimatedCost: estimate, budget: EXPRESSION_COST_BUDGET },
  );
}

/** Points every `x.matches(p)` of a parsed (unchecked) AST at the linear matcher. */
export function routeMatchesToLinearMatcher(ast: unknown): void {
  const stack: unknown[] = [ast];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    if (!isAst(node)) continue;
    const args = node.args as unknown[];
    if (node.op === "rcall" && args[0] === "matches" && Array.isArray(args[2]) && args[2].length === 1) args[0] = LINEAR_MATCHES;
    if (Array.isArray(args)) stack.push(...args);
    else if (isAst(args)) stack.push(args);
  }
}

const patterns = new Map<string, ReturnType<typeof compilePattern>>();

/** The linear matcher behind `matches()`; patterns are compiled once and cached. */
export function linearMatches(subject: string, pattern: string): boolean {
  let compiled = patterns.get(pattern);
  if (!compiled) {
    try {
      compiled = compilePattern(pattern);
    } catch (error) {
      throw new Error(`matches(): ${error instanceof Error ? error.message : String(error)}`);
    }
    if (patterns.size >= 1_000) patterns.clear();
    patterns.set(pattern, compiled);
  }
  return compiled.test(subject);
}

/** The first list, map or string of the context beyond the bounded shape, or null. */
export function contextOverBounds(context: unknown): { bound: "list_length" | "string_length"; limit: number } | null {
  const stack: unknown[] = [context];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === "string") {
      if (value.length > CONTEXT_STRING_LIMIT) return { bound: "string_length", limit: CONTEXT_STRING_LIMIT };
    } else if (Array.isArray(value)) {
      if (value.length > CONTEXT_LIST_LIMIT) return { bound: "list_length", limit: CONTEXT_LIST_LIMIT };
      for (const item of value) stack.push(item);
    } else if (typeof value === "object" && value !== null) {
      const keys = Object.keys(value);
      if (keys.length > CONTEXT_LIST_LIMIT) return { bound: "list_length", limit: CONTEXT_LIST_LIMIT };
      for (const key of keys) {
        if (key.length > CONTEXT_STRING_LIMIT) return { bound: "string_length", limit: CONTEXT_STRING_LIMIT };
        stack.push((value as Record<string, unknown>)[key]);
      }
    }
  }
  return null;
}
