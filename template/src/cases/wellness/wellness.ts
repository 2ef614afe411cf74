// Wellness limits: a daily exposure cap per installation and per category (minutes a reviewer
// holds claimed tasks of that category in a UTC day), counted from the reviewer's claims, and what
// `/next` needs to skip capped categories and say why.
import { auditStatement } from "../../audit";
import { reviewerIdentity, reviewerLabel, type Actor } from "../../auth";
import { AppError } from "../../errors";
import { newId } from "../../lib/crypto";
import { POLICY_CATEGORIES } from "../taxonomy";
import { stablePlanSql } from "../../lib/stable-plan";

/** The category row that holds the installation default. */
const DEFAULT_ROW = "*";
/** Claims begun more than this before the day are not looked at (no lease is held a week on end). */
const LOOKBACK_MS = 7 * 86_400_000;
const DAY_MS = 86_400_000;
/** A strict queue's cap when the installation has set none: an hour of claimed work a day. */
export const STRICT_CAP_MINUTES = 60;

/**
 * A task's category: its report's, or the appealed report's, or — for a QA task — its original's
 * (qa_reviews.category), so a second look is capped and counted like the first; NULL when none.
 */
export const TASK_CATEGORY_SQL = (t: string) => `COALESCE(
  (SELECT r.category FROM reports r WHERE r.id = ${t}.report_id AND r.installation_id = ${t}.installation_id),
  (SELECT r.category FROM appeals a JOIN reports r ON r.id = a.report_id WHERE a.id = ${t}.appeal_id AND a.installation_id = ${t}.installation_id),
  (SELECT q.category FROM qa_reviews q WHERE q.qa_task_id = ${t}.id AND q.installation_id = ${t}.installation_id))`;

/** Holds for a task (alias `t`) whose category is not in the JSON array bound as `?${param}`. */
export const NOT_CAPPED_SQL = (param: number) => `(?${param} = '[]' OR COALESCE(${TASK_CATEGORY_SQL("t")}, '') NOT IN (SELECT value FROM json_each(?${param})))`;

export interface CategoryExposure {
  category: string;
  exposureMinutes: number;
  capMinutes: number | null;
  remainingMinutes: number | null;
  capped: boolean;
}

export interface ExposureStatus {
  reviewer: string;
  /** The UTC day counted (YYYY-MM-DD) and when the next one starts (the caps reset). */
  day: string;
  resetsAt: string;
  categories: CategoryExposure[];
  /** The categories the reviewer reached the cap of today. */
  capped: string[];
}

export interface Caps {
  defaultMinutes: number | null;
  categories: Record<string, number | null>;
  updatedAt: string | null;
  updatedBy: string | null;
}

/** Whose exposure is counted (the same rule as leases): the console user, or the API key with the reviewer name its tool gives. */
export function reviewerOf(actor: Actor, reviewer: string | undefined): string {
  return reviewerIdentity(actor, reviewer);
}

function utcDay(now: Date) {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  return { day: start.toISOString().slice(0, 10), start: start.toISOString(), end: new Date(start.getTime() + DAY_MS).toISOString() };
}

/**
 * For the claim's batch, after the task's update: records the claim (a new one, or a renewal by
 * the same reviewer, which moves the lease). Writes nothing when the claim did not take (the
 * task's row was not updated at `at` for this reviewer) or the task has no category. `taskIds`:
 * the tasks the update may have claimed (`/next`'s candidates; it claims one), each looked at.
 */
export function claimExposureStatement(db: D1Database, input: { installationId: string; taskIds: readonly string[]; reviewer: string; at: string }): D1PreparedStatement {
  // Each task with an id of its own for its row: the task the update took gets one, and a task
  // another claim of this reviewer took at the same instant already has its row (the upsert keeps it).
  const tasks = JSON.stringify(input.taskIds.map((id) => [id, newId("exp")]));
  return db.prepare(CLAIM_EXPOSURE_SQL).bind(input.installationId, tasks, input.reviewer, input.at);
}

