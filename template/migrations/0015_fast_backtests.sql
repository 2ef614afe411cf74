-- Fast backtests (issue 14 §0, §2).
--
-- backtests is rebuilt: `engine` says how its reports are evaluated ('fast': the host walker, no
-- Workflows instance per report; 'durable': one shadow run per report), the state may also be
-- 'cancelled' or 'failed', `processed` counts the reports evaluated so far (fast engine), and a
-- cancel or a failure is recorded with its time and code.
-- backtest_results: one row per report a fast backtest evaluated: how far the evaluation got
-- ('completed'; 'needs_review' when the path reached a node that waits; 'failed' when a node
-- failed without an error port), the outcome the version proposed (a simulated decision's outcome,
-- else the end node's terminal code), where it ended and the error code. Only verdicts are kept:
-- nothing derived from the content (that stays sealed in durable runs; here it is never stored).

PRAGMA defer_foreign_keys = true;

CREATE TABLE backtests_new (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  workflow_version_id TEXT NOT NULL REFERENCES workflow_versions(id),
  engine TEXT NOT NULL DEFAULT 'durable' CHECK (engine IN ('durable', 'fast')),
  state TEXT NOT NULL CHECK (state IN ('running', 'completed', 'cancelled', 'failed')),
  selection_json TEXT NOT NULL,
  total INTEGER NOT NULL,
  processed INTEGER NOT NULL DEFAULT 0,
  error_code TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT,
  cancelled_at TEXT
);
INSERT INTO backtests_new (id, installation_id, workflow_version_id, engine, state, selection_json, total, processed, created_at, updated_at, finished_at)
  SELECT id, installation_id, workflow_version_id, 'durable', state, selection_json, total, 0, created_at, updated_at, finished_at FROM backtests;
DROP TABLE backtests;
ALTER TABLE backtests_new RENAME TO backtests;
CREATE INDEX backtests_installation ON backtests (installation_id, created_at DESC);

CREATE TABLE backtest_results (
  backtest_id TEXT NOT NULL REFERENCES backtests(id),
  -- No foreign key: a report deleted after the selection keeps its row (failed, report.not_found).
  report_id TEXT NOT NULL,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  state TEXT NOT NULL CHECK (state IN ('completed', 'needs_review', 'failed')),
  outcome TEXT,
  terminal_code TEXT,
  stopped_at TEXT,
  error_code TEXT,
  path_json TEXT NOT NULL DEFAULT '[]',
  evaluated_at TEXT NOT NULL,
  PRIMARY KEY (backtest_id, report_id)
);
CREATE INDEX backtest_results_installation ON backtest_results (installation_id, backtest_id);
