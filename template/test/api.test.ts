// The HTTP API: authentication, tenancy, idempotency, validation errors, termination, OpenAPI.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../src/audit";
import { apiRoutes } from "../src/http/api";
import { createApp } from "../src/http/app";
import { openApiDocument } from "../src/http/openapi";
import { sha256Hex } from "../src/lib/crypto";
import { AUTHORITY_MODES, RUN_STATES } from "../src/workflows/types";
import { ADMIN_TOKEN, api, edge, newInstallation, publish, startRun, waitForRun, waitForWait } from "./helpers";

const waiting = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "await", kind: "wait_for_event", config: { event_type: "appeal.filed", timeout_seconds: 3600 } },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "await"), edge("await", "received", "done"), edge("await", "timeout", "done")],
};

describe("authentication", () => {
  it("installation management needs the admin token", async () => {
    expect((await api("/api/v1/installations", { body: { name: "x" } })).status).toBe(401);
    expect((await api("/api/v1/installations", { body: { name: "x" }, key: "wrong" })).body.error.code).toBe("auth.unauthenticated");
    const { apiKey } = await newInstallation();
    expect((await api("/api/v1/installations", { body: { name: "x" }, key: apiKey })).status).toBe(401);
  });

  it("a key without the needed scope gets 403 with a stable code", async () => {
    const { apiKey } = await newInstallation();
    const created = await api("/api/v1/api-keys", { key: apiKey, body: { name: "intake", scopes: ["reports:write"] } });
    expect(created.status).toBe(201);
    const denied = await api("/api/v1/workflows", { key: created.body.apiKey, body: { name: "nope" } });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe("auth.scope_missing");
    const stored = await env.DB.prepare("SELECT key_hash FROM api_keys WHERE id = ?").bind(created.body.id).first<{ key_hash: string }>();
    expect(stored?.key_hash).toMatch(/^[0-9a-f]{64}$/u);
    expect(stored?.key_hash).not.toContain(created.body.apiKey);
  });
});

