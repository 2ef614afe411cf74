// GET /api/v1/openapi.json: the OpenAPI 3.1 document, made from the operations the routers declare
// (`op()` in http/route.ts) and the request schemas they validate with. test/api.test.ts checks
// that every mounted route is described.
import { apiRoutes } from "./api";
import { readOpensRoute } from "./auth";
import { queryParameters } from "./query";
import { routes, type OperationSpec } from "./route";
import { schemas } from "./schemas";

const errorSchema = {
  type: "object",
  required: ["error"],
  properties: { error: { type: "object", required: ["code", "message"], properties: { code: { type: "string" }, message: { type: "string" }, details: {} } } },
};

function operation(path: string, method: string, op: OperationSpec) {
  const params = [...path.matchAll(/\{(\w+)\}/gu)].map((m) => ({ name: m[1], in: "path", required: true, schema: { type: "string" } }));
  const headers = (op.headers ?? []).map((name) => ({ name, in: "header", required: false, schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,200}$" } }));
  const responses: Record<string, unknown> = { [String(op.ok)]: { description: "Success", content: { [op.produces ?? "application/json"]: { schema: op.produces ? { type: "string" } : { type: "object" } } } } };
  for (const status of [400, ...(op.auth === "none" ? [] : [401]), ...(Array.isArray(op.auth) ? [403] : []), ...(op.errors ?? []), ...(op.rateLimit ? [429] : [])]) {
    responses[String(status)] = { description: "Error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
  }
  return {
    operationId: `${method}${path.replace(/^\/api\/v1/u, "").replace(/[^A-Za-z0-9]+(\w)?/gu, (_m, c: string | undefined) => (c ? c.toUpperCase() : ""))}`,
    summary: op.summary,
    ...(op.auth === "none" ? { security: [] } : { security: [{ [op.auth === "admin_token" ? "adminToken" : "apiKey"]: [] }] }),
    // Any one of `x-scopes` opens the operation; so does `read` where `x-read-opens` is true.
    ...(Array.isArray(op.auth) ? { "x-scopes": op.auth, "x-read-opens": readOpensRoute(method, op.auth, op.readOpens) } : {}),
    parameters: [...params, ...queryParameters(op.query), ...headers],
    ...(op.body ? { requestBody: { required: true, content: { "application/json": { schema: { $ref: `#/components/schemas/${op.body}` } } } } } : {}),
    ...(op.consumes ? { requestBody: { required: true, content: Object.fromEntries(op.consumes.map((type) => [type, { schema: { type: "string", format: "binary" } }])) } } : {}),
    responses,
  };
}

export const openApiRoutes = routes().op({ method: "get", path: "/openapi.json", summary: "This document", auth: "none", ok: 200 }, () => openApiDocument());

export function openApiDocument() {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of [...apiRoutes, openApiRoutes].flatMap((r) => r.operations)) {
    const path = `/api/v1${op.path.replace(/:(\w+)/gu, "{$1}")}`;
    paths[path] ??= {};
    paths[path][op.method] = operation(path, op.method, op);
  }
  return {
    openapi: "3.1.0",
    info: { title: "Safest Tools API", version: "1", description: "Trust & Safety operations: workflows, runs, reviews, enforcement, audit." },
    servers: [{ url: "/" }],
    paths,
    components: {
      securitySchemes: {
        apiKey: {
          type: "http",
          scheme: "bearer",
          description:
            "An installation API key (scopes: admin, reports:write, events:write, review, read, personal_data:read) or a console session (its role's scopes). An operation opens to any one of its `x-scopes`, and to `read` where its `x-read-opens` is true; otherwise 403 auth.scope_missing.",
        },
        adminToken: { type: "http", scheme: "bearer", description: "The ADMIN_TOKEN Worker secret." },
      },
      schemas: { Error: errorSchema, ...schemas },
    },
  };
}
