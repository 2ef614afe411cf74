// Task leases: an exclusive, renewable claim on a task (claim, "next task" in SLA order with the
// priority lane, wellness caps and the own-QA-task rule, release). Completion is tasks.ts's.
import { auditStatement } from "../../audit";
import { canSeeQueue, reviewerLabel, type Actor } from "../../auth";
import { AppError, conflict, notFound } from "../../errors";
import { reviewerAuditId } from "../../lib/person-keys";
import { notOwnQaTaskSql, OWN_QA_TASK_SQL, ownQaTaskError, reviewerPrincipal } from "../qa/qa";
import { assertTaskVisible, claimant, DEFAULT_LEASE_SECONDS, getTask, getTaskRow, MAX_LEASE_SECONDS, presentTask, TASK_COLUMNS, TASK_QUEUE_WELLNESS_SQL, type TaskRow } from "./tasks";
import { claimExposureStatement, nextTaskWellness, NOT_CAPPED_SQL, queueExposureStatus, refuseWhenCapped, releaseExposureStatement } from "../wellness/wellness";

/** How many of a queue's first claimable tasks one read of `/next` brings, to try in order. */
const CANDIDATES = 4;

function leaseSeconds(value: number | undefined): number {
  return Math.min(Math.max(Math.trunc(value ?? DEFAULT_LEASE_SECONDS), 30), MAX_LEASE_SECONDS);
}

async function refuseClaim(env: Env, actor: Actor, taskId: string, who: string): Promise<never> {
  // Why the claim's update wrote nothing, in one statement: the task (404 without it), whether it is
  // the QA task of the caller's own answer (assertNotOwnQaTask's rule, 403), else its state (409).
  const row = await env.DB.prepare(`SELECT state, lease_expires_at AS leaseExpiresAt, ${OWN_QA_TASK_SQL} AS own FROM human_tasks WHERE installation_id = ?1 AND id = ?2`)
    .bind(actor.installationId, taskId, reviewerLabel(who), reviewerPrincipal(actor))
    .first<{ state: string; leaseExpiresAt: string | null; own: number }>();
  if (!row) throw notFound("task");
  if (row.own === 1) throw ownQaTaskError();
  if (row.state === "claimed") throw conflict("task.already_claimed", "Another reviewer holds this task's lease.", { leaseExpiresAt: row.leaseExpiresAt });
  throw conflict("task.not_claimable", `The task is ${row.state}.`);
}

/**
 * Takes (or renews, for the same reviewer) the exclusive lease; a second claimer gets 409.
 * `inVisibleQueue`: the caller found the task in a queue it checked the actor may see (`/next`),
 * so a console user limited to some queues needs no read of the task's queue first.
 */
export async function claimTask(env: Env, actor: Actor, taskId: string, input: { reviewer?: string; leaseSeconds?: number }, inVisibleQueue = false) {
  const claimed = await tryClaim(env, actor, taskId, input, inVisibleQueue);
  if (!claimed) return refuseClaim(env, actor, taskId, claimant(actor, input.reviewer));
  return presentTask(env, actor, claimed);
}

/** The claim's batch: the claimed task's row, or null when the update took nothing (why is refuseClaim's to say). */
async function tryClaim(env: Env, actor: Actor, taskId: string, input: { reviewer?: string; leaseSeconds?: number }, inVisibleQueue: boolean): Promise<TaskRow | null> {
  if (!inVisibleQueue) await assertTaskVisible(env, actor, taskId);
  const who = claimant(actor, input.reviewer);
  const now = new Date();
  const at = now.toISOString();
  const expires = new Date(now.getTime() + leaseSeconds(input.leaseSeconds) * 1_000).toISOString();
  // The QA rule (never the QA task of one's own answer) is a guard of the update itself, and the
  // update answers the task as claimed: no read before it, none after.
  const [update] = await env.DB.batch<TaskRow>([
    env.DB.prepare(`
      UPDATE human_tasks SET state = 'claimed', claimed_at = CASE WHEN claimed_by = ?3 AND state = 'claimed' THEN claimed_at ELSE ?4 END,
        claimed_by = ?3, lease_expires_at = ?5, updated_at = ?4
      WHERE installation_id = ?1 AND id = ?2
        AND (state = 'open' OR (state = 'claimed' AND (lease_expires_at <= ?4 OR claimed_by = ?3)))
        AND ${notOwnQaTaskSql("?7", "?6")}
      RETURNING ${TASK_COLUMNS}, ${TASK_QUEUE_WELLNESS_SQL}
    `).bind(actor.installationId, taskId, who, at, expires, reviewerPrincipal(actor), reviewerLabel(who)),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `task:${taskId}:claimed:${at}:${who}`,
        action: "task.claimed",
        actor: actor.audit,
        target: { type: "task", id: taskId },
        details: { reviewerId: reviewerAuditId(actor.installationId, who), leaseExpiresAt: expires },
        at,
      },
      { table: "human_tasks", id: taskId, where: { installation_id: actor.installationId, claimed_by: who, lease_expires_at: expires, updated_at: at } },
    ),
    // Wellness: the claim counts toward the reviewer's daily exposure in the task's category.
    claimExposureStatement(env.DB, { installationId: actor.installationId, taskId, reviewer: who, at }),
  ]);
  return update!.results[0] ?? null;
}

