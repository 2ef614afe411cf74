// A named person's data on request (GDPR Art. 15 and 17): found by the keyed-hash
// index of the ids sealed in reports (reporter, subject owner) and appeals (appellant), exported
// opened or erased the way retention erases it. Both are audited with counts and a request id,
// never the person's id. Rows written before the index existed are indexed by the schedule
// (indexPersonKeys), and on demand for the installation asked about.
import { eraseAccountSignalsStatement } from "../reports/signals";
import { accountRecordsOf, unlinkAccountStatements } from "../../accounts";
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, errorCode } from "../../errors";
import { newId } from "../../lib/crypto";
import { PERSON_KEYS_VERSION, personKey } from "../../lib/person-keys";
import { copyTombstones, tombstonesStatement } from "../reports/erasure-tombstones";
import { destroyPersonDataKeys, openPersonalData } from "../reports/report-crypto";
import { rehydratePerson } from "../archive/case-rehydrate";
import { caseBusySql } from "./retention";
import { eraseReports, type ErasureCounts } from "./retention-erase";
import type { ReportPersonalData } from "../reports/reports-queries";

/** The ids of the reports of ?1 whose reporter key is ?2 or subject owner key is ?3 (a union, so each side uses its index). */
const PERSON_REPORTS = `SELECT id FROM reports WHERE installation_id = ?1 AND reporter_key = ?2 UNION SELECT id FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?3`;

/** Per request: reports exported, or erased (the response says how many remain: ask again). */
const EXPORT_LIMIT = 500;
const ERASE_LIMIT = 100;
const INDEX_ON_DEMAND = 500;

/** The person named by the id they had at intake: as reporter (`reporter.id`) and/or as subject owner (`subject.ownerId`). */
export interface PersonQuery {
  reporter?: { id: string };
  subjectOwner?: { id: string };
}

/**
 * Indexes rows written before the index (person_keys_version NULL): opens each, writes its keys.
 * Bounded by `limit` per table; idempotent (an indexed row is not read again).
 */
export async function indexPersonKeys(env: Env, limit: number, installationId: string | null = null): Promise<{ reports: number; appeals: number }> {
  const [reports, appeals] = await env.DB.batch<{ id: string; installationId: string; sealed: string }>([
    env.DB.prepare(`SELECT id, installation_id AS installationId, personal_data AS sealed FROM reports WHERE person_keys_version IS NULL AND (?2 IS NULL OR installation_id = ?2) ORDER BY created_at LIMIT ?1`).bind(limit, installationId),
    env.DB.prepare(`SELECT id, installation_id AS installationId, personal_data AS sealed FROM appeals WHERE person_keys_version IS NULL AND (?2 IS NULL OR installation_id = ?2) ORDER BY created_at LIMIT ?1`).bind(limit, installationId),
  ]);
  const statements: D1PreparedStatement[] = [];
  // A row that does not open is marked unindexable (version -1, logged by code) rather than
  // blocking the sweep on it forever; it is not found by a request until its data key is back.
  const unindexable = (table: "reports" | "appeals", row: { id: string; installationId: string }, error: unknown) => {
    console.error(JSON.stringify({ event: "person_index.unindexable", table, installationId: row.installationId, id: row.id, code: errorCode(error) }));
    return env.DB.prepare(`UPDATE ${table} SET person_keys_version = -1 WHERE id = ?1 AND person_keys_version IS NULL`).bind(row.id);
  };
  for (const row of reports!.results) {
    let personal: ReportPersonalData;
    try {
      personal = await openPersonalData<ReportPersonalData>(env, row.installationId, `report:${row.id}`, row.sealed);
    } catch (error) {
      statements.push(unindexable("reports", row, error));
      continue;
    }
    statements.push(
      env.DB.prepare(`UPDATE reports SET reporter_key = ?2, subject_owner_key = ?3, person_keys_version = ?4 WHERE id = ?1 AND person_keys_version IS NULL`).bind(
        row.id,
        personKey(row.installationId, personal.reporter?.id),
        personKey(row.installationId, personal.subjectOwnerId),
        PERSON_KEYS_VERSION,
      ),
    );
  }
  for (const row of appeals!.results) {
    let personal: { appellant?: { id?: string } | null };
    try {
      personal = await openPersonalData<{ appellant?: { id?: string } | null }>(env, row.installationId, `appeal:${row.id}`, row.sealed);
    } catch (error) {
      statements.push(unindexable("appeals", row, error));
      continue;
    }
    statements.push(env.DB.prepare(`UPDATE appeals SET appellant_key = ?2, person_keys_version = ?3 WHERE id = ?1 AND person_keys_version IS NULL`).bind(row.id, personKey(row.installationId, personal.appellant?.id), PERSON_KEYS_VERSION));
  }
  if (statements.length > 0) await env.DB.batch(statements);
  return { reports: reports!.results.length, appeals: appeals!.results.length };
}

