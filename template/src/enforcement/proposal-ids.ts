// A proposal's id names its step: the proposal of step X is `X:proposal` (one per step, by the
// primary key). Rows store no step_run_id since migration 0067; rows written before keep theirs,
// which says the same, so every reader takes the column when it is there and the id otherwise.

const SUFFIX = ":proposal";

/** The id of the proposal of step `stepId` (the action node's proposal; at most one a step). */
export function proposalIdOf(stepId: string): string {
  return `${stepId}${SUFFIX}`;
}

/**
 * The step of a proposal row as an SQL expression (`table` the row's name or alias): its stored
 * step_run_id (rows before 0067), else its id without the suffix.
 */
export function proposalStepSql(table = "action_proposals"): string {
  return `COALESCE(${table}.step_run_id, substr(${table}.id, 1, length(${table}.id) - ${SUFFIX.length}))`;
}
