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
// (queueCaseArchive), each with its own D1 query budget.
import { canonicalJson } from "../../audit";
import { AppError } from "../../errors";
import { byteLength, sha256Hex } from "../../lib/crypto";
import { subjectArchiveKey } from "../../lib/person-keys";
import { DEFAULT_HOT_DAYS } from "../../lib/storage-tiers";

export const CASE_ARCHIVE_FORMAT = "safest-tools.case-archive";
export const CASE_ARCHIVE_SCHEMA_VERSION = 1;
const PREFIX = `archive/v${CASE_ARCHIVE_SCHEMA_VERSION}`;

const ID = /^[A-Za-z0-9._:-]{1,200}$/u;
const PERSON_KEY = /^pk1_[0-9a-f]{64}$/u;

/** `archive/v1/<installationId>/cases/<caseId>.json`: derived from ids, so a lookup needs no D1 row. */
export function caseArchiveKey(installationId: string, caseId: string): string {
  return `${PREFIX}/${installationId}/cases/${caseId}.json`;
}

/** The kinds of record a ref object leads from to its case. */
export type CaseRefKind = "report" | "run" | "decision" | "appeal" | "task";

/** `archive/v1/<installationId>/refs/<kind>/<id>`: the ref object naming the case that holds the record. */
export function caseRefKey(installationId: string, kind: CaseRefKind, id: string): string {
  return `${PREFIX}/${installationId}/refs/${kind}/${id}`;
}

/** The 16-byte key of a subject in archived_subjects (a keyed hash: lib/person-keys.ts). */
export async function subjectKey(installationId: string, kind: string, id: string): Promise<Uint8Array> {
  return subjectArchiveKey(installationId, kind, id);
}

