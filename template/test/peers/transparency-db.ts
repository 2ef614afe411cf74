// The DSA Transparency Database API v1 as a peer Worker for tests (host tdb.test), speaking what
// the Commission's documentation and code say (digital-services-act/transparency-database:
// routes/api_v1.php, resources/markdown/api-documentation.md, PuidNotUniqueMultipleException):
// - a bearer token names the platform (any token starting `tdb-`; others 401); statements are kept per token;
// - POST /api/v1/statements {statements: [1..100]}: all-or-nothing. Each statement is validated
//   against the statement schema with @cfworker/json-schema → 422 {message, errors: {statement_<i>:
//   {field: [messages]}}}; a puid already stored (or twice in the call) → 422 {errors: {puid,
//   existing_puids: [...]}}; more than 100 → 422 {errors: {statements: [...]}}; 201 {statements:
//   [... with uuid, permalink, self]};
// - GET /api/v1/statement/existing-puid/{puid}: 302 {message, puid} or 404.
// As the real API (Laravel's TrimStrings and ConvertEmptyStringsToNull before validation): every
// text is trimmed and an empty one becomes null, then validated — a present null fails unless the
// field is nullable; a request without `Accept: application/json` that fails validation is
// answered 302 (back to the previous page), not with the errors.
// Test controls (POST /_control/plan {token, plan}): the next POSTs of that token answer as planned
// — {status: 429, retryAfter} or {status: 503}, or {lost: true} (the batch IS stored, then a 504
// as a gateway whose upstream timed out would answer) — and {refuseFacts: "text"} makes the
// database refuse statements whose facts contain it (a rule newer than the platform's copy of the
// schema). GET /_control/log?token= lists every call; GET /_control/statements?token= what is stored.
// {hold: "name"} keeps that POST waiting (counted as received, nothing stored yet) until
// POST /_control/release {name}: a slow database, without a clock.
import { Validator, type Schema } from "@cfworker/json-schema";
import sorSchema from "../../src/lib/dsa-statement-of-reasons.schema.json";

interface Planned {
  status?: number;
  retryAfter?: number;
  lost?: boolean;
  hold?: string;
}

/** Held POSTs by name, released by /_control/release (a release that came first is kept). */
const released = new Set<string>();
/** Waits for the release with a timer pending, so workerd never takes the held request for a hung one. */
async function hold(name: string) {
  while (!released.has(name)) await new Promise((resolve) => setTimeout(resolve, 5));
}

interface Platform {
  statements: Map<string, Record<string, unknown>>;
  /** How many times each puid arrived in a POST body (stored or not). */
  received: Map<string, number>;
  plan: Planned[];
  refuseFacts: string | null;
  log: Array<{ method: string; path: string; puids: string[]; status: number; authorization: string | null; accept: string | null }>;
}

const validator = new Validator(sorSchema as unknown as Schema, "2020-12", false);
const platforms = new Map<string, Platform>();

function platform(token: string): Platform {
  let found = platforms.get(token);
  if (!found) {
    found = { statements: new Map(), received: new Map(), plan: [], refuseFacts: null, log: [] };
    platforms.set(token, found);
  }
  return found;
}

const json = (body: unknown, status: number, headers: Record<string, string> = {}) => Response.json(body, { status, headers });

/** `#/decision_facts` → `decision_facts` (the field the real database names). */
function fieldOf(location: string): string {
  return location.replace(/^#\/?/u, "").split("/")[0] || "statement";
}

function statementErrors(statement: unknown, p: Platform): Record<string, string[]> | null {
  const errors: Record<string, string[]> = {};
  const result = validator.validate(statement);
  for (const error of result.errors) {
    if (error.keyword === "properties" || error.keyword === "allOf" || error.keyword === "if" || error.keyword === "anyOf") continue;
    const field = fieldOf(error.instanceLocation);
    errors[field] ??= [];
    errors[field].push(`The ${field.replace(/_/gu, " ")} field is invalid (${error.keyword}).`);
  }
  if (!result.valid && Object.keys(errors).length === 0) errors.statement = ["The statement is invalid."];
  const facts = (statement as { decision_facts?: unknown }).decision_facts;
  if (p.refuseFacts && typeof facts === "string" && facts.includes(p.refuseFacts)) {
    errors.decision_facts ??= [];
    errors.decision_facts.push("The decision facts field contains words this database refuses.");
  }
  return Object.keys(errors).length ? errors : null;
}

/** Texts trimmed, empty ones null, in nested lists and objects too (the middleware's order). */
function normalised(value: unknown): unknown {
  if (typeof value === "string") {
    const text = value.trim();
    return text === "" ? null : text;
  }
  if (Array.isArray(value)) return value.map(normalised);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, normalised(inner)]));
  return value;
}

