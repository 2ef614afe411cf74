// The run's history in two tiers. Hot: a run's child rows (steps, step outputs, waits, events,
// repairs) in D1. Archive: once an ended run has been ended for an hour (a failed one, the
// installation's hot window; at once with a 0-day window: lib/storage-tiers.ts) and nothing live needs it any more, those rows move into ONE immutable R2 object
// in WORKFLOW_ARTIFACTS, under a key derived from ids only, and leave D1. The run row stays in
// D1 (other tables point at it; lists and filters read it) with `archived_at` and the object's
// digest. Every read of a run's child rows asks this module (`runChildren`), which knows both.
//
// Archiving one run is two steps, each safe to repeat and safe to be killed after:
//   1. writeRunArchive: build the canonical body from the D1 rows, put it (same key, same bytes
//      for the same rows), read it back and check it byte for byte;
//   2. commitRunArchive: ONE D1 batch marks the run archived (guarded: still ended, still not
//      archived, nothing live, and the very rows that were written still there) and deletes the
//      child rows, each delete holding only on this batch's mark.
// A pass killed between 1 and 2 leaves the object and the rows: the next pass rebuilds the same
// bytes, finds them in place, and commits. Nothing is deleted unless its object was read back.
import { canonicalJson } from "../audit";
import { AppError } from "../errors";
import { byteLength, sha256Hex } from "../lib/crypto";
import { DEFAULT_HOT_DAYS, runHistoryMinutesSql } from "../lib/storage-tiers";
import { outputRowsSql, STEP_OUTPUT as OUTPUT, stepRowColumns } from "./step-output";

export { DEFAULT_HOT_DAYS };

export const RUN_ARCHIVE_FORMAT = "safest-tools.run-archive";
export const RUN_ARCHIVE_SCHEMA_VERSION = 1;

/** `archive/v1/<installationId>/runs/<runId>.json`: derived from ids, so a lookup needs no D1 row. */
export function runArchiveKey(installationId: string, runId: string): string {
  return `archive/v${RUN_ARCHIVE_SCHEMA_VERSION}/${installationId}/runs/${runId}.json`;
}

/** The keys restore accepts for an installation's archived runs (installations/backup.ts). */
export function isRunArchiveKeyOf(installationId: string, key: string): boolean {
  const prefix = `archive/v${RUN_ARCHIVE_SCHEMA_VERSION}/${installationId}/runs/`;
  return key.startsWith(prefix) && /^[A-Za-z0-9._:-]{1,200}\.json$/u.test(key.slice(prefix.length));
}

const TERMINAL_SQL = `'succeeded', 'failed', 'terminated', 'superseded'`;

/**
 * What a run may still need while it is ended (`r` is the run): a wait still waiting, a task open
 * or claimed (a handoff's task lives on in its queue), a proposal not yet decided or delivered, a
 * webhook delivery still pending for its action, message or handoff, a child run not ended.
 * Each from the run's own rows by index (CROSS JOIN keeps the run's side the outer loop, so a
 * delivery is looked up by its (source_type, source_id) key, never scanned by type).
 */
const NOTHING_LIVE_SQL = `
  NOT EXISTS (SELECT 1 FROM workflow_waits w WHERE w.run_id = r.id AND w.state = 'waiting')
  AND NOT EXISTS (SELECT 1 FROM human_tasks t WHERE t.run_id = r.id AND t.state IN ('open', 'claimed'))
  AND NOT EXISTS (SELECT 1 FROM action_proposals p WHERE p.run_id = r.id AND p.state IN ('approval_required', 'approved', 'delivery_pending'))
  AND NOT EXISTS (SELECT 1 FROM action_proposals p CROSS JOIN webhook_deliveries d ON d.source_type = 'action' AND d.source_id = p.id WHERE p.run_id = r.id AND d.state = 'pending')
  AND NOT EXISTS (SELECT 1 FROM workflow_step_runs s CROSS JOIN messages m ON m.step_run_id = s.id CROSS JOIN webhook_deliveries d ON d.source_type = 'message' AND d.source_id = m.id
    WHERE s.run_id = r.id AND d.state = 'pending')
  AND NOT EXISTS (SELECT 1 FROM workflow_step_runs s CROSS JOIN handoffs h ON h.step_run_id = s.id CROSS JOIN webhook_deliveries d ON d.source_type = 'handoff' AND d.source_id = h.id
    WHERE s.run_id = r.id AND d.state = 'pending')
  AND NOT EXISTS (SELECT 1 FROM workflow_runs c WHERE c.parent_run_id = r.id AND c.state NOT IN (${TERMINAL_SQL}))`;

