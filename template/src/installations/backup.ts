// Backup and restore of one installation: its D1 rows, table by table, and its R2
// objects, in one JSON document; restored into a deployment that does not have it yet.
//
// Rows are copied verbatim: sealed columns stay the ciphertext they are at rest, data keys stay
// wrapped under REPORT_MASTER_KEY, audit events keep their MACs, hashes and checkpoints (keyed
// from AUDIT_CHECKPOINT_KEY). So a restore opens sealed data and verifies the audit chain only
// where both secrets are the same as where the backup was made; the manifest says so.
//
// The one writer outside the table owners (docs/ARCHITECTURE.md, "Ownership and boundaries"):
// restore inserts the rows of an installation that does not exist in this deployment, and
// removes them again if they do not restore whole or the restored chain does not verify. It
// never writes a row of an installation that exists.
import { auditStatement, canonicalJson, deleteAuditSegments, sealAuditChain, segmentKey, verifyAuditChain } from "../audit";
import type { Actor } from "../auth";
import { AppError } from "../errors";
import { forgetInstallationKeys } from "../lib/api-key-cache";
import { sha256Hex } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";
import { isRunArchiveKeyOf, runArchiveKey, runArchiveTextHolds } from "../workflows";

export const BACKUP_FORMAT = "safest-tools.installation-backup/1";

type Where = string;
const OWN: Where = "installation_id = ?1";
const RUNS = "(SELECT id FROM workflow_runs WHERE installation_id = ?1)";

/**
 * Every table, parents before children (foreign keys), with how its rows belong to an
 * installation. `backup: false` tables are left out (sessions and sign-in links are live
 * credentials; verify cursors are the schedule's progress, rebuilt from the first event), but
 * still removed with the installation.
 */
export const BACKUP_TABLES: ReadonlyArray<{ table: string; where: Where; backup?: false }> = [
  { table: "installations", where: "id = ?1" },
  { table: "storage_settings", where: OWN },
  { table: "webhook_endpoints", where: OWN },
  { table: "connectors", where: OWN },
  { table: "action_types", where: OWN },
  { table: "action_type_gates", where: OWN },
  { table: "workflow_artifacts", where: OWN },
  { table: "workflows", where: OWN },
  { table: "workflow_versions", where: OWN },
  { table: "backtests", where: OWN },
  { table: "workflow_runs", where: OWN },
  { table: "workflow_step_runs", where: `run_id IN ${RUNS}` },
  { table: "run_operations", where: OWN },
  { table: "run_operation_items", where: "operation_id IN (SELECT id FROM run_operations WHERE installation_id = ?1)" },
  { table: "workflow_run_repairs", where: OWN },
  { table: "action_proposals", where: OWN },
  { table: "ai_providers", where: OWN },
  { table: "api_keys", where: OWN },
  { table: "cases", where: OWN },
  { table: "data_keys", where: OWN },
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
  { table: "handoffs", where: OWN },
  { table: "redress_settings", where: OWN },
  { table: "redress_messages", where: OWN },
  { table: "decision_reversals", where: OWN },
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

const PAGE = 500;
const INSERT_BATCH = 50;
const ID_PATTERN = /^[A-Za-z0-9._:-]{1,200}$/u;

type Cell = string | number | null;
type Row = Record<string, Cell>;

export interface BackupObject {
  bucket: "WORKFLOW_ARTIFACTS" | "AUDIT_ANCHORS";
  key: string;
  contentType: string | null;
  base64: string;
}

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  installationId: string;
  createdAt: string;
  /** The newest D1 migration applied where the backup was made (its file name). */
  migration: string | null;
  counts: Record<string, number>;
  objects: number;
  /** sha256 of the canonical JSON (RFC 8785) of `{ tables, objects }`. */
  digest: string;
  requires: string[];
}

export interface InstallationBackup {
  manifest: BackupManifest;
  tables: Record<string, Row[]>;
  objects: BackupObject[];
}

async function migrationLevel(db: D1Database): Promise<string | null> {
  try {
    return (await db.prepare(`SELECT name FROM d1_migrations ORDER BY id DESC LIMIT 1`).first<{ name: string }>())?.name ?? null;
  } catch {
    return null; // a database migrated by other means
  }
}

