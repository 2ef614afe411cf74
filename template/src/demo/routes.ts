// /demo: the demo model (/demo/model/v1/chat/completions) and the demo product (/demo/product…)
// that `npm start` serves from the same `wrangler dev`. Mounted only when DEMO_PEERS is "on"
// (start.mjs passes it with --var); production's wrangler.jsonc and the tests leave it unset, and
// every /demo path is then the ordinary 404. Not part of /api/v1 (no OpenAPI entry): they play the
// peers a real installation would have — a model provider and a product.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "../errors";
import type { AppEnv } from "../http/types";
import { demoCompletion } from "./model";
import { productPage } from "./page";
import { assertAdmin, hasSecret, listReceived, receive, registerSecret } from "./product";

const MAX_DELIVERY_CHARS = 1_048_576;

/**
 * Whether the demo peers are mounted in this environment: DEMO_PEERS "on" AND the local-development
 * flag that deployed Workers never get (ALLOW_LOCAL_EGRESS, see lib/egress.ts), so a DEMO_PEERS
 * set on Cloudflare by mistake still mounts nothing.
 */
export function demoPeersOn(env: unknown): boolean {
  const vars = env as { DEMO_PEERS?: unknown; ALLOW_LOCAL_EGRESS?: unknown } | null;
  return vars?.DEMO_PEERS === "on" && String(vars?.ALLOW_LOCAL_EGRESS) === "true";
}

export const demoRoutes = new Hono<AppEnv>()
  .use("*", async (c, next) => {
    if (!demoPeersOn(c.env)) return c.json({ error: { code: "route.not_found", message: "No such route." } }, 404);
    await next();
  })
  .use(
    "*",
    bodyLimit({
      maxSize: MAX_DELIVERY_CHARS,
      onError: () => {
        throw new AppError("demo_product.too_large", "The demo peers take bodies of at most 1 MiB.", { status: 413 });
      },
    }),
  )
  .post("/model/v1/chat/completions", async (c) => c.json(demoCompletion((await c.req.json().catch(() => ({}))) as Record<string, unknown>)))
  .get("/model", (c) => c.json({ name: "Safest Tools demo model", demo: true, openaiCompatibleBaseUrl: `${new URL(c.req.url).origin}/demo/model/v1`, note: "Deterministic: a word list, not a classifier. For the demo desk only." }))
  .post("/product/webhooks/:hook", async (c) => {
    const body = await c.req.text();
    if (body.length > MAX_DELIVERY_CHARS) throw new AppError("demo_product.too_large", "The demo product takes deliveries of at most 1 MiB.", { status: 413 });
    const { status, received } = await receive(c.env, c.req.param("hook"), body, Object.fromEntries(c.req.raw.headers));
    return c.json({ received: received.verified, problem: received.problem }, status);
  })
  .put("/product/webhooks/:hook/secret", async (c) => {
    assertAdmin(c.env, c.req.header("authorization"));
    const body = (await c.req.json().catch(() => ({}))) as { secret?: unknown };
    return c.json(await registerSecret(c.env, c.req.param("hook"), body.secret));
  })
  .get("/product/webhooks/:hook/secret", async (c) => {
    assertAdmin(c.env, c.req.header("authorization"));
    return c.json({ hook: c.req.param("hook"), registered: await hasSecret(c.env, c.req.param("hook")) });
  })
  .get("/product/received", async (c) => c.json({ demo: true, items: await listReceived(c.env) }))
  .get("/product", async (c) => c.html(productPage(await listReceived(c.env))));
