-- Hash exchanges: the mirror's index is the bank's, not one follow's, and a sync's lease is a token.
-- Hot tier only, as 0045 says (live configuration and the mirror's index; never archived, not
-- in backups).
--
-- The index rows (which hash each of the exchange's entries put in the bank) now belong to the
-- bank and the exchange's kind: a bank that follows the same exchange again (new base URL,
-- filters, or unfollowed and followed again) still knows the entries it holds, so the exchange's
-- later tombstones (NCMEC's deletedImage names only the entry's id) still take them out. The rows
-- stay while the bank does; the schedule deletes them once the bank is deleted. Rebuilt from
-- the old rows: a bank's active follow's row wins over an ended one's for the same entry.
CREATE TABLE hash_exchange_entries_by_bank (
  bank_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  external_id TEXT NOT NULL,
  hash TEXT NOT NULL,
  -- What the exchange's feedback names, when it is not the entry id (ThreatExchange: the
  -- entry's first descriptor, which a reaction is posted to); NULL otherwise.
  ref TEXT,
  PRIMARY KEY (bank_id, kind, external_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO hash_exchange_entries_by_bank (bank_id, kind, external_id, hash, ref)
  SELECT f.bank_id, f.kind, e.external_id, e.hash, e.ref FROM hash_exchange_entries e JOIN hash_exchange_follows f ON f.id = e.follow_id
  ORDER BY f.state = 'active' DESC, f.created_at DESC;
DROP TABLE hash_exchange_entries;
ALTER TABLE hash_exchange_entries_by_bank RENAME TO hash_exchange_entries;
-- "Does another entry of this exchange still hold this hash in the bank" before the hash leaves it.
CREATE INDEX hash_exchange_entries_hash ON hash_exchange_entries (bank_id, kind, hash);

-- The sync holding the follow: a random token taken with lease_until, renewed before every page;
-- every write of a sync (its index rows, its cursor, its end) is conditional on still holding it,
-- so a sync whose lease lapsed and was taken by another can neither move the cursor back nor
-- clear the other's lease.
ALTER TABLE hash_exchange_follows ADD COLUMN lease_token TEXT;
-- The schedule's cleanup: the follows of a bank (any state), newest last.
CREATE INDEX hash_exchange_follows_bank_all ON hash_exchange_follows (bank_id, created_at);
