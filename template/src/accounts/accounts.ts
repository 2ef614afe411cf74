// An account as a moderator reads it (GET /accounts/:id): every report about a subject it owns,
// the decisions on them, its strikes and points, its sanctions and current restrictions, its open
// cases and the appeals, keyed by the product's own id of the owner. The id is personal data and
// is never stored: it is hashed (personKey) to the key reports and strikes carry, and the read is
// audited under that key. Another installation's account is simply not found.
import { auditStatement } from "../audit";
import { type Actor, canReadPersonalData } from "../auth";
import { AppError, notFound } from "../errors";
import { encodeCursor } from "../lib/cursor";
import { personKey } from "../lib/person-keys";
import { pointsAt, SANCTION_COLUMNS, type SanctionRow } from "./ladder";

const ACCOUNT_KEY = /^pk1_[0-9a-f]{64}$/u;

/**
 * The key every row of an account carries, or a 404 for an empty id. A key itself (`pk1_…`, as
 * related accounts are listed: their ids are not stored) names its account directly; it is bound
 * to its installation, so another installation's key finds nothing.
 */
export function accountKeyOf(installationId: string, accountId: string): string {
  if (ACCOUNT_KEY.test(accountId)) return accountId;
  const key = personKey(installationId, accountId);
  if (!key) throw notFound("account");
  return key;
}

/** The account's report a sanction names: the one given (404 report.not_found if it is not the account's), else its latest (404 account.not_found without any). */
export async function accountReport(db: D1Database, installationId: string, accountKey: string, reportId: string | undefined): Promise<{ id: string }> {
  const report = await db
    .prepare(`SELECT id FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2 AND (?3 IS NULL OR id = ?3) ORDER BY created_at DESC LIMIT 1`)
    .bind(installationId, accountKey, reportId ?? null)
    .first<{ id: string }>();
  if (report) return report;
  if (reportId) throw new AppError("report.not_found", "The report does not exist or is not about this account.", { status: 404 });
  throw notFound("account");
}

const ACCOUNT_REPORTS = `SELECT id FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2`;
const LIST_LIMIT = 100;

interface AccountReportRow {
  id: string;
  caseId: string;
  subjectKind: string;
  subjectId: string;
  category: string;
  source: string;
  createdAt: string;
}

/**
 * Who may read an account: its page tells whether a person was reported, their strikes and
 * sanctions, so it needs personal_data:read (or admin), as an account search does. A console user
 * limited to some queues is refused: an account's reports span every queue.
 */
export function assertAccountReader(actor: Actor): void {
  if (!canReadPersonalData(actor)) {
    throw new AppError("account.personal_data_scope", "An account's history tells whether a person was reported and how they were sanctioned; reading it needs the personal_data:read scope (or admin). Use a key with that scope.", {
      status: 403,
    });
  }
  if (actor.user?.queueIds) {
    throw new AppError("account.queue_limited", "An account's reports span every queue; a console user limited to some queues cannot read accounts. Ask an administrator to lift the queue limit, or open the reports from your queues.", {
      status: 403,
    });
  }
}

