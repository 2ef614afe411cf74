-- A workflow task's step is named by its id: a workflow task's id is always `<step id>:task` (a
-- human_task node's, or a handoff's to a queue), so step_run_id repeated what the id says (about 37
-- bytes a row, and as many again in its unique index) and, by its foreign key, kept the review
-- step's row in D1 as an anchor after the run's archive moved the rest of its steps to R2. Tasks
-- written from now on store NULL there; readers take the stored step_run_id when there is one, else
-- (origin 'workflow') the id without its `:task` suffix (cases/queues/task-ids.ts), so rows written
-- before, which keep theirs, read alike. One task per step stays guaranteed by the primary key: the
-- insert's conflict target is the id, a function of the step, which a row of the earlier form for
-- the same step has too. QA and golden tasks keep step_run_id NULL and have no step, as before.
--
-- The table's CHECK required a workflow task's step_run_id; SQLite cannot change a CHECK, so
-- human_tasks is rebuilt with it saying instead that a workflow task names its step, stored or by
-- its id. Three tables reference human_tasks by foreign key (qa_reviews, golden_items,
-- review_exposure): renaming human_tasks rewrites their references to the old name, and dropping
-- the old table while they still name it would leave violations the commit refuses, so each is
-- rebuilt too, referencing the new human_tasks, before the old one is dropped (nothing references
-- them). Every table is one INSERT … SELECT of its rows as they are. human_tasks is hot tier (a
-- task leaves D1 with its case once the installation's hot window has passed), so the copy is of
-- the window's tasks, about one a reviewed lifecycle; the three others hold a few rows per sampled,
-- golden or exposure-tracked task. The indexes are recreated as they were after migration 0064.
--
-- step_run_id keeps its UNIQUE (a NULL's entry in it is about 8 bytes): the foreign key's check
-- when a step row is deleted and the run archive's "still pointed at" test read it for rows of the
-- earlier form, and the previous release's Worker, live between this migration and the deployment
-- that follows it, still finds the conflict target its insert names.
PRAGMA defer_foreign_keys = true;

DROP INDEX human_tasks_run;
DROP INDEX human_tasks_queue_listing;
DROP INDEX human_tasks_legacy_context;
DROP INDEX human_tasks_lease;
DROP INDEX human_tasks_open_due;
DROP INDEX human_tasks_priority_lane;
DROP INDEX human_tasks_appeal;
DROP INDEX human_tasks_exposure_unfolded;
DROP INDEX human_tasks_queue_ended;
DROP INDEX human_tasks_report;
DROP INDEX human_tasks_folded_exposure;
ALTER TABLE human_tasks RENAME TO human_tasks_before_0068;
CREATE TABLE human_tasks (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  report_id TEXT,
  appeal_id TEXT,
  run_id TEXT REFERENCES workflow_runs(id),
  step_run_id TEXT UNIQUE REFERENCES workflow_step_runs(id),
  task_type TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'claimed', 'completed', 'expired', 'cancelled')),
  queue_id TEXT,
  context_json TEXT NOT NULL,
  context_digest TEXT NOT NULL,
  response_schema_json TEXT NOT NULL,
  due_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  completed_at TEXT,
  priority INTEGER NOT NULL DEFAULT 0,
  expires_at TEXT,
  claimed_by TEXT,
  claimed_at TEXT,
  lease_expires_at TEXT,
  response_json TEXT,
  completed_by TEXT,
  context_sealed TEXT,
  origin TEXT NOT NULL DEFAULT 'workflow' CHECK (origin IN ('workflow', 'qa', 'golden')),
  priority_lane TEXT CHECK (priority_lane IN ('trusted_flagger')),
  completed_by_person INTEGER,
  exposure_category TEXT,
  response_schema_number INTEGER,
  CHECK (origin <> 'workflow' OR (run_id IS NOT NULL AND (step_run_id IS NOT NULL OR substr(id, -5) = ':task')))
);
INSERT INTO human_tasks (
  id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, context_json, context_digest, response_schema_json,
  due_at, created_at, updated_at, completed_at, priority, expires_at, claimed_by, claimed_at, lease_expires_at, response_json, completed_by, context_sealed,
  origin, priority_lane, completed_by_person, exposure_category, response_schema_number
) SELECT
  id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, context_json, context_digest, response_schema_json,
  due_at, created_at, updated_at, completed_at, priority, expires_at, claimed_by, claimed_at, lease_expires_at, response_json, completed_by, context_sealed,
  origin, priority_lane, completed_by_person, exposure_category, response_schema_number
FROM human_tasks_before_0068;