/** claimExposureStatement's SQL (?1 installation, ?2 the JSON list of [task id, row id], ?3 reviewer, ?4 the claim's time): each task looked up by its key. */
export const CLAIM_EXPOSURE_SQL = stablePlanSql(`
    INSERT INTO review_exposure (id, installation_id, task_id, reviewer, category, started_at, lease_expires_at, created_at)
    SELECT c.value ->> 1, t.installation_id, t.id, t.claimed_by, ${TASK_CATEGORY_SQL("t")}, t.claimed_at, t.lease_expires_at, ?4
    FROM json_each(?2) c CROSS JOIN human_tasks t
    WHERE t.id = c.value ->> 0 AND t.installation_id = ?1 AND t.state = 'claimed' AND t.claimed_by = ?3 AND t.updated_at = ?4 AND ${TASK_CATEGORY_SQL("t")} IS NOT NULL
    ON CONFLICT (installation_id, task_id, reviewer, started_at) DO UPDATE SET lease_expires_at = excluded.lease_expires_at
  `);

/**
 * For the release's batch, after the task's update: the reviewer's claim of the task (their latest
 * row for it; the release needs a live claim) ends at `at`, only if the release took.
 */
export function releaseExposureStatement(db: D1Database, input: { installationId: string; taskId: string; reviewer: string; at: string }): D1PreparedStatement {
  return db
    .prepare(`
    UPDATE review_exposure SET ended_at = ?4
    WHERE installation_id = ?1 AND task_id = ?2 AND reviewer = ?3 AND ended_at IS NULL
      AND started_at = (SELECT MAX(started_at) FROM review_exposure WHERE installation_id = ?1 AND task_id = ?2 AND reviewer = ?3)
      AND EXISTS (SELECT 1 FROM human_tasks t WHERE t.installation_id = ?1 AND t.id = ?2 AND t.state = 'open' AND t.updated_at = ?4)
  `)
    .bind(input.installationId, input.taskId, input.reviewer, input.at);
}

/**
 * Minutes per category the reviewer held claimed tasks within the UTC day of `now`. A claim runs
 * from its claim time to: its release (`ended_at`); the task's completion (or expiry, or
 * cancellation) when that ended this same claim; now while the lease is live; the lease's end when
 * it lapsed or someone else took the task since. A claim that ended with its task may have been
 * folded into the task's row by the schedule (exposure-fold.ts): those are read from the task.
 *
 * Binds: ?1 installation, ?2 reviewer, ?3 day start, ?4 day end, ?5 now, ?6 the lookback start.
 */
export const MINUTES_SQL = `
    SELECT category, SUM(MAX(0.0, julianday(MIN(end_at, ?4)) - julianday(MAX(started_at, ?3)))) * 1440.0 AS minutes
    FROM (
      SELECT x.category, x.started_at, COALESCE(x.ended_at,
        CASE
          WHEN t.claimed_by = x.reviewer AND t.claimed_at = x.started_at AND t.state IN ('completed', 'expired', 'cancelled') THEN MIN(COALESCE(t.completed_at, t.updated_at), ?5)
          WHEN t.claimed_by = x.reviewer AND t.claimed_at = x.started_at AND t.state = 'claimed' THEN MIN(COALESCE(t.lease_expires_at, ?5), ?5)
          ELSE MIN(x.lease_expires_at, ?5)
        END) AS end_at
      FROM review_exposure x LEFT JOIN human_tasks t ON t.id = x.task_id AND t.installation_id = x.installation_id
      WHERE x.installation_id = ?1 AND x.reviewer = ?2 AND x.started_at >= ?6 AND x.started_at < ?4
      UNION ALL
      SELECT t.exposure_category, t.claimed_at, MIN(COALESCE(t.completed_at, t.updated_at), ?5)
      FROM human_tasks t INDEXED BY human_tasks_folded_exposure
      WHERE t.installation_id = ?1 AND t.claimed_by = ?2 AND t.claimed_at >= ?6 AND t.claimed_at < ?4 AND t.exposure_category > ''
    ) GROUP BY category
  `;

