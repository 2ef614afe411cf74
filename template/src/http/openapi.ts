// GET /api/v1/openapi.json: the OpenAPI 3.1 document. Request schemas are the ones the routes
// validate with; test/openapi.test.ts checks that every mounted route is described here.
import { schemas } from "./schemas";

type Auth = "admin_token" | "api_key" | "none";
interface Operation {
  summary: string;
  auth: Auth;
  scopes?: string[];
  body?: keyof typeof schemas;
  ok: number;
  errors?: number[];
  headers?: string[];
}

const operations: Record<string, Record<string, Operation>> = {
  "/api/v1/installations": {
    post: { summary: "Create an installation (tenant) and its first API key, shown once", auth: "admin_token", body: "CreateInstallation", ok: 201 },
    get: { summary: "List installations", auth: "admin_token", ok: 200 },
  },
  "/api/v1/api-keys": {
    post: { summary: "Create an API key with scopes; the key is shown once", auth: "api_key", scopes: ["admin"], body: "CreateApiKey", ok: 201 },
  },
  "/api/v1/workflows": {
    post: { summary: "Create a workflow", auth: "api_key", scopes: ["admin"], body: "CreateWorkflow", ok: 201, errors: [409] },
    get: { summary: "List workflows", auth: "api_key", scopes: ["admin", "review"], ok: 200 },
  },
  "/api/v1/workflows/{id}": {
    get: { summary: "Read a workflow with its versions", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] },
  },
  "/api/v1/workflows/{id}/versions": {
    post: { summary: "Publish a version: validate, compile and store its artifact (422 lists every graph problem)", auth: "api_key", scopes: ["admin"], body: "PublishVersion", ok: 201, errors: [404, 422] },
  },
  "/api/v1/workflow-versions/{id}": {
    get: { summary: "Read a version with its graph and artifact digest", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] },
  },
  "/api/v1/workflow-versions/{id}/retire": {
    post: { summary: "Retire a version: no new runs start on it", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] },
  },
  "/api/v1/workflow-graphs/validate": {
    post: { summary: "Check a graph without publishing it", auth: "api_key", scopes: ["admin", "review"], body: "ValidateGraph", ok: 200 },
  },
  "/api/v1/runs": {
    post: { summary: "Start a run; Idempotency-Key makes a retry return the first run", auth: "api_key", scopes: ["admin"], body: "CreateRun", ok: 201, errors: [404, 409, 413, 503], headers: ["Idempotency-Key"] },
    get: { summary: "List runs, newest first, with a cursor", auth: "api_key", scopes: ["admin", "review"], ok: 200 },
  },
  "/api/v1/runs/{id}": {
    get: { summary: "Read a run with its steps and waits", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] },
  },
  "/api/v1/runs/{id}/events": {
    post: { summary: "Send an event to the run's waits for that type (recorded before it is sent)", auth: "api_key", scopes: ["admin"], body: "SendEvent", ok: 202, errors: [404, 409, 413] },
  },
  "/api/v1/runs/{id}/terminate": {
    post: { summary: "Terminate a run", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404, 409] },
  },
  "/api/v1/openapi.json": {
    get: { summary: "This document", auth: "none", ok: 200 },
  },
};

const errorSchema = {
  type: "object",
  required: ["error"],
  properties: { error: { type: "object", required: ["code", "message"], properties: { code: { type: "string" }, message: { type: "string" }, details: {} } } },
};

function operation(path: string, method: string, op: Operation) {
  const params = [...path.matchAll(/\{(\w+)\}/gu)].map((m) => ({ name: m[1], in: "path", required: true, schema: { type: "string" } }));
  const headers = (op.headers ?? []).map((name) => ({ name, in: "header", required: false, schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,200}$" } }));
  const responses: Record<string, unknown> = { [String(op.ok)]: { description: "Success", content: { "application/json": { schema: { type: "object" } } } } };
  for (const status of [400, ...(op.auth === "none" ? [] : [401]), ...(op.scopes ? [403] : []), ...(op.errors ?? [])]) {
    responses[String(status)] = { description: "Error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
  }
  return {
    operationId: `${method}${path.replace(/^\/api\/v1/u, "").replace(/[^A-Za-z0-9]+(\w)?/gu, (_m, c: string | undefined) => (c ? c.toUpperCase() : ""))}`,
    summary: op.summary,
    ...(op.auth === "none" ? { security: [] } : { security: [{ [op.auth === "admin_token" ? "adminToken" : "apiKey"]: [] }] }),
    ...(op.scopes ? { "x-scopes": op.scopes } : {}),
    parameters: [...params, ...headers],
    ...(op.body ? { requestBody: { required: true, content: { "application/json": { schema: { $ref: `#/components/schemas/${op.body}` } } } } } : {}),
    responses,
  };
}

export function openApiDocument() {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [path, methods] of Object.entries(operations)) {
    paths[path] = Object.fromEntries(Object.entries(methods).map(([method, op]) => [method, operation(path, method, op)]));
  }
  return {
    openapi: "3.1.0",
    info: { title: "Safest Tools API", version: "1", description: "Trust & Safety operations: workflows, runs, reviews, enforcement, audit." },
    servers: [{ url: "/" }],
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", description: "An installation API key (scopes: admin, reports:write, review)." },
        adminToken: { type: "http", scheme: "bearer", description: "The ADMIN_TOKEN Worker secret." },
      },
      schemas: { Error: errorSchema, ...schemas },
    },
  };
}
