// Which tables an installation's backup carries and how each row belongs to the installation: the
// list export (backup.ts), restore (backup-restore.ts) and an installation's removal all walk. A
// table the database has that this list does not know fails the export, so a new migration's
// table cannot be missed silently.
export type Where = string;
const OWN: Where = "installation_id = ?1";
const RUNS = "(SELECT id FROM workflow_runs WHERE installation_id = ?1)";

/**
 * Every table, parents before children (foreign keys), with how its rows belong to an
 * installation. `backup: false` tables are left out (sessions and sign-in links are live
 * credentials; verify cursors are the schedule's progress, rebuilt from the first event), but
 * still removed with the installation.
 */
export const BACKUP_TABLES: ReadonlyArray<{ table: string; where: Where; backup?: false; keys?: readonly string[] }> = [
  { table: "installations", where: "id = ?1" },
  { table: "storage_settings", where: OWN },
  // The case archive's bookkeeping: archived cases travel as rows (exportInstallation), so a
  // restored installation has none archived, no holds and no subject keys.
  { table: "case_archive_totals", where: OWN, backup: false },
  { table: "case_archive_holds", where: OWN, backup: false },
  { table: "case_archive_marks", where: "?1 IS NULL AND 1 = 0", backup: false },
  { table: "archived_subjects", where: "?1 IS NULL AND 1 = 0", backup: false },
  { table: "webhook_endpoints", where: OWN },
  { table: "connectors", where: OWN },
  // A bank's configuration; its entries live in Durable Objects and travel as its CSV export.
  { table: "hash_banks", where: OWN },
  // A bank's follow of an exchange and the mirror's index: not carried (the entries travel in the
  // bank's CSV; a restored installation follows again with its credentials), removed with it.
  { table: "hash_exchange_follows", where: OWN, backup: false },
  { table: "hash_exchange_entries", where: "bank_id IN (SELECT id FROM hash_banks WHERE installation_id = ?1)", backup: false },
  { table: "preservation_holds", where: OWN },
  { table: "action_types", where: OWN },
  { table: "action_type_gates", where: OWN },
  { table: "workflow_artifacts", where: OWN },
  { table: "workflows", where: OWN },
  { table: "workflow_versions", where: OWN },
  { table: "backtests", where: OWN },
  { table: "workflow_runs", where: OWN },
  // Runs handed to the queue to be archived: the schedule's progress, not the installation's data.
  { table: "run_archive_queue", where: `run_id IN ${RUNS}`, backup: false },
  { table: "workflow_step_runs", where: `run_id IN ${RUNS}` },
  { table: "run_operations", where: OWN },
  { table: "run_operation_items", where: "operation_id IN (SELECT id FROM run_operations WHERE installation_id = ?1)" },
  { table: "workflow_run_repairs", where: OWN },
  { table: "action_proposals", where: OWN },
  { table: "ai_providers", where: OWN },
  { table: "api_keys", where: OWN },
  { table: "cases", where: OWN },
  { table: "data_keys", where: OWN },
  // People's keys (cases/reports/person-data-keys.ts), wrapped by the installation's data key.
  { table: "person_data_keys", where: OWN, keys: ["installation_id", "period", "person"] },
  // Erasures' tombstones are not the installation's: a removal leaves them, a backup does not
  // carry them, and a restore re-applies them (cases/retention/erasure-reapply.ts).
  { table: "erasure_tombstones", where: "?1 IS NULL AND 1 = 0", backup: false },
  { table: "reports", where: OWN },
  { table: "connector_reports", where: OWN },
  { table: "appeals", where: OWN },
  { table: "trusted_flaggers", where: OWN },
  { table: "notifier_notices", where: OWN },
  { table: "notifier_sanctions", where: OWN },
  { table: "retention_settings", where: OWN },
  { table: "backtest_results", where: OWN },
  { table: "backtest_chunks", where: OWN },
  { table: "audit_checkpoints", where: OWN },
  { table: "audit_events", where: OWN },
  // The index of the trail's archived segments; their objects travel in `objects` (AUDIT_ANCHORS).
  { table: "audit_segments", where: OWN },
  { table: "audit_verify_cursors", where: OWN, backup: false },
  // Which anchors the schedule still has to move: rebuilt by the first seal after a restore.
  { table: "audit_anchor_due", where: OWN, backup: false },
  { table: "components", where: OWN },
  { table: "component_versions", where: OWN },
  { table: "console_users", where: OWN },
  { table: "console_sessions", where: OWN, backup: false },
  { table: "console_signin_links", where: "user_id IN (SELECT id FROM console_users WHERE installation_id = ?1)", backup: false },
  { table: "decisions", where: OWN },
  { table: "tdb_settings", where: OWN },
  { table: "tdb_submissions", where: OWN },
  // The ESP registration and each CyberTipline submission (sealed); a submission's preserved files
  // are R2 objects under keys derived from its id and stay where they are (not in the backup).
  { table: "cybertipline_settings", where: OWN },
  { table: "cybertipline_submissions", where: OWN },
  { table: "handoffs", where: OWN },
  { table: "redress_settings", where: OWN },
  { table: "redress_messages", where: OWN },
  { table: "decision_reversals", where: OWN },
  { table: "strike_policies", where: OWN },
  { table: "strikes", where: OWN },
  { table: "account_sanctions", where: OWN },
  { table: "bulk_actions", where: OWN },
  // WITHOUT ROWID tables page by their primary key (`keys`).
  { table: "bulk_action_items", where: "bulk_action_id IN (SELECT id FROM bulk_actions WHERE installation_id = ?1)", keys: ["bulk_action_id", "position"] },
  // Keyed terms of reports (cases/search): bound to the installation's id and REPORT_MASTER_KEY.
  { table: "search_terms", where: OWN, keys: ["installation_id", "term", "created_at", "record_id"] },
  { table: "account_signals", where: OWN, keys: ["installation_id", "signal", "account_key"] },
  // Response schemas of tasks, numbered per installation (migration 0064): before the tasks naming them.
  { table: "task_response_schemas", where: OWN, keys: ["installation_id", "number"] },
  { table: "human_tasks", where: OWN },
  { table: "exposure_caps", where: OWN },
  { table: "review_exposure", where: OWN },
  { table: "messages", where: OWN },
  { table: "policies", where: OWN },
  { table: "policy_versions", where: OWN },
  { table: "queues", where: OWN },
  { table: "qa_settings", where: OWN },
  { table: "qa_reviews", where: OWN },
  { table: "golden_items", where: OWN },
  { table: "triggers", where: OWN },
  { table: "trigger_gates", where: OWN },
  { table: "trigger_demotions", where: OWN },
  // Detection. Labels are keyed by a hash of installation and entity (lib/person-keys.ts), so they
  // restore into the same installation id; the counters live in Durable Objects, not in a backup.
  { table: "rule_sets", where: OWN },
  { table: "rule_set_versions", where: OWN },
  { table: "rule_hits", where: OWN },
  { table: "entity_labels", where: OWN },
  { table: "event_settings", where: OWN },
  { table: "event_samples", where: OWN },
  // The labeler's signing key travels sealed, as an endpoint's secret does.
  { table: "labeler_settings", where: OWN },
  { table: "webhook_deliveries", where: OWN },
  { table: "webhook_attempts", where: "delivery_id IN (SELECT id FROM webhook_deliveries WHERE installation_id = ?1)" },
  { table: "workflow_waits", where: `run_id IN ${RUNS}` },
  { table: "workflow_events", where: OWN },
  { table: "alert_settings", where: OWN },
  { table: "alerts", where: OWN },
  // Derived data: the rollup sweep recomputes it from the restored rows (up to 35 days back).
  { table: "metric_rollups", where: OWN, backup: false },
  { table: "metric_rollups_daily", where: OWN, backup: false },
  { table: "metric_rollup_hours", where: OWN, backup: false },
  { table: "transparency_rollups", where: OWN, backup: false },
  { table: "transparency_rollup_days", where: OWN, backup: false },
  // The schedule's own record, platform-wide: not part of any installation.
  { table: "sweep_runs", where: "?1 IS NULL AND 1 = 0", backup: false },
  { table: "workflow_step_outputs", where: `step_run_id IN (SELECT s.id FROM workflow_step_runs s JOIN workflow_runs r ON r.id = s.run_id WHERE r.installation_id = ?1)` },
];
