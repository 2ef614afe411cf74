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
 * Deletes term rows by their whole keys (term, the report's created_at, the report's id), as
 * termKeysOfReports reads them from the reports' lists: a seek of the primary key each down to the
 * report's created_at at least, whatever the table's statistics say about a common term.
 */
export function eraseReportTermsStatement(db: D1Database, installationId: string, keys: Array<[string, string, string]>): D1PreparedStatement {
  return db
    .prepare(`DELETE FROM search_terms WHERE installation_id = ?1 AND (term, created_at, record_id) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]') FROM json_each(?2) j)`)
    .bind(installationId, JSON.stringify(keys));
}

/** The JSON list of a report's terms as its row keeps it ("[]" when it has none; NULL means not listed yet). */
export function termsColumn(terms: string[]): string {
  return JSON.stringify(terms);
}

type Row = Record<string, unknown>;

/**
 * The lists of reports coming back from a backup or a case archive, checked against the term rows
 * that come with them: a list naming exactly those rows stays as it is (so a case reads back as it
 * was archived); any other — missing, unparsable, naming rows that are not there — is made again
 * from the rows: "[]" for a report without any, NULL for one whose personal data is erased.
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
    const list = (byRecord.get(String(report.id)) ?? []).sort();
    const expected = report.personal_data_erased_at != null && list.length === 0 ? null : JSON.stringify(list);
    if (!sameTerms(report.search_terms, expected)) report.search_terms = expected;
  }
}

/** Whether a list as a file holds it names the same terms as the expected (sorted) one. */
function sameTerms(given: unknown, expected: string | null): boolean {
  if (given === undefined) return false;
  if (given === null || expected === null) return given === expected;
  if (typeof given !== "string") return false;
  try {
    const list: unknown = JSON.parse(given);
    return Array.isArray(list) && list.every((t) => typeof t === "string") && JSON.stringify([...list].sort()) === expected;
  } catch {
    return false;
  }
}
