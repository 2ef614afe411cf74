-- A delivery's first attempt on its own row. Until now every attempt wrote a webhook_attempts row
-- beside the delivery's update, in one batch; most deliveries are delivered at their first attempt,
-- so from now on that attempt is kept in these columns of the delivery row instead, and only later
-- attempts write webhook_attempts rows: a delivered-first-time delivery costs one row and one
-- statement less. The columns belong to the delivery's tier (lib/storage-tiers.ts, docs/SCALING.md):
-- hot while the delivery is pending and for an hour after it settled, then moved to the delivery's
-- R2 object with its other attempts (enforcement/delivery-archive.ts), which clears them.
--
-- - first_status_code, first_error, first_duration_ms, first_started_at, first_via: the columns of
--   webhook_attempts (status_code, error, duration_ms, started_at, via) for attempt 1. NULL while no
--   attempt was recorded, and for a delivery whose first attempt is an older webhook_attempts row.
--   The attempt's id is derived (`<delivery id>:1`), not stored.
--
-- Rows of webhook_attempts written before this migration stay where they are and every reader takes
-- either form (lib/delivery-attempts.ts); no row is moved or rewritten here. Archives and backups
-- still carry every attempt as a webhook_attempts row.
ALTER TABLE webhook_deliveries ADD COLUMN first_status_code INTEGER;
ALTER TABLE webhook_deliveries ADD COLUMN first_error TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN first_duration_ms INTEGER;
ALTER TABLE webhook_deliveries ADD COLUMN first_started_at TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN first_via TEXT;
