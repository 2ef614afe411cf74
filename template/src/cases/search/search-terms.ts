// The search index's terms (search_terms): keyed hashes of a report's description words and of its
// reporter's id and contact, written in intake's batch and deleted with the report's personal data.
// Nothing here holds or logs the plaintext; a term alone says nothing without REPORT_MASTER_KEY.
//
// Two forms of a row, read alike. A term is 80 bits of a keyed hash (lib/person-keys.ts searchTerm,
// 20 hex digits). Rows written before the compact form hold the term as those 20 hex digits and the
// report's created_at as its ISO text (24 characters), and their report lists the terms as a JSON
// array of the hex digits. Rows written now hold the same 80 bits as 14 base64url characters and the
// created_at as 7 base-62 digits of its Unix milliseconds (fixed width, so they sort as the times do,
// up to the year 2081), and their report lists the terms as those 14-character forms concatenated:
// about 27 bytes less a row and 90 less a report, for the same answers. The two forms of a term never
// equal each other (14 and 20 characters), so a lookup asks for both; a report's rows and its list
// are in one form (written together, or moved together by the case archive and a backup).
import { searchTerm, type SearchField } from "../../lib/person-keys";
import { stablePlanSql } from "../../lib/stable-plan";

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

/** The compact (stored) form of a term: its 80 bits as 14 base64url characters. */
export function compactTerm(hex: string): string {
  let binary = "";
  for (let i = 0; i < hex.length; i += 2) binary += String.fromCharCode(Number.parseInt(hex.slice(i, i + 2), 16));
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/u, "");
}

/** The hex form of a compact term (as searchTerm gives it and the previous rows hold it). */
export function hexTerm(compact: string): string {
  const binary = atob(compact.replaceAll("-", "+").replaceAll("_", "/"));
  let hex = "";
  for (let i = 0; i < binary.length; i++) hex += binary.charCodeAt(i).toString(16).padStart(2, "0");
  return hex.slice(0, 20);
}

const COMPACT_TERM = /^[A-Za-z0-9_-]{14}$/u;
const HEX_TERM = /^[0-9a-f]{20}$/u;
/** Characters of a compact term. */
export const COMPACT_TERM_LENGTH = 14;

