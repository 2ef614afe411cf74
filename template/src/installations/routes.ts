// /api/v1/installations (ADMIN_TOKEN) and /api/v1/api-keys (installation admins).
import { routes } from "../http/route";
import { rewrapDataKeys } from "../cases";
import { exportInstallation } from "./backup";
import { importInstallation, reapplyInstallationErasures } from "./backup-restore";
import { createApiKey, createInstallation, listApiKeys, listInstallations, revokeApiKey } from "./service";

export const installationRoutes = routes()
  .op({ method: "post", path: "/installations", summary: "Create an installation (tenant) and its first API key, shown once", auth: "admin_token", body: "CreateInstallation", ok: 201 }, async (c, { body }) =>
    createInstallation(c.env, body),
  )
  .op(
    {
      method: "post",
      path: "/installations/import",
      routerPath: "/installations/:segment",
      summary: "Restore an installation from a backup into this deployment, which must not have it; verifies its audit chain and applies again the erasures made since the backup",
      auth: "admin_token",
      body: "ImportInstallation",
      ok: 201,
      errors: [409, 422, 503],
    },
    async (c, { body }) => importInstallation(c.env, body),
  )
  .op(
    {
      method: "post",
      path: "/installations/:id/reapply-erasures",
      summary: "Apply again the erasures recorded for an installation (its people's tombstones) to what the database holds now, after a database was brought back by D1 Time Travel or copied",
      auth: "admin_token",
      ok: 200,
      errors: [404],
    },
    async (c) => reapplyInstallationErasures(c.env, c.req.param("id")),
  )
  .op({ method: "get", path: "/installations", summary: "List installations", auth: "admin_token", ok: 200 }, async (c) => ({ items: await listInstallations(c.env) }))
  .op({ method: "post", path: "/admin/rewrap-data-keys", summary: "Rewrap data keys sealed under REPORT_MASTER_KEY_PREVIOUS with REPORT_MASTER_KEY", auth: "admin_token", ok: 200 }, async (c) => rewrapDataKeys(c.env))
  .op({ method: "post", path: "/installation/export", summary: "Export this installation (its D1 rows and R2 objects, sealed data still sealed) as one backup document", auth: ["admin"], ok: 200 }, async (c) =>
    exportInstallation(c.env, c.get("actor")),
  )
  .op({ method: "get", path: "/api-keys", summary: "List API keys (prefix and scopes, never the key)", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listApiKeys(c.env, c.get("actor")) }))
  .op({ method: "post", path: "/api-keys/:id/revoke", summary: "Revoke an API key", auth: ["admin"], ok: 200, errors: [404] }, async (c) => revokeApiKey(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "post", path: "/api-keys", summary: "Create an API key with scopes; the key is shown once", auth: ["admin"], body: "CreateApiKey", ok: 201 }, async (c, { body }) => createApiKey(c.env, c.get("actor"), body));