describe("tenancy", () => {
  it("another installation's key gets 404 on 8 workflow, version and run operations, never the data (the full walk: tenancy.test.ts)", async () => {
    const a = await newInstallation("a");
    const b = await newInstallation("b");
    const version = await publish(a.apiKey, waiting);
    const run = await startRun(a.apiKey, version.id);
    await waitForWait(a.apiKey, run.id);
    const workflowId = (await api(`/api/v1/workflow-versions/${version.id}`, { key: a.apiKey })).body.workflowId;
    const attempts = [
      api(`/api/v1/workflows/${workflowId}`, { key: b.apiKey }),
      api(`/api/v1/workflows/${workflowId}/versions`, { key: b.apiKey, body: { graph: waiting } }),
      api(`/api/v1/workflow-versions/${version.id}`, { key: b.apiKey }),
      api(`/api/v1/workflow-versions/${version.id}/retire`, { key: b.apiKey, method: "POST" }),
      api("/api/v1/runs", { key: b.apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous" } }),
      api(`/api/v1/runs/${run.id}`, { key: b.apiKey }),
      api(`/api/v1/runs/${run.id}/events`, { key: b.apiKey, body: { type: "appeal.filed" } }),
      api(`/api/v1/runs/${run.id}/terminate`, { key: b.apiKey, method: "POST" }),
    ];
    for (const response of await Promise.all(attempts)) {
      expect(response.status).toBe(404);
      expect(JSON.stringify(response.body)).not.toContain(run.id);
    }
    expect((await api("/api/v1/runs", { key: b.apiKey })).body.items).toEqual([]);
    expect((await api(`/api/v1/runs/${run.id}`, { key: a.apiKey })).body.state).toBe("waiting");
  });
});

describe("runs", () => {
  it("Idempotency-Key returns the first run; reuse with another body is a 409", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waiting);
    const body = { workflowVersionId: version.id, authorityMode: "autonomous", input: { reportId: "r1" } };
    const first = await api("/api/v1/runs", { key: apiKey, body, headers: { "idempotency-key": "intake-r1" } });
    const again = await api("/api/v1/runs", { key: apiKey, body, headers: { "idempotency-key": "intake-r1" } });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const reused = await api("/api/v1/runs", { key: apiKey, body: { ...body, input: { reportId: "r2" } }, headers: { "idempotency-key": "intake-r1" } });
    expect(reused.status).toBe(409);
    expect(reused.body.error.code).toBe("idempotency_key.reused");
    const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs WHERE idempotency_key = 'intake-r1'").first<{ n: number }>();
    expect(rows?.n).toBe(1);
  });

  it("a keyed run keeps 128 bits of its request's digest, a run without a key none; a row of the earlier form (sha256: and 256 bits) still replays and refuses another body", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waiting);
    const body = { workflowVersionId: version.id, authorityMode: "autonomous", input: { reportId: "r1" } };
    const keyed = await api("/api/v1/runs", { key: apiKey, body, headers: { "idempotency-key": "digest-form" } });
    const keyless = await api("/api/v1/runs", { key: apiKey, body });
    const digestOf = async (id: string) => (await env.DB.prepare("SELECT request_digest AS d FROM workflow_runs WHERE id = ?1").bind(id).first<{ d: string | null }>())!.d;
    // What the earlier release stored: the whole SHA-256 of the same canonical request, prefixed.
    const full = await sha256Hex(canonicalJson({ v: version.id, m: "autonomous", i: body.input, r: null, a: null }));
    expect(await digestOf(keyed.body.id)).toBe(full.slice(0, 32));
    expect(await digestOf(keyless.body.id)).toBeNull();
    await env.DB.prepare("UPDATE workflow_runs SET request_digest = ?2 WHERE id = ?1").bind(keyed.body.id, `sha256:${full}`).run();
    const again = await api("/api/v1/runs", { key: apiKey, body, headers: { "idempotency-key": "digest-form" } });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(keyed.body.id);
    const other = await api("/api/v1/runs", { key: apiKey, body: { ...body, input: { reportId: "r2" } }, headers: { "idempotency-key": "digest-form" } });
    expect(other.body.error.code).toBe("idempotency_key.reused");
  });

  it("bad input gets 400 with a code and writes nothing", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waiting);
    const before = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs").first<{ n: number }>();
    const badMode = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "godmode" } });
    expect(badMode.status).toBe(400);
    expect(badMode.body.error.code).toBe("request.invalid");
    const badJson = await api("/api/v1/runs", { key: apiKey, body: "{not json" });
    expect(badJson.body.error.code).toBe("request.invalid_json");
    const badKey = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "shadow" }, headers: { "idempotency-key": "has spaces" } });
    expect(badKey.body.error.code).toBe("request.invalid_idempotency_key");
    const after = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs").first<{ n: number }>();
    expect(after?.n).toBe(before?.n);
  });

  it("terminate stops a waiting run; it then refuses events", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waiting);
    const run = await startRun(apiKey, version.id);
    await waitForWait(apiKey, run.id);
    const terminated = await api(`/api/v1/runs/${run.id}/terminate`, { key: apiKey, method: "POST" });
    expect(terminated.status).toBe(200);
    expect(terminated.body.state).toBe("terminated");
    const event = await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "appeal.filed" } });
    expect(event.status).toBe(409);
    expect(event.body.error.code).toBe("run.terminal");
    const detail = await api(`/api/v1/runs/${run.id}`, { key: apiKey });
    expect(detail.body.waits[0].state).toBe("cancelled");
  });

  it("a retired version takes no new runs", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waiting);
    expect((await api(`/api/v1/workflow-versions/${version.id}/retire`, { key: apiKey, method: "POST" })).body.retiredAt).toBeTruthy();
    const refused = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous" } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("workflow_version.retired");
  });

  it("a malformed cursor is a 400 with a stable code on the runs, reports and queue task lists (every list: bad-input.test.ts)", async () => {
    const { apiKey } = await newInstallation();
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "q", slaSeconds: 600 } });
    for (const cursor of ["%%%", "bm90LWpzb24", "WyJvbmx5LW9uZSJd"]) {
      for (const path of ["/api/v1/runs", "/api/v1/reports", `/api/v1/queues/${queue.body.id}/tasks`]) {
        const response = await api(`${path}?cursor=${cursor}`, { key: apiKey });
        expect(response.status, `${path} ${cursor}`).toBe(400);
        expect(response.body.error.code).toBe("request.invalid_cursor");
      }
    }
  });

  it("lists runs newest first with a cursor", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await startRun(apiKey, version.id)).id);
    await Promise.all(ids.map((id) => waitForRun(apiKey, id)));
    const page1 = await api("/api/v1/runs?limit=2", { key: apiKey });
    expect(page1.body.items).toHaveLength(2);
    const page2 = await api(`/api/v1/runs?limit=2&cursor=${page1.body.nextCursor}`, { key: apiKey });
    expect(page2.body.items).toHaveLength(1);
    expect(new Set([...page1.body.items, ...page2.body.items].map((r: any) => r.id))).toEqual(new Set(ids));
  });
});

