// A step's output, in either of the two forms it is stored in. A step written since migration 0070
// keeps its output in its own row (workflow_step_runs.output_json, output_sealed, output_size; the
// digest is output_digest); a step written before keeps it in a workflow_step_outputs row. Every
// reader takes both through the SQL below, so no reader can tell them apart: the step row's columns
// win where both exist (a step finished again since), the outputs row answers otherwise.
//
// What leaves D1 (a run's archive object, a backup) still carries outputs as workflow_step_outputs
// rows (`outputRowsSql`), with the columns that table has, and step rows without the output columns
// (`stepRowColumns`): those formats do not change with where D1 keeps an output.
import { STEP_ROW_COLUMN_NAMES, stepRowColumns } from "../lib/step-row-columns";

export { STEP_ROW_COLUMN_NAMES, stepRowColumns };

/** The output's own columns on the step row (migration 0070). */
export const STEP_OUTPUT_COLUMN_NAMES = ["output_json", "output_sealed", "output_size"] as const;

/**
 * The SQL of "the step's output" for a step row aliased `s` and its outputs row aliased `o`
 * (joined with `join`, a LEFT JOIN, so a step with neither form still answers, with NULLs).
 */
export function stepOutputSql(s = "s", o = "o") {
  const inline = `${s}.output_json IS NOT NULL`;
  return {
    join: `LEFT JOIN workflow_step_outputs ${o} ON ${o}.step_run_id = ${s}.id`,
    /** The open view (text), or NULL when the step has no output. */
    json: `COALESCE(${s}.output_json, ${o}.inline_json)`,
    /** The sealed whole, or NULL (none, or erased). */
    sealed: `CASE WHEN ${inline} THEN ${s}.output_sealed ELSE ${o}.sealed_json END`,
    /** Whether the step has an output in either form. */
    exists: `(${inline} OR ${o}.step_run_id IS NOT NULL)`,
    /** Whether the step still stores a sealed part in either form (what erasure drops: a form a reader no longer takes too). */
    storesSealed: `(${s}.output_sealed IS NOT NULL OR ${o}.sealed_json IS NOT NULL)`,
    /**
     * The columns of a workflow_step_outputs row, in that table's order, from either form. The step
     * row's form derives what the outputs row stored: its digest is the step's, its size as written,
     * its classification '["content"]' when it was written with a sealed part (a part erasure may
     * have dropped since: the size still counts it), its creation time the step's finish.
     */
    row: [
      `${s}.id AS step_run_id`,
      `CASE WHEN ${inline} THEN ${s}.output_json ELSE ${o}.inline_json END AS inline_json`,
      `CASE WHEN ${inline} THEN ${s}.output_digest ELSE ${o}.digest END AS digest`,
      `CASE WHEN ${inline} THEN ${s}.output_size ELSE ${o}.size_bytes END AS size_bytes`,
      `CASE WHEN ${inline} THEN (CASE WHEN ${s}.output_sealed IS NOT NULL OR ${s}.output_size > length(CAST(${s}.output_json AS BLOB)) THEN '["content"]' ELSE '[]' END)
        ELSE ${o}.data_classification_json END AS data_classification_json`,
      `CASE WHEN ${inline} THEN COALESCE(${s}.finished_at, ${s}.updated_at) ELSE ${o}.created_at END AS created_at`,
      `CASE WHEN ${inline} THEN ${s}.output_sealed ELSE ${o}.sealed_json END AS sealed_json`,
    ].join(",\n      "),
  };
}

/** The step's output for a step row `s` and its outputs row `o`: the SQL every reader uses. */
export const STEP_OUTPUT = stepOutputSql();
const SQL = STEP_OUTPUT;

/**
 * The workflow_step_outputs rows (either form) of the steps a WHERE clause over `s` selects, in
 * the order of `order` (over `s`). Columns and order as `SELECT o.*` of that table answers them.
 */
export function outputRowsSql(where: string, order = "s.started_at, s.rowid"): string {
  return `SELECT ${SQL.row}
    FROM workflow_step_runs s ${SQL.join}
    WHERE (${where}) AND ${SQL.exists}
    ORDER BY ${order}`;
}

/** Drops the output's columns from a step row read with `SELECT *` (what leaves D1 carries outputs as outputs rows). */
export function withoutOutputColumns<T extends Record<string, unknown>>(row: T): T {
  const copy = { ...row };
  for (const name of STEP_OUTPUT_COLUMN_NAMES) delete copy[name];
  return copy;
}
