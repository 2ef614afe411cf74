-- Effects end with their run (issue 12 §3, §10). An action proposal can be `cancelled`: its run
-- ended (terminated, failed, succeeded with it still open) or its node went to the error port
-- before it was decided or delivered; `cancel_reason` says which. SQLite cannot change a CHECK, so
-- action_proposals is rebuilt (no table references it). A handoff to a queue records the outcome
-- of its task when a reviewer completes it (no run waits for it: the handoff node already left).

PRAGMA defer_foreign_keys = true;

DROP INDEX action_proposals_state;
DROP INDEX action_proposals_run;
ALTER TABLE action_proposals RENAME TO action_proposals_before_0011;
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
  state TEXT NOT NULL CHECK (state IN ('approval_required', 'approved', 'rejected', 'expired', 'delivery_pending', 'applied', 'failed', 'cancelled')),
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
  updated_at TEXT NOT NULL,
  cancel_reason TEXT CHECK (cancel_reason IN ('run_terminated', 'run_failed', 'run_succeeded', 'run_superseded', 'node_error_port', 'node_failed'))
);
INSERT INTO action_proposals (
  id, installation_id, run_id, step_run_id, node_id, action_type_id, action_type_key, report_id, authority_mode, state, params_json, rationale,
  decided_by, decided_at, decision_reason, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at
) SELECT
  id, installation_id, run_id, step_run_id, node_id, action_type_id, action_type_key, report_id, authority_mode, state, params_json, rationale,
  decided_by, decided_at, decision_reason, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at
FROM action_proposals_before_0011;
DROP TABLE action_proposals_before_0011;
CREATE INDEX action_proposals_state ON action_proposals (installation_id, state, created_at);
CREATE INDEX action_proposals_run ON action_proposals (run_id);

ALTER TABLE handoffs ADD COLUMN completed_at TEXT;
ALTER TABLE handoffs ADD COLUMN completed_by TEXT;
ALTER TABLE handoffs ADD COLUMN outcome TEXT;
ALTER TABLE handoffs ADD COLUMN response_digest TEXT;
