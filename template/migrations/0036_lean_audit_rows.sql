-- Lean audit rows (src/audit/stored.ts). Events written from now on are stored in a v2 form: the
-- id is a digest of the installation and the idempotency key (22 characters), so the key itself
-- is not stored and one unique index (on id) both finds an event and makes a repeated write do
-- nothing; prev_hash is not stored (the link is the previous event's hash, which each event's hash
-- covers); hash and the MAC are base64url; created_at is the integer of milliseconds since the
-- epoch when the time is an ISO 8601 text it converts back to exactly (read back as that text).
-- Events written before keep their v1 form and verify as they did: the table is rebuilt with the
-- same columns and every row copied unchanged.
--
-- What the rebuild changes: created_at has no declared type (so an integer stays one and an older
-- row's text stays text); idempotency_key may be NULL (a v2 row) and its uniqueness is a partial
-- index over the v1 rows only; id is a plain unique column instead of the primary key (a rowid
-- table either way, so backups page it by rowid as before). The indexes kept are the ones queries
-- use: audit_events_seq (every read by seq, sealing included), audit_events_unsealed (the
-- sealers), audit_events_id (the insert's conflict check) and audit_events_idempotency (the
-- insert's check against a v1 event of the same key).
CREATE TABLE audit_events_lean (
  id TEXT NOT NULL,
  installation_id TEXT NOT NULL,
  idempotency_key TEXT,
  action TEXT NOT NULL,
  actor_type TEXT NOT NULL CHECK (actor_type IN ('system', 'api_key', 'admin', 'user')),
  actor_id TEXT NOT NULL,
  target_type TEXT NOT NULL,
  target_id TEXT NOT NULL,
  details_json TEXT NOT NULL DEFAULT '{}',
  created_at NOT NULL,
  seq INTEGER,
  prev_hash TEXT,
  hash TEXT,
  entry_mac TEXT
);

INSERT INTO audit_events_lean (rowid, id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at, seq, prev_hash, hash, entry_mac)
SELECT rowid, id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at, seq, prev_hash, hash, entry_mac FROM audit_events;

DROP TABLE audit_events;
ALTER TABLE audit_events_lean RENAME TO audit_events;

CREATE UNIQUE INDEX audit_events_id ON audit_events (id);
CREATE UNIQUE INDEX audit_events_idempotency ON audit_events (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX audit_events_seq ON audit_events (installation_id, seq);
CREATE INDEX audit_events_unsealed ON audit_events (installation_id, seq) WHERE hash IS NULL;

-- Every audit event gets the next sequence number of its installation, however it was inserted
-- (as in 0003; the builder of audit rows, src/audit/events.ts, assigns it itself).
CREATE TRIGGER audit_events_assign_seq AFTER INSERT ON audit_events WHEN NEW.seq IS NULL
BEGIN
  UPDATE audit_events SET seq = (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE installation_id = NEW.installation_id)
  WHERE id = NEW.id;
END;
