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

-- An action's delivery that settles moves its proposal in the same statement: delivered → applied
-- (a proposal cancelled while its request was in flight included: the record follows what the
-- endpoint did), dead → failed (a cancelled one stays cancelled). Until now the delivery's batch
-- sent that update as a statement of its own beside the delivery's; it fires only on the attempt's
-- update that takes the delivery from pending to delivered or dead (enforcement/webhooks.ts), which
-- holds only once per delivery (its guard: still pending, at the attempt count it claimed), so a
-- replay moves nothing. The proposal's `action.applied` / `action.failed` event stays in the same
-- batch, guarded on the proposal's new state (enforcement/actions.ts finishActionDelivery). Rows a
-- restore or a case's return put back are inserted, never updated, and do not fire it.
CREATE TRIGGER webhook_deliveries_settle_action AFTER UPDATE OF state ON webhook_deliveries
WHEN NEW.source_type = 'action' AND OLD.state = 'pending' AND NEW.state IN ('delivered', 'dead')
BEGIN
  UPDATE action_proposals SET state = CASE NEW.state WHEN 'delivered' THEN 'applied' ELSE 'failed' END, updated_at = NEW.updated_at
  WHERE id = NEW.source_id AND (state IN ('delivery_pending', 'approved') OR (NEW.state = 'delivered' AND state = 'cancelled'));
END;
