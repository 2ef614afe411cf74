// A workflow task's id names its step: the task of step X is `X:task` (a human_task node's, or a
// handoff's to a queue; one per step, by the primary key). Tasks store no step_run_id since
// migration 0068; rows written before keep theirs, which says the same, so every reader takes the
// column when it is there and, for a workflow task, the id otherwise. QA and golden tasks have no
// step (their step_run_id is NULL, and a golden task's id only looks like a step's task).

const SUFFIX = ":task";

/** The id of the task of step `stepId` (a human_task node's, or a handoff's to a queue). */
export function taskIdOf(stepId: string): string {
  return `${stepId}${SUFFIX}`;
}

/**
 * The step of a task row as an SQL expression (`table` the row's name or alias): its stored
 * step_run_id (rows before 0068), else for a workflow task its id without the suffix; NULL for a
 * QA or golden task.
 */
export function taskStepSql(table = "human_tasks"): string {
  return `COALESCE(${table}.step_run_id, CASE WHEN ${table}.origin = 'workflow' THEN substr(${table}.id, 1, length(${table}.id) - ${SUFFIX.length}) END)`;
}
