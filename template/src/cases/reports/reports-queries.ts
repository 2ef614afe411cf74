// SQL for reports and cases; every function takes the installation id.

export interface ReportRow {
  id: string;
  caseId: string;
  subjectKind: string;
  subjectId: string;
  category: string;
  categorySpecificationJson: string;
  source: string;
  evidenceCount: number;
  personalData: string;
  /** When retention or an erasure request replaced the sealed data; null while it is held. */
  personalDataErasedAt: string | null;
  requestDigest: string;
  caseReportCount: number;
  createdAt: string;
}

const REPORT_COLUMNS = `
  r.id, r.case_id AS caseId, r.subject_kind AS subjectKind, r.subject_id AS subjectId, r.category,
  r.category_specification_json AS categorySpecificationJson, r.source, r.evidence_count AS evidenceCount,
  r.personal_data AS personalData, r.personal_data_erased_at AS personalDataErasedAt, r.request_digest AS requestDigest, c.report_count AS caseReportCount, r.created_at AS createdAt`;

/** A report row without its sealed personal data (what intake reads back: the summary and the replay check need no more). */
export type ReportSummaryRow = Omit<ReportRow, "personalData">;

const SUMMARY_COLUMNS = `
  r.id, r.case_id AS caseId, r.subject_kind AS subjectKind, r.subject_id AS subjectId, r.category,
  r.category_specification_json AS categorySpecificationJson, r.source, r.evidence_count AS evidenceCount,
  r.personal_data_erased_at AS personalDataErasedAt, r.request_digest AS requestDigest, c.report_count AS caseReportCount, r.created_at AS createdAt`;

export function getReportRow(db: D1Database, installationId: string, reportId: string): Promise<ReportRow | null> {
  return db.prepare(`SELECT ${REPORT_COLUMNS} FROM reports r JOIN cases c ON c.id = r.case_id WHERE r.installation_id = ?1 AND r.id = ?2`).bind(installationId, reportId).first<ReportRow>();
}

/** Reports of the installation among `ids` (a JSON array), in no particular order. */
export function reportRowsStatement(db: D1Database, installationId: string, ids: readonly string[]): D1PreparedStatement {
  return db.prepare(`SELECT ${REPORT_COLUMNS} FROM reports r JOIN cases c ON c.id = r.case_id WHERE r.installation_id = ?1 AND r.id IN (SELECT value FROM json_each(?2))`).bind(installationId, JSON.stringify(ids));
}

/** A column name as an archive object carries it (rows name their own columns). */
const ARCHIVED_COLUMN = /^[a-z_][a-z0-9_]*$/u;

/** `WITH <name> AS (…)` over archived rows (a JSON array bound at `param`), one column per name the rows carry. */
function archivedTableSql(name: string, rows: ReadonlyArray<Record<string, unknown>>, param: number): string {
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))].filter((column) => ARCHIVED_COLUMN.test(column));
  if (columns.length === 0) columns.push("id");
  return `${name} AS (SELECT ${columns.map((column) => `value ->> '$.${column}' AS ${column}`).join(", ")} FROM json_each(?${param}))`;
}

/**
 * The reports among `ids` read from archived rows (the `reports` and `cases` rows of case archive
 * objects) by the very SELECT the hot rows are read with: the rows stand in for the tables inside
 * this one statement (a common table expression named like the table shadows it), so an archived
 * report has exactly the shape and values of its hot form, and nothing is written to D1.
 */
export function archivedReportRowsStatement(db: D1Database, installationId: string, ids: readonly string[], archived: { reports: ReadonlyArray<Record<string, unknown>>; cases: ReadonlyArray<Record<string, unknown>> }): D1PreparedStatement {
  return db
    .prepare(`WITH ${archivedTableSql("reports", archived.reports, 3)}, ${archivedTableSql("cases", archived.cases, 4)}
    SELECT ${REPORT_COLUMNS} FROM reports r JOIN cases c ON c.id = r.case_id WHERE r.installation_id = ?1 AND r.id IN (SELECT value FROM json_each(?2))`)
    .bind(installationId, JSON.stringify(ids), JSON.stringify(archived.reports), JSON.stringify(archived.cases));
}

