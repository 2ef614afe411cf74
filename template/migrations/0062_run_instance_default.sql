-- A run's Workflows instance is its own id until a repair starts another (`<run id>-r<n>`). New
-- runs store NULL for "the run's own id" (every reader takes COALESCE(instance_id, id), as it did
-- for runs of the release before instance ids); only repaired runs store one. The unique index
-- that finds a run by its instance holds those alone. Hot tier: workflow_runs rows stay in D1.
DROP INDEX IF EXISTS workflow_runs_instance;
CREATE UNIQUE INDEX workflow_runs_instance ON workflow_runs (instance_id) WHERE instance_id IS NOT NULL;
