-- Repair (issue 13 §1, §2). A run may live through several Workflows instances: `instance_id` is
-- the current one (the run id for runs created before repairs existed, `<run id>-r<n>` after the
-- n-th repair), `repair_count` how many repairs it had. Step ids stay stable (recorded outputs
-- are replayed by id); a step's `attempt` counts how often it was run again by a repair.
-- workflow_run_repairs is the run's repair history (who, why, what); run_operations and
-- run_operation_items are bulk repairs, processed in the background by the RUN_OPERATIONS queue.

ALTER TABLE workflow_runs ADD COLUMN instance_id TEXT;
ALTER TABLE workflow_runs ADD COLUMN repair_count INTEGER NOT NULL DEFAULT 0;
UPDATE workflow_runs SET instance_id = id WHERE instance_id IS NULL;
CREATE UNIQUE INDEX workflow_runs_instance ON workflow_runs (instance_id);
CREATE INDEX workflow_runs_repairable ON workflow_runs (installation_id, state, created_at);

ALTER TABLE workflow_step_runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;

CREATE TABLE workflow_run_repairs (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  seq INTEGER NOT NULL,
  action TEXT NOT NULL CHECK (action IN ('retry', 'route', 'migrate')),
  node_id TEXT,
  branch_key TEXT,
  port TEXT,
  from_version_id TEXT NOT NULL,
  to_version_id TEXT NOT NULL,
  previous_state TEXT NOT NULL,
  previous_error_code TEXT,
  instance_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  actor_json TEXT NOT NULL,
  operation_id TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (run_id, seq)
);

CREATE TABLE run_operations (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  action TEXT NOT NULL CHECK (action IN ('terminate', 'retry', 'migrate')),
  filter_json TEXT NOT NULL,
  target_version_id TEXT,
  reason TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'completed')),
  total INTEGER NOT NULL,
  processed INTEGER NOT NULL DEFAULT 0,
  succeeded INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  skipped INTEGER NOT NULL DEFAULT 0,
  actor_json TEXT NOT NULL,
  idempotency_key TEXT,
  request_digest TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT,
  UNIQUE (installation_id, idempotency_key)
);

CREATE TABLE run_operation_items (
  operation_id TEXT NOT NULL REFERENCES run_operations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  seq INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed', 'skipped')),
  error_code TEXT,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (operation_id, run_id)
);
CREATE INDEX run_operation_items_pending ON run_operation_items (operation_id, state, seq);