const hexOf = (bytes: Uint8Array) => [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");

/**
 * `archive/v1/<installationId>/refs/person/<person key>/<caseId>`: an archived case holds a row of
 * this person (as reporter, subject owner or appellant). The person key is the keyed hash the
 * person index already uses (lib/person-keys.ts), never the person's id.
 */
export function personRefKey(installationId: string, personKey: string, caseId: string): string {
  return `${PREFIX}/${installationId}/refs/person/${personKey}/${caseId}`;
}

/** `archive/v1/<installationId>/subjects/<hex key>.json`: which case an archived subject's key stands for. */
export function subjectRefKey(installationId: string, key: Uint8Array): string {
  return `${PREFIX}/${installationId}/subjects/${hexOf(key)}.json`;
}

// ---- what a case holds ------------------------------------------------------------------------

/**
 * The ids of everything that hangs off a case (?1 case, ?2 installation), each found on an index:
 * reports by case; runs by report and appeal, and their child runs by parent; steps by run;
 * decisions by report and by step; appeals by report and by decision; tasks by report, appeal and
 * step; messages by report and by step; proposals and handoffs by step; deliveries by
 * (source_type, source_id).
 */
const SCOPE_SQL = `
  WITH rp AS (SELECT id FROM reports WHERE case_id = ?1 AND installation_id = ?2),
  top_runs AS (
    SELECT id FROM workflow_runs WHERE report_id IN (SELECT id FROM rp) AND installation_id = ?2),
  de0 AS (SELECT id FROM decisions WHERE report_id IN (SELECT id FROM rp) AND installation_id = ?2),
  ap AS (
    SELECT id FROM appeals WHERE installation_id = ?2 AND report_id IN (SELECT id FROM rp)
    UNION SELECT id FROM appeals WHERE installation_id = ?2 AND decision_id IN (SELECT id FROM de0)),
  ru1 AS (
    SELECT id FROM top_runs
    UNION SELECT id FROM workflow_runs WHERE appeal_id IN (SELECT id FROM ap) AND installation_id = ?2),
  ru AS (SELECT id FROM ru1 UNION SELECT id FROM workflow_runs WHERE parent_run_id IN (SELECT id FROM ru1)),
  st AS (SELECT id FROM workflow_step_runs WHERE run_id IN (SELECT id FROM ru)),
  de AS (SELECT id FROM de0 UNION SELECT id FROM decisions WHERE step_run_id IN (SELECT id FROM st)),
  ta AS (
    SELECT id FROM human_tasks WHERE installation_id = ?2 AND report_id IN (SELECT id FROM rp)
    UNION SELECT id FROM human_tasks WHERE installation_id = ?2 AND appeal_id IN (SELECT id FROM ap)
    UNION SELECT id FROM human_tasks WHERE step_run_id IN (SELECT id FROM st)),
  ms AS (
    SELECT id FROM messages WHERE installation_id = ?2 AND report_id IN (SELECT id FROM rp)
    UNION SELECT id FROM messages WHERE step_run_id IN (SELECT id FROM st)),
  pr AS (SELECT id FROM action_proposals WHERE step_run_id IN (SELECT id FROM st)),
  ho AS (SELECT id FROM handoffs WHERE step_run_id IN (SELECT id FROM st)),
  dl AS (
    SELECT id FROM webhook_deliveries WHERE source_type = 'action' AND source_id IN (SELECT id FROM pr)
    UNION SELECT id FROM webhook_deliveries WHERE source_type = 'message' AND source_id IN (SELECT id FROM ms)
    UNION SELECT id FROM webhook_deliveries WHERE source_type = 'handoff' AND source_id IN (SELECT id FROM ho)),
  last_activity AS (
    SELECT MAX(
      (SELECT updated_at FROM cases WHERE id = ?1),
      COALESCE((SELECT MAX(updated_at) FROM workflow_runs WHERE id IN (SELECT id FROM ru)), ''),
      COALESCE((SELECT MAX(updated_at) FROM human_tasks WHERE id IN (SELECT id FROM ta)), ''),
      COALESCE((SELECT MAX(created_at) FROM decisions WHERE id IN (SELECT id FROM de)), ''),
      COALESCE((SELECT MAX(updated_at) FROM appeals WHERE id IN (SELECT id FROM ap)), ''),
      COALESCE((SELECT MAX(updated_at) FROM action_proposals WHERE id IN (SELECT id FROM pr)), ''),
      COALESCE((SELECT MAX(updated_at) FROM webhook_deliveries WHERE id IN (SELECT id FROM dl)), '')) AS at)`;

/** Every table a case archive holds, in the order rows go back in (parents before children), each read verbatim. */
const TABLES = [
  { name: "cases", select: `SELECT * FROM cases WHERE id = ?1 AND installation_id = ?2` },
  { name: "reports", select: `SELECT * FROM reports WHERE id IN (SELECT id FROM rp) ORDER BY created_at, id` },
  // Parents before their child runs.
  { name: "workflow_runs", select: `SELECT * FROM workflow_runs WHERE id IN (SELECT id FROM ru) ORDER BY parent_run_id IS NOT NULL, created_at, id` },
  { name: "workflow_step_runs", select: `SELECT * FROM workflow_step_runs WHERE id IN (SELECT id FROM st) ORDER BY started_at, rowid` },
  { name: "decisions", select: `SELECT * FROM decisions WHERE id IN (SELECT id FROM de) ORDER BY created_at, id` },
  { name: "appeals", select: `SELECT * FROM appeals WHERE id IN (SELECT id FROM ap) ORDER BY created_at, id` },
  { name: "human_tasks", select: `SELECT * FROM human_tasks WHERE id IN (SELECT id FROM ta) ORDER BY created_at, id` },
  { name: "review_exposure", select: `SELECT * FROM review_exposure WHERE task_id IN (SELECT id FROM ta) ORDER BY started_at, id` },
  { name: "action_proposals", select: `SELECT * FROM action_proposals WHERE id IN (SELECT id FROM pr) ORDER BY created_at, id` },
  { name: "handoffs", select: `SELECT * FROM handoffs WHERE id IN (SELECT id FROM ho) ORDER BY created_at, id` },
  { name: "messages", select: `SELECT * FROM messages WHERE id IN (SELECT id FROM ms) ORDER BY created_at, id` },
  { name: "webhook_deliveries", select: `SELECT * FROM webhook_deliveries WHERE id IN (SELECT id FROM dl) ORDER BY created_at, id` },
  { name: "webhook_attempts", select: `SELECT * FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM dl) ORDER BY delivery_id, attempt` },
  { name: "tdb_submissions", select: `SELECT * FROM tdb_submissions WHERE decision_id IN (SELECT id FROM de) ORDER BY decision_id` },
  { name: "decision_reversals", select: `SELECT * FROM decision_reversals WHERE installation_id = ?2 AND decision_id IN (SELECT id FROM de) ORDER BY id` },
  {
    name: "redress_messages",
    select: `SELECT * FROM redress_messages WHERE id IN (
      SELECT id FROM redress_messages WHERE installation_id = ?2 AND decision_id IN (SELECT id FROM de)
      UNION SELECT id FROM redress_messages WHERE installation_id = ?2 AND report_id IN (SELECT id FROM rp)) ORDER BY created_at, id`,
  },
  { name: "notifier_notices", select: `SELECT * FROM notifier_notices WHERE report_id IN (SELECT id FROM rp) ORDER BY report_id` },
  { name: "connector_reports", select: `SELECT * FROM connector_reports WHERE installation_id = ?2 AND report_id IN (SELECT id FROM rp) ORDER BY connector_id, remote_report_id` },
] as const;
type TableName = (typeof TABLES)[number]["name"];

/** The key column(s) of each table's rows, for the deletes (composite keys are matched on both). */
const KEYS: Record<TableName, readonly string[]> = {
  cases: ["id"],
  reports: ["id"],
  workflow_runs: ["id"],
  workflow_step_runs: ["id"],
  decisions: ["id"],
  appeals: ["id"],
  human_tasks: ["id"],
  review_exposure: ["id"],
  action_proposals: ["id"],
  handoffs: ["id"],
  messages: ["id"],
  webhook_deliveries: ["id"],
  webhook_attempts: ["id"],
  tdb_submissions: ["decision_id"],
  decision_reversals: ["id"],
  redress_messages: ["id"],
  notifier_notices: ["report_id"],
  connector_reports: ["connector_id", "remote_report_id"],
};

type Cell = string | number | null;
type Row = Record<string, Cell>;

export interface CaseArchiveBody {
  format: typeof CASE_ARCHIVE_FORMAT;
  schemaVersion: number;
  installationId: string;
  caseId: string;
  tables: Record<TableName, Row[]>;
}

export interface CaseArchiveObject extends CaseArchiveBody {
  digest: string;
}

const TERMINAL_RUN = `'succeeded', 'failed', 'terminated', 'superseded'`;

/** The installation's cutoff for case `c` at `now` (an SQL expression): its hot window back from now. */
const cutoffSql = (now: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${now}, '-' || COALESCE((SELECT hot_days FROM storage_settings WHERE installation_id = c.installation_id), ${DEFAULT_HOT_DAYS}) || ' days')`;

/**
 * The sweep's first look at case `c` (?NOW the sweep's moment): no report since the window began,
 * not held (brought back within the window, or found live lately), the reports' person keys
 * written, every run of its reports archived, and the day and hour of its last report rolled up.
 */
function candidateSql(now: string): string {
  const cutoff = cutoffSql(now);
  return `c.updated_at < ${cutoff} AND c.updated_at <= ${now}
    AND NOT EXISTS (SELECT 1 FROM case_archive_holds h WHERE h.case_id = c.id AND (h.rehydrated_at >= ${cutoff} OR h.not_before > ${now}))
    AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.case_id = c.id AND r.person_keys_version IS NULL)
    AND NOT EXISTS (SELECT 1 FROM reports r JOIN workflow_runs w ON w.report_id = r.id WHERE r.case_id = c.id AND w.archived_at IS NULL)
    AND EXISTS (SELECT 1 FROM transparency_rollup_days t WHERE t.installation_id = c.installation_id AND t.day >= substr(c.updated_at, 1, 10))
    AND EXISTS (SELECT 1 FROM metric_rollup_hours m WHERE m.installation_id = c.installation_id AND m.hour >= substr(c.updated_at, 1, 13) || ':00:00.000Z')`;
}

/**
 * Whether the case is *closed* and quiet (SCOPE_SQL's names; `c` the case; ?3 the start of the
 * sweep's UTC day; ?NOW its moment): every run of it ended and archived; nothing live (a task open
 * or claimed, an appeal open, a proposal undecided or undelivered, a delivery pending, a submission
 * to the Transparency Database not settled); no activity since the window began (a task, run,
 * appeal, proposal or delivery updated, a decision made); no QA review, golden item or run operation
 * pointing at its rows; the reviewers' exposure ended before the day the wellness caps count; and
 * the day and hour of its last activity rolled up (the transparency report and the metrics read
 * rollups for those, not rows). cases.state is not the test: a new report reopens a case, and
 * nothing else closes one.
 */
function closedSql(now: string): string {
  const cutoff = cutoffSql(now);
  return `${candidateSql(now)}
  AND NOT EXISTS (SELECT 1 FROM workflow_runs x WHERE x.id IN (SELECT id FROM ru) AND (x.archived_at IS NULL OR x.state NOT IN (${TERMINAL_RUN}) OR x.updated_at >= ${cutoff}))
  AND NOT EXISTS (SELECT 1 FROM appeals x WHERE x.id IN (SELECT id FROM ap) AND (x.state = 'open' OR x.updated_at >= ${cutoff}))
  AND NOT EXISTS (SELECT 1 FROM human_tasks x WHERE x.id IN (SELECT id FROM ta) AND (x.state IN ('open', 'claimed') OR x.updated_at >= ${cutoff} OR x.updated_at >= ?3))
  AND NOT EXISTS (SELECT 1 FROM review_exposure x WHERE x.task_id IN (SELECT id FROM ta) AND (x.started_at >= ?3 OR COALESCE(x.ended_at, x.lease_expires_at) >= ?3))
  AND NOT EXISTS (SELECT 1 FROM decisions x WHERE x.id IN (SELECT id FROM de) AND x.created_at >= ${cutoff})
  AND NOT EXISTS (SELECT 1 FROM action_proposals x WHERE x.id IN (SELECT id FROM pr) AND (x.state IN ('approval_required', 'approved', 'delivery_pending') OR x.updated_at >= ${cutoff}))
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries x WHERE x.id IN (SELECT id FROM dl) AND (x.state = 'pending' OR x.updated_at >= ${cutoff}))
  AND NOT EXISTS (SELECT 1 FROM tdb_submissions x WHERE x.decision_id IN (SELECT id FROM de) AND x.state = 'pending')
  AND NOT EXISTS (SELECT 1 FROM qa_reviews x WHERE x.original_task_id IN (SELECT id FROM ta) OR x.qa_task_id IN (SELECT id FROM ta))
  AND NOT EXISTS (SELECT 1 FROM golden_items x WHERE x.source_task_id IN (SELECT id FROM ta) OR x.task_id IN (SELECT id FROM ta))
  AND NOT EXISTS (SELECT 1 FROM run_operation_items x WHERE x.run_id IN (SELECT id FROM ru))
  AND NOT EXISTS (SELECT 1 FROM workflow_waits x WHERE x.run_id IN (SELECT id FROM ru))
  AND NOT EXISTS (SELECT 1 FROM workflow_events x WHERE x.run_id IN (SELECT id FROM ru))
  AND NOT EXISTS (SELECT 1 FROM workflow_run_repairs x WHERE x.run_id IN (SELECT id FROM ru))
  AND NOT EXISTS (SELECT 1 FROM workflow_step_outputs x WHERE x.step_run_id IN (SELECT id FROM st))
  AND EXISTS (SELECT 1 FROM transparency_rollup_days t WHERE t.installation_id = c.installation_id AND t.day >= substr((SELECT MAX(at) FROM last_activity), 1, 10))
  AND EXISTS (SELECT 1 FROM metric_rollup_hours m WHERE m.installation_id = c.installation_id AND m.hour >= substr((SELECT MAX(at) FROM last_activity), 1, 13) || ':00:00.000Z')`;
}

/**
 * The sweep's selection (?1 now, ?2 limit, ?3 one installation or NULL): candidate cases, oldest
 * activity first, not handed to the queue lately.
 */
export const CASE_CANDIDATES_SQL = `
  SELECT c.id, c.installation_id AS installationId FROM cases c
  WHERE ${candidateSql("?1")} AND (?3 IS NULL OR c.installation_id = ?3)
    AND NOT EXISTS (SELECT 1 FROM case_archive_holds q WHERE q.case_id = c.id AND q.queued_until > ?1)
  ORDER BY c.updated_at LIMIT ?2`;

const utcDayStart = (now: Date) => `${now.toISOString().slice(0, 10)}T00:00:00.000Z`;

async function digestOf(body: CaseArchiveBody): Promise<string> {
  return `sha256:${await sha256Hex(canonicalJson(body))}`;
}

/** The case's rows as one body (one batch: one snapshot), or null when the case is not in D1. */
export async function buildCaseArchive(db: D1Database, installationId: string, caseId: string): Promise<{ body: CaseArchiveBody; digest: string; text: string } | null> {
  const results = await db.batch<Row>(TABLES.map((t) => db.prepare(`${SCOPE_SQL} ${t.select}`).bind(caseId, installationId)));
  const tables = Object.fromEntries(TABLES.map((t, i) => [t.name, results[i]?.results ?? []])) as Record<TableName, Row[]>;
  if (tables.cases.length !== 1) return null;
  // Rows travel as JSON: a column holding bytes (a BLOB) would not survive the trip, so it stops here.
  for (const [name, rows] of Object.entries(tables)) {
    for (const row of rows) {
      for (const [column, cell] of Object.entries(row)) {
        if (cell !== null && typeof cell !== "string" && typeof cell !== "number") {
          throw new AppError("case_archive.unsupported_value", `${name}.${column} holds a value JSON cannot carry; the case stays in D1.`, { status: 500 });
        }
      }
      // Every row that names an installation names this one (found through ids, so checked again).
      if ("installation_id" in row && row.installation_id !== installationId) {
        throw new AppError("case_archive.foreign_row", `${name} holds a row of another installation under case ${caseId}; the case stays in D1.`, { status: 500 });
      }
    }
  }
  const body: CaseArchiveBody = { format: CASE_ARCHIVE_FORMAT, schemaVersion: CASE_ARCHIVE_SCHEMA_VERSION, installationId, caseId, tables };
  const digest = await digestOf(body);
  return { body, digest, text: canonicalJson({ ...body, digest }) };
}

/** Parses and checks a stored case archive: its digest recomputes and it names the case and installation its key does. */
export async function parseCaseArchive(text: string, installationId: string, caseId: string): Promise<CaseArchiveObject | null> {
  let object: CaseArchiveObject;
  try {
    object = JSON.parse(text) as CaseArchiveObject;
  } catch {
    return null;
  }
  if (typeof object !== "object" || object === null || object.format !== CASE_ARCHIVE_FORMAT || object.installationId !== installationId || object.caseId !== caseId) return null;
  const { digest, ...body } = object;
  return (await digestOf(body)) === digest ? object : null;
}

/** The stored, checked archive of a case; null when there is none. */
export async function readCaseArchive(env: Env, installationId: string, caseId: string): Promise<CaseArchiveObject | null> {
  if (!ID.test(caseId)) return null;
  const key = caseArchiveKey(installationId, caseId);
  const stored = await env.WORKFLOW_ARTIFACTS.get(key);
  if (!stored) return null;
  const object = await parseCaseArchive(await stored.text(), installationId, caseId);
  if (!object) throw new AppError("case_archive.corrupt", `The case archive object ${key} does not match its digest.`, { status: 500, details: { key } });
  return object;
}

/** The ref objects of a case's records: (kind, id) for every report, run, decision, appeal and task. */
function refsOf(body: CaseArchiveBody): Array<[CaseRefKind, string]> {
  const ids = (rows: Row[]) => rows.map((row) => String(row.id));
  return [
    ...ids(body.tables.reports).map((id) => ["report", id] as [CaseRefKind, string]),
    ...ids(body.tables.workflow_runs).map((id) => ["run", id] as [CaseRefKind, string]),
    ...ids(body.tables.decisions).map((id) => ["decision", id] as [CaseRefKind, string]),
    ...ids(body.tables.appeals).map((id) => ["appeal", id] as [CaseRefKind, string]),
    ...ids(body.tables.human_tasks).map((id) => ["task", id] as [CaseRefKind, string]),
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
  const subject = await subjectKey(installationId, String(caseRow.subject_kind), String(caseRow.subject_id));
  const people = new Set(
    [...body.tables.reports.flatMap((row) => [row.reporter_key, row.subject_owner_key]), ...body.tables.appeals.map((row) => row.appellant_key)].filter((key): key is string => typeof key === "string" && PERSON_KEY.test(key)),
  );
  const refs = [...refsOf(body).map(([kind, id]) => caseRefKey(installationId, kind, id)), subjectRefKey(installationId, subject), ...[...people].map((person) => personRefKey(installationId, person, caseId))];
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
    return db.prepare(`DELETE FROM ${table} WHERE (${keys.join(", ")}) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?3)) AND ${marked}`).bind(caseId, written.digest, pairs);
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

// ---- back to D1 -------------------------------------------------------------------------------

const COLUMN = /^[a-z_][a-z0-9_]*$/u;
/** Bytes of rows per INSERT statement when a case goes back (D1 takes at most 2 MB in one bound value). */
const REHYDRATE_CHUNK_BYTES = 1_000_000;
/** Tables whose rows carry a caller's Idempotency-Key, unique per installation. */
const KEYED = new Set<TableName>(["reports", "appeals"]);

/**
 * The statements that put a table's archived rows back as they were: one INSERT per chunk of rows
 * (at most REHYDRATE_CHUNK_BYTES of JSON; a larger row alone). A row whose Idempotency-Key another
 * record took while this one was archived comes back without it (the key answers for the newer
 * record now); anything else already there makes the whole batch fail, so nothing comes back halfway.
 */
function insertStatements(db: D1Database, table: TableName, rows: Row[]): D1PreparedStatement[] {
  if (rows.length === 0) return [];
  const columns = Object.keys(rows[0]!);
  if (!columns.every((c) => COLUMN.test(c))) throw new AppError("case_archive.corrupt", `The case archive holds a column name that is not one: ${table}.`, { status: 500 });
  const installation = columns.indexOf("installation_id");
  const values = columns.map((c, j) =>
    KEYED.has(table) && c === "idempotency_key" && installation >= 0
      ? `CASE WHEN EXISTS (SELECT 1 FROM ${table} x WHERE x.installation_id = value ->> ${installation} AND x.idempotency_key = value ->> ${j}) THEN NULL ELSE value ->> ${j} END`
      : `value ->> ${j}`,
  );
  const sql = `INSERT INTO ${table} (${columns.join(", ")}) SELECT ${values.join(", ")} FROM json_each(?1)`;
  const out: D1PreparedStatement[] = [];
  let chunk: string[] = [];
  let bytes = 0;
  const flush = () => {
    if (chunk.length > 0) out.push(db.prepare(sql).bind(`[${chunk.join(",")}]`));
    chunk = [];
    bytes = 0;
  };
  for (const row of rows) {
    const text = JSON.stringify(columns.map((c) => row[c] ?? null));
    if (bytes + text.length > REHYDRATE_CHUNK_BYTES) flush();
    chunk.push(text);
    bytes += text.length;
  }
  flush();
  return out;
}

/**
 * Puts an archived case's rows back in D1 exactly as they were archived (one batch), drops its
 * subject key and counts it out of the totals. The object stays: the sweep archives the case again
 * once the window has passed (the same rows give the same bytes, so R2 is not rewritten). Answers
 * whether the case is in D1 afterwards.
 */
export async function rehydrateCase(env: Env, installationId: string, caseId: string, now: Date = new Date()): Promise<boolean> {
  const object = await readCaseArchive(env, installationId, caseId);
  if (!object) return false;
  const db = env.DB;
  const caseRow = object.tables.cases[0];
  if (!caseRow) return false;
  const subject = await subjectKey(installationId, String(caseRow.subject_kind), String(caseRow.subject_id));
  const bytes = byteLength(canonicalJson(object));
  const statements = TABLES.flatMap((t) => insertStatements(db, t.name, object.tables[t.name]));
  try {
    await db.batch([
      db.prepare(`UPDATE case_archive_totals SET cases = MAX(0, cases - 1), bytes = MAX(0, bytes - ?2) WHERE installation_id = ?1`).bind(installationId, bytes),
      ...statements,
      db.prepare(`DELETE FROM archived_subjects WHERE key = ?1`).bind(subject),
      db.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, rehydrated_at) VALUES (?1, ?2, ?3) ON CONFLICT (case_id) DO UPDATE SET rehydrated_at = excluded.rehydrated_at`).bind(caseId, installationId, now.toISOString()),
    ]);
  } catch (error) {
    // Another reader brought it back first (its rows are there now): nothing to do.
    if (await db.prepare(`SELECT 1 AS x FROM cases WHERE id = ?1 AND installation_id = ?2`).bind(caseId, installationId).first()) return true;
    console.error(JSON.stringify({ event: "case.rehydrate_failed", caseId, installationId, code: error instanceof AppError ? error.code : "d1.error" }));
    throw new AppError("case_archive.rehydrate_failed", `The archived case ${caseId} could not be brought back to D1; nothing of it was written, and it stays archived.`, { status: 500, retryable: true });
  }
  // D1 holds the case again and is its only truth: the object goes, so no stale copy outlives an
  // erasure of the hot rows. Archived again, the case gets a new object (its refs stay valid).
  await env.WORKFLOW_ARTIFACTS.delete(caseArchiveKey(installationId, caseId));
  return true;
}

