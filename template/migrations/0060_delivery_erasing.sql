-- A moved delivery (its payload in its R2 object, delivery-archive.ts) whose erasure committed
-- before the object got the tombstone is marked `payload_digest = 'erasing'` in the erasure's own
-- batch; the step after the batch, or else the schedule (enforcement.delivery_erasures), writes
-- the tombstone into the object and sets `erased`. The schedule finds them through this index,
-- which holds only those (empty nearly always).
--
-- Storage tier: an index of the hot tier's webhook_deliveries.
CREATE INDEX webhook_deliveries_erasing ON webhook_deliveries (installation_id) WHERE payload_digest = 'erasing';
