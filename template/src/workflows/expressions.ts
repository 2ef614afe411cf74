// CEL conditions and input mappings (google/cel-spec via @marcbachmann/cel-js). No code generation.
import { Environment } from "@marcbachmann/cel-js";
import { AppError } from "../errors";
import type { JsonObject, JsonValue } from "./types";

export const MAX_EXPRESSION_LENGTH = 4_096;
const MAX_CONTEXT_BYTES = 1_048_576;

/** Names an expression may read; anything else is a parse-time error. */
export const EXPRESSION_VARIABLES = ["input", "report", "run", "steps", "event", "node_input"] as const;

export interface ExpressionContext {
  input: JsonValue;
  report: JsonValue;
  run: JsonValue;
  steps: Record<string, JsonValue>;
  event: JsonValue;
  node_input?: JsonValue;
}

type Compiled = (context: Record<string, unknown>) => unknown;

const environment = (() => {
  const env = new Environment({
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
    limits: { maxAstNodes: 2_000, maxDepth: 48, maxListElements: 500, maxMapEntries: 500, maxCallArguments: 16 },
  });
  for (const name of EXPRESSION_VARIABLES) env.registerVariable(name, "dyn");
  return env;
})();

// Expressions of a published version never change, so parsed forms are cached by text.
const cache = new Map<string, Compiled>();
const CACHE_LIMIT = 5_000;

export class ExpressionError extends AppError {
  constructor(code: "expression_invalid" | "expression_failed" | "expression_result_invalid", message: string, details?: unknown) {
    super(code, message, { status: 422, details });
  }
}

function firstLine(message: string): string {
  return message.split("\n")[0]!.slice(0, 300);
}

/** Parses (and caches) one expression; throws `expression_invalid` with the parser's reason. */
export function compileExpression(expression: unknown): Compiled {
  if (typeof expression !== "string" || expression.trim() === "") throw new ExpressionError("expression_invalid", "An expression must be a non-empty string.");
  if (expression.length > MAX_EXPRESSION_LENGTH) throw new ExpressionError("expression_invalid", `An expression may be at most ${MAX_EXPRESSION_LENGTH} characters.`);
  const cached = cache.get(expression);
  if (cached) return cached;
  let compiled: Compiled;
  try {
    compiled = environment.parse(expression) as unknown as Compiled;
  } catch (error) {
    throw new ExpressionError("expression_invalid", firstLine(error instanceof Error ? error.message : String(error)));
  }
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(expression, compiled);
  return compiled;
}

/** Converts a CEL result to JSON: BigInt → number where safe, Maps → objects; rejects the rest. */
export function celToJson(value: unknown, depth = 0): JsonValue {
  if (depth > 64) throw new ExpressionError("expression_result_invalid", "The expression result is nested too deeply.");
  if (value === null || value === undefined) return null;
  if (typeof value === "bigint") {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new ExpressionError("expression_result_invalid", "An integer result is outside the safe JSON range.");
    }
    return Number(value);
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new ExpressionError("expression_result_invalid", "A numeric result is not finite.");
    return value;
  }
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (value instanceof Uint8Array) return btoa(String.fromCharCode(...value));
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map((item) => celToJson(item, depth + 1));
  if (value instanceof Map) {
    const out: JsonObject = {};
    for (const [key, item] of value) out[String(key)] = celToJson(item, depth + 1);
    return out;
  }
  if (typeof value === "object") {
    const out: JsonObject = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) out[key] = celToJson(item, depth + 1);
    return out;
  }
  throw new ExpressionError("expression_result_invalid", "The expression result is not representable as JSON.");
}

function checkContextSize(context: ExpressionContext): void {
  // Bound the data an expression can walk; a context this large is a graph design problem.
  if (JSON.stringify(context).length > MAX_CONTEXT_BYTES) {
    throw new ExpressionError("expression_failed", "The expression context exceeds 1 MiB.");
  }
}

/** Evaluates one expression; every failure becomes a typed `expression_failed` error. */
export function evaluateWorkflowExpression(expression: unknown, context: ExpressionContext, nodeId?: string): JsonValue {
  const compiled = compileExpression(expression);
  checkContextSize(context);
  let result: unknown;
  try {
    result = compiled(context as unknown as Record<string, unknown>);
  } catch (error) {
    throw new ExpressionError("expression_failed", firstLine(error instanceof Error ? error.message : String(error)), nodeId ? { nodeId } : undefined);
  }
  return celToJson(result);
}

/** Evaluates every entry of an input mapping into one JSON object. */
export function evaluateInputMapping(mapping: Record<string, string> | undefined, context: ExpressionContext, nodeId?: string): JsonObject {
  const out: JsonObject = {};
  if (!mapping) return out;
  for (const [key, expression] of Object.entries(mapping)) {
    try {
      out[key] = evaluateWorkflowExpression(expression, context, nodeId);
    } catch (error) {
      if (error instanceof ExpressionError) {
        throw new ExpressionError(error.code as "expression_failed", `inputMapping.${key}: ${error.message}`, { nodeId, key });
      }
      throw error;
    }
  }
  return out;
}

/**
 * Which node outputs an expression can read. `null` means "any": the expression reads `steps`
 * in a way that cannot be resolved statically, so the whole step history must be loaded.
 */
export function referencedSteps(expression: string): Set<string> | null {
  const names = new Set<string>();
  const pattern = /\bsteps\b\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:"([^"\\]+)"|'([^'\\]+)')\s*\]|\.\s*\?\s*([A-Za-z_][A-Za-z0-9_]*))?/gu;
  for (const match of expression.matchAll(pattern)) {
    const name = match[1] ?? match[2] ?? match[3] ?? match[4];
    if (!name) return null;
    names.add(name);
  }
  return names;
}

/** Whether an expression mentions a top-level variable at all. */
export function mentionsVariable(expression: string, name: string): boolean {
  return new RegExp(`\\b${name}\\b`, "u").test(expression);
}
