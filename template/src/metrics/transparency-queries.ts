// The transparency report's reads: one statement per figure family, each bound to ?1 the
// installation, ?2 the period's start (inclusive) and ?3 its end (exclusive), ISO 8601 times as
// the rows store them. Exported so the bench can EXPLAIN the very statements the report runs;
// every one starts from an index on (installation_id, <time>) — never a scan of the table.

/** DSA sources that are notices under Art. 16 (a trusted flagger's notice is one too, Art. 22). */
export const NOTICE_SOURCES = ["notice", "trusted_flagger"] as const;
const NOTICES = `('notice', 'trusted_flagger')`;

/** Reports received in the period, by source and category (reports_received, migration 0022). */
export const REPORTS_RECEIVED_SQL = `
  SELECT source, category, COUNT(*) AS n FROM reports
  WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3
  GROUP BY source, category`;

/**
 * Decisions recorded in the period, by every dimension the template breaks actions down by; the
 * restrictions are canonical JSON, so equal restrictions group together and are expanded per type
 * by the caller (decisions_period, migration 0022, covers every column read).
 */
export const DECISIONS_SQL = `
  SELECT source_type AS source, policy_category AS category, ground, automated_detection AS detection, automated_decision AS automation,
    restrictions_json AS restrictions, COUNT(*) AS n
  FROM decisions
  WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3
  GROUP BY source_type, policy_category, ground, automated_detection, automated_decision, restrictions_json`;

/**
 * Time to act on notices: notices received in the period, from receipt to their first decision
 * (before the period's end), median per source and over all ('*'). Counted in SQL, so only a row
 * per source reaches the Worker.
 */
export const TIME_TO_ACT_SQL = `
  WITH acted AS MATERIALIZED (
    SELECT r.source AS source,
      -- One seek per notice in its own decisions (decisions_report_first covers it); the unary + keeps
      -- the planner off a range of all the installation's decisions for every notice. NULL: not acted on.
      (julianday((SELECT MIN(d.created_at) FROM decisions d WHERE d.report_id = r.id AND +d.installation_id = ?1 AND d.created_at < ?3)) - julianday(r.created_at)) * 86400.0 AS secs
    FROM reports r
    WHERE r.installation_id = ?1 AND r.created_at >= ?2 AND r.created_at < ?3 AND r.source IN ${NOTICES}
  ),
  ranked AS (
    SELECT source, secs, ROW_NUMBER() OVER (PARTITION BY source ORDER BY secs) AS k, COUNT(*) OVER (PARTITION BY source) AS n FROM acted WHERE secs IS NOT NULL
    UNION ALL
    SELECT '*', secs, ROW_NUMBER() OVER (ORDER BY secs), COUNT(*) OVER () FROM acted WHERE secs IS NOT NULL
  )
  SELECT source, MAX(n) AS acted, AVG(secs) AS medianSeconds FROM ranked WHERE k IN ((n + 1) / 2, (n + 2) / 2) GROUP BY source`;

/** Complaints (appeals) received in the period, by who filed them. */
export const COMPLAINTS_RECEIVED_SQL = `
  SELECT appellant_role AS role, COUNT(*) AS n FROM appeals
  WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3
  GROUP BY appellant_role`;

/**
 * Complaints decided in the period: outcome, who filed them, how the contested decision was made,
 * and whether automation resolved the complaint (an API key, Art. 20(6)).
 */
export const COMPLAINTS_DECIDED_SQL = `
  SELECT a.state AS outcome, a.appellant_role AS role, d.automated_decision AS automation, a.resolved_by_automation AS byAutomation, COUNT(*) AS n
  FROM appeals a LEFT JOIN decisions d ON d.id = a.decision_id AND d.installation_id = a.installation_id
  WHERE a.installation_id = ?1 AND a.decided_at >= ?2 AND a.decided_at < ?3
  GROUP BY a.state, a.appellant_role, d.automated_decision, a.resolved_by_automation`;

/** Decisions an appeal reversed in the period, by automation, and how many have their statement's database uuid. */
export const REVERSALS_SQL = `
  SELECT COUNT(*) AS reversed, COALESCE(SUM(resolved_by_automation), 0) AS byAutomation, COALESCE(SUM(CASE WHEN statement_uuid IS NULL THEN 0 ELSE 1 END), 0) AS withStatement
  FROM decision_reversals WHERE installation_id = ?1 AND reversed_at >= ?2 AND reversed_at < ?3`;

/** Warnings and suspensions of notifiers for manifestly unfounded notices (Art. 23(2)) issued in the period. */
export const NOTIFIER_SANCTIONS_SQL = `
  SELECT kind, COUNT(*) AS n FROM notifier_sanctions
  WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3
  GROUP BY kind`;

/** Median time from a complaint's receipt to its decision, over complaints decided in the period. */
export const COMPLAINT_TIME_SQL = `
  WITH decided AS (
    SELECT (julianday(decided_at) - julianday(created_at)) * 86400.0 AS secs FROM appeals
    WHERE installation_id = ?1 AND decided_at >= ?2 AND decided_at < ?3
  ),
  ranked AS (SELECT secs, ROW_NUMBER() OVER (ORDER BY secs) AS k, COUNT(*) OVER () AS n FROM decided)
  SELECT MAX(n) AS decided, AVG(secs) AS medianSeconds FROM ranked WHERE k IN ((n + 1) / 2, (n + 2) / 2)`;