function keysOf(installationId: string, query: PersonQuery) {
  const reporter = personKey(installationId, query.reporter?.id);
  const owner = personKey(installationId, query.subjectOwner?.id);
  if (!reporter && !owner) throw new AppError("personal_data.person_required", "Name the person: reporter.id, subjectOwner.id, or both.", { status: 422 });
  return { reporter, owner, roles: [...(reporter ? ["reporter"] : []), ...(owner ? ["subject_owner"] : [])] };
}

/**
 * The index must cover the installation before it is asked: what is left is indexed now, or the
 * request is retried. The person's archived cases come back to D1 first (cases/archive), so they
 * are found, exported and erased as hot ones.
 */
async function ensureIndexed(env: Env, installationId: string, keys: { reporter: string | null; owner: string | null }): Promise<void> {
  const archived = await rehydratePerson(env, installationId, [keys.reporter, keys.owner]);
  if (archived.more) throw new AppError("personal_data.archive_pending", `${archived.cases} archived cases of this person were brought back to D1 and more are left; ask again.`, { status: 503, retryable: true });
  await indexPersonKeys(env, INDEX_ON_DEMAND, installationId);
  const pending = await env.DB.prepare(`
    SELECT (SELECT COUNT(*) FROM reports WHERE installation_id = ?1 AND person_keys_version IS NULL) + (SELECT COUNT(*) FROM appeals WHERE installation_id = ?1 AND person_keys_version IS NULL) AS n`)
    .bind(installationId)
    .first<{ n: number }>();
  if ((pending?.n ?? 0) > 0) throw new AppError("personal_data.index_pending", "Older reports are still being indexed by the schedule; retry in a few minutes.", { status: 503, retryable: true });
}

/** The person's reports (as reporter and/or subject owner) and appeals (as appellant), not yet erased. */
async function personRows(db: D1Database, installationId: string, keys: { reporter: string | null; owner: string | null }, limit: number) {
  const [reports, appeals] = await db.batch<Record<string, unknown>>([
    db
      .prepare(`
      SELECT r.id, r.case_id AS caseId, r.subject_kind AS subjectKind, r.subject_id AS subjectId, r.category, r.source, r.created_at AS createdAt, r.personal_data AS sealed,
        (?2 IS NOT NULL AND r.reporter_key = ?2) AS asReporter, (?3 IS NOT NULL AND r.subject_owner_key = ?3) AS asSubjectOwner
      FROM reports r WHERE r.installation_id = ?1 AND r.personal_data_erased_at IS NULL AND r.id IN (${PERSON_REPORTS})
      ORDER BY r.created_at LIMIT ?4`)
      .bind(installationId, keys.reporter, keys.owner, limit + 1),
    db
      .prepare(`
      SELECT id, report_id AS reportId, decision_id AS decisionId, appellant_role AS appellantRole, state, created_at AS createdAt, personal_data AS sealed
      FROM appeals WHERE installation_id = ?1 AND personal_data_erased_at IS NULL AND appellant_key IN (?2, ?3) ORDER BY created_at LIMIT ?4`)
      .bind(installationId, keys.reporter, keys.owner, limit + 1),
  ]);
  return { reports: reports!.results, appeals: appeals!.results };
}

/**
 * Everything held about the person, opened: as reporter, their reports whole; as subject owner,
 * the subject as reported (url, owner id, snapshot), without who reported nor the reporter's
 * description and evidence, which could name them (GDPR Art. 15(4)); their appeals.
 * Audited (`personal_data.exported`, counts only).
 */
