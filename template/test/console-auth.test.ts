// Console access: one-time sign-in links, HttpOnly sessions with CSRF protection, roles and queue
// access, and Cloudflare Access assertions verified against the team's JWKS with jose.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, api, edge, newInstallation, publish } from "./helpers";

async function raw(path: string, init: RequestInit = {}, base = "http://safest.test") {
  return exports.default.fetch(new Request(`${base}${path}`, { redirect: "manual", ...init }));
}

async function signIn(installationId: string, email: string, role = "admin", base = "http://safest.test") {
  const link = await api("/api/v1/console-signin-links", { key: ADMIN_TOKEN, body: { installationId, email, role } });
  expect(link.status).toBe(201);
  const response = await raw(link.body.path, {}, base);
  expect(response.status).toBe(302);
  expect(response.headers.get("location")).toBe("/");
  const cookie = response.headers.get("set-cookie")!;
  const session = await raw("/api/v1/session", { headers: { cookie: cookie.split(";")[0]! } });
  const body = (await session.json()) as { user: { id: string; role: string }; csrfToken: string };
  return { cookie: cookie.split(";")[0]!, setCookie: cookie, csrf: body.csrfToken, user: body.user, path: link.body.path as string };
}

function asUser(session: { cookie: string; csrf: string }, path: string, body?: unknown, method?: string) {
  return raw(path, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers: { cookie: session.cookie, "content-type": "application/json", "x-csrf-token": session.csrf },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

describe("sign-in links and sessions", () => {
  it("a link signs in once; the session cookie is HttpOnly and SameSite; writes need the CSRF token", async () => {
    const { id } = await newInstallation();
    const session = await signIn(id, "Ada@Example.org");
    expect(session.setCookie).toMatch(/HttpOnly/u);
    expect(session.setCookie).toMatch(/SameSite=Lax/u);
    expect(session.setCookie).not.toMatch(/Secure/u);
    expect(session.user).toMatchObject({ role: "admin" });
    expect((await raw(session.path)).status).toBe(401);
    const noCsrf = await raw("/api/v1/workflows", { method: "POST", headers: { cookie: session.cookie, "content-type": "application/json" }, body: JSON.stringify({ name: "x" }) });
    expect(noCsrf.status).toBe(403);
    expect(((await noCsrf.json()) as any).error.code).toBe("auth.csrf_failed");
    expect((await asUser(session, "/api/v1/workflows", { name: "from-console" })).status).toBe(201);
    const audit = await env.DB.prepare("SELECT actor_type, actor_id FROM audit_events WHERE action = 'workflow.created' AND installation_id = ?").bind(id).first();
    expect(audit).toEqual({ actor_type: "user", actor_id: session.user.id });
    const out = await asUser(session, "/api/v1/session/logout", {});
    expect(out.status).toBe(200);
    expect((await raw("/api/v1/session", { headers: { cookie: session.cookie } })).status).toBe(401);
  });

  it("over HTTPS the session cookie is Secure", async () => {
    const { id } = await newInstallation();
    const session = await signIn(id, "sec@example.org", "admin", "https://safest.test");
    expect(session.setCookie).toMatch(/Secure/u);
  });
});

describe("roles", () => {
  it("a viewer reads but cannot claim or approve; a moderator sees only their queues", async () => {
    const { id, apiKey } = await newInstallation();
    const queueA = await api("/api/v1/queues", { key: apiKey, body: { name: "a", slaSeconds: 600 } });
    const queueB = await api("/api/v1/queues", { key: apiKey, body: { name: "b", slaSeconds: 600 } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "b" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
    });
    await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous" } });
    let taskId: string | undefined;
    for (let i = 0; i < 100 && !taskId; i++) {
      taskId = (await api(`/api/v1/queues/${queueB.body.id}/tasks`, { key: apiKey })).body.items[0]?.id;
      if (!taskId) await new Promise((r) => setTimeout(r, 50));
    }
    expect(taskId).toBeTruthy();
    const viewer = await signIn(id, "viewer@example.org", "viewer");
    expect((await asUser(viewer, "/api/v1/queues")).status).toBe(200);
    const claim = await asUser(viewer, `/api/v1/tasks/${taskId}/claim`, {});
    expect(claim.status).toBe(403);
    expect(((await claim.json()) as any).error.code).toBe("auth.scope_missing");
    expect((await asUser(viewer, "/api/v1/action-proposals/x/approve", {})).status).toBe(403);

    const admin = await signIn(id, "admin@example.org", "admin");
    const mod = await asUser(admin, "/api/v1/console-users", { email: "mod@example.org", role: "moderator", queueIds: [queueA.body.id] });
    expect(mod.status).toBe(201);
    const moderator = await signIn(id, "mod@example.org");
    expect(moderator.user.role).toBe("moderator");
    const queues = (await (await asUser(moderator, "/api/v1/queues")).json()) as { items: Array<{ id: string }> };
    expect(queues.items.map((q) => q.id)).toEqual([queueA.body.id]);
    expect((await asUser(moderator, `/api/v1/queues/${queueB.body.id}/tasks`)).status).toBe(404);
    expect(((await (await asUser(moderator, `/api/v1/queues/${queueB.body.id}/next`, {})).json()) as any).error.code).toBe("queue.not_found");
    expect((await asUser(moderator, `/api/v1/tasks/${taskId}/claim`, {})).status).toBe(404);
    await asUser(admin, `/api/v1/console-users/${moderator.user.id}`, { queueIds: null }, "PATCH");
    const claimed = await asUser(moderator, `/api/v1/tasks/${taskId}/claim`, {});
    expect(claimed.status).toBe(200);
    expect(((await claimed.json()) as any).claim.reviewer).toBe("mod@example.org");
  });
});

describe("Cloudflare Access", () => {
  async function assertion(email: string, aud = env.ACCESS_AUD) {
    const response = await env.ACCESS_PEER.fetch("https://safest-test.cloudflareaccess.com/_sign", {
      method: "POST",
      body: JSON.stringify({ email, aud, iss: `https://${env.ACCESS_TEAM_DOMAIN}` }),
    });
    return response.text();
  }

  it("a verified assertion of a known user opens a session; a wrong audience or an unknown user does not", async () => {
    const { id } = await newInstallation();
    await signIn(id, "access.user@example.org", "moderator");
    const ok = await raw("/api/v1/session", { headers: { "cf-access-jwt-assertion": await assertion("Access.User@example.org") } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("set-cookie")).toMatch(/safest_session=.*HttpOnly/u);
    expect(((await ok.json()) as any).user).toMatchObject({ email: "access.user@example.org", role: "moderator" });
    const wrongAud = await raw("/api/v1/session", { headers: { "cf-access-jwt-assertion": await assertion("access.user@example.org", "another-app") } });
    expect(wrongAud.status).toBe(401);
    expect(((await wrongAud.json()) as any).error.code).toBe("auth.access_jwt_invalid");
    const forged = await raw("/api/v1/session", { headers: { "cf-access-jwt-assertion": `${(await assertion("access.user@example.org")).slice(0, -4)}AAAA` } });
    expect(forged.status).toBe(401);
    const stranger = await raw("/api/v1/session", { headers: { "cf-access-jwt-assertion": await assertion("nobody@example.org") } });
    expect(stranger.status).toBe(401);
    expect(((await stranger.json()) as any).error.code).toBe("auth.unauthenticated");
  });
});
