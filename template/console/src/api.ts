// The console's only door to the API: same-origin requests with the session cookie, and the
// session's CSRF token on every state-changing request. `server` is typed from the server's route
// declarations (types only: nothing of the server is bundled).
import type { ApiContract } from "../../src/http/api";

export interface ApiErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

let csrfToken = "";
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

type Listener = () => void;
const unauthenticatedListeners = new Set<Listener>();
/** Called when any request answers 401: the session ended (expired, revoked, signed out elsewhere). */
export function onUnauthenticated(listener: Listener): () => void {
  unauthenticatedListeners.add(listener);
  return () => unauthenticatedListeners.delete(listener);
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** Do not treat a 401 as the end of the session (used by the session probe itself). */
  quiet401?: boolean;
}

/**
 * The installation a Cloudflare Access sign-in should land in, when the email is a console user
 * of several (`?installation=<id>` in the console's URL, kept for the tab); sent on every request.
 */
const installationChoice = (() => {
  try {
    const chosen = new URL(window.location.href).searchParams.get("installation");
    if (chosen) window.sessionStorage.setItem("safest.installation", chosen);
    return chosen ?? window.sessionStorage.getItem("safest.installation");
  } catch {
    return null;
  }
})();

export async function api<T = unknown>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? (options.body === undefined ? "GET" : "POST");
  const headers: Record<string, string> = { accept: "application/json", ...options.headers };
  if (installationChoice) headers["x-safest-installation"] = installationChoice;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && method !== "HEAD" && csrfToken) headers["x-csrf-token"] = csrfToken;
  let response: Response;
  try {
    response = await fetch(`/api/v1${path}`, {
      method,
      headers,
      credentials: "same-origin",
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "network.unreachable", "The server could not be reached. Check your connection and try again.");
  }
  const text = await response.text();
  let parsed: unknown = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!response.ok) {
    const error = (parsed as { error?: ApiErrorBody } | null)?.error;
    if (response.status === 401 && !options.quiet401) for (const listener of unauthenticatedListeners) listener();
    throw new ApiError(response.status, error?.code ?? `http.${response.status}`, error?.message ?? `The server answered ${response.status}.`, error?.details);
  }
  return parsed as T;
}

/** The untyped door (the workflow editor still uses it, pending its rework); pages use `server`. */
export const get = <T = unknown>(path: string, signal?: AbortSignal) => api<T>(path, signal ? { signal } : {});
export const post = <T = unknown>(path: string, body: unknown = {}) => api<T>(path, { method: "POST", body });

// --- The typed client: paths, bodies, queries and responses from the server's routes -------------

type Method = "get" | "post" | "patch" | "put";
/** Paths of the API (as declared on the server, `/runs/:id`) that answer `method`. */
export type PathOf<M extends Method> = { [K in keyof ApiContract]: K extends `${M} ${infer P}` ? P : never }[keyof ApiContract];
type Operation<M extends Method, P extends PathOf<M>> = ApiContract[`${M} ${P}` & keyof ApiContract];
/** What the server answers to `method path`. */
export type ApiResponse<M extends Method, P extends PathOf<M>> = Operation<M, P>["response"];
export type ApiBody<M extends Method, P extends PathOf<M>> = Operation<M, P>["body"];
export type ApiQuery<M extends Method, P extends PathOf<M>> = Operation<M, P>["query"];
/** One item of a list route's `items`. */
export type ItemOf<P extends PathOf<"get">> = ApiResponse<"get", P> extends { items: Array<infer T> } ? T : never;

type ParamsOf<P extends string> = P extends `${string}:${infer N}/${infer Rest}` ? { [K in N]: string } & ParamsOf<`/${Rest}`> : P extends `${string}:${infer N}` ? { [K in N]: string } : Record<never, never>;
type Options<M extends Method, P extends PathOf<M>> = { query?: ApiQuery<M, P>; signal?: AbortSignal; headers?: Record<string, string> } & (keyof ParamsOf<P> extends never ? { params?: undefined } : { params: ParamsOf<P> });
type Rest<M extends Method, P extends PathOf<M>> = keyof ParamsOf<P> extends never ? [options?: Options<M, P>] : [options: Options<M, P>];

