// Reports that do not list their search terms yet (reports.search_terms NULL while their personal
// data is kept): those a worker older than the list wrote after the migration that added it was
// applied (a deploy applies migrations before the new code serves). Their terms are computed again
// from their opened personal data — reportTerms is deterministic, so the list names exactly the
// rows intake wrote — and erasure and the case archive then reach every term row by its key. The
// schedule lists them (the partial index reports_terms_unlisted holds only these), and erasure and
// the case archive list any they meet first. The list is written in the form of the report's rows
// (search-terms.ts): the compact one if its first term's row is there in that form, else the JSON
// array (a worker older than the compact form wrote the row).
import { errorCode } from "../../errors";
import { openPersonalData } from "../reports/report-crypto";
import type { ReportPersonalData } from "../reports/reports-queries";
import { compactTerm, legacyTermsColumn, parseTermsColumn, reportTerms, termTime, termsColumn } from "./search-terms";

interface Unlisted {
  id: string;
  installationId: string;
  createdAt: string;
  sealed: string;
}

/** Reports listed per scheduled run. */
const SWEEP_LIMIT = 200;

/**
 * The statements that write each report's list (a report that does not open gets an empty one,
 * logged by code), in its rows' form: compact if its first term's row is there in that form.
 */
async function listStatements(env: Env, rows: Unlisted[]): Promise<D1PreparedStatement[]> {
  const statements: D1PreparedStatement[] = [];
  for (const row of rows) {
    let terms: string[];
    try {
      terms = reportTerms(row.installationId, await openPersonalData<ReportPersonalData>(env, row.installationId, `report:${row.id}`, row.sealed));
    } catch (error) {
      console.error(JSON.stringify({ event: "search_terms.unlistable", installationId: row.installationId, id: row.id, code: errorCode(error) }));
      terms = [];
    }
    statements.push(
      env.DB.prepare(`UPDATE reports SET search_terms = CASE WHEN ?3 IS NULL OR EXISTS (SELECT 1 FROM search_terms WHERE installation_id = ?6 AND term = ?3 AND created_at = ?4 AND record_id = ?1) THEN ?2 ELSE ?5 END
          WHERE id = ?1 AND search_terms IS NULL`).bind(row.id, termsColumn(terms), terms.length > 0 ? compactTerm(terms[0]!) : null, termTime(row.createdAt), legacyTermsColumn(terms), row.installationId),
    );
  }
  return statements;
}

/** The scheduled pass: the oldest unlisted reports of every installation, listed. */
export async function sweepUnlistedTerms(env: Env, limit = SWEEP_LIMIT): Promise<{ listed: number; more: number }> {
  const { results } = await env.DB.prepare(
    `SELECT id, installation_id AS installationId, created_at AS createdAt, personal_data AS sealed FROM reports WHERE search_terms IS NULL AND personal_data_erased_at IS NULL ORDER BY created_at LIMIT ?1`,
  )
    .bind(limit)
    .all<Unlisted>();
  const statements = await listStatements(env, results);
  if (statements.length > 0) await env.DB.batch(statements);
  return { listed: results.length, more: results.length === limit ? 1 : 0 };
}

/** Lists the unlisted reports of one case (before the case archive reads its term rows through the lists). */
export async function listTermsOfCase(env: Env, installationId: string, caseId: string): Promise<void> {
  const { results } = await env.DB.prepare(
    `SELECT id, installation_id AS installationId, created_at AS createdAt, personal_data AS sealed FROM reports WHERE case_id = ?1 AND installation_id = ?2 AND search_terms IS NULL AND personal_data_erased_at IS NULL`,
  )
    .bind(caseId, installationId)
    .all<Unlisted>();
  const statements = await listStatements(env, results);
  if (statements.length > 0) await env.DB.batch(statements);
}

/**
 * The keys (term as the list names it, the report's created_at, the report's id) of these reports'
 * term rows, from their lists; an unlisted report is listed first. For erasure, which deletes each
 * row by its whole key in either form (eraseReportTermsStatement).
 */
export async function termKeysOfReports(env: Env, installationId: string, reportIds: string[]): Promise<Array<[string, string, string]>> {
  if (reportIds.length === 0) return [];
  const read = () =>
    env.DB.prepare(
      `SELECT r.id, r.installation_id AS installationId, r.created_at AS createdAt, r.search_terms AS terms, r.personal_data AS sealed
        FROM json_each(?2) j CROSS JOIN reports r ON r.id = j.value WHERE r.installation_id = ?1`,
    )
      .bind(installationId, JSON.stringify(reportIds))
      .all<Unlisted & { terms: string | null }>();
  let { results } = await read();
  const unlisted = results.filter((row) => row.terms === null);
  if (unlisted.length > 0) {
    await env.DB.batch(await listStatements(env, unlisted));
    ({ results } = await read());
  }
  const keys: Array<[string, string, string]> = [];
  for (const row of results) {
    for (const term of parseTermsColumn(row.terms) ?? []) keys.push([term, row.createdAt, row.id]);
  }
  return keys;
}
