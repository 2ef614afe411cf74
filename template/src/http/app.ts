// The HTTP application: one Hono sub-router per resource under /api/v1, one error renderer.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "../errors";
import { sealAuditChainAfterWrite } from "../audit";
import { signinRoutes } from "../console/routes";
import { apiRoutes } from "./api";
import { openApiRoutes } from "./openapi";
import type { AppEnv } from "./types";

const MAX_BODY_BYTES = 1_048_576;
const MAX_IMPORT_BYTES = 64 * 1_048_576;

export function createApp() {
  const app = new Hono<AppEnv>();
  // A backup being restored is one document of the whole installation (ADMIN_TOKEN only).
  const importLimit = bodyLimit({
    maxSize: MAX_IMPORT_BYTES,
    onError: () => {
      throw new AppError("request.too_large", "The backup exceeds 64 MiB; restore it with the wrangler d1 and r2 tools instead.", { status: 413 });
    },
  });
  const apiLimit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new AppError("request.too_large", "The request body exceeds 1 MiB.", { status: 413 });
    },
  });
  app.use("/api/*", (c, next) => (c.req.path === "/api/v1/installations/import" ? importLimit(c, next) : apiLimit(c, next)));
  // After any write, chain the installation's new audit events (off the response path).
  app.use("/api/v1/*", async (c, next) => {
    await next();
    const actor = c.get("actor");
    if (c.req.method !== "GET" && actor) c.executionCtx.waitUntil(sealAuditChainAfterWrite(c.env, actor.installationId).catch(() => undefined));
  });
  for (const api of [...apiRoutes, openApiRoutes]) app.route("/api/v1", api.router);
  app.route("/", signinRoutes);
  app.get("/", (c) => c.json({ name: "Safest Tools", api: "/api/v1", openapi: "/api/v1/openapi.json" }));
  app.notFound((c) => c.json({ error: { code: "route.not_found", message: "No such route." } }, 404));
  app.onError((error, c) => {
    if (error instanceof AppError) {
      return c.json({ error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) } }, error.status as 400);
    }
    // Unexpected: log the code path, never request content or secrets.
    console.error("unhandled_error", error instanceof Error ? error.name : typeof error, error instanceof Error ? error.message.slice(0, 200) : "");
    return c.json({ error: { code: "internal.error", message: "Something went wrong; the request may be retried." } }, 500);
  });
  return app;
}
