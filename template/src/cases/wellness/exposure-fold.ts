// Claims that ended with their task, folded into the task's row. A review_exposure row per claim
// (wellness.ts) is what a reviewer's minutes of a day are counted from; when the claim ended with
// the task — the task completed, expired or was cancelled while the same reviewer held it since the
// same time — the task's row already holds who, from when and until when, and the claim's row only
// adds the category it was counted under. The schedule writes that category on the task and
// deletes the claim's row, in one batch per slice, so a reviewed task keeps one row for its hot
// window instead of two (and the claim's three index entries). Minutes read both (MINUTES_SQL).
//
// Idempotent and safe to stop anywhere: a task leaves the backlog (human_tasks_exposure_unfolded)
// only in the batch that deletes its claim's row, and a claim's row is deleted only when the task
// names its category; killed between slices, the next run takes the rest.

/** Ended tasks looked at per slice (one batch of two statements). */
const FOLD_LIMIT = 500;

/** SQL: the claim (alias `x`) that ended with task `t`: same reviewer, same start, still open-ended. */
const ENDED_WITH_TASK = (x: string, t: string) => `${x}.installation_id = ${t}.installation_id AND ${x}.task_id = ${t}.id AND ${x}.reviewer = ${t}.claimed_by AND ${x}.started_at = ${t}.claimed_at AND ${x}.ended_at IS NULL`;

/** The backlog's oldest ended tasks with a claim not looked at (binds: ?1 limit, ?2 now), from its partial index. */
export const UNFOLDED_TASKS_SQL = `
    SELECT id FROM human_tasks INDEXED BY human_tasks_exposure_unfolded
    WHERE exposure_category IS NULL AND claimed_at IS NOT NULL AND state IN ('completed', 'expired', 'cancelled') AND updated_at <= ?2
    ORDER BY updated_at LIMIT ?1`;

/**
 * The scheduled pass: the oldest ended tasks not looked at yet (up to `limit`), each one's claim
 * that ended with it folded into it. Answers how many claims were folded, how many tasks were
 * looked at, and whether more wait.
 */
export async function sweepExposureFolds(env: Env, now: Date = new Date(), limit = FOLD_LIMIT): Promise<{ folded: number; looked: number; more: number }> {
  const { results } = await env.DB.prepare(UNFOLDED_TASKS_SQL).bind(limit, now.toISOString()).all<{ id: string }>();
  if (results.length === 0) return { folded: 0, looked: 0, more: 0 };
  const ids = JSON.stringify(results.map((row) => row.id));
  const [, deleted] = await env.DB.batch([
    // The tasks get the category of the claim that ended with them ('' when none did)...
    env.DB.prepare(`
      UPDATE human_tasks AS t SET exposure_category = COALESCE(
        (SELECT x.category FROM review_exposure x WHERE ${ENDED_WITH_TASK("x", "t")} LIMIT 1), '')
      WHERE t.id IN (SELECT value FROM json_each(?1)) AND t.exposure_category IS NULL AND t.claimed_at IS NOT NULL AND t.state IN ('completed', 'expired', 'cancelled')`).bind(ids),
    // ...and those claims' rows go: the task now says the same (category, reviewer, start, end).
    env.DB.prepare(`
      DELETE FROM review_exposure
      WHERE rowid IN (
        SELECT x.rowid FROM human_tasks t JOIN review_exposure x ON ${ENDED_WITH_TASK("x", "t")} AND x.category = t.exposure_category
        WHERE t.id IN (SELECT value FROM json_each(?1)) AND t.exposure_category > '')`).bind(ids),
  ]);
  return { folded: deleted?.meta.changes ?? 0, looked: results.length, more: results.length === limit ? 1 : 0 };
}
