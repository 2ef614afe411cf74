// Search across reports, cases, decisions and accounts (GET /search). `q` matches, through the
// keyed terms of search_terms, every word of a report's description, or exactly its reporter's id
// or contact; as an account, exactly the product's id of a subject's owner (reports'
// subject_owner_key), or exactly a signal its owner was seen with (an IP, a device id, an email, a
// payment fingerprint: account_signals' keyed hashes), so one IP of a spam wave finds its accounts. Nothing is decrypted to search: the query is hashed the way intake hashed
// the sealed values. A search with `q` touches personal data, so it is audited (with a keyed
// digest of the query, never the query). Filters: category, case state, queue, date range, a
// decision's outcome and automation. Pages newest first, with an opaque cursor.
import { auditStatement } from "../../audit";
import { canReadPersonalData, type Actor } from "../../auth";
import { AppError } from "../../errors";
import { encodeCursor } from "../../lib/cursor";
import { personKey, searchTerm } from "../../lib/person-keys";
import { signalKeys } from "../reports/signals";
import { normalizeIdentifier, searchWords, termForms } from "./search-terms";

export const SEARCH_TYPES = ["report", "case", "decision", "account"] as const;
export type SearchType = (typeof SEARCH_TYPES)[number];
export const AUTOMATION_MODES = ["fully", "partially", "not_automated"] as const;

/** At most this many words of `q` are matched (all of them must be in a description). */
const MAX_QUERY_WORDS = 8;

export interface SearchQuery {
  q?: string;
  type: SearchType;
  category?: string;
  state?: string;
  queue?: string;
  from?: string;
  to?: string;
  decision?: string;
  automation?: string;
  limit: number;
  /** The last item's [time, id] of the previous page. */
  cursor: Array<string | number> | null;
}

interface Matcher {
  /** JSON array of the terms that must all match (the description's words), each as [hex, compact] (a row holds one form or the other: search-terms.ts). */
  words: string;
  wordCount: number;
  /** JSON array of terms any of which matches (the reporter's id or contact), in both forms. */
  exact: string;
}

function matcher(installationId: string, q: string): Matcher {
  const words = searchWords(q, MAX_QUERY_WORDS).map((word) => termForms(searchTerm(installationId, "word", word)));
  const exact = [searchTerm(installationId, "reporter_id", normalizeIdentifier("reporter_id", q)), searchTerm(installationId, "reporter_contact", normalizeIdentifier("reporter_contact", q))].flatMap(termForms);
  return { words: JSON.stringify(words), wordCount: words.length, exact: JSON.stringify(exact) };
}

/**
 * The reports `q` matches, as a CTE `hits(id)`; binds ?1 installation, ?2 word terms, ?3 their
 * count, ?4 exact terms, ?15 and ?16 the word term with the fewest reports (DRIVER_SQL) in its
 * hex and compact forms. The words are matched from that rarest term's rows, each other word
 * checked by a seek of search_terms' key per form (a report's terms share its created_at, in the
 * same form), so a common word costs nothing more than a rare one; the exact terms are one seek
 * each per form.
 */
const HITS_CTE = `hits(id) AS (
    SELECT a.record_id FROM search_terms a WHERE a.installation_id = ?1 AND a.term IN (?15, ?16) AND ?3 > 0
      AND NOT EXISTS (SELECT 1 FROM json_each(?2) t WHERE t.value ->> 0 <> ?15
        AND NOT EXISTS (SELECT 1 FROM search_terms b WHERE b.installation_id = ?1 AND b.term IN (t.value ->> 0, t.value ->> 1) AND b.created_at = a.created_at AND b.record_id = a.record_id))
      AND NOT EXISTS (SELECT 1 FROM reports e WHERE e.id = a.record_id AND e.personal_data_erased_at IS NOT NULL)
    UNION
    SELECT s.record_id FROM search_terms s WHERE s.installation_id = ?1 AND s.term IN (SELECT value FROM json_each(?4))
      AND NOT EXISTS (SELECT 1 FROM reports e WHERE e.id = s.record_id AND e.personal_data_erased_at IS NOT NULL)
  )`;

