// /api/v1/metrics: the installation's rolled-up metrics over a range (the console's dashboard);
// /api/v1/transparency-report: the DSA transparency report for a period (JSON or CSV).
import { routes } from "../http/route";
import { METRIC_STEPS, parseTime, queryMetrics } from "./query";
import { rollupRange } from "./rollup";
import { transparencyReport } from "./transparency";
import { transparencyReportCsv } from "./transparency-csv";

export const TRANSPARENCY_FORMATS = ["json", "csv"] as const;
const TRANSPARENCY_SUMMARY =
  "The DSA transparency report (Implementing Regulation (EU) 2024/2835, quantitative template) for a period: ?from= (included) &to= (a date is included whole; a time is excluded); default the current year so far. Figures the platform cannot know are listed as { known: false, reason }";

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
  )
  .op(
    {
      method: "get",
      path: "/transparency-report",
      summary: `${TRANSPARENCY_SUMMARY}. ?format=csv answers the CSV (as /transparency-report.csv)`,
      auth: ["admin"],
      ok: 200,
      query: { enums: { format: TRANSPARENCY_FORMATS }, strings: ["from", "to"] },
    },
    async (c, { query }) => (query.format === "csv" ? transparencyReportCsv(c.env, c.get("actor"), query) : transparencyReport(c.env, c.get("actor"), query)),
  )
  .op(
    {
      method: "get",
      path: "/transparency-report.csv",
      summary: `${TRANSPARENCY_SUMMARY}. As CSV: one row per figure (template section, article, section, figure, value, note)`,
      auth: ["admin"],
      ok: 200,
      query: { strings: ["from", "to"] },
      produces: "text/csv",
    },
    async (c, { query }) => transparencyReportCsv(c.env, c.get("actor"), query),
  );
