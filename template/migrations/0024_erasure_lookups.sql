-- Erasure (issue 15 §6) finds the messages the host sent about a report outside any run (the
-- affected user's statement, a complaint's outcome) by report.
CREATE INDEX redress_messages_report ON redress_messages (installation_id, report_id);
