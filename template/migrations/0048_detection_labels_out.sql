-- Detection's labels leave the platform, and rule sets earn autonomy:
-- - a label change (applied, negated, expired) is a webhook delivery. It needs no change here: its
--   rows are source_type 'alert' (platform notices, as account notices are) with a `label:` prefix
--   on source_id, so UNIQUE (source_type, source_id) still makes a repeated change one row. (A new
--   source_type would mean rebuilding webhook_deliveries, whose DROP breaks webhook_attempts'
--   reference to it on any database that ever attempted a delivery.)
-- - the installation may act as an ATProto labeler (labeler_settings: its DID, its signing key
--   sealed, which labels are public), answering com.atproto.label.queryLabels;
-- - a rule's hit remembers the entity its outcome names (by key), so its shadow record can be
--   compared with what people later decided about that entity;
-- - a rule set carries its promotion gate.

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
