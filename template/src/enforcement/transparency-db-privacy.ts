// No personal data in a statement of reasons (DSA Art. 24(5)): before a statement leaves for the
// Transparency Database, every free-text value in it is checked for the shapes personal data takes
// (e-mail addresses, phone numbers, IP addresses, URLs that point at a user, handles and DIDs) and
// for the personal values the platform itself holds about the decision's report — the reporter's id
// and contact, the subject owner's id, the subject's URL (sealed: opened here on the host, compared,
// never stored or logged). A finding names the field and the kind, never the value.
import { getReportRow, openPersonalData, reportRowsStatement, type ReportPersonalData, type ReportRow } from "../cases";

export type PersonalDataKind = "email_address" | "phone_number" | "ip_address" | "user_url" | "user_handle" | "decentralized_id" | "reporter_id" | "reporter_contact" | "subject_owner_id" | "subject_url" | "subject_account_id";

export interface PersonalDataFinding {
  /** The statement field (`decision_facts`, `category_specification[0]`). */
  field: string;
  kind: PersonalDataKind;
}

const PATTERNS: Array<[PersonalDataKind, RegExp]> = [
  ["email_address", /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/u],
  // International (+49 30 1234567, 0049…), North American ((555) 123-4567, 555-123-4567) and
  // national numbers with a trunk 0 (030 1234567, 06-12345678). Dates (2024-01-31) do not match.
  ["phone_number", /(?<![\w+])(?:\+|00)[1-9](?:[\s./-]?\(?\d\)?){6,14}(?![\w])/u],
  ["phone_number", /(?<![\w(])(?:\(\d{3}\)\s?|\d{3}[-.\s])\d{3}[-.\s]\d{4}(?![\w])/u],
  ["phone_number", /(?<![\w-])\(?0\d{1,4}\)?[\s/-]?\d{3,4}[\s-]?\d{3,5}(?![\w-])/u],
  ["ip_address", /(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\w|\.\d)/u],
  ["ip_address", /(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}(?![\w:])/u],
  ["ip_address", /(?<![\w:])[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*::(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*)?(?![\w:])/u],
  ["decentralized_id", /\bdid:(?:plc|web|key):[A-Za-z0-9._:%-]{3,}/u],
  // Fediverse and social handles: @name (not an e-mail address, which matched above).
  ["user_handle", /(?<![\w@./])@[A-Za-z][A-Za-z0-9_.]{1,29}(?:@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)?(?![\w@])/u],
];

// A URL whose path or query names a user: /user/…, /users/…, /u/…, /@name, /~name, /profile…,
// /people/…, /members/…, /accounts/…, ?user=, ?uid=, ?profile=, ?account=…
const URL_PATTERN = /\b(?:https?|at):\/\/[^\s<>"']+/giu;
const USER_PATH = /\/(?:users?|u|profiles?|people|members?|accounts?|author|channel|c)\/[^/?#\s]+|\/[@~][^/?#\s]+|[?&](?:user(?:name)?|uid|user_id|profile|account|member|handle)=/iu;

/** Every string leaf of a statement, with its field path; the puid and enumerated constants are skipped. */
function textLeaves(value: unknown, path: string, out: Array<[string, string]>): void {
  if (typeof value === "string") {
    if (path !== "puid" && !/^[A-Z0-9_]+$/u.test(value)) out.push([path, value]);
  } else if (Array.isArray(value)) for (const [index, item] of value.entries()) textLeaves(item, `${path}[${index}]`, out);
  else if (value && typeof value === "object") for (const [key, item] of Object.entries(value)) textLeaves(item, path ? `${path}.${key}` : key, out);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/gu, "\\$&");
}

/** `value` appears in `text` as a whole token (case-insensitive), not inside a longer word. */
function containsValue(text: string, value: string): boolean {
  const needle = value.trim();
  if (needle.length < 2) return false;
  return new RegExp(`(?<![A-Za-z0-9])${escapeRegExp(needle)}(?![A-Za-z0-9])`, "iu").test(text);
}

/** Personal values known for the decision's report (opened from the sealed report on the host). */
export interface KnownPersonalValues {
  values: Array<[PersonalDataKind, string]>;
}

/** The values of one report row (its sealed personal data opened here). A report whose personal data was erased has none left to compare. */
async function valuesOf(env: Env, installationId: string, row: ReportRow): Promise<KnownPersonalValues> {
  const values: Array<[PersonalDataKind, string]> = [];
  const add = (kind: PersonalDataKind, value: unknown) => {
    if (typeof value === "string" && value.trim()) values.push([kind, value]);
  };
  // An account reported as the subject is a person's account: its id is personal too.
  if (row.subjectKind === "account") add("subject_account_id", row.subjectId);
  if (!row.personalData?.startsWith("v1.")) return { values };
  const personal = await openPersonalData<ReportPersonalData>(env, installationId, `report:${row.id}`, row.personalData);
  add("reporter_id", personal.reporter?.id);
  add("reporter_contact", personal.reporter?.contact);
  add("subject_owner_id", personal.subjectOwnerId);
  add("subject_url", personal.subjectUrl);
  return { values };
}

export async function knownPersonalValues(env: Env, installationId: string, reportId: string | null): Promise<KnownPersonalValues> {
  if (!reportId) return { values: [] };
  const row = await getReportRow(env.DB, installationId, reportId);
  return row ? valuesOf(env, installationId, row) : { values: [] };
}

/** The known values of many reports, in one query (a batch of statements). */
export async function knownPersonalValuesOf(env: Env, installationId: string, reportIds: string[]): Promise<Map<string, KnownPersonalValues>> {
  const known = new Map<string, KnownPersonalValues>();
  if (reportIds.length === 0) return known;
  const { results } = await reportRowsStatement(env.DB, installationId, [...new Set(reportIds)]).all<ReportRow>();
  for (const row of results) known.set(row.id, await valuesOf(env, installationId, row));
  return known;
}

/** What in `statement` is personal data (empty: none found). */
export function personalDataFindings(statement: Record<string, unknown>, known: KnownPersonalValues): PersonalDataFinding[] {
  const leaves: Array<[string, string]> = [];
  textLeaves(statement, "", leaves);
  const findings: PersonalDataFinding[] = [];
  const seen = new Set<string>();
  const found = (field: string, kind: PersonalDataKind) => {
    const key = `${field}:${kind}`;
    if (!seen.has(key)) {
      seen.add(key);
      findings.push({ field, kind });
    }
  };
  for (const [field, text] of leaves) {
    for (const [kind, value] of known.values) if (containsValue(text, value)) found(field, kind);
    for (const [kind, pattern] of PATTERNS) if (pattern.test(text)) found(field, kind);
    for (const url of text.match(URL_PATTERN) ?? []) {
      let path = url;
      try {
        const parsed = new URL(url);
        path = `${parsed.pathname}${parsed.search}`;
      } catch {
        // Not a parseable URL: its text is checked as it is.
      }
      if (USER_PATH.test(path) || url.startsWith("at://")) found(field, "user_url");
    }
  }
  return findings;
}
