// Bench routes of section "search" (bench/sections/search.mjs): an installation's reports and their
// search terms seeded in bulk SQL from a template report (never replayed through the API), and the
// query plans of the search statements. Report i has six words of a 5,000-word vocabulary
// (w0 … w4999: words (13·i + 977·j) mod 5000, j = 0…5), the common word "spam" when i % 5 = 0, and
// reporter `reporter-(i mod 10,000)`; its terms are the keyed terms intake would write for that
// description and reporter (the same function), so queries take the production path.
import { compactTerm, termTimeSql } from "../src/cases/search/search-terms";
import { searchTerm } from "../src/lib/person-keys";

const MAX_CHUNK = 50_000;
export const SEARCH_VOCABULARY = 5_000;
export const SEARCH_REPORTERS = 10_000;
const WORDS_PER_REPORT = 6;
/** 13⁻¹ mod 5,000: the seed inverts the word formula (13·3077 = 40,001). */
const INVERSE_13 = 3077;
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

const termLists = new Map<string, { words: string; reporters: string; spam: string }>();

/** The installation's keyed terms of the vocabulary and the reporters (computed once per installation and isolate). */
function termsOf(installationId: string) {
  let lists = termLists.get(installationId);
  if (!lists) {
    lists = {
      words: JSON.stringify(Array.from({ length: SEARCH_VOCABULARY }, (_, k) => compactTerm(searchTerm(installationId, "word", `w${k}`)))),
      reporters: JSON.stringify(Array.from({ length: SEARCH_REPORTERS }, (_, k) => compactTerm(searchTerm(installationId, "reporter_id", `reporter-${k}`)))),
      spam: compactTerm(searchTerm(installationId, "word", "spam")),
    };
    termLists.set(installationId, lists);
  }
  return lists;
}

/** POST /bench/search-seed {templateId, from, count, baseMs, spacingMs}: reports i = from … from+count-1 at baseMs + i·spacingMs, with their terms. */
export async function seedSearch(env: Env, body: { templateId?: unknown; from?: unknown; count?: unknown; baseMs?: unknown; spacingMs?: unknown }): Promise<Response> {
  const from = Number(body.from);
  const count = Number(body.count);
  const baseMs = Number(body.baseMs);
  const spacingMs = Number(body.spacingMs);
  if (typeof body.templateId !== "string" || !Number.isInteger(from) || from < 0 || from % SEARCH_REPORTERS !== 0 || !Number.isInteger(count) || count < 1 || count > MAX_CHUNK || !Number.isFinite(baseMs) || !Number.isFinite(spacingMs)) {
    return json({ error: { code: "bench.search_seed_invalid" } }, 400);
  }
  const template = await env.DB.prepare(`SELECT installation_id AS installationId FROM reports WHERE id = ?1`).bind(body.templateId).first<{ installationId: string }>();
  if (!template) return json({ error: { code: "bench.search_template_missing" } }, 404);
  const terms = termsOf(template.installationId);
  const range = `WITH RECURSIVE n(i) AS (SELECT CAST(?1 AS INTEGER) UNION ALL SELECT i + 1 FROM n WHERE i < CAST(?2 AS INTEGER))`;
  const at = `strftime('%Y-%m-%dT%H:%M:%fZ', (?4 + n.i * ?5) / 1000.0, 'unixepoch')`;
  // The term rows in the form intake writes (search-terms.ts: compact terms, the time in base 62).
  const termAt = termTimeSql(at);
  const started = performance.now();
  const [reports, words, others] = await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO reports (id, installation_id, case_id, subject_kind, subject_id, category, category_specification_json, source, evidence_count,
        personal_data, data_key_id, idempotency_key, request_digest, created_at)
      ${range}
      SELECT printf('rpt_search_%07d', n.i), t.installation_id, t.case_id, t.subject_kind, 'search-' || n.i,
        CASE n.i % 4 WHEN 0 THEN 'violence' WHEN 1 THEN 'scams_and_fraud' WHEN 2 THEN 'illegal_or_harmful_speech' ELSE 'protection_of_minors' END,
        '[]', 'notice', 0, t.personal_data, t.data_key_id, NULL, t.request_digest, ${at}
      FROM n, reports t WHERE t.id = ?3`).bind(from, from + count - 1, body.templateId, baseMs, spacingMs),
    // Word terms from the vocabulary's side: report i has word k at place j when i ≡ (k − 977·j)·13⁻¹ (mod 5,000),
    // so each (k, j) gives the chunk's reports from + r + 5,000·m (chunks start at multiples of 5,000) — no lookup per row.
    env.DB.prepare(`
      WITH RECURSIVE m(m) AS (SELECT 0 UNION ALL SELECT m + 1 FROM m WHERE m < (CAST(?2 AS INTEGER) - CAST(?1 AS INTEGER)) / ${SEARCH_VOCABULARY}),
        j(j) AS (VALUES ${Array.from({ length: WORDS_PER_REPORT }, (_, j) => `(${j})`).join(", ")}),
        w(k, term) AS (SELECT CAST(key AS INTEGER), value FROM json_each(?6)),
        n(i, term) AS (SELECT CAST(?1 AS INTEGER) + m.m * ${SEARCH_VOCABULARY} + (((w.k - j.j * 977) % ${SEARCH_VOCABULARY} + ${SEARCH_VOCABULARY}) % ${SEARCH_VOCABULARY}) * ${INVERSE_13} % ${SEARCH_VOCABULARY}, w.term FROM w, j, m)
      INSERT OR IGNORE INTO search_terms (installation_id, term, created_at, record_id)
      SELECT t.installation_id, n.term, ${termAt}, printf('rpt_search_%07d', n.i) FROM n, reports t WHERE t.id = ?3 AND n.i <= CAST(?2 AS INTEGER) AND n.i >= CAST(?1 AS INTEGER)`).bind(
      from,
      from + count - 1,
      body.templateId,
      baseMs,
      spacingMs,
      terms.words,
    ),
    env.DB.prepare(`
      WITH RECURSIVE m(m) AS (SELECT 0 UNION ALL SELECT m + 1 FROM m WHERE m < (CAST(?2 AS INTEGER) - CAST(?1 AS INTEGER)) / ${SEARCH_REPORTERS}),
        w(k, term) AS (SELECT CAST(key AS INTEGER), value FROM json_each(?6)),
        n(i, term) AS (SELECT CAST(?1 AS INTEGER) + m.m * ${SEARCH_REPORTERS} + w.k, w.term FROM w, m
          UNION ALL SELECT i, ?7 FROM (WITH RECURSIVE r(i) AS (SELECT CAST(?1 AS INTEGER) UNION ALL SELECT i + 5 FROM r WHERE i + 5 <= CAST(?2 AS INTEGER)) SELECT i FROM r))
      INSERT OR IGNORE INTO search_terms (installation_id, term, created_at, record_id)
      SELECT t.installation_id, n.term, ${termAt}, printf('rpt_search_%07d', n.i) FROM n, reports t WHERE t.id = ?3 AND n.i <= CAST(?2 AS INTEGER) AND n.i >= CAST(?1 AS INTEGER)`).bind(
      from,
      from + count - 1,
      body.templateId,
      baseMs,
      spacingMs,
      terms.reporters,
      terms.spam,
    ),
  ]);
  return json({ reports: reports!.meta.changes, terms: (words!.meta.changes ?? 0) + (others!.meta.changes ?? 0), seedMs: Math.round(performance.now() - started) });
}