/** Tables the database has that this module does not know: a backup would silently miss them. */
async function unknownTables(db: D1Database): Promise<string[]> {
  const { results } = await db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all<{ name: string }>();
  const known = new Set(BACKUP_TABLES.map((t) => t.table));
  return results.map((r) => r.name).filter((name) => !known.has(name) && name !== "d1_migrations" && !name.startsWith("_cf_") && !name.startsWith("sqlite_"));
}

async function readRows(db: D1Database, table: string, where: Where, installationId: string): Promise<Row[]> {
  const rows: Row[] = [];
  let after = 0;
  for (;;) {
    const { results } = await db.prepare(`SELECT rowid AS __rowid, * FROM ${table} WHERE (${where}) AND rowid > ?2 ORDER BY rowid LIMIT ${PAGE}`).bind(installationId, after).all<Record<string, unknown>>();
    for (const { __rowid, ...row } of results) {
      for (const [column, value] of Object.entries(row)) {
        if (value !== null && typeof value !== "string" && typeof value !== "number") {
          throw new AppError("installation_export.unsupported_value", `Column ${table}.${column} holds a value a backup cannot carry (binary); export is not possible for this table yet.`, { status: 500 });
        }
      }
      rows.push(row as Row);
      after = Number(__rowid);
    }
    if (results.length < PAGE) return rows;
  }
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 8_192) binary += String.fromCharCode(...bytes.subarray(i, i + 8_192));
  return btoa(binary);
}

function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

async function readObject(bucket: R2Bucket, name: BackupObject["bucket"], key: string): Promise<BackupObject | null> {
  const object = await bucket.get(key);
  if (!object) return null;
  return { bucket: name, key, contentType: object.httpMetadata?.contentType ?? null, base64: bytesToBase64(new Uint8Array(await object.arrayBuffer())) };
}

/** The manifest digest: sha256 of the canonical JSON of `{ tables, objects }` (a file check, not a signature: anyone can recompute it, so restore checks what the file holds too). */
export async function backupDigest(tables: InstallationBackup["tables"], objects: BackupObject[]): Promise<string> {
  return `sha256:${await sha256Hex(canonicalJson({ tables, objects }))}`;
}

const anchorKey = (installationId: string) => `audit/${installationId}/head.json`;

/** The object keys of the audit segments indexed in a backup's audit_segments rows, oldest first. */
function segmentKeys(installationId: string, rows: Row[]): string[] {
  return rows
    .filter((row) => typeof row.from_seq === "number" && typeof row.to_seq === "number")
    .sort((a, b) => (a.from_seq as number) - (b.from_seq as number))
    .map((row) => segmentKey(installationId, row.from_seq as number, row.to_seq as number));
}

/**
 * Exports the caller's installation. The export is audited first (`installation.exported`) and
 * the chain sealed, so the backup holds its own export event and a sealed, anchored chain.
 */
