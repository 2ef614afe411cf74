-- Issue 11: content for automation, sealed everywhere.
-- A step output of a node that read content keeps its open view in inline_json and the whole
-- output sealed (report-crypto) in sealed_json. A task's context is sealed in context_sealed;
-- context_json keeps '{}'. Rows written before this migration in plaintext are sealed by the
-- Worker (sealLegacyPlaintext, on the schedule): SQL cannot encrypt.
ALTER TABLE workflow_step_outputs ADD COLUMN sealed_json TEXT;
ALTER TABLE human_tasks ADD COLUMN context_sealed TEXT;
CREATE INDEX human_tasks_legacy_context ON human_tasks (created_at) WHERE context_sealed IS NULL;
-- Outputs of enrichment and AI proposal steps written before this migration are marked for the
-- Worker to split and seal once their run has finished (sealLegacyStepOutputs).
UPDATE workflow_step_outputs SET data_classification_json = '["legacy"]'
WHERE step_run_id IN (SELECT id FROM workflow_step_runs WHERE node_type IN ('enrichment', 'ai_proposal'));
-- Examples and templates name the endpoints of external handoffs (e.g. a hash-sharing hotline)
-- and AI providers by name, resolved in the installation; endpoint names are unique.
ALTER TABLE webhook_endpoints ADD COLUMN name TEXT;
CREATE UNIQUE INDEX webhook_endpoints_name ON webhook_endpoints (installation_id, name) WHERE name IS NOT NULL;
