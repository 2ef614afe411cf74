// Storage in tiers, per installation: the hot window (how long a closed case stays whole in D1
// before cases/archive moves it to R2; an ended run's step history leaves after an hour, or at once
// with a 0-day window: lib/storage-tiers.ts) and what the installation holds where.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError } from "../errors";
import { caseArchiveTotals } from "../cases";
import { DEFAULT_HOT_DAYS, AUDIT_HOT_MINUTES, DELIVERY_PAYLOAD_HOT_MINUTES, RUN_HISTORY_HOT_MINUTES, SEGMENT_MIN_EVENTS } from "../lib/storage-tiers";

export const MIN_HOT_DAYS = 0;
export const MAX_HOT_DAYS = 3650;
/** Where a D1 database stops growing (Cloudflare's limit per database). */
export const D1_LIMIT_BYTES = 10 * 1024 ** 3;

export interface StorageSettings {
  hotDays: number;
  /** True when the installation has not chosen (the default applies). */
  isDefault: boolean;
  updatedAt: string | null;
}

export async function getStorageSettings(db: D1Database, installationId: string): Promise<StorageSettings> {
  const row = await db.prepare(`SELECT hot_days AS hotDays, updated_at AS updatedAt FROM storage_settings WHERE installation_id = ?1`).bind(installationId).first<{ hotDays: number; updatedAt: string }>();
  return row ? { hotDays: row.hotDays, isDefault: false, updatedAt: row.updatedAt } : { hotDays: DEFAULT_HOT_DAYS, isDefault: true, updatedAt: null };
}

