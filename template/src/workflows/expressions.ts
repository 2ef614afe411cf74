// CEL conditions and input mappings (google/cel-spec via @marcbachmann/cel-js). No code generation.
import { Environment, Optional } from "@marcbachmann/cel-js";
import { AppError } from "../errors";
import { contextOverBounds, CostRefusal, estimateExpressionCost, LINEAR_MATCHES, linearMatches, routeMatchesToLinearMatcher } from "./expression-cost";
import { DEFAULT_EXPRESSION_SEMANTICS, type ExpressionSemantics, EXPRESSION_SEMANTICS, NumericModuloError, registerSemantics } from "./expression-semantics";
import type { JsonObject, JsonValue } from "./types";

export const MAX_EXPRESSION_LENGTH = 4_096;
const MAX_CONTEXT_BYTES = 1_048_576;

/** Names an expression may read; anything else is a parse-time error. */
export const EXPRESSION_VARIABLES = ["input", "report", "run", "steps", "event", "node_input", "content"] as const;
const WORKFLOW_DIALECT: ExpressionDialect = { name: "workflow", variables: EXPRESSION_VARIABLES, hostValues: true };

export interface ExpressionContext {
  input: JsonValue;
  report: JsonValue;
  run: JsonValue;
  steps: Record<string, JsonValue>;
  event: JsonValue;
  node_input?: JsonValue;
  /** The accounts related to the report's subject owner (`related.count('ip')`), loaded by the host only for a node that names it. */
  related?: RelatedAccounts;
  /** The report's content, only for nodes that may read it (content-access.ts). */
  content?: JsonValue;
  /** Not a variable: the semantics of the graph being run (absent: `cel`, expression-semantics.ts). */
  semantics?: ExpressionSemantics;
}

type Compiled = (context: Record<string, unknown>) => unknown;

/**
 * What an expression language built on this module may name beyond CEL: its variables (all `dyn`)
 * and its functions (a cel-js signature and a synchronous handler). Workflow graphs use
 * EXPRESSION_VARIABLES and no functions; other languages (detection rules) bring their own, with
 * the same limits, semantics, linear `matches()` and cost budget.
 */
export interface ExpressionDialect {
  name: string;
  variables: readonly string[];
  functions?: ReadonlyArray<{ signature: string; handler: (...args: never[]) => unknown }>;
  /** Whether the host's own values (RelatedAccounts as `related`) are in the language. */
  hostValues?: boolean;
}

/** The signal kinds accounts share (account_signals.kind). */
export const RELATED_SIGNAL_KINDS = ["ip", "device", "email", "payment"] as const;

/**
 * `related` in a workflow expression: how many other accounts of the installation share a signal
 * of each kind with the owner of the run's report subject, as the account page counts them
 * (`related.count`). The host computes it from account_signals (keyed hashes only) for a node
 * whose expressions name `related`; the expression sees counts, never a signal or an account.
 */
export class RelatedAccounts {
  readonly counts: Readonly<Record<string, number>>;
  constructor(counts: Record<string, number>) {
    this.counts = Object.freeze({ ...counts });
  }
  /** JSON form (a context's size check, a recorded context): the counts. */
  toJSON(): Record<string, number> {
    return { ...this.counts };
  }
}

function relatedCount(related: RelatedAccounts, kind: string): bigint {
  if (!(RELATED_SIGNAL_KINDS as readonly string[]).includes(kind)) {
    throw new AppError("expression.failed", `related.count() takes a signal kind: ${RELATED_SIGNAL_KINDS.join(", ")} (got ${JSON.stringify(kind).slice(0, 40)}).`, { status: 422 });
  }
  return BigInt(related.counts[kind] ?? 0);
}