describe("publishing", () => {
  it("an invalid graph gets 422 with every problem and its path, and stores nothing", async () => {
    const { apiKey } = await newInstallation();
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "broken" } });
    const response = await api(`/api/v1/workflows/${workflow.body.id}/versions`, {
      key: apiKey,
      body: {
        graph: {
          schemaVersion: 1,
          nodes: [
            { id: "start", kind: "start" },
            { id: "bad id!", kind: "end" },
            { id: "x", kind: "teleport" },
          ],
          edges: [],
        },
      },
    });
    expect(response.status).toBe(422);
    expect(response.body.error.code).toBe("workflow_graph.invalid");
    expect(response.body.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ path: "$.nodes[1].id", code: "identifier_invalid" }), expect.objectContaining({ path: "$.nodes[2].kind", code: "node_kind_unknown" })]));
    const versions = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_versions WHERE workflow_id = ?").bind(workflow.body.id).first<{ n: number }>();
    expect(versions?.n).toBe(0);
  });

  it("large artifacts go to R2 and still run, digest-checked", async () => {
    const { apiKey } = await newInstallation();
    const nodes: any[] = [{ id: "start", kind: "start" }];
    const edges: any[] = [];
    let previous = "start";
    let port = "success";
    for (let i = 0; i < 20; i++) {
      const id = `n${i}`;
      nodes.push({ id, kind: "condition", config: { cases: [], case_ports: [], default_port: "next", description: "x".repeat(4_000) } });
      edges.push(edge(previous, port, id));
      previous = id;
      port = "next";
    }
    nodes.push({ id: "done", kind: "end" });
    edges.push(edge(previous, port, "done"));
    const version = await publish(apiKey, { schemaVersion: 1, nodes, edges });
    const read = await api(`/api/v1/workflow-versions/${version.id}`, { key: apiKey });
    expect(read.body.artifact.storage).toBe("r2");
    expect(await env.WORKFLOW_ARTIFACTS.head(`artifacts/${version.artifact.digest.slice(7)}.js`)).not.toBeNull();
    const row = await env.DB.prepare("SELECT inline_source_text FROM workflow_artifacts WHERE id = ?").bind(version.artifact.id).first<{ inline_source_text: string | null }>();
    expect(row?.inline_source_text).toBeNull();
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
    expect(done.state).toBe("succeeded");
    expect(done.steps).toHaveLength(22);
  });
});

describe("API keys", () => {
  it("records when a key was last used, and lists it", async () => {
    const { apiKey } = await newInstallation();
    const before = await api("/api/v1/api-keys", { key: apiKey });
    const id = before.body.items[0].id;
    // The write runs in waitUntil; read the row until it lands (no timing assumptions).
    let stored: { last_used_at: string | null } | null = null;
    for (let i = 0; i < 50 && !stored?.last_used_at; i++) {
      stored = await env.DB.prepare("SELECT last_used_at FROM api_keys WHERE id = ?").bind(id).first<{ last_used_at: string | null }>();
      if (!stored?.last_used_at) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(stored?.last_used_at).toMatch(/^\d{4}-/u);
    const listed = await api("/api/v1/api-keys", { key: apiKey });
    expect(listed.body.items[0].lastUsedAt).toBe(stored!.last_used_at);
  });

  it("a bad limit is the same typed 400 on five paged lists (every list: bad-input.test.ts)", async () => {
    const { apiKey } = await newInstallation();
    for (const path of ["/api/v1/runs", "/api/v1/reports", "/api/v1/audit-events", "/api/v1/webhook-deliveries", "/api/v1/action-proposals"]) {
      const response = await api(`${path}?limit=abc`, { key: apiKey });
      expect(response.status, path).toBe(400);
      expect(response.body.error.code).toBe("request.invalid_query");
      expect(response.body.error.details.parameter).toBe("limit");
    }
  });
});

describe("schema and OpenAPI", () => {
  it("SQL CHECK constraints list exactly the enumerations of the code", async () => {
    const table = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE name = 'workflow_runs'").first<{ sql: string }>();
    const list = (column: string) =>
      /IN \(([^)]*)\)/u
        .exec(table!.sql.split(`${column} TEXT`)[1]!)![1]!
        .split(",")
        .map((v) => v.trim().replace(/'/gu, ""));
    expect(list("authority_mode")).toEqual([...AUTHORITY_MODES]);
    expect(list("state")).toEqual([...RUN_STATES]);
  });

  it("describes every mounted route", async () => {
    const document = openApiDocument();
    const routes = createApp().routes.filter((r) => r.path.startsWith("/api/v1") && r.method !== "ALL");
    // An operation routed by another pattern (route.ts `routerPath`) is described under its published path.
    const published = new Map<string, string>(apiRoutes.flatMap((r) => r.operations.flatMap((op) => (op.routerPath ? [[`${op.method.toUpperCase()} /api/v1${op.routerPath}`, `/api/v1${op.path}`] as const] : []))));
    expect(published.size).toBeGreaterThan(0);
    for (const route of routes) {
      const path = (published.get(`${route.method} ${route.path}`) ?? route.path).replace(/:(\w+)/gu, "{$1}");
      expect(document.paths[path]?.[route.method.toLowerCase()], `${route.method} ${route.path}`).toBeDefined();
    }
    const served = await api("/api/v1/openapi.json");
    expect(served.status).toBe(200);
    expect(served.body.openapi).toBe("3.1.0");
  });
});

it("uses the admin token from the environment", () => {
  expect(env.ADMIN_TOKEN).toBe(ADMIN_TOKEN);
});