/**
 * Claims the first claimable task of a queue in SLA order ("next task"), passing over the
 * categories whose daily exposure cap the reviewer reached (wellness/wellness.ts): the answer says which it
 * skipped; with only capped work left it is a 409 `wellness.exposure_cap_reached`.
 */
export async function claimNextTask(env: Env, actor: Actor, queueId: string, input: { reviewer?: string; leaseSeconds?: number }) {
  // One statement: whether the queue exists, and the reviewer's exposure (dropped for an unknown queue, a 404).
  const { queueFound, status: exposure } = await queueExposureStatus(env.DB, actor.installationId, queueId, claimant(actor, input.reviewer));
  if (!queueFound || !canSeeQueue(actor, queueId)) throw notFound("queue");
  const capped = JSON.stringify(exposure.capped);
  const reviewer = claimant(actor, input.reviewer);
  for (let attempt = 0; attempt < 5; attempt++) {
    // Open tasks and claimed ones whose lease lapsed, in due order: a lapsed lease keeps its place.
    // (QA: a reviewer is never handed the QA task of their own answer: same principal or same name.)
    // The priority lane (trusted flaggers' notices, DSA Art. 22) first, then the rest; each in due order.
    // One statement: the first CANDIDATES of the lane, then the queue's (each arm an index walk to its
    // first rows). Reviewers asking at once race for the same first task; the loser tries the next
    // candidate of the same read, so a lost race costs the claim's batch alone.
    const arm = (lane: string) => `SELECT * FROM (
      SELECT t.id, t.due_at AS dueAt, t.priority FROM human_tasks t WHERE t.installation_id = ?1 AND t.queue_id = ?2 AND t.state = 'open' ${lane} AND ${NOT_CAPPED_SQL(4)} AND ${notOwnQaTaskSql("?5", "?6", "t")}
      UNION ALL
      SELECT t.id, t.due_at AS dueAt, t.priority FROM human_tasks t WHERE t.installation_id = ?1 AND t.queue_id = ?2 AND t.state = 'claimed' ${lane} AND t.lease_expires_at <= ?3 AND ${NOT_CAPPED_SQL(4)} AND ${notOwnQaTaskSql("?5", "?6", "t")}
      ORDER BY dueAt, priority DESC, id LIMIT ?7)`;
    const { results: candidates } = await env.DB.prepare(`
      SELECT id FROM (SELECT 0 AS lane, dueAt, priority, id FROM (${arm("AND t.priority_lane IS NOT NULL")}) UNION ALL SELECT 1 AS lane, dueAt, priority, id FROM (${arm("")}))
      ORDER BY lane, dueAt, priority DESC, id LIMIT ?7
    `)
      .bind(actor.installationId, queueId, new Date().toISOString(), capped, reviewerLabel(reviewer), reviewerPrincipal(actor), CANDIDATES)
      .all<{ id: string }>();
    if (candidates.length === 0) {
      await refuseWhenCapped(env.DB, actor.installationId, queueId, exposure);
      return null;
    }
    // A task of the priority lane is in both arms: tried once.
    for (const id of new Set(candidates.map((candidate) => candidate.id))) {
      // A candidate another reviewer took meanwhile leaves the update without a row: try the next.
      const claimed = await tryClaim(env, actor, id, input, true);
      if (!claimed) continue;
      const task = await presentTask(env, actor, claimed);
      return { ...task, wellness: await nextTaskWellness(env.DB, actor.installationId, queueId, exposure) };
    }
  }
  throw new AppError("queue.contended", "Tasks are being claimed faster than this request could take one; retry.", { status: 409, retryable: true });
}

export async function releaseTask(env: Env, actor: Actor, taskId: string, input: { reviewer?: string }) {
  await assertTaskVisible(env, actor, taskId);
  const who = claimant(actor, input.reviewer);
  const at = new Date().toISOString();
  const [update] = await env.DB.batch([
    env.DB.prepare(`
      UPDATE human_tasks SET state = 'open', claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, updated_at = ?4
      WHERE installation_id = ?1 AND id = ?2 AND state = 'claimed' AND claimed_by = ?3
    `).bind(actor.installationId, taskId, who, at),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `task:${taskId}:released:${at}:${who}`,
        action: "task.released",
        actor: actor.audit,
        target: { type: "task", id: taskId },
        details: { reviewerId: reviewerAuditId(actor.installationId, who) },
        at,
      },
      { table: "human_tasks", id: taskId, where: { installation_id: actor.installationId, state: "open", updated_at: at } },
    ),
    releaseExposureStatement(env.DB, { installationId: actor.installationId, taskId, reviewer: who, at }),
  ]);
  if ((update!.meta.changes ?? 0) === 0) {
    const row = await getTaskRow(env.DB, actor.installationId, taskId);
    if (!row) throw notFound("task");
    throw conflict("task.not_claimed_by_you", "Only the reviewer holding the lease can release the task.");
  }
  return getTask(env, actor, taskId);
}