async function storeMultiple(request: Request, p: Platform, entry: Platform["log"][number]): Promise<Response> {
  const body = (await request.json().catch(() => null)) as { statements?: unknown } | null;
  const statements = Array.isArray(body?.statements) ? (body.statements as unknown[]).map((s) => (s && typeof s === "object" ? (normalised(s) as Record<string, unknown>) : (s as Record<string, unknown>))) : null;
  entry.puids = (statements ?? []).map((s) => String(s?.puid ?? ""));
  for (const puid of entry.puids) p.received.set(puid, (p.received.get(puid) ?? 0) + 1);
  const planned = p.plan.shift();
  if (planned?.hold) await hold(planned.hold);
  if (planned?.status) {
    return json({ message: "planned" }, planned.status, planned.retryAfter !== undefined ? { "retry-after": String(planned.retryAfter) } : {});
  }
  if (!statements || statements.length === 0) return json({ message: "The statements field is required.", errors: { statements: ["The statements field is required."] } }, 422);
  if (statements.length > 100) return json({ message: "Too many statements.", errors: { statements: ["The statements field must not have more than 100 items."] } }, 422);
  const errors: Record<string, unknown> = {};
  statements.forEach((statement, index) => {
    const found = statementErrors(statement, p);
    if (found) errors[`statement_${index}`] = found;
  });
  if (Object.keys(errors).length) {
    if (!(request.headers.get("accept") ?? "").includes("application/json")) return new Response(null, { status: 302, headers: { location: "https://tdb.test/" } });
    return json({ message: "The statements are not valid.", errors }, 422);
  }
  const seen = new Set<string>();
  const duplicates: string[] = [];
  for (const puid of entry.puids) {
    if (p.statements.has(puid) || seen.has(puid)) duplicates.push(puid);
    seen.add(puid);
  }
  if (duplicates.length) {
    const message = "The platform identifier(s) are not all unique within this call.";
    return json({ message, errors: { puid: [message], existing_puids: duplicates } }, 422);
  }
  const created = statements.map((statement) => {
    const uuid = crypto.randomUUID();
    const stored = { ...statement, uuid, created_at: new Date().toISOString(), permalink: `https://tdb.test/statement/${uuid}`, self: `https://tdb.test/api/v1/statement/${uuid}` };
    p.statements.set(String(statement.puid), stored);
    return stored;
  });
  if (planned?.lost) return new Response("upstream request timeout", { status: 504 });
  return json({ statements: created }, 201);
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/_control/plan") {
      const { token, plan, refuseFacts } = (await request.json()) as { token: string; plan?: Planned[]; refuseFacts?: string };
      const p = platform(token);
      if (plan) p.plan.push(...plan);
      if (refuseFacts !== undefined) p.refuseFacts = refuseFacts;
      return new Response("ok");
    }
    if (url.pathname === "/_control/release") {
      released.add(((await request.json()) as { name: string }).name);
      return new Response("ok");
    }
    if (url.pathname === "/_control/log") return json(platform(url.searchParams.get("token") ?? "").log, 200);
    if (url.pathname === "/_control/statements") {
      const p = platform(url.searchParams.get("token") ?? "");
      return json({ statements: [...p.statements.values()], received: Object.fromEntries(p.received) }, 200);
    }
    const authorization = request.headers.get("authorization");
    const token = /^Bearer (tdb-[A-Za-z0-9._-]+)$/u.exec(authorization ?? "")?.[1];
    const entry = { method: request.method, path: url.pathname, puids: [] as string[], status: 0, authorization: token ? "bearer" : authorization, accept: request.headers.get("accept") };
    if (!token) return json({ message: "Unauthenticated." }, 401);
    const p = platform(token);
    p.log.push(entry);
    let response: Response;
    if (request.method === "POST" && url.pathname === "/api/v1/statements") response = await storeMultiple(request, p, entry);
    else if (request.method === "GET" && url.pathname.startsWith("/api/v1/statement/existing-puid/")) {
      const puid = decodeURIComponent(url.pathname.slice("/api/v1/statement/existing-puid/".length));
      response = p.statements.has(puid) ? json({ message: "statement of reason found", puid }, 302) : json({ message: "statement of reason not found", puid }, 404);
    } else response = json({ message: "Not Found" }, 404);
    entry.status = response.status;
    return response;
  },
};
