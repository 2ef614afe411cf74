// A closed case in two tiers. Hot: the case, its reports and everything that hangs off them in
// D1 (the reports' runs as rows, their remaining steps, tasks and the reviewers' exposure to them,
// decisions, appeals, proposals, handoffs, messages, webhook deliveries and their attempts, notices,
// Transparency Database submissions, redress messages, reversals). Archive: once the case is
// closed (nothing of it pending) and quiet for its installation's hot window, every run of it archived
// (workflows/run-archive.ts), nothing of it is live and every day and hour it touched is rolled up,
// those rows move into ONE immutable R2 object, `archive/v1/<installation>/cases/<case>.json`,
// and leave D1. What stays in D1 is one 16-byte subject key (archived_subjects), so a new report
// about the subject brings the case back rather than opening a second one.
//
// Rows are kept verbatim (every column as stored): sealed personal data stays ciphertext under its
// period's data key, so erasure by destroying that key (cases/retention/retention-keys.ts) reaches
// the archived copy without rewriting it.
//
// Finding an archived record needs no D1 row: `archive/v1/<installation>/refs/<kind>/<id>` (a tiny
// object per report, run, decision, appeal and task) names its case. A read by id that misses in
// D1 asks `rehydrateRef`, which puts the case's rows back in D1 as they were (one batch, all or
// nothing) and removes the object, so every read and write path serves an archived record exactly
// as a hot one and no stale copy outlives a change of the hot rows; the schedule archives the case
// again once the window has passed since.
//
// Archiving one case is two steps, each safe to repeat and to be killed after:
//   1. writeCaseArchive: build the body from the D1 rows, put the object (same rows, same bytes)
//      and its ref objects, read the object back and check it byte for byte;
//   2. commitCaseArchive: ONE D1 batch marks the case (guarded: still eligible, the very rows that
//      were written still there, no more and no fewer, with the same text), deletes every row of
//      it (each delete holds only on the mark), records the subject key and the totals, and drops
//      the mark.
// On the schedule, cases are handed to the RUN_OPERATIONS queue and archived by its consumer
// (queueCaseArchive), each with its own D1 query budget. What a case holds and when it may go:
// case-scope.ts; bringing it back: case-rehydrate.ts.
import { AppError } from "../../errors";
import { byteLength } from "../../lib/crypto";
import { reportDayRefKey } from "./archived-reports";
import { listTermsOfCase } from "../search/terms-listing";
import {
  buildCaseArchive,
  CASE_ARCHIVE_SCHEMA_VERSION,
  CASE_CANDIDATES_SQL,
  type CaseArchiveBody,
  caseArchiveKey,
  type CaseArchiveObject,
  caseRefKey,
  type CaseRefKind,
  closedSql,
  COLUMN,
  KEYS,
  PERSON_KEY,
  personRefKey,
  PREFIX,
  readCaseArchive,
  type Row,
  SCOPE_SQL,
  subjectKey,
  subjectRefKey,
  type TableName,
  TABLES,
  utcDayStart,
} from "./case-scope";

/** The ref objects of a case's records: (kind, id) for every report, run, decision, appeal and task. */
function refsOf(body: CaseArchiveBody): Array<[CaseRefKind, string]> {
  const ids = (rows: Row[]) => rows.map((row) => String(row.id));
  return [
    ...ids(body.tables.reports).map((id) => ["report", id] as [CaseRefKind, string]),
    ...ids(body.tables.workflow_runs).map((id) => ["run", id] as [CaseRefKind, string]),
    ...ids(body.tables.decisions).map((id) => ["decision", id] as [CaseRefKind, string]),
    ...ids(body.tables.appeals).map((id) => ["appeal", id] as [CaseRefKind, string]),
    ...ids(body.tables.human_tasks).map((id) => ["task", id] as [CaseRefKind, string]),
    ...ids(body.tables.action_proposals).map((id) => ["proposal", id] as [CaseRefKind, string]),
    ...ids(body.tables.webhook_deliveries).map((id) => ["delivery", id] as [CaseRefKind, string]),
  ];
}

