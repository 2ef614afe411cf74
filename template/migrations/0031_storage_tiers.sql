-- Storage in tiers, the first step: an ended run's child rows (steps, step outputs, waits, events,
-- repairs) move out of D1 into one immutable R2 object per run once the run is older than the
-- installation's hot window (workflows/run-archive.ts). The run row stays in D1: other tables
-- point at it by foreign key, and lists and filters read it.

-- When the run's child rows left D1, and the digest (sha256 of the canonical body) of the object
-- that holds them. archive_bytes: the object's size, for GET /storage. archive_sealed_erased_at:
-- retention erased the sealed step outputs of an archived run; the archived copies are not served
-- from then on (the object is immutable; what it holds is ciphertext under the installation's key).
ALTER TABLE workflow_runs ADD COLUMN archived_at TEXT;
ALTER TABLE workflow_runs ADD COLUMN archive_digest TEXT;
ALTER TABLE workflow_runs ADD COLUMN archive_bytes INTEGER;
ALTER TABLE workflow_runs ADD COLUMN archive_sealed_erased_at TEXT;

-- The archive sweep's selection: ended runs not yet archived, oldest finish first.
CREATE INDEX workflow_runs_archivable ON workflow_runs (finished_at)
  WHERE archived_at IS NULL AND finished_at IS NOT NULL;
-- The archive sweep's check that no child run (a subworkflow's) is still going reads runs by their
-- parent: 0001's index, declared again (IF NOT EXISTS) now that a query depends on it.
CREATE INDEX IF NOT EXISTS workflow_runs_parent ON workflow_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
-- GET /storage: the installation's archived runs and their bytes.
CREATE INDEX workflow_runs_archived ON workflow_runs (installation_id, archived_at)
  WHERE archived_at IS NOT NULL;

-- The installation's hot window: days an ended run keeps its child rows in D1 (default 7 when no row).
CREATE TABLE storage_settings (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  hot_days INTEGER NOT NULL CHECK (hot_days BETWEEN 0 AND 3650),
  updated_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