/** A `related.count('<literal>')` naming no signal kind, found before any run evaluates it (null: none). */
function unknownRelatedKind(ast: unknown): string | null {
  if (Array.isArray(ast)) {
    for (const item of ast) {
      const found = unknownRelatedKind(item);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof ast !== "object" || ast === null || typeof (ast as { op?: unknown }).op !== "string") return null;
  const node = ast as { op: string; args: unknown };
  if (node.op === "rcall") {
    const [name, receiver, args] = node.args as [unknown, { op?: string; args?: unknown }, Array<{ op?: string; args?: unknown }>];
    const literal = args?.[0];
    if (name === "count" && receiver?.op === "id" && receiver.args === "related" && literal?.op === "value" && typeof literal.args === "string" && !(RELATED_SIGNAL_KINDS as readonly string[]).includes(literal.args)) {
      return literal.args;
    }
  }
  return unknownRelatedKind(node.args);
}

function makeEnvironment(semantics: ExpressionSemantics, dialect: ExpressionDialect = WORKFLOW_DIALECT): Environment {
  const env = new Environment({
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
    limits: { maxAstNodes: 2_000, maxDepth: 48, maxListElements: 500, maxMapEntries: 500, maxCallArguments: 16 },
  });
  for (const name of dialect.variables) env.registerVariable(name, "dyn");
  if (dialect.hostValues) {
    env.registerType("RelatedAccounts", RelatedAccounts);
    env.registerVariable("related", "RelatedAccounts");
    env.registerFunction("RelatedAccounts.count(string): int", relatedCount as (...args: unknown[]) => unknown);
  }
  for (const fn of dialect.functions ?? []) env.registerFunction(fn.signature, fn.handler as (...args: unknown[]) => unknown);
  // `matches()` runs on a linear-time matcher, not RegExp (see expression-cost.ts).
  env.registerFunction(`string.${LINEAR_MATCHES}(string): bool`, linearMatches);
  registerSemantics(env, semantics);
  return env;
}

const environments = new Map<string, Environment>(EXPRESSION_SEMANTICS.map((semantics) => [`${WORKFLOW_DIALECT.name}\u0000${semantics}`, makeEnvironment(semantics)]));

// Expressions of a published version never change, so parsed forms are cached by semantics and
// text, with whether their cost estimate needs the context within the bounded sizes.
const cache = new Map<string, CompiledEntry>();

interface CompiledEntry {
  compiled: Compiled;
  bounded: boolean;
  /** The checked AST (cel-js's node objects: `{ op, args }`), for callers that read it statically. */
  ast: unknown;
}
const CACHE_LIMIT = 5_000;

export class ExpressionError extends AppError {
  constructor(code: "expression.invalid" | "expression.failed" | "expression.result_invalid" | "expression.too_costly" | "expression.nesting_too_deep" | "expression.input_too_large", message: string, details?: unknown) {
    super(code, message, { status: 422, details });
  }
}

function firstLine(message: string): string {
  return message.split("\n")[0]!.slice(0, 300);
}

/**
 * Parses and type-checks (and caches) one expression; throws `expression.invalid` with the
 * parser's or checker's reason. The check refuses undeclared variables, unknown functions and
 * operators that no overload accepts, which would otherwise only fail when a run evaluates them.
 * Then its cost is estimated: over the budget is `expression.too_costly`, comprehensions nested
 * too deep `expression.nesting_too_deep` (expression-cost.ts).
 */
export function compileExpression(expression: unknown, semantics: ExpressionSemantics = DEFAULT_EXPRESSION_SEMANTICS): Compiled {
  return compileEntry(expression, semantics).compiled;
}

/** The parsed tree of an expression that compiles (throws as compileExpression does otherwise). */
export function expressionAst(expression: string, semantics: ExpressionSemantics = DEFAULT_EXPRESSION_SEMANTICS): unknown {
  return compileEntry(expression, semantics).ast;
}

function compileEntry(expression: unknown, semantics: ExpressionSemantics, dialect: ExpressionDialect = WORKFLOW_DIALECT): CompiledEntry {
  if (typeof expression !== "string" || expression.trim() === "") throw new ExpressionError("expression.invalid", "An expression must be a non-empty string.");
  if (expression.length > MAX_EXPRESSION_LENGTH) throw new ExpressionError("expression.invalid", `An expression may be at most ${MAX_EXPRESSION_LENGTH} characters.`);
  const key = `${dialect.name}\u0000${semantics}\u0000${expression}`;
  const cached = cache.get(key);
  if (cached) return cached;
  if (!(EXPRESSION_SEMANTICS as readonly string[]).includes(semantics)) throw new ExpressionError("expression.invalid", `Unknown expression semantics; expected one of ${EXPRESSION_SEMANTICS.join(", ")}.`);
  const environmentKey = `${dialect.name}\u0000${semantics}`;
  let environment = environments.get(environmentKey);
  if (!environment) {
    environment = makeEnvironment(semantics, dialect);
    environments.set(environmentKey, environment);
  }
  let entry: CompiledEntry;
  try {
    const parsed = environment.parse(expression);
    routeMatchesToLinearMatcher(parsed.ast);
    const checked = parsed.check();
    if (!checked.valid) throw checked.error ?? new Error("The expression does not type-check.");
    const unknownKind = dialect.hostValues ? unknownRelatedKind(parsed.ast) : null;
    if (unknownKind !== null) throw new Error(`related.count() takes a signal kind: ${RELATED_SIGNAL_KINDS.join(", ")} (got ${JSON.stringify(unknownKind).slice(0, 40)}).`);
    entry = { compiled: parsed as unknown as Compiled, bounded: estimateExpressionCost(parsed.ast).bounded, ast: parsed.ast };
  } catch (error) {
    if (error instanceof CostRefusal) {
      if (error.code === "expression.too_costly") throw new ExpressionError("expression.too_costly", error.message, error.details);
      if (error.code === "expression.nesting_too_deep") throw new ExpressionError("expression.nesting_too_deep", error.message, error.details);
      throw new ExpressionError("expression.invalid", error.message, error.details);
    }
    throw new ExpressionError("expression.invalid", firstLine(error instanceof Error ? error.message : String(error)).replaceAll(LINEAR_MATCHES, "matches"));
  }
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(key, entry);
  return entry;
}

/** Sets a key as an own property, so that `__proto__` from data stays data. */
function setKey(out: JsonObject, key: string, value: JsonValue): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

function bytesToBase64(bytes: Uint8Array): string {
  // Chunked: spreading a large array into fromCharCode overflows the call stack.
  let binary = "";
  for (let i = 0; i < bytes.length; i += 8_192) binary += String.fromCharCode(...bytes.subarray(i, i + 8_192));
  return btoa(binary);
}

function safeInteger(value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new ExpressionError("expression.result_invalid", "An integer result is outside the safe JSON range.");
  }
  return Number(value);
}

