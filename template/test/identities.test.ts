// Sessions and identities: each test is named for the attack it stops. Cloudflare Access sign-ins
// land only where an admin bound them; decidedBy never becomes the audit actor; revoking an
// unknown key audits nothing; intake is rate limited per key.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, newInstallation } from "./helpers";

async function assertion(email: string) {
  const response = await env.ACCESS_PEER.fetch("https://safest-test.cloudflareaccess.com/_sign", {
    method: "POST",
    body: JSON.stringify({ email, aud: env.ACCESS_AUD, iss: `https://${env.ACCESS_TEAM_DOMAIN}` }),
  });
  return response.text();
}

async function accessSession(email: string, headers: Record<string, string> = {}) {
  const response = await exports.default.fetch(new Request("http://safest.test/api/v1/session", { headers: { "cf-access-jwt-assertion": await assertion(email), ...headers } }));
  return { status: response.status, body: (await response.json()) as any, cookie: response.headers.get("set-cookie") };
}

describe("Cloudflare Access sign-in is bound to an installation", () => {
  it("an Access user of installation B cannot land in installation A", async () => {
    const email = `bob-${crypto.randomUUID()}@example.org`;
    // A is older. Its admin adds the email without binding its Access sign-in; B's admin binds it.
    const a = await newInstallation("A");
    const b = await newInstallation("B");
    const inA = await api("/api/v1/console-users", { key: a.apiKey, body: { email, role: "admin", accessSignIn: false } });
    expect(inA.body.accessSignIn).toBe(false);
    expect((await api("/api/v1/console-users", { key: b.apiKey, body: { email, role: "moderator" } })).body.accessSignIn).toBe(true);
    const session = await accessSession(email);
    expect(session.status).toBe(200);
    expect(session.body.user).toMatchObject({ installationId: b.id, role: "moderator" });
    // Naming A does not help: the sign-in is not bound there.
    const intoA = await accessSession(email, { "x-safest-installation": a.id });
    expect(intoA.status).toBe(403);
    expect(intoA.body.error.code).toBe("auth.access_not_bound");
    expect(intoA.cookie).toBeNull();
  });

  it("an email bound in two installations must choose one, and lands only in the one it names", async () => {
    const email = `carol-${crypto.randomUUID()}@example.org`;
    const a = await newInstallation("first desk");
    const b = await newInstallation("second desk");
    await api("/api/v1/console-users", { key: a.apiKey, body: { email, role: "admin" } });
    await api("/api/v1/console-users", { key: b.apiKey, body: { email, role: "viewer" } });
    const ambiguous = await accessSession(email);
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error.code).toBe("auth.installation_choice_required");
    expect(ambiguous.body.error.details.installations).toEqual([
      { id: a.id, name: "first desk" },
      { id: b.id, name: "second desk" },
    ]);
    expect(ambiguous.cookie).toBeNull();
    const chosen = await accessSession(email, { "x-safest-installation": b.id });
    expect(chosen.status).toBe(200);
    expect(chosen.body.user).toMatchObject({ installationId: b.id, role: "viewer" });
    // The session serves B; naming A with B's cookie and no assertion is not a way into A.
    const cookie = chosen.cookie!.split(";")[0]!;
    const switched = await exports.default.fetch(new Request("http://safest.test/api/v1/session", { headers: { cookie, "x-safest-installation": a.id } }));
    expect(switched.status).toBe(401);
    // Unbinding A leaves one binding: no choice needed any more.
    const userA = (await api("/api/v1/console-users", { key: a.apiKey })).body.items.find((u: any) => u.email === email);
    await api(`/api/v1/console-users/${userA.id}`, { key: a.apiKey, method: "PATCH", body: { accessSignIn: false } });
    expect((await accessSession(email)).body.user.installationId).toBe(b.id);
  });
});

