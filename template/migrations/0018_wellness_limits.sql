-- Wellness limits (issue 14 §5): a daily exposure cap per installation and per category, and the
-- claims it is counted from.
--
-- exposure_caps: minutes of claimed work per reviewer per UTC day; one row per category, and the
-- installation default under category '*'. `cap_minutes` NULL is "no cap" (on a category row it
-- overrides the default); a category without a row takes the default.
-- review_exposure: one row per claim (a reviewer's hold on a task, from the claim until it is
-- completed, released or its lease lapses), with the task's category as it was claimed. A renewal
-- by the same reviewer keeps the row (and moves `lease_expires_at`); a release sets `ended_at`; a
-- completion is read from the task itself (same reviewer, same claim time).

CREATE TABLE exposure_caps (
  installation_id TEXT NOT NULL REFERENCES installations(id),
  category TEXT NOT NULL,
  cap_minutes INTEGER CHECK (cap_minutes IS NULL OR cap_minutes BETWEEN 0 AND 1440),
  updated_by TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, category)
);

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
-- A reviewer's claims of a day (and the days before, for claims still held).
CREATE INDEX review_exposure_reviewer ON review_exposure (installation_id, reviewer, started_at);
CREATE INDEX review_exposure_task ON review_exposure (task_id);