export async function exportPersonalData(env: Env, actor: Actor, query: PersonQuery) {
  const keys = keysOf(actor.installationId, query);
  await ensureIndexed(env, actor.installationId, keys);
  const rows = await personRows(env.DB, actor.installationId, keys, EXPORT_LIMIT);
  const reports = [];
  for (const row of rows.reports.slice(0, EXPORT_LIMIT)) {
    const personal = await openPersonalData<ReportPersonalData>(env, actor.installationId, `report:${row.id}`, String(row.sealed));
    const asReporter = row.asReporter === 1;
    reports.push({
      id: row.id,
      caseId: row.caseId,
      category: row.category,
      source: row.source,
      createdAt: row.createdAt,
      roles: [...(asReporter ? ["reporter"] : []), ...(row.asSubjectOwner === 1 ? ["subject_owner"] : [])],
      subject: { kind: row.subjectKind, id: row.subjectId, url: personal.subjectUrl, ownerId: personal.subjectOwnerId, snapshot: personal.snapshot },
      // The reporter's own words and evidence could name them: only their own export carries them.
      ...(asReporter ? { reporter: personal.reporter, description: personal.description, evidence: personal.evidence } : {}),
    });
  }
  const appeals = [];
  for (const row of rows.appeals.slice(0, EXPORT_LIMIT)) {
    const personal = await openPersonalData<{ appellant: unknown; reason: string | null }>(env, actor.installationId, `appeal:${row.id}`, String(row.sealed));
    appeals.push({ id: row.id, reportId: row.reportId, decisionId: row.decisionId, appellantRole: row.appellantRole, state: row.state, createdAt: row.createdAt, appellant: personal.appellant, reason: personal.reason });
  }
  const requestId = newId("pdr");
  const at = new Date().toISOString();
  const truncated = rows.reports.length > EXPORT_LIMIT || rows.appeals.length > EXPORT_LIMIT;
  // As an account owner: the strikes and sanctions their account carries.
  const account = keys.owner ? await accountRecordsOf(env.DB, actor.installationId, keys.owner) : { strikes: [], sanctions: [] };
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `personal_data_request:${requestId}:exported`,
    action: "personal_data.exported",
    actor: actor.audit,
    target: { type: "personal_data_request", id: requestId },
    details: { roles: keys.roles, reports: reports.length, appeals: appeals.length, strikes: account.strikes.length, sanctions: account.sanctions.length, truncated },
    at,
  }).run();
  return { requestId, exportedAt: at, roles: keys.roles, reports, appeals, account, truncated };
}

/**
 * Erases the person's data as retention does, in closed cases (no pending work); reports in cases
 * still being handled are held back and counted, to be erased by asking again once they close (or
 * by retention). At most 100 reports per request: `remaining` says whether to ask again.
 * Hot rows are replaced, archived runs marked (their outputs are no longer served, and the mark
 * travels in backups). Their reports and appeals were sealed under their own keys as well (from
 * migration 0049 on): once nothing of theirs is left unerased those keys are destroyed
 * (`keysDestroyed`; null while something is held back — in any role: a report someone else filed
 * about them is sealed under the same key), so the case archive's and backups' copies stop opening.
 * Every request leaves a tombstone of what it erased (the roles and when, and whether the keys
 * went), so a restore re-applies it whatever was held back. What was sealed before keys
 * per person (and task contexts, step outputs, deliveries, sealed under the period's key alone)
 * stops opening when retention destroys the period's keys (retention-keys.ts).
 * Audited (`personal_data.erased`, counts only) in the batch that erases; `person_data_key.destroyed` after.
 */