/**
 * An expression language over this module's CEL (see ExpressionDialect): `compile` checks an
 * expression as compileExpression does and answers its AST and whether it needs the bounded-context
 * check; `evaluate` runs it on a context the caller has already bounded (within 1 MiB, and within
 * the bounded shape when `bounded`: `overBounds` tells), with failures as `expression.failed`.
 */
export function expressionDialect(dialect: ExpressionDialect) {
  return {
    compile: (expression: unknown, semantics: ExpressionSemantics = DEFAULT_EXPRESSION_SEMANTICS) => {
      const entry = compileEntry(expression, semantics, dialect);
      return { ast: entry.ast, bounded: entry.bounded };
    },
    evaluate: (expression: string, context: Record<string, unknown>, semantics: ExpressionSemantics = DEFAULT_EXPRESSION_SEMANTICS): JsonValue => {
      const { compiled } = compileEntry(expression, semantics, dialect);
      let result: unknown;
      try {
        result = compiled(context);
      } catch (error) {
        const cause = error instanceof NumericModuloError ? error : ((error as { cause?: unknown })?.cause ?? error);
        const message = cause instanceof NumericModuloError || cause instanceof AppError ? cause.message : firstLine(error instanceof Error ? error.message : String(error));
        throw new ExpressionError("expression.failed", message);
      }
      return celToJson(result);
    },
    overBounds: contextOverBounds,
  };
}

/**
 * Converts a CEL result to JSON: int/uint → number where safe, bytes → base64, timestamp → ISO
 * string, duration → "1.5s", optional → its value or null, maps → objects; rejects the rest
 * (types, non-finite doubles, unsafe integers, nesting deeper than 64) as `expression.result_invalid`.
 */