export async function exportInstallation(env: Env, actor: Actor): Promise<InstallationBackup> {
  const installationId = actor.installationId;
  const unknown = await unknownTables(env.DB);
  if (unknown.length > 0) throw new AppError("installation_export.table_unknown", `The database has tables the backup does not know (${unknown.join(", ")}); add them to BACKUP_TABLES.`, { status: 500 });
  const createdAt = new Date().toISOString();
  await auditStatement(env.DB, {
    installationId,
    idempotencyKey: `installation:${installationId}:exported:${createdAt}:${crypto.randomUUID()}`,
    action: "installation.exported",
    actor: actor.audit,
    target: { type: "installation", id: installationId },
    details: { format: BACKUP_FORMAT },
    at: createdAt,
  }).run();
  await sealAuditChain(env, installationId, { anchor: true });

  const tables: InstallationBackup["tables"] = {};
  const counts: Record<string, number> = {};
  for (const { table, where, backup } of BACKUP_TABLES) {
    if (backup === false) continue;
    tables[table] = await readRows(env.DB, table, where, installationId);
    counts[table] = tables[table].length;
  }
  const objects: BackupObject[] = [];
  const artifactKeys = new Set((tables.workflow_artifacts ?? []).map((row) => row.bundle_r2_key).filter((key): key is string => typeof key === "string"));
  for (const key of [...artifactKeys].sort()) {
    const object = await readObject(env.WORKFLOW_ARTIFACTS, "WORKFLOW_ARTIFACTS", key);
    if (!object) throw new AppError("installation_export.object_missing", `The artifact object ${key} is missing from R2; the installation cannot be backed up whole.`, { status: 500 });
    objects.push(object);
  }
  // Archived runs (workflows/run-archive.ts): their steps, outputs, waits, events and repairs are
  // in one R2 object each, not in the rows above; the backup carries those objects as they are.
  for (const row of tables.workflow_runs ?? []) {
    if (row.archived_at === null || row.archived_at === undefined) continue;
    const key = runArchiveKey(installationId, String(row.id));
    const object = await readObject(env.WORKFLOW_ARTIFACTS, "WORKFLOW_ARTIFACTS", key);
    if (!object) throw new AppError("installation_export.object_missing", `The archive object ${key} is missing from R2; the installation cannot be backed up whole.`, { status: 500 });
    objects.push(object);
  }
  const anchor = await readObject(env.AUDIT_ANCHORS, "AUDIT_ANCHORS", anchorKey(installationId));
  if (anchor) objects.push(anchor);
  // The trail's archived segments (audit/segments.ts): without them the restored chain would not verify.
  for (const key of segmentKeys(installationId, tables.audit_segments ?? [])) {
    const object = await readObject(env.AUDIT_ANCHORS, "AUDIT_ANCHORS", key);
    if (!object) throw new AppError("installation_export.object_missing", `The audit segment ${key} is missing from R2; the installation cannot be backed up whole.`, { status: 500 });
    objects.push(object);
  }
  return {
    manifest: {
      format: BACKUP_FORMAT,
      installationId,
      createdAt,
      migration: await migrationLevel(env.DB),
      counts,
      objects: objects.length,
      digest: await backupDigest(tables, objects),
      requires: [
        "REPORT_MASTER_KEY: the same secret as where the backup was made (data keys are stored wrapped by it; sealed data opens only under it)",
        "AUDIT_CHECKPOINT_KEY: the same secret (entry MACs and checkpoints are keyed from it; the restored chain verifies only under it)",
      ],
    },
    tables,
    objects,
  };
}

/** Statements that remove every row of an installation (children first). */
export function installationDeleteStatements(db: D1Database, installationId: string): D1PreparedStatement[] {
  forgetInstallationKeys(installationId); // its API keys are not served from this isolate's cache (lib/api-key-cache.ts)
  return [...BACKUP_TABLES].reverse().map(({ table, where }) => db.prepare(`DELETE FROM ${table} WHERE ${where}`).bind(installationId));
}

function migrationNumber(name: string | null): number {
  const match = name ? /^(\d+)/u.exec(name) : null;
  return match ? Number(match[1]) : 0;
}

async function tableColumns(db: D1Database, table: string): Promise<Set<string>> {
  const { results } = await db.prepare(`SELECT name FROM pragma_table_info(?1)`).bind(table).all<{ name: string }>();
  return new Set(results.map((r) => r.name));
}

