// Expression semantics: what CEL's numeric operators mean for numbers that come from JSON. A
// graph declares its semantics (`expressionSemantics`, types.ts), and a published version keeps
// the one it was published with, so no version changes meaning when a new semantics is added.
//
// - `cel` (every stored graph without the field: those published before it existed): CEL as specified. JSON numbers are
//   doubles, literals like `2` are ints, and int/double never mix: `input.n % 2` and
//   `input.n + 1` fail with "no such overload".
// - `json-numbers-1` (written into every graph published without the field since): CEL plus overloads for what a JSON number meets halfway. `+ - * /` between
//   an int and a double compute in double (`input.n * 2`, `1 + 1.5`, `input.n / 2` is 1.5 for 3);
//   `%` with a double operand is integer modulo when both operands are whole (safe) numbers, its
//   result a double (`input.n % 2 == 0`), and fails clearly otherwise. Nothing is converted
//   wholesale: two int literals still divide as ints (`3 / 2` is 1), two doubles as doubles.
//   Comparisons across int and double hold in both semantics (cel-js compares numerically).
import type { Environment } from "@marcbachmann/cel-js";
import { type ExpressionSemantics, EXPRESSION_SEMANTICS } from "./types";

export { EXPRESSION_SEMANTICS, type ExpressionSemantics };
/** The meaning of a stored graph without the field: every version published before it existed. */
export const DEFAULT_EXPRESSION_SEMANTICS: ExpressionSemantics = "cel";
/** What a graph published without the field gets, written into its stored graph (validation.ts). */
export const CURRENT_EXPRESSION_SEMANTICS: ExpressionSemantics = "json-numbers-1";

export function isExpressionSemantics(value: unknown): value is ExpressionSemantics {
  return typeof value === "string" && (EXPRESSION_SEMANTICS as readonly string[]).includes(value);
}

/** The semantics a graph declares, or the default for a graph that declares none. */
export function semanticsOf(graph: { expressionSemantics?: unknown } | null | undefined): ExpressionSemantics {
  return isExpressionSemantics(graph?.expressionSemantics) ? graph.expressionSemantics : DEFAULT_EXPRESSION_SEMANTICS;
}

/** A `%` whose operands are not whole numbers, or whose divisor is zero. */
export class NumericModuloError extends Error {}

function wholeModulo(left: number, right: number): number {
  if (!Number.isSafeInteger(left) || !Number.isSafeInteger(right)) {
    throw new NumericModuloError("% needs whole numbers (integers within ±2^53) on both sides; round first, e.g. math.round(x), or compare with a tolerance.");
  }
  if (right === 0) throw new NumericModuloError("modulus by zero");
  const result = left % right;
  return result === 0 ? 0 : result; // no -0
}

type Arithmetic = "+" | "-" | "*" | "/";
const ARITHMETIC: Record<Arithmetic, (a: number, b: number) => number> = {
  "+": (a, b) => a + b,
  "-": (a, b) => a - b,
  "*": (a, b) => a * b,
  "/": (a, b) => a / b,
};

/** Registers the overloads of `semantics` beyond plain CEL on a fresh environment. */
export function registerSemantics(env: Environment, semantics: ExpressionSemantics): void {
  if (semantics === "cel") return;
  for (const [op, apply] of Object.entries(ARITHMETIC) as Array<[Arithmetic, (a: number, b: number) => number]>) {
    env.registerOperator(`double ${op} int: double`, (a: number, b: bigint) => apply(a, Number(b)));
    env.registerOperator(`int ${op} double: double`, (a: bigint, b: number) => apply(Number(a), b));
  }
  env.registerOperator("double % double: double", (a: number, b: number) => wholeModulo(a, b));
  env.registerOperator("double % int: double", (a: number, b: bigint) => wholeModulo(a, Number(b)));
  env.registerOperator("int % double: double", (a: bigint, b: number) => wholeModulo(Number(a), b));
}
