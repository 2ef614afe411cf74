-- Detection's labels leave the platform, and rule sets earn autonomy:
-- - a label change (applied, negated, expired) is a webhook delivery (source_type 'label');
-- - the installation may act as an ATProto labeler (labeler_settings: its DID, its signing key
--   sealed, which labels are public), answering com.atproto.label.queryLabels;
-- - a rule's hit remembers the entity its outcome names (by key), so its shadow record can be
--   compared with what people later decided about that entity;
-- - a rule set carries its promotion gate.

-- A delivery may now come from a label change. SQLite cannot change a CHECK, so webhook_deliveries
-- is rebuilt the way SQLite documents (new table, copy, drop, rename, indexes again), in this one
-- migration; webhook_attempts refers to it by name and keeps its rows.
CREATE TABLE webhook_deliveries_0048 (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
  event_type TEXT NOT NULL,
  source_type TEXT NOT NULL CHECK (source_type IN ('action', 'message', 'handoff', 'resend', 'alert', 'label')),
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
INSERT INTO webhook_deliveries_0048 (
  id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, next_attempt_at,
  last_status, last_error, created_at, updated_at, delivered_at
) SELECT
  id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, next_attempt_at,
  last_status, last_error, created_at, updated_at, delivered_at
FROM webhook_deliveries;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_0048 RENAME TO webhook_deliveries;
CREATE INDEX webhook_deliveries_installation ON webhook_deliveries (installation_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, state, created_at);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_dead ON webhook_deliveries (installation_id, updated_at) WHERE state = 'dead';
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (installation_id, updated_at) WHERE state IN ('delivered', 'dead');

-- The installation as an ATProto labeler: its DID (the `src` of every label it serves), its
-- secp256k1 signing key sealed under the installation's key (absent: labels are served unsigned),
-- the public half as a did:key (what the DID document's #atproto_label names), and what is public:
-- the entity kinds (never a personal kind) and, optionally, only some label values. Configuration
-- tier: one row per installation that set it, about 300 bytes; read by its key.
CREATE TABLE labeler_settings (
  installation_id TEXT PRIMARY KEY,
  did TEXT NOT NULL,
  public_kinds_json TEXT NOT NULL,
  public_values_json TEXT,
  signing_key_sealed TEXT,
  public_key TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

-- A label's subject in the clear, for account and content kinds only (the identifiers reports
-- already hold in the clear; personal kinds stay a keyed hash): what the ATProto view answers a
-- URI pattern with. entity_labels_subject serves an exact URI and a prefix (a range on the text).
ALTER TABLE entity_labels ADD COLUMN subject TEXT;
CREATE INDEX entity_labels_subject ON entity_labels (installation_id, subject) WHERE subject IS NOT NULL;

-- The entity a hit's label or report outcome names, by its keyed hash (never its id): with the
-- outcome's value it finds what a person later decided about the same entity (shadow agreement).
-- 26 bytes a row; rule_hits stays in its hot tier as before.
ALTER TABLE rule_hits ADD COLUMN entity_key TEXT;

-- A rule set's promotion gate (JSON: minComparedHits, minAgreementLow); NULL: the defaults.
ALTER TABLE rule_sets ADD COLUMN gate_json TEXT;
