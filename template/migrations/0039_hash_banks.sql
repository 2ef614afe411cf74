-- Hash banks: lists of known media hashes (PDQ) that reports' media are matched against. D1 keeps
-- each bank's configuration only (about 200 bytes a row); its entries live in Durable Object
-- shards with SQLite storage (media/pdq-index-shard.ts), one per (bank, shard), which hold the
-- multi-index that makes a match fast at millions of entries.
CREATE TABLE hash_banks (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('pdq')),
  -- Largest Hamming distance (bits of 256) that counts as a match.
  threshold INTEGER NOT NULL CHECK (threshold BETWEEN 0 AND 63),
  -- Hashes of lower quality (0-100) are neither stored nor matched.
  quality_floor INTEGER NOT NULL CHECK (quality_floor BETWEEN 0 AND 100),
  -- Fixed at creation: an entry's shard is a function of its hash.
  shards INTEGER NOT NULL CHECK (shards BETWEEN 1 AND 64),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
-- Serves the installation's list (by name) and keeps names unique per installation; a bank is
-- read by id with its installation_id checked against the row.
CREATE UNIQUE INDEX hash_banks_installation_name ON hash_banks (installation_id, name);

-- Preservation holds: a case whose reports' contents must be kept (a CyberTipline report's
-- contents for one year, 18 U.S.C. § 2258A(h) as amended by the REPORT Act of 2024; a legal hold).
-- While a hold is active (not released, held_until ahead) retention erases none of the case's
-- personal data, nor does an erasure request. Released only by an audited admin action. ~250 bytes
-- a row, a few per installation.
CREATE TABLE preservation_holds (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  case_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  held_until TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  released_at TEXT,
  released_by TEXT,
  release_reason TEXT
);
-- Retention's "is this case held" (per case, active holds only) and a case's list of holds.
CREATE INDEX preservation_holds_case ON preservation_holds (case_id, released_at);
