// GET /metrics: the rolled-up series of an installation over a range, per hour or per day.
// Per hour from metric_rollups, per day from metric_rollups_daily (counters summed over the day,
// gauges at its last rolled hour, histogram buckets summed); histograms answer count and p50/p90
// per step and over the range (the upper bound of the bucket holding the quantile).
import { AppError } from "../errors";
import { bucketQuantile, HOUR_MS, METRIC_NAMES, METRICS, type MetricName } from "./rollup";

export const METRIC_STEPS = ["hour", "day"] as const;
export type MetricStep = (typeof METRIC_STEPS)[number];
const STEP_MS: Record<MetricStep, number> = { hour: HOUR_MS, day: 24 * HOUR_MS };
/** The most steps one request may ask for (93 days hourly, about 400 days daily). */
export const MAX_POINTS = 2232;

export type Dims = Record<string, string | null>;
export interface Series {
  metric: MetricName;
  kind: "counter" | "gauge";
  dims: Dims;
  /** One value per step (aligned with `steps`); a gauge is null where no hour of the step is rolled up. */
  points: Array<number | null>;
  /** Counters: the sum over the range; gauges: the newest value. */
  total: number | null;
}
export interface Quantiles {
  count: number;
  p50: number | null;
  p90: number | null;
}
export interface Histogram {
  metric: MetricName;
  dims: Dims;
  points: Quantiles[];
  total: Quantiles;
}

export interface MetricsQuery {
  from?: string | undefined;
  to?: string | undefined;
  step?: MetricStep | undefined;
  metrics?: string | undefined;
}

export function parseTime(text: string | undefined, parameter: string): number | null {
  if (text === undefined) return null;
  const ms = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?$/u.test(text) ? Date.parse(text) : Number.NaN;
  if (!Number.isFinite(ms)) throw new AppError("metrics.invalid_time", `${parameter} must be an ISO 8601 date or time (2026-01-31 or 2026-01-31T08:00:00Z).`, { status: 400, details: { parameter } });
  return ms;
}