export interface WrittenCaseArchive {
  key: string;
  digest: string;
  /** The object's bytes as written (put again after the commit if another pass replaced them). */
  text: string;
  bytes: number;
  body: CaseArchiveBody;
  subject: Uint8Array;
}

/**
 * Step 1: writes the case's archive object (or finds it already there, same bytes), its ref objects
 * and its subject's, and reads the object back. Null when the case is not in D1.
 */
export async function writeCaseArchive(env: Env, installationId: string, caseId: string): Promise<WrittenCaseArchive | null> {
  // The archive reads the reports' term rows through their lists: a report without one gets it first.
  await listTermsOfCase(env, installationId, caseId);
  const built = await buildCaseArchive(env.DB, installationId, caseId);
  if (!built) return null;
  const { body, digest, text } = built;
  const key = caseArchiveKey(installationId, caseId);
  const bucket = env.WORKFLOW_ARTIFACTS;
  const head = await bucket.head(key);
  const put = () => bucket.put(key, text, { httpMetadata: { contentType: "application/json" }, customMetadata: { digest, schemaVersion: String(CASE_ARCHIVE_SCHEMA_VERSION) } });
  if (head?.customMetadata?.digest !== digest) await put();
  const readBack = async () => (await (await bucket.get(key))?.text()) === text;
  if (!(await readBack())) {
    await put();
    if (!(await readBack())) throw new AppError("case_archive.write_unverified", `The case archive object ${key} did not read back as written; nothing was deleted.`, { status: 503, retryable: true });
  }
  const caseRow = body.tables.cases[0]!;
  const subject = subjectKey(installationId, String(caseRow.subject_kind), String(caseRow.subject_id));
  const people = new Set(
    [...body.tables.reports.flatMap((row) => [row.reporter_key, row.subject_owner_key]), ...body.tables.appeals.map((row) => row.appellant_key)].filter((key): key is string => typeof key === "string" && PERSON_KEY.test(key)),
  );
  // Reports are found by their time too (archived-reports.ts): analysis over history reads them from R2.
  const days = body.tables.reports.map((row) => reportDayRefKey(installationId, String(row.created_at), String(row.id))).filter((ref): ref is string => ref !== null);
  const refs = [...refsOf(body).map(([kind, id]) => caseRefKey(installationId, kind, id)), subjectRefKey(installationId, subject), ...[...people].map((person) => personRefKey(installationId, person, caseId)), ...days];
  await Promise.all(refs.map((ref) => bucket.put(ref, caseId, { customMetadata: { caseId } })));
  return { key, digest, text, bytes: byteLength(text), body, subject };
}

const idsOf = (rows: Row[], column = "id") => JSON.stringify(rows.map((row) => row[column]));

/**
 * `terms` joined by `op` as a balanced tree: D1 bounds how deep an expression may nest, and a
 * case's guard joins a term per table and, per table, one per column.
 */
function balanced(terms: readonly string[], op: "+" | "AND"): string {
  if (terms.length === 0) return op === "+" ? "0" : "1";
  if (terms.length === 1) return terms[0]!;
  const middle = Math.ceil(terms.length / 2);
  return `(${balanced(terms.slice(0, middle), op)} ${op} ${balanced(terms.slice(middle), op)})`;
}

/**
 * Step 2: ONE batch. The mark holds only if the case is still eligible, nothing of it is live, and
 * its rows are exactly the ones written (the same number per table, the same number of erased
 * reports); each delete holds only on the mark. Answers whether the case was archived by this call.
 */