/** The report recorded under an Idempotency-Key, as intake reads it back (ReportSummaryRow). */
export function reportRowByKeyStatement(db: D1Database, installationId: string, key: string): D1PreparedStatement {
  return db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM reports r JOIN cases c ON c.id = r.case_id WHERE r.installation_id = ?1 AND r.idempotency_key = ?2`).bind(installationId, key);
}

export async function listReportRows(db: D1Database, installationId: string, options: { limit: number; caseId?: string; subjectId?: string; category?: string; before?: { createdAt: string; id: string } }): Promise<ReportRow[]> {
  const { results } = await db
    .prepare(`SELECT ${REPORT_COLUMNS} FROM reports r JOIN cases c ON c.id = r.case_id
    WHERE r.installation_id = ?1 AND (?2 IS NULL OR r.case_id = ?2)
      AND (?3 IS NULL OR r.created_at < ?3 OR (r.created_at = ?3 AND r.id < ?4))
      AND (?6 IS NULL OR r.subject_id = ?6) AND (?7 IS NULL OR r.category = ?7)
    ORDER BY r.created_at DESC, r.id DESC LIMIT ?5`)
    .bind(installationId, options.caseId ?? null, options.before?.createdAt ?? null, options.before?.id ?? null, options.limit, options.subjectId ?? null, options.category ?? null)
    .all<ReportRow>();
  return results;
}

export function getCaseRow(db: D1Database, installationId: string, caseId: string) {
  return db
    .prepare(`SELECT id, subject_kind AS subjectKind, subject_id AS subjectId, state, report_count AS reportCount,
      first_reported_at AS firstReportedAt, last_reported_at AS lastReportedAt FROM cases WHERE installation_id = ?1 AND id = ?2`)
    .bind(installationId, caseId)
    .first<{ id: string; subjectKind: string; subjectId: string; state: string; reportCount: number; firstReportedAt: string; lastReportedAt: string }>();
}

/**
 * The report of a run, for its `report` expression variable (summary fields only). Host-internal:
 * keyed by the run alone, so the joins keep to the run's installation (a run reaches only its own
 * installation's report).
 */
/**
 * The report summary's row of run ?1 as one scalar JSON value (a ReportSummaryRow, or NULL), for a
 * statement the caller sends anyway (the runtime's authorization). Host-internal, as the statement below.
 */
export const REPORT_SUMMARY_BY_RUN_JSON_SQL = `(SELECT json_object(${SUMMARY_COLUMNS.split(",")
  .map((column) => {
    const [name, alias] = column.trim().split(/\s+AS\s+/u) as [string, string | undefined];
    return `'${alias ?? name.replace(/^\w+\./u, "")}', ${name}`;
  })
  .join(", ")}) FROM workflow_runs w
      JOIN reports r ON r.id = w.report_id AND r.installation_id = w.installation_id
      JOIN cases c ON c.id = r.case_id AND c.installation_id = r.installation_id
    WHERE w.id = ?1)`;

export function reportSummaryByRunStatementUnsafe(db: D1Database, runId: string): D1PreparedStatement {
  return db
    .prepare(`SELECT ${REPORT_COLUMNS} FROM workflow_runs w
      JOIN reports r ON r.id = w.report_id AND r.installation_id = w.installation_id
      JOIN cases c ON c.id = r.case_id AND c.installation_id = r.installation_id
    WHERE w.id = ?1`)
    .bind(runId);
}

export interface ReportEvidence {
  kind: string;
  url?: string;
  text?: string;
  sha256?: string;
  pdq?: string;
  pdqQuality?: number;
}

/** Everything sealed: who reported, how to reach them, what they wrote, the content itself. */
export interface ReportPersonalData {
  reporter: { id?: string; contact?: string } | null;
  description: string | null;
  subjectUrl: string | null;
  subjectOwnerId: string | null;
  snapshot: unknown;
  evidence: ReportEvidence[] | undefined;
  /** The recipient's locale for redress messages (e.g. `de-AT`); absent on reports before it existed. */
  locale?: string | null;
}

/** What an erased report's personal data opens to (and what a report sealed under a destroyed key reads as). */
export const ERASED_REPORT: ReportPersonalData = { reporter: null, description: null, subjectUrl: null, subjectOwnerId: null, snapshot: null, evidence: [] };

/** What automation (triggers, CEL `report`) and listings see: no personal data. */
export function reportSummary(row: ReportSummaryRow) {
  return {
    id: row.id,
    caseId: row.caseId,
    category: row.category,
    categorySpecification: JSON.parse(row.categorySpecificationJson) as string[],
    source: row.source,
    subject: { kind: row.subjectKind, id: row.subjectId },
    evidenceCount: row.evidenceCount,
    caseReportCount: row.caseReportCount,
    createdAt: row.createdAt,
  };
}
export type ReportSummary = ReturnType<typeof reportSummary>;