/** Checks the document before anything is written: shape, digest, migration level, columns. */
async function checkBackup(env: Env, input: unknown): Promise<InstallationBackup> {
  const doc = input as Partial<InstallationBackup> | null;
  const manifest = doc?.manifest as Partial<BackupManifest> | undefined;
  if (!manifest || manifest.format !== BACKUP_FORMAT) throw new AppError("installation_import.format_unsupported", `The file is not a backup this deployment reads (manifest.format must be ${BACKUP_FORMAT}).`, { status: 422 });
  if (typeof manifest.installationId !== "string" || !ID_PATTERN.test(manifest.installationId)) throw new AppError("installation_import.invalid", "manifest.installationId is missing or malformed.", { status: 422 });
  if (typeof doc?.tables !== "object" || doc.tables === null || !Array.isArray(doc.objects)) throw new AppError("installation_import.invalid", "A backup has manifest, tables (rows by table) and objects.", { status: 422 });
  const backup = doc as InstallationBackup;
  if ((await backupDigest(backup.tables, backup.objects)) !== manifest.digest) {
    throw new AppError("installation_import.digest_mismatch", "The backup's tables and objects do not match manifest.digest: the file was changed or cut short.", { status: 422 });
  }
  const local = await migrationLevel(env.DB);
  if (migrationNumber(manifest.migration ?? null) > migrationNumber(local)) {
    throw new AppError("installation_import.migration_newer", `The backup was made at migration ${manifest.migration}, newer than this deployment's ${local ?? "(none)"}; upgrade this deployment first.`, { status: 409 });
  }
  const known = new Map(BACKUP_TABLES.map((t) => [t.table, t]));
  for (const [table, rows] of Object.entries(backup.tables)) {
    const spec = known.get(table);
    if (!spec || spec.backup === false) throw new AppError("installation_import.table_unknown", `The backup has rows for table ${table}, which a restore does not write.`, { status: 422 });
    if (!Array.isArray(rows)) throw new AppError("installation_import.invalid", `tables.${table} must be an array of rows.`, { status: 422 });
    const columns = await tableColumns(env.DB, table);
    for (const row of rows) {
      if (typeof row !== "object" || row === null || Array.isArray(row)) throw new AppError("installation_import.invalid", `tables.${table} holds a row that is not an object.`, { status: 422 });
      for (const [column, value] of Object.entries(row)) {
        if (!columns.has(column)) throw new AppError("installation_import.column_unknown", `Column ${table}.${column} does not exist in this deployment.`, { status: 422 });
        if (value !== null && typeof value !== "string" && typeof value !== "number") throw new AppError("installation_import.invalid", `tables.${table}.${column} holds a value that is not a string, number or null.`, { status: 422 });
      }
      const owner: unknown = table === "installations" ? row.id : "installation_id" in row ? row.installation_id : manifest.installationId;
      if (owner !== manifest.installationId) throw new AppError("installation_import.installation_mismatch", `A row of ${table} belongs to another installation than manifest.installationId.`, { status: 422 });
    }
  }
  // Rows without an installation column must hang off rows of this very backup.
  const ids = (table: string) => new Set((backup.tables[table] ?? []).map((row) => row.id));
  const runs = ids("workflow_runs");
  const stepRuns = ids("workflow_step_runs");
  const deliveries = ids("webhook_deliveries");
  const parents: Array<[string, string, Set<Cell | undefined>]> = [
    ["workflow_step_runs", "run_id", runs],
    ["workflow_waits", "run_id", runs],
    ["workflow_step_outputs", "step_run_id", stepRuns],
    ["webhook_attempts", "delivery_id", deliveries],
  ];
  for (const [table, column, within] of parents) {
    if ((backup.tables[table] ?? []).some((row) => !within.has(row[column]))) throw new AppError("installation_import.installation_mismatch", `A row of ${table} hangs off a ${column} that is not in the backup.`, { status: 422 });
  }
  if ((backup.tables.installations ?? []).length !== 1) throw new AppError("installation_import.invalid", "A backup holds exactly one installations row.", { status: 422 });
  const segments = new Set(segmentKeys(manifest.installationId, backup.tables.audit_segments ?? []));
  for (const object of backup.objects) {
    const expected =
      object.bucket === "AUDIT_ANCHORS"
        ? object.key === anchorKey(manifest.installationId) || segments.has(object.key)
        : object.bucket === "WORKFLOW_ARTIFACTS" && (/^artifacts\/[0-9a-f]{64}\.js$/u.test(object.key) || isRunArchiveKeyOf(manifest.installationId, object.key));
    if (!expected || typeof object.base64 !== "string") throw new AppError("installation_import.object_invalid", `The object ${String(object.bucket)}/${String(object.key)} is not one a backup carries.`, { status: 422 });
  }
  // Every archived run comes with its archive object, which must be that run's, with the digest its
  // row recorded; and no archive object comes without the run row that names it.
  const owner = manifest.installationId;
  const archives = new Map(backup.objects.filter((o) => o.bucket === "WORKFLOW_ARTIFACTS" && isRunArchiveKeyOf(owner, o.key)).map((o) => [o.key, o]));
  for (const row of backup.tables.workflow_runs ?? []) {
    if (row.archived_at === null || row.archived_at === undefined) continue;
    const key = runArchiveKey(owner, String(row.id));
    const object = archives.get(key);
    archives.delete(key);
    const text = object ? new TextDecoder().decode(base64ToBytes(object.base64)) : null;
    if (text === null || typeof row.archive_digest !== "string" || !(await runArchiveTextHolds(text, owner, String(row.id), row.archive_digest))) {
      throw new AppError("installation_import.object_invalid", `The archive object of run ${String(row.id)} is missing from the backup or is not that run's (${key}).`, { status: 422 });
    }
  }
  for (const key of archives.keys()) throw new AppError("installation_import.object_invalid", `The archive object ${key} belongs to no archived run of the backup.`, { status: 422 });
  return backup;
}

