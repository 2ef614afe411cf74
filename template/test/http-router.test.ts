// The application's routes all fit Hono's RegExpRouter (one compiled regular expression per
// method). Hono's default SmartRouter silently falls back to the slower TrieRouter for the whole
// application when a single route pattern is refused (a literal segment where a sibling route of
// the same method has a parameter). Published paths that would be refused are routed by a
// parameter checked against their literal (route.ts `routerPath`) and still answer as before.
import { env } from "cloudflare:test";
import { UnsupportedPathError } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { describe, expect, it } from "vitest";
import { createApp } from "../src/http/app";
import { ADMIN_TOKEN, api, newInstallation } from "./helpers";

describe("the HTTP router", () => {
  it("RegExpRouter accepts every registered route", () => {
    const app = createApp();
    const accepted: { method: string; path: string }[] = [];
    const refused: string[] = [];
    for (const route of app.routes) {
      // The matcher is built on the first match, which is where an ambiguous pattern is refused;
      // one is built per route over those accepted so far, so that every refused route is named.
      const probe = new RegExpRouter<string>();
      try {
        for (const earlier of [...accepted, route]) probe.add(earlier.method, earlier.path, "");
        probe.match("GET", "/");
        accepted.push(route);
      } catch (error) {
        if (!(error instanceof UnsupportedPathError)) throw error;
        refused.push(`${route.method} ${route.path}`);
      }
    }
    expect(refused).toEqual([]);
    expect(accepted.length).toBeGreaterThan(300);
  });

  it("the app settles on RegExpRouter once it has routed a request", async () => {
    const app = createApp();
    const response = await app.request("/api/v1/hash-banks/hbk_nope/match", { method: "POST", body: "{}" }, env);
    expect(response.status).toBe(401);
    expect(app.router.name).toBe("SmartRouter + RegExpRouter");
  });

  it("paths routed by a checked parameter answer as published; other values of it are unknown routes", async () => {
    const { id, apiKey } = await newInstallation();
    // Each reaches its operation: auth answers (the admin token, or a key lacking it).
    expect((await api("/api/v1/installations/import", { key: apiKey, body: {} })).body.error.code).toBe("auth.unauthenticated");
    expect((await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: {} })).body.error.code).toBe("request.invalid");
    expect((await api(`/api/v1/installations/${id}/reapply-erasures`, { key: apiKey, method: "POST" })).body.error.code).toBe("auth.unauthenticated");
    expect((await api("/api/v1/installations/inst_nope/reapply-erasures", { key: ADMIN_TOKEN, method: "POST" })).body.error.code).toBe("installation.not_found");
    expect((await api("/api/v1/rule-sets/test", { key: apiKey, body: {} })).body.error.code).toBe("request.invalid");
    // The parameter standing for a literal takes no other value, whatever the credentials.
    for (const [path, key] of [
      ["/api/v1/installations/export", ADMIN_TOKEN],
      ["/api/v1/installations/inst_nope", ADMIN_TOKEN],
      ["/api/v1/rule-sets/rs_nope", apiKey],
      ["/api/v1/rule-sets/tests", undefined],
    ] as const) {
      const answer = await api(path, { ...(key ? { key } : {}), body: {} });
      expect([path, answer.status, answer.body.error.code]).toEqual([path, 404, "route.not_found"]);
    }
  });
});
