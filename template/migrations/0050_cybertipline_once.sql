-- One CyberTipline report per reported report, and no second /submit whose first may have opened
-- one (enforcement/cybertipline/submissions.ts).
--
-- A report has at most one submission that is not rejected: a second confirmation, a retried POST
-- or another run's step gets the first (an API caller a 409 `cybertipline.already_reported`).
CREATE UNIQUE INDEX cybertipline_submissions_report_once ON cybertipline_submissions (installation_id, report_id) WHERE state <> 'rejected';

-- submit_sent_at: written before the /submit request, cleared only when NCMEC answers with a
-- refusal (nothing opened). A pass that finds it set with no ncmec_report_id does not know whether
-- NCMEC opened a report, and stops (`cybertipline.submit_outcome_unknown`) until an admin says
-- which (POST /cybertipline/reports/:id/reconcile). A few bytes on a row of the hot tier.
ALTER TABLE cybertipline_submissions ADD COLUMN submit_sent_at TEXT;
