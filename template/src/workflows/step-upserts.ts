// A step row's upsert (stepUpsert, runtime-records.ts) as SQL, and several of them in one batch
// written by ONE statement: an INSERT … SELECT over a JSON list of the rows, with the same
// per-column rules on conflict, so a batch that records several steps (a fused group, a wait
// completed and the group after it, a group and the wait prepared after it) costs one statement
// for its step rows.
import { byteLength } from "../lib/crypto";
import type { StepUpsertInput } from "./runtime-records";

/**
 * The most a combined statement's JSON list of rows may hold (D1 refuses a string or row past
 * 2,000,000 bytes; the list carries every row's output, escaped): past it the batch stays as it is.
 */
export const COMBINED_STEP_ROWS_MAX_BYTES = 1_000_000;

/** The columns a step upsert writes, in order (occurrence is always 1; updated_at is started_at's value). */
export const STEP_UPSERT_COLUMNS = `id, run_id, node_id, node_type, branch_key, occurrence, state, output_digest, error_code,
      started_at, waiting_at, finished_at, updated_at, output_json, output_sealed, output_size`;

/**
 * What a repeated write of a step's row does (the one set of rules both statements use): a finished
 * step is never moved back to running or waiting; a digest, an error code, the time it first waited
 * and the time it finished are kept once set; an output written again replaces the one before (its
 * sealed part and size with it), a write without one keeps it.
 */
export const STEP_UPSERT_CONFLICT = `ON CONFLICT(run_id, node_id, branch_key, occurrence) DO UPDATE SET
      state = CASE WHEN workflow_step_runs.state IN ('succeeded', 'failed', 'timed_out') AND excluded.state IN ('running', 'waiting')
        THEN workflow_step_runs.state ELSE excluded.state END,
      output_digest = COALESCE(excluded.output_digest, workflow_step_runs.output_digest),
      error_code = COALESCE(excluded.error_code, workflow_step_runs.error_code),
      waiting_at = COALESCE(workflow_step_runs.waiting_at, excluded.waiting_at),
      finished_at = COALESCE(workflow_step_runs.finished_at, excluded.finished_at),
      updated_at = excluded.updated_at,
      output_sealed = CASE WHEN excluded.output_json IS NULL THEN workflow_step_runs.output_sealed ELSE excluded.output_sealed END,
      output_size = CASE WHEN excluded.output_json IS NULL THEN workflow_step_runs.output_size ELSE excluded.output_size END,
      output_json = COALESCE(excluded.output_json, workflow_step_runs.output_json)`;

/** SQL over ?12 (bound to `bind`) evaluated before the row is written; raising fails the statement and its batch. */
export interface StepUpsertGuard {
  sql: string;
  bind: unknown;
}

/**
 * A step row's values in the order stepUpsert binds them (?1–?11, then ?13–?15; ?12 is the guard's):
 * id, run, node, kind, branch, state, digest, error code, at (started and updated), waiting at,
 * finished at, output (open view), output (sealed), output size. Strings, integers and NULLs only.
 */
export type StepRowValues = [string, string, string, string, string, string, string | null, string | null, string, string | null, string | null, string | null, string | null, number | null];

export function stepRowValues(step: StepUpsertInput): StepRowValues {
  const finished = step.state === "succeeded" || step.state === "failed" || step.state === "timed_out";
  const output = step.output;
  return [
    step.id,
    step.run.id,
    step.node.id,
    step.node.kind,
    step.branchKey,
    step.state,
    step.digest ?? output?.digest ?? null,
    step.errorCode ?? null,
    step.at,
    step.state === "waiting" ? step.at : null,
    finished ? step.at : null,
    output?.json ?? null,
    output?.sealed ?? null,
    output ? output.sizeBytes : null,
  ];
}

/**
 * The statements stepUpsert and combineStepUpserts built, with their rows in order and the guard
 * evaluated before the first (so a combined statement combined again is its rows).
 */
const BUILT = new WeakMap<D1PreparedStatement, { rows: readonly StepRowValues[]; guard?: StepUpsertGuard }>();

