-- Kernel protocol versions and host-recorded step errors.
-- Every artifact embeds its own copy of the kernel; kernel_protocol records which kernel↔host
-- protocol it speaks (artifacts published before this column speak protocol 1). The host refuses
-- to load an artifact whose protocol it does not serve.
ALTER TABLE workflow_artifacts ADD COLUMN kernel_protocol INTEGER NOT NULL DEFAULT 1;

-- The host's own message and details when a node fails (never taken from the sandbox).
ALTER TABLE workflow_step_runs ADD COLUMN error_message TEXT;
ALTER TABLE workflow_step_runs ADD COLUMN error_details_json TEXT;
ALTER TABLE workflow_runs ADD COLUMN error_details_json TEXT;
