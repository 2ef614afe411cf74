// Retention: per installation, how long the personal data of a closed case is kept,
// and the scheduled sweep that erases it afterwards (retention-erase.ts says what goes and what
// stays).
//
// A case is *closed* when nothing about it is pending: no task of its reports open or claimed, no
// run of its reports (or of their appeals) outside a terminal state, no appeal open. cases.state
// is not the test: nothing marks a case resolved today (a new report reopens it). A closed case
// is *past retention* when its last activity is older than the period: its last report, and the
// last update of any of its tasks, runs, appeals and decisions. A case under an active
// preservation hold (preservation-holds.ts) counts as busy: neither this sweep nor an erasure
// request touches it. The period is at least 184 days,
// so a decision's six-month appeal window (Art. 20) has passed before its data goes.
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, errorCode } from "../../errors";
import { HELD_SQL } from "./preservation-holds";
import { eraseReports, NO_ERASURE, type ErasureCounts } from "./retention-erase";
import { sweepPeriodKeys } from "./retention-keys";

export const DEFAULT_RETENTION_DAYS = 365;
export const MIN_RETENTION_DAYS = 184;
export const MAX_RETENTION_DAYS = 3650;
const DAY_MS = 86_400_000;
/** Per sweep run: cases looked at, and reports erased per installation batch. */
const SWEEP_CASES = 25;
const BATCH_REPORTS = 50;

const TERMINAL = "('succeeded', 'failed', 'terminated', 'superseded')";

/**
 * SQL true when case `c` has pending work, or activity at or after `cutoff` (a bound parameter,
 * an ISO time; pass the current time to ask only "is anything pending").
 */
export function caseBusySql(cutoff: string): string {
  return `(
    EXISTS (SELECT 1 FROM reports r2 JOIN human_tasks t ON t.installation_id = r2.installation_id AND t.report_id = r2.id
      WHERE r2.case_id = c.id AND (t.state IN ('open', 'claimed') OR t.updated_at >= ${cutoff}))
    OR EXISTS (SELECT 1 FROM reports r2 JOIN workflow_runs w ON w.report_id = r2.id AND w.installation_id = r2.installation_id
      WHERE r2.case_id = c.id AND (w.state NOT IN ${TERMINAL} OR w.updated_at >= ${cutoff}))
    OR EXISTS (SELECT 1 FROM reports r2 JOIN appeals a ON a.installation_id = r2.installation_id AND a.report_id = r2.id
      WHERE r2.case_id = c.id AND (a.state = 'open' OR a.updated_at >= ${cutoff}
        OR EXISTS (SELECT 1 FROM workflow_runs w WHERE w.appeal_id = a.id AND (w.state NOT IN ${TERMINAL} OR w.updated_at >= ${cutoff}))))
    OR EXISTS (SELECT 1 FROM reports r2 JOIN decisions d ON d.report_id = r2.id AND d.installation_id = r2.installation_id
      WHERE r2.case_id = c.id AND d.decided_at >= ${cutoff})
    OR ${HELD_SQL}
  )`;
}

export interface RetentionSettings {
  personalDataDays: number;
  /** True when the installation has not chosen a period (the default applies). */
  isDefault: boolean;
  updatedAt: string | null;
  updatedBy: string | null;
}

export async function getRetentionSettings(db: D1Database, installationId: string): Promise<RetentionSettings> {
  const row = await db
    .prepare(`SELECT personal_data_days AS days, updated_at AS updatedAt, updated_by AS updatedBy FROM retention_settings WHERE installation_id = ?1`)
    .bind(installationId)
    .first<{ days: number; updatedAt: string; updatedBy: string }>();
  return row ? { personalDataDays: row.days, isDefault: false, updatedAt: row.updatedAt, updatedBy: row.updatedBy } : { personalDataDays: DEFAULT_RETENTION_DAYS, isDefault: true, updatedAt: null, updatedBy: null };
}

