// The hourly rollup: per installation and complete hour, counts read from the rows
// of every domain (reads are not restricted) and written to metric_rollups, which this domain
// owns. One D1 batch per hour (delete the hour's rows, INSERT … SELECT each metric, mark the hour),
// so recomputing an hour replaces it and two concurrent runs write the same figures.
//
// What each metric counts, for the hour [H, T):
//   reports.received          reports created, by category and source
//   queue.depth               tasks in a queue at T (created before T, not ended by T), per queue;
//                             for the current hour (POST /metrics/rollup), T is now
//   queue.oldest_seconds      age at T of the oldest of those (0 when none), per queue
//   queue.first_action_seconds histogram of created → first action (the claim, or the completion
//                             of a task completed without a claim) for first actions in the hour.
//                             A lapsed and re-claimed lease keeps its newest claimed_at, so a
//                             re-claimed task counts from its last claim.
//   tasks.sla_breaches        tasks due in the hour not completed (or cancelled) by their due time
//   tasks.ended               tasks completed, expired or cancelled in the hour, by queue and state
//   runs.created              runs created, by version and authority mode
//   runs.ended                runs that reached succeeded, failed, terminated, repair_required or
//                             superseded in the hour, by version, state and error code
//   deliveries.created        webhook deliveries created
//   deliveries.ended          deliveries that ended delivered or dead in the hour, by state
//   deliveries.pending        deliveries pending at T
//   decisions.made            decisions recorded, by automated_decision and the run's authority
//                             mode (`manual` for a decision made outside a run)
//   appeals.created           appeals taken in
//   appeals.decided           appeals decided, by outcome (upheld, overturned)
//
// TODO(sweep_runs): the sweep figures go here once the housekeeping work's `sweep_runs` table
// (branch `sweeps`, migration 0013: name, ran_at, ok, counts_json, ms; one row per sweep per
// scheduled run) is merged; it does not exist on this branch. It is platform-wide, not per
// installation, so its figures (runs and failures per sweep name, a histogram of ms, the summed
// counts) need a platform series of their own (e.g. an admin-token GET /metrics/sweeps over
// sweep_runs itself, or rollup rows under a reserved installation), not this per-installation
// table.

import { AppError } from "../errors";

export const HOUR_MS = 3_600_000;

/** Histogram buckets: bucket k holds values below 2^(k/2) seconds (and at least the previous bound); the last one is unbounded. */
export const HISTOGRAM_BOUNDS: readonly number[] = Array.from({ length: 50 }, (_, k) => 2 ** (k / 2));
export const OVERFLOW_BUCKET = HISTOGRAM_BOUNDS.length;

/** The bucket of a value, as the rollup's SQL computes it. */
export function histogramBucket(seconds: number): number {
  const k = HISTOGRAM_BOUNDS.findIndex((bound) => seconds < bound);
  return k === -1 ? OVERFLOW_BUCKET : k;
}

/** The q-quantile (0 < q ≤ 1) of summed buckets: the upper bound of the bucket that holds it (seconds), null when empty. */
export function bucketQuantile(counts: ReadonlyMap<number, number>, q: number): number | null {
  let total = 0;
  for (const count of counts.values()) total += count;
  if (total === 0) return null;
  const rank = Math.ceil(q * total);
  let seen = 0;
  for (const bucket of [...counts.keys()].sort((a, b) => a - b)) {
    seen += counts.get(bucket) ?? 0;
    if (seen >= rank) return bucket >= OVERFLOW_BUCKET ? HISTOGRAM_BOUNDS.at(-1)! : HISTOGRAM_BOUNDS[bucket]!;
  }
  return HISTOGRAM_BOUNDS.at(-1)!;
}

/** The histogram bucket of a column `s` (seconds), in SQL. */
export const BUCKET_SQL = `CASE ${HISTOGRAM_BOUNDS.map((bound, k) => `WHEN s < ${bound} THEN ${k}`).join(" ")} ELSE ${OVERFLOW_BUCKET} END`;

export type MetricKind = "counter" | "gauge" | "histogram";