export async function commitCaseArchive(env: Env, installationId: string, caseId: string, written: WrittenCaseArchive, now: Date = new Date()): Promise<boolean> {
  const db = env.DB;
  const t = written.body.tables;
  const counts = TABLES.filter((x) => x.name !== "cases").map((x) => `(SELECT COUNT(*) FROM (${x.select.replace(/ ORDER BY [^)]*$/u, "")})) = ${t[x.name].length}`);
  // And the same contents: per table, the UTF-8 bytes of every text cell. An erasure, a sealing or
  // a new mark on a row (what changes a row without adding one) changes them; the row then stays
  // in D1 and the next pass archives what it holds now.
  const textBytes = TABLES.filter((x) => t[x.name].length > 0).map((x) => {
    const columns = Object.keys(t[x.name][0]!).filter((c) => COLUMN.test(c));
    const expected = t[x.name].reduce((sum, row) => sum + columns.reduce((n, c) => n + (typeof row[c] === "string" ? byteLength(row[c] as string) : 0), 0), 0);
    const measure = balanced(
      columns.map((c) => `CASE typeof(${c}) WHEN 'text' THEN length(CAST(${c} AS BLOB)) ELSE 0 END`),
      "+",
    );
    return `(SELECT COALESCE(SUM(${measure}), 0) FROM (${x.select.replace(/ ORDER BY [^)]*$/u, "")})) = ${expected}`;
  });
  const erased = t.reports.filter((row) => row.personal_data_erased_at !== null).length;
  const mark = db
    .prepare(`${SCOPE_SQL}
      INSERT INTO case_archive_marks (case_id, digest)
      SELECT ?1, ?4 FROM cases c WHERE c.id = ?1 AND c.installation_id = ?2 AND c.updated_at = ?5 AND ${closedSql("?6")}
        AND (SELECT COUNT(*) FROM reports WHERE case_id = ?1 AND personal_data_erased_at IS NOT NULL) = ${erased}
        AND ${balanced([...counts, ...textBytes], "AND")}`)
    .bind(caseId, installationId, utcDayStart(now), written.digest, String(t.cases[0]!.updated_at), now.toISOString());
  const marked = `EXISTS (SELECT 1 FROM case_archive_marks WHERE case_id = ?1 AND digest = ?2)`;
  // Every row by its key, exactly the rows the object holds (a table's rows are written by their
  // owning domain; this moves them between tiers verbatim, as restore does).
  const deleteRows = (table: TableName, rows: Row[]) => {
    const keys = KEYS[table];
    if (keys.length === 1) return db.prepare(`DELETE FROM ${table} WHERE ${keys[0]} IN (SELECT value FROM json_each(?3)) AND ${marked}`).bind(caseId, written.digest, idsOf(rows, keys[0]));
    const pairs = JSON.stringify(rows.map((row) => keys.map((k) => row[k])));
    return db.prepare(`DELETE FROM ${table} WHERE (${keys.join(", ")}) IN (SELECT ${keys.map((_, i) => `value ->> ${i}`).join(", ")} FROM json_each(?3)) AND ${marked}`).bind(caseId, written.digest, pairs);
  };
  const del = (table: TableName) => deleteRows(table, t[table]);
  // Children before parents (foreign keys); child runs before their parents.
  const order: TableName[] = [
    "webhook_attempts",
    "webhook_deliveries",
    "review_exposure",
    "tdb_submissions",
    "decision_reversals",
    "redress_messages",
    "notifier_notices",
    "connector_reports",
    "messages",
    "human_tasks",
    "action_proposals",
    "handoffs",
    "appeals",
    "decisions",
    "workflow_step_runs",
  ];
  const childRuns = t.workflow_runs.filter((row) => row.parent_run_id !== null);
  const topRuns = t.workflow_runs.filter((row) => row.parent_run_id === null);
  const [result] = await db.batch([
    mark,
    ...order.map(del),
    deleteRows("workflow_runs", childRuns),
    deleteRows("workflow_runs", topRuns),
    del("search_terms"),
    del("reports"),
    del("cases"),
    db.prepare(`DELETE FROM case_archive_holds WHERE case_id = ?1 AND ${marked}`).bind(caseId, written.digest),
    db.prepare(`INSERT INTO archived_subjects (key) SELECT ?3 WHERE ${marked} ON CONFLICT (key) DO NOTHING`).bind(caseId, written.digest, written.subject),
    db
      .prepare(`INSERT INTO case_archive_totals (installation_id, cases, bytes) SELECT ?3, 1, ?4 WHERE ${marked}
        ON CONFLICT (installation_id) DO UPDATE SET cases = cases + 1, bytes = bytes + excluded.bytes`)
      .bind(caseId, written.digest, installationId, written.bytes),
    db.prepare(`DELETE FROM case_archive_marks WHERE case_id = ?1`).bind(caseId),
  ]);
  return (result?.meta.changes ?? 0) === 1;
}