function insertStatement(db: D1Database, table: string, row: Row): D1PreparedStatement {
  const columns = Object.keys(row);
  const placeholders = columns.map((_, index) => `?${index + 1}`).join(", ");
  return db.prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${placeholders})`).bind(...columns.map((column) => row[column] ?? null));
}

/**
 * Restores a backup into this deployment, which must not have that installation (409). Rows go
 * in parents-first batches; then R2 objects; then the chain is verified in full. Anything that
 * fails on the way — a batch, an object, a chain that does not verify (another
 * AUDIT_CHECKPOINT_KEY, an edited file) — removes what was restored and answers why.
 */
export async function importInstallation(env: Env, input: unknown) {
  const backup = await checkBackup(env, input);
  const installationId = backup.manifest.installationId;
  if (await env.DB.prepare(`SELECT 1 FROM installations WHERE id = ?1`).bind(installationId).first()) {
    throw new AppError("installation_import.exists", "This deployment already has that installation; restore into a fresh state folder or account.", { status: 409 });
  }
  const statements: D1PreparedStatement[] = [];
  for (const { table, backup: included } of BACKUP_TABLES) {
    if (included === false) continue;
    for (const row of backup.tables[table] ?? []) statements.push(insertStatement(env.DB, table, row));
  }
  const rollback = async () => {
    await env.DB.batch(installationDeleteStatements(env.DB, installationId));
    forgetInstallationKeys(installationId); // again once committed: a lookup that began meanwhile is not remembered
    await env.AUDIT_ANCHORS.delete(anchorKey(installationId));
    await deleteAuditSegments(env, installationId);
    // The installation's run archives (keys under its own id, so none belongs to anyone else).
    for (const object of backup.objects) if (object.bucket === "WORKFLOW_ARTIFACTS" && isRunArchiveKeyOf(installationId, object.key)) await env.WORKFLOW_ARTIFACTS.delete(object.key);
  };
  // The installations row goes first and alone: a concurrent restore of the same installation
  // loses here, before it wrote anything (so it removes nothing of the other's).
  try {
    await env.DB.batch(statements.slice(0, 1));
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError("installation_import.exists", "This deployment already has that installation; restore into a fresh state folder or account.", { status: 409 });
    throw error;
  }
  try {
    for (let i = 1; i < statements.length; i += INSERT_BATCH) await env.DB.batch(statements.slice(i, i + INSERT_BATCH));
    for (const object of backup.objects) {
      const bucket = object.bucket === "AUDIT_ANCHORS" ? env.AUDIT_ANCHORS : env.WORKFLOW_ARTIFACTS;
      // Artifacts are content-addressed (the key is the digest): one already there is the same.
      // Run archives are keyed by ids, not content: always written, so the restored rows' digests hold.
      if (object.bucket === "WORKFLOW_ARTIFACTS" && !isRunArchiveKeyOf(installationId, object.key) && (await bucket.head(object.key))) continue;
      await bucket.put(object.key, base64ToBytes(object.base64), object.contentType ? { httpMetadata: { contentType: object.contentType } } : undefined);
    }
  } catch (error) {
    await rollback();
    if (error instanceof AppError) throw error;
    throw new AppError("installation_import.write_failed", "The backup could not be written (a D1 batch or an R2 put failed; is this deployment's schema the backup's?); nothing of it was kept.", { status: 500 });
  }
  const verdict = await verifyAuditChain(env, installationId, "full");
  if (!verdict.ok) {
    await rollback();
    throw new AppError("installation_import.chain_broken", "The restored audit chain does not verify (is AUDIT_CHECKPOINT_KEY the one of the exporting deployment?); nothing of the backup was kept.", { status: 422, details: verdict });
  }
  const at = new Date().toISOString();
  await auditStatement(env.DB, {
    installationId,
    idempotencyKey: `installation:${installationId}:restored:${backup.manifest.digest}`,
    action: "installation.restored",
    actor: { type: "admin", id: "admin-token" },
    target: { type: "installation", id: installationId },
    details: { format: BACKUP_FORMAT, digest: backup.manifest.digest, exportedAt: backup.manifest.createdAt, migration: backup.manifest.migration },
    at,
  }).run();
  await sealAuditChain(env, installationId, { anchor: true });
  return { installationId, restored: backup.manifest.counts, objects: backup.objects.length, auditChain: verdict };
}
