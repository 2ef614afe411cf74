// The search index's terms (search_terms): keyed hashes of a report's description words and of its
// reporter's id and contact, written in intake's batch and deleted with the report's personal data.
// Nothing here holds or logs the plaintext; a term alone says nothing without REPORT_MASTER_KEY.
import { searchTerm, type SearchField } from "../../lib/person-keys";

/** At most this many distinct words of a description are indexed (the first ones). */
export const MAX_INDEXED_WORDS = 200;
const MAX_WORD_LENGTH = 64;

/** A text's searchable words: NFKC, lower case, runs of letters and digits of two characters or more, each once. */
export function searchWords(text: string | null | undefined, limit = MAX_INDEXED_WORDS): string[] {
  if (!text) return [];
  const words = new Set<string>();
  for (const match of text
    .normalize("NFKC")
    .toLowerCase()
    .matchAll(/[\p{L}\p{N}]{2,}/gu)) {
    words.add(match[0].slice(0, MAX_WORD_LENGTH));
    if (words.size >= limit) break;
  }
  return [...words];
}

/** How an identifier is compared: trimmed; a contact (an email) also case-insensitively. */
export function normalizeIdentifier(field: Exclude<SearchField, "word">, value: string): string {
  const trimmed = value.normalize("NFKC").trim();
  return field === "reporter_contact" ? trimmed.toLowerCase() : trimmed;
}

/** The terms of a report: its description's words and its reporter's id and contact. */
export function reportTerms(installationId: string, input: { description?: string | null; reporter?: { id?: string; contact?: string } | null }): string[] {
  const terms = new Set(searchWords(input.description).map((word) => searchTerm(installationId, "word", word)));
  if (input.reporter?.id) terms.add(searchTerm(installationId, "reporter_id", normalizeIdentifier("reporter_id", input.reporter.id)));
  if (input.reporter?.contact) terms.add(searchTerm(installationId, "reporter_contact", normalizeIdentifier("reporter_contact", input.reporter.contact)));
  return [...terms];
}

/**
 * For intake's batch: the report's terms, written only if the report was (a replay or a lost
 * race writes none). One statement whatever the number of terms.
 */
export function reportTermsStatement(db: D1Database, input: { installationId: string; reportId: string; at: string; terms: string[] }): D1PreparedStatement | null {
  if (input.terms.length === 0) return null;
  return db
    .prepare(`INSERT OR IGNORE INTO search_terms (installation_id, term, created_at, record_id)
      SELECT ?1, t.value, ?2, ?3 FROM json_each(?4) t WHERE EXISTS (SELECT 1 FROM reports WHERE id = ?3 AND installation_id = ?1)`)
    .bind(input.installationId, input.at, input.reportId, JSON.stringify(input.terms));
}

/**
 * Deletes the terms of reports whose personal data is erased: each report lists its terms
 * (reports.search_terms), so every row is reached by the primary key. Runs before the statement
 * that clears the reports' lists, in the same batch.
 */
export function eraseReportTermsStatement(db: D1Database, installationId: string, reportIds: string[]): D1PreparedStatement {
  return db
    .prepare(`DELETE FROM search_terms WHERE installation_id = ?1 AND (term, created_at, record_id) IN (
      SELECT t.value, r.created_at, r.id FROM json_each(?2) j JOIN reports r ON r.id = j.value AND r.installation_id = ?1 CROSS JOIN json_each(r.search_terms) t)`)
    .bind(installationId, JSON.stringify(reportIds));
}

/** The JSON list of a report's terms as its row keeps it (NULL when it has none). */
export function termsColumn(terms: string[]): string | null {
  return terms.length > 0 ? JSON.stringify(terms) : null;
}

type Row = Record<string, unknown>;

/**
 * Rows of reports written before reports listed their terms (an older backup or case archive)
 * get their list from the search_terms rows that come back with them, so erasure still finds
 * every term row by its key. Rows that already carry the column are left as they are.
 */
export function listTermsOnReports(reports: Row[] | undefined, terms: Row[] | undefined): void {
  if (!reports?.length) return;
  const byRecord = new Map<string, string[]>();
  for (const row of terms ?? []) {
    const list = byRecord.get(String(row.record_id)) ?? [];
    list.push(String(row.term));
    byRecord.set(String(row.record_id), list);
  }
  for (const report of reports) {
    if ("search_terms" in report) continue;
    const list = byRecord.get(String(report.id));
    report.search_terms = list ? JSON.stringify(list.sort()) : null;
  }
}
