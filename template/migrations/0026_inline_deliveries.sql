-- Issue 17 §2: an action's first delivery attempt is made inline, from the host that recorded it
-- (off the response path); the DELIVERIES queue carries the retries. Each attempt records which
-- path made it: 'inline' or 'queue' (every attempt before this migration came from the queue).
ALTER TABLE webhook_attempts ADD COLUMN via TEXT NOT NULL DEFAULT 'queue';
