-- Policies for AI proposals: versioned, immutable documents. A policy has a name (unique per
-- installation) and versions 1, 2, … each holding the canonical text and its `sha256:` digest; an
-- ai_proposal node names a version (or the policy, meaning its newest version at run time), and
-- its step output records which version and digest drove the proposal. Retiring a policy stops new
-- versions, new references at publish and runs under it; its versions stay readable.
CREATE TABLE policies (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  description TEXT,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  retired_at TEXT,
  UNIQUE (installation_id, name)
);

CREATE TABLE policy_versions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  policy_id TEXT NOT NULL REFERENCES policies(id),
  version INTEGER NOT NULL CHECK (version >= 1),
  text TEXT NOT NULL,
  digest TEXT NOT NULL CHECK (digest LIKE 'sha256:%'),
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (policy_id, version)
);
CREATE INDEX policy_versions_installation ON policy_versions (installation_id, policy_id, version DESC);

-- A version is immutable: there is no update route, and the database refuses one too.
CREATE TRIGGER policy_versions_immutable BEFORE UPDATE ON policy_versions
BEGIN
  SELECT RAISE(ABORT, 'policy_versions are immutable');
END;

-- Whether a provider may receive reported content (off for external endpoints unless an admin
-- allows it), and how its model answers: `json` ({ result_code, confidence, rationale,
-- policy_sections? }) or `llama_guard` (`safe` / `unsafe` + a line of categories).
ALTER TABLE ai_providers ADD COLUMN content_allowed INTEGER NOT NULL DEFAULT 0 CHECK (content_allowed IN (0, 1));
ALTER TABLE ai_providers ADD COLUMN output_format TEXT NOT NULL DEFAULT 'json' CHECK (output_format IN ('json', 'llama_guard'));
UPDATE ai_providers SET content_allowed = 1 WHERE kind = 'workers-ai';
