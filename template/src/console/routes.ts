// Console sign-in and session endpoints, and console user management.
import { Hono } from "hono";
import { AppError } from "../errors";
import { consoleSession, requireAdminToken, requireScope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { parseBody } from "../http/validate";
import { checkCsrf, createSigninLink, redeemSigninLink, revokeSession, sessionCookie, type ConsoleRole } from "./sessions";
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

export const sessionRoutes = new Hono<AppEnv>()
  .get("/session", async (c) => {
    const session = await consoleSession(c);
    if (!session) throw new AppError("auth.unauthenticated", "Sign in to use the console.", { status: 401 });
    c.header("cache-control", "no-store");
    return c.json({ user: session.user, csrfToken: session.csrfToken });
  })
  .post("/session/logout", async (c) => {
    const session = await consoleSession(c);
    if (!session) throw new AppError("auth.unauthenticated", "Sign in to use the console.", { status: 401 });
    checkCsrf(c, session);
    await revokeSession(c.env, session.id);
    c.header("set-cookie", sessionCookie(c, "", 0));
    return c.json({ signedOut: true });
  })
  .patch("/session/preferences", requireScope("read"), async (c) => c.json(await setPreferences(c.env, c.get("actor"), await parseBody(c, schemas.Preferences))))
  .post("/console-signin-links", requireAdminToken, async (c) => {
    const body = await parseBody<{ installationId: string; email: string; name?: string; role?: ConsoleRole }>(c, schemas.CreateSigninLink);
    const link = await createSigninLink(c.env, body);
    return c.json({ ...link, url: new URL(link.path, c.req.url).toString() }, 201);
  })
  .get("/console-users", requireScope("admin"), async (c) => c.json({ items: await listUsers(c.env, c.get("actor")) }))
  .post("/console-users", requireScope("admin"), async (c) => c.json(await createUser(c.env, c.get("actor"), await parseBody(c, schemas.CreateConsoleUser)), 201))
  .patch("/console-users/:id", requireScope("admin"), async (c) => c.json(await updateUser(c.env, c.get("actor"), c.req.param("id"), await parseBody(c, schemas.UpdateConsoleUser))));
