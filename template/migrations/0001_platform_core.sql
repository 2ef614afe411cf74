-- Safest Tools platform core: tenants, keys, workflows, versions, artifacts, runs, steps, waits,
-- events, human tasks and the audit trail. Enumerations mirror the const arrays in
-- src/workflows/types.ts (test/schema.test.ts keeps them in step).

CREATE TABLE installations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE,
  key_prefix TEXT NOT NULL,
  scopes_json TEXT NOT NULL DEFAULT '[]',
  created_at TEXT NOT NULL,
  last_used_at TEXT,
  revoked_at TEXT
);
CREATE INDEX api_keys_installation ON api_keys (installation_id, created_at);

CREATE TABLE workflows (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, name)
);
CREATE INDEX workflows_installation ON workflows (installation_id, created_at);

CREATE TABLE workflow_artifacts (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  compatibility_date TEXT NOT NULL,
  bundle_digest TEXT NOT NULL,
  bundle_r2_key TEXT,
  inline_source_text TEXT,
  size_bytes INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ready', 'revoked')),
  created_at TEXT NOT NULL,
  CHECK (inline_source_text IS NOT NULL OR bundle_r2_key IS NOT NULL)
);

CREATE TABLE workflow_versions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  workflow_id TEXT NOT NULL REFERENCES workflows(id),
  version INTEGER NOT NULL,
  graph_json TEXT NOT NULL,
  graph_digest TEXT NOT NULL,
  artifact_id TEXT NOT NULL REFERENCES workflow_artifacts(id),
  created_at TEXT NOT NULL,
  retired_at TEXT,
  UNIQUE (workflow_id, version)
);
CREATE INDEX workflow_versions_installation ON workflow_versions (installation_id, created_at);
CREATE INDEX workflow_versions_artifact ON workflow_versions (artifact_id);

CREATE TABLE workflow_runs (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  workflow_version_id TEXT NOT NULL REFERENCES workflow_versions(id),
  authority_mode TEXT NOT NULL CHECK (authority_mode IN ('off', 'shadow', 'assisted', 'autonomous')),
  state TEXT NOT NULL CHECK (state IN ('created', 'dispatch_pending', 'queued', 'running', 'waiting', 'repair_required', 'succeeded', 'failed', 'terminated', 'superseded')),
  input_json TEXT NOT NULL DEFAULT '{}',
  output_json TEXT,
  error_code TEXT,
  error_summary TEXT,
  report_id TEXT,
  appeal_id TEXT,
  queue_id TEXT,
  parent_run_id TEXT REFERENCES workflow_runs(id),
  parent_node_id TEXT,
  idempotency_key TEXT,
  request_digest TEXT,
  current_node_id TEXT,
  revision INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  started_at TEXT,
  waiting_at TEXT,
  finished_at TEXT,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, idempotency_key)
);
CREATE INDEX workflow_runs_installation ON workflow_runs (installation_id, created_at DESC);
CREATE INDEX workflow_runs_version ON workflow_runs (workflow_version_id, created_at DESC);
CREATE INDEX workflow_runs_report ON workflow_runs (report_id) WHERE report_id IS NOT NULL;
CREATE INDEX workflow_runs_parent ON workflow_runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE workflow_step_runs (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  node_id TEXT NOT NULL,
  node_type TEXT NOT NULL,
  branch_key TEXT NOT NULL DEFAULT '',
  occurrence INTEGER NOT NULL DEFAULT 1 CHECK (occurrence = 1),
  state TEXT NOT NULL CHECK (state IN ('running', 'waiting', 'succeeded', 'failed', 'timed_out')),
  output_digest TEXT,
  error_code TEXT,
  started_at TEXT,
  waiting_at TEXT,
  finished_at TEXT,
  updated_at TEXT NOT NULL,
  UNIQUE (run_id, node_id, branch_key, occurrence)
);

CREATE TABLE workflow_step_outputs (
  step_run_id TEXT PRIMARY KEY REFERENCES workflow_step_runs(id),
  inline_json TEXT NOT NULL,
  digest TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  data_classification_json TEXT NOT NULL DEFAULT '[]',
  created_at TEXT NOT NULL
);

CREATE TABLE workflow_waits (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  step_run_id TEXT NOT NULL UNIQUE REFERENCES workflow_step_runs(id),
  wait_type TEXT NOT NULL CHECK (wait_type IN ('event', 'human_task', 'action')),
  event_type TEXT NOT NULL,
  signal_type TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('waiting', 'satisfied', 'timed_out', 'cancelled')),
  deadline_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  satisfied_at TEXT
);
CREATE INDEX workflow_waits_run ON workflow_waits (run_id, state, event_type);

CREATE TABLE workflow_events (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  wait_id TEXT NOT NULL REFERENCES workflow_waits(id),
  type TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX workflow_events_run ON workflow_events (run_id, created_at DESC);
CREATE INDEX workflow_events_wait ON workflow_events (wait_id);

CREATE TABLE human_tasks (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  report_id TEXT,
  appeal_id TEXT,
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  step_run_id TEXT NOT NULL UNIQUE REFERENCES workflow_step_runs(id),
  task_type TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'claimed', 'completed', 'expired', 'cancelled')),
  queue_id TEXT,
  context_json TEXT NOT NULL,
  context_digest TEXT NOT NULL,
  response_schema_json TEXT NOT NULL,
  due_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  completed_at TEXT
);
CREATE INDEX human_tasks_queue ON human_tasks (installation_id, queue_id, state, due_at);
CREATE INDEX human_tasks_run ON human_tasks (run_id);

CREATE TABLE audit_events (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL UNIQUE,
  action TEXT NOT NULL,
  actor_type TEXT NOT NULL CHECK (actor_type IN ('system', 'api_key', 'admin', 'user')),
  actor_id TEXT NOT NULL,
  target_type TEXT NOT NULL,
  target_id TEXT NOT NULL,
  details_json TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL
);
CREATE INDEX audit_events_installation ON audit_events (installation_id, created_at, id);
CREATE INDEX audit_events_target ON audit_events (installation_id, target_type, target_id, created_at);
