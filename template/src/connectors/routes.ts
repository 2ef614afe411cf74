// /api/v1/connectors: an installation's connectors (admin), and each Mastodon connector's intake
// URL, which carries no bearer key (Mastodon cannot send one): its HMAC signature authenticates.
import { routes, withStatus } from "../http/route";
import { webhookPath } from "./connector-rows";
import { createConnector, deleteConnector, getConnector, listConnectors, updateConnector } from "./connectors";
import { takeMastodonWebhook } from "./mastodon-intake";

/** The full URL to paste into Mastodon (Administration → Webhooks), on the host that answered. */
const withUrl = <T extends { id: string }>(origin: string, connector: T) => ({ ...connector, webhookUrl: `${origin}${webhookPath(connector.id)}` });

export const connectorRoutes = routes()
  .op(
    {
      method: "post",
      path: "/connectors",
      summary: "Create a connector (kind mastodon): its intake URL and webhook secret (shown once) for Mastodon's admin webhooks; its admin token is sealed, never returned",
      auth: ["admin"],
      body: "CreateConnector",
      ok: 201,
      errors: [409, 422],
    },
    async (c, { body }) => withUrl(new URL(c.req.url).origin, await createConnector(c.env, c.get("actor"), body)),
  )
  .op({ method: "get", path: "/connectors", summary: "List connectors (never their token or secret)", auth: ["admin"], ok: 200 }, async (c) => ({
    items: (await listConnectors(c.env, c.get("actor"))).map((connector) => withUrl(new URL(c.req.url).origin, connector)),
  }))
  .op({ method: "get", path: "/connectors/:id", summary: "Read a connector", auth: ["admin"], ok: 200, errors: [404] }, async (c) => withUrl(new URL(c.req.url).origin, await getConnector(c.env, c.get("actor"), c.req.param("id"))))
  .op(
    {
      method: "patch",
      path: "/connectors/:id",
      summary: "Change a connector: a new access token or webhook secret (a new secret is shown once), its category, rule or action mappings",
      auth: ["admin"],
      body: "UpdateConnector",
      ok: 200,
      errors: [404, 422],
    },
    async (c, { body }) => withUrl(new URL(c.req.url).origin, await updateConnector(c.env, c.get("actor"), c.req.param("id"), body)),
  )
  .op({ method: "delete", path: "/connectors/:id", summary: "Delete a connector: its intake URL answers 404, its pending deliveries end dead; its reports stay", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    deleteConnector(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "post",
      path: "/connectors/:id/mastodon/webhook",
      summary: "Mastodon's admin webhook (report.created becomes a report; other events are acknowledged): X-Hub-Signature sha256=<hex HMAC of the body>, else 401 connector.bad_signature",
      auth: "none",
      ok: 201,
      errors: [404, 422],
    },
    async (c) => {
      const outcome = await takeMastodonWebhook(c.env, c.executionCtx as ExecutionContext, { connectorId: c.req.param("id"), body: await c.req.arrayBuffer(), signature: c.req.header("x-hub-signature") });
      // The connector's installation is the actor: its audit events are chained after the write, its id is in the request log.
      c.set("actor", outcome.actor);
      return withStatus(outcome.body, outcome.status);
    },
  );
