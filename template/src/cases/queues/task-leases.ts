// Task leases: an exclusive, renewable claim on a task (claim, "next task" in SLA order with the
// priority lane, wellness caps and the own-QA-task rule, release). Completion is tasks.ts's.
import { auditEachTargetStatement, auditStatement } from "../../audit";
import { canSeeQueue, reviewerLabel, type Actor } from "../../auth";
import { AppError, conflict, notFound } from "../../errors";
import { reviewerAuditId } from "../../lib/person-keys";
import { notOwnQaTaskSql, OWN_QA_TASK_SQL, ownQaTaskError, reviewerPrincipal } from "../qa/qa";
import { assertTaskVisible, claimant, DEFAULT_LEASE_SECONDS, getTask, getTaskRow, MAX_LEASE_SECONDS, presentTask, TASK_COLUMNS, TASK_QUEUE_WELLNESS_SQL, type TaskRow } from "./tasks";
import { claimExposureStatement, nextTaskWellness, NOT_CAPPED_SQL, queueExposureStatus, refuseWhenCapped, releaseExposureStatement, TASK_CATEGORY_SQL } from "../wellness/wellness";
import { stablePlanSql } from "../../lib/stable-plan";

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

/** Takes (or renews, for the same reviewer) the exclusive lease; a second claimer gets 409. */
export async function claimTask(env: Env, actor: Actor, taskId: string, input: { reviewer?: string; leaseSeconds?: number }) {
  await assertTaskVisible(env, actor, taskId);
  const claimed = await claimFirst(env, actor, [taskId], input);
  if (!claimed) return refuseClaim(env, actor, taskId, claimant(actor, input.reviewer));
  return presentTask(env, actor, claimed);
}

/**
 * The claim's update (?1 installation, ?2 the JSON list of task ids in the order to try, ?3 the
 * reviewer, ?4 now, ?5 the lease's end, ?6 the principal, ?7 the reviewer's label): the first task
 * of the list that is open, or claimed with a lapsed lease or by this reviewer (a renewal), and not
 * the QA task of the reviewer's own answer; each looked up by its key. Answers the claimed task.
 */
export const CLAIM_FIRST_SQL = stablePlanSql(`
      UPDATE human_tasks SET state = 'claimed', claimed_at = CASE WHEN claimed_by = ?3 AND state = 'claimed' THEN claimed_at ELSE ?4 END,
        claimed_by = ?3, lease_expires_at = ?5, updated_at = ?4
      WHERE installation_id = ?1 AND id = (
        SELECT t.id FROM json_each(?2) c CROSS JOIN human_tasks t
        WHERE t.id = c.value AND t.installation_id = ?1
          AND (t.state = 'open' OR (t.state = 'claimed' AND (t.lease_expires_at <= ?4 OR t.claimed_by = ?3)))
          AND ${notOwnQaTaskSql("?7", "?6", "t")}
        ORDER BY c.key LIMIT 1)
      RETURNING ${TASK_COLUMNS}, ${TASK_QUEUE_WELLNESS_SQL}
    `);

/**
 * The claim's batch: the first of `taskIds` (in their order) still claimable by the reviewer is
 * claimed, and the batch answers its row; null when none was (why is refuseClaim's to say). The
 * caller checked the actor may see the tasks (the task's own queue, or `/next`'s). The audit event
 * and the exposure row are written for the task the update took: each statement looks at every
 * task of the list and writes for the one whose row this update just wrote (claimed by this
 * reviewer at `at`, with this lease). A task of the list another claim of the same reviewer took at
 * the same instant holds too, and its event and row are already written: nothing changes.
 */
async function claimFirst(env: Env, actor: Actor, taskIds: readonly string[], input: { reviewer?: string; leaseSeconds?: number }): Promise<TaskRow | null> {
  if (taskIds.length === 0) return null;
  const who = claimant(actor, input.reviewer);
  const now = new Date();
  const at = now.toISOString();
  const expires = new Date(now.getTime() + leaseSeconds(input.leaseSeconds) * 1_000).toISOString();
  const events = taskIds.map((taskId) => ({
    installationId: actor.installationId,
    idempotencyKey: `task:${taskId}:claimed:${at}:${who}`,
    action: "task.claimed",
    actor: actor.audit,
    target: { type: "task", id: taskId },
    details: { reviewerId: reviewerAuditId(actor.installationId, who), leaseExpiresAt: expires },
    at,
  }));
  const claimedRow = { claimed_by: who, lease_expires_at: expires, updated_at: at };
  // The QA rule (never the QA task of one's own answer) is a guard of the update itself, and the
  // update answers the task as claimed: no read before it, none after.
  const [update] = await env.DB.batch<TaskRow>([
    env.DB.prepare(CLAIM_FIRST_SQL).bind(actor.installationId, JSON.stringify(taskIds), who, at, expires, reviewerPrincipal(actor), reviewerLabel(who)),
    events.length === 1
      ? auditStatement(env.DB, events[0]!, { table: "human_tasks", id: taskIds[0]!, where: { installation_id: actor.installationId, ...claimedRow } })
      : auditEachTargetStatement(env.DB, events, { table: "human_tasks", where: { installation_id: actor.installationId, ...claimedRow } }),
    // Wellness: the claim counts toward the reviewer's daily exposure in the task's category.
    claimExposureStatement(env.DB, { installationId: actor.installationId, taskIds, reviewer: who, at }),
  ]);
  return update!.results[0] ?? null;
}

