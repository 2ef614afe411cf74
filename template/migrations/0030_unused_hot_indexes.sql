-- Indexes on hot tables that no query needs. Every row written to these tables also writes an
-- entry in each of its indexes (an audit event wrote five), so an index earns its place only by a
-- query it serves (docs/ARCHITECTURE.md, "Indexes on hot tables", lists the ones kept and why).
-- Checked with EXPLAIN QUERY PLAN of every statement in src/ against a database with all migrations
-- applied, with and without each index, foreign-key checks included (deleting a parent row looks
-- up its children through an index on the child's key: workflow_runs_parent, which no query reads,
-- stays for that; it is partial and costs a run without a parent nothing).

-- The trail is read by seq (listing, sealing, verification, the chain sweep: audit_events_seq and
-- audit_events_unsealed) or per installation as a whole (backup, deletion: any index that starts
-- with installation_id); nothing reads it in created_at order.
DROP INDEX IF EXISTS audit_events_installation;

-- No query looks events up by target: the listing's target filter is an optional filter applied
-- while it walks the trail by seq, and report timelines read the records themselves, not events.
DROP INDEX IF EXISTS audit_events_target;

-- Nothing lists a version's runs in created_at order; the lookups by workflow_version_id (the
-- shadow figures, the foreign-key check when a version is deleted) use workflow_runs_version_mode
-- (workflow_version_id, authority_mode, state), which starts with the same column.
DROP INDEX IF EXISTS workflow_runs_version;

-- A prefix of decisions_report_first (report_id, created_at, installation_id; partial on report_id
-- IS NOT NULL, which every lookup by report_id implies): each query by report_id, and the
-- foreign-key check when a report is deleted, uses that one as well, covering included.
DROP INDEX IF EXISTS decisions_report;
