-- Keys per data subject (crypto-shredding). A report's personal data is sealed under its period's
-- data key AND the key of each person it is about (its reporter, its subject's owner), an appeal's
-- under its period's key and its appellant's: opening needs every one of them, so destroying one
-- person's key makes everything sealed for them unreadable wherever a copy went — hot rows, the
-- case archive's immutable R2 objects, exported backups — while another person's data in the same
-- case still opens. Values sealed before keys per person existed keep their period key alone.
--
-- person_data_keys — storage tier: hot, kept (never archived: an archived object needs its key in
-- D1 to open). One row per person an installation sealed something for in a period (calendar month,
-- UTC), ~200 bytes, no index besides its primary key. `person` is 32 hex digits of the person's
-- keyed index (pk1_…, lib/person-keys.ts), so the row names nobody; a sealed value names the key as
-- `psk_<period>_<person>_<generation>`, `generation` being 8 random hex digits drawn when the key is
-- made: a key made again for the same person and period after an erasure has another id, so a
-- value sealed under the destroyed one (a sealing key another isolate still had cached) reads as
-- erased, never as corrupt. The key material is wrapped by the installation's own data key
-- (data_keys, period NULL), itself wrapped by REPORT_MASTER_KEY. Erasure of the person deletes
-- their rows (one seek per period of the installation); the retention key sweep deletes a period's
-- rows when it destroys that period's keys (what they sealed needed the period key as well), so
-- the table holds the distinct people of the retention window.
CREATE TABLE person_data_keys (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  period TEXT NOT NULL,
  person TEXT NOT NULL,
  generation TEXT NOT NULL,
  wrapping_key_id TEXT NOT NULL,
  wrapped_key TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, period, person)
) WITHOUT ROWID;

-- erasure_tombstones — storage tier: kept, platform-wide (not an installation's data: an
-- installation's removal leaves them, a backup does not carry them, a restore does not replace
-- them). One row per person erased on request, ~150 bytes: the person's keyed index and when, no
-- name or id: `erased_at` the latest erasure, `reporter_until` / `owner_until` up to when their
-- reports as reporter / as subject owner (and their appeals) were erased, `keys_until` up to when
-- their keys were destroyed (NULL while something of theirs was held back: a case still being
-- handled, a report someone else filed about them). Written by every erasure, whatever it held
-- back. A restore of a backup taken before the erasure re-applies it as the request did (the same
-- checks of pending work; the keys made until `keys_until` deleted), so a backup never brings an
-- erased person back. A copy of
-- each lives in R2 (AUDIT_ANCHORS, `erasure/<installation>/<index>`), for a database brought back
-- by other means (D1 Time Travel, a copy).
CREATE TABLE erasure_tombstones (
  installation_id TEXT NOT NULL,
  person_index TEXT NOT NULL,
  erased_at TEXT NOT NULL,
  reporter_until TEXT,
  owner_until TEXT,
  keys_until TEXT,
  PRIMARY KEY (installation_id, person_index)
) WITHOUT ROWID;