/** A term in either form, as both: [hex, compact] (a string in neither form is returned as it is, twice). */
export function termForms(term: string): [string, string] {
  if (HEX_TERM.test(term)) return [term, compactTerm(term)];
  if (COMPACT_TERM.test(term)) return [hexTerm(term), term];
  return [term, term];
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const TIME_DIGITS = 7;

/**
 * The compact form of a report's created_at in its term rows: 7 base-62 digits of its Unix
 * milliseconds (termTimeSql computes the same in SQL); null for a time that does not parse.
 */
export function termTime(createdAt: string): string | null {
  let ms = Date.parse(createdAt);
  if (!Number.isFinite(ms) || ms < 0) return null;
  let out = "";
  for (let i = 0; i < TIME_DIGITS; i++) {
    out = BASE62[ms % 62]! + out;
    ms = Math.floor(ms / 62);
  }
  return out;
}

/** termTime of the ISO time `column` as an SQL expression (julianday keeps the milliseconds exactly; NULL for a time that does not parse). */
export function termTimeSql(column: string): string {
  const ms = `CAST(round((julianday(${column}) - 2440587.5) * 86400000) AS INTEGER)`;
  return Array.from({ length: TIME_DIGITS }, (_, i) => `substr('${BASE62}', ${ms} / ${62 ** (TIME_DIGITS - 1 - i)} % 62 + 1, 1)`).join(" || ");
}

/**
 * For intake's batch: the report's terms in the compact form, written only if the report was (a
 * replay or a lost race writes none). One statement whatever the number of terms.
 */
export function reportTermsStatement(db: D1Database, input: { installationId: string; reportId: string; at: string; terms: string[] }): D1PreparedStatement | null {
  if (input.terms.length === 0) return null;
  const time = termTime(input.at);
  if (time === null) throw new Error(`reportTermsStatement: created_at ${input.at} is not a time`);
  return db
    .prepare(
      stablePlanSql(`INSERT OR IGNORE INTO search_terms (installation_id, term, created_at, record_id)
      SELECT ?1, t.value, ?2, ?3 FROM json_each(?4) t WHERE EXISTS (SELECT 1 FROM reports WHERE id = ?3 AND installation_id = ?1)`),
    )
    .bind(input.installationId, time, input.reportId, JSON.stringify(input.terms.map(compactTerm)));
}

/**
 * Deletes term rows by their whole keys, as termKeysOfReports reads them from the reports' lists
 * (a term in either form, the report's created_at as the report holds it, the report's id): each
 * key in the form of its term (a compact term at termTime of the created_at, a hex term at the
 * created_at itself), so a row goes whichever release wrote it, and the keys bound stay one per
 * term; a seek of the primary key each down to the created_at at least, whatever the table's
 * statistics say about a common term.
 */
export function eraseReportTermsStatement(db: D1Database, installationId: string, keys: Array<[string, string, string]>): D1PreparedStatement {
  // A row's term and time are in one form (compact terms at termTime, hex terms at the ISO time),
  // and a list names its rows' terms: one key per term, in its own form.
  const rows: Array<[string, string, string]> = [];
  for (const [term, createdAt, id] of keys) {
    if (!COMPACT_TERM.test(term)) rows.push([term, createdAt, id]);
    else {
      const time = termTime(createdAt);
      if (time !== null) rows.push([term, time, id]);
    }
  }
  return db
    .prepare(`DELETE FROM search_terms WHERE installation_id = ?1 AND (term, created_at, record_id) IN (
      SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]') FROM json_each(?2) j)`)
    .bind(installationId, JSON.stringify(rows));
}

/** The list of a report's terms as intake writes it: the compact terms concatenated ("" when it has none; NULL means not listed yet). */
export function termsColumn(terms: string[]): string {
  return terms.map(compactTerm).join("");
}

/** The list in the previous form, a JSON array of hex terms: for reports whose rows are in that form. */
export function legacyTermsColumn(terms: string[]): string {
  return JSON.stringify(terms);
}

/**
 * The terms a report's list names, as the list holds them (hex in a JSON array, or compact
 * concatenated); null when the list is missing or in neither form.
 */
export function parseTermsColumn(list: unknown): string[] | null {
  if (typeof list !== "string") return null;
  if (list.startsWith("[")) {
    try {
      const parsed: unknown = JSON.parse(list);
      return Array.isArray(parsed) && parsed.every((t) => typeof t === "string") ? parsed : null;
    } catch {
      return null;
    }
  }
  if (list.length % COMPACT_TERM_LENGTH !== 0 || !/^[A-Za-z0-9_-]*$/u.test(list)) return null;
  return Array.from({ length: list.length / COMPACT_TERM_LENGTH }, (_, i) => list.slice(i * COMPACT_TERM_LENGTH, (i + 1) * COMPACT_TERM_LENGTH));
}

/** Terms a list may name: MAX_INDEXED_WORDS words, a reporter's id and contact. */
export const MAX_REPORT_TERMS = MAX_INDEXED_WORDS + 2;

/**
 * The term rows of the reports `r` that `where` selects (`installation` the SQL of their
 * installation), reached by key from their lists, each in the form its list is in: a JSON list
 * names rows of hex terms at the report's ISO created_at; a compact list, rows of compact terms at
 * termTimeSql of it. One select per form (a compound list of keys would make the planner walk
 * the installation's rows instead of seeking each key), never the same row twice (the forms'
 * terms differ). For the case archive, which selects and deletes exactly these rows in SQL.
 */
export function reportTermRowsSql(installation: string, where: string): string {
  const numbers = JSON.stringify(Array.from({ length: MAX_REPORT_TERMS }, (_, i) => i));
  return `SELECT * FROM search_terms WHERE installation_id = ${installation} AND (term, created_at, record_id) IN (
      SELECT t.value, CASE WHEN length(t.value) = ${COMPACT_TERM_LENGTH} THEN ${termTimeSql("r.created_at")} ELSE r.created_at END, r.id
      FROM reports r CROSS JOIN json_each(CASE WHEN substr(r.search_terms, 1, 1) = '[' THEN r.search_terms ELSE '[]' END) t WHERE ${where})
    UNION ALL
    SELECT * FROM search_terms WHERE installation_id = ${installation} AND (term, created_at, record_id) IN (
      SELECT substr(r.search_terms, n.value * ${COMPACT_TERM_LENGTH} + 1, ${COMPACT_TERM_LENGTH}), ${termTimeSql("r.created_at")}, r.id FROM reports r CROSS JOIN json_each('${numbers}') n
      WHERE ${where} AND substr(r.search_terms, 1, 1) <> '[' AND n.value * ${COMPACT_TERM_LENGTH} < length(r.search_terms))`;
}

type Row = Record<string, unknown>;

/**
 * The lists of reports coming back from a backup or a case archive, checked against the term rows
 * that come with them: a list naming exactly those rows stays as it is (so a case reads back as it
 * was archived); any other — missing, unparsable, naming rows that are not there — is made again
 * from the rows, in their form (compact when every row is, else the JSON array): empty for a report
 * without any, NULL for one whose personal data is erased.
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
    if (report.personal_data_erased_at != null && list.length === 0) {
      if (report.search_terms !== null) report.search_terms = null;
      continue;
    }
    const given = report.search_terms === undefined ? null : parseTermsColumn(report.search_terms);
    if (given !== null && JSON.stringify([...given].sort()) === JSON.stringify(list)) continue;
    const compact = list.length > 0 && list.every((t) => COMPACT_TERM.test(t));
    report.search_terms = compact ? list.join("") : JSON.stringify(list);
  }
}
