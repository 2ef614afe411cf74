// Console sign-in and session endpoints, and console user management.
import { Hono } from "hono";
import { AppError } from "../errors";
import { consoleSession } from "../http/auth";
import { routes } from "../http/route";
import type { AppEnv } from "../http/types";
import { checkCsrf, createSigninLink, redeemSigninLink, revokeSession, sessionCookie } from "./sessions";
import { createUser, listUsers, setPreferences, updateUser } from "./users";

/** GET /console/signin?token=…: spends a one-time link, sets the session cookie, goes to the console. */
export const signinRoutes = new Hono<AppEnv>().get("/console/signin", async (c) => {
  const token = c.req.query("token");
  if (!token) throw new AppError("auth.signin_link_invalid", "This sign-in link is unknown, used or expired.", { status: 401 });
  const { token: sessionToken } = await redeemSigninLink(c.env, token);
  c.header("set-cookie", sessionCookie(c, sessionToken, 12 * 3600));
  c.header("cache-control", "no-store");
  return c.redirect("/", 302);
});

export const sessionRoutes = routes()
  .op({ method: "get", path: "/session", summary: "The console session: user, role, queues, preferences, and the CSRF token for writes", auth: "none", ok: 200, errors: [401] }, async (c) => {
    const session = await consoleSession(c);
    if (!session) throw new AppError("auth.unauthenticated", "Sign in to use the console.", { status: 401 });
    c.header("cache-control", "no-store");
    return { user: session.user, csrfToken: session.csrfToken };
  })
  .op({ method: "post", path: "/session/logout", summary: "End the console session", auth: "none", ok: 200, errors: [401, 403] }, async (c) => {
    const session = await consoleSession(c);
    if (!session) throw new AppError("auth.unauthenticated", "Sign in to use the console.", { status: 401 });
    checkCsrf(c, session);
    await revokeSession(c.env, session.id);
    c.header("set-cookie", sessionCookie(c, "", 0));
    return { signedOut: true };
  })
  .op({ method: "patch", path: "/session/preferences", summary: "Wellness preferences of the signed-in user (blurMedia)", auth: ["read"], body: "Preferences", ok: 200 }, async (c, { body }) => setPreferences(c.env, c.get("actor"), body))
  .op(
    { method: "post", path: "/console-signin-links", summary: "A one-time console sign-in link for a user of an installation (created as admin if new)", auth: "admin_token", body: "CreateSigninLink", ok: 201, errors: [404] },
    async (c, { body }) => {
      const link = await createSigninLink(c.env, body);
      return { ...link, url: new URL(link.path, c.req.url).toString() };
    },
  )
  .op({ method: "get", path: "/console-users", summary: "Console users with roles and queue access", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listUsers(c.env, c.get("actor")) }))
  .op({ method: "post", path: "/console-users", summary: "Add a console user: admin, moderator or viewer, optionally limited to queues", auth: ["admin"], body: "CreateConsoleUser", ok: 201, errors: [404, 409, 422] }, async (c, { body }) =>
    createUser(c.env, c.get("actor"), body),
  )
  .op({ method: "patch", path: "/console-users/:id", summary: "Change a console user's role, queues, or disable them", auth: ["admin"], body: "UpdateConsoleUser", ok: 200, errors: [404, 422] }, async (c, { body }) =>
    updateUser(c.env, c.get("actor"), c.req.param("id"), body),
  );
