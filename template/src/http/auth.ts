// Authentication: the ADMIN_TOKEN secret for installation management, hashed API keys with scopes
// for everything else. A key only ever sees its own installation's data.
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { AppError } from "../errors";
import { cachedApiKey, rememberApiKey, type CachedApiKey } from "../lib/api-key-cache";
import { sha256HexSync, timingSafeEqual } from "../lib/crypto";
import { ROLE_SCOPES, type Scope } from "../auth";
import { INSTALLATION_HEADER, checkCsrf, createSession, sessionCookie, sessionFromCookie, userFromAccessJwt, type SessionInfo } from "../console";
import { keyUsedStatement } from "../installations";
import type { AppEnv } from "./types";

// Re-exported for the HTTP layer (request schemas, route files); they live in auth/.
export { ROLE_SCOPES, SCOPES, canSeeQueue, type Actor, type Scope } from "../auth";

function bearer(header: string | undefined): string | null {
  const match = /^Bearer\s+(\S+)$/u.exec(header ?? "");
  return match ? match[1]! : null;
}

const unauthenticated = () => new AppError("auth.unauthenticated", "A valid bearer token is required.", { status: 401 });

/** Installation management: the Worker secret ADMIN_TOKEN, compared in constant time. */
export const requireAdminToken = createMiddleware<AppEnv>(async (c, next) => {
  const configured = c.env.ADMIN_TOKEN;
  if (!configured) throw new AppError("auth.admin_not_configured", "ADMIN_TOKEN is not set on this deployment.", { status: 503 });
  const token = bearer(c.req.header("authorization"));
  if (!token || !timingSafeEqual(token, configured)) throw unauthenticated();
  await next();
});

/**
 * Whether `read` opens a route: every GET (and HEAD) route except those that open personal data,
 * which name `personal_data:read`, and those closed to it (`readOpens: false`: what a reviewer must
 * not see, such as golden answers). The OpenAPI document publishes it per operation (`x-read-opens`).
 */
export function readOpensRoute(method: string, scopes: readonly Scope[], readOpens = true): boolean {
  const upper = method.toUpperCase();
  return readOpens && !scopes.includes("personal_data:read") && (upper === "GET" || upper === "HEAD");
}

function allowed(held: Scope[], scopes: Scope[], method: string, readOpens: boolean): boolean {
  if (scopes.some((scope) => held.includes(scope))) return true;
  return held.includes("read") && readOpensRoute(method, scopes, readOpens);
}

function denied(scopes: Scope[]): AppError {
  return new AppError("auth.scope_missing", `This key or role lacks the scope required here (${scopes.join(" or ")}).`, { status: 403, details: { required: scopes } });
}

/**
 * The console's session (cookie + CSRF header on writes), created from a Cloudflare Access
 * assertion when there is none yet.
 */
export async function consoleSession(c: Context<AppEnv>): Promise<SessionInfo | null> {
  const session = await sessionFromCookie(c.env, c);
  // A session serves its own installation; naming another one signs in there (through Access) instead.
  const requested = c.req.header(INSTALLATION_HEADER);
  if (session && (!requested || requested === session.user.installationId)) return session;
  const user = await userFromAccessJwt(c.env, c);
  if (!user) return null;
  const created = await createSession(c.env, user, "cloudflare_access");
  c.header("set-cookie", sessionCookie(c, created.token, 12 * 3600), { append: true });
  return { id: "new", csrfToken: created.csrfToken, user };
}

/**
 * An API key of the installation, or a console user, holding at least one of `scopes` (or `read`
 * on a GET, unless `readOpens` is false).
 */
export function requireScope(scopes: readonly Scope[], options: { readOpens?: boolean } = {}) {
  const readOpens = options.readOpens ?? true;
  return createMiddleware<AppEnv>(async (c, next) => {
    const token = bearer(c.req.header("authorization"));
    if (!token) {
      const session = await consoleSession(c);
      if (!session) throw unauthenticated();
      checkCsrf(c, session);
      const held = ROLE_SCOPES[session.user.role];
      if (!allowed(held, [...scopes], c.req.method, readOpens)) throw denied([...scopes]);
      c.set("actor", { installationId: session.user.installationId, scopes: held, audit: { type: "user", id: session.user.id }, user: session.user, sessionId: session.id });
      await next();
      return;
    }
    const key = await apiKeyOf(c, token);
    const held = key.scopes as Scope[];
    if (!allowed(held, [...scopes], c.req.method, readOpens)) throw denied([...scopes]);
    c.set("actor", { installationId: key.installationId, scopes: held, audit: { type: "api_key", id: key.id }, ...(key.reviewer ? { reviewer: key.reviewer } : {}) });
    await next();
  });
}

/**
 * The API key a bearer token is, from this isolate's short cache (lib/api-key-cache.ts: at most
 * 5 s of revocation lag across isolates, none within this one) or from D1; a missing or revoked
 * key is a 401. `last_used_at` is written at most hourly, off the response path.
 */
async function apiKeyOf(c: Context<AppEnv>, token: string): Promise<CachedApiKey> {
  const keyHash = sha256HexSync(token);
  const cached = cachedApiKey(keyHash);
  if (cached) return cached;
  const readStartedAt = Date.now();
  const row = await c.env.DB.prepare(`
      SELECT k.id, k.installation_id AS installationId, k.scopes_json AS scopesJson, k.reviewer,
        (k.last_used_at IS NULL OR k.last_used_at < ?2) AS stale
      FROM api_keys k WHERE k.key_hash = ?1 AND k.revoked_at IS NULL
    `)
    .bind(keyHash, new Date(Date.now() - 3600_000).toISOString())
    .first<{ id: string; installationId: string; scopesJson: string; reviewer: string | null; stale: number }>();
  if (!row) throw unauthenticated();
  if (row.stale)
    c.executionCtx.waitUntil(
      keyUsedStatement(c.env.DB, row.id, new Date().toISOString())
        .run()
        .catch(() => undefined),
    );
  const key: CachedApiKey = { id: row.id, installationId: row.installationId, scopes: JSON.parse(row.scopesJson) as Scope[], reviewer: row.reviewer };
  rememberApiKey(keyHash, key, readStartedAt);
  return key;
}

/** The Workers Rate Limiting bindings (wrangler.jsonc `ratelimits`) a route may name. */
export type RateLimitBinding = "INTAKE_RATE_LIMIT";

/**
 * Counts the request against a Workers Rate Limiting binding, keyed by the authenticated caller (so
 * one noisy key never throttles another). Over the limit: 429 request.rate_limited with
 * retry-after set to the binding's period (the binding does not say when its window ends).
 */
export function rateLimited(binding: RateLimitBinding) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const actor = c.get("actor");
    const limiter = c.env[binding] as RateLimit | undefined;

    if (actor && limiter) {
      const { success } = await limiter.limit({ key: `${actor.audit.type}:${actor.audit.id}` });

      if (!success) {
        c.header("retry-after", String(RATE_LIMIT_PERIOD_SECONDS));
        throw new AppError("request.rate_limited", `This key sent more requests here than its rate limit allows; wait ${RATE_LIMIT_PERIOD_SECONDS} seconds (retry-after) and send fewer, or use a key per source.`, {
          status: 429,
          retryable: true,
        });
      }
    }
    await next();
  });
}

/** The `simple.period` of the bindings in wrangler.jsonc (10 or 60 seconds). */
const RATE_LIMIT_PERIOD_SECONDS = 60;
