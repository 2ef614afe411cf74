// /api/v1 webhook endpoints and deliveries, action types, action proposals, decisions.
import { notFound } from "../errors";
import { routes, withStatus } from "../http/route";
import { createActionType, listActionTypes } from "./action-types";
import { decideProposal, getProposal, listProposals } from "./actions";
import { getActionTypeGate, promoteActionType, putActionTypeGate, setActionTypeAutonomy } from "./action-type-promotion";
import { redressMessageOf } from "./affected-user";
import { getRedressSettings, putRedressSettings } from "./affected-user-settings";
import { getDecision, listDecisions, recordManualDecision, statementOfReasons } from "./decisions";
import { createEndpoint, listEndpoints, setEndpointState } from "./webhook-endpoints";
import { getDelivery, listDeliveries, resendDelivery } from "./delivery-operations";

const limit = { default: 50, max: 200 };

export const enforcementRoutes = routes()
  .op({ method: "post", path: "/webhook-endpoints", summary: "Create a webhook endpoint; its signing secret (whsec_…) is shown once", auth: ["admin"], body: "CreateWebhookEndpoint", ok: 201, errors: [422] }, async (c, { body }) =>
    createEndpoint(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/webhook-endpoints", summary: "List webhook endpoints (never their secrets)", auth: ["admin"], ok: 200 }, async (c) => ({ items: await listEndpoints(c.env, c.get("actor")) }))
  .op({ method: "post", path: "/webhook-endpoints/:id/disable", summary: "Stop delivering to an endpoint", auth: ["admin"], ok: 200, errors: [404] }, async (c) => setEndpointState(c.env, c.get("actor"), c.req.param("id"), "disabled"))
  .op({ method: "post", path: "/webhook-endpoints/:id/enable", summary: "Deliver to an endpoint again", auth: ["admin"], ok: 200, errors: [404] }, async (c) => setEndpointState(c.env, c.get("actor"), c.req.param("id"), "enabled"))
  .op(
    {
      method: "get",
      path: "/webhook-deliveries",
      summary: "Deliveries, newest first; ?state=pending|delivered|dead&endpointId=",
      auth: ["admin"],
      ok: 200,
      query: { limit, cursor: /^[A-Za-z0-9._:-]{1,200}$/u, strings: ["state", "endpointId"] },
    },
    async (c, { query }) =>
      listDeliveries(c.env, c.get("actor"), {
        limit: query.limit,
        ...(query.state ? { state: query.state } : {}),
        ...(query.endpointId ? { endpointId: query.endpointId } : {}),
        ...(query.cursor ? { before: query.cursor } : {}),
      }),
  )
  .op({ method: "get", path: "/webhook-deliveries/:id", summary: "A delivery with every attempt", auth: ["admin"], ok: 200, errors: [404] }, async (c) => getDelivery(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/webhook-deliveries/:id/resend",
      summary: "Send a finished delivery's payload again, as a new delivery (201); a pending one is put back on the queue as itself (202, requeued: true)",
      auth: ["admin"],
      ok: 201,
      errors: [404],
    },
    async (c) => {
      const result = await resendDelivery(c.env, c.get("actor"), c.req.param("id"));
      return withStatus(result, result.requeued ? 202 : 201);
    },
  )
  .op(
    { method: "post", path: "/action-types", summary: "Create an action type: key, whether it always needs approval, reversibility, its webhook endpoint", auth: ["admin"], body: "CreateActionType", ok: 201, errors: [404, 409] },
    async (c, { body }) => createActionType(c.env, c.get("actor"), body),
  )
  .op({ method: "get", path: "/action-types", summary: "List action types", auth: ["admin", "review"], ok: 200 }, async (c) => ({ items: await listActionTypes(c.env, c.get("actor")) }))
  .op(
    {
      method: "patch",
      path: "/action-types/:id",
      summary: "Lower an action type's autonomy to assisted (its actions wait for approval); raising it needs the gate (promote)",
      auth: ["admin"],
      body: "UpdateActionType",
      ok: 200,
      errors: [404, 409],
    },
    async (c, { body }) => setActionTypeAutonomy(c.env, c.get("actor"), c.req.param("id"), body.autonomy),
  )
  .op({ method: "get", path: "/action-types/:id/gate", summary: "The action type's promotion gate (set or default) and, while assisted, the figures against it", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    getActionTypeGate(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    { method: "put", path: "/action-types/:id/gate", summary: "Set the action type's promotion gate: decided proposals (M) and precision's lower bound (Y)", auth: ["admin"], body: "ActionTypeGate", ok: 200, errors: [404] },
    async (c, { body }) => putActionTypeGate(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    {
      method: "post",
      path: "/action-types/:id/promote",
      summary: "assisted → autonomous if the gate is met (409 promotion.gate_not_met with the figures otherwise); the evidence and its digest are audited",
      auth: ["admin"],
      body: "PromoteActionType",
      ok: 200,
      errors: [404, 409],
    },
    async (c, { body }) => promoteActionType(c.env, c.get("actor"), c.req.param("id"), body.to),
  )
  .op({ method: "get", path: "/action-proposals", summary: "Action proposals; ?state=approval_required for the approvals queue", auth: ["admin", "review"], ok: 200, query: { limit, strings: ["state"] } }, async (c, { query }) => ({
    items: await listProposals(c.env, c.get("actor"), query),
  }))
  .op({ method: "get", path: "/action-proposals/:id", summary: "Read an action proposal", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getProposal(c.env, c.get("actor"), c.req.param("id")))
  .op(
    {
      method: "post",
      path: "/action-proposals/:id/approve",
      summary: "Approve: the action is delivered; a second decision is a 409; whoever answered a review task of the run cannot approve (403 action_proposal.own_review)",
      auth: ["review"],
      body: "DecideProposal",
      ok: 200,
      errors: [403, 404, 409],
    },
    async (c, { body }) => decideProposal(c.env, c.get("actor"), c.req.param("id"), { approve: true, ...body }),
  )
  .op({ method: "post", path: "/action-proposals/:id/reject", summary: "Reject with a reason: the run leaves by its rejected port", auth: ["review"], body: "RejectProposal", ok: 200, errors: [404, 409] }, async (c, { body }) =>
    decideProposal(c.env, c.get("actor"), c.req.param("id"), { approve: false, ...body }),
  )
  .op(
    {
      method: "post",
      path: "/decisions",
      summary: "Record a decision on a report (outside any workflow): a person's (console user or reviewer's key) is not_automated, an automation key's fully automated",
      auth: ["review"],
      body: "RecordDecision",
      ok: 201,
      errors: [404, 422],
    },
    async (c, { body }) => recordManualDecision(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body),
  )
  .op(
    { method: "get", path: "/decisions", summary: "Decisions, newest first (restricts: false marks a decision not to act); ?reportId= for one report's", auth: ["admin", "review"], ok: 200, query: { limit, strings: ["reportId"] } },
    async (c, { query }) => ({
      items: await listDecisions(c.env, c.get("actor"), query),
    }),
  )
  .op({ method: "get", path: "/decisions/:id", summary: "Read a decision", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) => getDecision(c.env, c.get("actor"), c.req.param("id")))
  .op(
    { method: "get", path: "/decisions/:id/statement-of-reasons", summary: "The decision as an EU DSA Transparency Database statement of reasons; 409 for a decision not to act", auth: ["admin", "review"], ok: 200, errors: [404, 409] },
    async (c) => statementOfReasons(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "get",
      path: "/decisions/:id/affected-user-statement",
      summary: "What the affected user was sent about a restricting decision (DSA Art. 17): state, language, deliveries, complaint deadline; no personal data",
      auth: ["admin", "review"],
      ok: 200,
      errors: [404],
    },
    async (c) => {
      const actor = c.get("actor");
      const decision = await getDecision(c.env, actor, c.req.param("id"));
      const message = await redressMessageOf(c.env.DB, actor.installationId, "statement_of_reasons", decision.id);
      if (!message) throw notFound("affected_user_statement");
      return message;
    },
  )
  .op({ method: "get", path: "/redress-settings", summary: "Statements to affected users (on by default), out-of-court settlement bodies, the complaint address", auth: ["admin"], ok: 200 }, async (c) =>
    getRedressSettings(c.env, c.get("actor")),
  )
  .op(
    {
      method: "put",
      path: "/redress-settings",
      summary: "Set the redress settings: statements to affected users on or off, the out-of-court dispute settlement bodies, the complaint address (audited)",
      auth: ["admin"],
      body: "RedressSettings",
      ok: 200,
    },
    async (c, { body }) => putRedressSettings(c.env, c.get("actor"), body),
  );