/** The workflow versions whose runs decided with automation in the period, most decisions first (at most 10). */
export const AUTOMATED_VERSIONS_SQL = `
  SELECT r.workflow_version_id AS versionId, COUNT(*) AS n
  FROM decisions d JOIN workflow_runs r ON r.id = d.run_id AND r.installation_id = d.installation_id
  WHERE d.installation_id = ?1 AND d.created_at >= ?2 AND d.created_at < ?3 AND d.automated_decision <> 'not_automated' AND d.run_id IS NOT NULL
  GROUP BY r.workflow_version_id ORDER BY n DESC, r.workflow_version_id LIMIT 10`;

/** Blind QA reviews completed in the period and how many agreed; golden items are no QA pair and are left out. */
export const QA_SQL = `
  SELECT COUNT(*) AS reviewed, COALESCE(SUM(q.agreed), 0) AS agreed
  FROM qa_reviews q JOIN human_tasks t ON t.id = q.original_task_id
  WHERE q.installation_id = ?1 AND q.qa_completed_at >= ?2 AND q.qa_completed_at < ?3 AND q.agreed IS NOT NULL AND t.origin <> 'golden'`;

/** Every statement of the report, by name, with the indexes its plan must use (the bench checks them). */
export const TRANSPARENCY_QUERIES: Record<string, { sql: string; indexes: string[] }> = {
  reportsReceived: { sql: REPORTS_RECEIVED_SQL, indexes: ["reports_received"] },
  decisions: { sql: DECISIONS_SQL, indexes: ["decisions_period"] },
  timeToAct: { sql: TIME_TO_ACT_SQL, indexes: ["reports_received", "decisions_report_first"] },
  complaintsReceived: { sql: COMPLAINTS_RECEIVED_SQL, indexes: ["appeals_recent"] },
  complaintsDecided: { sql: COMPLAINTS_DECIDED_SQL, indexes: ["appeals_decided"] },
  complaintTime: { sql: COMPLAINT_TIME_SQL, indexes: ["appeals_decided"] },
  automatedVersions: { sql: AUTOMATED_VERSIONS_SQL, indexes: ["decisions_period"] },
  qa: { sql: QA_SQL, indexes: ["qa_reviews_installation"] },
  reversals: { sql: REVERSALS_SQL, indexes: ["decision_reversals_recent"] },
  notifierSanctions: { sql: NOTIFIER_SANCTIONS_SQL, indexes: ["notifier_sanctions_recent"] },
};

export interface TransparencyRows {
  reports: Array<{ source: string; category: string; n: number }>;
  decisions: Array<{ source: string; category: string; ground: string; detection: number; automation: string; restrictions: string; n: number }>;
  timeToAct: Array<{ source: string; acted: number; medianSeconds: number | null }>;
  complaintsReceived: Array<{ role: string | null; n: number }>;
  complaintsDecided: Array<{ outcome: string; role: string | null; automation: string | null; byAutomation: number; n: number }>;
  complaintTime: { decided: number | null; medianSeconds: number | null } | null;
  automatedVersions: Array<{ versionId: string; n: number }>;
  qa: { reviewed: number; agreed: number } | null;
  reversals: { reversed: number; byAutomation: number; withStatement: number } | null;
  notifierSanctions: Array<{ kind: string; n: number }>;
}

/** Reads every row the report is built from, in one D1 batch (a consistent snapshot). */
export async function readTransparencyRows(db: D1Database, installationId: string, from: string, to: string): Promise<TransparencyRows> {
  const statements = [REPORTS_RECEIVED_SQL, DECISIONS_SQL, TIME_TO_ACT_SQL, COMPLAINTS_RECEIVED_SQL, COMPLAINTS_DECIDED_SQL, COMPLAINT_TIME_SQL, AUTOMATED_VERSIONS_SQL, QA_SQL, REVERSALS_SQL, NOTIFIER_SANCTIONS_SQL].map((sql) =>
    db.prepare(sql).bind(installationId, from, to),
  );
  const [reports, decisions, timeToAct, received, decided, complaintTime, versions, qa, reversals, sanctions] = await db.batch(statements);
  return {
    reports: reports!.results as TransparencyRows["reports"],
    decisions: decisions!.results as TransparencyRows["decisions"],
    timeToAct: timeToAct!.results as TransparencyRows["timeToAct"],
    complaintsReceived: received!.results as TransparencyRows["complaintsReceived"],
    complaintsDecided: decided!.results as TransparencyRows["complaintsDecided"],
    complaintTime: (complaintTime!.results[0] as TransparencyRows["complaintTime"]) ?? null,
    automatedVersions: versions!.results as TransparencyRows["automatedVersions"],
    qa: (qa!.results[0] as TransparencyRows["qa"]) ?? null,
    reversals: (reversals!.results[0] as TransparencyRows["reversals"]) ?? null,
    notifierSanctions: sanctions!.results as TransparencyRows["notifierSanctions"],
  };
}
