-- Proactive detection: rule sets over the product's event stream, the hits they record, the
-- labels they (and people) put on entities, an optional sealed sample of events, and the event
-- intake's settings. Events themselves are evaluated and dropped (POST /api/v1/events); their
-- sliding-window counters live in the EntityCounters Durable Objects (SQLite storage, one set of
-- shards per installation), not here.

-- A named rule set and its deployment: which published version runs, in which authority mode
-- (off, shadow, assisted, autonomous). About 200 bytes a row, tens per installation. The unique
-- name serves creation's conflict check; intake reads the deployed ones by installation (the
-- index on (installation_id, authority_mode) keeps that read off the whole table).
CREATE TABLE rule_sets (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  name TEXT NOT NULL,
  deployed_version_id TEXT,
  authority_mode TEXT NOT NULL DEFAULT 'off' CHECK (authority_mode IN ('off', 'shadow', 'assisted', 'autonomous')),
  deployed_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, name)
);
CREATE INDEX rule_sets_deployed ON rule_sets (installation_id, authority_mode);

-- A published, immutable version: its rules as canonical JSON and that JSON's sha256 digest,
-- checked whenever intake loads the version. A few KB a row; read by id, listed by rule set
-- (the unique key serves both the list and the version number's assignment).
CREATE TABLE rule_set_versions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  rule_set_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  rules_json TEXT NOT NULL,
  rules_digest TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (installation_id, rule_set_id, version)
);

-- One row per rule that matched an event: what the rule did (applied) or, in shadow and where the
-- mode withholds it, would have done. About 250 bytes a row; no event content, only its id and
-- type. The primary key makes a retried event's hit one row; rule_hits_by_set lists a rule set's
-- hits newest first (its hit rate and shadow record).
CREATE TABLE rule_hits (
  installation_id TEXT NOT NULL,
  rule_set_version_id TEXT NOT NULL,
  rule_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  rule_set_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  authority_mode TEXT NOT NULL,
  applied INTEGER NOT NULL,
  outcome_json TEXT NOT NULL,
  result_json TEXT,
  occurred_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, rule_set_version_id, rule_id, event_id)
);
CREATE INDEX rule_hits_by_set ON rule_hits (installation_id, rule_set_id, created_at);

-- An entity's labels. (Rowid tables, as every table a backup carries: it pages by rowid.) The entity is named by a keyed hash of (kind, value) (lib/person-keys.ts),
-- so the table never holds an account id or an IP; a reader who knows the entity computes the
-- key. Provenance: source_type 'rule' (source_id a rule set version and rule) or 'person' (an API
-- key or console user). A negated label withdraws the value: rules do not put it back while the
-- negation stands. About 150 bytes a row; the primary key serves the entity's read and the upsert,
-- entity_labels_expiry the sweep of expired labels.
CREATE TABLE entity_labels (
  installation_id TEXT NOT NULL,
  entity_key TEXT NOT NULL,
  value TEXT NOT NULL,
  entity_kind TEXT NOT NULL,
  negated INTEGER NOT NULL DEFAULT 0,
  source_type TEXT NOT NULL CHECK (source_type IN ('rule', 'person')),
  source_id TEXT NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT,
  PRIMARY KEY (installation_id, entity_key, value)
);
CREATE INDEX entity_labels_expiry ON entity_labels (expires_at) WHERE expires_at IS NOT NULL;

-- Event intake's settings: the share of events kept as a sealed sample for backtests (0, the
-- default, keeps none). One row per installation that changed it.
CREATE TABLE event_settings (
  installation_id TEXT PRIMARY KEY,
  sample_rate REAL NOT NULL DEFAULT 0 CHECK (sample_rate >= 0 AND sample_rate <= 1),
  updated_at TEXT NOT NULL
);

-- The sampled events, sealed whole under the installation's period data key (entities and data are
-- personal data). Only when sample_rate > 0. A row per sampled event (its sealed size plus about 80
-- bytes); the primary key keeps a retried event once, event_samples_at lists them for a backtest.
CREATE TABLE event_samples (
  installation_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  occurred_at TEXT NOT NULL,
  sealed TEXT NOT NULL,
  data_key_id TEXT NOT NULL,
  PRIMARY KEY (installation_id, event_id)
);
CREATE INDEX event_samples_at ON event_samples (installation_id, occurred_at);
