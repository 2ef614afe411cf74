// The HTTP application: one Hono sub-router per resource under /api/v1, one error renderer.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "../errors";
import { sealAuditChain } from "../audit";
// Sub-routers come straight from each domain's route files (not its index), so a domain's index
// never pulls in the HTTP layer and nothing cycles back through http/.
import { auditRoutes } from "../audit/routes";
import { automationRoutes } from "../automation/routes";
import { caseRoutes } from "../cases/routes";
import { sessionRoutes, signinRoutes } from "../console/routes";
import { enforcementRoutes } from "../enforcement/routes";
import { installationRoutes } from "../installations/routes";
import { runRoutes } from "../workflows/runs-routes";
import { workflowRoutes } from "../workflows/routes";
import { openApiDocument } from "./openapi";
import type { AppEnv } from "./types";

const MAX_BODY_BYTES = 1_048_576;

export function createApp() {
  const app = new Hono<AppEnv>();
  app.use("/api/*", bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => { throw new AppError("request.too_large", "The request body exceeds 1 MiB.", { status: 413 }); },
  }));
  // After any write, chain the installation's new audit events (off the response path).
  app.use("/api/v1/*", async (c, next) => {
    await next();
    const actor = c.get("actor");
    if (c.req.method !== "GET" && actor) c.executionCtx.waitUntil(sealAuditChain(c.env, actor.installationId).catch(() => undefined));
  });
  app.get("/api/v1/openapi.json", (c) => c.json(openApiDocument()));
  app.route("/api/v1", installationRoutes);
  app.route("/api/v1", workflowRoutes);
  app.route("/api/v1", runRoutes);
  app.route("/api/v1", caseRoutes);
  app.route("/api/v1", enforcementRoutes);
  app.route("/api/v1", auditRoutes);
  app.route("/api/v1", automationRoutes);
  app.route("/api/v1", sessionRoutes);
  app.route("/", signinRoutes);
  app.get("/", (c) => c.json({ name: "Safest Tools", api: "/api/v1", openapi: "/api/v1/openapi.json" }));
  app.notFound((c) => c.json({ error: { code: "route.not_found", message: "No such route." } }, 404));
  app.onError((error, c) => {
    if (error instanceof AppError) {
      return c.json({ error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) } }, error.status as 400);
    }
    // Unexpected: log the code path, never request content or secrets.
    console.error("unhandled_error", error instanceof Error ? error.name : typeof error, error instanceof Error ? error.message.slice(0, 200) : "");
    return c.json({ error: { code: "internal_error", message: "Something went wrong; the request may be retried." } }, 500);
  });
  return app;
}
