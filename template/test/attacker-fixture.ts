// Shared setup of the attacker-*.test.ts files: console sessions of a role, requests as them, keys of given scopes.
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { ADMIN_TOKEN, api } from "./helpers";

async function raw(path: string, init: RequestInit = {}) {
  return exports.default.fetch(new Request(`http://safest.test${path}`, { redirect: "manual", ...init }));
}

/** A console session of `role` (a one-time sign-in link followed), for requests as that user. */
export async function signIn(installationId: string, email: string, role: string) {
  const link = await api("/api/v1/console-signin-links", { key: ADMIN_TOKEN, body: { installationId, email, role } });
  expect(link.status, JSON.stringify(link.body)).toBe(201);
  const response = await raw(link.body.path);
  const cookie = response.headers.get("set-cookie")!.split(";")[0]!;
  const session = (await (await raw("/api/v1/session", { headers: { cookie } })).json()) as { user: { id: string }; csrfToken: string };
  return { cookie, csrf: session.csrfToken, userId: session.user.id };
}

export async function asUser(session: { cookie: string; csrf: string }, path: string, body?: unknown, method?: string) {
  const response = await raw(`/api/v1${path}`, {
    method: method ?? (body === undefined ? "GET" : "POST"),
    headers: { cookie: session.cookie, "content-type": "application/json", "x-csrf-token": session.csrf },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : null) as any };
}

export async function keyWith(adminKey: string, scopes: string[], extra: Record<string, unknown> = {}) {
  const created = await api("/api/v1/api-keys", { key: adminKey, body: { name: `k-${crypto.randomUUID().slice(0, 8)}`, scopes, ...extra } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.apiKey as string;
}