/** THE metrics: name → kind, dimensions (sorted, as in the stored key) and what it counts. */
export const METRICS = {
  "reports.received": { kind: "counter", dims: ["category", "source"], description: "Reports taken in" },
  "queue.depth": { kind: "gauge", dims: ["queue"], description: "Tasks open or claimed in the queue at the end of the hour" },
  "queue.oldest_seconds": { kind: "gauge", dims: ["queue"], description: "Age of the queue's oldest task at the end of the hour" },
  "queue.first_action_seconds": { kind: "histogram", dims: ["queue"], description: "Time from a task's creation to its first action (claim or completion)" },
  "tasks.sla_breaches": { kind: "counter", dims: ["queue"], description: "Tasks not completed by their due time" },
  "tasks.ended": { kind: "counter", dims: ["queue", "state"], description: "Tasks completed, expired or cancelled" },
  "runs.created": { kind: "counter", dims: ["mode", "version"], description: "Runs started" },
  "runs.ended": { kind: "counter", dims: ["code", "state", "version"], description: "Runs that succeeded, failed, were terminated, superseded or need repair" },
  "deliveries.created": { kind: "counter", dims: [], description: "Webhook deliveries created" },
  "deliveries.ended": { kind: "counter", dims: ["state"], description: "Deliveries delivered or dead-lettered" },
  "deliveries.pending": { kind: "gauge", dims: [], description: "Deliveries pending at the end of the hour" },
  "decisions.made": { kind: "counter", dims: ["automated", "mode"], description: "Decisions, by automated decision and the run's authority mode" },
  "appeals.created": { kind: "counter", dims: [], description: "Appeals taken in" },
  "appeals.decided": { kind: "counter", dims: ["outcome"], description: "Appeals decided (upheld or overturned)" },
} as const satisfies Record<string, { kind: MetricKind; dims: readonly string[]; description: string }>;

export type MetricName = keyof typeof METRICS;
export const METRIC_NAMES = Object.keys(METRICS) as MetricName[];

const ENDED_TASK = `('completed', 'expired', 'cancelled')`;
/**
 * SQL join condition: task `t` of queue `q` ended at or after `since`, one range of
 * human_tasks_queue_ended per queue (a queue is its installation's: the installation is checked on
 * the row; the unary + keeps the planner on that range).
 */
const QUEUE_ENDED_SINCE = (q: string, t: string, since: string) => `${t}.queue_id = ${q}.id AND ${t}.state IN ${ENDED_TASK} AND ${t}.updated_at >= ${since} AND +${t}.installation_id = ${q}.installation_id`;
/** Golden items (known answers mixed into queues to measure reviewers) are not work: left out of every figure. */
const NOT_GOLDEN = `origin <> 'golden'`;
const ENDED_RUN = `('succeeded', 'failed', 'terminated', 'repair_required', 'superseded')`;
const INSERT = `INSERT INTO metric_rollups (installation_id, hour, metric, dims, bucket, value)`;

