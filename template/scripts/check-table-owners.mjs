// One owner per D1 table: every SQL write (INSERT, REPLACE, UPDATE, DELETE; upserts are INSERTs)
// to a table in src/**/*.ts must be in the table's owning domain (the folder under src/). Other
// domains call the statement builders the owner exports. Run by `npm test`.
//
//   node scripts/check-table-owners.mjs [--src <dir>] [--migrations <dir>]
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** THE table → owner map (also listed in docs/ARCHITECTURE.md, "Ownership and boundaries"). */
export const TABLE_OWNERS = {
  installations: "installations",
  rule_sets: "detection",
  rule_set_versions: "detection",
  rule_hits: "detection",
  entity_labels: "detection",
  event_settings: "detection",
  event_samples: "detection",
  labeler_settings: "detection",
  hash_banks: "media",
  hash_exchange_follows: "media",
  hash_exchange_entries: "media",
  api_keys: "installations",
  workflows: "workflows",
  workflow_artifacts: "workflows",
  workflow_versions: "workflows",
  workflow_runs: "workflows",
  workflow_step_runs: "workflows",
  workflow_step_outputs: "workflows",
  workflow_waits: "workflows",
  workflow_events: "workflows",
  workflow_run_repairs: "workflows",
  run_operations: "workflows",
  run_operation_items: "workflows",
  storage_settings: "workflows",
  run_archive_queue: "workflows",
  audit_events: "audit",
  audit_checkpoints: "audit",
  audit_verify_cursors: "audit",
  audit_segments: "audit",
  audit_anchor_due: "audit",
  human_tasks: "cases",
  task_response_schemas: "cases",
  preservation_holds: "cases",
  person_data_keys: "cases",
  erasure_tombstones: "cases",
  qa_settings: "cases",
  qa_reviews: "cases",
  golden_items: "cases",
  data_keys: "cases",
  cases: "cases",
  reports: "cases",
  triggers: "cases",
  queues: "cases",
  appeals: "cases",
  exposure_caps: "cases",
  review_exposure: "cases",
  trigger_gates: "cases",
  trigger_demotions: "cases",
  trusted_flaggers: "cases",
  notifier_notices: "cases",
  notifier_sanctions: "cases",
  webhook_endpoints: "enforcement",
  webhook_deliveries: "enforcement",
  webhook_attempts: "enforcement",
  action_types: "enforcement",
  cybertipline_settings: "enforcement",
  cybertipline_submissions: "enforcement",
  action_proposals: "enforcement",
  messages: "enforcement",
  decisions: "enforcement",
  tdb_settings: "enforcement",
  tdb_submissions: "enforcement",
  action_type_gates: "enforcement",
  handoffs: "enforcement",
  redress_settings: "enforcement",
  redress_messages: "enforcement",
  decision_reversals: "cases",
  archived_subjects: "cases",
  case_archive_totals: "cases",
  case_archive_holds: "cases",
  case_archive_marks: "cases",
  components: "automation",
  component_versions: "automation",
  ai_providers: "automation",
  backtests: "automation",
  backtest_results: "automation",
  backtest_chunks: "automation",
  policies: "automation",
  policy_versions: "automation",
  console_users: "console",
  console_sessions: "console",
  console_signin_links: "console",
  sweep_runs: "operations",
  alert_settings: "operations",
  alerts: "operations",
  metric_rollups: "metrics",
  metric_rollups_daily: "metrics",
  metric_rollup_hours: "metrics",
  transparency_rollups: "metrics",
  transparency_rollup_days: "metrics",
  retention_settings: "cases",
  connectors: "connectors",
  connector_reports: "connectors",
  strike_policies: "accounts",
  strikes: "accounts",
  account_sanctions: "accounts",
  bulk_actions: "accounts",
  bulk_action_items: "accounts",
  search_terms: "cases",
  account_signals: "cases",
};

/**
 * Tolerated violations, as "path/under/src.ts table". Empty: no file another engineer is
 * rewriting writes another domain's table. An entry here must name its fix and be removed after.
 */
export const KNOWN_VIOLATIONS = [];

const WRITE = /\b(?:INSERT(?:\s+OR\s+[a-z]+)?\s+INTO|REPLACE\s+INTO|DELETE\s+FROM|UPDATE(?:\s+OR\s+[a-z]+)?)\s+["`]?([a-z_][a-z0-9_]*)/giu;

function tsFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return tsFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The tables the migrations leave, in order: created, renamed (a rebuild's new table) and dropped. */
export function migrationTables(migrationsDir) {
  const tables = new Set();
  const DDL = /CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)|ALTER\s+TABLE\s+([a-z_][a-z0-9_]*)\s+RENAME\s+TO\s+([a-z_][a-z0-9_]*)|DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([a-z_][a-z0-9_]*)/giu;
  for (const name of readdirSync(migrationsDir)
    .filter((file) => file.endsWith(".sql"))
    .sort()) {
    for (const [, created, renamedFrom, renamedTo, dropped] of readFileSync(join(migrationsDir, name), "utf8").matchAll(DDL)) {
      if (created) tables.add(created.toLowerCase());
      if (renamedFrom) {
        tables.delete(renamedFrom.toLowerCase());
        tables.add(renamedTo.toLowerCase());
      }
      if (dropped) tables.delete(dropped.toLowerCase());
    }
  }
  return tables;
}

/** Every problem found: writes outside the owner, and tables without (or owners without) a table. */
export function checkTableOwners({ srcDir, migrationsDir }) {
  const problems = [];
  const tables = migrationTables(migrationsDir);
  for (const table of tables) if (!TABLE_OWNERS[table]) problems.push(`table ${table} (migrations) has no owner in TABLE_OWNERS`);
  for (const table of Object.keys(TABLE_OWNERS)) if (!tables.has(table)) problems.push(`TABLE_OWNERS names ${table}, which no migration creates`);
  for (const file of tsFiles(srcDir)) {
    const path = relative(srcDir, file).split(sep).join("/");
    const domain = path.includes("/") ? path.split("/")[0] : "(src root)";
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(WRITE)) {
      const table = match[1].toLowerCase();
      const owner = TABLE_OWNERS[table];
      if (!owner || !tables.has(table)) continue; // not a table (e.g. prose in a comment)
      if (owner === domain || KNOWN_VIOLATIONS.includes(`${path} ${table}`)) continue;
      const line = text.slice(0, match.index).split("\n").length;
      problems.push(`src/${path}:${line}: writes ${table}, owned by ${owner}/ (call a statement builder ${owner}/index.ts exports)`);
    }
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
  const root = fileURLToPath(new URL("..", import.meta.url));
  const problems = checkTableOwners({ srcDir: option("--src", join(root, "src")), migrationsDir: option("--migrations", join(root, "migrations")) });
  if (problems.length > 0) {
    console.error(`Table ownership: ${problems.length} problem(s)\n${problems.map((problem) => `  ${problem}`).join("\n")}`);
    process.exit(1);
  }
  console.log(`Table ownership: every write is in its table's owner (${Object.keys(TABLE_OWNERS).length} tables).`);
}