export async function readAccount(env: Env, actor: Actor, accountId: string, options: { limit: number; cursor: Array<string | number> | null }) {
  assertAccountReader(actor);
  const key = accountKeyOf(actor.installationId, accountId);
  const db = env.DB;
  const at = new Date().toISOString();
  const [reports, decisions, strikes, sanctions, cases, appeals, total, sharing, own] = await db.batch<Record<string, unknown>>([
    db
      .prepare(`SELECT id, case_id AS caseId, subject_kind AS subjectKind, subject_id AS subjectId, category, source, created_at AS createdAt
        FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2 AND (?3 IS NULL OR created_at < ?3 OR (created_at = ?3 AND id < ?4))
        ORDER BY created_at DESC, id DESC LIMIT ?5`)
      .bind(actor.installationId, key, options.cursor ? String(options.cursor[0]) : null, options.cursor ? String(options.cursor[1]) : null, options.limit + 1),
    db
      .prepare(`SELECT d.id, d.report_id AS reportId, d.policy_category AS policyCategory, d.outcome, d.ground, d.restrictions_json AS restrictionsJson, d.automated_decision AS automatedDecision, d.decided_at AS decidedAt,
          EXISTS (SELECT 1 FROM decision_reversals v WHERE v.installation_id = d.installation_id AND v.decision_id = d.id) AS reversed,
          (SELECT s.id FROM account_sanctions s WHERE s.installation_id = d.installation_id AND s.account_key = ?2 AND s.run_id = d.run_id) AS sanctionId
        FROM decisions d WHERE d.report_id IN (${ACCOUNT_REPORTS}) AND d.installation_id = ?1 ORDER BY d.decided_at DESC, d.id DESC LIMIT ${LIST_LIMIT}`)
      .bind(actor.installationId, key),
    db
      .prepare(`SELECT id, decision_id AS decisionId, category, points, manifestly_illegal AS manifestlyIllegal, created_at AS createdAt, expires_at AS expiresAt, reversed_at AS reversedAt
        FROM strikes WHERE installation_id = ?1 AND account_key = ?2 ORDER BY created_at DESC LIMIT 1000`)
      .bind(actor.installationId, key),
    db.prepare(`SELECT ${SANCTION_COLUMNS} FROM account_sanctions WHERE installation_id = ?1 AND account_key = ?2 ORDER BY created_at DESC LIMIT ${LIST_LIMIT}`).bind(actor.installationId, key),
    db
      .prepare(`SELECT id, state, subject_kind AS subjectKind, subject_id AS subjectId, report_count AS reportCount, last_reported_at AS lastReportedAt
        FROM cases WHERE installation_id = ?1 AND id IN (SELECT case_id FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2) ORDER BY last_reported_at DESC LIMIT ${LIST_LIMIT}`)
      .bind(actor.installationId, key),
    db
      .prepare(`SELECT id, report_id AS reportId, decision_id AS decisionId, appellant_role AS appellantRole, state, created_at AS createdAt, decided_at AS decidedAt
        FROM appeals WHERE installation_id = ?1 AND report_id IN (${ACCOUNT_REPORTS}) ORDER BY created_at DESC LIMIT ${LIST_LIMIT}`)
      .bind(actor.installationId, key),
    db.prepare(`SELECT COUNT(*) AS n FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2`).bind(actor.installationId, key),
    // Accounts sharing a signal with this one (account_signals: one seek of the key per signal of this account).
    db
      .prepare(`SELECT o.account_key AS accountKey, o.kind, COUNT(*) AS shared, MIN(o.first_seen) AS firstSeen, MAX(o.last_seen) AS lastSeen
        FROM account_signals mine JOIN account_signals o ON o.installation_id = mine.installation_id AND o.signal = mine.signal AND o.account_key <> mine.account_key
        WHERE mine.installation_id = ?1 AND mine.account_key = ?2 GROUP BY o.account_key, o.kind LIMIT 1000`)
      .bind(actor.installationId, key),
    db.prepare(`SELECT kind, COUNT(*) AS n, MIN(first_seen) AS firstSeen, MAX(last_seen) AS lastSeen FROM account_signals WHERE installation_id = ?1 AND account_key = ?2 GROUP BY kind`).bind(actor.installationId, key),
  ]);
  const strikeRows = strikes!.results as Array<{ id: string; decisionId: string; category: string; points: number; manifestlyIllegal: number; createdAt: string; expiresAt: string; reversedAt: string | null }>;
  const sanctionRows = sanctions!.results as unknown as SanctionRow[];
  const reportCount = Number((total!.results[0] as { n: number } | undefined)?.n ?? 0);
  if (reportCount === 0 && strikeRows.length === 0 && sanctionRows.length === 0) throw notFound("account");
  await auditStatement(db, {
    installationId: actor.installationId,
    idempotencyKey: `account:${key}:viewed:${crypto.randomUUID()}`,
    action: "account.viewed",
    actor: actor.audit,
    target: { type: "account", id: key },
    details: { reports: reportCount },
    at,
  }).run();
  const reportRows = reports!.results as unknown as AccountReportRow[];
  const page = reportRows.slice(0, options.limit);
  const last = page.at(-1);
  const decisionRows = decisions!.results as Array<{
    id: string;
    reportId: string;
    policyCategory: string;
    outcome: string;
    ground: string;
    restrictionsJson: string;
    automatedDecision: string;
    decidedAt: string;
    reversed: number;
    sanctionId: string | null;
  }>;
  const decisionItems = decisionRows.map(({ restrictionsJson, reversed, ...row }) => ({ ...row, restrictions: JSON.parse(restrictionsJson) as Record<string, unknown>, reversed: reversed === 1 }));
  // A sanction's own decision (a suspension's) stops restricting once its sanction is walked back.
  const walkedBack = new Set(sanctionRows.filter((s) => s.state === "reversed").map((s) => s.id));
  const caseRows = cases!.results as Array<{ id: string; state: string }>;
  return {
    id: accountId,
    reports: { total: reportCount, items: page.map((row) => ({ ...row, subject: { kind: row.subjectKind, id: row.subjectId } })), nextCursor: reportRows.length > options.limit && last ? encodeCursor([last.createdAt, last.id]) : null },
    decisions: { items: decisionItems },
    strikes: {
      points: pointsAt(strikeRows as Parameters<typeof pointsAt>[0], at),
      items: strikeRows.map((s) => ({ ...s, manifestlyIllegal: s.manifestlyIllegal === 1, state: s.reversedAt ? "reversed" : s.expiresAt <= at ? "expired" : "active" })),
    },
    sanctions: { items: sanctionRows.map(sanctionView) },
    // What restricts the account now: sanctions under way and decisions restricting the account itself that no appeal reversed.
    restrictions: [
      ...sanctionRows.filter((s) => s.kind !== "warning" && (s.state === "pending" || s.state === "started")).map((s) => ({ source: "sanction", id: s.id, kind: s.kind, actionType: s.actionTypeKey, since: s.createdAt })),
      ...decisionItems
        .filter((d) => !d.reversed && typeof d.restrictions.account === "string" && !(d.sanctionId && walkedBack.has(d.sanctionId)))
        .map((d) => ({ source: "decision", id: d.id, kind: String(d.restrictions.account), since: d.decidedAt })),
    ],
    openCases: { items: caseRows.filter((row) => row.state === "open") },
    appeals: { items: appeals!.results },
    related: relatedView(sharing!.results as unknown as SharedRow[], own!.results as Array<{ kind: string; n: number; firstSeen: string; lastSeen: string }>),
  };
}