/** The word term of ?2 with the fewest rows in both forms (counted up to 10,000 each), to drive HITS_CTE; ?1 the installation. Exported for the plan tests. */
export const DRIVER_SQL = `SELECT t.value ->> 0 AS term, t.value ->> 1 AS compact,
    (SELECT COUNT(*) FROM (SELECT 1 FROM search_terms s WHERE s.installation_id = ?1 AND s.term IN (t.value ->> 0, t.value ->> 1) LIMIT 10000)) AS n
  FROM json_each(?2) t ORDER BY n, term LIMIT 1`;

// Filters on a report `r` (binds ?5 category, ?6 from, ?7 to, ?8 state, ?9 queue, ?10 outcome, ?11 automation).
const REPORT_FILTERS = `(?5 IS NULL OR r.category = ?5) AND (?6 IS NULL OR r.created_at >= ?6) AND (?7 IS NULL OR r.created_at < ?7)
  AND (?8 IS NULL OR EXISTS (SELECT 1 FROM cases c WHERE c.id = r.case_id AND c.state = ?8))
  AND (?9 IS NULL OR EXISTS (SELECT 1 FROM human_tasks t WHERE t.installation_id = ?1 AND t.report_id = r.id AND t.queue_id = ?9))
  AND (?10 IS NULL OR EXISTS (SELECT 1 FROM decisions d WHERE d.report_id = r.id AND d.installation_id = ?1 AND d.outcome = ?10))
  AND (?11 IS NULL OR EXISTS (SELECT 1 FROM decisions d WHERE d.report_id = r.id AND d.installation_id = ?1 AND d.automated_decision = ?11))`;

function binds(installationId: string, m: Matcher | null, query: SearchQuery): unknown[] {
  return [
    installationId,
    m?.words ?? "[]",
    m?.wordCount ?? 0,
    m?.exact ?? "[]",
    query.category ?? null,
    query.from ?? null,
    query.to ?? null,
    query.state ?? null,
    query.queue ?? null,
    query.decision ?? null,
    query.automation ?? null,
    query.cursor ? String(query.cursor[0]) : null,
    query.cursor ? String(query.cursor[1]) : null,
    query.limit + 1,
  ];
}

