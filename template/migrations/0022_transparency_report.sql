-- The transparency report (issue 15 §5): its reads start from an index on (installation_id, time)
-- and find every column they group by in the index itself, so a year of an installation's rows is
-- read from the index alone (src/metrics/transparency-queries.ts; the bench checks the plans).
--
-- reports_received: notices received in a period by source and category, and (with id) the join
-- to each notice's first decision (time to act).
-- decisions_report_first: a notice's first decision before the period's end, from the index alone.
-- decisions_period: decisions recorded in a period by source, category, ground, detection,
-- automation and restrictions; run_id for the versions that decided with automation.

CREATE INDEX reports_received ON reports (installation_id, created_at, source, category, id);
CREATE INDEX decisions_period ON decisions (installation_id, created_at, source_type, policy_category, ground, automated_detection, automated_decision, restrictions_json, run_id);
CREATE INDEX decisions_report_first ON decisions (report_id, created_at, installation_id) WHERE report_id IS NOT NULL;