type MinutesRow = { category: string; minutes: number | null };
type CapRow = { category: string; capMinutes: number | null; updatedAt: string; updatedBy: string };

function minutesBinds(installationId: string, reviewer: string, now: Date): unknown[] {
  const day = utcDay(now);
  return [installationId, reviewer, day.start, day.end, now.toISOString(), new Date(Date.parse(day.start) - LOOKBACK_MS).toISOString()];
}

function minutesOf(rows: MinutesRow[]): Map<string, number> {
  return new Map(rows.map((row) => [row.category, Math.max(0, row.minutes ?? 0)]));
}

/** The caps rows of an installation (?1). */
const CAPS_SQL = `SELECT category, cap_minutes AS capMinutes, updated_at AS updatedAt, updated_by AS updatedBy FROM exposure_caps WHERE installation_id = ?1 ORDER BY category`;

export async function readCaps(db: D1Database, installationId: string): Promise<Caps> {
  const { results } = await db.prepare(CAPS_SQL).bind(installationId).all<CapRow>();
  return capsOf(results);
}

function capsOf(rows: CapRow[]): Caps {
  const caps: Caps = { defaultMinutes: null, categories: {}, updatedAt: null, updatedBy: null };
  for (const row of rows) {
    if (row.category === DEFAULT_ROW) caps.defaultMinutes = row.capMinutes;
    else caps.categories[row.category] = row.capMinutes;
    if (!caps.updatedAt || row.updatedAt > caps.updatedAt) Object.assign(caps, { updatedAt: row.updatedAt, updatedBy: row.updatedBy });
  }
  return caps;
}

/** A category's cap: its own row (null there is "no cap"), else the installation default. */
function capOf(caps: Caps, category: string): number | null {
  return Object.hasOwn(caps.categories, category) ? caps.categories[category]! : caps.defaultMinutes;
}

const round = (minutes: number) => Math.round(minutes * 10) / 10;

/** The reviewer's exposure today per category (every category with exposure or a cap), and which are capped. */
export async function exposureStatus(db: D1Database, installationId: string, reviewer: string, now = new Date()): Promise<ExposureStatus> {
  return (await readExposure(db, installationId, reviewer, now, null)).status;
}

/**
 * `/next`'s first read: whether the queue exists in the installation, and the reviewer's exposure
 * today, in one statement (an unknown queue is a 404 whatever the exposure), with `alongside`'s
 * column (the queue's first candidates) read in it too.
 */
export async function queueExposureStatus(
  db: D1Database,
  installationId: string,
  queueId: string,
  reviewer: string,
  now = new Date(),
  alongside?: ExposureAlongside,
): Promise<{ queueFound: boolean; status: ExposureStatus; alongside: string | null }> {
  return readExposure(db, installationId, reviewer, now, queueId, alongside);
}

/**
 * One more scalar column for `/next`'s first statement: SQL over the statement's own binds (?1 the
 * installation, ?5 now, ?7 the queue) and its own, numbered from `firstParam`.
 */
export interface ExposureAlongside {
  sql: (firstParam: number) => string;
  binds: unknown[];
}

