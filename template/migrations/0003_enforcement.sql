-- Enforcement: webhook endpoints and deliveries (Standard Webhooks), action types and proposals,
-- messages, decisions (DSA statements of reasons), handoffs; the audit hash chain.

CREATE TABLE webhook_endpoints (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  url TEXT NOT NULL,
  description TEXT,
  secret_sealed TEXT NOT NULL,
  event_types_json TEXT NOT NULL DEFAULT '[]',
  retry_base_seconds INTEGER NOT NULL DEFAULT 5 CHECK (retry_base_seconds BETWEEN 0 AND 3600),
  max_attempts INTEGER NOT NULL DEFAULT 8 CHECK (max_attempts BETWEEN 5 AND 20),
  state TEXT NOT NULL CHECK (state IN ('enabled', 'disabled')),
  disabled_reason TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX webhook_endpoints_installation ON webhook_endpoints (installation_id, created_at);

CREATE TABLE webhook_deliveries (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
  event_type TEXT NOT NULL,
  source_type TEXT NOT NULL CHECK (source_type IN ('action', 'message', 'handoff', 'resend')),
  source_id TEXT NOT NULL,
  payload_sealed TEXT NOT NULL,
  payload_digest TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT,
  last_status INTEGER,
  last_error TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  delivered_at TEXT,
  UNIQUE (source_type, source_id)
);
CREATE INDEX webhook_deliveries_installation ON webhook_deliveries (installation_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, state, created_at);

CREATE TABLE webhook_attempts (
  id TEXT PRIMARY KEY,
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id),
  attempt INTEGER NOT NULL,
  status_code INTEGER,
  error TEXT,
  duration_ms INTEGER NOT NULL,
  started_at TEXT NOT NULL,
  UNIQUE (delivery_id, attempt)
);

CREATE TABLE action_types (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  key TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT,
  requires_approval INTEGER NOT NULL DEFAULT 0,
  reversible INTEGER NOT NULL DEFAULT 0,
  endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, key)
);

CREATE TABLE action_proposals (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  step_run_id TEXT NOT NULL UNIQUE REFERENCES workflow_step_runs(id),
  node_id TEXT NOT NULL,
  action_type_id TEXT NOT NULL REFERENCES action_types(id),
  action_type_key TEXT NOT NULL,
  report_id TEXT,
  authority_mode TEXT NOT NULL CHECK (authority_mode IN ('assisted', 'autonomous')),
  state TEXT NOT NULL CHECK (state IN ('approval_required', 'approved', 'rejected', 'expired', 'delivery_pending', 'applied', 'failed')),
  params_json TEXT NOT NULL,
  rationale TEXT,
  decided_by TEXT,
  decided_at TEXT,
  decision_reason TEXT,
  delivery_id TEXT,
  approval_signal TEXT NOT NULL,
  delivery_signal TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX action_proposals_state ON action_proposals (installation_id, state, created_at);
CREATE INDEX action_proposals_run ON action_proposals (run_id);

CREATE TABLE messages (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  step_run_id TEXT NOT NULL UNIQUE REFERENCES workflow_step_runs(id),
  report_id TEXT,
  recipient_kind TEXT NOT NULL,
  template_key TEXT,
  delivery_id TEXT,
  created_at TEXT NOT NULL
);

CREATE TABLE decisions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT REFERENCES workflow_runs(id),
  step_run_id TEXT UNIQUE REFERENCES workflow_step_runs(id),
  report_id TEXT REFERENCES reports(id),
  case_id TEXT REFERENCES cases(id),
  subject_kind TEXT,
  subject_id TEXT,
  policy_category TEXT NOT NULL,
  category_specification_json TEXT NOT NULL DEFAULT '[]',
  outcome TEXT NOT NULL,
  ground TEXT NOT NULL CHECK (ground IN ('illegal_content', 'incompatible_content')),
  legal_ground TEXT,
  explanation TEXT NOT NULL,
  restrictions_json TEXT NOT NULL,
  content_type_json TEXT NOT NULL,
  territorial_scope_json TEXT,
  statement_text TEXT NOT NULL,
  source_type TEXT NOT NULL,
  automated_detection INTEGER NOT NULL,
  automated_decision TEXT NOT NULL CHECK (automated_decision IN ('fully', 'partially', 'not_automated')),
  content_date TEXT NOT NULL,
  decided_at TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX decisions_installation ON decisions (installation_id, created_at DESC);
CREATE INDEX decisions_report ON decisions (report_id);

CREATE TABLE handoffs (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  step_run_id TEXT NOT NULL UNIQUE REFERENCES workflow_step_runs(id),
  report_id TEXT,
  target_kind TEXT NOT NULL CHECK (target_kind IN ('queue', 'external')),
  queue_id TEXT,
  task_id TEXT,
  delivery_id TEXT,
  evidence_digest TEXT,
  created_at TEXT NOT NULL
);

-- The audit hash chain: seq orders an installation's events; hash = sha256(prev_hash || event).
ALTER TABLE audit_events ADD COLUMN seq INTEGER;
ALTER TABLE audit_events ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_events ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX audit_events_seq ON audit_events (installation_id, seq);
CREATE INDEX audit_events_unsealed ON audit_events (installation_id, seq) WHERE hash IS NULL;
-- Every audit event gets the next sequence number of its installation, however it was inserted.
CREATE TRIGGER audit_events_assign_seq AFTER INSERT ON audit_events WHEN NEW.seq IS NULL
BEGIN
  UPDATE audit_events SET seq = (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE installation_id = NEW.installation_id)
  WHERE id = NEW.id;
END;
