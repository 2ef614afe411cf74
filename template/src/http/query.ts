// Query strings of list routes: one parser for `limit`, `cursor` and filters, declared with the
// route (`op({ query })`), so the OpenAPI document lists the same parameters the handler reads.
import type { Context } from "hono";
import { AppError } from "../errors";
import { decodeCursor, type CursorPart } from "./validate";

export interface QuerySpec {
  /** `?limit=`: a positive integer, `default` when absent, at most `max` (larger is capped). */
  limit?: { default: number; max: number };
  /** `?cursor=`: the parts of an `encodeCursor` cursor, or a pattern a raw cursor must match. */
  cursor?: readonly CursorPart[] | RegExp;
  /** Filters whose value must be one of a list: an unknown value is a 400 `request.invalid_<name>`. */
  enums?: Readonly<Record<string, readonly string[]>>;
  /** Free-text filters, passed on as given (absent or empty: not set). */
  strings?: readonly string[];
}

type EnumsOf<Q extends QuerySpec> = Q["enums"] extends Readonly<Record<string, readonly string[]>> ? { [K in keyof Q["enums"]]?: Q["enums"][K][number] } : unknown;
type StringsOf<Q extends QuerySpec> = Q["strings"] extends readonly string[] ? { [K in Q["strings"][number]]?: string } : unknown;
type CursorOf<C> = C extends RegExp ? string | null : C extends readonly CursorPart[] ? Array<string | number> | null : never;

/** What the handler receives. */
export type ParsedQuery<Q extends QuerySpec> = (Q["limit"] extends object ? { limit: number } : unknown) & (Q["cursor"] extends undefined ? unknown : { cursor: CursorOf<Q["cursor"]> }) & EnumsOf<Q> & StringsOf<Q>;

/** What a client may send (the console's typed `get`). */
export type QueryInput<Q> = Q extends QuerySpec ? (Q["limit"] extends object ? { limit?: number } : unknown) & (Q["cursor"] extends undefined ? unknown : { cursor?: string }) & EnumsOf<Q> & StringsOf<Q> : Record<string, never>;

const invalid = (parameter: string, message: string) => new AppError("request.invalid_query", message, { status: 400, details: { parameter } });

export function parseQuery<Q extends QuerySpec>(c: Context, spec: Q): ParsedQuery<Q> {
  const value = (name: string) => {
    const text = c.req.query(name);
    return text === undefined || text === "" ? undefined : text;
  };
  const parsed: Record<string, unknown> = {};
  if (spec.limit) {
    const text = value("limit");
    const limit = text === undefined ? spec.limit.default : Number(text);
    if (!/^\d{1,9}$/u.test(text ?? "1") || limit < 1) throw invalid("limit", `limit must be an integer from 1 to ${spec.limit.max}.`);
    parsed.limit = Math.min(limit, spec.limit.max);
  }
  if (spec.cursor) {
    const text = value("cursor");
    if (spec.cursor instanceof RegExp) {
      if (text !== undefined && !spec.cursor.test(text)) throw new AppError("request.invalid_cursor", "The cursor is not valid.", { status: 400 });
      parsed.cursor = text ?? null;
    } else {
      parsed.cursor = decodeCursor(text, [...spec.cursor]);
    }
  }
  for (const [name, allowed] of Object.entries(spec.enums ?? {})) {
    const text = value(name);
    if (text !== undefined && !allowed.includes(text)) {
      throw new AppError(`request.invalid_${name}`, `Unknown ${name} filter.`, { status: 400, details: { parameter: name, allowed } });
    }
    if (text !== undefined) parsed[name] = text;
  }
  for (const name of spec.strings ?? []) {
    const text = value(name);
    if (text !== undefined) parsed[name] = text;
  }
  return parsed as ParsedQuery<Q>;
}

/** The OpenAPI parameters of a query spec. */
export function queryParameters(spec: QuerySpec | undefined): Array<Record<string, unknown>> {
  if (!spec) return [];
  const param = (name: string, schema: Record<string, unknown>) => ({ name, in: "query", required: false, schema });
  return [
    ...(spec.limit ? [param("limit", { type: "integer", minimum: 1, maximum: spec.limit.max, default: spec.limit.default })] : []),
    ...(spec.cursor ? [param("cursor", { type: "string", description: "nextCursor of the previous page" })] : []),
    ...Object.entries(spec.enums ?? {}).map(([name, values]) => param(name, { enum: values })),
    ...(spec.strings ?? []).map((name) => param(name, { type: "string" })),
  ];
}