async function readExposure(db: D1Database, installationId: string, reviewer: string, now: Date, queueId: string | null, alongside?: ExposureAlongside): Promise<{ queueFound: boolean; status: ExposureStatus; alongside: string | null }> {
  // The caps and the day's minutes in one statement, each as a JSON list of its rows (and, given
  // a queue, whether it exists: ?7).
  const queue = queueId === null ? "" : `, EXISTS (SELECT 1 FROM queues WHERE installation_id = ?1 AND id = ?7) AS queueFound, (SELECT wellness FROM queues WHERE installation_id = ?1 AND id = ?7) AS queueWellness`;
  const extra = queueId !== null && alongside ? `, (${alongside.sql(8)}) AS alongside` : "";
  const read = await db
    .prepare(
      stablePlanSql(`SELECT (SELECT json_group_array(json_object('category', category, 'capMinutes', capMinutes, 'updatedAt', updatedAt, 'updatedBy', updatedBy)) FROM (${CAPS_SQL})) AS caps,
      (SELECT json_group_array(json_object('category', category, 'minutes', minutes)) FROM (${MINUTES_SQL})) AS minutes${queue}${extra}`),
    )
    .bind(...minutesBinds(installationId, reviewer, now), ...(queueId === null ? [] : [queueId]), ...(extra ? alongside!.binds : []))
    .first<{ caps: string; minutes: string; queueFound?: number; queueWellness?: string | null; alongside?: string | null }>();
  return { queueFound: read?.queueFound === 1, status: exposureOf(reviewer, now, read, read?.queueWellness === "strict"), alongside: read?.alongside ?? null };
}

/**
 * A strict queue's caps: every category capped at the shortest cap the installation has (the
 * default or any category's), or STRICT_CAP_MINUTES when it has none.
 */
export function strictCaps(caps: Caps): Caps {
  const set = [caps.defaultMinutes, ...Object.values(caps.categories)].filter((m): m is number => m !== null);
  const shortest = set.length > 0 ? Math.min(...set) : STRICT_CAP_MINUTES;
  return { ...caps, defaultMinutes: shortest, categories: Object.fromEntries(POLICY_CATEGORIES.map((c) => [c, shortest])) };
}

function exposureOf(reviewer: string, now: Date, read: { caps: string; minutes: string } | null, strict = false): ExposureStatus {
  const configured = capsOf(JSON.parse(read?.caps ?? "[]") as CapRow[]);
  const caps = strict ? strictCaps(configured) : configured;
  const minutes = minutesOf(JSON.parse(read?.minutes ?? "[]") as MinutesRow[]);
  const names = new Set<string>([...minutes.keys()]);
  for (const category of POLICY_CATEGORIES) if (capOf(caps, category) !== null) names.add(category);
  const categories = [...names].sort().map((category): CategoryExposure => {
    const exposure = minutes.get(category) ?? 0;
    const cap = capOf(caps, category);
    return { category, exposureMinutes: round(exposure), capMinutes: cap, remainingMinutes: cap === null ? null : round(Math.max(0, cap - exposure)), capped: cap !== null && exposure >= cap };
  });
  const day = utcDay(now);
  return { reviewer: reviewerLabel(reviewer), day: day.day, resetsAt: day.end, categories, capped: categories.filter((c) => c.capped).map((c) => c.category) };
}

/** Claimable tasks of the queue per capped category (what `/next` passed over). */
async function waitingInCapped(db: D1Database, installationId: string, queueId: string, capped: string[]): Promise<Map<string, number>> {
  if (capped.length === 0) return new Map();
  const { results } = await db
    .prepare(`
    SELECT category, COUNT(*) AS n FROM (
      SELECT ${TASK_CATEGORY_SQL("t")} AS category FROM human_tasks t
      WHERE t.installation_id = ?1 AND t.queue_id = ?2 AND (t.state = 'open' OR (t.state = 'claimed' AND t.lease_expires_at <= ?3))
    ) WHERE category IN (SELECT value FROM json_each(?4)) GROUP BY category
  `)
    .bind(installationId, queueId, new Date().toISOString(), JSON.stringify(capped))
    .all<{ category: string; n: number }>();
  return new Map(results.map((row) => [row.category, row.n]));
}

export interface SkippedCategory {
  category: string;
  reason: "exposure_cap_reached";
  exposureMinutes: number;
  capMinutes: number;
  waitingTasks: number;
}

async function skippedCategories(db: D1Database, installationId: string, queueId: string, status: ExposureStatus): Promise<SkippedCategory[]> {
  const waiting = await waitingInCapped(db, installationId, queueId, status.capped);
  return status.categories
    .filter((c) => c.capped && (waiting.get(c.category) ?? 0) > 0)
    .map((c) => ({ category: c.category, reason: "exposure_cap_reached" as const, exposureMinutes: c.exposureMinutes, capMinutes: c.capMinutes!, waitingTasks: waiting.get(c.category)! }));
}