/** The parameters of candidatesSql, as SQL parameter names (`?n`). */
interface CandidateParams {
  installation: string;
  queue: string;
  now: string;
  /** The JSON list of capped categories ('[]': none). */
  capped: number;
  label: string;
  principal: string;
  limit: string;
}

/**
 * `/next`'s candidates: the first `limit` claimable tasks of the queue as rows (lane, dueAt,
 * priority, id, and with `category` the task's category). Open tasks and claimed ones whose lease
 * lapsed, in due order: a lapsed lease keeps its place. (QA: a reviewer is never handed the QA
 * task of their own answer: same principal or same name.) The priority lane (trusted flaggers'
 * notices, DSA Art. 22) first, then the rest; each arm an index walk to its first rows.
 */
export function candidatesSql(p: CandidateParams, category: boolean): string {
  const columns = `t.id, t.due_at AS dueAt, t.priority${category ? `, ${TASK_CATEGORY_SQL("t")} AS category` : ""}`;
  const guards = `${NOT_CAPPED_SQL(p.capped)} AND ${notOwnQaTaskSql(p.label, p.principal, "t")}`;
  const arm = (lane: string) => `SELECT * FROM (
      SELECT ${columns} FROM human_tasks t WHERE t.installation_id = ${p.installation} AND t.queue_id = ${p.queue} AND t.state = 'open' ${lane} AND ${guards}
      UNION ALL
      SELECT ${columns} FROM human_tasks t WHERE t.installation_id = ${p.installation} AND t.queue_id = ${p.queue} AND t.state = 'claimed' ${lane} AND t.lease_expires_at <= ${p.now} AND ${guards}
      ORDER BY dueAt, priority DESC, id LIMIT ${p.limit})`;
  const outer = `lane, dueAt, priority, id${category ? ", category" : ""}`;
  return `SELECT ${outer} FROM (SELECT 0 AS lane, * FROM (${arm("AND t.priority_lane IS NOT NULL")}) UNION ALL SELECT 1 AS lane, * FROM (${arm("")}))
      ORDER BY lane, dueAt, priority DESC, id LIMIT ${p.limit}`;
}

type Candidate = { lane: number; dueAt: string; priority: number; id: string; category?: string | null };

/** candidatesSql's order, for rows that came back as JSON. */
function byCandidateOrder(a: Candidate, b: Candidate): number {
  if (a.lane !== b.lane) return a.lane - b.lane;
  if (a.dueAt !== b.dueAt) return a.dueAt < b.dueAt ? -1 : 1;
  if (a.priority !== b.priority) return b.priority - a.priority;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * Claims the first claimable task of a queue in SLA order ("next task"), passing over the
 * categories whose daily exposure cap the reviewer reached (wellness/wellness.ts): the answer says which it
 * skipped; with only capped work left it is a 409 `wellness.exposure_cap_reached`.
 */
export async function claimNextTask(env: Env, actor: Actor, queueId: string, input: { reviewer?: string; leaseSeconds?: number }) {
  const reviewer = claimant(actor, input.reviewer);
  const label = reviewerLabel(reviewer);
  const principal = reviewerPrincipal(actor);
  // One statement: whether the queue exists, the reviewer's exposure (dropped for an unknown queue,
  // a 404), and the queue's first candidates with their categories, before any cap is applied.
  const first = await queueExposureStatus(env.DB, actor.installationId, queueId, reviewer, new Date(), {
    sql: (n) =>
      `SELECT json_group_array(json_object('lane', lane, 'dueAt', dueAt, 'priority', priority, 'id', id, 'category', category)) FROM (${candidatesSql(
        { installation: "?1", queue: "?7", now: "?5", capped: n, label: `?${n + 1}`, principal: `?${n + 2}`, limit: `?${n + 3}` },
        true,
      )})`,
    binds: ["[]", label, principal, CANDIDATES],
  });
  const exposure = first.status;
  if (!first.queueFound || !canSeeQueue(actor, queueId)) throw notFound("queue");
  const capped = JSON.stringify(exposure.capped);
  // The first read's candidates outside the capped categories, as the capped read would answer them.
  // When the cap left none of a full list, there may be more further on: read them with the cap.
  const unfiltered = (JSON.parse(first.alongside ?? "[]") as Candidate[]).sort(byCandidateOrder);
  const uncapped = unfiltered.filter((c) => !exposure.capped.includes(c.category ?? ""));
  let prefetched: Candidate[] | null = uncapped.length > 0 || unfiltered.length < CANDIDATES ? uncapped : null;
  for (let attempt = 0; attempt < 5; attempt++) {
    // Reviewers asking at once race for the same first task; the loser's batch takes the next
    // candidate of the same read, so a lost race costs nothing more.
    const candidates =
      prefetched ??
      (
        await env.DB.prepare(candidatesSql({ installation: "?1", queue: "?2", now: "?3", capped: 4, label: "?5", principal: "?6", limit: "?7" }, false))
          .bind(actor.installationId, queueId, new Date().toISOString(), capped, label, principal, CANDIDATES)
          .all<Candidate>()
      ).results;
    prefetched = null;
    if (candidates.length === 0) {
      await refuseWhenCapped(env.DB, actor.installationId, queueId, exposure);
      return null;
    }
    // One batch claims the first candidate still claimable (a task of the priority lane is in both
    // arms: listed once); only when others took every one of them meanwhile is the queue read again.
    const claimed = await claimFirst(env, actor, [...new Set(candidates.map((candidate) => candidate.id))], input);
    if (!claimed) continue;
    const task = await presentTask(env, actor, claimed);
    return { ...task, wellness: await nextTaskWellness(env.DB, actor.installationId, queueId, exposure) };
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