interface SharedRow {
  accountKey: string;
  kind: string;
  shared: number;
  firstSeen: string;
  lastSeen: string;
}

/**
 * Related accounts: those sharing a signal with this one, most shared signals first (at most 50),
 * each named by its key (open it with GET /accounts/<key>), with the signals shared per kind and
 * when they were first and last seen; `count` is how many accounts share each kind (what a
 * workflow would branch on), `signals` this account's own signals per kind.
 */
function relatedView(rows: SharedRow[], own: Array<{ kind: string; n: number; firstSeen: string; lastSeen: string }>) {
  const accounts = new Map<string, { account: string; shared: Record<string, number>; sharedSignals: number; firstSeen: string; lastSeen: string }>();
  const count: Record<string, number> = {};
  for (const row of rows) {
    const entry = accounts.get(row.accountKey) ?? { account: row.accountKey, shared: {}, sharedSignals: 0, firstSeen: row.firstSeen, lastSeen: row.lastSeen };
    entry.shared[row.kind] = Number(row.shared);
    entry.sharedSignals += Number(row.shared);
    if (row.firstSeen < entry.firstSeen) entry.firstSeen = row.firstSeen;
    if (row.lastSeen > entry.lastSeen) entry.lastSeen = row.lastSeen;
    accounts.set(row.accountKey, entry);
    count[row.kind] = (count[row.kind] ?? 0) + 1;
  }
  const items = [...accounts.values()].sort((a, b) => b.sharedSignals - a.sharedSignals || (a.account < b.account ? -1 : 1)).slice(0, 50);
  return { count, signals: Object.fromEntries(own.map((row) => [row.kind, { count: Number(row.n), firstSeen: row.firstSeen, lastSeen: row.lastSeen }])), items };
}

export function sanctionView(row: SanctionRow) {
  return {
    id: row.id,
    source: row.source,
    kind: row.kind,
    actionType: row.actionTypeKey,
    threshold: row.threshold,
    art23: row.art23 === 1,
    state: row.state,
    refusalCode: row.refusalCode,
    decisionId: row.decisionId,
    reportId: row.reportId,
    runId: row.runId,
    createdAt: row.createdAt,
  };
}