DROP INDEX qa_reviews_installation;
ALTER TABLE qa_reviews RENAME TO qa_reviews_before_0068;
CREATE TABLE qa_reviews (
  qa_task_id TEXT PRIMARY KEY REFERENCES human_tasks(id),
  installation_id TEXT NOT NULL REFERENCES installations(id),
  original_task_id TEXT NOT NULL UNIQUE REFERENCES human_tasks(id),
  queue_id TEXT NOT NULL,
  category TEXT,
  compare_field TEXT NOT NULL,
  original_reviewer TEXT NOT NULL,
  original_label TEXT NOT NULL,
  original_completed_at TEXT NOT NULL,
  qa_reviewer TEXT,
  qa_label TEXT,
  agreed INTEGER CHECK (agreed IN (0, 1)),
  qa_completed_at TEXT,
  created_at TEXT NOT NULL,
  original_principal TEXT
);
INSERT INTO qa_reviews (
  qa_task_id, installation_id, original_task_id, queue_id, category, compare_field, original_reviewer, original_label, original_completed_at,
  qa_reviewer, qa_label, agreed, qa_completed_at, created_at, original_principal
) SELECT
  qa_task_id, installation_id, original_task_id, queue_id, category, compare_field, original_reviewer, original_label, original_completed_at,
  qa_reviewer, qa_label, agreed, qa_completed_at, created_at, original_principal
FROM qa_reviews_before_0068;
DROP TABLE qa_reviews_before_0068;

DROP INDEX golden_items_installation;
DROP INDEX golden_items_source;
ALTER TABLE golden_items RENAME TO golden_items_before_0068;
CREATE TABLE golden_items (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  queue_id TEXT NOT NULL REFERENCES queues(id),
  task_id TEXT NOT NULL UNIQUE REFERENCES human_tasks(id),
  source_task_id TEXT NOT NULL REFERENCES human_tasks(id),
  category TEXT,
  compare_field TEXT NOT NULL,
  answer_json TEXT NOT NULL,
  answer_label TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  completed_by TEXT,
  response_label TEXT,
  correct INTEGER CHECK (correct IN (0, 1)),
  completed_at TEXT
);
INSERT INTO golden_items (
  id, installation_id, queue_id, task_id, source_task_id, category, compare_field, answer_json, answer_label, created_by, created_at, completed_by, response_label, correct, completed_at
) SELECT
  id, installation_id, queue_id, task_id, source_task_id, category, compare_field, answer_json, answer_label, created_by, created_at, completed_by, response_label, correct, completed_at
FROM golden_items_before_0068;
DROP TABLE golden_items_before_0068;

DROP INDEX review_exposure_reviewer;
DROP INDEX review_exposure_task;
ALTER TABLE review_exposure RENAME TO review_exposure_before_0068;
CREATE TABLE review_exposure (
  id TEXT PRIMARY KEY,
  installation_id TEXT NOT NULL REFERENCES installations(id),
  task_id TEXT NOT NULL REFERENCES human_tasks(id),
  reviewer TEXT NOT NULL,
  category TEXT NOT NULL,
  started_at TEXT NOT NULL,
  lease_expires_at TEXT NOT NULL,
  ended_at TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (installation_id, task_id, reviewer, started_at)
);
INSERT INTO review_exposure (id, installation_id, task_id, reviewer, category, started_at, lease_expires_at, ended_at, created_at)
SELECT id, installation_id, task_id, reviewer, category, started_at, lease_expires_at, ended_at, created_at FROM review_exposure_before_0068;
DROP TABLE review_exposure_before_0068;

DROP TABLE human_tasks_before_0068;

CREATE INDEX human_tasks_run ON human_tasks (run_id);
CREATE INDEX human_tasks_queue_listing ON human_tasks (installation_id, queue_id, state, due_at, priority DESC, id);
CREATE INDEX human_tasks_legacy_context ON human_tasks (created_at) WHERE context_sealed IS NULL;
CREATE INDEX human_tasks_lease ON human_tasks (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX human_tasks_open_due ON human_tasks (installation_id, due_at) WHERE state IN ('open', 'claimed');
CREATE INDEX human_tasks_priority_lane ON human_tasks (installation_id, queue_id, state, due_at, priority DESC, id) WHERE priority_lane IS NOT NULL;
CREATE INDEX human_tasks_appeal ON human_tasks (installation_id, appeal_id) WHERE appeal_id IS NOT NULL;
CREATE INDEX human_tasks_exposure_unfolded ON human_tasks (updated_at) WHERE exposure_category IS NULL AND claimed_at IS NOT NULL AND state IN ('completed', 'expired', 'cancelled');
CREATE INDEX human_tasks_queue_ended ON human_tasks (queue_id, updated_at) WHERE state IN ('completed', 'expired', 'cancelled');
CREATE INDEX human_tasks_report ON human_tasks (report_id) WHERE report_id IS NOT NULL;
CREATE INDEX human_tasks_folded_exposure ON human_tasks (claimed_by, claimed_at) WHERE exposure_category > '';
CREATE INDEX qa_reviews_installation ON qa_reviews (installation_id, qa_completed_at);
CREATE INDEX golden_items_installation ON golden_items (installation_id, completed_at);
CREATE INDEX golden_items_source ON golden_items (source_task_id);
CREATE INDEX review_exposure_reviewer ON review_exposure (installation_id, reviewer, started_at);
CREATE INDEX review_exposure_task ON review_exposure (task_id);