/** Archives one case (both steps). Answers whether it was archived now. */
export async function archiveCase(env: Env, installationId: string, caseId: string, now: Date = new Date()): Promise<boolean> {
  const written = await writeCaseArchive(env, installationId, caseId);
  if (!written || !(await commitCaseArchive(env, installationId, caseId, written, now))) return false;
  // The rows left D1 as this body holds them; a pass that wrote another body meanwhile (its rows
  // since changed, so its commit cannot hold) is overwritten with the committed one.
  const head = await env.WORKFLOW_ARTIFACTS.head(written.key);
  if (head?.customMetadata?.digest !== written.digest) {
    await env.WORKFLOW_ARTIFACTS.put(written.key, written.text, { httpMetadata: { contentType: "application/json" }, customMetadata: { digest: written.digest, schemaVersion: String(CASE_ARCHIVE_SCHEMA_VERSION) } });
  }
  return true;
}

/** How long a case the sweep found still live waits before it is looked at again. */
const SKIP_HOLD_MS = 3_600_000;

/** Cases archived per sweep run; the next run goes on with the rest. */
export const CASE_ARCHIVE_BATCH = 25;

/**
 * The case archive sweep (on the schedule; bounded, idempotent): closed cases past their window
 * whose every run is archived, oldest first, at most CASE_ARCHIVE_BATCH a run. A candidate whose
 * guard does not hold (something live) is skipped; one that fails is counted and left for the next
 * run. `more` is 1 while the selection was full.
 */
export async function sweepCaseArchive(env: Env, now: Date = new Date(), options: { limit?: number; installationId?: string } = {}) {
  const limit = options.limit ?? CASE_ARCHIVE_BATCH;
  const { results } = await env.DB.prepare(CASE_CANDIDATES_SQL)
    .bind(now.toISOString(), limit, options.installationId ?? null)
    .all<{ id: string; installationId: string }>();
  const summary = { archived: 0, skipped: 0, failed: 0, more: results.length === limit ? 1 : 0 };
  for (const c of results) {
    const outcome = await archiveCaseOrHold(env, c.installationId, c.id, now);
    summary[outcome] += 1;
  }
  return summary;
}

/**
 * Archives one case; one the guard finds still live is held for an hour (so it does not hold back
 * the rest), one that fails is logged and left for a later pass. What the queue consumer and the
 * inline sweep both do per case.
 */
export async function archiveCaseOrHold(env: Env, installationId: string, caseId: string, now: Date = new Date()): Promise<"archived" | "skipped" | "failed"> {
  try {
    if (await archiveCase(env, installationId, caseId, now)) return "archived";
    await env.DB.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, not_before) VALUES (?1, ?2, ?3) ON CONFLICT (case_id) DO UPDATE SET not_before = excluded.not_before`)
      .bind(caseId, installationId, new Date(now.getTime() + SKIP_HOLD_MS).toISOString())
      .run();
    return "skipped";
  } catch (error) {
    // A D1 error names the statement's problem, never a bound value.
    const reason = error instanceof AppError ? error.code : error instanceof Error ? error.message.slice(0, 200) : "unknown";
    console.error(JSON.stringify({ event: "case.archive_failed", caseId, installationId, code: error instanceof AppError ? error.code : "case_archive.failed", reason }));
    // Held like a live one, so a case that keeps failing is not tried again every minute.
    await env.DB.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, not_before) VALUES (?1, ?2, ?3) ON CONFLICT (case_id) DO UPDATE SET not_before = excluded.not_before`)
      .bind(caseId, installationId, new Date(now.getTime() + SKIP_HOLD_MS).toISOString())
      .run()
      .catch(() => undefined);
    return "failed";
  }
}

