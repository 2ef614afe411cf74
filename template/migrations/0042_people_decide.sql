-- Who decides: people, and automation only where the installation allows it and a person confirms.
--
-- api_keys.reviewer: the person a reviewer's key belongs to (recorded when the key is made). A key
-- with a reviewer acts as that person: its task answers and appeal outcomes are decisions by a
-- person. A key without one is automation (a tool), whatever reviewer name its client sends.
-- human_tasks.completed_by_person: 1 when a console user or a reviewer's key completed the task,
-- 0 when an automation key did (NULL: completed before this was recorded). A decision counts as
-- `not_automated` only after a task of its run a person completed.
-- appeals.proposed_*: an outcome automation proposed for a complaint (DSA Art. 20(6): not decided
-- solely by automated means). The appeal stays open until a person confirms it
-- (POST /appeals/:id/confirm, recorded in confirmed_by); only then is the appellant told.
-- redress_settings.automated_complaints: whether automation may propose complaint outcomes at all
-- (default 0: it may not, and an automation key resolving an appeal is refused).
ALTER TABLE api_keys ADD COLUMN reviewer TEXT;
ALTER TABLE human_tasks ADD COLUMN completed_by_person INTEGER;
ALTER TABLE appeals ADD COLUMN proposed_outcome TEXT;
ALTER TABLE appeals ADD COLUMN proposed_by TEXT;
ALTER TABLE appeals ADD COLUMN proposed_at TEXT;
ALTER TABLE appeals ADD COLUMN confirmed_by TEXT;
ALTER TABLE redress_settings ADD COLUMN automated_complaints INTEGER NOT NULL DEFAULT 0 CHECK (automated_complaints IN (0, 1));
