// Restore of one installation from a backup (backup.ts: the format, the tables, the export):
// the file is checked whole first (format, digest, migration level, that every row and object is
// the installation's own, the archived runs' objects), then rows go in parents first, then the R2
// objects, then the audit chain must verify in full; anything that fails removes what was written.
// It never writes a row of an installation that exists.
import { auditStatement, deleteAuditSegments, indexSegmentObjectTargets, sealAuditChain, verifyAuditChain } from "../audit";
import { AppError } from "../errors";
import { forgetInstallationKeys } from "../lib/api-key-cache";
import { openBackupColumns } from "./backup-seal";
import { isUniqueViolation } from "../lib/d1";
import { isRunArchiveKeyOf, runArchiveKey, runArchiveTextHolds } from "../workflows";
import { deleteInstallationPersonKeys, isObjectKeyRow, restorePersonKeyObjects } from "../cases";
// Not through cases/index.ts: retention reaches enforcement and workflows, which import it.
import { reapplyErasures } from "../cases/retention/erasure-reapply";
import { listTermsOnReports } from "../cases";
import {
  anchorKey,
  BACKUP_FORMAT,
  BACKUP_TABLES,
  type BackupManifest,
  backupDigest,
  base64ToBytes,
  type Cell,
  ID_PATTERN,
  INSERT_BATCH,
  type InstallationBackup,
  installationDeleteStatements,
  migrationLevel,
  type Row,
  segmentKeys,
} from "./backup";

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
  // A backup carries every delivery with its payload and attempts in its rows (a moved one's are
  // filled in from its R2 object at export: enforcement/delivery-archive.ts); a row marked moved
  // would point at an object the backup does not carry.
  if ((backup.tables.webhook_deliveries ?? []).some((row) => row.payload_sealed === "")) {
    throw new AppError("installation_import.invalid", "A row of webhook_deliveries has an empty payload_sealed; a backup carries every delivery with its sealed payload.", { status: 422 });
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
  assertAuditTrailPresent(backup);
  await assertNoForeignReferences(env.DB, backup);
  await assertNoForeignStepIds(env.DB, backup);
  return backup;
}

/**
 * The ids a run's steps derive from the run's id (`<run>:<node>:<branch>:1`, a wait `<step>:wait`,
 * a workflow task `<step>:task`, a proposal `<step>:proposal`), as rows carry them: in their own id
 * or as a reference. Each names the run it begins with.
 */
const STEP_DERIVED: ReadonlyArray<{ table: string; column: string; suffix?: string }> = [
  { table: "workflow_step_runs", column: "id" },
  { table: "workflow_waits", column: "id" },
  { table: "workflow_events", column: "wait_id" },
  { table: "human_tasks", column: "id", suffix: ":task" },
  { table: "action_proposals", column: "id", suffix: ":proposal" },
  ...["workflow_waits", "workflow_step_outputs", "human_tasks", "action_proposals", "decisions", "messages", "handoffs", "cybertipline_submissions"].map((table) => ({ table, column: "step_run_id" })),
];

/**
 * Every id a backup's rows derive from a run (STEP_DERIVED) must begin with a run that is not another
 * installation's: a crafted file could otherwise hold the id another installation's live run will
 * give its next step, wait, task or proposal, which that run's insert would then find taken (and its
 * reads by that id find the planted row). 422 `installation_import.foreign_reference`.
 */
async function assertNoForeignStepIds(db: D1Database, backup: InstallationBackup): Promise<void> {
  const runOf = (value: Cell | undefined) => (typeof value === "string" && value.includes(":") ? value.slice(0, value.indexOf(":")) : null);
  const named = new Set<string>();
  for (const { table, column, suffix } of STEP_DERIVED) {
    for (const row of backup.tables[table] ?? []) {
      const value = row[column];
      if (suffix && !(typeof value === "string" && value.endsWith(suffix))) continue;
      const run = runOf(value);
      if (run) named.add(run);
    }
  }
  const values = [...named];
  for (let i = 0; i < values.length; i += REFERENCE_CHUNK) {
    const foreign = await db
      .prepare(`SELECT id FROM workflow_runs WHERE id IN (SELECT value FROM json_each(?1)) AND installation_id <> ?2 LIMIT 1`)
      .bind(JSON.stringify(values.slice(i, i + REFERENCE_CHUNK)), backup.manifest.installationId)
      .first<{ id: string }>();
    if (foreign) {
      throw new AppError("installation_import.foreign_reference", `A row of the backup is named for a step of run ${foreign.id}, which belongs to another installation of this deployment.`, {
        status: 422,
        details: [{ table: "workflow_runs", column: "id", references: "workflow_runs" }],
      });
    }
  }
}

/**
 * A backup always carries its audit trail: the export itself is audited first, and the chain is
 * checkpointed and anchored. One without events (in D1 rows or archived segments), checkpoints or
 * the anchor object was cut down, and an empty chain would verify: 422
 * `installation_import.audit_missing`.
 */
function assertAuditTrailPresent(backup: InstallationBackup): void {
  const rows = (table: string) => (backup.tables[table] ?? []).length;
  const missing = [
    ...(rows("audit_events") + rows("audit_segments") === 0 ? ["audit_events (or audit_segments)"] : []),
    ...(rows("audit_checkpoints") === 0 ? ["audit_checkpoints"] : []),
    ...(backup.objects.some((object) => object.bucket === "AUDIT_ANCHORS" && object.key === anchorKey(backup.manifest.installationId)) ? [] : ["the audit anchor object"]),
  ];
  if (missing.length > 0) {
    throw new AppError("installation_import.audit_missing", `The backup lacks ${missing.join(", ")}: every export carries its audit trail, so this file was cut down; restore an untouched export.`, {
      status: 422,
      details: { missing },
    });
  }
}