/** Cases the schedule hands to the queue per run (one statement selects them, one holds them). */
export const CASE_QUEUE_BATCH = 500;
/** How long a case handed to the queue is not handed again (the consumer archives or holds it well before). */
const QUEUED_HOLD_MS = 15 * 60_000;

/** What the schedule sends to RUN_OPERATIONS per case: archived by the consumer, one case a message. */
export interface CaseArchiveMessage {
  archiveCaseId: string;
  installationId: string;
  /** The schedule's moment (ms): the case is judged as of then (anything newer only holds it back). */
  at: number;
}

/**
 * The scheduled case archive: selects up to CASE_QUEUE_BATCH candidates and hands them to the
 * RUN_OPERATIONS queue, one message each, marking them queued for a while. A case costs its
 * archive some 40 D1 statements, and a scheduled invocation has 1,000 for every sweep together;
 * each queue consumer invocation has its own, so the archive keeps up with the backlog (Queues
 * scales consumers out) instead of with one invocation a minute.
 */
export async function queueCaseArchive(env: Env, now: Date = new Date(), options: { limit?: number; installationId?: string } = {}) {
  const limit = options.limit ?? CASE_QUEUE_BATCH;
  const { results } = await env.DB.prepare(CASE_CANDIDATES_SQL)
    .bind(now.toISOString(), limit, options.installationId ?? null)
    .all<{ id: string; installationId: string }>();
  if (results.length === 0) return { queued: 0, more: 0 };
  const until = new Date(now.getTime() + QUEUED_HOLD_MS).toISOString();
  await env.DB.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, queued_until)
      SELECT value ->> 0, value ->> 1, ?2 FROM json_each(?1) WHERE true
      ON CONFLICT (case_id) DO UPDATE SET queued_until = excluded.queued_until`)
    .bind(JSON.stringify(results.map((c) => [c.id, c.installationId])), until)
    .run();
  for (let i = 0; i < results.length; i += 100) {
    const messages: MessageSendRequest<CaseArchiveMessage>[] = results.slice(i, i + 100).map((c) => ({ body: { archiveCaseId: c.id, installationId: c.installationId, at: now.getTime() } }));
    await env.RUN_OPERATIONS.sendBatch(messages);
  }
  return { queued: results.length, more: results.length === limit ? 1 : 0 };
}

/**
 * Every case archive object of an installation, read and checked. A backup carries their rows as
 * rows (a restored installation has them hot and archives them again on its own schedule); a row
 * the backup also read from D1 (a case brought back, or archived while the backup ran) is taken
 * from D1, once.
 */
export async function archivedCaseObjects(env: Env, installationId: string): Promise<CaseArchiveObject[]> {
  const prefix = `${PREFIX}/${installationId}/cases/`;
  const out: CaseArchiveObject[] = [];
  let cursor: string | undefined;
  do {
    const page = await env.WORKFLOW_ARTIFACTS.list({ prefix, cursor });
    for (const listed of page.objects) {
      const caseId = listed.key.slice(prefix.length).replace(/\.json$/u, "");
      const object = await readCaseArchive(env, installationId, caseId);
      if (object) out.push(object);
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return out;
}

/** Archived cases and their objects' bytes, for GET /storage. */
export async function caseArchiveTotals(db: D1Database, installationId: string): Promise<{ cases: number; bytes: number }> {
  const row = await db.prepare(`SELECT cases, bytes FROM case_archive_totals WHERE installation_id = ?1`).bind(installationId).first<{ cases: number; bytes: number }>();
  return { cases: row?.cases ?? 0, bytes: row?.bytes ?? 0 };
}
