-- workflow_runs_archived (0031) served one query, GET /storage's count and bytes of the runs whose
-- step history is in R2. Since an ended run's history moves an hour after it ends, nearly every
-- run of the hot window is in it: the index held an entry per run for the whole window (about 60
-- bytes per lifecycle) to spare that admin read a filter. The read now goes through
-- workflow_runs_installation (installation_id, created_at) and checks archived_at on each of the
-- installation's runs in D1, the same number of rows the index held.
DROP INDEX IF EXISTS workflow_runs_archived;
