// What a case archive holds and how it is found: the object's and refs' keys, the rows that hang
// off a case (SCOPE_SQL, TABLES), when a case may leave D1 (candidateSql, closedSql), and the body
// built from D1 and read back from R2. The archive itself is case-archive.ts; bringing a case back
// to D1 is case-rehydrate.ts.
import { canonicalJson } from "../../audit";
import { AppError } from "../../errors";
import { sha256Hex } from "../../lib/crypto";
import { subjectArchiveKey } from "../../lib/person-keys";
import { DEFAULT_HOT_DAYS } from "../../lib/storage-tiers";
import { HELD_SQL } from "../retention/preservation-holds";
import { reportTermRowsSql } from "../search/search-terms";
import { stepRowColumns } from "../../lib/step-row-columns";
import { attemptRowsSql, deliveryRowColumns } from "../../lib/delivery-attempts";

export const CASE_ARCHIVE_FORMAT = "safest-tools.case-archive";
export const CASE_ARCHIVE_SCHEMA_VERSION = 1;
export const PREFIX = `archive/v${CASE_ARCHIVE_SCHEMA_VERSION}`;

export const ID = /^[A-Za-z0-9._:-]{1,200}$/u;
export const PERSON_KEY = /^pk1_[0-9a-f]{64}$/u;

/** `archive/v1/<installationId>/cases/<caseId>.json`: derived from ids, so a lookup needs no D1 row. */
export function caseArchiveKey(installationId: string, caseId: string): string {
  return `${PREFIX}/${installationId}/cases/${caseId}.json`;
}

/** The kinds of record a ref object leads from to its case. */
export type CaseRefKind = "report" | "run" | "decision" | "appeal" | "task" | "proposal" | "delivery";

/** `archive/v1/<installationId>/refs/<kind>/<id>`: the ref object naming the case that holds the record. */
export function caseRefKey(installationId: string, kind: CaseRefKind, id: string): string {
  return `${PREFIX}/${installationId}/refs/${kind}/${id}`;
}

