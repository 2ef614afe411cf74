// /api/v1/transparency-database: the DSA Transparency Database settings (token never returned),
// each restricting decision's submission, re-submission after a fix, and a submission pass now.
import { routes } from "../http/route";
import { getSubmission, getTdbSettings, listSubmissions, putTdbSettings, resubmit, TDB_STATES } from "./transparency-db";
import { submitNow } from "./transparency-db-submit";

export const transparencyDbRoutes = routes()
  .op(
    { method: "get", path: "/transparency-database/settings", summary: "Where statements of reasons go (base URL, preset), whether a token is set (never the token), on/off, the last call and the counts by state", auth: ["admin"], ok: 200 },
    async (c) => getTdbSettings(c.env, c.get("actor")),
  )
  .op(
    {
      method: "put",
      path: "/transparency-database/settings",
      summary: "Set the Transparency Database: preset (production, sandbox) or baseUrl, the bearer token (sealed; omitted keeps the current one) and enabled",
      auth: ["admin"],
      body: "TransparencyDatabaseSettings",
      ok: 200,
      errors: [422],
    },
    async (c, { body }) => putTdbSettings(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "get",
      path: "/transparency-database/submissions",
      summary: "Submissions of statements of reasons, newest first; ?state=pending|submitted|rejected",
      auth: ["admin", "review"],
      ok: 200,
      query: { limit: { default: 50, max: 200 }, cursor: /^[A-Za-z0-9._:-]{1,200}$/u, enums: { state: TDB_STATES } },
    },
    async (c, { query }) => listSubmissions(c.env, c.get("actor"), { limit: query.limit, ...(query.state ? { state: query.state } : {}), before: query.cursor }),
  )
  .op({ method: "get", path: "/transparency-database/submissions/:decisionId", summary: "A decision's submission: state, the database's uuid and permalink, or the errors", auth: ["admin", "review"], ok: 200, errors: [404] }, async (c) =>
    getSubmission(c.env, c.get("actor"), c.req.param("decisionId")),
  )
  .op(
    {
      method: "post",
      path: "/transparency-database/submissions/:decisionId/resubmit",
      summary: "A rejected statement back to pending after a fix, optionally with redacted decisionFacts / explanation (checked for personal data)",
      auth: ["admin"],
      body: "ResubmitStatement",
      ok: 200,
      errors: [404, 409, 422],
    },
    async (c, { body }) => resubmit(c.env, c.get("actor"), c.req.param("decisionId"), body),
  )
  .op({ method: "post", path: "/transparency-database/submit", summary: "Submit this installation's pending statements now (up to 5 batches of 100; a backoff still holds)", auth: ["admin"], ok: 200, errors: [409] }, async (c) =>
    submitNow(c.env, c.get("actor")),
  );
