-- Leaner indexes on the hot tables a report's lifecycle writes (reports, messages, notifier_notices,
-- workflow_runs): each entry held columns no query needs from it. No row is rewritten and no data
-- moves; the rebuilt indexes are built from their tables by this migration (one pass over each, no
-- table rewrite). Every query that read a dropped or narrowed index is checked with EXPLAIN QUERY
-- PLAN in test/query-plans-hot-bytes.test.ts.
--
-- - reports_retained (installation_id, case_id; not erased) is dropped. Its readers (the retention
--   sweep's cases and their reports, erasure's "a case with no report left unerased") name a case,
--   and reports_case (case_id, created_at) finds a case's reports in the same seek; the installation
--   and the erasure mark are checked on the rows, a case's reports being few. Those queries write
--   `+r.installation_id` (no index on the installation alone is a better way in for them). About
--   50 B a report.
-- - messages_report (installation_id, report_id, created_at) becomes (report_id), for the messages
--   that name a report: a report id is unique, and its readers (a report's timeline, erasure of a
--   report's deliveries, the case archive's scope) take all of a report's messages (the timeline
--   sorts its few items itself). About 40 B a message.
-- - notifier_notices_notifier (installation_id, notifier_hash, created_at) loses its leading
--   installation_id: a notifier hash is an HMAC under a key derived for one installation
--   (cases/notices/notifier-keys.ts). 16 B a notice. A notifier's latest notice reads the notices
--   first (CROSS JOIN), not the installation's reports.
-- - workflow_runs_version_mode (workflow_version_id, authority_mode, state) becomes
--   workflow_runs_version (workflow_version_id), which the foreign-key check of a version's
--   deletion needs, and workflow_runs_shadow (workflow_version_id, state, created_at; shadow runs only), which
--   the shadow figures read (automation/shadow-sources.ts). Runs in other modes no longer carry the
--   mode and state in an index entry: about 20 B a run.
DROP INDEX IF EXISTS reports_retained;

DROP INDEX IF EXISTS messages_report;
CREATE INDEX messages_report ON messages (report_id) WHERE report_id IS NOT NULL;

DROP INDEX IF EXISTS notifier_notices_notifier;
CREATE INDEX notifier_notices_notifier ON notifier_notices (notifier_hash, created_at);

DROP INDEX IF EXISTS workflow_runs_version_mode;
CREATE INDEX workflow_runs_version ON workflow_runs (workflow_version_id);
CREATE INDEX workflow_runs_shadow ON workflow_runs (workflow_version_id, state, created_at) WHERE authority_mode = 'shadow';
