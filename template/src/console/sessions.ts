// Console sign-in: one-time links (printed by `npm start`), Cloudflare Access JWTs in production,
// and sessions in an HttpOnly cookie with a CSRF token for every state-changing request.
import { createRemoteJWKSet, jwtVerify } from "jose";
import { auditStatement } from "../audit";
import { AppError } from "../errors";
import { newId, newSecret, sha256Hex, timingSafeEqual } from "../lib/crypto";

export const SESSION_COOKIE = "safest_session";
const SESSION_SECONDS = 12 * 3600;
const LINK_SECONDS = 24 * 3600;
export const CONSOLE_ROLES = ["admin", "moderator", "viewer"] as const;
export type ConsoleRole = (typeof CONSOLE_ROLES)[number];

export interface ConsoleUser {
  id: string;
  installationId: string;
  email: string;
  name: string;
  role: ConsoleRole;
  queueIds: string[] | null;
  /** Whether this email's Cloudflare Access sign-in is bound to this installation. */
  accessSignIn: boolean;
  preferences: { blurMedia: boolean };
}

export interface SessionInfo {
  id: string;
  csrfToken: string;
  user: ConsoleUser;
}

interface UserRow {
  id: string;
  installationId: string;
  email: string;
  name: string;
  role: ConsoleRole;
  queueIdsJson: string | null;
  accessSignIn: number;
  preferencesJson: string;
  disabledAt: string | null;
}

export const USER_COLUMNS = `u.id, u.installation_id AS installationId, u.email, u.name, u.role, u.queue_ids_json AS queueIdsJson,
  u.access_sign_in AS accessSignIn, u.preferences_json AS preferencesJson, u.disabled_at AS disabledAt`;

export function toUser(row: UserRow): ConsoleUser {
  const preferences = JSON.parse(row.preferencesJson) as { blurMedia?: unknown };
  return {
    id: row.id,
    installationId: row.installationId,
    email: row.email,
    name: row.name,
    role: row.role,
    queueIds: row.queueIdsJson ? (JSON.parse(row.queueIdsJson) as string[]) : null,
    accessSignIn: row.accessSignIn === 1,
    preferences: { blurMedia: preferences.blurMedia !== false },
  };
}

/** The part of an HTTP request sessions read (a Hono Context is one); keeps this module HTTP-free. */
export interface RequestView {
  req: { header(name: string): string | undefined; url: string; method: string };
}

function cookieOf(c: RequestView, name: string): string | null {
  for (const part of (c.req.header("cookie") ?? "").split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return rest.join("=");
  }
  return null;
}

export function sessionCookie(c: RequestView, token: string, maxAge: number): string {
  const secure = new URL(c.req.url).protocol === "https:" ? "; Secure" : "";
  return `${SESSION_COOKIE}=${token}; HttpOnly; SameSite=Lax; Path=/; Max-Age=${maxAge}${secure}`;
}

/** Creates a session for a user; returns the cookie token (only its hash is stored). */
export async function createSession(env: Env, user: ConsoleUser, via: string): Promise<{ token: string; csrfToken: string }> {
  const token = newSecret("sess");
  const csrfToken = newSecret("csrf");
  const id = newId("ses");
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO console_sessions (id, user_id, installation_id, token_hash, csrf_token, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`).bind(
      id,
      user.id,
      user.installationId,
      await sha256Hex(token),
      csrfToken,
      at,
      new Date(Date.now() + SESSION_SECONDS * 1000).toISOString(),
    ),
    auditStatement(env.DB, {
      installationId: user.installationId,
      idempotencyKey: `console_session:${id}:created`,
      action: "console.signed_in",
      actor: { type: "user", id: user.id },
      target: { type: "console_user", id: user.id },
      details: { via },
      at,
    }),
  ]);
  return { token, csrfToken };
}

/** The session behind the request's cookie, if it is live and its user is enabled. */
export async function sessionFromCookie(env: Env, c: RequestView): Promise<SessionInfo | null> {
  const token = cookieOf(c, SESSION_COOKIE);
  if (!token) return null;
  const row = await env.DB.prepare(`
    SELECT s.id AS sessionId, s.csrf_token AS csrfToken, ${USER_COLUMNS}
    FROM console_sessions s JOIN console_users u ON u.id = s.user_id
    WHERE s.token_hash = ?1 AND s.revoked_at IS NULL AND s.expires_at > ?2 AND u.disabled_at IS NULL
  `)
    .bind(await sha256Hex(token), new Date().toISOString())
    .first<UserRow & { sessionId: string; csrfToken: string }>();
  return row ? { id: row.sessionId, csrfToken: row.csrfToken, user: toUser(row) } : null;
}

export function checkCsrf(c: RequestView, session: SessionInfo): void {
  if (c.req.method === "GET" || c.req.method === "HEAD") return;
  const given = c.req.header("x-csrf-token") ?? "";
  if (!given || !timingSafeEqual(given, session.csrfToken)) {
    throw new AppError("auth.csrf_failed", "State-changing console requests need the session's x-csrf-token header.", { status: 403 });
  }
}

/** Creates (or finds) a console user and a one-time sign-in link for it. Admin-token only. */
export async function createSigninLink(env: Env, input: { installationId: string; email: string; name?: string; role?: ConsoleRole; accessSignIn?: boolean }) {
  const installation = await env.DB.prepare(`SELECT id FROM installations WHERE id = ?1`).bind(input.installationId).first();
  if (!installation) throw new AppError("installation.not_found", "The installation does not exist.", { status: 404 });
  const at = new Date().toISOString();
  const email = input.email.toLowerCase();
  // A new user's Access sign-in is bound here unless accessSignIn is false; an existing user's binding is left as it is.
  await env.DB.prepare(`INSERT INTO console_users (id, installation_id, email, name, role, access_sign_in, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?7, ?6, ?6)
    ON CONFLICT(installation_id, email) DO NOTHING`)
    .bind(newId("usr"), input.installationId, email, input.name ?? email, input.role ?? "admin", at, input.accessSignIn === false ? 0 : 1)
    .run();
  const user = await env.DB.prepare(`SELECT ${USER_COLUMNS} FROM console_users u WHERE u.installation_id = ?1 AND u.email = ?2`).bind(input.installationId, email).first<UserRow>();
  const token = newSecret("signin");
  const expiresAt = new Date(Date.now() + LINK_SECONDS * 1000).toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO console_signin_links (id, user_id, token_hash, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)`).bind(newId("lnk"), user!.id, await sha256Hex(token), at, expiresAt),
    auditStatement(env.DB, {
      installationId: input.installationId,
      idempotencyKey: `console_signin_link:${token.slice(-12)}:created`,
      action: "console.signin_link_created",
      actor: { type: "admin", id: "admin-token" },
      target: { type: "console_user", id: user!.id },
      details: {},
      at,
    }),
  ]);
  return { userId: user!.id, path: `/console/signin?token=${encodeURIComponent(token)}`, expiresAt };
}