// ?12, ?13: the cursor's time and id; ?14 the page size + 1. With q, the matches drive (CROSS JOIN
// keeps them first, the unary + keeps the planner off a walk of the installation's rows in time
// order): the cost follows the matches, not the installation's size. Exported for the plan tests.
export const STATEMENTS: Record<Exclude<SearchType, "account">, { matched: string; all: string }> = {
  report: {
    matched: `WITH ${HITS_CTE}
      SELECT r.id, r.created_at AS at, r.category, r.source, r.subject_kind AS subjectKind, r.subject_id AS subjectId, r.case_id AS caseId
      FROM hits CROSS JOIN reports r ON r.id = hits.id AND +r.installation_id = ?1
      WHERE ${REPORT_FILTERS} AND (?12 IS NULL OR r.created_at < ?12 OR (r.created_at = ?12 AND r.id < ?13))
      ORDER BY r.created_at DESC, r.id DESC LIMIT ?14`,
    all: `SELECT r.id, r.created_at AS at, r.category, r.source, r.subject_kind AS subjectKind, r.subject_id AS subjectId, r.case_id AS caseId
      FROM reports r WHERE r.installation_id = ?1 AND ${REPORT_FILTERS}
        AND (?12 IS NULL OR r.created_at < ?12 OR (r.created_at = ?12 AND r.id < ?13))
      ORDER BY r.created_at DESC, r.id DESC LIMIT ?14`,
  },
  case: {
    matched: `WITH ${HITS_CTE}, matched(case_id) AS (SELECT DISTINCT r.case_id FROM hits CROSS JOIN reports r ON r.id = hits.id AND +r.installation_id = ?1 WHERE ${REPORT_FILTERS})
      SELECT c.id, c.last_reported_at AS at, c.state, c.subject_kind AS subjectKind, c.subject_id AS subjectId, c.report_count AS reportCount
      FROM matched CROSS JOIN cases c ON c.id = matched.case_id AND +c.installation_id = ?1
      WHERE (?12 IS NULL OR c.last_reported_at < ?12 OR (c.last_reported_at = ?12 AND c.id < ?13))
      ORDER BY c.last_reported_at DESC, c.id DESC LIMIT ?14`,
    all: `SELECT c.id, c.last_reported_at AS at, c.state, c.subject_kind AS subjectKind, c.subject_id AS subjectId, c.report_count AS reportCount
      FROM cases c WHERE c.installation_id = ?1 AND (?8 IS NULL OR c.state = ?8)
        AND EXISTS (SELECT 1 FROM reports r WHERE r.case_id = c.id AND r.installation_id = ?1 AND ${REPORT_FILTERS.replace("EXISTS (SELECT 1 FROM cases c WHERE c.id = r.case_id AND c.state = ?8)", "1")})
        AND (?12 IS NULL OR c.last_reported_at < ?12 OR (c.last_reported_at = ?12 AND c.id < ?13))
      ORDER BY c.last_reported_at DESC, c.id DESC LIMIT ?14`,
  },
  decision: {
    matched: `WITH ${HITS_CTE}
      SELECT d.id, d.decided_at AS at, d.outcome, d.policy_category AS category, d.automated_decision AS automatedDecision, d.report_id AS reportId
      FROM hits CROSS JOIN decisions d ON d.report_id = hits.id AND +d.installation_id = ?1
      WHERE (?5 IS NULL OR d.policy_category = ?5) AND (?6 IS NULL OR d.decided_at >= ?6) AND (?7 IS NULL OR d.decided_at < ?7)
        AND (?10 IS NULL OR d.outcome = ?10) AND (?11 IS NULL OR d.automated_decision = ?11)
        AND (?8 IS NULL OR EXISTS (SELECT 1 FROM cases c WHERE c.id = d.case_id AND c.state = ?8))
        AND (?9 IS NULL OR EXISTS (SELECT 1 FROM human_tasks t WHERE t.installation_id = ?1 AND t.report_id = d.report_id AND t.queue_id = ?9))
        AND (?12 IS NULL OR d.decided_at < ?12 OR (d.decided_at = ?12 AND d.id < ?13))
      ORDER BY d.decided_at DESC, d.id DESC LIMIT ?14`,
    all: `SELECT d.id, d.decided_at AS at, d.outcome, d.policy_category AS category, d.automated_decision AS automatedDecision, d.report_id AS reportId
      FROM decisions d WHERE d.installation_id = ?1
        AND (?5 IS NULL OR d.policy_category = ?5) AND (?6 IS NULL OR d.decided_at >= ?6) AND (?7 IS NULL OR d.decided_at < ?7)
        AND (?10 IS NULL OR d.outcome = ?10) AND (?11 IS NULL OR d.automated_decision = ?11)
        AND (?8 IS NULL OR EXISTS (SELECT 1 FROM cases c WHERE c.id = d.case_id AND c.state = ?8))
        AND (?9 IS NULL OR EXISTS (SELECT 1 FROM human_tasks t WHERE t.installation_id = ?1 AND t.report_id = d.report_id AND t.queue_id = ?9))
        AND (?12 IS NULL OR d.decided_at < ?12 OR (d.decided_at = ?12 AND d.id < ?13))
      ORDER BY d.decided_at DESC, d.id DESC LIMIT ?14`,
  },
};

type Row = Record<string, unknown> & { id: string; at: string };

