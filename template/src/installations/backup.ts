// Backup and restore of one installation: its D1 rows, table by table, and its R2
// objects, in one JSON document; restored into a deployment that does not have it yet
// (backup-restore.ts). This file: the format, the tables and the export.
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
import { auditStatement, canonicalJson, sealAuditChain, segmentKey } from "../audit";
import { sealBackupColumns } from "./backup-seal";
import { BACKUP_TABLES, type Where } from "./backup-tables";
import type { Actor } from "../auth";
import { AppError } from "../errors";
import { forgetInstallationKeys } from "../lib/api-key-cache";
import { sha256Hex } from "../lib/crypto";
import { outputRowsSql, runArchiveKey, withoutOutputColumns } from "../workflows";
import { archivedCaseObjects, personKeyObjectRows } from "../cases";
import { settleMovedDeliveries } from "../enforcement";
import { firstAttemptsAsRows } from "../lib/delivery-attempts";

export const BACKUP_FORMAT = "safest-tools.installation-backup/1";
export { BACKUP_TABLES } from "./backup-tables";

const PAGE = 500;
export const INSERT_BATCH = 50;
export const ID_PATTERN = /^[A-Za-z0-9._:-]{1,200}$/u;

export type Cell = string | number | null;
export type Row = Record<string, Cell>;

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

export async function migrationLevel(db: D1Database): Promise<string | null> {
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

/**
 * The installation's rows of a table, a page at a time in rowid order; a WITHOUT ROWID table
 * (`keys`: its primary key's columns) in the order of its key, each page after the last row's key.
 */
async function readRows(db: D1Database, table: string, where: Where, installationId: string, keys?: readonly string[]): Promise<Row[]> {
  const rows: Row[] = [];
  let after: Array<string | number> = keys ? [] : [0];
  for (;;) {
    const statement = keys
      ? db.prepare(`SELECT * FROM ${table} WHERE (${where})${after.length > 0 ? ` AND (${keys.join(", ")}) > (${keys.map((_, i) => `?${i + 2}`).join(", ")})` : ""} ORDER BY ${keys.join(", ")} LIMIT ${PAGE}`).bind(installationId, ...after)
      : db.prepare(`SELECT rowid AS __rowid, * FROM ${table} WHERE (${where}) AND rowid > ?2 ORDER BY rowid LIMIT ${PAGE}`).bind(installationId, after[0]);
    const { results } = await statement.all<Record<string, unknown>>();
    for (const { __rowid, ...row } of results) {
      for (const [column, value] of Object.entries(row)) {
        if (value !== null && typeof value !== "string" && typeof value !== "number") {
          throw new AppError("installation_export.unsupported_value", `Column ${table}.${column} holds a value a backup cannot carry (binary); export is not possible for this table yet.`, { status: 500 });
        }
      }
      rows.push(row as Row);
      after = keys ? keys.map((key) => row[key] as string | number) : [Number(__rowid)];
    }
    if (results.length < PAGE) return rows;
  }
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 8_192) binary += String.fromCharCode(...bytes.subarray(i, i + 8_192));
  return btoa(binary);
}