/** The case a ref object names, or null (no such archived record, or an id that cannot be one). */
async function caseOfRef(env: Env, installationId: string, kind: CaseRefKind, id: string): Promise<string | null> {
  if (!ID.test(id)) return null;
  const ref = await env.WORKFLOW_ARTIFACTS.get(caseRefKey(installationId, kind, id));
  if (!ref) return null;
  const caseId = await ref.text();
  return ID.test(caseId) ? caseId : null;
}

/** Brings back the archived case that holds this record, if one does. Answers whether it did. */
export async function rehydrateRef(env: Env, installationId: string, kind: CaseRefKind | "case", id: string): Promise<boolean> {
  const caseId = kind === "case" ? (ID.test(id) ? id : null) : await caseOfRef(env, installationId, kind, id);
  return caseId ? rehydrateCase(env, installationId, caseId) : false;
}

/** Brings back the archived case of a subject, if its key says there is one. Answers whether it did. */
export async function rehydrateSubject(env: Env, installationId: string, kind: string, id: string): Promise<boolean> {
  const key = await subjectKey(installationId, kind, id);
  const held = await env.DB.prepare(`SELECT 1 AS x FROM archived_subjects WHERE key = ?1`).bind(key).first();
  if (!held) return false;
  const ref = await env.WORKFLOW_ARTIFACTS.get(subjectRefKey(installationId, key));
  const caseId = ref ? await ref.text() : null;
  return caseId && ID.test(caseId) ? rehydrateCase(env, installationId, caseId) : false;
}

