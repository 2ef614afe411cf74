-- Storage in tiers, the second step: a closed case past its installation's hot window, with
-- everything that hangs off it (its reports, their runs' rows, tasks, decisions, appeals,
-- proposals, deliveries, messages, notices), leaves D1 for ONE immutable R2 object
-- (cases/case-archive.ts). What stays in D1 per archived case is one row here: the subject's key,
-- so a new report about the same subject brings the case back instead of opening a second one.

-- `key`: the first 16 bytes of SHA-256(installation id, subject kind, subject id); the R2 object
-- archive/v1/<installation>/subjects/<hex key>.json names the case. No installation column: the
-- key already depends on it, and a row per archived case must stay a few bytes.
CREATE TABLE archived_subjects (
  key BLOB PRIMARY KEY
) WITHOUT ROWID;

-- Per installation: how many cases are archived now, and their objects' bytes (GET /storage).
CREATE TABLE case_archive_totals (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  cases INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0
);

-- Why a case is not archived yet although it is old enough. rehydrated_at: a read or a write
-- brought it back to D1 (its archive object stays where it is); the window counts from then, and
-- the sweep then archives it again (same rows, same bytes: nothing is rewritten in R2 unless the
-- case changed). not_before: the archive found something of it still live and looks again then.
-- queued_until: the schedule handed it to the RUN_OPERATIONS queue and does not hand it again
-- before then (the consumer archives it, or holds it).
CREATE TABLE case_archive_holds (
  case_id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  rehydrated_at TEXT,
  not_before TEXT,
  queued_until TEXT
);

-- The archive commit's mark, alive only inside its own batch.
CREATE TABLE case_archive_marks (
  case_id TEXT PRIMARY KEY,
  digest TEXT NOT NULL
);

-- The sweep's selection: cases by their last report, oldest first.
CREATE INDEX cases_archivable ON cases (updated_at);
-- The archive's guard that no run operation still lists one of the case's runs.
CREATE INDEX IF NOT EXISTS run_operation_items_run ON run_operation_items (run_id);
-- ... and that no golden item was made from one of its tasks.
CREATE INDEX IF NOT EXISTS golden_items_source ON golden_items (source_task_id);

-- Ended runs the schedule handed to the RUN_OPERATIONS queue to be archived
-- (workflows/run-archive.ts), not handed again before queued_until; the archive's commit drops the row.
CREATE TABLE run_archive_queue (
  run_id TEXT PRIMARY KEY,
  queued_until TEXT NOT NULL
) WITHOUT ROWID;
