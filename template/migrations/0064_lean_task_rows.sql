-- Leaner task rows: a task's response schema is stored once per installation, the completer is not
-- written twice, a sealed context's digest marker is empty, and the indexes of human_tasks drop
-- what no query needs. No row is rewritten: rows written before read as they were (both forms are
-- read), and no data moves; the three new indexes are built from the table by the migration.
--
-- task_response_schemas: one row per distinct response schema of an installation (the schema a
-- human_task or handoff node names, which every task that node opens repeated, 120 bytes and more
-- per task). A task written from now on holds the schema's number in `response_schema_number` and ''
-- in `response_schema_json`; a task written before holds the schema itself and no number. Readers
-- take the numbered schema when there is one, else the row's own (cases/queues/task-records.ts).
-- The number is per installation ((installation_id, number) is the key, and no column is an `id`
-- a restore would check against other installations' rows), so a backup restores it as it was. A schema row is never changed or removed but with its
-- installation: archived tasks (R2) keep their number and find the schema when they come back.
-- Storage tier: hot, for the installation's life; a few rows per installation (one per distinct
-- schema its workflows name), a few hundred bytes each.
--
-- human_tasks.completed_by: a task is completed by the reviewer holding its lease (the completion
-- checks claimed_by), so the completer is the claimant. New completions write '' there, meaning
-- "the claimant" (claimed_by, which a completed task keeps); rows completed before keep the name,
-- and a task the run closed without an answer keeps NULL. Readers: TASK_COMPLETED_BY_SQL.
--
-- human_tasks.context_digest of a sealed context: '' from now on (it said `sealed`, which nothing
-- read; the sealed text authenticates itself). Erasure's `erased` is unchanged.
--
-- Indexes (each checked with EXPLAIN QUERY PLAN in test/task-rows.test.ts):
-- - human_tasks_ended (installation_id, updated_at; ended) and human_tasks_queue_completed
--   (installation_id, queue_id, completed_at; completed) become one human_tasks_queue_ended
--   (queue_id, updated_at; ended). An ended task's updated_at is its last change (nothing updates
--   a task once it has ended), and a completed task's completed_at is that same time, so "ended in
--   an hour" (tasks.ended, the gauges), "completed since" (queue stats' time to complete, the QA
--   figures' task times) read one range per queue of it, as the QA figures already did. A queue
--   belongs to one installation (queue ids are unique), so the installation is checked on the row
--   each of those reads opens anyway.
-- - human_tasks_first_action (installation_id, COALESCE(claimed_at, completed_at)) is dropped. A
--   task has a first action only once claimed (it stays claimed, or it ends: a release or a lapsed
--   lease clears claimed_at) or completed, and that is no later than its last change: the hour's
--   first actions are the queue's claimed tasks (human_tasks_queue_listing) and its tasks ended
--   since the hour began (human_tasks_queue_ended), the range the hour's gauges already walk.
-- - human_tasks_report and human_tasks_folded_exposure lose their leading installation_id: a
--   report id is unique, and a reviewer is an API key's principal (unique) or a console user's
--   email (a few installations at most); every query checks the installation on the row it reads.
--   Deleting an installation (its foreign-key check) still finds its tasks through
--   human_tasks_queue_listing, which keeps installation_id first.
CREATE TABLE task_response_schemas (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  number INTEGER NOT NULL,
  schema_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, number),
  UNIQUE (installation_id, schema_json)
) WITHOUT ROWID;

ALTER TABLE human_tasks ADD COLUMN response_schema_number INTEGER;

DROP INDEX IF EXISTS human_tasks_ended;
DROP INDEX IF EXISTS human_tasks_queue_completed;
DROP INDEX IF EXISTS human_tasks_first_action;
CREATE INDEX human_tasks_queue_ended ON human_tasks (queue_id, updated_at) WHERE state IN ('completed', 'expired', 'cancelled');

DROP INDEX IF EXISTS human_tasks_report;
CREATE INDEX human_tasks_report ON human_tasks (report_id) WHERE report_id IS NOT NULL;

DROP INDEX IF EXISTS human_tasks_folded_exposure;
CREATE INDEX human_tasks_folded_exposure ON human_tasks (claimed_by, claimed_at) WHERE exposure_category > '';