export function celToJson(value: unknown, depth = 0): JsonValue {
  if (depth > 64) throw new ExpressionError("expression.result_invalid", "The expression result is nested too deeply.");
  if (value === null || value === undefined) return null;
  if (typeof value === "bigint") return safeInteger(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new ExpressionError("expression.result_invalid", "A numeric result is not finite.");
    return value === 0 ? 0 : value; // JSON has no -0
  }
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value !== "object") throw new ExpressionError("expression.result_invalid", "The expression result is not representable as JSON.");
  if (value instanceof Uint8Array) return bytesToBase64(value);
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new ExpressionError("expression.result_invalid", "A timestamp result is invalid.");
    return value.toISOString();
  }
  if (value instanceof Optional) return value.hasValue() ? celToJson(value.value(), depth + 1) : null;
  if (Array.isArray(value)) return value.map((item) => celToJson(item, depth + 1));
  if (value instanceof Map) {
    const out: JsonObject = {};
    for (const [key, item] of value) setKey(out, String(key), celToJson(item, depth + 1));
    return out;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype || prototype === null) {
    const out: JsonObject = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) setKey(out, key, celToJson(item, depth + 1));
    return out;
  }
  // cel-js's own value classes, which the package does not export: uint and duration.
  const tag = Object.prototype.toString.call(value);
  if (tag === "[object google.protobuf.Duration]") return String(value);
  const primitive: unknown = (value as { valueOf(): unknown }).valueOf();
  if (typeof primitive === "bigint") return safeInteger(primitive);
  throw new ExpressionError("expression.result_invalid", "The expression result is not representable as JSON.");
}

function checkContextSize(context: ExpressionContext, nodeId: string | undefined): void {
  // Bound the data an expression can walk; a context this large is a graph design problem.
  let size: number;
  try {
    size = JSON.stringify(context).length;
  } catch {
    // JSON.stringify throws on values JSON cannot hold, and in some runtimes on very deep nesting.
    throw new ExpressionError("expression.failed", "The expression context is not serializable JSON.", nodeId ? { nodeId } : undefined);
  }
  if (size > MAX_CONTEXT_BYTES) {
    throw new ExpressionError("expression.failed", "The expression context exceeds 1 MiB.", nodeId ? { nodeId } : undefined);
  }
}

/**
 * Evaluates one expression under the context's semantics (its graph's); every failure becomes a
 * typed `expression.failed` error.
 */
export function evaluateWorkflowExpression(expression: unknown, context: ExpressionContext, nodeId?: string): JsonValue {
  const { compiled, bounded } = compileEntry(expression, context.semantics ?? DEFAULT_EXPRESSION_SEMANTICS);
  checkContextSize(context, nodeId);
  if (bounded) {
    // Its cost estimate holds only for lists and strings within the bounded sizes.
    const over = contextOverBounds(context);
    if (over) {
      throw new ExpressionError("expression.input_too_large", `The expression walks lists or strings, and the context has one over its bound (${over.bound} ≤ ${over.limit}).`, { ...(nodeId ? { nodeId } : {}), ...over });
    }
  }
  let result: unknown;
  try {
    result = compiled(context as unknown as Record<string, unknown>);
  } catch (error) {
    const cause = error instanceof NumericModuloError ? error : ((error as { cause?: unknown })?.cause ?? error);
    const message = cause instanceof NumericModuloError ? cause.message : firstLine(error instanceof Error ? error.message : String(error));
    throw new ExpressionError("expression.failed", message, nodeId ? { nodeId } : undefined);
  }
  return celToJson(result);
}

/** Evaluates every entry of an input mapping into one JSON object. */
export function evaluateInputMapping(mapping: Record<string, string> | undefined, context: ExpressionContext, nodeId?: string): JsonObject {
  const out: JsonObject = {};
  if (!mapping) return out;
  for (const [key, expression] of Object.entries(mapping)) {
    try {
      setKey(out, key, evaluateWorkflowExpression(expression, context, nodeId));
    } catch (error) {
      if (error instanceof ExpressionError) {
        throw new ExpressionError(error.code as "expression.failed", `inputMapping.${key}: ${error.message}`, { ...(error.details as object), nodeId, key });
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
  // A name followed by "(" is a method or macro on `steps` itself (`steps.exists(k, …)`), which
  // reads every step, not a step called "exists".
  const pattern = /\bsteps\b\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_]|\s*\()|\[\s*(?:"([^"\\]+)"|'([^'\\]+)')\s*\]|\.\s*\?\s*([A-Za-z_][A-Za-z0-9_]*))?/gu;
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
