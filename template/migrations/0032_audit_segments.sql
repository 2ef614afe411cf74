-- Sealed audit history leaves D1 for R2 (AUDIT_ANCHORS) in segments: immutable objects of
-- canonical JSON lines, each ending at a keyed checkpoint (src/audit/segments.ts). D1 keeps one row
-- per segment: its seq range, the hash of its first and last event and the SHA-256 and size of its
-- object, so a deleted, replaced or edited object fails full verification, and the first event
-- left in D1 links to last_hash of the newest segment.
CREATE TABLE audit_segments (
  installation_id TEXT NOT NULL,
  from_seq INTEGER NOT NULL CHECK (from_seq >= 1),
  to_seq INTEGER NOT NULL,
  first_hash TEXT NOT NULL,
  last_hash TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, from_seq),
  CHECK (to_seq >= from_seq)
);
