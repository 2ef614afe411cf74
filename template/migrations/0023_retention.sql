-- Retention and erasure (issue 15 §6).
--
-- retention_settings: per installation, how many days the personal data of a closed case is kept
-- (no row: the default, 365). At least 184 days, so that nothing is erased while an appeal against
-- the case's last decision may still be filed (Art. 20: six months).
--
-- reports / appeals: `personal_data_erased_at` says when the sealed blob was replaced by the sealed
-- tombstone (the column stays NOT NULL; the summary columns stay). `reporter_key`,
-- `subject_owner_key` and `appellant_key` are keyed hashes (HMAC under a key derived from
-- REPORT_MASTER_KEY) of the ids sealed in the blob, so a named person's rows are found without
-- opening every report; `person_keys_version` is NULL until a row is indexed (written at intake
-- from now on; rows written before are indexed by the schedule).
--
-- cases.personal_data_erased_at: set once every report of the case is erased (a new report clears
-- it), so the sweep's range skips cases it has finished.

CREATE TABLE retention_settings (
  installation_id TEXT PRIMARY KEY REFERENCES installations(id),
  personal_data_days INTEGER NOT NULL CHECK (personal_data_days BETWEEN 184 AND 3650),
  updated_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

ALTER TABLE reports ADD COLUMN personal_data_erased_at TEXT;
ALTER TABLE reports ADD COLUMN reporter_key TEXT;
ALTER TABLE reports ADD COLUMN subject_owner_key TEXT;
ALTER TABLE reports ADD COLUMN person_keys_version INTEGER;
ALTER TABLE appeals ADD COLUMN personal_data_erased_at TEXT;
ALTER TABLE cases ADD COLUMN personal_data_erased_at TEXT;
ALTER TABLE appeals ADD COLUMN appellant_key TEXT;
ALTER TABLE appeals ADD COLUMN person_keys_version INTEGER;

CREATE INDEX reports_reporter_key ON reports (installation_id, reporter_key) WHERE reporter_key IS NOT NULL;
CREATE INDEX reports_subject_owner_key ON reports (installation_id, subject_owner_key) WHERE subject_owner_key IS NOT NULL;
CREATE INDEX reports_person_keys_pending ON reports (created_at) WHERE person_keys_version IS NULL;
CREATE INDEX reports_retained ON reports (installation_id, case_id) WHERE personal_data_erased_at IS NULL;
CREATE INDEX appeals_appellant_key ON appeals (installation_id, appellant_key) WHERE appellant_key IS NOT NULL;
CREATE INDEX appeals_person_keys_pending ON appeals (created_at) WHERE person_keys_version IS NULL;
-- The retention sweep's range (cases not yet erased by last report, across installations), and what the closed-case
-- test reads per case: its reports' tasks, its appeals' runs.
CREATE INDEX cases_retention ON cases (last_reported_at) WHERE personal_data_erased_at IS NULL;
CREATE INDEX human_tasks_report ON human_tasks (installation_id, report_id) WHERE report_id IS NOT NULL;
CREATE INDEX human_tasks_appeal ON human_tasks (installation_id, appeal_id) WHERE appeal_id IS NOT NULL;
CREATE INDEX workflow_runs_appeal ON workflow_runs (appeal_id) WHERE appeal_id IS NOT NULL;
