// /api/v1/metrics: the installation's rolled-up metrics over a range (the console's dashboard).
import { routes } from "../http/route";
import { METRIC_STEPS, parseTime, queryMetrics } from "./query";
import { rollupRange } from "./rollup";

export const metricRoutes = routes()
  .op(
    {
      method: "get",
      path: "/metrics",
      summary: "Rolled-up metrics per hour or day: ?from=&to= (ISO 8601; default the last 24 hours, or 30 days with step=day), ?step=hour|day, ?metrics=a,b (default all)",
      auth: ["admin", "review"],
      ok: 200,
      query: { enums: { step: METRIC_STEPS }, strings: ["from", "to", "metrics"] },
    },
    async (c, { query }) => queryMetrics(c.env.DB, c.get("actor").installationId, query),
  )
  .op(
    {
      method: "post",
      path: "/metrics/rollup",
      summary: "Recompute the rollups of some hours now (at most 48; default the last 24 up to the current hour, whose figures so far are written); the schedule still rolls each hour once it has ended",
      auth: ["admin"],
      body: "RollupMetrics",
      ok: 200,
    },
    async (c, { body }) => rollupRange(c.env.DB, c.get("actor").installationId, { from: parseTime(body.from, "from"), to: parseTime(body.to, "to") }),
  );