describe("audit actors", () => {
  it("decidedBy cannot impersonate another actor in the audit trail", async () => {
    const { apiKey } = await newInstallation();
    const key = await api("/api/v1/api-keys", { key: apiKey, body: { name: "moderation tool", scopes: ["review", "reports:write"] } });
    const report = await api("/api/v1/reports", { key: key.body.apiKey, body: { subject: { kind: "content", id: "imp-1" }, category: "scams_and_fraud" } });
    const decision = await api("/api/v1/decisions", {
      key: key.body.apiKey,
      body: { reportId: report.body.id, outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam.", decidedBy: "usr_the_admin" },
    });
    expect(decision.status).toBe(201);
    const audit = await api(`/api/v1/audit-events?action=decision.recorded&targetId=${decision.body.id}`, { key: apiKey });
    expect(audit.body.items).toHaveLength(1);
    expect(audit.body.items[0].actor).toEqual({ type: "api_key", id: key.body.id });
    // The stated name is kept as a pseudonymous id, never as given (the audit trail outlives erasure).
    expect(audit.body.items[0].details.decidedByStatedId).toMatch(/^rvw_[0-9a-f]{20}$/u);
    expect(JSON.stringify(audit.body.items[0].details)).not.toContain("usr_the_admin");
  });

  it("revoking an unknown key writes no audit event", async () => {
    const { apiKey } = await newInstallation();
    const other = await newInstallation("other");
    const foreignKey = await api("/api/v1/api-keys", { key: other.apiKey, body: { name: "theirs", scopes: ["read"] } });
    for (const id of ["key_does_not_exist", foreignKey.body.id]) {
      const revoked = await api(`/api/v1/api-keys/${id}/revoke`, { key: apiKey, body: {} });
      expect(revoked.status).toBe(404);
      expect(revoked.body.error.code).toBe("api_key.not_found");
      const audit = await api(`/api/v1/audit-events?action=api_key.revoked&targetId=${id}`, { key: apiKey });
      expect(audit.body.items).toEqual([]);
    }
    expect((await api(`/api/v1/audit-events?action=api_key.revoked`, { key: other.apiKey })).body.items).toEqual([]);
    // A real revocation is audited once, a repeat not again.
    const mine = await api("/api/v1/api-keys", { key: apiKey, body: { name: "mine", scopes: ["read"] } });
    expect((await api(`/api/v1/api-keys/${mine.body.id}/revoke`, { key: apiKey, body: {} })).status).toBe(200);
    expect((await api(`/api/v1/api-keys/${mine.body.id}/revoke`, { key: apiKey, body: {} })).status).toBe(200);
    expect((await api(`/api/v1/audit-events?action=api_key.revoked&targetId=${mine.body.id}`, { key: apiKey })).body.items).toHaveLength(1);
  });
});

describe("intake rate limit (Workers Rate Limiting binding INTAKE_RATE_LIMIT, 300 per 60 s per key)", () => {
  it("one key flooding POST /reports gets 429 request.rate_limited with retry-after; another key is not throttled", async () => {
    const { apiKey } = await newInstallation();
    const flood = await api("/api/v1/api-keys", { key: apiKey, body: { name: "flood", scopes: ["reports:write"] } });
    const calm = await api("/api/v1/api-keys", { key: apiKey, body: { name: "calm", scopes: ["reports:write"] } });
    // Invalid bodies are cheap and still count: the limit applies after authentication, before anything else.
    let accepted = 0;
    let limited: { status: number; body: any; headers: Headers } | null = null;
    // The binding counts in fixed 60 s windows; a window may roll over once while this runs, so the
    // first 429 comes after 300 to 599 counted requests.
    while (!limited && accepted < 900) {
      const batch = await Promise.all(Array.from({ length: 25 }, () => api("/api/v1/reports", { key: flood.body.apiKey, body: {} })));
      for (const response of batch) {
        if (response.status === 429) limited ??= response;
        else {
          expect(response.status).toBe(400);
          if (!limited) accepted += 1;
        }
      }
    }
    expect(limited).not.toBeNull();
    expect(accepted).toBeGreaterThanOrEqual(300);
    expect(limited!.body.error.code).toBe("request.rate_limited");
    expect(limited!.headers.get("retry-after")).toBe("60");
    const other = await api("/api/v1/reports", { key: calm.body.apiKey, body: { subject: { kind: "content", id: "calm-1" }, category: "scams_and_fraud" } });
    expect(other.status).toBe(201);
  }, 120_000);
});
