-- A reviewer's claim that ended with its task is kept once, on the task. review_exposure (0018)
-- holds one row per claim, with two indexes and a unique key: about 600 bytes per reviewed task
-- for the hot window. A claim that ended with its task (completed, expired or cancelled while the
-- same reviewer held it since the same time) repeats what the task's row already says — who
-- (claimed_by), from when (claimed_at), until when (completed_at or updated_at) — except the
-- category it was counted under. The schedule (cases.fold_exposure) writes that category on the
-- task (`exposure_category`; '' when no claim of its was left to fold) and deletes the claim's row,
-- in one batch; a reviewer's minutes of a day read the claims left in review_exposure and the
-- folded claims of their ended tasks (human_tasks_folded_exposure). Claims released or lapsed
-- before the task ended stay rows of review_exposure, as before.
--
-- Storage tier: hot, with the task (archived with its case).
ALTER TABLE human_tasks ADD COLUMN exposure_category TEXT;

-- A reviewer's folded claims of a day: the tasks they held when the task ended.
CREATE INDEX human_tasks_folded_exposure ON human_tasks (installation_id, claimed_by, claimed_at) WHERE exposure_category > '';

-- The schedule's backlog: ended tasks with a claim not yet looked at (it leaves the index when it
-- is folded; empty once the schedule has caught up).
CREATE INDEX human_tasks_exposure_unfolded ON human_tasks (updated_at) WHERE exposure_category IS NULL AND claimed_at IS NOT NULL AND state IN ('completed', 'expired', 'cancelled');
