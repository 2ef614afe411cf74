// The columns of a workflow step row (workflow_step_runs) that leave D1 with it: a run's archive
// object (workflows/run-archive.ts), a case's archive object (cases/archive/case-scope.ts) and an
// installation's backup carry these and no other. The step's output, which the row holds since
// migration 0070 (workflows/step-output.ts), travels as a workflow_step_outputs row instead, so
// those formats are the same whichever form D1 keeps an output in. Here, below both domains,
// because the case archive may not import the workflows domain (its index reaches the cases index).

/** The step row's columns as a run archive, a case archive and a backup carry them (every column but the output's). */
export const STEP_ROW_COLUMN_NAMES = [
  "id",
  "run_id",
  "node_id",
  "node_type",
  "branch_key",
  "occurrence",
  "state",
  "output_digest",
  "error_code",
  "started_at",
  "waiting_at",
  "finished_at",
  "updated_at",
  "error_message",
  "error_details_json",
  "attempt",
] as const;

/** `STEP_ROW_COLUMN_NAMES` as a select list, each prefixed with `alias.` when given. */
export function stepRowColumns(alias?: string): string {
  return STEP_ROW_COLUMN_NAMES.map((name) => (alias ? `${alias}.${name}` : name)).join(", ");
}
