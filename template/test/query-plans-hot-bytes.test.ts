// The queries that read the indexes migration 0069 dropped or narrowed still seek: a case's reports
// through reports_case (reports_retained is gone), a report's messages through messages_report (report_id), a notifier's notices through its hash, a
// version's shadow runs through workflow_runs_shadow and a version's runs through
// workflow_runs_version. Each statement is the one the code runs (or its exact WHERE clause).
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";

/** EXPLAIN QUERY PLAN of `sql` with as many of `binds` as it has parameters (`?N`). */
async function planOf(sql: string, binds: unknown[] = []): Promise<string[]> {
  const count = Math.max(0, ...[...sql.matchAll(/\?(\d+)/gu)].map((m) => Number(m[1])));
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...binds.slice(0, count))
    .all<{ detail: string }>();
  return results.map((row) => row.detail);
}

const walks = (details: string[], table: string) => details.filter((d) => new RegExp(`^SCAN ${table}\\b(?! USING)`, "u").test(d) || new RegExp(`^SCAN \\w+ \\(${table}\\)`, "u").test(d));
const p = (n: number) => Array.from({ length: n }, (_, i) => `x${i}`);

describe("plans of the queries migration 0069 re-routed", () => {
  it("the dropped and rebuilt indexes are as the migration says", async () => {
    const { results } = await env.DB.prepare(
      `SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND name IN ('reports_retained', 'messages_report', 'notifier_notices_notifier', 'workflow_runs_version_mode', 'workflow_runs_version', 'workflow_runs_shadow') ORDER BY name`,
    ).all<{ name: string; sql: string }>();
    expect(results.map((r) => r.name)).toEqual(["messages_report", "notifier_notices_notifier", "workflow_runs_shadow", "workflow_runs_version"]);
    for (const row of results) expect(row.sql).not.toContain("installation_id");
  });

  it("a case's reports (retention, erasure) seek reports_case", async () => {
    // The retention sweep's reports of its cases (cases/retention/retention.ts).
    const sweep = await planOf(
      `SELECT r.id, r.case_id AS caseId FROM json_each(?2) j CROSS JOIN reports r ON +r.installation_id = ?1 AND r.case_id = j.value
      WHERE r.personal_data_erased_at IS NULL ORDER BY r.created_at LIMIT ?3`,
      ["inst", "[]", 50],
    );
    expect(sweep.some((d) => /SEARCH r USING INDEX reports_case \(case_id=\?\)/u.test(d))).toBe(true);
    expect(walks(sweep, "r")).toEqual([]);
    // A case past retention with a report left unerased (casesPastRetention's EXISTS), and erasure's closing of a case.
    for (const sql of [
      `SELECT c.id FROM cases c WHERE c.personal_data_erased_at IS NULL AND c.last_reported_at < ?1
        AND EXISTS (SELECT 1 FROM reports r WHERE +r.installation_id = c.installation_id AND r.case_id = c.id AND r.personal_data_erased_at IS NULL)`,
      `UPDATE cases SET personal_data_erased_at = ?3 WHERE +installation_id = ?1 AND personal_data_erased_at IS NULL
        AND id IN (SELECT r.case_id FROM json_each(?2) j CROSS JOIN reports r ON r.id = j.value WHERE r.installation_id = ?1)
        AND NOT EXISTS (SELECT 1 FROM reports r WHERE +r.installation_id = ?1 AND r.case_id = cases.id AND r.personal_data_erased_at IS NULL)`,
    ]) {
      const plan = await planOf(sql, ["2026-01-01", "[]", "2026-01-01"]);
      expect(plan.some((d) => /SEARCH r (EXISTS )?USING INDEX reports_case \(case_id=\?\)/u.test(d))).toBe(true);
      expect(walks(plan, "r")).toEqual([]);
      // Erasure's closing of a case finds the case by its id, not among all of the installation's.
      expect(plan.some((d) => /^SEARCH (c|cases) USING INDEX sqlite_autoindex_cases_2 \(installation_id=\?\)$/u.test(d))).toBe(false);
      if (sql.startsWith("UPDATE")) expect(plan).toContain("SEARCH cases USING INDEX sqlite_autoindex_cases_1 (id=?)");
    }
  });

  it("a report's messages seek messages_report", async () => {
    // The report's timeline (cases/reports/timeline.ts) and erasure of its deliveries (enforcement/erasure.ts).
    const timeline = await planOf(`SELECT m.created_at AS at, m.id FROM messages m LEFT JOIN webhook_deliveries d ON d.id = m.delivery_id AND d.installation_id = m.installation_id WHERE m.installation_id = ?1 AND m.report_id = ?2`, p(2));
    expect(timeline.some((d) => /SEARCH m USING INDEX messages_report \(report_id=\?\)/u.test(d))).toBe(true);
    const erasure = await planOf(`SELECT d.id FROM json_each(?3) j CROSS JOIN messages m ON m.installation_id = ?1 AND m.report_id = j.value CROSS JOIN webhook_deliveries d ON d.id = m.delivery_id`, p(3));
    expect(erasure.some((d) => /SEARCH m USING INDEX messages_report \(report_id=\?\)/u.test(d))).toBe(true);
    expect(walks(erasure, "m")).toEqual([]);
    const scope = await planOf(`SELECT id FROM messages WHERE installation_id = ?2 AND report_id IN (SELECT value FROM json_each(?1))`, p(2));
    expect(scope.some((d) => /SEARCH messages USING INDEX messages_report \(report_id=\?\)/u.test(d))).toBe(true);
  });

  it("a notifier's notices seek notifier_notices_notifier", async () => {
    // cases/notices/notifiers.ts: a notifier's figures and its latest notice.
    const figures = await planOf(`SELECT COUNT(*) FROM notifier_notices n WHERE n.installation_id = ?1 AND n.notifier_hash IN (SELECT value FROM json_each(?2))`, p(2));
    expect(figures.some((d) => /SEARCH n USING INDEX notifier_notices_notifier \(notifier_hash=\?\)/u.test(d))).toBe(true);
    const latest = await planOf(
      `SELECT r.id FROM notifier_notices n CROSS JOIN reports r ON r.id = n.report_id AND r.installation_id = n.installation_id
      WHERE n.installation_id = ?1 AND n.notifier_hash IN (SELECT value FROM json_each(?2)) ORDER BY n.created_at DESC LIMIT 1`,
      p(2),
    );
    expect(latest.some((d) => /SEARCH n USING INDEX notifier_notices_notifier \(notifier_hash=\?\)/u.test(d))).toBe(true);
    expect(walks(latest, "n")).toEqual([]);
  });

  it("a version's shadow runs seek workflow_runs_shadow; a version's runs, workflow_runs_version", async () => {
    // automation/shadow-sources.ts: the succeeded shadow runs of a version, newest first, and its failed ones.
    const shadow = await planOf(
      `SELECT r.id FROM workflow_runs r JOIN reports rep ON rep.id = r.report_id AND rep.installation_id = r.installation_id
      WHERE r.installation_id = ?1 AND r.workflow_version_id = ?2 AND r.authority_mode = 'shadow' AND r.state = 'succeeded'
        AND (?3 IS NULL OR r.backtest_id = ?3) AND (?4 IS NULL OR (r.created_at, r.id) < (?4, ?5))
      ORDER BY r.created_at DESC, r.id DESC LIMIT ?6`,
      p(6),
    );
    expect(shadow.some((d) => /SEARCH r USING INDEX workflow_runs_shadow \(workflow_version_id=\? AND state=\?/u.test(d))).toBe(true);
    const failed = await planOf(
      `SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND workflow_version_id = ?2 AND authority_mode = 'shadow'
      AND state IN ('failed', 'repair_required') AND report_id IS NOT NULL AND (?3 IS NULL OR backtest_id = ?3)`,
      p(3),
    );
    expect(failed.some((d) => /SEARCH workflow_runs USING INDEX workflow_runs_shadow \(workflow_version_id=\? AND state=\?\)/u.test(d))).toBe(true);
    // What the foreign-key check of a version's deletion looks up.
    const byVersion = await planOf(`SELECT 1 FROM workflow_runs WHERE workflow_version_id = ?1`, p(1));
    expect(byVersion.some((d) => /SEARCH workflow_runs USING (COVERING )?INDEX workflow_runs_(version|shadow) \(workflow_version_id=\?\)/u.test(d))).toBe(true);
    expect(byVersion.some((d) => /workflow_runs_version\b/u.test(d))).toBe(true);
  });
});
