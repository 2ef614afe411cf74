// The language of a rule's `when`: CEL (the workflows' expression module: its limits, semantics,
// linear `matches()` and cost budget) over `event`, `entity` and `labels`, plus two counter
// functions, `count(type, entity.<kind>, window)` and `distinct(kind, entity.<kind>, window)`.
//
// CEL evaluates synchronously and counters live in Durable Objects, so a counter is read before
// the rule runs: publishing reads every counter call out of the AST (its type or kind and window
// must be literals, its entity `entity.<kind>`), intake asks the counter shards for those values
// (counters.ts), and the functions then answer from the values of the event being evaluated.
import { AppError } from "../errors";
import { type ExpressionSemantics, expressionDialect, type JsonValue } from "../workflows";

/** Names a rule's `when` may read. */
export const RULE_VARIABLES = ["event", "entity", "labels"] as const;
/** Longest counter window: a counter keeps one small row per counted event for its window. */
export const MAX_WINDOW_MS = 7 * 24 * 3600_000;
const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 86_400_000 };

/** A counter a rule reads: events of `type` per entity (`count`), or distinct `member` entities per entity (`distinct`). */
export type CounterSpec = { fn: "count"; type: string; kind: string; window: string; windowMs: number } | { fn: "distinct"; member: string; kind: string; window: string; windowMs: number };

/** The key under which an event's value of a counter is looked up while its rules run. */
export function counterLookupKey(spec: { fn: string; window: string }, first: string, entityValue: string): string {
  return `${spec.fn}\u0000${first}\u0000${spec.window}\u0000${entityValue}`;
}

// The values of the event being evaluated: set just before its rules run and read by the counter
// functions during that synchronous evaluation (no await in between, so no other event's values).
let current: Map<string, number> | null = null;

function lookup(fn: "count" | "distinct", first: string, entityValue: string, window: string): bigint {
  const value = current?.get(counterLookupKey({ fn, window }, first, entityValue));
  if (value === undefined) throw new AppError("rule.counter_unavailable", `${fn}(${JSON.stringify(first)}, …, ${JSON.stringify(window)}) has no value for this entity: name the entity as entity.<kind>.`);
  return BigInt(value);
}

const rules = expressionDialect({
  name: "detection-rule",
  variables: RULE_VARIABLES,
  functions: [
    { signature: "count(string, string, string): int", handler: ((type: string, value: string, window: string) => lookup("count", type, value, window)) as (...args: never[]) => unknown },
    { signature: "distinct(string, string, string): int", handler: ((kind: string, value: string, window: string) => lookup("distinct", kind, value, window)) as (...args: never[]) => unknown },
  ],
});

/** A window such as `30s`, `10m`, `24h`, `7d` in milliseconds, or null when it is not one (or over 7 days). */
export function parseWindow(text: string): number | null {
  const match = /^([1-9][0-9]{0,5})([smhd])$/u.exec(text);
  if (!match) return null;
  const ms = Number(match[1]) * UNITS[match[2]!]!;
  return ms <= MAX_WINDOW_MS ? ms : null;
}

interface Node {
  op: string;
  args: unknown;
}
const isNode = (value: unknown): value is Node => typeof value === "object" && value !== null && typeof (value as Node).op === "string";

/** An entity kind: what `entities` keys and `entity.<kind>` name. */
export const ENTITY_KIND = /^[a-z][a-z0-9_]{0,31}$/u;

function literal(node: unknown): string | null {
  return isNode(node) && node.op === "value" && typeof node.args === "string" ? node.args : null;
}

function entityKindOf(node: unknown): string | null {
  if (!isNode(node) || node.op !== ".") return null;
  const [target, field] = node.args as [unknown, unknown];
  return isNode(target) && target.op === "id" && target.args === "entity" && typeof field === "string" ? field : null;
}

function counterInvalid(message: string): AppError {
  return new AppError("rule.counter_invalid", message, { status: 422 });
}

/** Every counter call of an AST, checked: literal type or kind and window, entity as `entity.<kind>`. */
function counterCalls(ast: unknown, out: CounterSpec[]): void {
  if (Array.isArray(ast)) {
    for (const item of ast) counterCalls(item, out);
    return;
  }
  if (!isNode(ast)) return;
  if (ast.op === "call") {
    const [name, args] = ast.args as [string, unknown[]];
    if (name === "count" || name === "distinct") {
      const first = literal(args[0]);
      const kind = entityKindOf(args[1]);
      const window = literal(args[2]);
      if (first === null || first.length === 0 || first.length > 100)
        throw counterInvalid(`${name}(): the first argument must be a string literal (${name === "count" ? "an event type" : "an entity kind"}), e.g. ${name === "count" ? "'post.created'" : "'ip'"}.`);
      if (kind === null || !ENTITY_KIND.test(kind)) throw counterInvalid(`${name}(): the second argument must name an entity of the event, as entity.<kind> (e.g. entity.account).`);
      const windowMs = window === null ? null : parseWindow(window);
      if (window === null || windowMs === null) throw counterInvalid(`${name}(): the window must be a string literal such as '30s', '10m', '24h' or '7d' (at most 7 days).`);
      if (name === "distinct" && !ENTITY_KIND.test(first)) throw counterInvalid("distinct(): the first argument must be an entity kind (lowercase letters, digits, _).");
      out.push(name === "count" ? { fn: "count", type: first, kind, window, windowMs } : { fn: "distinct", member: first, kind, window, windowMs });
    }
  }
  counterCalls(ast.args, out);
}

/**
 * Compiles a rule's `when` (as compileExpression does: `expression.*` errors) and answers the
 * counters it reads; a counter call that cannot be read ahead is `rule.counter_invalid`.
 */
export function compileRule(when: string, semantics?: ExpressionSemantics): { counters: CounterSpec[]; bounded: boolean } {
  const { ast, bounded } = rules.compile(when, semantics);
  const counters: CounterSpec[] = [];
  counterCalls(ast, counters);
  return { counters, bounded };
}

/** Runs a compiled rule on one event with that event's counter values; failures are `expression.failed`. */
export function evaluateRule(when: string, context: { event: JsonValue; entity: JsonValue; labels: JsonValue }, counters: Map<string, number>, semantics?: ExpressionSemantics): JsonValue {
  current = counters;
  try {
    return rules.evaluate(when, context, semantics);
  } finally {
    current = null;
  }
}

/** Whether an event's context is over the bounded shape that a `bounded` rule needs. */
export const contextOverBounds = rules.overBounds;

/**
 * Entity kinds a report or run outcome may name, with the report subject kind each becomes. A
 * report's subject id and a run's input are stored in plaintext, so only account and content
 * identifiers are allowed; personal kinds (ip, device, email, anything else) are refused at publish
 * and may only be counted or labelled (labels key them by an opaque keyed hash).
 */
export const OUTCOME_ENTITY_KINDS: Readonly<Record<string, string>> = { account: "account", post: "content", content: "content", comment: "content", message: "message", media: "media", listing: "listing", group: "group" };