/**
 * The archive sweep's selection (?1 now, ?2 limit, ?3 one installation or NULL): ended runs not
 * archived, finished more than RUN_HISTORY_HOT_MINUTES ago (a failed run: the installation's window;
 * at once with a 0-day window), oldest first. Shadow runs stay hot: the
 * shadow report (automation/shadow-sources.ts) reads their decision outputs in SQL.
 * `repair_required` is not ended, so a run waiting for its repair is never archived.
 */
export const ARCHIVABLE_RUNS_SQL = `
  SELECT r.id, r.installation_id AS installationId FROM workflow_runs r
    LEFT JOIN storage_settings st ON st.installation_id = r.installation_id
  WHERE r.archived_at IS NULL AND r.finished_at IS NOT NULL AND r.finished_at <= ?1
    AND r.finished_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?1, '-' || ${runHistoryMinutesSql("st.hot_days", "r.state")} || ' minutes')
    AND r.state IN (${TERMINAL_SQL}) AND r.authority_mode <> 'shadow'
    AND (?3 IS NULL OR r.installation_id = ?3)
    AND ${NOTHING_LIVE_SQL}
    AND NOT EXISTS (SELECT 1 FROM run_archive_queue q WHERE q.run_id = r.id AND q.queued_until > ?1)
  ORDER BY r.finished_at LIMIT ?2`;

export type Cell = string | number | null;
type Row = Record<string, Cell>;

/**
 * The child tables an archive holds, each read verbatim (every column as stored; sealed columns stay
 * sealed), in a fixed order. A step's output is an outputs row whichever form D1 keeps it in
 * (step-output.ts), and a step row carries the columns it always had: the object a run becomes
 * does not depend on the form.
 */
const ARCHIVED_TABLES = {
  // The order the run detail lists steps in (a fused group shares a millisecond: insertion order).
  workflow_step_runs: `SELECT ${stepRowColumns("s")} FROM workflow_step_runs s WHERE s.run_id = ?1 ORDER BY s.started_at, s.rowid`,
  workflow_step_outputs: outputRowsSql("s.run_id = ?1"),
  workflow_waits: `SELECT * FROM workflow_waits WHERE run_id = ?1 ORDER BY created_at, id`,
  workflow_events: `SELECT * FROM workflow_events WHERE run_id = ?1 ORDER BY created_at, id`,
  workflow_run_repairs: `SELECT * FROM workflow_run_repairs WHERE run_id = ?1 ORDER BY seq`,
} as const;
type ArchivedTable = keyof typeof ARCHIVED_TABLES;

export interface RunArchiveBody {
  format: typeof RUN_ARCHIVE_FORMAT;
  schemaVersion: number;
  installationId: string;
  runId: string;
  tables: Record<ArchivedTable, Row[]>;
}

/** The object as stored: the body and `digest` = `sha256:` of the body's canonical JSON. */
export interface RunArchiveObject extends RunArchiveBody {
  digest: string;
}

async function digestOf(body: RunArchiveBody): Promise<string> {
  return `sha256:${await sha256Hex(canonicalJson(body))}`;
}

/**
 * What the run row keeps of its object's digest (`archive_digest`): its first 128 bits in hex (a
 * substitute object would need a second preimage of them). Rows of an earlier release keep the
 * whole `sha256:` form; `digestMatches` accepts either.
 */
export function storedDigest(digest: string): string {
  return digest.slice(7, 39);
}

/** Whether an object's full digest is the one a run row keeps (`expected`, in either form). */
export function digestMatches(expected: string, digest: string): boolean {
  if (typeof digest !== "string") return false;
  return expected.startsWith("sha256:") ? digest === expected : digest.startsWith("sha256:") && storedDigest(digest) === expected;
}

/** The archive body of a run from its D1 rows (one batch, so one snapshot). */
export async function buildRunArchive(db: D1Database, installationId: string, runId: string): Promise<{ text: string; digest: string; body: RunArchiveBody }> {
  const names = Object.keys(ARCHIVED_TABLES) as ArchivedTable[];
  const results = await db.batch<Row>(names.map((name) => db.prepare(ARCHIVED_TABLES[name]).bind(runId)));
  const tables = Object.fromEntries(names.map((name, i) => [name, results[i]?.results ?? []])) as Record<ArchivedTable, Row[]>;
  const body: RunArchiveBody = { format: RUN_ARCHIVE_FORMAT, schemaVersion: RUN_ARCHIVE_SCHEMA_VERSION, installationId, runId, tables };
  const digest = await digestOf(body);
  return { body, digest, text: canonicalJson({ ...body, digest }) };
}