export async function erasePersonalData(env: Env, actor: Actor, query: PersonQuery) {
  const keys = keysOf(actor.installationId, query);
  await ensureIndexed(env, actor.installationId, keys);
  const now = new Date().toISOString();
  const { results } = await env.DB.prepare(`
    SELECT r.id, r.case_id AS caseId, ${caseBusySql("?4")} AS busy
    FROM reports r JOIN cases c ON c.id = r.case_id
    WHERE r.installation_id = ?1 AND r.personal_data_erased_at IS NULL AND r.id IN (${PERSON_REPORTS})
    ORDER BY busy, r.created_at LIMIT ?5`)
    .bind(actor.installationId, keys.reporter, keys.owner, "9999-12-31T23:59:59.999Z", ERASE_LIMIT + 1)
    .all<{ id: string; caseId: string; busy: number }>();
  // "Busy" against a cutoff in the far future is "has pending work" alone: age does not matter on request.
  const page = results.slice(0, ERASE_LIMIT);
  const closed = page.filter((r) => r.busy !== 1);
  const held = page.filter((r) => r.busy === 1);
  const { results: ownAppeals } = await env.DB.prepare(`
    SELECT a.id FROM appeals a WHERE a.installation_id = ?1 AND a.personal_data_erased_at IS NULL AND a.appellant_key IN (?2, ?3) AND a.state <> 'open'
      AND NOT EXISTS (SELECT 1 FROM workflow_runs w WHERE w.appeal_id = a.id AND w.state NOT IN ('succeeded', 'failed', 'terminated', 'superseded'))
      AND (a.report_id IS NULL OR a.report_id NOT IN (SELECT value FROM json_each(?4)))
    LIMIT ?5`)
    .bind(actor.installationId, keys.reporter, keys.owner, JSON.stringify(held.map((r) => r.id)), ERASE_LIMIT)
    .all<{ id: string }>();
  const requestId = newId("pdr");
  const heldCaseIds = [...new Set(held.map((r) => r.caseId))];
  const audit = (erased: ErasureCounts) => ({
    installationId: actor.installationId,
    idempotencyKey: `personal_data_request:${requestId}:erased`,
    action: "personal_data.erased",
    actor: actor.audit,
    target: { type: "personal_data_request", id: requestId },
    details: { roles: keys.roles, ...erased, heldReports: held.length, heldCases: heldCaseIds.length },
    at: now,
  });
  const counts = await eraseReports(env, actor.installationId, { reportIds: closed.map((r) => r.id), appealIds: ownAppeals.map((a) => a.id), at: now, audit });
  // The person's signals as an account owner (keyed hashes tying them to other accounts) go with their data.
  // Their account's strikes and sanctions stop naming them once none of their reports is held back.
  const unlink = keys.owner && held.length === 0 && results.length <= ERASE_LIMIT ? unlinkAccountStatements(env.DB, actor.installationId, keys.owner, requestId) : [];
  // The tombstone of what this erased, whatever it held back: a restore of a backup taken before
  // now erases it again (erasure-reapply.ts), with the same checks of pending work.
  const people = [...new Set([keys.reporter, keys.owner])].filter((p): p is string => p !== null);
  const tombstones = people.map((person) => ({ person, erasedAt: now, reporterUntil: person === keys.reporter ? now : null, ownerUntil: person === keys.owner ? now : null, keysUntil: null }));
  await env.DB.batch([...(keys.owner ? [eraseAccountSignalsStatement(env.DB, actor.installationId, keys.owner)] : []), ...unlink, tombstonesStatement(env.DB, actor.installationId, tombstones)]);
  await copyTombstones(env, actor.installationId, people);
  // Nothing erased (nothing found, or all held back): the request is still on the record.
  if (Object.values(counts).every((n) => n === 0)) await auditStatement(env.DB, audit(counts)).run();
  // Once nothing of the person is left unerased, their keys go: every copy of what was sealed for
  // them (case archives in R2, exported backups) stops opening, and a tombstone outlives a restore.
  const keysDestroyed = await destroyKeysOfErased(env, actor, keys, requestId, now);
  return { requestId, erasedAt: now, roles: keys.roles, erased: counts, held: { reports: held.length, caseIds: heldCaseIds }, remaining: results.length > ERASE_LIMIT, keysDestroyed };
}

/**
 * Destroys the person's keys (person-data-keys.ts) when none of their reports or appeals is left
 * unerased — in any role, since one key seals what they reported and what was reported about them:
 * a reporter's erasure leaves their key while reports about them as a subject owner remain, and a
 * report held back in an open case or beyond this request's page still needs it. Answers how many
 * keys went, or null while something of theirs still needs them.
 */
async function destroyKeysOfErased(env: Env, actor: Actor, keys: { reporter: string | null; owner: string | null }, requestId: string, at: string): Promise<number | null> {
  const people = [...new Set([keys.reporter, keys.owner])].filter((p): p is string => p !== null);
  const left = await env.DB.prepare(`
    SELECT EXISTS (SELECT 1 FROM json_each(?2) j CROSS JOIN reports r ON r.installation_id = ?1 AND r.reporter_key = j.value WHERE r.personal_data_erased_at IS NULL)
      OR EXISTS (SELECT 1 FROM json_each(?2) j CROSS JOIN reports r ON r.installation_id = ?1 AND r.subject_owner_key = j.value WHERE r.personal_data_erased_at IS NULL)
      OR EXISTS (SELECT 1 FROM json_each(?2) j CROSS JOIN appeals a ON a.installation_id = ?1 AND a.appellant_key = j.value WHERE a.personal_data_erased_at IS NULL) AS n`)
    .bind(actor.installationId, JSON.stringify(people))
    .first<{ n: number }>();
  if (left?.n) return null;
  let destroyed = 0;
  for (const person of people) destroyed += (await destroyPersonDataKeys(env, actor.installationId, person, { at, actor: actor.audit, requestId })).length;
  return destroyed;
}
