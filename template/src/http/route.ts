// One definition per operation: `routes().op(spec, handler)` mounts the handler on the domain's
// Hono router behind the auth the spec names, validates the body against its JSON Schema and the
// query against its spec, hands the handler both typed, and records the spec for the OpenAPI
// document. The chain's type (`ContractOf`) is what the console's client is typed from.
import { Hono, type Context, type MiddlewareHandler } from "hono";
import { AppError } from "../errors";
import type { FromSchema } from "json-schema-to-ts";
import { rateLimited, requireAdminToken, requireScope, type RateLimitBinding, type Scope } from "./auth";
import { parseQuery, type ParsedQuery, type QueryInput, type QuerySpec } from "./query";
import { schemas } from "./schemas";
import type { AppEnv } from "./types";
import { parseBody } from "./validate";

export type Method = "get" | "post" | "patch" | "put" | "delete";
export type SchemaName = keyof typeof schemas;
type Bodies = { [K in SchemaName]: FromSchema<(typeof schemas)[K]> };
export type BodyOf<K extends SchemaName> = Bodies[K];

export interface OperationSpec<M extends Method = Method, P extends string = string, K extends SchemaName | undefined = SchemaName | undefined, Q extends QuerySpec | undefined = QuerySpec | undefined> {
  method: M;
  /** The Hono path under /api/v1 (`/reports/:id`), as published (OpenAPI, logs, the console's client). */
  path: P;
  /**
   * The pattern the router matches instead of `path`, when `path` has a literal segment where a
   * sibling route of the same method has a parameter (`/installations/import` beside
   * `/installations/:id/reapply-erasures`): Hono's RegExpRouter refuses such a pair, and the app
   * would fall back, for every route, to the slower TrieRouter. Here that segment is a parameter
   * (`/installations/:segment`) whose value must equal `path`'s literal, else the request is the
   * app's 404 `route.not_found`, checked before auth or body.
   */
  routerPath?: string;
  summary: string;
  /** Scopes of an API key or console role (any one suffices), the ADMIN_TOKEN, or none. */
  auth: readonly Scope[] | "admin_token" | "none";
  /** False when `read` does not open this GET (it answers what reviewers must not see); default true. */
  readOpens?: boolean;
  /** The request body's schema, by its name in `http/schemas.ts`. */
  body?: K;
  query?: Q;
  /** The success status; a handler answers another one with `withStatus`. */
  ok: number;
  /** Error statuses beyond 400, 401 and 403 (which follow from the auth). */
  errors?: readonly number[];
  headers?: readonly string[];
  /** A Workers Rate Limiting binding counted per caller (API key or console user) after auth: 429 request.rate_limited. */
  rateLimit?: RateLimitBinding;
  /** Media types of a raw (not JSON) request body the handler reads itself: an image, a CSV. */
  consumes?: readonly string[];
  /** The success body's media type when it is not JSON (`text/csv`): the handler returns a `Response`. */
  produces?: string;
  /**
   * False for a POST that stores nothing and appends no audit event (a match, a hash): the audit
   * chain is not sealed after it, which on the hot path was a few D1 statements every 2 s per installation.
   */
  writes?: false;
}

const STATUS: unique symbol = Symbol("status");
/** A response body with a status other than the spec's `ok` (an idempotent replay answers 200). */
export interface WithStatus<T> {
  readonly [STATUS]: number;
  readonly body: T;
}
export const withStatus = <T>(body: T, status: number): WithStatus<T> => ({ [STATUS]: status, body });
const isWithStatus = (value: unknown): value is WithStatus<unknown> => typeof value === "object" && value !== null && STATUS in value;

export interface Input<K extends SchemaName | undefined, Q extends QuerySpec | undefined> {
  body: K extends SchemaName ? BodyOf<K> : undefined;
  query: Q extends QuerySpec ? ParsedQuery<Q> : undefined;
}

/** What the contract records of an operation: what a client sends and what it gets back. */
export interface Described<K extends SchemaName | undefined, Q extends QuerySpec | undefined, R> {
  body: K extends SchemaName ? BodyOf<K> : undefined;
  query: QueryInput<Q>;
  response: R extends WithStatus<infer T> ? T : R;
}

type Handler<P extends string, K extends SchemaName | undefined, Q extends QuerySpec | undefined, R> = (c: Context<AppEnv, P>, input: Input<K, Q>) => R | Promise<R>;

export class Routes<C = unknown> {
  readonly router = new Hono<AppEnv>();
  readonly operations: OperationSpec[] = [];
  /** Type-level only: the operations declared so far, keyed `"<method> <path>"`. */
  declare readonly contract: C;

  op<const M extends Method, const P extends string, K extends SchemaName | undefined = undefined, const Q extends QuerySpec | undefined = undefined, R = unknown>(
    spec: OperationSpec<M, P, K, Q>,
    handler: Handler<P, K, Q, R>,
  ): Routes<C & { [X in `${M} ${P}`]: Described<K, Q, Awaited<R>> }> {
    this.operations.push(spec);
    const literal = spec.routerPath === undefined ? [] : [literalSegments(spec.path, spec.routerPath)];
    const guard: MiddlewareHandler<AppEnv>[] = spec.auth === "admin_token" ? [requireAdminToken] : spec.auth === "none" ? [] : [requireScope(spec.auth, { readOpens: spec.readOpens })];
    if (spec.rateLimit) guard.push(rateLimited(spec.rateLimit));
    const run: MiddlewareHandler<AppEnv> = async (c) => {
      if (spec.writes === false) c.set("writesNothing", true);
      const input = {
        body: spec.body === undefined ? undefined : await parseBody(c, schemas[spec.body]),
        query: spec.query === undefined ? undefined : parseQuery(c, spec.query),
      } as Input<K, Q>;
      const result: unknown = await handler(c as unknown as Context<AppEnv, P>, input);
      if (result instanceof Response) return result;
      return isWithStatus(result) ? c.json(result.body, result[STATUS] as 200) : c.json(result, spec.ok as 200);
    };
    this.router.on(spec.method.toUpperCase(), [spec.routerPath ?? spec.path], ...literal, ...guard, run);
    return this as unknown as Routes<C & { [X in `${M} ${P}`]: Described<K, Q, Awaited<R>> }>;
  }
}

export const routes = () => new Routes();

/**
 * The check of an operation routed by `routerPath`: each parameter of `routerPath` that stands
 * where `path` has a literal segment must equal that literal (else 404 `route.not_found`, as for
 * any unknown route); the request's route, for the request log, is the published `path`.
 */
function literalSegments(path: string, routerPath: string): MiddlewareHandler<AppEnv> {
  const published = path.split("/");
  const routed = routerPath.split("/");
  if (published.length !== routed.length) throw new Error(`routerPath ${routerPath} must have as many segments as ${path}`);
  const checks: [string, string][] = [];
  routed.forEach((segment, i) => {
    const literal = published[i]!;
    if (segment === literal) return;
    if (!segment.startsWith(":") || literal.startsWith(":")) throw new Error(`routerPath ${routerPath} may differ from ${path} only by a parameter in place of a literal segment`);
    checks.push([segment.slice(1), literal]);
  });
  return async (c, next) => {
    for (const [name, literal] of checks) if (c.req.param(name) !== literal) throw new AppError("route.not_found", "No such route.", { status: 404 });
    c.set("route", `/api/v1${path}`);
    await next();
  };
}

/** The operations of one router, as a type. */
export type ContractOf<T> = T extends Routes<infer C> ? C : never;
