-- Automation: versioned read-only components, AI providers, backtests.

CREATE TABLE components (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  description TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, name)
);

CREATE TABLE component_versions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  component_id TEXT NOT NULL REFERENCES components(id),
  version INTEGER NOT NULL,
  source_text TEXT NOT NULL,
  digest TEXT NOT NULL,
  allowed_hosts_json TEXT NOT NULL DEFAULT '[]',
  max_subrequests INTEGER NOT NULL DEFAULT 5 CHECK (max_subrequests BETWEEN 0 AND 50),
  timeout_ms INTEGER NOT NULL DEFAULT 5000 CHECK (timeout_ms BETWEEN 100 AND 60000),
  created_at TEXT NOT NULL,
  UNIQUE (component_id, version)
);
CREATE INDEX component_versions_installation ON component_versions (installation_id, created_at);

CREATE TABLE ai_providers (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('workers-ai', 'openai-compatible')),
  base_url TEXT,
  model TEXT NOT NULL,
  api_key_sealed TEXT,
  timeout_ms INTEGER NOT NULL DEFAULT 20000 CHECK (timeout_ms BETWEEN 500 AND 120000),
  created_at TEXT NOT NULL
);
CREATE INDEX ai_providers_installation ON ai_providers (installation_id, created_at);

CREATE TABLE backtests (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  workflow_version_id TEXT NOT NULL REFERENCES workflow_versions(id),
  state TEXT NOT NULL CHECK (state IN ('running', 'completed')),
  selection_json TEXT NOT NULL,
  total INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT
);
CREATE INDEX backtests_installation ON backtests (installation_id, created_at DESC);

ALTER TABLE workflow_runs ADD COLUMN backtest_id TEXT REFERENCES backtests(id);
CREATE INDEX workflow_runs_backtest ON workflow_runs (backtest_id, state) WHERE backtest_id IS NOT NULL;
CREATE INDEX workflow_runs_version_mode ON workflow_runs (workflow_version_id, authority_mode, state);
