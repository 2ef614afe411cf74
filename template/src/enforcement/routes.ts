// /api/v1 webhook endpoints and deliveries, action types, action proposals, decisions.
import { Hono } from "hono";
import { requireScope } from "../http/auth";
import { schemas } from "../http/schemas";
import type { AppEnv } from "../http/types";
import { parseBody } from "../http/validate";
import { createActionType, decideProposal, getProposal, listActionTypes, listProposals } from "./actions";
import { getDecision, recordManualDecision, statementOfReasons } from "./decisions";
import { createEndpoint, getDelivery, listDeliveries, listEndpoints, resendDelivery, setEndpointState } from "./webhooks";

const limitOf = (value: string | undefined, fallback = 50) => Math.min(Math.max(Number(value ?? fallback) || fallback, 1), 200);

export const enforcementRoutes = new Hono<AppEnv>()
  .post("/webhook-endpoints", requireScope("admin"), async (c) => c.json(await createEndpoint(c.env, c.get("actor"), await parseBody(c, schemas.CreateWebhookEndpoint)), 201))
  .get("/webhook-endpoints", requireScope("admin"), async (c) => c.json({ items: await listEndpoints(c.env, c.get("actor")) }))
  .post("/webhook-endpoints/:id/disable", requireScope("admin"), async (c) => c.json(await setEndpointState(c.env, c.get("actor"), c.req.param("id"), "disabled")))
  .post("/webhook-endpoints/:id/enable", requireScope("admin"), async (c) => c.json(await setEndpointState(c.env, c.get("actor"), c.req.param("id"), "enabled")))
  .get("/webhook-deliveries", requireScope("admin"), async (c) => c.json(await listDeliveries(c.env, c.get("actor"), {
    limit: limitOf(c.req.query("limit")),
    ...(c.req.query("state") ? { state: c.req.query("state")! } : {}),
    ...(c.req.query("endpointId") ? { endpointId: c.req.query("endpointId")! } : {}),
    ...(c.req.query("cursor") ? { before: c.req.query("cursor")! } : {}),
  })))
  .get("/webhook-deliveries/:id", requireScope("admin"), async (c) => c.json(await getDelivery(c.env, c.get("actor"), c.req.param("id"))))
  .post("/webhook-deliveries/:id/resend", requireScope("admin"), async (c) => c.json(await resendDelivery(c.env, c.get("actor"), c.req.param("id")), 201))
  .post("/action-types", requireScope("admin"), async (c) => c.json(await createActionType(c.env, c.get("actor"), await parseBody(c, schemas.CreateActionType)), 201))
  .get("/action-types", requireScope("admin", "review"), async (c) => c.json({ items: await listActionTypes(c.env, c.get("actor")) }))
  .get("/action-proposals", requireScope("admin", "review"), async (c) => c.json({
    items: await listProposals(c.env, c.get("actor"), { limit: limitOf(c.req.query("limit")), ...(c.req.query("state") ? { state: c.req.query("state")! } : {}) }),
  }))
  .get("/action-proposals/:id", requireScope("admin", "review"), async (c) => c.json(await getProposal(c.env, c.get("actor"), c.req.param("id"))))
  .post("/action-proposals/:id/approve", requireScope("review"), async (c) => {
    const body = await parseBody<{ reason?: string; approver?: string }>(c, schemas.DecideProposal);
    return c.json(await decideProposal(c.env, c.get("actor"), c.req.param("id"), { approve: true, ...body }));
  })
  .post("/action-proposals/:id/reject", requireScope("review"), async (c) => {
    const body = await parseBody<{ reason?: string; approver?: string }>(c, schemas.RejectProposal);
    return c.json(await decideProposal(c.env, c.get("actor"), c.req.param("id"), { approve: false, ...body }));
  })
  .post("/decisions", requireScope("review"), async (c) => c.json(await recordManualDecision(c.env, c.get("actor"), await parseBody(c, schemas.RecordDecision)), 201))
  .get("/decisions/:id", requireScope("admin", "review"), async (c) => c.json(await getDecision(c.env, c.get("actor"), c.req.param("id"))))
  .get("/decisions/:id/statement-of-reasons", requireScope("admin", "review"), async (c) => c.json(await statementOfReasons(c.env, c.get("actor"), c.req.param("id"))));
