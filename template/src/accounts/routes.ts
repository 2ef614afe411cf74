// /api/v1 accounts, the strike policy, sanctions on an account and bulk actions.
import { routes, withStatus } from "../http/route";
import { createBulkAction, getBulkAction, moveBulkAction } from "./bulk-actions";
import { accountKeyOf, accountReport, readAccount, sanctionView } from "./accounts";
import { sanctionAccount } from "./ladder";
import { getStrikePolicy, putStrikePolicy } from "./strike-policy";

export const accountRoutes = routes()
  .op(
    {
      method: "get",
      path: "/accounts/:id",
      summary: "An account by the product's id of its owner (a report's subject.ownerId): its reports (with a cursor), decisions, strikes and points, sanctions, current restrictions, open cases and appeals; the read is audited",
      // Whether a person was reported and sanctioned is personal data (assertAccountReader).
      auth: ["personal_data:read", "admin"],
      ok: 200,
      errors: [403, 404],
      query: { limit: { default: 50, max: 200 }, cursor: ["string", "string"] },
    },
    async (c, { query }) => readAccount(c.env, c.get("actor"), c.req.param("id"), query),
  )
  .op(
    {
      method: "post",
      path: "/accounts/:id/sanctions",
      summary:
        "Act on an account through an action type (a warning, a restriction, a suspension…), in the strike policy's authority mode; a suspension for manifestly illegal content without a prior warning is refused (409 account.art23_warning_required)",
      auth: ["review", "admin"],
      body: "SanctionAccount",
      ok: 201,
      errors: [404, 409],
    },
    async (c, { body }) => {
      const actor = c.get("actor");
      const accountKey = accountKeyOf(actor.installationId, c.req.param("id"));
      const row = await sanctionAccount(c.env, c.executionCtx as ExecutionContext, actor, { accountKey, actionType: body.actionType, kind: body.kind, manifestlyIllegal: body.manifestlyIllegal, reason: body.reason }, () =>
        accountReport(c.env.DB, actor.installationId, accountKey, body.reportId),
      );
      return sanctionView(row);
    },
  )
  .op({ method: "get", path: "/strike-policy", summary: "The strike policy: points per category, expiry, the ladder of thresholds and their action types", auth: ["review", "admin"], ok: 200, errors: [404] }, async (c) =>
    getStrikePolicy(c.env, c.get("actor")),
  )
  .op(
    {
      method: "put",
      path: "/strike-policy",
      summary: "Set the strike policy; each rung's action type must exist (its actions go out through a ladder workflow the policy publishes)",
      auth: ["admin"],
      body: "StrikePolicy",
      ok: 200,
      errors: [422],
    },
    async (c, { body }) => putStrikePolicy(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "post",
      path: "/bulk-actions",
      summary:
        "Act on up to 10,000 subjects (subjects: [{kind, id}], or search: the filters of GET /search) through an action type: dryRun answers the counts and writes nothing; otherwise the bulk action is recorded (approval_required in assisted mode) and its runs start a slice at a time, resumable, one audit event per subject",
      auth: ["admin"],
      body: "BulkAction",
      ok: 201,
      errors: [403, 404, 422],
    },
    async (c, { body }) => {
      const result = await createBulkAction(c.env, c.executionCtx as ExecutionContext, c.get("actor"), body);
      return "dryRun" in result ? withStatus(result, 200) : result;
    },
  )
  .op({ method: "get", path: "/bulk-actions/:id", summary: "A bulk action: its state and how many of its subjects' runs have started", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) =>
    getBulkAction(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "post",
      path: "/bulk-actions/:id/approve",
      summary:
        "Approve a bulk action waiting for approval (assisted): its runs start and act autonomously; the approver is a person (a console user or a reviewer's key, else 403 bulk_action.approver_not_person) other than its creator's person (403 bulk_action.self_approval)",
      auth: ["review", "admin"],
      ok: 200,
      errors: [403, 404, 409],
    },
    async (c) => moveBulkAction(c.env, c.executionCtx as ExecutionContext, c.get("actor"), c.req.param("id"), "approve"),
  )
  .op({ method: "post", path: "/bulk-actions/:id/pause", summary: "Pause a running bulk action (runs already started go on)", auth: ["admin"], ok: 200, errors: [404, 409] }, async (c) =>
    moveBulkAction(c.env, c.executionCtx as ExecutionContext, c.get("actor"), c.req.param("id"), "pause"),
  )
  .op({ method: "post", path: "/bulk-actions/:id/resume", summary: "Resume a paused bulk action", auth: ["admin"], ok: 200, errors: [404, 409] }, async (c) =>
    moveBulkAction(c.env, c.executionCtx as ExecutionContext, c.get("actor"), c.req.param("id"), "resume"),
  )
  .op({ method: "post", path: "/bulk-actions/:id/cancel", summary: "Cancel a bulk action: no further run starts (runs already started go on)", auth: ["admin"], ok: 200, errors: [404, 409] }, async (c) =>
    moveBulkAction(c.env, c.executionCtx as ExecutionContext, c.get("actor"), c.req.param("id"), "cancel"),
  );
