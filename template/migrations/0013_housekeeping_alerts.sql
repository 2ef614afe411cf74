-- Housekeeping on the schedule and alerts (issue 13 §3, §6).
--
-- sweep_runs: one row per sweep per scheduled run (its counts, time and outcome), for the metrics
-- rollups to read; kept 14 days. alert_settings: per installation, the webhook endpoint alerts go
-- to, which kinds, the repair spike threshold and how far SLA breaches and dead deliveries have
-- been looked at. alerts: every alert raised, once per key (its delivery is a webhook delivery
-- with source_type 'alert'). workflow_runs.stalled_at: the updated_at a run had when the schedule
-- flagged it as stalled (so a flagged run is not flagged again until it moves and stalls again).
-- The indexes give each sweep its bounded, ordered scan.

PRAGMA defer_foreign_keys = true;

CREATE TABLE sweep_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  ran_at TEXT NOT NULL,
  ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
  counts_json TEXT NOT NULL DEFAULT '{}',
  error TEXT,
  ms INTEGER NOT NULL
);
CREATE INDEX sweep_runs_ran_at ON sweep_runs (ran_at);
CREATE INDEX sweep_runs_name ON sweep_runs (name, ran_at);

CREATE TABLE alert_settings (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
  kinds_json TEXT NOT NULL,
  repair_spike_threshold INTEGER NOT NULL DEFAULT 10 CHECK (repair_spike_threshold BETWEEN 1 AND 100000),
  sla_checked_until TEXT NOT NULL,
  dead_checked_until TEXT NOT NULL,
  checked_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX alert_settings_checked ON alert_settings (checked_at);

CREATE TABLE alerts (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  kind TEXT NOT NULL CHECK (kind IN ('sla_breached', 'delivery_dead', 'repair_spike', 'audit_verify_failed')),
  alert_key TEXT NOT NULL,
  endpoint_id TEXT NOT NULL,
  details_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (installation_id, alert_key)
);
CREATE INDEX alerts_installation ON alerts (installation_id, created_at DESC, id DESC);

ALTER TABLE workflow_runs ADD COLUMN stalled_at TEXT;

-- Lapsed leases; open tasks by due date (SLA breaches); dispatches left pending; live runs by last
-- progress (stalled); repair_required runs by time (spikes); waits by deadline; dead deliveries.
CREATE INDEX human_tasks_lease ON human_tasks (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX human_tasks_open_due ON human_tasks (installation_id, due_at) WHERE state IN ('open', 'claimed');
CREATE INDEX workflow_runs_dispatch ON workflow_runs (updated_at) WHERE state IN ('created', 'dispatch_pending');
CREATE INDEX workflow_runs_live ON workflow_runs (updated_at) WHERE state IN ('queued', 'running');
CREATE INDEX workflow_runs_repair ON workflow_runs (installation_id, updated_at) WHERE state = 'repair_required';
CREATE INDEX workflow_waits_deadline ON workflow_waits (deadline_at) WHERE state = 'waiting';

-- A delivery may now come from an alert. SQLite cannot change a CHECK, so webhook_deliveries is
-- rebuilt the way SQLite documents (new table, copy, drop, rename), which keeps webhook_attempts'
-- reference to it by name.
CREATE TABLE webhook_deliveries_0013 (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
  event_type TEXT NOT NULL,
  source_type TEXT NOT NULL CHECK (source_type IN ('action', 'message', 'handoff', 'resend', 'alert')),
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
INSERT INTO webhook_deliveries_0013 (
  id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, next_attempt_at,
  last_status, last_error, created_at, updated_at, delivered_at
) SELECT
  id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, next_attempt_at,
  last_status, last_error, created_at, updated_at, delivered_at
FROM webhook_deliveries;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_0013 RENAME TO webhook_deliveries;
CREATE INDEX webhook_deliveries_installation ON webhook_deliveries (installation_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, state, created_at);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_dead ON webhook_deliveries (installation_id, updated_at) WHERE state = 'dead';