/** Sets the installation's period (audited with the previous one). */
export async function setRetentionSettings(env: Env, actor: Actor, input: { personalDataDays: number }): Promise<RetentionSettings> {
  const days = input.personalDataDays;
  if (!Number.isInteger(days) || days < MIN_RETENTION_DAYS || days > MAX_RETENTION_DAYS) {
    throw new AppError("retention.period_invalid", `personalDataDays must be a whole number of days from ${MIN_RETENTION_DAYS} (the six-month appeal window, Art. 20) to ${MAX_RETENTION_DAYS}.`, {
      status: 422,
      details: [{ path: "$.personalDataDays" }],
    });
  }
  const previous = await getRetentionSettings(env.DB, actor.installationId);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO retention_settings (installation_id, personal_data_days, updated_by, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
      ON CONFLICT(installation_id) DO UPDATE SET personal_data_days = excluded.personal_data_days, updated_by = excluded.updated_by, updated_at = excluded.updated_at
    `).bind(actor.installationId, days, actor.audit.id, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `retention_settings:${actor.installationId}:${at}`,
      action: "retention.settings_updated",
      actor: actor.audit,
      target: { type: "installation", id: actor.installationId },
      details: { personalDataDays: days, previousDays: previous.personalDataDays, previousWasDefault: previous.isDefault },
      at,
    }),
  ]);
  return getRetentionSettings(env.DB, actor.installationId);
}

/** Closed cases past their installation's period with personal data left, oldest first (all installations, or one). */
async function casesPastRetention(db: D1Database, now: Date, limit: number, installationId: string | null) {
  // The index range: no installation keeps data for less than the minimum, so older than that bounds every cutoff.
  const earliestCutoff = new Date(now.getTime() - MIN_RETENTION_DAYS * DAY_MS).toISOString();
  const { results } = await db
    .prepare(`
    SELECT c.installation_id AS installationId, c.id AS caseId, x.cutoff AS cutoff, x.days AS days
    FROM cases c
      JOIN (SELECT i.id AS installation_id, COALESCE(s.personal_data_days, ${DEFAULT_RETENTION_DAYS}) AS days,
              strftime('%Y-%m-%dT%H:%M:%fZ', ?1, '-' || COALESCE(s.personal_data_days, ${DEFAULT_RETENTION_DAYS}) || ' days') AS cutoff
            FROM installations i LEFT JOIN retention_settings s ON s.installation_id = i.id WHERE ?4 IS NULL OR i.id = ?4) x
        ON x.installation_id = c.installation_id
    WHERE c.personal_data_erased_at IS NULL AND c.last_reported_at < ?2 AND c.last_reported_at < x.cutoff
      AND EXISTS (SELECT 1 FROM reports r WHERE +r.installation_id = c.installation_id AND r.case_id = c.id AND r.personal_data_erased_at IS NULL)
      AND NOT ${caseBusySql("x.cutoff")}
    ORDER BY c.last_reported_at LIMIT ?3`)
    .bind(now.toISOString(), earliestCutoff, limit, installationId)
    .all<{ installationId: string; caseId: string; cutoff: string; days: number }>();
  return results;
}

/**
 * The retention sweep: erases the personal data of closed cases past their installation's period.
 * Bounded (at most 25 cases and 50 reports per installation batch per run; the next run goes on)
 * and idempotent (erased rows are skipped; a batch's event is keyed by what it erased). One audit
 * event `retention.personal_data_erased` per installation batch, with counts only. Then the keys
 * of periods whose records are all erased are destroyed (retention-keys.ts).
 */
export async function sweepRetention(env: Env, now: Date, options: { installationId?: string } = {}): Promise<Record<string, number>> {
  const candidates = await casesPastRetention(env.DB, now, SWEEP_CASES, options.installationId ?? null);
  const byInstallation = new Map<string, { caseIds: string[]; cutoff: string; days: number }>();
  for (const row of candidates) {
    const entry = byInstallation.get(row.installationId) ?? { caseIds: [], cutoff: row.cutoff, days: row.days };
    entry.caseIds.push(row.caseId);
    byInstallation.set(row.installationId, entry);
  }
  const total: ErasureCounts & { cases: number; installations: number; failed: number } = { ...NO_ERASURE, cases: 0, installations: 0, failed: 0 };
  const at = now.toISOString();
  for (const [installationId, entry] of byInstallation) {
    const { results } = await env.DB.prepare(`
      SELECT r.id, r.case_id AS caseId FROM json_each(?2) j CROSS JOIN reports r ON +r.installation_id = ?1 AND r.case_id = j.value
      WHERE r.personal_data_erased_at IS NULL ORDER BY r.created_at LIMIT ?3`)
      .bind(installationId, JSON.stringify(entry.caseIds), BATCH_REPORTS)
      .all<{ id: string; caseId: string }>();
    const reportIds = results.map((r) => r.id);
    const caseIds = [...new Set(results.map((r) => r.caseId))];
    let counts: ErasureCounts;
    try {
      counts = await eraseReports(env, installationId, {
        reportIds,
        at,
        audit: (erased) => ({
          installationId,
          // Keyed by the reports erased: a concurrent run erasing the same ones records one event.
          idempotencyKey: `retention:${installationId}:${reportIds[0]}:${reportIds.length}:${reportIds.at(-1)}`,
          action: "retention.personal_data_erased",
          actor: { type: "system", id: "retention" },
          target: { type: "installation", id: installationId },
          details: { ...erased, cases: caseIds.length, retentionDays: entry.days, closedBefore: entry.cutoff },
          at,
        }),
      });
    } catch (error) {
      // One installation's failure (e.g. a data key that does not open) must not stop the others';
      // it is counted and logged with its code (never the data), and retried next run.
      total.failed += 1;
      console.error(JSON.stringify({ event: "retention.batch_failed", installationId, code: errorCode(error) }));
      continue;
    }
    if (Object.values(counts).some((n) => n > 0)) {
      total.installations += 1;
      total.cases += caseIds.length;
      for (const key of Object.keys(NO_ERASURE) as (keyof ErasureCounts)[]) total[key] += counts[key];
    }
  }
  // Then the periods nothing needs any more lose their keys (retention-keys.ts).
  const keys = await sweepPeriodKeys(env, now, { installationId: options.installationId, defaultDays: DEFAULT_RETENTION_DAYS });
  return { ...total, keyPeriods: keys.periods, keysDestroyed: keys.keys, keysFailed: keys.failed };
}
