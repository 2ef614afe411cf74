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
    get: { summary: "List API keys (prefix and scopes, never the key)", auth: "api_key", scopes: ["admin"], ok: 200 },
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
  "/api/v1/reports": {
    post: { summary: "Take in a report: personal data sealed, grouped into a case per subject, triggers fired", auth: "api_key", scopes: ["reports:write"], body: "CreateReport", ok: 201, errors: [409, 422], headers: ["Idempotency-Key"] },
    get: { summary: "List report summaries (no personal data), newest first", auth: "api_key", scopes: ["review", "admin"], ok: 200 },
  },
  "/api/v1/reports/{id}": {
    get: { summary: "Read a report with its personal data opened (the access is audited)", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] },
  },
  "/api/v1/cases/{id}": {
    get: { summary: "Read a case (one subject) with its reports", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] },
  },
  "/api/v1/triggers": {
    post: { summary: "Map report or appeal events to a workflow version with a CEL condition and an authority mode", auth: "api_key", scopes: ["admin"], body: "CreateTrigger", ok: 201, errors: [404, 409, 422] },
    get: { summary: "List triggers", auth: "api_key", scopes: ["admin"], ok: 200 },
  },
  "/api/v1/triggers/{id}/enable": { post: { summary: "Enable a trigger", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/triggers/{id}/disable": { post: { summary: "Disable a trigger", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/queues": {
    post: { summary: "Create a review queue with an SLA and a priority", auth: "api_key", scopes: ["admin"], body: "CreateQueue", ok: 201, errors: [409] },
    get: { summary: "List queues with open, claimed, SLA-breached counts and the oldest due date", auth: "api_key", scopes: ["review", "admin"], ok: 200 },
  },
  "/api/v1/queues/{id}": { get: { summary: "Read a queue", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] } },
  "/api/v1/queues/{id}/tasks": {
    get: { summary: "Tasks in SLA order (due date, priority, id) with a cursor; ?state=open|claimed|completed|expired|cancelled", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] },
  },
  "/api/v1/queues/{id}/stats": {
    get: { summary: "Open, claimed, SLA breaches, time to complete p50/p90", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] },
  },
  "/api/v1/queues/{id}/next": {
    post: { summary: "Claim the first open task of the queue (404 queue.empty when none)", auth: "api_key", scopes: ["review"], body: "ClaimTask", ok: 200, errors: [404, 409] },
  },
  "/api/v1/tasks/{id}": { get: { summary: "Read a task", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] } },
  "/api/v1/tasks/{id}/claim": {
    post: { summary: "Take or renew the task's exclusive lease; another holder's live lease is a 409", auth: "api_key", scopes: ["review"], body: "ClaimTask", ok: 200, errors: [404, 409] },
  },
  "/api/v1/tasks/{id}/release": { post: { summary: "Give the lease back", auth: "api_key", scopes: ["review"], body: "ReleaseTask", ok: 200, errors: [404, 409] } },
  "/api/v1/tasks/{id}/complete": {
    post: { summary: "Answer the task; the response is checked against its schema (422 lists failing paths) and the run resumes", auth: "api_key", scopes: ["review"], body: "CompleteTask", ok: 200, errors: [404, 409, 422] },
  },
  "/api/v1/appeals": {
    post: { summary: "Appeal a report's handling; starts the appeal workflow(s) of appeal.created triggers", auth: "api_key", scopes: ["reports:write"], body: "CreateAppeal", ok: 201, errors: [404, 409, 422], headers: ["Idempotency-Key"] },
  },
  "/api/v1/appeals/{id}": { get: { summary: "Read an appeal (appellant data opened, access audited)", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] } },
  "/api/v1/appeals/{id}/resolve": {
    post: { summary: "Record the outcome: upheld or overturned", auth: "api_key", scopes: ["review"], body: "ResolveAppeal", ok: 200, errors: [404, 409, 422] },
  },
  "/api/v1/data-keys/rotate": {
    post: { summary: "Start a new data key version for sealing personal data; older versions still open old data", auth: "api_key", scopes: ["admin"], ok: 201 },
  },
  "/api/v1/admin/rewrap-data-keys": {
    post: { summary: "Rewrap data keys sealed under REPORT_MASTER_KEY_PREVIOUS with REPORT_MASTER_KEY", auth: "admin_token", ok: 200 },
  },
  "/api/v1/webhook-endpoints": {
    post: { summary: "Create a webhook endpoint; its signing secret (whsec_…) is shown once", auth: "api_key", scopes: ["admin"], body: "CreateWebhookEndpoint", ok: 201, errors: [422] },
    get: { summary: "List webhook endpoints (never their secrets)", auth: "api_key", scopes: ["admin"], ok: 200 },
  },
  "/api/v1/webhook-endpoints/{id}/disable": { post: { summary: "Stop delivering to an endpoint", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/webhook-endpoints/{id}/enable": { post: { summary: "Deliver to an endpoint again", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/webhook-deliveries": { get: { summary: "Deliveries, newest first; ?state=pending|delivered|dead&endpointId=", auth: "api_key", scopes: ["admin"], ok: 200 } },
  "/api/v1/webhook-deliveries/{id}": { get: { summary: "A delivery with every attempt", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/webhook-deliveries/{id}/resend": { post: { summary: "Send a finished delivery's payload again, as a new delivery", auth: "api_key", scopes: ["admin"], ok: 201, errors: [404, 409] } },
  "/api/v1/action-types": {
    post: { summary: "Create an action type: key, whether it always needs approval, reversibility, its webhook endpoint", auth: "api_key", scopes: ["admin"], body: "CreateActionType", ok: 201, errors: [404, 409] },
    get: { summary: "List action types", auth: "api_key", scopes: ["admin", "review"], ok: 200 },
  },
  "/api/v1/action-proposals": { get: { summary: "Action proposals; ?state=approval_required for the approvals queue", auth: "api_key", scopes: ["admin", "review"], ok: 200 } },
  "/api/v1/action-proposals/{id}": { get: { summary: "Read an action proposal", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] } },
  "/api/v1/action-proposals/{id}/approve": { post: { summary: "Approve: the action is delivered; a second decision is a 409", auth: "api_key", scopes: ["review"], body: "DecideProposal", ok: 200, errors: [404, 409] } },
  "/api/v1/action-proposals/{id}/reject": { post: { summary: "Reject with a reason: the run leaves by its rejected port", auth: "api_key", scopes: ["review"], body: "RejectProposal", ok: 200, errors: [404, 409] } },
  "/api/v1/decisions/{id}": { get: { summary: "Read a decision", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] } },
  "/api/v1/decisions/{id}/statement-of-reasons": { get: { summary: "The decision as an EU DSA Transparency Database statement of reasons", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] } },
  "/api/v1/audit-events": { get: { summary: "The audit trail in order, with its chain hashes; ?action=&targetType=&targetId=&since=&until=&cursor=", auth: "api_key", scopes: ["admin", "review"], ok: 200 } },
  "/api/v1/audit/verify": { get: { summary: "Recompute the hash chain and name the first broken link", auth: "api_key", scopes: ["admin", "review"], ok: 200 } },
  "/api/v1/components": {
    post: { summary: "Create a component", auth: "api_key", scopes: ["admin"], body: "CreateComponent", ok: 201, errors: [409] },
    get: { summary: "List components with their versions, and the built-in components", auth: "api_key", scopes: ["admin", "review"], ok: 200 },
  },
  "/api/v1/components/{id}/versions": {
    post: { summary: "Publish an immutable component version: source, allowed hosts, subrequest budget; returns its digest", auth: "api_key", scopes: ["admin"], body: "PublishComponentVersion", ok: 201, errors: [404, 413] },
  },
  "/api/v1/ai-providers": {
    post: { summary: "Register an AI provider (Workers AI or OpenAI-compatible); the key is sealed and never returned", auth: "api_key", scopes: ["admin"], body: "CreateAiProvider", ok: 201, errors: [422] },
    get: { summary: "List AI providers", auth: "api_key", scopes: ["admin"], ok: 200 },
  },
  "/api/v1/ai-providers/{id}": { get: { summary: "Read an AI provider", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/workflow-versions/{id}/shadow-report": {
    get: { summary: "Shadow runs of this version against people's decisions: runs compared, agreement rate, confusion matrix", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] },
  },
  "/api/v1/workflow-versions/{id}/backtests": {
    post: { summary: "Run this version in shadow over past reports (ids or time range)", auth: "api_key", scopes: ["admin"], body: "StartBacktest", ok: 202, errors: [404, 409, 422] },
  },
  "/api/v1/backtests/{id}": { get: { summary: "A backtest's progress and, when finished, its shadow report", auth: "api_key", scopes: ["admin", "review"], ok: 200, errors: [404] } },
  "/api/v1/decisions": {
    post: { summary: "Record a decision a person made on a report (outside any workflow)", auth: "api_key", scopes: ["review"], body: "RecordDecision", ok: 201, errors: [404, 422] },
  },
  "/api/v1/reports/{id}/timeline": {
    get: { summary: "Everything that followed a report: runs, tasks, decisions, actions, messages, appeals, handoffs", auth: "api_key", scopes: ["review", "admin"], ok: 200, errors: [404] },
  },
  "/api/v1/api-keys/{id}/revoke": { post: { summary: "Revoke an API key", auth: "api_key", scopes: ["admin"], ok: 200, errors: [404] } },
  "/api/v1/session": { get: { summary: "The console session: user, role, queues, preferences, and the CSRF token for writes", auth: "none", ok: 200, errors: [401] } },
  "/api/v1/session/logout": { post: { summary: "End the console session", auth: "none", ok: 200, errors: [401, 403] } },
  "/api/v1/session/preferences": { patch: { summary: "Wellness preferences of the signed-in user (blurMedia)", auth: "api_key", scopes: ["read"], body: "Preferences", ok: 200 } },
  "/api/v1/console-signin-links": {
    post: { summary: "A one-time console sign-in link for a user of an installation (created as admin if new)", auth: "admin_token", body: "CreateSigninLink", ok: 201, errors: [404] },
  },
  "/api/v1/console-users": {
    get: { summary: "Console users with roles and queue access", auth: "api_key", scopes: ["admin"], ok: 200 },
    post: { summary: "Add a console user: admin, moderator or viewer, optionally limited to queues", auth: "api_key", scopes: ["admin"], body: "CreateConsoleUser", ok: 201, errors: [409, 422] },
  },
  "/api/v1/console-users/{id}": { patch: { summary: "Change a console user's role, queues, or disable them", auth: "api_key", scopes: ["admin"], body: "UpdateConsoleUser", ok: 200, errors: [404, 422] } },
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