/**
 * Whether `text` is the archive object of this installation's run with this digest: it parses, its
 * digest recomputes, and it names the run and installation its key does (a restore checks every
 * archive object a backup carries against the run row that points at it).
 */
export async function runArchiveTextHolds(text: string, installationId: string, runId: string, expected: string): Promise<boolean> {
  let object: RunArchiveObject;
  try {
    object = JSON.parse(text) as RunArchiveObject;
  } catch {
    return false;
  }
  if (typeof object !== "object" || object === null || object.format !== RUN_ARCHIVE_FORMAT || object.installationId !== installationId || object.runId !== runId) return false;
  const { digest, ...body } = object;
  return digestMatches(expected, digest) && (await digestOf(body)) === digest;
}

/** Reads and checks a stored archive: parses, recomputes the digest and compares it with `expected`. */
export async function readArchiveObject(bucket: R2Bucket, key: string, expected: string | null): Promise<{ object: RunArchiveObject; text: string } | null> {
  const stored = await bucket.get(key);
  if (!stored) return null;
  const text = await stored.text();
  let object: RunArchiveObject;
  try {
    object = JSON.parse(text) as RunArchiveObject;
  } catch {
    throw new AppError("run_archive.corrupt", `The archive object ${key} is not JSON.`, { status: 500 });
  }
  const { digest, ...body } = object;
  const actual = await digestOf(body);
  if (actual !== digest || (expected !== null && !digestMatches(expected, digest))) {
    throw new AppError("run_archive.corrupt", `The archive object ${key} does not match its digest.`, { status: 500, details: { key } });
  }
  return { object, text };
}

export interface WrittenArchive {
  key: string;
  /** The object's digest (`sha256:` and 256 bits). */
  digest: string;
  bytes: number;
  /** What the object holds, for the commit's guard: the rows it deletes are exactly these. */
  counts: Record<ArchivedTable, number>;
  sealedOutputs: number;
}

/**
 * Step 1: writes the run's archive object (or finds it already written, same bytes) and reads it
 * back. The run must be ended and not archived; it is not checked here (the commit checks it in its
 * batch), so a run that came alive again meanwhile leaves an object nothing reads, overwritten on
 * its next archive.
 */
export async function writeRunArchive(env: Env, installationId: string, runId: string): Promise<WrittenArchive> {
  const { text, digest, body } = await buildRunArchive(env.DB, installationId, runId);
  const key = runArchiveKey(installationId, runId);
  const head = await env.WORKFLOW_ARTIFACTS.head(key);
  // Same key, same bytes: an object left by a pass that was killed before its commit is kept.
  // Another digest means the rows changed since (e.g. retention erased a sealed output): the rows
  // are the truth while the run is not archived, so the object is written again.
  const put = () => env.WORKFLOW_ARTIFACTS.put(key, text, { httpMetadata: { contentType: "application/json" }, customMetadata: { digest, schemaVersion: String(RUN_ARCHIVE_SCHEMA_VERSION) } });
  if (head?.customMetadata?.digest !== digest) await put();
  // Read back byte for byte; an object whose metadata said the same digest but whose bytes do not
  // match (or do not parse) is written once more and read again.
  const readBack = async () => (await readArchiveObject(env.WORKFLOW_ARTIFACTS, key, digest).catch(() => null))?.text === text;
  if (!(await readBack())) {
    await put();
    if (!(await readBack())) throw new AppError("run_archive.write_unverified", `The archive object ${key} did not read back as written; nothing was deleted.`, { status: 503, retryable: true });
  }
  const counts = Object.fromEntries(Object.entries(body.tables).map(([name, rows]) => [name, rows.length])) as Record<ArchivedTable, number>;
  return { key, digest, bytes: byteLength(text), counts, sealedOutputs: body.tables.workflow_step_outputs.filter((row) => row.sealed_json !== null).length };
}