/** ?1 installation, ?2 hour start (ISO), ?3 hour end (ISO), ?4 the gauges' moment: the hour's end, or now for the current hour. */
export const ROLLUP_SQL: readonly string[] = [
  `${INSERT} SELECT ?1, ?2, 'reports.received', json_object('category', category, 'source', source), -1, COUNT(*)
    FROM reports WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3 GROUP BY category, source`,
  // Gauges: one row per queue every hour (0 when empty), so a step's last hour is its value.
  `${INSERT} SELECT ?1, ?2, m.metric, json_object('queue', q.id), -1,
      CASE m.metric WHEN 'queue.depth' THEN COALESCE(live.depth, 0) ELSE COALESCE(live.oldest, 0) END
    FROM queues q
    CROSS JOIN (SELECT 'queue.depth' AS metric UNION ALL SELECT 'queue.oldest_seconds') m
    LEFT JOIN (
      SELECT queue_id, COUNT(*) AS depth, ROUND(MAX((julianday(?4) - julianday(created_at)) * 86400.0)) AS oldest FROM (
        SELECT t.queue_id, t.created_at FROM queues q2 JOIN human_tasks t ON t.installation_id = q2.installation_id AND t.queue_id = q2.id AND t.state IN ('open', 'claimed')
          WHERE q2.installation_id = ?1 AND t.created_at < ?4 AND ${NOT_GOLDEN}
        UNION ALL
        SELECT t.queue_id, t.created_at FROM queues q3 CROSS JOIN human_tasks t ON ${QUEUE_ENDED_SINCE("q3", "t", "?4")}
          WHERE q3.installation_id = ?1 AND t.created_at < ?4 AND t.${NOT_GOLDEN}
      ) GROUP BY queue_id
    ) live ON live.queue_id = q.id
    WHERE q.installation_id = ?1 AND q.created_at < ?4`,
  // A task's first action (its claim, else its completion) is no later than its last change, and a
  // task that has one is claimed or has ended: the queue's claimed tasks, and its tasks ended since
  // the hour began (the range the gauges walk), hold every first action of the hour.
  `${INSERT} SELECT ?1, ?2, 'queue.first_action_seconds', json_object('queue', queue_id), bucket, COUNT(*) FROM (
      SELECT queue_id, ${BUCKET_SQL} AS bucket FROM (
        SELECT t.queue_id, (julianday(COALESCE(t.claimed_at, t.completed_at)) - julianday(t.created_at)) * 86400.0 AS s FROM queues q CROSS JOIN human_tasks t
          ON t.installation_id = q.installation_id AND t.queue_id = q.id AND t.state = 'claimed'
          WHERE q.installation_id = ?1 AND t.claimed_at >= ?2 AND t.claimed_at < ?3 AND t.${NOT_GOLDEN}
        UNION ALL
        SELECT t.queue_id, (julianday(COALESCE(t.claimed_at, t.completed_at)) - julianday(t.created_at)) * 86400.0 AS s FROM queues q CROSS JOIN human_tasks t ON ${QUEUE_ENDED_SINCE("q", "t", "?2")}
          WHERE q.installation_id = ?1 AND COALESCE(t.claimed_at, t.completed_at) >= ?2 AND COALESCE(t.claimed_at, t.completed_at) < ?3 AND t.${NOT_GOLDEN}
      )
    ) GROUP BY queue_id, bucket`,
  // Per queue and state (every state: the list is what lets the walk use human_tasks_queue_listing,
  // one due-time range for each), the tasks due in the hour.
  `${INSERT} SELECT ?1, ?2, 'tasks.sla_breaches', json_object('queue', t.queue_id), -1, COUNT(*) FROM queues q CROSS JOIN human_tasks t
    WHERE q.installation_id = ?1 AND t.installation_id = ?1 AND t.queue_id = q.id AND t.state IN ('open', 'claimed', 'completed', 'expired', 'cancelled')
      AND t.due_at >= ?2 AND t.due_at < ?3 AND t.due_at <= ?4 AND t.${NOT_GOLDEN}
      AND NOT (t.state = 'completed' AND t.completed_at <= t.due_at) AND NOT (t.state = 'cancelled' AND t.updated_at <= t.due_at)
    GROUP BY t.queue_id`,
  `${INSERT} SELECT ?1, ?2, 'tasks.ended', json_object('queue', t.queue_id, 'state', t.state), -1, COUNT(*) FROM queues q CROSS JOIN human_tasks t ON ${QUEUE_ENDED_SINCE("q", "t", "?2")}
    WHERE q.installation_id = ?1 AND t.updated_at < ?3 AND t.${NOT_GOLDEN}
    GROUP BY t.queue_id, t.state`,
  `${INSERT} SELECT ?1, ?2, 'runs.created', json_object('mode', authority_mode, 'version', workflow_version_id), -1, COUNT(*) FROM workflow_runs
    WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3 GROUP BY authority_mode, workflow_version_id`,
  `${INSERT} SELECT ?1, ?2, 'runs.ended', json_object('code', error_code, 'state', state, 'version', workflow_version_id), -1, COUNT(*) FROM workflow_runs
    WHERE installation_id = ?1 AND state IN ${ENDED_RUN} AND COALESCE(finished_at, updated_at) >= ?2 AND COALESCE(finished_at, updated_at) < ?3
    GROUP BY error_code, state, workflow_version_id`,
  `${INSERT} SELECT ?1, ?2, 'deliveries.created', '{}', -1, n FROM (SELECT COUNT(*) AS n FROM webhook_deliveries
    WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3) WHERE n > 0`,
  `${INSERT} SELECT ?1, ?2, 'deliveries.ended', json_object('state', state), -1, COUNT(*) FROM webhook_deliveries
    WHERE installation_id = ?1 AND state IN ('delivered', 'dead') AND updated_at >= ?2 AND updated_at < ?3 GROUP BY state`,
  `${INSERT} SELECT ?1, ?2, 'deliveries.pending', '{}', -1,
      (SELECT COUNT(*) FROM webhook_endpoints e JOIN webhook_deliveries d ON d.endpoint_id = e.id AND d.state = 'pending' AND d.created_at < ?4 WHERE e.installation_id = ?1)
      + (SELECT COUNT(*) FROM webhook_deliveries WHERE installation_id = ?1 AND state IN ('delivered', 'dead') AND updated_at >= ?4 AND created_at < ?4)`,
  `${INSERT} SELECT ?1, ?2, 'decisions.made', json_object('automated', d.automated_decision, 'mode', COALESCE(r.authority_mode, 'manual')), -1, COUNT(*)
    FROM decisions d LEFT JOIN workflow_runs r ON r.id = d.run_id AND r.installation_id = d.installation_id
    WHERE d.installation_id = ?1 AND d.created_at >= ?2 AND d.created_at < ?3 GROUP BY d.automated_decision, COALESCE(r.authority_mode, 'manual')`,
  `${INSERT} SELECT ?1, ?2, 'appeals.created', '{}', -1, n FROM (SELECT COUNT(*) AS n FROM appeals
    WHERE installation_id = ?1 AND created_at >= ?2 AND created_at < ?3) WHERE n > 0`,
  `${INSERT} SELECT ?1, ?2, 'appeals.decided', json_object('outcome', state), -1, COUNT(*) FROM appeals
    WHERE installation_id = ?1 AND decided_at >= ?2 AND decided_at < ?3 AND state IN ('upheld', 'overturned') GROUP BY state`,
];

