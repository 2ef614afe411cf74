-- An action proposal's step is named by its id: a proposal's id is always `<step id>:proposal`, so
-- step_run_id repeated what the id says (37 bytes a row, and as many again in its unique index).
-- Proposals written from now on store NULL there; readers take COALESCE(step_run_id, the id
-- without its `:proposal` suffix) (enforcement/proposal-ids.ts), so rows written before, which keep
-- theirs, read alike. One proposal per step stays guaranteed by the primary key: the insert's
-- conflict target is the id, which is a function of the step.
--
-- A new proposal no longer points at its step row by foreign key, so an archived run's action step
-- no longer stays in D1 as an anchor (run-archive.ts keeps only the step rows a foreign key still
-- names). What read that anchor (the step's state, for the gates of a decision or a send) is asked
-- only while the run is live: an archived run has ended with nothing live, and the run's end
-- answers first (`action_proposal.run_finished`).
--
-- SQLite cannot drop a NOT NULL, so the table is rebuilt (no table references it): one INSERT …
-- SELECT of the rows as they are. action_proposals is hot tier: a proposal leaves D1 with its case
-- (cases/archive) once the installation's hot window has passed, so the copy is of the window's
-- proposals (one a lifecycle that reaches an action), not of the installation's history.
--
-- step_run_id keeps its UNIQUE (a NULL's entry in it is about 8 bytes against 45): it is the index
-- the foreign key's check reads when a step row is deleted and the run archive's "still pointed at"
-- test reads, for rows of the earlier form; and the previous release's Worker, live between this
-- migration and the deployment that follows it, still finds the conflict target its insert names.
PRAGMA defer_foreign_keys = true;

DROP INDEX action_proposals_state;
DROP INDEX action_proposals_run;
DROP INDEX action_proposals_type_decided;
ALTER TABLE action_proposals RENAME TO action_proposals_before_0067;
CREATE TABLE action_proposals (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT NOT NULL REFERENCES workflow_runs(id),
  step_run_id TEXT UNIQUE REFERENCES workflow_step_runs(id),
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
  decided_by, decided_at, decision_reason, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at, cancel_reason
) SELECT
  id, installation_id, run_id, step_run_id, node_id, action_type_id, action_type_key, report_id, authority_mode, state, params_json, rationale,
  decided_by, decided_at, decision_reason, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at, cancel_reason
FROM action_proposals_before_0067;
DROP TABLE action_proposals_before_0067;
CREATE INDEX action_proposals_state ON action_proposals (installation_id, state, created_at);
CREATE INDEX action_proposals_run ON action_proposals (run_id);
CREATE INDEX action_proposals_type_decided ON action_proposals (installation_id, action_type_key, decided_at DESC, id DESC) WHERE decided_at IS NOT NULL;