/**
 * Step 2: ONE batch marks the run archived and deletes its child rows. The mark holds only if the
 * run is still ended, not archived, nothing live needs it, and its rows are the ones written (same
 * counts per table, same number of sealed outputs); each delete holds only on this batch's mark.
 * Step rows another table still points at (tasks, proposals, decisions, messages, handoffs, by
 * foreign key) stay in D1 until those tables move too, as anchors: id, node and state (their
 * digest, times and error go; reads take the archive's copy).
 * A proposal written since migration 0067, and a task written since migration 0068, name their
 * step by their id alone, so their step row goes; one of the earlier form (step_run_id set) keeps
 * its anchor.
 * Answers whether the run was archived by this call.
 */
export async function commitRunArchive(env: Env, installationId: string, runId: string, written: WrittenArchive, now: Date = new Date()): Promise<boolean> {
  const db = env.DB;
  const at = now.toISOString();
  const marked = `EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND archived_at = ?2 AND archive_digest = ?3)`;
  const c = written.counts;
  const stored = storedDigest(written.digest);
  const [mark] = await db.batch([
    db
      .prepare(`
      UPDATE workflow_runs AS r SET archived_at = ?3, archive_digest = ?4, archive_bytes = ?5
      WHERE r.id = ?1 AND r.installation_id = ?2 AND r.archived_at IS NULL AND r.state IN (${TERMINAL_SQL})
        AND ${NOTHING_LIVE_SQL}
        AND (SELECT COUNT(*) FROM workflow_step_runs WHERE run_id = ?1) = ?6
        AND (SELECT COUNT(*) FROM workflow_step_runs s ${OUTPUT.join} WHERE s.run_id = ?1 AND ${OUTPUT.exists}) = ?7
        AND (SELECT COUNT(*) FROM workflow_step_runs s ${OUTPUT.join} WHERE s.run_id = ?1 AND ${OUTPUT.sealed} IS NOT NULL) = ?8
        AND (SELECT COUNT(*) FROM workflow_waits WHERE run_id = ?1) = ?9
        AND (SELECT COUNT(*) FROM workflow_events WHERE run_id = ?1) = ?10
        AND (SELECT COUNT(*) FROM workflow_run_repairs WHERE run_id = ?1) = ?11`)
      .bind(runId, installationId, at, stored, written.bytes, c.workflow_step_runs, c.workflow_step_outputs, written.sealedOutputs, c.workflow_waits, c.workflow_events, c.workflow_run_repairs),
    // Children before parents (foreign keys): events → waits → outputs → steps.
    db.prepare(`DELETE FROM workflow_events WHERE run_id = ?1 AND ${marked}`).bind(runId, at, stored),
    db.prepare(`DELETE FROM workflow_waits WHERE run_id = ?1 AND ${marked}`).bind(runId, at, stored),
    db.prepare(`DELETE FROM workflow_step_outputs WHERE step_run_id IN (SELECT id FROM workflow_step_runs WHERE run_id = ?1) AND ${marked}`).bind(runId, at, stored),
    db.prepare(`DELETE FROM workflow_run_repairs WHERE run_id = ?1 AND ${marked}`).bind(runId, at, stored),
    db.prepare(`DELETE FROM run_archive_queue WHERE run_id = ?1 AND ${marked}`).bind(runId, at, stored),
    db
      .prepare(`
      DELETE FROM workflow_step_runs WHERE run_id = ?1 AND ${marked}
        AND NOT EXISTS (SELECT 1 FROM human_tasks x WHERE x.step_run_id = workflow_step_runs.id)
        AND NOT EXISTS (SELECT 1 FROM action_proposals x WHERE x.step_run_id = workflow_step_runs.id)
        AND NOT EXISTS (SELECT 1 FROM decisions x WHERE x.step_run_id = workflow_step_runs.id)
        AND NOT EXISTS (SELECT 1 FROM messages x WHERE x.step_run_id = workflow_step_runs.id)
        AND NOT EXISTS (SELECT 1 FROM handoffs x WHERE x.step_run_id = workflow_step_runs.id)`)
      .bind(runId, at, stored),
    // The step rows left are anchors of those foreign keys: what they recorded is in the archive
    // (reads take its copy), so they keep only what names the step (node, state) and drop the rest
    // (updated_at, NOT NULL, becomes ''; an output kept in the row goes too).
    db
      .prepare(`
      UPDATE workflow_step_runs SET output_digest = NULL, started_at = NULL, waiting_at = NULL, finished_at = NULL, error_code = NULL, error_message = NULL, error_details_json = NULL, updated_at = '',
        output_json = NULL, output_sealed = NULL, output_size = NULL
      WHERE run_id = ?1 AND ${marked}`)
      .bind(runId, at, stored),
  ]);
  return (mark?.meta.changes ?? 0) === 1;
}