/** The range, aligned to whole steps: `from` down, `to` up. Defaults: the last 24 hours (hour) or 30 days (day), up to the current step. */
export function metricsRange(query: MetricsQuery, now: Date) {
  const step = query.step ?? "hour";
  const size = STEP_MS[step];
  const toRaw = parseTime(query.to, "to") ?? now.getTime();
  const to = Math.ceil(toRaw / size) * size + (toRaw % size === 0 && query.to === undefined ? size : 0);
  const fromRaw = parseTime(query.from, "from") ?? to - (step === "hour" ? 24 : 30) * size;
  const from = Math.floor(fromRaw / size) * size;
  if (from >= to) throw new AppError("metrics.invalid_range", "from must be before to.", { status: 400, details: { parameter: "from" } });
  if ((to - from) / size > MAX_POINTS) throw new AppError("metrics.range_too_large", `At most ${MAX_POINTS} steps per request: use step=day, or a shorter range.`, { status: 400, details: { parameter: "from" } });
  const names =
    query.metrics === undefined
      ? METRIC_NAMES
      : query.metrics
          .split(",")
          .map((name) => name.trim())
          .filter(Boolean);
  for (const name of names) {
    if (!(name in METRICS))
      throw new AppError("metrics.unknown_metric", `Unknown metric ${JSON.stringify(name.slice(0, 60))}; known metrics: ${METRIC_NAMES.join(", ")}.`, { status: 400, details: { parameter: "metrics", allowed: METRIC_NAMES } });
  }
  return { step, size, from, to, names: names as MetricName[] };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * ?1 installation, ?2 JSON array of metric names, ?3 from, ?4 to, ?5 length of the step's prefix of
 * the time (13 for hours, 10 for days). Each row of either table is one step of one series (and
 * histogram bucket), so the steps are read as they are, packed per series as `step=value,…`: a
 * month of hours is a few hundred rows to the Worker, not a hundred thousand. Seeks the primary key
 * per metric.
 */
export const HOURLY_SQL = `SELECT metric, dims, bucket, group_concat(substr(hour, 1, ?5) || '=' || value) AS points FROM metric_rollups
  WHERE installation_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND hour >= ?3 AND hour < ?4
  GROUP BY metric, dims, bucket`;
/** Per day: metric_rollups_daily, which the rollup keeps (counters summed, gauges at the day's last hour). */
export const DAILY_SQL = `SELECT metric, dims, bucket, group_concat(substr(day, 1, ?5) || '=' || value) AS points FROM metric_rollups_daily
  WHERE installation_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND day >= ?3 AND day < ?4
  GROUP BY metric, dims, bucket`;

export async function queryMetrics(db: D1Database, installationId: string, query: MetricsQuery, now = new Date()) {
  const { step, size, from, to, names } = metricsRange(query, now);
  const steps = Array.from({ length: (to - from) / size }, (_, i) => iso(from + i * size));
  const prefix = step === "hour" ? 13 : 10;
  const positions = new Map(steps.map((at, i) => [at.slice(0, prefix), i]));
  const [rows, rolled] = await db.batch<{ metric: MetricName; dims: string; bucket: number; points: string | null }>([
    db.prepare(step === "day" ? DAILY_SQL : HOURLY_SQL).bind(installationId, JSON.stringify(names), iso(from), iso(to), prefix),
    db.prepare(`SELECT '' AS metric, '{}' AS dims, 0 AS bucket, MAX(hour) AS points FROM metric_rollup_hours WHERE installation_id = ?1`).bind(installationId),
  ]);
  /** The packed `step=value` pairs of a row, as [step index, value]. */
  const unpack = (points: string | null): Array<[number, number]> =>
    (points ?? "").split(",").flatMap((pair) => {
      const cut = pair.indexOf("=");
      const i = positions.get(pair.slice(0, cut));
      return i === undefined ? [] : [[i, Number(pair.slice(cut + 1))] as [number, number]];
    });
  const series = new Map<string, Series>();
  const histograms = new Map<string, { metric: MetricName; dims: Dims; steps: Array<Map<number, number>>; all: Map<number, number> }>();
  for (const row of rows!.results) {
    const key = `${row.metric} ${row.dims}`;
    const kind = METRICS[row.metric].kind;
    const values = unpack(row.points);
    if (kind === "histogram") {
      let h = histograms.get(key);
      if (!h) {
        h = { metric: row.metric, dims: JSON.parse(row.dims) as Dims, steps: steps.map(() => new Map()), all: new Map() };
        histograms.set(key, h);
      }
      for (const [i, value] of values) {
        h.steps[i]!.set(row.bucket, (h.steps[i]!.get(row.bucket) ?? 0) + value);
        h.all.set(row.bucket, (h.all.get(row.bucket) ?? 0) + value);
      }
      continue;
    }
    let s = series.get(key);
    if (!s) {
      s = { metric: row.metric, kind, dims: JSON.parse(row.dims) as Dims, points: steps.map(() => (kind === "gauge" ? null : 0)), total: null };
      series.set(key, s);
    }
    for (const [i, value] of values) s.points[i] = (s.points[i] ?? 0) + value;
  }
  for (const s of series.values()) {
    s.total = s.kind === "gauge" ? ([...s.points].reverse().find((p) => p !== null) ?? null) : s.points.reduce<number>((sum, p) => sum + (p ?? 0), 0);
  }
  const quantiles = (counts: Map<number, number>): Quantiles => ({ count: [...counts.values()].reduce((a, b) => a + b, 0), p50: bucketQuantile(counts, 0.5), p90: bucketQuantile(counts, 0.9) });
  const histogramList: Histogram[] = [...histograms.values()].map((h) => ({ metric: h.metric, dims: h.dims, points: h.steps.map(quantiles), total: quantiles(h.all) }));
  const seriesList = [...series.values()].sort((a, b) => (a.metric === b.metric ? JSON.stringify(a.dims).localeCompare(JSON.stringify(b.dims)) : a.metric.localeCompare(b.metric)));
  histogramList.sort((a, b) => JSON.stringify(a.dims).localeCompare(JSON.stringify(b.dims)));
  const lastRolled = rolled!.results[0]?.points ?? null;
  return {
    from: iso(from),
    to: iso(to),
    step,
    steps,
    /** The end of the newest rolled-up hour; later steps hold no figures yet. */
    rolledThrough: lastRolled ? iso(Date.parse(lastRolled) + HOUR_MS) : null,
    series: seriesList,
    histograms: histogramList,
    summary: summarize(seriesList),
    names: await names_(db, installationId, [...seriesList, ...histogramList]),
  };
}

/** The figures a T&S lead reads first: totals over the range and the rates derived from them. */
function summarize(series: Series[]) {
  const total = (metric: MetricName, where: (dims: Dims) => boolean = () => true) => series.filter((s) => s.metric === metric && where(s.dims)).reduce((sum, s) => sum + (s.total ?? 0), 0);
  const decided = total("appeals.decided");
  const decisions = total("decisions.made");
  const share = (automated: string) => (decisions === 0 ? null : total("decisions.made", (d) => d.automated === automated) / decisions);
  return {
    reports: total("reports.received"),
    slaBreaches: total("tasks.sla_breaches"),
    openTasks: total("queue.depth"),
    runsCreated: total("runs.created"),
    runsNeedingRepair: total("runs.ended", (d) => d.state === "repair_required"),
    runsFailed: total("runs.ended", (d) => d.state === "failed"),
    deliveriesDead: total("deliveries.ended", (d) => d.state === "dead"),
    deliveriesPending: total("deliveries.pending"),
    decisions,
    automationShare: { fully: share("fully"), partially: share("partially"), not_automated: share("not_automated") },
    appeals: total("appeals.created"),
    appealsDecided: decided,
    overturnRate: decided === 0 ? null : total("appeals.decided", (d) => d.outcome === "overturned") / decided,
  };
}

/** Names of the queues and versions the series name (lists show names, not only ids). */
async function names_(db: D1Database, installationId: string, items: Array<{ dims: Dims }>) {
  const ids = (key: string) => JSON.stringify([...new Set(items.map((item) => item.dims[key]).filter((id): id is string => typeof id === "string"))]);
  const [queues, versions] = await db.batch<{ id: string; name: string; workflowId: string | null; version: number | null }>([
    db.prepare(`SELECT id, name, NULL AS workflowId, NULL AS version FROM queues WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2))`).bind(installationId, ids("queue")),
    db
      .prepare(`SELECT v.id, w.name, v.workflow_id AS workflowId, v.version FROM workflow_versions v JOIN workflows w ON w.id = v.workflow_id AND w.installation_id = v.installation_id
        WHERE v.installation_id = ?1 AND v.id IN (SELECT value FROM json_each(?2))`)
      .bind(installationId, ids("version")),
  ]);
  return {
    queues: Object.fromEntries(queues!.results.map((q) => [q.id, q.name])) as Record<string, string>,
    versions: Object.fromEntries(versions!.results.map((v) => [v.id, { workflowId: v.workflowId ?? "", workflowName: v.name, version: v.version ?? 0 }])) as Record<string, { workflowId: string; workflowName: string; version: number }>,
  };
}