/** The highest `?N` of a statement: D1 wants exactly that many bindings. */
const parameterCount = (sql: string) => Math.max(...[...sql.matchAll(/\?(\d)/gu)].map((m) => Number(m[1])));

export const hourStart = (ms: number): number => Math.floor(ms / HOUR_MS) * HOUR_MS;
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Recomputes one hour of one installation (replacing what was there); returns the rows written.
 * `mark` (the sweep) records an hour that has ended by `now` as rolled; the sweep alone marks, so
 * an on-demand recompute (POST /metrics/rollup, which may include the current hour's figures so
 * far) never makes the sweep skip an hour.
 */
export async function rollupHour(db: D1Database, installationId: string, hourMs: number, now: Date = new Date(), mark = true): Promise<number> {
  const h = iso(hourStart(hourMs));
  const t = iso(hourStart(hourMs) + HOUR_MS);
  const complete = hourStart(hourMs) + HOUR_MS <= now.getTime();
  const values = [installationId, h, t, complete ? t : now.toISOString()];
  const results = await db.batch([
    db.prepare(`DELETE FROM metric_rollups WHERE installation_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND hour = ?3`).bind(installationId, JSON.stringify(METRIC_NAMES), h),
    ...ROLLUP_SQL.map((sql) => db.prepare(sql).bind(...values.slice(0, parameterCount(sql)))),
    ...rollupDayStatements(db, installationId, hourMs),
    ...(mark && complete
      ? [db.prepare(`INSERT INTO metric_rollup_hours (installation_id, hour, rolled_at) VALUES (?1, ?2, ?3) ON CONFLICT (installation_id, hour) DO UPDATE SET rolled_at = excluded.rolled_at`).bind(installationId, h, now.toISOString())]
      : []),
  ]);
  return results.slice(1, 1 + ROLLUP_SQL.length).reduce((sum, r) => sum + (r.meta.changes ?? 0), 0);
}

const DAY_MS = 24 * HOUR_MS;
const SUMMED = JSON.stringify(METRIC_NAMES.filter((name) => METRICS[name].kind !== "gauge"));
const GAUGES = JSON.stringify(METRIC_NAMES.filter((name) => METRICS[name].kind === "gauge"));

