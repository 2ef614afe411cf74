// /api/v1 preservation holds: place one on a case, list a case's holds, release one early (admin, audited).
import { routes } from "../http/route";
import { listHolds, placeHold, releaseHold } from "./retention/preservation-holds";

export const preservationRoutes = routes()
  .op(
    {
      method: "post",
      path: "/cases/:id/preservation-holds",
      summary: "Hold a case's reports' contents against retention and erasure requests, for `days` (default 365, the CyberTipline preservation period); audited",
      auth: ["admin"],
      body: "PlacePreservationHold",
      ok: 201,
      errors: [404],
    },
    async (c, { body }) => placeHold(c.env, c.get("actor"), c.req.param("id"), body),
  )
  .op({ method: "get", path: "/cases/:id/preservation-holds", summary: "A case's preservation holds, active or ended", auth: ["admin"], ok: 200, errors: [404] }, async (c) => listHolds(c.env, c.get("actor"), c.req.param("id")))
  .op({ method: "post", path: "/preservation-holds/:id/release", summary: "Release a hold before it ends, with a reason (audited)", auth: ["admin"], body: "ReleasePreservationHold", ok: 200, errors: [404, 409] }, async (c, { body }) =>
    releaseHold(c.env, c.get("actor"), c.req.param("id"), body.reason),
  );