export function base64ToBytes(text: string): Uint8Array {
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

export const anchorKey = (installationId: string) => `audit/${installationId}/head.json`;

/** The object keys of the audit segments indexed in a backup's audit_segments rows, oldest first. */
export function segmentKeys(installationId: string, rows: Row[]): string[] {
  return rows
    .filter((row) => typeof row.from_seq === "number" && typeof row.to_seq === "number")
    .sort((a, b) => (a.from_seq as number) - (b.from_seq as number))
    .map((row) => segmentKey(installationId, row.from_seq as number, row.to_seq as number));
}

/**
 * The outputs of the installation's steps that keep them in their own row (workflows/step-output.ts),
 * as the workflow_step_outputs rows a backup has always carried, a page at a time in the steps' rowid order.
 */
async function inlineOutputRows(db: D1Database, installationId: string): Promise<Row[]> {
  const rows: Row[] = [];
  let after = "";
  for (;;) {
    const sql = outputRowsSql("s.run_id IN (SELECT id FROM workflow_runs WHERE installation_id = ?1) AND s.output_json IS NOT NULL AND s.rowid > COALESCE((SELECT rowid FROM workflow_step_runs WHERE id = ?2), 0)", "s.rowid");
    const { results } = await db.prepare(`${sql} LIMIT ${PAGE}`).bind(installationId, after).all<Row>();
    rows.push(...results);
    if (results.length < PAGE) return rows;
    after = String(results.at(-1)!.step_run_id);
  }
}

/**
 * A backup's step rows and outputs in the form it has always had, whichever form D1 keeps an output
 * in: step rows without the output's columns, one outputs row per step with an output (the step
 * row's own, where a step has both).
 */
async function stepOutputsAsRows(db: D1Database, installationId: string, tables: InstallationBackup["tables"]): Promise<void> {
  const inline = await inlineOutputRows(db, installationId);
  const steps = new Set(inline.map((row) => String(row.step_run_id)));
  tables.workflow_step_runs = (tables.workflow_step_runs ?? []).map(withoutOutputColumns);
  tables.workflow_step_outputs = [...(tables.workflow_step_outputs ?? []).filter((row) => !steps.has(String(row.step_run_id))), ...inline];
}

/** A run's child tables as the run archive leaves them, each by the run it belongs to (?1 a JSON array of run ids). */
const RUN_CHILDREN: ReadonlyArray<{ table: string; byRuns: string }> = [
  { table: "workflow_step_runs", byRuns: `run_id IN (SELECT value FROM json_each(?1))` },
  { table: "workflow_step_outputs", byRuns: `step_run_id IN (SELECT id FROM workflow_step_runs WHERE run_id IN (SELECT value FROM json_each(?1)))` },
  { table: "workflow_waits", byRuns: `run_id IN (SELECT value FROM json_each(?1))` },
  { table: "workflow_events", byRuns: `run_id IN (SELECT value FROM json_each(?1))` },
  { table: "workflow_run_repairs", byRuns: `run_id IN (SELECT value FROM json_each(?1))` },
];

/**
 * A run archived while an export read its tables: its row was read before (not archived), and
 * some or all of its child rows were deleted before their table was read. Its row takes the
 * archived state it has now (so its object travels with the backup), and its child rows are the
 * ones D1 holds now (the steps other records still point at), not a half-read set.
 */
export async function settleRunsArchivedMeanwhile(db: D1Database, installationId: string, tables: InstallationBackup["tables"]): Promise<number> {
  const runs = tables.workflow_runs ?? [];
  const read = runs.filter((row) => row.archived_at === null || row.archived_at === undefined).map((row) => String(row.id));
  const archived = new Map<string, Row>();
  for (let i = 0; i < read.length; i += PAGE) {
    const { results } = await db
      .prepare(`SELECT id, archived_at, archive_digest, archive_bytes, archive_sealed_erased_at FROM workflow_runs
        WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2)) AND archived_at IS NOT NULL`)
      .bind(installationId, JSON.stringify(read.slice(i, i + PAGE)))
      .all<Row>();
    for (const row of results) archived.set(String(row.id), row);
  }
  if (archived.size === 0) return 0;
  for (const row of runs) {
    const now = archived.get(String(row.id));
    if (now) Object.assign(row, { archived_at: now.archived_at, archive_digest: now.archive_digest, archive_bytes: now.archive_bytes, archive_sealed_erased_at: now.archive_sealed_erased_at });
  }
  const ids = JSON.stringify([...archived.keys()]);
  const steps = new Set((tables.workflow_step_runs ?? []).filter((row) => archived.has(String(row.run_id))).map((row) => String(row.id)));
  for (const { table, byRuns } of RUN_CHILDREN) {
    const rows = tables[table];
    if (!rows) continue;
    const kept = rows.filter((row) => (table === "workflow_step_outputs" ? !steps.has(String(row.step_run_id)) : !archived.has(String(row.run_id))));
    // An archived run's step rows left in D1 are anchors, whose output went with the archive.
    const { results } = await db.prepare(`SELECT * FROM ${table} WHERE ${byRuns}`).bind(ids).all<Row>();
    tables[table] = [...kept, ...(table === "workflow_step_runs" ? results.map(withoutOutputColumns) : results)];
  }
  return archived.size;
}

/** The columns that identify a row of the tables a case archive holds (their primary keys). */
function primaryKeyOf(table: string, row: Row): Cell[] {
  if (table === "tdb_submissions") return [row.decision_id ?? null];
  if (table === "notifier_notices") return [row.report_id ?? null];
  if (table === "connector_reports") return [row.connector_id ?? null, row.remote_report_id ?? null];
  return [row.id ?? null];
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
  for (const { table, where, backup, keys } of BACKUP_TABLES) {
    if (backup === false) continue;
    tables[table] = await readRows(env.DB, table, where, installationId, keys);
    counts[table] = tables[table].length;
  }
  await stepOutputsAsRows(env.DB, installationId, tables);
  counts.workflow_step_outputs = tables.workflow_step_outputs?.length ?? 0;
  // People's keys live in R2 (cases/reports/person-data-keys.ts); the backup carries them as rows
  // of person_data_keys beside any made before they moved there, so it opens what it holds.
  const personKeys = await personKeyObjectRows(env, installationId);
  if (personKeys.length > 0) {
    tables.person_data_keys = [...(tables.person_data_keys ?? []), ...personKeys];
    counts.person_data_keys = tables.person_data_keys.length;
  }
  // Archived cases (cases/archive): their rows are in one R2 object each, not in D1; the backup
  // carries them as rows, so a restore has them hot (and archives them again on its schedule).
  // A row the D1 read already has (a case brought back, or archived while this export ran) is
  // taken from D1, once: its newest form.
  const seen = new Map<string, Set<string>>();
  const seenIn = (table: string, rows: Row[]) => {
    const known = seen.get(table);
    if (known) return known;
    const keys = new Set(rows.map((row) => JSON.stringify(primaryKeyOf(table, row))));
    seen.set(table, keys);
    return keys;
  };
  for (const archived of await archivedCaseObjects(env, installationId)) {
    for (const [table, rows] of Object.entries(archived.tables)) {
      const into = tables[table];
      if (!into) continue;
      const keys = seenIn(table, into);
      for (const row of rows as Row[]) {
        const key = JSON.stringify(primaryKeyOf(table, row));
        if (keys.has(key)) continue;
        keys.add(key);
        into.push(row);
        counts[table] = (counts[table] ?? 0) + 1;
      }
    }
  }
  // A delivery's first attempt kept on its row (lib/delivery-attempts.ts) travels as the
  // webhook_attempts row a backup has always carried, and the row without its columns.
  tables.webhook_attempts = firstAttemptsAsRows(tables.webhook_deliveries ?? [], tables.webhook_attempts ?? []);
  counts.webhook_attempts = tables.webhook_attempts.length;
  // Settled deliveries whose payload and attempts moved to R2 (enforcement/delivery-archive.ts)
  // travel hot: their payloads and attempts from their objects, so a restore needs none of them.
  if ((await settleMovedDeliveries(env, installationId, tables)) > 0) {
    counts.webhook_deliveries = tables.webhook_deliveries?.length ?? 0;
    counts.webhook_attempts = tables.webhook_attempts?.length ?? 0;
  }
  // People's names and answers travel sealed (backup-seal.ts).
  await sealBackupColumns(env, installationId, tables);
  const objects: BackupObject[] = [];
  const artifactKeys = new Set((tables.workflow_artifacts ?? []).map((row) => row.bundle_r2_key).filter((key): key is string => typeof key === "string"));
  for (const key of [...artifactKeys].sort()) {
    const object = await readObject(env.WORKFLOW_ARTIFACTS, "WORKFLOW_ARTIFACTS", key);
    if (!object) throw new AppError("installation_export.object_missing", `The artifact object ${key} is missing from R2; the installation cannot be backed up whole.`, { status: 500 });
    objects.push(object);
  }
  if ((await settleRunsArchivedMeanwhile(env.DB, installationId, tables)) > 0) for (const { table } of RUN_CHILDREN) if (tables[table]) counts[table] = tables[table].length;
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
