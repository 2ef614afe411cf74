// Work an attacker could make the platform do, bounded: a full audit walk only for admins,
// response-schema patterns that cannot backtrack exponentially, and no service without an audit key.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createApp } from "../src/http/app";
import { keyWith } from "./attacker-fixture";
import { api, edge, newInstallation } from "./helpers";

describe("bounded work", () => {
  it("GET /audit/verify?mode=full is refused to a read or review key, served to an admin", async () => {
    const { apiKey } = await newInstallation("attack-verify-full");
    for (const scopes of [["read"], ["review"]]) {
      const refused = await api("/api/v1/audit/verify?mode=full", { key: await keyWith(apiKey, scopes) });
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe("audit.full_verify_admin_only");
    }
    expect((await api("/api/v1/audit/verify", { key: await keyWith(apiKey, ["read"]) })).status).toBe(200);
    expect((await api("/api/v1/audit/verify?mode=full", { key: apiKey })).body).toMatchObject({ ok: true, mode: "full" });
  });

  it("a full check walks at most ?limit= events a request and goes on from a cursor no one can forge", async () => {
    const { apiKey } = await newInstallation("attack-verify-paged");
    for (let i = 0; i < 12; i++) expect((await api("/api/v1/queues", { key: apiKey, body: { name: `q-${i}`, slaSeconds: 3600 } })).status).toBe(201);
    const pages: any[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 20; i++) {
      const page = await api(`/api/v1/audit/verify?mode=full&limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { key: apiKey });
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      pages.push(page.body);
      if (page.body.ok !== null) break;
      expect(page.body.checkedTo - page.body.checkedFrom + 1).toBeLessThanOrEqual(5);
      cursor = page.body.nextCursor;
    }
    expect(pages.length).toBeGreaterThan(2);
    expect(pages.at(-1)).toMatchObject({ ok: true, mode: "full" });
    // A cursor moved past events, with the MAC of another position, is refused.
    const [seq, ...rest] = pages[0].nextCursor.split(".");
    const forged = await api(`/api/v1/audit/verify?mode=full&cursor=${encodeURIComponent([Number(seq) + 3, ...rest].join("."))}`, { key: apiKey });
    expect(forged.status).toBe(400);
    expect(forged.body.error.code).toBe("audit.cursor_invalid");
  });

  it("a response schema whose pattern nests repetition is refused at publish; a plain one is accepted", async () => {
    const { apiKey } = await newInstallation("attack-redos");
    expect((await api("/api/v1/queues", { key: apiKey, body: { name: "q", slaSeconds: 3600 } })).status).toBe(201);
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "redos" } });
    const graph = (response_schema: unknown) => ({
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "q", response_schema } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
    });
    const publishWith = (schema: unknown) => api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: graph(schema) } });
    for (const pattern of ["^(a+)+$", "^(a|aa)*$", "^([a-z]*\\d)+x$", "x".repeat(300)]) {
      const refused = await publishWith({ type: "object", properties: { note: { type: "string", pattern } } });
      expect(refused.status, pattern).toBe(422);
      expect(refused.body.error.details.map((d: any) => d.code)).toEqual([pattern.length > 256 ? "pattern_too_long" : "pattern_unsafe"]);
    }
    const nested = await publishWith({ type: "object", patternProperties: { "^(x+)+$": { type: "string" } } });
    expect(nested.status).toBe(422);
    const plain = await publishWith({ type: "object", properties: { note: { type: "string", pattern: "^[a-z]+(-[a-z]+)?$" } } });
    expect(plain.status, JSON.stringify(plain.body)).toBe(201);
  });

  it("a deployment without an AUDIT_CHECKPOINT_KEY of 32 characters serves nothing", async () => {
    const app = createApp();
    for (const key of [undefined, "too-short"]) {
      const ctx = createExecutionContext();
      const response = await app.fetch(new Request("http://safest.test/api/v1/openapi.json"), { ...env, AUDIT_CHECKPOINT_KEY: key } as Env, ctx);
      await waitOnExecutionContext(ctx);
      expect(response.status).toBe(503);
      expect(((await response.json()) as any).error.code).toBe("deployment.audit_key_missing");
    }
  });
});
