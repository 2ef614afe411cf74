// /api/v1 alert settings (where alert.* webhooks go) and the alerts raised.
import { routes } from "../http/route";
import { ALERT_KINDS, getAlertSettings, listAlerts, putAlertSettings } from "./alerts";

export const operationsRoutes = routes()
  .op({ method: "get", path: "/alerts/settings", summary: "Where alerts (alert.* webhooks) go, which kinds, the repair spike threshold", auth: ["admin"], ok: 200 }, async (c) => getAlertSettings(c.env, c.get("actor")))
  .op(
    {
      method: "put",
      path: "/alerts/settings",
      summary: "Send alerts to a webhook endpoint of this installation: SLA breaches, dead deliveries, repair_required spikes, a failed full audit verification",
      auth: ["admin"],
      body: "AlertSettings",
      ok: 200,
      errors: [404],
    },
    async (c, { body }) => putAlertSettings(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "get",
      path: "/alerts",
      summary: "Alerts raised, newest first, with their delivery's state; ?kind=",
      auth: ["admin"],
      ok: 200,
      query: { limit: { default: 50, max: 200 }, cursor: /^alr_[A-Za-z0-9_-]{1,100}$/u, enums: { kind: ALERT_KINDS } },
    },
    async (c, { query }) => listAlerts(c.env, c.get("actor"), { limit: query.limit, ...(query.kind ? { kind: query.kind } : {}), ...(query.cursor ? { before: query.cursor } : {}) }),
  );
