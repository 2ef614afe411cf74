-- The audit chain is anchored (issue 12 §7), and webhook delivery is an outbox (issue 12 §6).
--
-- audit_events.entry_mac: a keyed MAC of each event, computed when its statement is built (before
-- the sealer chains it), so an event edited before it is sealed no longer verifies.
-- audit_checkpoints: at each seal, a keyed checkpoint (HMAC under a key derived from the
-- AUDIT_CHECKPOINT_KEY secret, named by key_id so the key can rotate) over the head hash and the
-- number of events; the newest is also kept outside D1 (R2, AUDIT_ANCHORS). verified_at marks the
-- checkpoints a verification reached, so the next incremental verify starts from there.
-- audit_verify_cursors: where the scheduled full verification of each installation has got to
-- (bounded per run, resumed at the next), with a MAC over the position.
ALTER TABLE audit_events ADD COLUMN entry_mac TEXT;

CREATE TABLE audit_checkpoints (
  installation_id TEXT NOT NULL,
  seq INTEGER NOT NULL CHECK (seq >= 1),
  head_hash TEXT NOT NULL,
  key_id TEXT NOT NULL,
  mac TEXT NOT NULL,
  created_at TEXT NOT NULL,
  verified_at TEXT,
  -- After a key rotation the head is signed again under the new key: one row per seq and key.
  PRIMARY KEY (installation_id, seq, key_id)
);

CREATE TABLE audit_verify_cursors (
  installation_id TEXT PRIMARY KEY,
  next_seq INTEGER NOT NULL,
  prev_hash TEXT NOT NULL,
  key_id TEXT NOT NULL,
  mac TEXT NOT NULL,
  pass_started_at TEXT NOT NULL,
  last_result_json TEXT,
  last_finished_at TEXT,
  updated_at TEXT NOT NULL
);

-- The outbox sweep finds pending deliveries whose next attempt is overdue.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
