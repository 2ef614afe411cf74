// Metrics: the hourly rollup the schedule runs (`metrics.rollup`) and the series GET /metrics reads.
export { bucketQuantile, HISTOGRAM_BOUNDS, histogramBucket, METRIC_NAMES, METRICS, rollupHour, rollupRange, sweepMetricRollups, type MetricName } from "./rollup";
export { METRIC_STEPS, queryMetrics, type MetricStep } from "./query";
