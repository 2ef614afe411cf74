// /api/v1/installations (ADMIN_TOKEN) and /api/v1/api-keys (installation admins).
import { Hono } from "hono";
import { requireAdminToken, requireScope, type Scope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { parseBody } from "../http/validate";
import { rewrapDataKeys } from "../cases";
import { createApiKey, createInstallation, listApiKeys, listInstallations, revokeApiKey } from "./service";

export const installationRoutes = new Hono<AppEnv>()
  .post("/installations", requireAdminToken, async (c) => {
    const body = await parseBody<{ name: string }>(c, schemas.CreateInstallation);
    return c.json(await createInstallation(c.env, body), 201);
  })
  .get("/installations", requireAdminToken, async (c) => c.json({ items: await listInstallations(c.env) }))
  .post("/admin/rewrap-data-keys", requireAdminToken, async (c) => c.json(await rewrapDataKeys(c.env)))
  .get("/api-keys", requireScope("admin"), async (c) => c.json({ items: await listApiKeys(c.env, c.get("actor")) }))
  .post("/api-keys/:id/revoke", requireScope("admin"), async (c) => c.json(await revokeApiKey(c.env, c.get("actor"), c.req.param("id"))))
  .post("/api-keys", requireScope("admin"), async (c) => {
    const body = await parseBody<{ name: string; scopes: Scope[] }>(c, schemas.CreateApiKey);
    return c.json(await createApiKey(c.env, c.get("actor"), body), 201);
  });
