-- Notices and notifiers (issue 15 §2, DSA Art. 16, 22, 23).
--
-- A reporter id is sealed with the report, so notifiers are known by a keyed hash of it:
-- `notifier_hash` = hex HMAC-SHA-256 under a key derived with HKDF from REPORT_MASTER_KEY and the
-- installation id (cases/notices/notifier-keys.ts), so the same reporter in two installations has unrelated
-- hashes, and nothing here names a person without that secret.
--
-- trusted_flaggers: reporters an installation registered as trusted flaggers (Art. 22), with their
-- area (categories) and the period they are active in. Their notices become `trusted_flagger`.
-- notifier_notices: one row per notice (a report with a reporter id and a source other than
-- voluntary): who sent it (hash), the trusted flagger it was matched to, for precision figures and
-- for the misuse assessment of Art. 23(3).
-- notifier_sanctions: warnings and suspensions of notifiers who sent manifestly unfounded notices
-- (Art. 23(2): a suspension needs a prior warning). The reason an admin gives is sealed.

CREATE TABLE trusted_flaggers (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  name TEXT NOT NULL,
  notifier_hash TEXT NOT NULL,
  categories_json TEXT NOT NULL,
  active_from TEXT NOT NULL,
  active_until TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (installation_id, notifier_hash),
  UNIQUE (installation_id, name)
);

CREATE TABLE notifier_notices (
  report_id TEXT PRIMARY KEY REFERENCES reports(id),
  installation_id TEXT NOT NULL REFERENCES installations(id),
  notifier_hash TEXT NOT NULL,
  trusted_flagger_id TEXT REFERENCES trusted_flaggers(id),
  category TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX notifier_notices_notifier ON notifier_notices (installation_id, notifier_hash, created_at);
CREATE INDEX notifier_notices_flagger ON notifier_notices (installation_id, trusted_flagger_id, created_at) WHERE trusted_flagger_id IS NOT NULL;

CREATE TABLE notifier_sanctions (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  notifier_hash TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('warning', 'suspension')),
  reason_sealed TEXT NOT NULL,
  data_key_id TEXT NOT NULL REFERENCES data_keys(id),
  -- A suspension: the warning it follows, and its period; lifted early by an admin.
  warning_id TEXT REFERENCES notifier_sanctions(id),
  starts_at TEXT NOT NULL,
  ends_at TEXT,
  lifted_at TEXT,
  lifted_by TEXT,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  CHECK ((kind = 'suspension') = (ends_at IS NOT NULL AND warning_id IS NOT NULL))
);
CREATE INDEX notifier_sanctions_notifier ON notifier_sanctions (installation_id, notifier_hash, kind, ends_at);
CREATE INDEX notifier_sanctions_recent ON notifier_sanctions (installation_id, created_at DESC, id DESC);

-- Messages the host sends outside a run (a notice's receipt and decision, Art. 16(4), (5); a
-- notifier's warning and suspension, Art. 23): run and step become optional, `kind` says which,
-- `decision_id` names the decision a message reports. SQLite cannot relax NOT NULL, so the table
-- is rebuilt (nothing references it).
CREATE TABLE messages_0020 (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  run_id TEXT REFERENCES workflow_runs(id),
  step_run_id TEXT UNIQUE REFERENCES workflow_step_runs(id),
  report_id TEXT,
  recipient_kind TEXT NOT NULL,
  template_key TEXT,
  delivery_id TEXT,
  created_at TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT 'workflow' CHECK (kind IN ('workflow', 'notice_receipt', 'notice_decision', 'notifier_warning', 'notifier_suspension')),
  decision_id TEXT,
  CHECK ((kind = 'workflow') = (run_id IS NOT NULL AND step_run_id IS NOT NULL))
);
INSERT INTO messages_0020 (id, installation_id, run_id, step_run_id, report_id, recipient_kind, template_key, delivery_id, created_at, kind)
SELECT id, installation_id, run_id, step_run_id, report_id, recipient_kind, template_key, delivery_id, created_at, 'workflow' FROM messages;
DROP TABLE messages;
ALTER TABLE messages_0020 RENAME TO messages;
CREATE INDEX messages_report ON messages (installation_id, report_id, created_at);

-- Trusted flaggers' notices come first in queues (Art. 22(1)): their tasks are in a priority lane
-- that /queues/:id/next serves before the rest, each lane in SLA order. Open tasks of such notices
-- already waiting join the lane.
ALTER TABLE human_tasks ADD COLUMN priority_lane TEXT CHECK (priority_lane IN ('trusted_flagger'));
CREATE INDEX human_tasks_priority_lane ON human_tasks (installation_id, queue_id, state, due_at, priority DESC, id) WHERE priority_lane IS NOT NULL;
UPDATE human_tasks SET priority_lane = 'trusted_flagger'
WHERE state IN ('open', 'claimed') AND appeal_id IS NULL AND origin = 'workflow'
  AND report_id IN (SELECT id FROM reports WHERE source = 'trusted_flagger');
