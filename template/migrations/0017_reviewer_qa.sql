-- Reviewer QA and golden items (issue 14 §4).
--
-- human_tasks is rebuilt (SQLite cannot drop a NOT NULL; no table references it): `origin` says
-- where a task came from ('workflow': a human_task node or a handoff; 'qa': a blind second review
-- of a sampled completed task; 'golden': a golden item a lead wrote). Only workflow tasks have a
-- step, so step_run_id (still unique) and run_id may be null: a QA task has neither (it must not
-- lead its reviewer to the original's answer); a golden task keeps its source task's run and
-- report, so that it looks like any other task. `origin` is never shown by the task API.
--
-- qa_settings: per queue, the share of completed tasks sampled for QA, the queue QA tasks go to, and
-- the response field answers are compared on (a response without it is compared whole).
-- qa_reviews: one row per QA task: the original task, who answered it (never shown to the QA
-- reviewer), the compared labels (a response's `outcome` string, else the digest of the whole
-- canonical response) and, once the QA task is completed, whether they agree.
-- golden_items: one row per golden task: the known answer, its label, and the reviewer's result.

PRAGMA defer_foreign_keys = true;

CREATE TABLE human_tasks_new (
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
  CHECK (origin <> 'workflow' OR (run_id IS NOT NULL AND step_run_id IS NOT NULL))
);
INSERT INTO human_tasks_new (
  id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, context_json, context_digest, response_schema_json,
  due_at, created_at, updated_at, completed_at, priority, expires_at, claimed_by, claimed_at, lease_expires_at, response_json, completed_by, context_sealed
) SELECT
  id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, context_json, context_digest, response_schema_json,
  due_at, created_at, updated_at, completed_at, priority, expires_at, claimed_by, claimed_at, lease_expires_at, response_json, completed_by, context_sealed
FROM human_tasks;
DROP TABLE human_tasks;
ALTER TABLE human_tasks_new RENAME TO human_tasks;
CREATE INDEX human_tasks_run ON human_tasks (run_id);
CREATE INDEX human_tasks_queue_listing ON human_tasks (installation_id, queue_id, state, due_at, priority DESC, id);
CREATE INDEX human_tasks_queue_completed ON human_tasks (installation_id, queue_id, completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX human_tasks_legacy_context ON human_tasks (created_at) WHERE context_sealed IS NULL;
CREATE INDEX human_tasks_lease ON human_tasks (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX human_tasks_open_due ON human_tasks (installation_id, due_at) WHERE state IN ('open', 'claimed');
CREATE INDEX human_tasks_ended ON human_tasks (installation_id, updated_at) WHERE state IN ('completed', 'expired', 'cancelled');
CREATE INDEX human_tasks_due ON human_tasks (installation_id, due_at);
CREATE INDEX human_tasks_first_action ON human_tasks (installation_id, COALESCE(claimed_at, completed_at));
CREATE INDEX human_tasks_reviewer ON human_tasks (installation_id, completed_by, completed_at) WHERE state = 'completed';

CREATE TABLE qa_settings (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  queue_id TEXT NOT NULL REFERENCES queues(id),
  qa_queue_id TEXT NOT NULL REFERENCES queues(id),
  rate REAL NOT NULL CHECK (rate >= 0 AND rate <= 1),
  compare_field TEXT NOT NULL DEFAULT 'outcome',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, queue_id),
  CHECK (queue_id <> qa_queue_id)
);

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
  created_at TEXT NOT NULL
);
CREATE INDEX qa_reviews_installation ON qa_reviews (installation_id, qa_completed_at);

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
CREATE INDEX golden_items_installation ON golden_items (installation_id, completed_at);
