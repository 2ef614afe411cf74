-- DSA Transparency Database submission (issue 15 §1): per installation, where statements of
-- reasons go and the sealed token; per restricting decision, its submission's state.
--
-- tdb_settings: one row per installation. `token_sealed` is the bearer token sealed like every
-- secret (report-crypto, context `tdb_settings:<installation>`); it is never returned or logged.
-- `paused_until` is the backoff after a 429 or 5xx (retry-after honoured), `failures` the
-- consecutive failed calls it grows from.
-- tdb_submissions: one row per decision that restricts, written in the decision's own batch
-- (`pending`). `puid` is the decision id (stable: a retry never makes a second statement).
-- `in_doubt` is set when a batch is claimed for sending and cleared by a definite answer: a row
-- still in doubt may have been stored by the database (a lost response), so it is checked with
-- existing-puid before it is ever sent again. `claim_id`/`claimed_until`: the sweep's lease.
-- `overrides_json`: redacted text a compliance officer supplied on resubmit.

CREATE TABLE tdb_settings (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  base_url TEXT NOT NULL,
  token_sealed TEXT,
  enabled INTEGER NOT NULL DEFAULT 0 CHECK (enabled IN (0, 1)),
  paused_until TEXT,
  failures INTEGER NOT NULL DEFAULT 0,
  last_status INTEGER,
  last_error TEXT,
  last_attempt_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE tdb_submissions (
  decision_id TEXT PRIMARY KEY REFERENCES decisions(id),
  installation_id TEXT NOT NULL REFERENCES installations(id),
  puid TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'submitted', 'rejected')),
  attempts INTEGER NOT NULL DEFAULT 0,
  in_doubt INTEGER NOT NULL DEFAULT 0 CHECK (in_doubt IN (0, 1)),
  claim_id TEXT,
  claimed_until TEXT,
  uuid TEXT,
  permalink TEXT,
  confirmed_by TEXT CHECK (confirmed_by IS NULL OR confirmed_by IN ('created', 'existing_puid')),
  rejected_by TEXT CHECK (rejected_by IS NULL OR rejected_by IN ('database', 'platform')),
  error_code TEXT,
  errors_json TEXT,
  overrides_json TEXT,
  last_status INTEGER,
  queued_at TEXT NOT NULL,
  submitted_at TEXT,
  rejected_at TEXT,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, puid)
);
-- The sweep's next batch of an installation, oldest first; listings by state.
CREATE INDEX tdb_submissions_state ON tdb_submissions (installation_id, state, queued_at, decision_id);
