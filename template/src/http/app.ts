// The HTTP application: one Hono sub-router per resource under /api/v1, one error renderer.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { routePath } from "hono/route";
import { AppError, errorCode } from "../errors";
import { assertAuditKeyConfigured, sealAuditChainAfterWrite } from "../audit";
import { signinRoutes } from "../console/routes";
import { demoRoutes } from "../demo/routes";
import { MAX_IMAGE_BYTES } from "../media";
import { apiRoutes } from "./api";
import { openApiRoutes } from "./openapi";
import type { AppEnv } from "./types";

const MAX_BODY_BYTES = 1_048_576;
const MAX_BACKTEST_BYTES = 8 * 1_048_576;
const MAX_IMPORT_BYTES = 64 * 1_048_576;

export function createApp() {
  const app = new Hono<AppEnv>();
  // One structured JSON line per request, searchable in Workers Logs: method, route (the declared
  // path, never the URL with its ids or query), status, ms, installation and request ids. Never
  // content, headers or secrets.
  app.use("*", async (c, next) => {
    const started = Date.now();
    const requestId = requestIdOf(c.req.header("cf-ray"));
    c.set("requestId", requestId);
    await next();
    try {
      c.res.headers.set("x-request-id", requestId);
    } catch {
      // An immutable response (a static asset passed through): the log line still has the id.
    }
    const status = c.res.status;
    const line = { event: "http.request", method: c.req.method, route: c.get("route") ?? routePath(c, -1), status, ms: Date.now() - started, installationId: c.get("actor")?.installationId ?? null, requestId };
    // REQUEST_LOG "off" silences the line (the tests do: their many requests would flood the output).
    if ((c.env as { REQUEST_LOG?: unknown }).REQUEST_LOG !== "off") (status >= 500 ? console.error : console.log)(JSON.stringify(line));
  });
  // No audit key, no service: the trail would be unkeyed (audit/keys.ts).
  app.use("/api/*", async (c, next) => {
    assertAuditKeyConfigured(c.env);
    await next();
  });
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
  // A hash list imported as CSV: about 100,000 hashes.
  const csvLimit = bodyLimit({
    maxSize: MAX_BACKTEST_BYTES,
    onError: () => {
      throw new AppError("request.too_large", "The request body exceeds 8 MiB; split the CSV into several imports.", { status: 413 });
    },
  });
  // A backtest by ids names up to 100,000 reports.
  const backtestLimit = bodyLimit({
    maxSize: MAX_BACKTEST_BYTES,
    onError: () => {
      throw new AppError("request.too_large", "The request body exceeds 8 MiB; select the reports by a time range (from, to) instead of ids.", { status: 413 });
    },
  });
  // An image to hash is the body itself.
  const imageLimit = bodyLimit({
    maxSize: MAX_IMAGE_BYTES,
    onError: () => {
      throw new AppError("media.too_large", `An image may be at most ${MAX_IMAGE_BYTES} bytes; downscale or re-encode it first.`, { status: 413 });
    },
  });
  const limitOf = (path: string) =>
    path === "/api/v1/installations/import"
      ? importLimit
      : path === "/api/v1/media/hashes"
        ? imageLimit
        : /^\/api\/v1\/hash-banks\/[^/]+\/import$/u.test(path)
          ? csvLimit
          : /^\/api\/v1\/workflow-versions\/[^/]+\/backtests$/u.test(path)
            ? backtestLimit
            : apiLimit;
  app.use("/api/*", (c, next) => limitOf(c.req.path)(c, next));
  // After any write, chain the installation's new audit events (off the response path).
  app.use("/api/v1/*", async (c, next) => {
    await next();
    const actor = c.get("actor");
    if (c.req.method !== "GET" && actor && !c.get("writesNothing")) c.executionCtx.waitUntil(sealAuditChainAfterWrite(c.env, actor.installationId).catch(() => undefined));
  });
  for (const api of [...apiRoutes, openApiRoutes]) app.route("/api/v1", api.router);
  app.route("/", signinRoutes);
  // The demo model and product of `npm start` (a 404 unless DEMO_PEERS is "on").
  app.route("/demo", demoRoutes);
  app.get("/", (c) => c.json({ name: "Safest Tools", api: "/api/v1", openapi: "/api/v1/openapi.json" }));
  app.notFound((c) => c.json({ error: { code: "route.not_found", message: "No such route." } }, 404));
  app.onError((error, c) => {
    if (error instanceof AppError) {
      return c.json({ error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) } }, error.status as 400);
    }
    // Unexpected: log the code path, never request content or secrets.
    console.error(
      JSON.stringify({ event: "http.unhandled_error", requestId: c.get("requestId") ?? null, installationId: c.get("actor")?.installationId ?? null, name: error instanceof Error ? error.name : typeof error, code: errorCode(error) }),
    );
    return c.json({ error: { code: "internal.error", message: "Something went wrong; the request may be retried." } }, 500);
  });
  return app;
}

/** The request's id: its `cf-ray` when Cloudflare gave one (a ray id is hex and a colo), else a random one. */
function requestIdOf(ray: string | undefined): string {
  return ray && /^[A-Za-z0-9-]{1,64}$/u.test(ray) ? ray : `req_${crypto.randomUUID().replace(/-/gu, "").slice(0, 20)}`;
}
