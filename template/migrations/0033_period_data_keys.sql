-- Data keys scoped to a period: personal data is sealed under the key of its installation and
-- calendar month (UTC, 'YYYY-MM'), created on first use. Retention erases a period by destroying
-- its keys: the wrapped material is emptied and the row kept as a tombstone (destroyed_at), so
-- immutable copies (archived runs, backups, Time Travel) hold ciphertext nobody can open.
-- Keys without a period are the per-installation keys of before (and of secrets): never destroyed.
ALTER TABLE data_keys ADD COLUMN period TEXT;
ALTER TABLE data_keys ADD COLUMN destroyed_at TEXT;
-- One sealing key per installation and period (rotation turns it decrypt-only; the next seal makes another).
CREATE UNIQUE INDEX data_keys_period_active ON data_keys (installation_id, period) WHERE period IS NOT NULL AND state = 'active';
-- The key sweep's selection: periods whose keys still exist.
CREATE INDEX data_keys_period_live ON data_keys (period, installation_id) WHERE period IS NOT NULL AND destroyed_at IS NULL;
-- The key sweep's test "is anything made before the period's end still not erased": one seek each
-- (reports and appeals not erased are few next to the erased ones of years past).
CREATE INDEX reports_unerased_created ON reports (installation_id, created_at) WHERE personal_data_erased_at IS NULL;
CREATE INDEX appeals_unerased_created ON appeals (installation_id, created_at) WHERE personal_data_erased_at IS NULL;