/** One page of search results of one type. `q` needs personal_data:read (or admin) and is audited. */
export async function search(env: Env, actor: Actor, query: SearchQuery): Promise<{ items: Array<Record<string, unknown>>; nextCursor: string | null }> {
  const q = query.q?.trim() || undefined;
  // Results span every queue: a console user limited to some queues searches from those queues' lists instead.
  if (actor.user?.queueIds) {
    throw new AppError("search.queue_limited", "Search spans every queue; a console user limited to some queues cannot search. Open your queues' tasks, or ask an administrator to lift the queue limit.", { status: 403 });
  }
  if (q && !canReadPersonalData(actor)) {
    throw new AppError("search.personal_data_scope", "Searching with q matches sealed identifiers and content; it needs the personal_data:read scope (or admin). Search with filters alone, or use a key with that scope.", { status: 403 });
  }
  if (q && q.length > 500) throw new AppError("search.query_too_long", "q may be at most 500 characters.", { status: 400, details: { parameter: "q" } });
  for (const [name, value] of [
    ["from", query.from],
    ["to", query.to],
  ] as const) {
    if (value !== undefined && Number.isNaN(Date.parse(value))) throw new AppError("search.invalid_date", `${name} must be an ISO 8601 date or time.`, { status: 400, details: { parameter: name } });
  }
  const normalized = { ...query, from: query.from && new Date(query.from).toISOString(), to: query.to && new Date(query.to).toISOString() };
  let rows: Row[];
  let fields: string[] = [];
  if (query.type === "account") {
    if (!q) throw new AppError("search.query_required", "An account search names the account's id in q (the product's id of the subject's owner), or a signal (an IP, a device id, an email).", { status: 400, details: { parameter: "q" } });
    fields = ["account.id", "account.signals"];
    const key = personKey(actor.installationId, q);
    // The query hashed as each signal kind would be: an account seen with it, whichever kind it is.
    const signals = signalKeys(actor.installationId, { ip: q, deviceId: q, email: q, paymentFingerprint: q });
    const [own, bySignal] = await env.DB.batch<Record<string, unknown>>([
      env.DB.prepare(`SELECT COUNT(*) AS reports, MAX(created_at) AS lastReportedAt FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2`).bind(actor.installationId, key),
      env.DB.prepare(`SELECT s.account_key AS accountKey, s.kind, MAX(s.last_seen) AS lastSeen,
          (SELECT COUNT(*) FROM reports r WHERE r.installation_id = ?1 AND r.subject_owner_key = s.account_key) AS reports
        FROM account_signals s WHERE s.installation_id = ?1 AND s.signal IN (SELECT json_extract(value, '$.signal') FROM json_each(?2)) AND s.account_key <> ?3
        GROUP BY s.account_key, s.kind ORDER BY lastSeen DESC, accountKey LIMIT ?4`).bind(actor.installationId, JSON.stringify(signals), key ?? "", query.limit + 1),
    ]);
    const row = own!.results[0] as { reports: number; lastReportedAt: string | null } | undefined;
    rows = query.cursor
      ? []
      : [
          ...(row && row.reports > 0 ? [{ id: q, at: row.lastReportedAt ?? "", reportCount: row.reports, matchedBy: "id" }] : []),
          // Accounts seen with the signal, by their key (their ids are not stored; GET /accounts/<key> opens one).
          ...(bySignal!.results as Array<{ accountKey: string; kind: string; lastSeen: string; reports: number }>).map((r) => ({ id: r.accountKey, at: r.lastSeen, reportCount: Number(r.reports), matchedBy: r.kind })),
        ];
  } else {
    const m = q ? matcher(actor.installationId, q) : null;
    if (m) fields = ["description", "reporter.id", "reporter.contact"];
    const statement = STATEMENTS[query.type];
    const driver = m && m.wordCount > 0 ? await env.DB.prepare(DRIVER_SQL).bind(actor.installationId, m.words).first<{ term: string; compact: string }>() : null;
    const { results } = await env.DB.prepare(m ? statement.matched : statement.all)
      .bind(...binds(actor.installationId, m, normalized), ...(m ? [driver?.term ?? null, driver?.compact ?? null] : []))
      .all<Row>();
    rows = results;
  }
  const page = rows.slice(0, query.limit);
  if (q) {
    // Who searched personal data, for what fields, with how many results; the query only as a keyed digest.
    await auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `search:${crypto.randomUUID()}`,
      action: "search.personal_data_searched",
      actor: actor.audit,
      target: { type: "search", id: query.type },
      details: { type: query.type, fields, results: page.length, queryDigest: searchTerm(actor.installationId, "word", `query\u0000${q}`) },
      at: new Date().toISOString(),
    }).run();
  }
  const last = page.at(-1);
  return {
    items: page.map(({ at, ...row }) => ({ type: query.type, ...row, at })),
    nextCursor: rows.length > query.limit && last ? encodeCursor([last.at, last.id]) : null,
  };
}