/** Records a step upsert as built from these rows (for combineStepUpserts). */
export function registerStepUpsert(statement: D1PreparedStatement, rows: readonly StepRowValues[], guard?: StepUpsertGuard): D1PreparedStatement {
  BUILT.set(statement, { rows, ...(guard ? { guard } : {}) });
  return statement;
}

/**
 * ONE statement writing `rows` in list order with exactly the rows their own stepUpsert statements
 * would leave one after another: each row is inserted, or applied to the row it conflicts with, by
 * STEP_UPSERT_CONFLICT's rules (a row repeated in the list applies over the earlier one, as a second
 * statement would). The values come out of the JSON list (?1) with their SQL types (text, integer,
 * NULL), as bound values would. With `guard`, its SQL (over ?12) is the WHERE, evaluated before any
 * row goes in (SQLite materialises an INSERT's SELECT that reads its own table first): raising
 * fails the statement and its batch, as it would have failed the first upsert. Without one the
 * WHERE is `true` (an INSERT … SELECT needs one before ON CONFLICT, which SQLite would otherwise
 * read as a join's ON).
 */
export function stepUpsertsStatement(db: D1Database, rows: readonly StepRowValues[], guard?: StepUpsertGuard): D1PreparedStatement {
  const at = (index: number) => `j.value ->> '$[${index}]'`;
  // The row's values in STEP_UPSERT_COLUMNS' order: occurrence 1, updated_at the same as started_at.
  const values = `${[0, 1, 2, 3, 4].map(at).join(", ")}, 1, ${[5, 6, 7, 8, 9, 10, 8, 11, 12, 13].map(at).join(", ")}`;
  const statement = db
    .prepare(`
    INSERT INTO workflow_step_runs (
      ${STEP_UPSERT_COLUMNS}
    ) SELECT ${values} FROM json_each(?1) AS j WHERE ${guard ? guard.sql : "true"} ORDER BY j.key
    ${STEP_UPSERT_CONFLICT}
  `)
    .bind(JSON.stringify(rows), ...(guard ? [...Array.from({ length: 10 }, () => null), guard.bind] : []));
  return registerStepUpsert(statement, rows, guard);
}

/**
 * A batch with every step upsert it holds (stepUpsert's, or a statement this built), when there are
 * two or more, written by ONE statement (stepUpsertsStatement) where the FIRST of them stood: the
 * rows keep the order of the statements they replace, and the first's guard (if any) is evaluated at
 * the same point of the batch as before. Only the first may carry a guard: if a later one does, the
 * batch is returned unchanged (its guard must not be evaluated earlier than it was). Everything else
 * stays in place. A batch whose rows (outputs included) pass COMBINED_STEP_ROWS_MAX_BYTES as one list
 * is returned unchanged too.
 *
 * The later step rows are written EARLIER than before — before the statements that stood between
 * the first upsert and theirs — so a statement between them that reads workflow_step_runs (a guard,
 * an INSERT … SELECT, a NOT EXISTS) sees those rows already there; only combine a batch where none
 * does. The batch's answers are one per statement of the new list (fewer than before), so a caller
 * that reads them by position must not use this.
 */
export function combineStepUpserts(db: D1Database, statements: readonly D1PreparedStatement[]): D1PreparedStatement[] {
  const at: number[] = [];
  const rows: StepRowValues[] = [];
  let guard: StepUpsertGuard | undefined;
  for (const [index, statement] of statements.entries()) {
    const built = BUILT.get(statement);
    if (!built) continue;
    if (built.guard) {
      if (at.length > 0) return [...statements];
      guard = built.guard;
    }
    at.push(index);
    rows.push(...built.rows);
  }
  if (at.length < 2 || byteLength(JSON.stringify(rows)) > COMBINED_STEP_ROWS_MAX_BYTES) return [...statements];
  const combined = stepUpsertsStatement(db, rows, guard);
  const replaced = new Set(at);
  return statements.flatMap((statement, index) => (index === at[0] ? [combined] : replaced.has(index) ? [] : [statement]));
}
