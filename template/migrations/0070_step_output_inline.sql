-- A step's output in its own step row. Until now each finished step wrote two rows, its step row
-- (workflow_step_runs) and its output (workflow_step_outputs), in one batch; a step written from
-- now on keeps its output in these columns of the step row instead, so a finished step costs one
-- row and one statement less. The columns belong to the step history tier (lib/storage-tiers.ts,
-- docs/SCALING.md): hot in D1 while the run lives and for an hour after it ends, then archived to
-- the run's R2 object with the rest of the step row (workflows/run-archive.ts).
--
-- - output_json: the open view (the whole output unless the node read content); NULL while the
--   step has no output, and for a step whose output is an older workflow_step_outputs row.
-- - output_sealed: the whole output sealed (report-crypto) when the open view holds part of it
--   back; NULL otherwise, and once erasure dropped it.
-- - output_size: bytes of the open view and the sealed part as written (kept after erasure).
-- The digest is output_digest, already on the row. What workflow_step_outputs.data_classification_json
-- said is derived: '["content"]' for an output written with a sealed part, '[]' otherwise ('["legacy"]'
-- only ever marks older rows of the outputs table). The creation time is the step's finished_at.
--
-- Rows of workflow_step_outputs written before this migration stay where they are and every
-- reader takes either form (workflows/step-output.ts); no row is moved or rewritten here.
ALTER TABLE workflow_step_runs ADD COLUMN output_json TEXT;
ALTER TABLE workflow_step_runs ADD COLUMN output_sealed TEXT;
ALTER TABLE workflow_step_runs ADD COLUMN output_size INTEGER;
