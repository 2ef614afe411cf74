// Authentication: the ADMIN_TOKEN secret for installation management, hashed API keys with scopes
// for everything else. A key only ever sees its own installation's data.
import { createMiddleware } from "hono/factory";
import { AppError } from "../errors";
import { sha256Hex, timingSafeEqual } from "../lib/crypto";
import type { AppEnv } from "./types";

export const SCOPES = ["admin", "reports:write", "review"] as const;
export type Scope = (typeof SCOPES)[number];

export interface Actor {
  installationId: string;
  scopes: Scope[];
  /** How the actor appears in audit events. */
  audit: { type: "system" | "api_key" | "admin" | "user"; id: string };
}

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

/** An installation's API key holding at least one of `scopes`. */
export function requireScope(...scopes: Scope[]) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const token = bearer(c.req.header("authorization"));
    if (!token) throw unauthenticated();
    const row = await c.env.DB.prepare(`
      SELECT k.id, k.installation_id AS installationId, k.scopes_json AS scopesJson
      FROM api_keys k WHERE k.key_hash = ?1 AND k.revoked_at IS NULL
    `).bind(await sha256Hex(token)).first<{ id: string; installationId: string; scopesJson: string }>();
    if (!row) throw unauthenticated();
    const held = JSON.parse(row.scopesJson) as Scope[];
    if (!scopes.some((scope) => held.includes(scope))) {
      throw new AppError("auth.scope_missing", `This key lacks the scope required here (${scopes.join(" or ")}).`, { status: 403, details: { required: scopes } });
    }
    c.set("actor", { installationId: row.installationId, scopes: held, audit: { type: "api_key", id: row.id } });
    await next();
  });
}