/** Sets the installation's hot window (audited `storage.settings_updated` with the previous one). */
export async function setStorageSettings(env: Env, actor: Actor, input: { hotDays: number }): Promise<StorageSettings> {
  const days = input.hotDays;
  if (!Number.isInteger(days) || days < MIN_HOT_DAYS || days > MAX_HOT_DAYS) {
    throw new AppError("storage.hot_days_invalid", `hotDays must be a whole number of days from ${MIN_HOT_DAYS} to ${MAX_HOT_DAYS}.`, { status: 422, details: [{ path: "$.hotDays" }] });
  }
  const previous = await getStorageSettings(env.DB, actor.installationId);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO storage_settings (installation_id, hot_days, updated_by, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
      ON CONFLICT(installation_id) DO UPDATE SET hot_days = excluded.hot_days, updated_by = excluded.updated_by, updated_at = excluded.updated_at`).bind(actor.installationId, days, actor.audit.id, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `storage_settings:${actor.installationId}:${at}`,
      action: "storage.settings_updated",
      actor: actor.audit,
      target: { type: "installation", id: actor.installationId },
      details: { hotDays: days, previousHotDays: previous.hotDays, previousWasDefault: previous.isDefault },
      at,
    }),
  ]);
  return getStorageSettings(env.DB, actor.installationId);
}

const OWN = "installation_id = ?1";
const RUNS = "run_id IN (SELECT id FROM workflow_runs WHERE installation_id = ?1)";

/** The tables the report sizes (the ones that grow with traffic), with how their rows belong to an installation. */
const SIZED_TABLES: ReadonlyArray<{ name: string; where: string }> = [
  { name: "workflow_runs", where: OWN },
  { name: "workflow_step_runs", where: RUNS },
  { name: "workflow_step_outputs", where: `step_run_id IN (SELECT s.id FROM workflow_step_runs s JOIN workflow_runs r ON r.id = s.run_id WHERE r.installation_id = ?1)` },
  { name: "workflow_waits", where: RUNS },
  { name: "workflow_events", where: OWN },
  { name: "workflow_run_repairs", where: OWN },
  { name: "human_tasks", where: OWN },
  { name: "action_proposals", where: OWN },
  { name: "decisions", where: OWN },
  { name: "messages", where: OWN },
  { name: "handoffs", where: OWN },
  { name: "webhook_deliveries", where: OWN },
  { name: "reports", where: OWN },
  { name: "cases", where: OWN },
  { name: "appeals", where: OWN },
  { name: "audit_events", where: OWN },
];

/** Rows sampled per table for the average row length. */
const SAMPLE_ROWS = 200;

export const ESTIMATE_METHOD =
  `Per table: rows × the mean of SUM(LENGTH(column)) over the installation's newest ${SAMPLE_ROWS} rows (stored text and blob lengths; ` +
  "SQLite's page overhead and indexes are not counted). databaseBytes: the whole database file as D1 reports it (meta.size_after), every installation together. " +
  "daysUntilFull: (10 GiB − databaseBytes) ÷ this installation's daily growth over the last 7 days (runs created × its D1 bytes per run, archived runs counted); null without growth.";

async function sizeTable(db: D1Database, installationId: string, table: { name: string; where: string }) {
  const { results: columns } = await db.prepare(`SELECT name FROM pragma_table_info(?1)`).bind(table.name).all<{ name: string }>();
  const length = columns.map((c) => `COALESCE(LENGTH("${c.name.replace(/"/gu, '""')}"), 0)`).join(" + ") || "0";
  const [count, sample] = await db.batch<{ n: number | null }>([
    db.prepare(`SELECT COUNT(*) AS n FROM ${table.name} WHERE ${table.where}`).bind(installationId),
    db.prepare(`SELECT AVG(len) AS n FROM (SELECT ${length} AS len FROM ${table.name} WHERE ${table.where} ORDER BY rowid DESC LIMIT ${SAMPLE_ROWS})`).bind(installationId),
  ]);
  const rows = Number(count?.results[0]?.n ?? 0);
  return { name: table.name, rows, bytesEstimate: Math.round(rows * Number(sample?.results[0]?.n ?? 0)) };
}

/** The installation's runs whose step history is in R2, and its bytes (?1 installation): a range of workflow_runs_installation. */
export const ARCHIVED_RUNS_SQL = `SELECT COUNT(*) AS runs, COALESCE(SUM(archive_bytes), 0) AS bytes FROM workflow_runs WHERE installation_id = ?1 AND archived_at IS NOT NULL`;

/** What the installation holds in D1 and in the archive, and how long until D1 is full at its pace. */
export async function getStorageReport(env: Env, installationId: string, now: Date = new Date()) {
  const db = env.DB;
  const settings = await getStorageSettings(db, installationId);
  const tables = [];
  for (const table of SIZED_TABLES) tables.push(await sizeTable(db, installationId, table));
  const bytesEstimate = tables.reduce((sum, t) => sum + t.bytesEstimate, 0);
  const weekAgo = new Date(now.getTime() - 7 * 86_400_000).toISOString();
  const [archive, oldest, recent, probe] = await db.batch<Record<string, number | string | null>>([
    db.prepare(ARCHIVED_RUNS_SQL).bind(installationId),
    db.prepare(`SELECT MIN(created_at) AS at FROM workflow_runs WHERE installation_id = ?1 AND archived_at IS NULL`).bind(installationId),
    db.prepare(`SELECT COUNT(*) AS runs FROM workflow_runs WHERE installation_id = ?1 AND created_at >= ?2`).bind(installationId, weekAgo),
    db.prepare(`SELECT 1 AS one`),
  ]);
  const archivedRuns = Number(archive?.results[0]?.runs ?? 0);
  const cases = await caseArchiveTotals(db, installationId);
  const archiveBytes = Number(archive?.results[0]?.bytes ?? 0) + cases.bytes;
  const sizeAfter = (probe?.meta as { size_after?: number } | undefined)?.size_after;
  const databaseBytes = typeof sizeAfter === "number" && sizeAfter > 0 ? sizeAfter : null;
  // What a run costs D1 as the installation runs now: its rows over all its runs, archived ones
  // included (their run row, tasks and audit events stay), so archiving shows as slower growth.
  const runs = tables.find((t) => t.name === "workflow_runs")?.rows ?? 0;
  const bytesPerRun = runs > 0 ? bytesEstimate / runs : 0;
  const growthPerDay = (Number(recent?.results[0]?.runs ?? 0) * bytesPerRun) / 7;
  const used = databaseBytes ?? bytesEstimate;
  return {
    hotDays: settings.hotDays,
    hotDaysIsDefault: settings.isDefault,
    /** Minutes an ended run's step history stays in D1 before it moves to R2 (the case keeps hotDays). */
    runHistoryMinutes: Math.min(settings.hotDays * 1440, RUN_HISTORY_HOT_MINUTES),
    /** Minutes a sealed audit event stays in D1 before it moves to an R2 segment (in segments of at least auditSegmentMinEvents; the rest after hotDays). */
    auditHotMinutes: Math.min(settings.hotDays * 1440, AUDIT_HOT_MINUTES),
    auditSegmentMinEvents: SEGMENT_MIN_EVENTS,
    /** Minutes a settled webhook delivery keeps its sealed payload and attempts in D1 before they move to its R2 object (the row keeps hotDays). */
    deliveryPayloadMinutes: Math.min(settings.hotDays * 1440, DELIVERY_PAYLOAD_HOT_MINUTES),
    d1: { tables, bytesEstimate, databaseBytes, limitBytes: D1_LIMIT_BYTES, estimateMethod: ESTIMATE_METHOD },
    archivedRuns,
    archivedCases: cases.cases,
    archiveBytes,
    oldestHotRecordAt: (oldest?.results[0]?.at as string | null | undefined) ?? null,
    daysUntilFull: growthPerDay > 0 ? Math.max(0, Math.floor((D1_LIMIT_BYTES - used) / growthPerDay)) : null,
  };
}
