-- Hash exchanges: a PDQ hash bank that follows an exchange (ThreatExchange, NCMEC hash sharing,
-- StopNCII) pulls its updates on the schedule (media/exchanges/). Hot tier only: this is live
-- configuration and the mirror's index, not history; nothing here is archived to R2, and both
-- tables are left out of backups (a restored installation follows again with its credentials).

-- One row per following bank (~600 bytes: the sealed credentials dominate). The cursor is
-- written in the same batch as the page's entries in hash_exchange_entries, so it never runs ahead
-- of what was applied.
CREATE TABLE hash_exchange_follows (
  -- A new id each time a bank starts following, so entries of an earlier follow never count.
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL,
  bank_id TEXT NOT NULL,
  -- active: pulled on the schedule; ended: unfollowed (or replaced, or its bank deleted), its
  -- mirror index rows deleted by the schedule a slice at a time, then the row itself.
  state TEXT NOT NULL CHECK (state IN ('active', 'ended')),
  kind TEXT NOT NULL CHECK (kind IN ('threatexchange', 'ncmec', 'stopncii')),
  base_url TEXT NOT NULL,
  -- The exchange's credentials (a token, a user and password, keys), sealed under the
  -- installation's data key; never returned, never logged.
  credentials_sealed TEXT NOT NULL,
  -- Filters the exchange understands (ThreatExchange: privacyGroup), JSON.
  filters_json TEXT NOT NULL,
  interval_minutes INTEGER NOT NULL CHECK (interval_minutes BETWEEN 1 AND 1440),
  -- Opt-in: confirmed matches may be sent back to the exchange (audited).
  contribute INTEGER NOT NULL CHECK (contribute IN (0, 1)),
  -- Where the next page starts (JSON, the exchange's own cursor); NULL before the first page.
  cursor_json TEXT,
  -- A sync holds the follow until then (one sync at a time; a killed one frees it when it lapses).
  lease_until TEXT,
  next_sync_at TEXT NOT NULL,
  last_sync_at TEXT,
  last_success_at TEXT,
  failures INTEGER NOT NULL DEFAULT 0,
  last_error_code TEXT,
  last_error_status INTEGER,
  last_error_at TEXT,
  pages INTEGER NOT NULL DEFAULT 0,
  upserts INTEGER NOT NULL DEFAULT 0,
  deletes INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
-- A bank follows one exchange at a time; read by bank (and installation, checked against the row).
CREATE UNIQUE INDEX hash_exchange_follows_bank ON hash_exchange_follows (bank_id) WHERE state = 'active';
-- The sweep's "which follows are due" (active, next_sync_at <= now, oldest first) and "which ended
-- follows still have index rows" (state = 'ended').
CREATE INDEX hash_exchange_follows_due ON hash_exchange_follows (state, next_sync_at);

-- The mirror's index: which hash each of the exchange's entries put in the bank (~130 bytes a
-- row, one per live entry of the exchange). Needed because NCMEC deletes by entry id alone, and
-- so that a hash two entries share leaves the bank only with the last of them.
CREATE TABLE hash_exchange_entries (
  follow_id TEXT NOT NULL,
  external_id TEXT NOT NULL,
  hash TEXT NOT NULL,
  -- What the exchange's feedback names, when it is not the entry id (ThreatExchange: the
  -- entry's first descriptor, which a reaction is posted to); NULL otherwise.
  ref TEXT,
  PRIMARY KEY (follow_id, external_id)
) WITHOUT ROWID;
-- "Does another entry of this follow still hold this hash" before a hash leaves the bank.
CREATE INDEX hash_exchange_entries_hash ON hash_exchange_entries (follow_id, hash);
