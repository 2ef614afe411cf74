-- Leaner case rows: indexes on reports, cases and human_tasks that another index of the table
-- serves the same way (or, said in the query, better). Every row written also writes an entry in
-- each index of its table (docs/ARCHITECTURE.md, "Indexes on hot tables", lists the ones kept and
-- why). Checked with EXPLAIN QUERY PLAN of the statements in src/ that the planner sent through
-- each index (those reading the table by the index's columns), against a database with all
-- migrations applied, with and without it, foreign-key checks included. No column changes: rows
-- and archived cases read and rehydrate as before.

-- reports_installation (installation_id, created_at DESC, id DESC) and reports_received
-- (installation_id, created_at, source, category, id) start with the same two columns. What used
-- the first now walks the second the same way: the report listing (newest first, its cursor and
-- filters checked per row, as before) and a backtest's reports by time (oldest first), each sorting
-- only the reports that share a created_at (to the millisecond) by id; the evaluation's lookup of
-- given ids covered by either. The rollups and transparency figures already used reports_received.
-- Deleting an installation (the foreign-key check) uses the (installation_id, idempotency_key)
-- unique index, as before.
DROP INDEX IF EXISTS reports_installation;

-- Nothing reads cases in last_reported_at order within an installation (the retention sweep walks
-- cases_retention across installations; a case is read by id, or by its subject through the
-- (installation_id, subject_kind, subject_id) unique index). What cases_recent served by its
-- first column alone (an installation's cases: backup, storage figures, erasure's case update,
-- deleting an installation and its foreign-key check) that unique index serves the same way.
DROP INDEX IF EXISTS cases_recent;

-- A subject's reports are its case's: intake files a report in the one case of its subject (the
-- (installation_id, subject_kind, subject_id) unique index of cases), and neither a report's nor a
-- case's subject ever changes. The subject_history component, the one query that looked reports
-- up by subject, now finds the case by its subject and the case's reports through reports_case.
-- (The report listing's subject filter is checked per row of its walk, as before.)
DROP INDEX IF EXISTS reports_subject;

-- Tasks by due time within an installation: the SLA alerts read live tasks (human_tasks_open_due,
-- partial: a finished task leaves it); the tasks.sla_breaches rollup reads every task due in an
-- hour, now per queue and state through human_tasks_queue_listing (installation_id, queue_id,
-- state, due_at, …: one range per queue and state), and the queue list's counts and oldest due
-- date read each queue's live tasks there too. Nothing else walked human_tasks_due, which held
-- every task, finished ones included.
DROP INDEX IF EXISTS human_tasks_due;

-- Completed tasks by reviewer: no query looks a reviewer's tasks up. The reviewer figures' task
-- times (tasks completed since a date) walked all of an installation's completed tasks in it; they
-- now read each queue's range of human_tasks_queue_completed (installation_id, queue_id,
-- completed_at; partial: completed). A decision's "was this run reviewed" check reads the run's
-- tasks through human_tasks_run; the onboarding checklist's "a task was completed" stops at the
-- first completed task of human_tasks_queue_listing (which holds the state).
DROP INDEX IF EXISTS human_tasks_reviewer;