/** Spends a sign-in link (once) and opens a session. */
export async function redeemSigninLink(env: Env, token: string): Promise<{ user: ConsoleUser; token: string }> {
  const hash = await sha256Hex(token);
  const at = new Date().toISOString();
  const row = await env.DB.prepare(`
    SELECT l.id AS linkId, ${USER_COLUMNS} FROM console_signin_links l JOIN console_users u ON u.id = l.user_id
    WHERE l.token_hash = ?1 AND l.used_at IS NULL AND l.expires_at > ?2 AND u.disabled_at IS NULL
  `)
    .bind(hash, at)
    .first<UserRow & { linkId: string }>();
  if (!row) throw new AppError("auth.signin_link_invalid", "This sign-in link is unknown, used or expired.", { status: 401 });
  const spent = await env.DB.prepare(`UPDATE console_signin_links SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL`).bind(row.linkId, at).run();
  if ((spent.meta.changes ?? 0) === 0) throw new AppError("auth.signin_link_invalid", "This sign-in link is unknown, used or expired.", { status: 401 });
  const user = toUser(row);
  return { user, token: (await createSession(env, user, "signin_link")).token };
}

const jwksByTeam = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

/** The request header (the console sends it from `?installation=`) naming the installation to sign in to. */
export const INSTALLATION_HEADER = "x-safest-installation";

/**
 * Production sign-in behind Cloudflare Access: verifies `Cf-Access-Jwt-Assertion` against the
 * team's JWKS (issuer and audience checked) and returns the enabled console user with that email
 * that an admin bound to Access (`access_sign_in`). An Access identity is one person across the
 * deployment, so it lands only where it was bound: bound in one installation, there; bound in
 * several, the request must name one (`x-safest-installation`), else 409
 * auth.installation_choice_required listing them; naming one it is not bound in is a 403.
 */
export async function userFromAccessJwt(env: Env, c: RequestView): Promise<ConsoleUser | null> {
  const config = env as unknown as { ACCESS_TEAM_DOMAIN?: string; ACCESS_AUD?: string };
  const assertion = c.req.header("cf-access-jwt-assertion");
  if (!assertion || !config.ACCESS_TEAM_DOMAIN || !config.ACCESS_AUD) return null;
  const issuer = `https://${config.ACCESS_TEAM_DOMAIN.replace(/^https?:\/\//u, "").replace(/\/+$/u, "")}`;
  let jwks = jwksByTeam.get(issuer);
  if (!jwks) {
    jwks = createRemoteJWKSet(new URL(`${issuer}/cdn-cgi/access/certs`));
    jwksByTeam.set(issuer, jwks);
  }
  let email: string;
  try {
    const { payload } = await jwtVerify(assertion, jwks, { issuer, audience: config.ACCESS_AUD });
    if (typeof payload.email !== "string") throw new Error("no email");
    email = payload.email.toLowerCase();
  } catch {
    throw new AppError("auth.access_jwt_invalid", "The Cloudflare Access assertion did not verify.", { status: 401 });
  }
  const { results } = await env.DB.prepare(`SELECT ${USER_COLUMNS}, i.name AS installationName FROM console_users u JOIN installations i ON i.id = u.installation_id
    WHERE u.email = ?1 AND u.access_sign_in = 1 AND u.disabled_at IS NULL ORDER BY u.created_at`)
    .bind(email)
    .all<UserRow & { installationName: string }>();
  const requested = c.req.header(INSTALLATION_HEADER);
  if (requested) {
    const chosen = results.find((row) => row.installationId === requested);
    if (!chosen) {
      throw new AppError("auth.access_not_bound", "Your Cloudflare Access sign-in is not bound to that installation: ask its admin to add you as a console user with Access sign-in, or choose another installation.", {
        status: 403,
      });
    }
    return toUser(chosen);
  }
  if (results.length > 1) {
    throw new AppError("auth.installation_choice_required", `Your email is a console user in ${results.length} installations: choose one (open the console with ?installation=<id>, or send the ${INSTALLATION_HEADER} header).`, {
      status: 409,
      details: { installations: results.map((row) => ({ id: row.installationId, name: row.installationName })) },
    });
  }
  return results[0] ? toUser(results[0]) : null;
}

export async function revokeSession(env: Env, sessionId: string): Promise<void> {
  await env.DB.prepare(`UPDATE console_sessions SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL`).bind(sessionId, new Date().toISOString()).run();
}