/** Most archived cases a personal-data request brings back at once (the response says to ask again). */
export const PERSON_REHYDRATE_LIMIT = 50;

/**
 * Brings back the archived cases that hold rows of a person (by their person keys), so a request
 * for their data (export, erasure) finds them in D1 as it finds hot ones. Answers how many came
 * back and whether more are left (at most PERSON_REHYDRATE_LIMIT a call).
 */
export async function rehydratePerson(env: Env, installationId: string, personKeys: ReadonlyArray<string | null>): Promise<{ cases: number; more: boolean }> {
  let cases = 0;
  for (const person of personKeys) {
    if (!person || !PERSON_KEY.test(person)) continue;
    const prefix = `${PREFIX}/${installationId}/refs/person/${person}/`;
    const page = await env.WORKFLOW_ARTIFACTS.list({ prefix, limit: PERSON_REHYDRATE_LIMIT - cases });
    for (const listed of page.objects) {
      const caseId = listed.key.slice(prefix.length);
      if (ID.test(caseId)) {
        const hot = await env.DB.prepare(`SELECT 1 AS x FROM cases WHERE id = ?1 AND installation_id = ?2`).bind(caseId, installationId).first();
        if (hot) {
          // Hot, maybe with an archive pass in flight that wrote this ref: held as a brought-back case,
          // so that pass cannot commit and the request finds the person's rows in D1.
          await env.DB.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, rehydrated_at) VALUES (?1, ?2, ?3) ON CONFLICT (case_id) DO UPDATE SET rehydrated_at = excluded.rehydrated_at`)
            .bind(caseId, installationId, new Date().toISOString())
            .run();
        } else await rehydrateCase(env, installationId, caseId);
      }
      // In D1 now: the ref is written again when the case is archived again with the person's rows.
      await env.WORKFLOW_ARTIFACTS.delete(listed.key);
      cases += 1;
    }
    if (page.truncated || cases >= PERSON_REHYDRATE_LIMIT) return { cases, more: true };
  }
  return { cases, more: false };
}

/**
 * A read by id that serves archived records as hot ones: `read` from D1; on a miss, the case that
 * holds the record is brought back and `read` asked again.
 */
export async function hotOrArchived<T>(env: Env, installationId: string, kind: CaseRefKind | "case", id: string, read: () => Promise<T | null>): Promise<T | null> {
  const hot = await read();
  if (hot !== null && hot !== undefined) return hot;
  // Read again whether or not this call brought it back: another reader may have (and removed the object).
  await rehydrateRef(env, installationId, kind, id);
  return read();
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
