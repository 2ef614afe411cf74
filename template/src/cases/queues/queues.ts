// Review queues: an SLA, a priority and a wellness profile each; figures for the people who run them.
import { auditStatement } from "../../audit";
import { conflict, notFound } from "../../errors";
import { canSeeQueue, type Actor } from "../../auth";
import { newId } from "../../lib/crypto";
import { isUniqueViolation } from "../../lib/d1";
import type { QueueWellness } from "../taxonomy";

export interface QueueRow {
  id: string;
  name: string;
  description: string | null;
  slaSeconds: number;
  priority: number;
  /** The wellness profile (QUEUE_WELLNESS): strict shows media blurred and greyscale whatever the reviewer's preference, under the shortest exposure cap. */
  wellness: QueueWellness;
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = `id, name, description, sla_seconds AS slaSeconds, priority, wellness, created_at AS createdAt, updated_at AS updatedAt`;

export function getQueueRow(db: D1Database, installationId: string, queueId: string): Promise<QueueRow | null> {
  return db.prepare(`SELECT ${COLUMNS} FROM queues WHERE installation_id = ?1 AND id = ?2`).bind(installationId, queueId).first<QueueRow>();
}

/**
 * findQueueRow as one scalar JSON value (a QueueRow, or NULL), for a statement the caller sends
 * anyway; `installationId` and `idOrName` are SQL expressions. Host-internal lookup.
 */
export function findQueueJsonSql(installationId: string, idOrName: string): string {
  return `(SELECT json_object('id', id, 'name', name, 'description', description, 'slaSeconds', sla_seconds, 'priority', priority, 'createdAt', created_at, 'updatedAt', updated_at)
    FROM queues WHERE installation_id = ${installationId} AND (id = ${idOrName} OR name = ${idOrName}) ORDER BY id = ${idOrName} DESC LIMIT 1)`;
}

/** A queue by id or by name (workflow graphs may name queues either way). Host-internal lookup. */
export function findQueueRow(db: D1Database, installationId: string, idOrName: string): Promise<QueueRow | null> {
  return db.prepare(`SELECT ${COLUMNS} FROM queues WHERE installation_id = ?1 AND (id = ?2 OR name = ?2) ORDER BY id = ?2 DESC LIMIT 1`).bind(installationId, idOrName).first<QueueRow>();
}

export async function createQueue(env: Env, actor: Actor, input: { name: string; description?: string; slaSeconds: number; priority?: number; wellness?: QueueWellness }) {
  const id = newId("q");
  const at = new Date().toISOString();
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO queues (id, installation_id, name, description, sla_seconds, priority, wellness, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8, ?7, ?7)`).bind(
        id,
        actor.installationId,
        input.name,
        input.description ?? null,
        input.slaSeconds,
        input.priority ?? 0,
        at,
        input.wellness ?? "standard",
      ),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `queue:${id}:created`,
        action: "queue.created",
        actor: actor.audit,
        target: { type: "queue", id },
        details: { name: input.name, slaSeconds: input.slaSeconds, priority: input.priority ?? 0, wellness: input.wellness ?? "standard" },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("queue.name_taken", "A queue with this name already exists.");
    throw error;
  }
  return (await getQueueRow(env.DB, actor.installationId, id))!;
}

/** Open now: open, or claimed with a lapsed lease (claimable again, listed as open); binds the time as ?2. */
const OPEN_NOW = `(t.state = 'open' OR (t.state = 'claimed' AND (t.lease_expires_at IS NULL OR t.lease_expires_at <= ?2)))`;

/** Implied by OPEN_NOW, and said so the count walks the queue's live tasks in human_tasks_queue_listing, not its history. */
const LIVE = `t.state IN ('open', 'claimed')`;

export async function listQueues(env: Env, actor: Actor) {
  const now = new Date().toISOString();
  const { results } = await env.DB.prepare(`
    SELECT q.id, q.name, q.description, q.sla_seconds AS slaSeconds, q.priority, q.wellness, q.created_at AS createdAt, q.updated_at AS updatedAt,
      (SELECT COUNT(*) FROM human_tasks t WHERE t.installation_id = q.installation_id AND t.queue_id = q.id AND ${LIVE} AND ${OPEN_NOW}) AS open,
      (SELECT COUNT(*) FROM human_tasks t WHERE t.installation_id = q.installation_id AND t.queue_id = q.id AND t.state = 'claimed' AND NOT ${OPEN_NOW}) AS claimed,
      (SELECT MIN(t.due_at) FROM human_tasks t WHERE t.installation_id = q.installation_id AND t.queue_id = q.id AND ${LIVE} AND ${OPEN_NOW}) AS oldestDueAt,
      (SELECT COUNT(*) FROM human_tasks t WHERE t.installation_id = q.installation_id AND t.queue_id = q.id AND t.state IN ('open', 'claimed') AND t.due_at < ?2) AS breachedSla
    FROM queues q WHERE q.installation_id = ?1 ORDER BY q.priority DESC, q.name LIMIT 500
  `)
    .bind(actor.installationId, now)
    .all<QueueRow & { open: number; claimed: number; oldestDueAt: string | null; breachedSla: number }>();
  return results.filter((queue) => canSeeQueue(actor, queue.id));
}

function percentile(sorted: number[], fraction: number): number | null {
  if (sorted.length === 0) return null;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index]!;
}

const OPEN_NOW_AT3 = OPEN_NOW.replaceAll("?2", "?3");

/**
 * Seconds from creation to completion of a queue's tasks completed since a time (?1 installation,
 * ?2 queue, ?3 since), latest first: one range of human_tasks_queue_ended (an ended task's last
 * change, updated_at, is its completion, so the range holds every task completed since; the unary
 * + keeps the planner off human_tasks_queue_listing, which would sort them).
 */
export const COMPLETION_TIMES_SQL = `
      SELECT (julianday(completed_at) - julianday(created_at)) * 86400.0 AS seconds FROM human_tasks
      WHERE queue_id = ?2 AND state IN ('completed', 'expired', 'cancelled') AND updated_at >= ?3 AND +installation_id = ?1
        AND state = 'completed' AND completed_at >= ?3 AND origin <> 'golden'
      ORDER BY updated_at DESC LIMIT 10000`;

/** Open, claimed, SLA breaches, and time to complete (p50/p90 over the last 30 days, ≤ 10,000 tasks). */
export async function queueStats(env: Env, actor: Actor, queueId: string) {
  const queue = await getQueueRow(env.DB, actor.installationId, queueId);
  if (!queue || !canSeeQueue(actor, queue.id)) throw notFound("queue");
  const now = new Date();
  const since = new Date(now.getTime() - 30 * 86_400_000).toISOString();
  const [counts, durations] = await env.DB.batch([
    env.DB.prepare(`
      SELECT
        COALESCE(SUM(${OPEN_NOW_AT3}), 0) AS open,
        COALESCE(SUM(NOT ${OPEN_NOW_AT3}), 0) AS claimed,
        COALESCE(SUM(due_at < ?3), 0) AS breachedSla,
        MIN(CASE WHEN ${OPEN_NOW_AT3} THEN due_at END) AS oldestOpenDueAt
      FROM human_tasks t WHERE installation_id = ?1 AND queue_id = ?2 AND state IN ('open', 'claimed')
    `).bind(actor.installationId, queueId, now.toISOString()),
    env.DB.prepare(COMPLETION_TIMES_SQL).bind(actor.installationId, queueId, since),
  ]);
  const row = (counts!.results[0] ?? {}) as { open: number; claimed: number; breachedSla: number; oldestOpenDueAt: string | null };
  const seconds = (durations!.results as Array<{ seconds: number }>).map((r) => Math.round(r.seconds * 1000) / 1000).sort((a, b) => a - b);
  return {
    queueId,
    open: row.open ?? 0,
    claimed: row.claimed ?? 0,
    breachedSla: row.breachedSla ?? 0,
    oldestOpenDueAt: row.oldestOpenDueAt ?? null,
    timeToComplete: { sample: seconds.length, p50Seconds: percentile(seconds, 0.5), p90Seconds: percentile(seconds, 0.9), windowDays: 30 },
  };
}
