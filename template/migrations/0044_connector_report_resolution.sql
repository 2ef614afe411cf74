-- Mastodon's side of a report a connector took in: when it was resolved there, and how — the
-- Mastodon report itself (`report`: a report.updated webhook with action_taken, or the connector
-- resolving it) or an account action, which resolves every open report about that account.
ALTER TABLE connector_reports ADD COLUMN resolved_at TEXT;
ALTER TABLE connector_reports ADD COLUMN resolved_by TEXT;
-- The connector's reports about one account: which accounts it may act on (only those its own
-- reports named) and which reports an account action resolves.
CREATE INDEX connector_reports_account ON connector_reports (connector_id, target_account_id);
