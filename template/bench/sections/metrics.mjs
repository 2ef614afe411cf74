// Section "metrics": GET /api/v1/metrics over 30 days of hourly rollups of a busy installation
// (8 queues, 4 workflow versions, 175 rows an hour — 95 series and 8 histograms of 10 buckets: about 126,000 rollup rows), seeded in bulk
// SQL by /bench/metrics-seed (never by replaying events). Timed per hour (720 steps, what an
// export would read) and per day (30 steps, what the dashboard's 30-day view reads); p50/p95 of
// the server time. Per day reads metric_rollups_daily (kept by the rollup, filled here from the
// seeded hours). The plans of both queries must seek their table's primary key.
import { latency, log, results, round } from "./lib.mjs";

const DAYS = 30;
const SAMPLES = 30;
const WARM_UP = 3;

const planText = (plan) => plan.map((row) => `${row.parent === 0 ? "" : "  "}${row.detail}`).join("\n");

function planProblems(plan, table = "metric_rollups") {
  const text = plan.map((row) => row.detail).join("\n");
  const problems = [];
  if (!text.includes(`SEARCH ${table} USING PRIMARY KEY`)) problems.push(`does not seek ${table} by its primary key`);
  if (new RegExp(`\\bSCAN ${table}\\b(?! USING)`, "u").test(text)) problems.push(`scans ${table}`);
  return problems;
}

export async function sectionMetrics(api, timed, adminToken) {
  const installation = await api("/api/v1/installations", { body: { name: "bench-metrics" }, key: adminToken });
  const key = installation.apiKey;
  log(`metrics: seeding ${DAYS} days of hourly rollups`);
  const seeded = await api("/bench/metrics-seed", { body: { installationId: installation.id, days: DAYS }, key: adminToken });
  log(`metrics: ${seeded.rows} rows (${seeded.series} series × ${seeded.hours} hours) in ${seeded.seedMs} ms`);
  const problems = [...planProblems(seeded.hourlyPlan).map((p) => `hourly: ${p}`), ...planProblems(seeded.dailyPlan, "metric_rollups_daily").map((p) => `daily: ${p}`)];
  results.metricsDailyPlan = planText(seeded.dailyPlan);
  results.metricsHourlyPlan = planText(seeded.hourlyPlan);
  results.metricsUsesIndex = problems.length === 0;
  log(`metrics: plan (hourly):\n${results.metricsHourlyPlan}\n  (daily):\n${results.metricsDailyPlan}`);
  if (problems.length > 0) throw new Error(`metrics plan: ${problems.join("; ")}`);

  const figures = {};
  for (const step of ["hour", "day"]) {
    const path = `/api/v1/metrics?from=${seeded.from}&to=${seeded.to}&step=${step}`;
    const expected = step === "hour" ? DAYS * 24 : DAYS + (seeded.from.slice(11, 13) === "00" ? 0 : 1);
    const check = (result) => {
      if (result.body.steps.length !== expected) throw new Error(`metrics: ${result.body.steps.length} steps per ${step}, expected ${expected}`);
      if (result.body.series.length !== seeded.series - 80 || result.body.histograms.length !== 8) throw new Error(`metrics: ${result.body.series.length} series and ${result.body.histograms.length} histograms`);
      return result;
    };
    for (let i = 0; i < WARM_UP; i++) check(await timed(path, { key }));
    const samples = [];
    let bytes = 0;
    for (let i = 0; i < SAMPLES; i++) {
      const sample = check(await timed(path, { key }));
      bytes = JSON.stringify(sample.body).length;
      samples.push(sample);
    }
    figures[step] = { server: latency(samples, "serverMs"), client: latency(samples, "clientMs"), bytes };
    log(`metrics: 30 days per ${step}: p50 ${figures[step].server.p50} ms, p95 ${figures[step].server.p95} ms (${Math.round(bytes / 1024)} KiB)`);
  }
  Object.assign(results, {
    metricsRollupRows: seeded.rows,
    metricsSeedMs: seeded.seedMs,
    metricsSamples: SAMPLES,
    metrics30dHourlyP50Ms: figures.hour.server.p50,
    metrics30dHourlyP95Ms: figures.hour.server.p95,
    metrics30dHourlyClientP95Ms: figures.hour.client.p95,
    metrics30dHourlyBytes: figures.hour.bytes,
    metrics30dDailyP50Ms: figures.day.server.p50,
    metrics30dDailyP95Ms: figures.day.server.p95,
    metrics30dDailyClientP95Ms: figures.day.client.p95,
    metrics30dDailyBytes: figures.day.bytes,
  });
}

export function metricsLines() {
  if (results.metrics30dHourlyP95Ms === undefined) return [];
  return [
    `metrics:          GET /metrics over 30 days of hourly rollups (${results.metricsRollupRows} rows): per day p95 ${results.metrics30dDailyP95Ms} ms (p50 ${results.metrics30dDailyP50Ms}), per hour p95 ${results.metrics30dHourlyP95Ms} ms (p50 ${results.metrics30dHourlyP50Ms}, ${round(results.metrics30dHourlyBytes / 1024, 0)} KiB)  (server time, ${results.metricsSamples} samples; primary key seek: ${results.metricsUsesIndex})`,
  ];
}