/** What a successful `/next` says: the categories of this queue it passed over, and when the caps reset. */
export async function nextTaskWellness(db: D1Database, installationId: string, queueId: string, status: ExposureStatus) {
  return { skipped: await skippedCategories(db, installationId, queueId, status), resetsAt: status.resetsAt };
}

/** When `/next` found no task outside the capped categories: the typed refusal if capped work is waiting (else the caller answers queue.empty). */
export async function refuseWhenCapped(db: D1Database, installationId: string, queueId: string, status: ExposureStatus): Promise<void> {
  const skipped = await skippedCategories(db, installationId, queueId, status);
  if (skipped.length === 0) return;
  throw new AppError(
    "wellness.exposure_cap_reached",
    `You reached today's exposure cap for ${skipped.map((s) => s.category).join(", ")}, and this queue has only work of ${skipped.length === 1 ? "that category" : "those categories"} left. The caps reset at ${status.resetsAt}; other queues may have other work.`,
    { status: 409, details: { capped: skipped, resetsAt: status.resetsAt } },
  );
}

/** Replaces the installation's caps: the default (null: none) and per category (null: no cap for it; absent: the default). The body's schema admits policy categories only. */
export async function setCaps(env: Env, actor: Actor, input: { defaultMinutes?: number | null; categories?: Record<string, number | null> }): Promise<Caps> {
  const at = new Date().toISOString();
  const categories = input.categories ?? {};
  const rows: Array<[string, number | null]> = [...(input.defaultMinutes === undefined || input.defaultMinutes === null ? [] : [[DEFAULT_ROW, input.defaultMinutes] as [string, number]]), ...Object.entries(categories)];
  const by = `${actor.audit.type}:${actor.audit.id}`;
  await env.DB.batch([
    env.DB.prepare(`DELETE FROM exposure_caps WHERE installation_id = ?1`).bind(actor.installationId),
    ...rows.map(([category, minutes]) => env.DB.prepare(`INSERT INTO exposure_caps (installation_id, category, cap_minutes, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)`).bind(actor.installationId, category, minutes, by, at)),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `exposure_caps:updated:${at}:${newId("x")}`,
      action: "wellness.caps_updated",
      actor: actor.audit,
      target: { type: "installation", id: actor.installationId },
      details: { defaultMinutes: input.defaultMinutes ?? null, categories },
      at,
    }),
  ]);
  return readCaps(env.DB, actor.installationId);
}

/** The caps as set, and the cap each category ends up with. */
export async function getCaps(env: Env, actor: Actor) {
  const caps = await readCaps(env.DB, actor.installationId);
  return { ...caps, effective: Object.fromEntries(POLICY_CATEGORIES.map((category) => [category, capOf(caps, category)])) as Record<string, number | null> };
}

/**
 * How a task's media are shown: in a strict queue blurred and greyscale whatever the reviewer's
 * preference (`locked`: a reviewer may unblur one item to confirm it, the greyscale stays), with
 * the shortest exposure cap; otherwise as the reviewer's own preference says.
 */
export async function taskDisplay(db: D1Database, installationId: string, queueId: string | null, wellness?: string | null) {
  // `wellness`: the queue's profile as the statement that read or wrote the task answered it (undefined: not read with it).
  const row = wellness !== undefined ? { wellness } : queueId ? await db.prepare(`SELECT wellness FROM queues WHERE installation_id = ?1 AND id = ?2`).bind(installationId, queueId).first<{ wellness: string }>() : null;
  if (row?.wellness !== "strict") return { profile: "standard" as const, blurMedia: null, greyscale: null, locked: false };
  return { profile: "strict" as const, blurMedia: true, greyscale: true, locked: true, exposureCapMinutes: strictCaps(await readCaps(db, installationId)).defaultMinutes };
}
