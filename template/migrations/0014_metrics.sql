-- Issue 13 §5: metrics rolled up per installation and hour by the schedule (`metrics.rollup`).
-- One row per (metric, hour, dimensions, bucket). `dims` is the canonical JSON of the dimensions
-- (keys in sorted order, '{}' for none), so rows of one series group by equality. Histograms
-- (time to first action) are fixed log-scale buckets (`bucket` k counts values < 2^(k/2) seconds
-- and >= the previous bound; -1 for plain counters and gauges), so p50/p90 over any range come
-- from summed buckets (percentiles do not add up).
CREATE TABLE metric_rollups (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  hour TEXT NOT NULL,
  metric TEXT NOT NULL,
  dims TEXT NOT NULL DEFAULT '{}',
  bucket INTEGER NOT NULL DEFAULT -1,
  value REAL NOT NULL,
  PRIMARY KEY (installation_id, metric, hour, dims, bucket)
) WITHOUT ROWID;

-- The same figures per UTC day (`day` is the day's start, in the format of `hour`), recomputed from
-- the day's hourly rows after each hour is rolled up: counters and histogram buckets summed, gauges
-- at the day's last rolled hour. GET /metrics?step=day reads these (30 rows a series for a month).
CREATE TABLE metric_rollups_daily (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  day TEXT NOT NULL,
  metric TEXT NOT NULL,
  dims TEXT NOT NULL DEFAULT '{}',
  bucket INTEGER NOT NULL DEFAULT -1,
  value REAL NOT NULL,
  PRIMARY KEY (installation_id, metric, day, dims, bucket)
) WITHOUT ROWID;

-- Which hours of an installation are rolled up (recomputing an hour replaces its rows and this mark).
CREATE TABLE metric_rollup_hours (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  hour TEXT NOT NULL,
  rolled_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, hour)
) WITHOUT ROWID;

-- The rollup's reads, by time range within an installation.
CREATE INDEX human_tasks_ended ON human_tasks (installation_id, updated_at) WHERE state IN ('completed', 'expired', 'cancelled');
CREATE INDEX human_tasks_due ON human_tasks (installation_id, due_at);
CREATE INDEX human_tasks_first_action ON human_tasks (installation_id, COALESCE(claimed_at, completed_at));
CREATE INDEX workflow_runs_ended ON workflow_runs (installation_id, COALESCE(finished_at, updated_at)) WHERE state IN ('succeeded', 'failed', 'terminated', 'repair_required', 'superseded');
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (installation_id, updated_at) WHERE state IN ('delivered', 'dead');
CREATE INDEX appeals_decided ON appeals (installation_id, decided_at) WHERE decided_at IS NOT NULL;
