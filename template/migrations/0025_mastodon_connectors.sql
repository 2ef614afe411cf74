-- Connectors (issue 16 §4): a community product plugged in without an integration of its own.
-- A Mastodon connector takes in the server's report.created admin webhook at its own URL
-- (verified with its HMAC secret) and delivers action types through the server's admin API.
-- Both secrets are sealed (report-crypto, contexts connector:<id>:token / :webhook_secret); the
-- connector's deliveries use the webhook_endpoints row it owns (url connector://<id>), so they
-- share the outbox, the retries and the dead letters of every webhook.
CREATE TABLE connectors (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  kind TEXT NOT NULL CHECK (kind IN ('mastodon')),
  name TEXT NOT NULL,
  base_url TEXT NOT NULL,
  endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
  -- NULL once the connector is deleted: nothing can be signed or sent with it any more.
  access_token_sealed TEXT,
  webhook_secret_sealed TEXT,
  -- { categories: {spam, legal, violation, other}, rules: {<rule id>: category}, actions: {<action type key>: verb}, notifyByEmail }
  config_json TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL CHECK (state IN ('active', 'deleted')),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  deleted_at TEXT
);
CREATE INDEX connectors_installation ON connectors (installation_id, created_at);
CREATE UNIQUE INDEX connectors_active_name ON connectors (installation_id, name) WHERE state = 'active';

-- Which report of ours a Mastodon report became, and the account and report the admin API acts on.
-- One row per Mastodon report and connector: a replayed webhook finds it and takes in nothing.
CREATE TABLE connector_reports (
  connector_id TEXT NOT NULL REFERENCES connectors(id),
  remote_report_id TEXT NOT NULL,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  report_id TEXT NOT NULL REFERENCES reports(id),
  target_account_id TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (connector_id, remote_report_id)
);
CREATE INDEX connector_reports_report ON connector_reports (installation_id, report_id);
