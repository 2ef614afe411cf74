// Erasure by keys: a period's data keys (report-crypto.ts) are destroyed once everything sealed
// under them is past retention and closed. Then every copy of that ciphertext — the hot rows left,
// archived runs in R2, backups exported from then on, D1 Time Travel — holds data nobody can open.
//
// A period P (a calendar month, UTC) of an installation may go when
//   - P ended, and its end is older than the installation's retention period (so every record
//     sealed in P is at least that old), and
//   - every report and appeal created before P's end is erased (retention-erase.ts: their cases
//     were closed and past retention) — what was sealed in P belongs to them or to later ones:
//     a task, step output or delivery is sealed when it is made, after its report; and
//   - nothing made before P's end is still live: no run outside a terminal state, no task open or
//     claimed, no webhook delivery pending (each may still open what it sealed).
// Values sealed in P that belong to no report (a run started without one) have no case to close:
// they go with their period once it is past retention, and read as erased from then on.
import { errorCode } from "../../errors";
import { dataKeyPeriod, destroyPeriodKeys } from "../reports/report-crypto";

const DAY_MS = 86_400_000;
/**
 * Installations looked at per sweep run, each at its oldest period with keys left: a period needed
 * still means every later one is too (the tests only widen), so one per installation is enough; a
 * random pick, so installations whose oldest period is still needed do not hold the others back.
 */
const SWEEP_INSTALLATIONS = 25;

/** The first instant after period `YYYY-MM`, as an ISO time. */
export function periodEnd(period: string): string {
  const [year, month] = period.split("-").map(Number);
  return new Date(Date.UTC(year!, month!, 1)).toISOString();
}

/** The run states that are not an end (workflows/types.ts), listed so each is one index seek. */
const LIVE_RUN_STATES = "('created', 'dispatch_pending', 'queued', 'running', 'waiting', 'repair_required')";

/**
 * SQL: 1 when the installation ?1 still holds something made before ?2 that needs its period's key.
 * Each test reads a narrow index: reports and appeals not erased (partial, migration 0033), live
 * runs by (installation, state, created_at), open tasks and pending deliveries (partial, named: the
 * planner would otherwise walk every task or delivery of the installation).
 */
const PERIOD_STILL_NEEDED = `SELECT
  EXISTS (SELECT 1 FROM reports WHERE installation_id = ?1 AND personal_data_erased_at IS NULL AND created_at < ?2)
  OR EXISTS (SELECT 1 FROM appeals WHERE installation_id = ?1 AND personal_data_erased_at IS NULL AND created_at < ?2)
  OR EXISTS (SELECT 1 FROM workflow_runs WHERE installation_id = ?1 AND state IN ${LIVE_RUN_STATES} AND created_at < ?2)
  OR EXISTS (SELECT 1 FROM human_tasks INDEXED BY human_tasks_open_due WHERE installation_id = ?1 AND state IN ('open', 'claimed') AND created_at < ?2)
  OR EXISTS (SELECT 1 FROM webhook_deliveries INDEXED BY webhook_deliveries_pending WHERE state = 'pending' AND installation_id = ?1 AND created_at < ?2) AS needed`;

/**
 * The key sweep (run after each retention sweep): destroys the keys of periods nothing needs any
 * more, at most one period for each of 25 installations a run (oldest first within each). Idempotent (destroyed keys are not looked at
 * again); one `data_key.destroyed` event per key. A failure is counted, logged by code, retried.
 */
export async function sweepPeriodKeys(env: Env, now: Date, options: { installationId?: string; defaultDays: number }): Promise<{ periods: number; keys: number; failed: number }> {
  // Periods that ended at least a day ago (no isolate still seals under their key).
  const before = dataKeyPeriod(new Date(now.getTime() - DAY_MS));
  const { results } = await env.DB.prepare(`
    SELECT k.installationId, k.period, COALESCE(s.personal_data_days, ?4) AS days FROM (
      SELECT installation_id AS installationId, MIN(period) AS period FROM data_keys
      WHERE period IS NOT NULL AND destroyed_at IS NULL AND period < ?1 AND (?2 IS NULL OR installation_id = ?2)
      GROUP BY installation_id
    ) k LEFT JOIN retention_settings s ON s.installation_id = k.installationId
    ORDER BY random() LIMIT ?3`)
    .bind(before, options.installationId ?? null, SWEEP_INSTALLATIONS, options.defaultDays)
    .all<{ installationId: string; period: string; days: number }>();
  const summary = { periods: 0, keys: 0, failed: 0 };
  const at = now.toISOString();
  for (const { installationId, period, days: personalDataDays } of results) {
    try {
      const end = periodEnd(period);
      if (Date.parse(end) > now.getTime() - personalDataDays * DAY_MS) continue;
      const needed = await env.DB.prepare(PERIOD_STILL_NEEDED).bind(installationId, end).first<{ needed: number }>();
      if (needed?.needed) continue;
      const ids = await destroyPeriodKeys(env, installationId, period, { at, actor: { type: "system", id: "retention" }, details: { retentionDays: personalDataDays } });
      if (ids.length > 0) {
        summary.periods += 1;
        summary.keys += ids.length;
      }
    } catch (error) {
      summary.failed += 1;
      console.error(JSON.stringify({ event: "retention.key_destroy_failed", installationId, period, code: errorCode(error) }));
    }
  }
  return summary;
}
