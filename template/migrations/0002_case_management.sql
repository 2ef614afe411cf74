-- Case management: encrypted reports grouped into cases per subject, triggers, review queues with
-- SLAs, task leases and responses, appeals, and per-installation data keys for report-crypto.

CREATE TABLE data_keys (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  version INTEGER NOT NULL,
  master_key_id TEXT NOT NULL,
  wrapped_key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('active', 'decrypt_only')),
  created_at TEXT NOT NULL,
  rotated_at TEXT,
  UNIQUE (installation_id, version)
);
CREATE INDEX data_keys_active ON data_keys (installation_id, state, version DESC);
CREATE INDEX data_keys_master ON data_keys (master_key_id);

CREATE TABLE cases (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  subject_kind TEXT NOT NULL,
  subject_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'resolved')),
  report_count INTEGER NOT NULL DEFAULT 0,
  first_reported_at TEXT NOT NULL,
  last_reported_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, subject_kind, subject_id)
);
CREATE INDEX cases_recent ON cases (installation_id, last_reported_at DESC);

CREATE TABLE reports (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  case_id TEXT NOT NULL REFERENCES cases(id),
  subject_kind TEXT NOT NULL,
  subject_id TEXT NOT NULL,
  category TEXT NOT NULL,
  category_specification_json TEXT NOT NULL DEFAULT '[]',
  source TEXT NOT NULL,
  evidence_count INTEGER NOT NULL DEFAULT 0,
  personal_data TEXT NOT NULL,
  data_key_id TEXT NOT NULL REFERENCES data_keys(id),
  idempotency_key TEXT,
  request_digest TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (installation_id, idempotency_key)
);
CREATE INDEX reports_case ON reports (case_id, created_at);
CREATE INDEX reports_installation ON reports (installation_id, created_at DESC, id DESC);
CREATE INDEX reports_subject ON reports (installation_id, subject_kind, subject_id, created_at);

CREATE TABLE triggers (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  event TEXT NOT NULL CHECK (event IN ('report.created', 'appeal.created')),
  when_expression TEXT NOT NULL,
  workflow_version_id TEXT NOT NULL REFERENCES workflow_versions(id),
  authority_mode TEXT NOT NULL CHECK (authority_mode IN ('off', 'shadow', 'assisted', 'autonomous')),
  enabled INTEGER NOT NULL DEFAULT 1,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX triggers_event ON triggers (installation_id, event, enabled);

CREATE TABLE queues (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  description TEXT,
  sla_seconds INTEGER NOT NULL CHECK (sla_seconds BETWEEN 60 AND 31536000),
  priority INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 100),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, name)
);

ALTER TABLE human_tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE human_tasks ADD COLUMN expires_at TEXT;
ALTER TABLE human_tasks ADD COLUMN claimed_by TEXT;
ALTER TABLE human_tasks ADD COLUMN claimed_at TEXT;
ALTER TABLE human_tasks ADD COLUMN lease_expires_at TEXT;
ALTER TABLE human_tasks ADD COLUMN response_json TEXT;
ALTER TABLE human_tasks ADD COLUMN completed_by TEXT;
DROP INDEX human_tasks_queue;
-- Queue listing: open tasks of one queue by SLA due date, then priority, then id (the cursor).
CREATE INDEX human_tasks_queue_listing ON human_tasks (installation_id, queue_id, state, due_at, priority DESC, id);
CREATE INDEX human_tasks_queue_completed ON human_tasks (installation_id, queue_id, completed_at) WHERE completed_at IS NOT NULL;

CREATE TABLE appeals (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  report_id TEXT REFERENCES reports(id),
  decision_id TEXT,
  case_id TEXT REFERENCES cases(id),
  state TEXT NOT NULL CHECK (state IN ('open', 'upheld', 'overturned')),
  personal_data TEXT NOT NULL,
  data_key_id TEXT NOT NULL REFERENCES data_keys(id),
  outcome_reason TEXT,
  decided_by TEXT,
  decided_at TEXT,
  idempotency_key TEXT,
  request_digest TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, idempotency_key)
);
CREATE INDEX appeals_report ON appeals (installation_id, report_id);
CREATE INDEX appeals_recent ON appeals (installation_id, created_at DESC);
