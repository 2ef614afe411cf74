-- A settled webhook delivery (delivered or dead) keeps in D1 only what lists, filters, metrics and
-- the outbox read: its sealed payload and its attempt rows move to one R2 object per delivery,
-- `archive/v1/<installation>/deliveries/<delivery>.json` (enforcement/delivery-archive.ts), an hour
-- after it settled (lib/storage-tiers.ts, DELIVERY_PAYLOAD_HOT_MINUTES; at once with a 0-day window).
-- A moved delivery's `payload_sealed` is the empty text: the column is NOT NULL, and rebuilding the
-- table to relax that would break webhook_attempts' foreign key to it (see 0048).
--
-- Storage tier: an index of the hot tier. Only settled deliveries whose payload is still in D1 are
-- in it, so it holds the last hour's settled deliveries (and any backlog), about 60 bytes each;
-- a delivery leaves it when its payload moves. The move sweep reads it oldest first.
CREATE INDEX webhook_deliveries_settled_hot ON webhook_deliveries (updated_at)
  WHERE state IN ('delivered', 'dead') AND payload_sealed <> '';
