-- Redress (issue 15 §3, §4; DSA Art. 17 and 20): statements to the affected user, complaint
-- outcomes to appellants, the installation's redress settings, appeals decided by automation and
-- the decisions an appeal reversed.
--
-- redress_settings: per installation. `statements_enabled` (default on when no row exists) sends
-- the affected user a statement of reasons after every restricting decision. `settlement_bodies_json`
-- is the list of out-of-court dispute settlement bodies (Art. 21) offered in every statement:
-- [{ "name", "url", "languages"? }]. `complaint_url`: where a complaint is filed (optional).
-- redress_messages: one row per message the platform sent (or could not send) about redress:
-- kind `statement_of_reasons` (source_id = the decision) or `complaint_outcome` (source_id = the
-- appeal). `state` queued (deliveries written) or not_sent with `not_sent_reason` (no recipient,
-- no message.send endpoint, switched off); `notice_at` is when the notice was given, from which
-- the six-month complaint period runs. No personal data: the recipient and body are only in the
-- sealed delivery payloads; `body_digest` proves which text went out.
-- appeals.resolved_by_automation: 1 when the appeal was decided by an API key (not a console
-- user, not a review task); Art. 20(6) and the transparency report count these.
-- decision_reversals: a decision an appeal overturned. The Transparency Database has no update
-- endpoint, so the reversal is recorded here with the statement's database uuid
-- (`statement_uuid`, NULL until the statement's submission has one).

CREATE TABLE redress_settings (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  statements_enabled INTEGER NOT NULL DEFAULT 1 CHECK (statements_enabled IN (0, 1)),
  settlement_bodies_json TEXT NOT NULL DEFAULT '[]',
  complaint_url TEXT,
  updated_at TEXT NOT NULL
);

CREATE TABLE redress_messages (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  kind TEXT NOT NULL CHECK (kind IN ('statement_of_reasons', 'complaint_outcome')),
  source_id TEXT NOT NULL,
  decision_id TEXT,
  appeal_id TEXT,
  report_id TEXT,
  language TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'not_sent')),
  not_sent_reason TEXT,
  delivery_ids_json TEXT NOT NULL DEFAULT '[]',
  body_digest TEXT,
  notice_at TEXT NOT NULL,
  complaint_deadline TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (installation_id, kind, source_id)
);
CREATE INDEX redress_messages_decision ON redress_messages (installation_id, decision_id);

ALTER TABLE appeals ADD COLUMN resolved_by_automation INTEGER NOT NULL DEFAULT 0;
-- The schedule's catch-up for outcome messages reads recently decided appeals of every installation.
CREATE INDEX appeals_decided_all ON appeals (decided_at) WHERE decided_at IS NOT NULL;

CREATE TABLE decision_reversals (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  decision_id TEXT NOT NULL,
  appeal_id TEXT NOT NULL,
  statement_uuid TEXT,
  resolved_by_automation INTEGER NOT NULL DEFAULT 0,
  reversed_at TEXT NOT NULL,
  UNIQUE (installation_id, decision_id)
);
CREATE INDEX decision_reversals_recent ON decision_reversals (installation_id, reversed_at);