/** The 16-byte key of a subject in archived_subjects (a keyed hash: lib/person-keys.ts). */
export function subjectKey(installationId: string, kind: string, id: string): Uint8Array {
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
 * decisions by report and by step; appeals by report and by decision; tasks by report (the unary +
 * keeps the planner on human_tasks_report), appeal and run (a workflow task's step row may have left
 * with its run's archive: its id names the step; the run's workflow tasks are its steps' tasks);
 * messages by report and by step;
 * proposals by run (a proposal's step row may have left with its run's archive: its id names the
 * step); handoffs by step; deliveries by
 * (source_type, source_id).
 */
export const SCOPE_SQL = `
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
    SELECT id FROM human_tasks WHERE +installation_id = ?2 AND report_id IN (SELECT id FROM rp)
    UNION SELECT id FROM human_tasks WHERE installation_id = ?2 AND appeal_id IN (SELECT id FROM ap)
    UNION SELECT id FROM human_tasks WHERE run_id IN (SELECT id FROM ru) AND origin = 'workflow'),
  ms AS (
    SELECT id FROM messages WHERE installation_id = ?2 AND report_id IN (SELECT id FROM rp)
    UNION SELECT id FROM messages WHERE step_run_id IN (SELECT id FROM st)),
  pr AS (SELECT id FROM action_proposals WHERE run_id IN (SELECT id FROM ru)),
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
export const TABLES = [
  { name: "cases", select: `SELECT * FROM cases WHERE id = ?1 AND installation_id = ?2` },
  { name: "reports", select: `SELECT * FROM reports WHERE id IN (SELECT id FROM rp) ORDER BY created_at, id` },
  // The reports' keyed search terms (cases/search), reached by key from each report's list of them
  // (in the list's form: search-terms.ts): an archived report leaves search, and comes back to it with its case.
  {
    name: "search_terms",
    select: `${reportTermRowsSql("?2", "r.id IN (SELECT id FROM rp)")} ORDER BY record_id, term, created_at`,
  },
  // Parents before their child runs.
  { name: "workflow_runs", select: `SELECT * FROM workflow_runs WHERE id IN (SELECT id FROM ru) ORDER BY parent_run_id IS NOT NULL, created_at, id` },
  // A step row's columns as a run archive carries them: its output (cleared when its run was archived) is not one.
  { name: "workflow_step_runs", select: `SELECT ${stepRowColumns()} FROM workflow_step_runs WHERE id IN (SELECT id FROM st) ORDER BY started_at, rowid` },
  { name: "decisions", select: `SELECT * FROM decisions WHERE id IN (SELECT id FROM de) ORDER BY created_at, id` },
  { name: "appeals", select: `SELECT * FROM appeals WHERE id IN (SELECT id FROM ap) ORDER BY created_at, id` },
  { name: "human_tasks", select: `SELECT * FROM human_tasks WHERE id IN (SELECT id FROM ta) ORDER BY created_at, id` },
  { name: "review_exposure", select: `SELECT * FROM review_exposure WHERE task_id IN (SELECT id FROM ta) ORDER BY started_at, id` },
  { name: "action_proposals", select: `SELECT * FROM action_proposals WHERE id IN (SELECT id FROM pr) ORDER BY created_at, id` },
  { name: "handoffs", select: `SELECT * FROM handoffs WHERE id IN (SELECT id FROM ho) ORDER BY created_at, id` },
  { name: "messages", select: `SELECT * FROM messages WHERE id IN (SELECT id FROM ms) ORDER BY created_at, id` },
  // A delivery row's columns but its first attempt's, which travels as a webhook_attempts row
  // (lib/delivery-attempts.ts): the object's form does not change with where D1 keeps an attempt.
  { name: "webhook_deliveries", select: `SELECT ${deliveryRowColumns()} FROM webhook_deliveries WHERE id IN (SELECT id FROM dl) ORDER BY created_at, id` },
  { name: "webhook_attempts", select: attemptRowsSql("d.id IN (SELECT id FROM dl)") },
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
export type TableName = (typeof TABLES)[number]["name"];

/** The key column(s) of each table's rows, for the deletes (composite keys are matched on both). */
export const KEYS: Record<TableName, readonly string[]> = {
  cases: ["id"],
  reports: ["id"],
  search_terms: ["installation_id", "term", "created_at", "record_id"],
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

export type Cell = string | number | null;
export type Row = Record<string, Cell>;

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

export const TERMINAL_RUN = `'succeeded', 'failed', 'terminated', 'superseded'`;

/** The installation's cutoff for case `c` at `now` (an SQL expression): its hot window back from now. */
export const cutoffSql = (now: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${now}, '-' || COALESCE((SELECT hot_days FROM storage_settings WHERE installation_id = c.installation_id), ${DEFAULT_HOT_DAYS}) || ' days')`;

/**
 * The sweep's first look at case `c` (?NOW the sweep's moment): no report since the window began,
 * not held (brought back within the window, or found live lately; nor under a preservation hold,
 * whose data stays hot, so its period's key stays needed), the reports' person keys
 * written, every run of its reports archived, and the day and hour of its last report rolled up.
 */
export function candidateSql(now: string): string {
  const cutoff = cutoffSql(now);
  return `c.updated_at < ${cutoff} AND c.updated_at <= ${now}
    AND NOT EXISTS (SELECT 1 FROM case_archive_holds h WHERE h.case_id = c.id AND (h.rehydrated_at >= ${cutoff} OR h.not_before > ${now}))
    AND NOT ${HELD_SQL}
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
export function closedSql(now: string): string {
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
  AND NOT EXISTS (SELECT 1 FROM workflow_step_runs x WHERE x.id IN (SELECT id FROM st) AND x.output_json IS NOT NULL)
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

export const utcDayStart = (now: Date) => `${now.toISOString().slice(0, 10)}T00:00:00.000Z`;

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

/** A column name as the archive writes it back (rows carry their own column names). */
export const COLUMN = /^[a-z_][a-z0-9_]*$/u;
