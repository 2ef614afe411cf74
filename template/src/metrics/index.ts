// Metrics: the hourly rollup the schedule runs (`metrics.rollup`) and the series GET /metrics reads;
// the DSA transparency report (GET /transparency-report).
export { bucketQuantile, HISTOGRAM_BOUNDS, histogramBucket, METRIC_NAMES, METRICS, rollupHour, rollupRange, sweepMetricRollups, type MetricName } from "./rollup";
export { METRIC_STEPS, queryMetrics, type MetricStep } from "./query";
export { MAX_PERIOD_DAYS, transparencyPeriod, transparencyReport, type NotKnown, type TransparencyReport } from "./transparency";
export { TRANSPARENCY_QUERIES } from "./transparency-queries";
export { transparencyCsv } from "./transparency-csv";
export { rollupTransparencyDay, sweepTransparencyRollups } from "./transparency-rollup";