function url(path: string, options: { params?: Record<string, string>; query?: object } | undefined): string {
  const filled = path.replace(/:(\w+)/gu, (_m, name: string) => encodeURIComponent(options?.params?.[name] ?? ""));
  return filled + qs((options?.query ?? {}) as Record<string, string | number | undefined>);
}

function send<M extends Method, P extends PathOf<M>>(method: M, path: P, body: unknown, options: Options<M, P> | undefined): Promise<ApiResponse<M, P>> {
  return api<ApiResponse<M, P>>(url(path, options as { params?: Record<string, string> }), {
    method: method.toUpperCase(),
    ...(body === undefined ? {} : { body }),
    ...(options?.signal ? { signal: options.signal } : {}),
    ...(options?.headers ? { headers: options.headers } : {}),
  });
}

/** `server.get("/runs/:id", { params: { id } })`: typed by the server's own route declarations. */
export const server = {
  get: <P extends PathOf<"get">>(path: P, ...[options]: Rest<"get", P>) => send("get", path, undefined, options),
  post: <P extends PathOf<"post">>(path: P, body: ApiBody<"post", P>, ...[options]: Rest<"post", P>) => send("post", path, body ?? {}, options),
  patch: <P extends PathOf<"patch">>(path: P, body: ApiBody<"patch", P>, ...[options]: Rest<"patch", P>) => send("patch", path, body, options),
  put: <P extends PathOf<"put">>(path: P, body: ApiBody<"put", P>, ...[options]: Rest<"put", P>) => send("put", path, body, options),
};

export function qs(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.status === 403 && error.code === "auth.scope_missing") return "Your role does not allow this.";
    if (error.status === 403 && error.code === "auth.csrf_failed") return "Your session's security token was refused; reload the page and try again.";
    return error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

// --- Shapes the console reads: the server's responses ---------------------------------------------

export type Session = ApiResponse<"get", "/session">;
export type ConsoleUser = Session["user"];
export type Role = ConsoleUser["role"];
export type Queue = ItemOf<"/queues">;
export type Task = ApiResponse<"get", "/tasks/:id">;
export type ReportSummary = ItemOf<"/reports">;
export type ReportDetail = ApiResponse<"get", "/reports/:id">;
export type TimelineItem = ItemOf<"/reports/:id/timeline">;
export type Run = ItemOf<"/runs">;
export type RunDetail = ApiResponse<"get", "/runs/:id">;
export type Step = RunDetail["steps"][number];
export type Proposal = ItemOf<"/action-proposals">;
export type AuditEvent = ItemOf<"/audit-events">;
export type Workflow = ApiResponse<"get", "/workflows/:id">;

/** The graph format (docs/graph-format.md); the server answers it as parsed JSON. */
export interface GraphNode {
  id: string;
  kind: string;
  config?: Record<string, unknown>;
  inputMapping?: Record<string, string>;
  errorPort?: string;
  timeoutPolicy?: { timeout_seconds?: number; retries?: number };
}

export interface Graph {
  schemaVersion: 1;
  /** What numeric operators mean in its CEL (docs/graph-format.md); absent means `cel`. */
  expressionSemantics?: "cel" | "json-numbers-1";
  nodes: GraphNode[];
  edges: Array<{ from: { nodeId: string; port: string }; to: { nodeId: string } }>;
}

export type WorkflowVersion = Omit<ApiResponse<"get", "/workflow-versions/:id">, "graph"> & { graph: Graph };

export interface ValidationProblem {
  path: string;
  code: string;
  message: string;
}

export interface Page<T> {
  items: T[];
  nextCursor?: string | null;
}