/** Ids checked per statement (bound as one JSON array). */
const REFERENCE_CHUNK = 200;

/**
 * Every id a backup's rows name — their own primary key and each column declared as a foreign key
 * (SQLite's `pragma_foreign_key_list`) — must not be a row of another installation in this
 * deployment: a crafted backup could otherwise claim another installation's connector, report or
 * key (and then answer its webhooks as replays). 422 `installation_import.foreign_reference`.
 */
async function assertNoForeignReferences(db: D1Database, backup: InstallationBackup): Promise<void> {
  const owner = backup.manifest.installationId;
  const owned = new Map<string, boolean>();
  const hasInstallation = async (table: string) => {
    const known = owned.get(table);
    if (known !== undefined) return known;
    const has = (await tableColumns(db, table)).has("installation_id");
    owned.set(table, has);
    return has;
  };
  for (const [table, rows] of Object.entries(backup.tables)) {
    if (rows.length === 0 || table === "installations") continue;
    const { results: keys } = await db.prepare(`SELECT "table" AS ref, "from" AS col, "to" AS refCol FROM pragma_foreign_key_list(?1)`).bind(table).all<{ ref: string; col: string; refCol: string | null }>();
    const references = keys.filter((key) => key.col !== "installation_id" && key.ref !== "installations").map((key) => ({ col: key.col, ref: key.ref, refCol: key.refCol ?? "id" }));
    if (rows.some((row) => "id" in row)) references.push({ col: "id", ref: table, refCol: "id" });
    for (const { col, ref, refCol } of references) {
      if (!(await hasInstallation(ref))) continue;
      const values = [...new Set(rows.map((row) => row[col]).filter((value): value is string | number => value !== null && value !== undefined))];
      for (let i = 0; i < values.length; i += REFERENCE_CHUNK) {
        const foreign = await db
          .prepare(`SELECT ${refCol} AS value FROM ${ref} WHERE ${refCol} IN (SELECT value FROM json_each(?1)) AND installation_id <> ?2 LIMIT 1`)
          .bind(JSON.stringify(values.slice(i, i + REFERENCE_CHUNK)), owner)
          .first<{ value: string }>();
        if (foreign) {
          throw new AppError("installation_import.foreign_reference", `A row of ${table} names ${ref} ${String(foreign.value)} (${col}), which belongs to another installation of this deployment.`, {
            status: 422,
            details: [{ table, column: col, references: ref }],
          });
        }
      }
    }
  }
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
  await openBackupColumns(env, installationId, backup.tables);
  if (await env.DB.prepare(`SELECT 1 FROM installations WHERE id = ?1`).bind(installationId).first()) {
    throw new AppError("installation_import.exists", "This deployment already has that installation; restore into a fresh state folder or account.", { status: 409 });
  }
  // A backup made before reports listed their search terms: the lists, from the term rows it holds.
  listTermsOnReports(backup.tables.reports, backup.tables.search_terms);
  const statements: D1PreparedStatement[] = [];
  for (const { table, backup: included } of BACKUP_TABLES) {
    if (included === false) continue;
    // People's keys that live in R2 (a 12-digit generation) are written there below, not to D1.
    for (const row of backup.tables[table] ?? []) if (table !== "person_data_keys" || !isObjectKeyRow(row)) statements.push(insertStatement(env.DB, table, row));
  }
  const rollback = async () => {
    await env.DB.batch(installationDeleteStatements(env.DB, installationId));
    forgetInstallationKeys(installationId); // again once committed: a lookup that began meanwhile is not remembered
    await env.AUDIT_ANCHORS.delete(anchorKey(installationId));
    await deleteAuditSegments(env, installationId);
    await deleteInstallationPersonKeys(env, installationId);
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
    await restorePersonKeyObjects(env, installationId, (backup.tables.person_data_keys ?? []).filter(isObjectKeyRow));
    // A backup carries the segments, not their target markers: written again from the segments' lines.
    for (const row of backup.tables.audit_segments ?? []) await indexSegmentObjectTargets(env.AUDIT_ANCHORS, installationId, Number(row.from_seq), Number(row.to_seq));
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
  // People erased since the backup was taken stay erased: their tombstones outlive the
  // installation's rows, and their erasure is applied again to what the backup brought back.
  let erasures: Awaited<ReturnType<typeof reapplyErasures>>;
  try {
    erasures = await reapplyErasures(env, installationId);
  } catch (error) {
    await rollback();
    if (error instanceof AppError && error.status < 500) throw error;
    throw new AppError("installation_import.erasure_reapply_failed", "The erasures made since this backup could not be applied again to it; nothing of the backup was kept. Retry the restore.", { status: 503, retryable: true });
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
  return { installationId, restored: backup.manifest.counts, objects: backup.objects.length, auditChain: verdict, erasuresReapplied: erasures };
}

/**
 * Re-applies an installation's erasures (their tombstones, in D1 and R2) to what it holds now: for
 * a database brought back by other means than a restore (D1 Time Travel, a copy from elsewhere),
 * which may hold keys and rows of people erased since. Idempotent. 404 for an unknown installation.
 */
export async function reapplyInstallationErasures(env: Env, installationId: string) {
  if (!ID_PATTERN.test(installationId) || !(await env.DB.prepare(`SELECT 1 FROM installations WHERE id = ?1`).bind(installationId).first())) {
    throw new AppError("installation.not_found", "The installation does not exist.", { status: 404 });
  }
  const erasures = await reapplyErasures(env, installationId);
  await sealAuditChain(env, installationId, { anchor: true });
  return { installationId, erasuresReapplied: erasures };
}
