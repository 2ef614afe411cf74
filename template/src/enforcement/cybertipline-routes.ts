// /api/v1/cybertipline: the installation's ESP registration with NCMEC (credentials never returned),
// reports confirmed by a person and sent to the CyberTipline, their progress, an admin's resume,
// an admin's reconciliation of a /submit whose outcome is unknown, an admin's retraction of a report
// opened and not finished, an admin's check of the registration against NCMEC, and an admin's
// audited read of a preserved file.
import { routes } from "../http/route";
import {
  CYBERTIPLINE_SUBMISSION_STATES,
  checkCyberTiplineSettings,
  confirmCyberTiplineReport,
  getCyberTiplineReport,
  getCyberTiplineSettings,
  listCyberTiplineReports,
  putCyberTiplineSettings,
  readPreservedFile,
  reconcileCyberTiplineReport,
  resumeCyberTiplineReport,
  retractCyberTiplineReport,
} from "./cybertipline";

export const cybertiplineRoutes = routes()
  .op({ method: "get", path: "/cybertipline/settings", summary: "Where CyberTipline reports go (base URL, preset), whether credentials are set (never them), on/off", auth: ["admin"], ok: 200 }, async (c) =>
    getCyberTiplineSettings(c.env, c.get("actor")),
  )
  .op(
    {
      method: "put",
      path: "/cybertipline/settings",
      summary: "Set the ESP registration: preset (production, test) or baseUrl, the username and password NCMEC issued and the reporting person (all sealed, never returned), espService, enabled",
      auth: ["admin"],
      body: "CyberTiplineSettings",
      ok: 200,
      errors: [422],
    },
    async (c, { body }) => putCyberTiplineSettings(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "post",
      path: "/cybertipline/settings/check",
      summary: "Check the registration against NCMEC (GET /status): the service answers and accepts the credentials; audited",
      auth: ["admin"],
      ok: 200,
      errors: [409, 422, 502, 503],
    },
    async (c) => checkCyberTiplineSettings(c.env, c.get("actor")),
  )
  .op(
    {
      method: "post",
      path: "/cybertipline/reports",
      summary:
        "Confirm a report as apparent child sexual exploitation and send it to NCMEC's CyberTipline with its files (evidence[].url, checked against their sha256) and their SHA-256 and PDQ hashes; the caller must be a person (console user or reviewer key). The files and the report are sealed and the case held for one year",
      auth: ["admin", "review"],
      body: "ConfirmCyberTiplineReport",
      ok: 201,
      errors: [404, 409, 422],
    },
    async (c, { body }) => confirmCyberTiplineReport(c.env, c.get("actor"), body),
  )
  .op(
    {
      method: "get",
      path: "/cybertipline/reports",
      summary: "CyberTipline submissions, newest first; ?state=pending|opened|finished|rejected",
      auth: ["admin"],
      ok: 200,
      query: { limit: { default: 50, max: 200 }, enums: { state: CYBERTIPLINE_SUBMISSION_STATES } },
    },
    async (c, { query }) => listCyberTiplineReports(c.env, c.get("actor"), { limit: query.limit, ...(query.state ? { state: query.state } : {}) }),
  )
  .op({ method: "get", path: "/cybertipline/reports/:id", summary: "A submission's progress: NCMEC's report id, each file's id, the last error", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    getCyberTiplineReport(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    { method: "post", path: "/cybertipline/reports/:id/resume", summary: "Resume a submission that stopped, from the step it stopped at (never a second report); audited", auth: ["admin"], ok: 200, errors: [404, 409, 422, 503] },
    async (c) => resumeCyberTiplineReport(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "post",
      path: "/cybertipline/reports/:id/reconcile",
      summary: "Settle a submission whose /submit outcome is unknown: NCMEC's report id found in its records, or resend when NCMEC holds none; audited",
      auth: ["admin"],
      body: "ReconcileCyberTiplineReport",
      ok: 200,
      errors: [404, 409, 422],
    },
    async (c, { body }) => reconcileCyberTiplineReport(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    {
      method: "post",
      path: "/cybertipline/reports/:id/retract",
      summary: "Cancel at NCMEC (/retract) a report opened and not finished, with a reason; the submission becomes rejected (the report may be confirmed again), its files and hold stay; audited",
      auth: ["admin"],
      body: "RetractCyberTiplineReport",
      ok: 200,
      errors: [404, 409, 422, 502, 503],
    },
    async (c, { body }) => retractCyberTiplineReport(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op(
    {
      method: "get",
      path: "/cybertipline/reports/:id/file",
      summary: "A preserved file of a submission (?index=0 for its first; the sealed copy, opened); the read is audited",
      auth: ["admin"],
      readOpens: false,
      query: { strings: ["index"] },
      ok: 200,
      errors: [404, 410],
      produces: "application/octet-stream",
    },
    async (c, { query }) => readPreservedFile(c.env, c.get("actor"), c.req.param("id"), /^\d{1,3}$/u.test(query.index ?? "0") ? Number(query.index ?? "0") : -1),
  );
