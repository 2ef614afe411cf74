-- The R2 anchor (audit/<installation>/head.json) has one writer per installation: the scheduled
-- audit sweep (and an explicit verification), never the seal after every API write, since R2
-- takes about one write a second per key. audit_anchor_due lists the installations whose newest
-- D1 checkpoint the anchor does not hold yet, so the sweep finds them without listing R2: one row
-- per installation (about 80 bytes), written by an after-write checkpoint, deleted when the
-- anchor is moved. The primary key serves both the upsert and the sweep's lookup.
CREATE TABLE audit_anchor_due (
  installation_id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  due_at TEXT NOT NULL
);
CREATE INDEX audit_anchor_due_at ON audit_anchor_due (due_at);

-- Run admission: Workflows creates about 100 instances a second per workflow, so a create refused
-- for its rate (or an overload) leaves the run `dispatch_pending` with a backoff instead of failing
-- it. dispatch_attempts counts the refused creates (the backoff doubles with it); dispatch_after
-- is when the next try is due (the RUN_OPERATIONS queue message carries the try; the dispatch
-- sweep takes a run only once it is due). About 30 bytes a run; read with the run, never searched.
ALTER TABLE workflow_runs ADD COLUMN dispatch_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_runs ADD COLUMN dispatch_after TEXT;

-- The transparency report over long periods reads daily rollups, never a year of rows: per
-- installation, UTC day and figure family (reports, decisions, complaints, … and the histograms of
-- time to act and to decide a complaint), one row per group the report's own statement returns
-- (row_json: the group's fields; n: its count). A day has as many rows as distinct groups (tens),
-- whatever its number of reports. transparency_rollup_days marks the days rolled up, so a report
-- knows which days to read here and which to count from the rows. Both are derived: rebuilt by
-- the sweep, not backed up.
CREATE TABLE transparency_rollups (
  installation_id TEXT NOT NULL,
  day TEXT NOT NULL,
  family TEXT NOT NULL,
  row_json TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (installation_id, day, family, row_json)
);
CREATE TABLE transparency_rollup_days (
  installation_id TEXT NOT NULL,
  day TEXT NOT NULL,
  rolled_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, day)
);