/** Recomputes the UTC day holding `hourMs` in metric_rollups_daily from its hourly rows (sums; gauges at the last rolled hour). */
export function rollupDayStatements(db: D1Database, installationId: string, hourMs: number): D1PreparedStatement[] {
  const day = Math.floor(hourMs / DAY_MS) * DAY_MS;
  const [d, e] = [iso(day), iso(day + DAY_MS)];
  return [
    db.prepare(`DELETE FROM metric_rollups_daily WHERE installation_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND day = ?3`).bind(installationId, JSON.stringify(METRIC_NAMES), d),
    db
      .prepare(`INSERT INTO metric_rollups_daily (installation_id, day, metric, dims, bucket, value)
        SELECT ?1, ?3, metric, dims, bucket, SUM(value) FROM metric_rollups
        WHERE installation_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND hour >= ?3 AND hour < ?4 GROUP BY metric, dims, bucket`)
      .bind(installationId, SUMMED, d, e),
    db
      .prepare(`INSERT INTO metric_rollups_daily (installation_id, day, metric, dims, bucket, value)
        SELECT ?1, ?3, metric, dims, bucket, value FROM (
          SELECT metric, dims, bucket, MAX(hour) AS last, value FROM metric_rollups
          WHERE installation_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND hour >= ?3 AND hour < ?4 GROUP BY metric, dims, bucket
        )`)
      .bind(installationId, GAUGES, d, e),
  ];
}

/** The most hours one `POST /metrics/rollup` recomputes. */
export const MAX_ROLLUP_HOURS = 48;

/** Recomputes the hours from `from` to `to` (inclusive; default the last 24 hours up to the current one) of one installation. */
export async function rollupRange(db: D1Database, installationId: string, range: { from?: number | null; to?: number | null }, now = new Date()) {
  const to = hourStart(Math.min(range.to ?? now.getTime(), now.getTime()));
  const from = hourStart(range.from ?? to - 23 * HOUR_MS);
  const count = (to - from) / HOUR_MS + 1;
  if (count < 1) throw new AppError("metrics.invalid_range", "from must not be after to.", { status: 400, details: { parameter: "from" } });
  if (count > MAX_ROLLUP_HOURS) throw new AppError("metrics.range_too_large", `At most ${MAX_ROLLUP_HOURS} hours per request; the schedule rolls up the rest.`, { status: 400, details: { parameter: "from" } });
  let rows = 0;
  for (let hour = from; hour <= to; hour += HOUR_MS) rows += await rollupHour(db, installationId, hour, now, false);
  return { from: iso(from), to: iso(to + HOUR_MS), hours: count, rows };
}

/** How far back a new installation (or one whose rollups stopped) is rolled up. */
export const ROLLUP_LOOKBACK_HOURS = 24 * 35;

/**
 * The `metrics.rollup` sweep: rolls up the complete hours not yet rolled, oldest first, at most
 * `maxHours` per run across installations (the next run goes on). An installation is rolled from
 * the hour it was created (at most ROLLUP_LOOKBACK_HOURS back) to the last complete hour.
 */
export async function sweepMetricRollups(env: Env, now: Date, maxHours = 48): Promise<Record<string, number>> {
  const lastComplete = hourStart(now.getTime()) - HOUR_MS;
  const floor = lastComplete - (ROLLUP_LOOKBACK_HOURS - 1) * HOUR_MS;
  const { results } = await env.DB.prepare(`
    SELECT id, createdAt, lastHour FROM (
      SELECT i.id, i.created_at AS createdAt, (SELECT MAX(h.hour) FROM metric_rollup_hours h WHERE h.installation_id = i.id) AS lastHour FROM installations i
    ) WHERE (lastHour IS NULL AND createdAt < ?3) OR lastHour < ?1 ORDER BY lastHour IS NOT NULL, lastHour LIMIT ?2`)
    .bind(iso(lastComplete), maxHours, iso(lastComplete + HOUR_MS))
    .all<{ id: string; createdAt: string; lastHour: string | null }>();
  let hours = 0;
  let rows = 0;
  let installations = 0;
  for (const installation of results) {
    if (hours >= maxHours) break;
    const first = installation.lastHour ? Date.parse(installation.lastHour) + HOUR_MS : hourStart(Date.parse(installation.createdAt));
    let hour = Math.max(first, floor);
    if (hour > lastComplete) continue;
    installations++;
    for (; hour <= lastComplete && hours < maxHours; hour += HOUR_MS) {
      rows += await rollupHour(env.DB, installation.id, hour, now);
      hours++;
    }
  }
  // More installations behind than this run took, or one still behind: another slice has work now.
  return { installations, hours, rows, more: hours >= maxHours || results.length === maxHours ? 1 : 0 };
}