/** Archives one run (both steps). Answers whether it was archived now. */
export async function archiveRun(env: Env, installationId: string, runId: string, now: Date = new Date()): Promise<boolean> {
  const written = await writeRunArchive(env, installationId, runId);
  return commitRunArchive(env, installationId, runId, written, now);
}

/** Runs archived per sweep run; the next minute's run goes on with the rest. */
export const ARCHIVE_BATCH = 50;

/**
 * The archive sweep (on the schedule; bounded, idempotent): ended runs past their installation's
 * hot window, oldest first, at most ARCHIVE_BATCH a run. A run that fails (R2 unavailable, a
 * guard that no longer holds) is counted and left for the next run. `more` is 1 while the
 * selection was full, so the backlog shows in the sweep's counts.
 */
export async function sweepRunArchive(env: Env, now: Date = new Date(), options: { limit?: number; installationId?: string } = {}): Promise<{ archived: number; skipped: number; failed: number; more: number }> {
  const limit = options.limit ?? ARCHIVE_BATCH;
  const { results } = await env.DB.prepare(ARCHIVABLE_RUNS_SQL)
    .bind(now.toISOString(), limit, options.installationId ?? null)
    .all<{ id: string; installationId: string }>();
  const summary = { archived: 0, skipped: 0, failed: 0, more: results.length === limit ? 1 : 0 };
  for (const run of results) {
    try {
      if (await archiveRun(env, run.installationId, run.id)) summary.archived += 1;
      else summary.skipped += 1;
    } catch (error) {
      summary.failed += 1;
      console.error(JSON.stringify({ event: "run.archive_failed", runId: run.id, installationId: run.installationId, code: error instanceof AppError ? error.code : "run_archive.failed" }));
    }
  }
  return summary;
}

/** Runs the schedule hands to the queue per run (one statement selects them, one marks them queued). */
export const RUN_QUEUE_BATCH = 500;
/** How long a run handed to the queue is not handed again. */
const RUN_QUEUED_HOLD_MS = 15 * 60_000;

/** What the schedule sends to RUN_OPERATIONS per run to archive. */
export interface RunArchiveMessage {
  archiveRunId: string;
  installationId: string;
}

/**
 * The scheduled run archive: selects up to RUN_QUEUE_BATCH archivable runs and hands them to the
 * RUN_OPERATIONS queue, one message each, marked queued for a while. Archiving a run costs some 15
 * D1 statements and a scheduled invocation has 1,000 for every sweep together; each consumer
 * invocation has its own, so the archive keeps up with its backlog.
 */
export async function queueRunArchive(env: Env, now: Date = new Date(), options: { limit?: number; installationId?: string } = {}): Promise<{ queued: number; more: number }> {
  const limit = options.limit ?? RUN_QUEUE_BATCH;
  const { results } = await env.DB.prepare(ARCHIVABLE_RUNS_SQL)
    .bind(now.toISOString(), limit, options.installationId ?? null)
    .all<{ id: string; installationId: string }>();
  if (results.length === 0) return { queued: 0, more: 0 };
  await env.DB.prepare(`INSERT INTO run_archive_queue (run_id, queued_until) SELECT value, ?2 FROM json_each(?1) WHERE true
      ON CONFLICT (run_id) DO UPDATE SET queued_until = excluded.queued_until`)
    .bind(JSON.stringify(results.map((r) => r.id)), new Date(now.getTime() + RUN_QUEUED_HOLD_MS).toISOString())
    .run();
  for (let i = 0; i < results.length; i += 100) {
    const messages: MessageSendRequest<RunArchiveMessage>[] = results.slice(i, i + 100).map((r) => ({ body: { archiveRunId: r.id, installationId: r.installationId } }));
    await env.RUN_OPERATIONS.sendBatch(messages);
  }
  return { queued: results.length, more: results.length === limit ? 1 : 0 };
}

/** The queue consumer's archive of one run: archived, skipped (its guard no longer holds), or failed (retried). */
export async function archiveRunMessage(env: Env, installationId: string, runId: string): Promise<"archived" | "skipped" | "failed"> {
  try {
    return (await archiveRun(env, installationId, runId)) ? "archived" : "skipped";
  } catch (error) {
    console.error(JSON.stringify({ event: "run.archive_failed", runId, installationId, code: error instanceof AppError ? error.code : "run_archive.failed" }));
    return "failed";
  }
}
