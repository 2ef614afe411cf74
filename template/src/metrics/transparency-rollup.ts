// The transparency report's daily rollups: per installation and complete UTC day, the rows each of
// the report's own statements (transparency-queries.ts) returns for that day, stored as groups
// (transparency_rollups: family, the group's fields as JSON, its count), and the histograms of the
// two medians (time to act on a notice, time to decide a complaint). A report over a long period
// sums the rolled days (rows read grow with days × groups, not with reports) and counts only the
// days not rolled up (the edges of the period, today) from the rows. One D1 batch per day,
// replacing the day, so a re-run writes the same figures.
import { bucketQuantile, BUCKET_SQL } from "./rollup";
import { AUTOMATED_VERSIONS_SQL, COMPLAINTS_DECIDED_SQL, COMPLAINTS_RECEIVED_SQL, DECISIONS_SQL, NOTIFIER_SANCTIONS_SQL, QA_SQL, REPORTS_RECEIVED_SQL, REVERSALS_SQL, type TransparencyRows } from "./transparency-queries";

const DAY_MS = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();
export const dayStart = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;

/** Notices received in the period by source, bucketed by the time to their first decision (by ?4, the rollup's moment). */
const TIME_TO_ACT_HISTOGRAM_SQL = `
  SELECT source, ${BUCKET_SQL} AS bucket, COUNT(*) AS n FROM (
    SELECT r.source AS source,
      (julianday((SELECT MIN(d.created_at) FROM decisions d WHERE d.report_id = r.id AND +d.installation_id = ?1 AND d.created_at < ?4)) - julianday(r.created_at)) * 86400.0 AS s
    FROM reports r
    WHERE r.installation_id = ?1 AND r.created_at >= ?2 AND r.created_at < ?3 AND r.source IN ('notice', 'trusted_flagger')
  ) WHERE s IS NOT NULL GROUP BY source, bucket`;

/** Complaints decided in the period, bucketed by the time from receipt to decision. */
const COMPLAINT_TIME_HISTOGRAM_SQL = `
  SELECT ${BUCKET_SQL} AS bucket, COUNT(*) AS n FROM (
    SELECT (julianday(decided_at) - julianday(created_at)) * 86400.0 AS s FROM appeals
    WHERE installation_id = ?1 AND decided_at >= ?2 AND decided_at < ?3
  ) GROUP BY bucket`;

/** Every family: the statement (?1 installation, ?2 from, ?3 to, ?4 the moment it is computed) and the fields that make a group. */
const FAMILIES = {
  reports: { sql: REPORTS_RECEIVED_SQL, fields: ["source", "category"] },
  decisions: { sql: DECISIONS_SQL, fields: ["source", "category", "ground", "detection", "automation", "restrictions"] },
  complaintsReceived: { sql: COMPLAINTS_RECEIVED_SQL, fields: ["role"] },
  complaintsDecided: { sql: COMPLAINTS_DECIDED_SQL, fields: ["outcome", "role", "automation", "byAutomation"] },
  notifierSanctions: { sql: NOTIFIER_SANCTIONS_SQL, fields: ["kind"] },
  // Every version a day (the report keeps the ten with most decisions over the whole period).
  automatedVersions: { sql: AUTOMATED_VERSIONS_SQL.replace(/\s+LIMIT 10\s*$/u, ""), fields: ["versionId"] },
  timeToAct: { sql: TIME_TO_ACT_HISTOGRAM_SQL, fields: ["source", "bucket"] },
  complaintTime: { sql: COMPLAINT_TIME_HISTOGRAM_SQL, fields: ["bucket"] },
} as const;
/** Single-row sums: each column is a group of its own. */
const SUMS = {
  reversals: { sql: REVERSALS_SQL, fields: ["reversed", "byAutomation", "withStatement"] },
  qa: { sql: QA_SQL, fields: ["reviewed", "agreed"] },
} as const;
type Family = keyof typeof FAMILIES | keyof typeof SUMS;

const params = (sql: string) => Math.max(...[...sql.matchAll(/\?(\d)/gu)].map((m) => Number(m[1])));

/** The statements that compute every family over [from, to) as (family, row_json, n) rows, ?1..?4 bound as for the report. */
function familyStatements(db: D1Database, installationId: string, from: string, to: string, at: string, insert: string | null): D1PreparedStatement[] {
  const values = [installationId, from, to, at];
  const out: D1PreparedStatement[] = [];
  for (const [family, { sql, fields }] of Object.entries(FAMILIES)) {
    const select = `SELECT '${family}' AS family, json_object(${fields.map((f) => `'${f}', x.${f}`).join(", ")}) AS row_json, x.n AS n FROM (${sql}) x`;
    out.push(db.prepare(insert ? `${insert} SELECT ?1, ?2, family, row_json, n FROM (${select})` : select).bind(...values.slice(0, Math.max(insert ? 2 : 0, params(sql)))));
  }
  for (const [family, { sql, fields }] of Object.entries(SUMS)) {
    const select = `SELECT '${family}' AS family, j.key AS row_json, COALESCE(j.value, 0) AS n FROM (${sql}) x, json_each(json_object(${fields.map((f) => `'${f}', x.${f}`).join(", ")})) j`;
    out.push(db.prepare(insert ? `${insert} SELECT ?1, ?2, family, row_json, n FROM (${select})` : select).bind(...values.slice(0, Math.max(insert ? 2 : 0, params(sql)))));
  }
  return out;
}

/** Rolls up one complete UTC day of one installation (replacing it); returns the group rows written. */
export async function rollupTransparencyDay(db: D1Database, installationId: string, dayMs: number, now: Date = new Date()): Promise<number> {
  const day = dayStart(dayMs);
  const [d, e] = [iso(day), iso(day + DAY_MS)];
  if (day + DAY_MS > now.getTime()) return 0; // only complete days
  // ?2 is the day's start (stored as `day`), ?3 its end; the statements' own ?2/?3 are the same bounds.
  const insert = `INSERT INTO transparency_rollups (installation_id, day, family, row_json, n)`;
  const results = await db.batch([
    db.prepare(`DELETE FROM transparency_rollups WHERE installation_id = ?1 AND day = ?2`).bind(installationId, d),
    ...familyStatements(db, installationId, d, e, now.toISOString(), insert),
    db.prepare(`INSERT INTO transparency_rollup_days (installation_id, day, rolled_at) VALUES (?1, ?2, ?3) ON CONFLICT (installation_id, day) DO UPDATE SET rolled_at = excluded.rolled_at`).bind(installationId, d, now.toISOString()),
  ]);
  return results.slice(1, -1).reduce((sum, r) => sum + (r.meta.changes ?? 0), 0);
}

/**
 * The `metrics.transparency_rollup` sweep: the complete days not rolled up yet, from the
 * installation's creation on, oldest first, at most `maxDays` per run (`more` while days are left).
 */
export async function sweepTransparencyRollups(env: Env, now: Date, maxDays = 30): Promise<Record<string, number>> {
  const lastComplete = dayStart(now.getTime()) - DAY_MS;
  const { results } = await env.DB.prepare(`
    SELECT id, createdAt, lastDay FROM (
      SELECT i.id, i.created_at AS createdAt, (SELECT MAX(t.day) FROM transparency_rollup_days t WHERE t.installation_id = i.id) AS lastDay FROM installations i
    ) WHERE (lastDay IS NULL AND createdAt < ?1) OR lastDay < ?2 ORDER BY lastDay IS NOT NULL, lastDay LIMIT ?3`)
    .bind(iso(lastComplete + DAY_MS), iso(lastComplete), maxDays)
    .all<{ id: string; createdAt: string; lastDay: string | null }>();
  let days = 0;
  let rows = 0;
  for (const installation of results) {
    let day = installation.lastDay ? Date.parse(installation.lastDay) + DAY_MS : dayStart(Date.parse(installation.createdAt));
    for (; day <= lastComplete && days < maxDays; day += DAY_MS) {
      rows += await rollupTransparencyDay(env.DB, installation.id, day, now);
      days++;
    }
    if (days >= maxDays) break;
  }
  return { installations: results.length, days, rows, more: days >= maxDays || results.length === maxDays ? 1 : 0 };
}

type Groups = Map<Family, Map<string, number>>;

function addGroup(groups: Groups, family: Family, rowJson: string, n: number): void {
  const fields: readonly string[] = (FAMILIES as Record<string, { fields: readonly string[] }>)[family]?.fields ?? [];
  // One key per group whichever statement produced it: the fields in the family's order.
  let key = rowJson;
  if (fields.length > 0) {
    const row = JSON.parse(rowJson) as Record<string, unknown>;
    key = JSON.stringify(fields.map((f) => row[f] ?? null));
  }
  const map = groups.get(family) ?? new Map<string, number>();
  map.set(key, (map.get(key) ?? 0) + Number(n));
  groups.set(family, map);
}

/** The rows of a family as the report's statements return them (group fields and `n`). */
function rowsOf<T>(groups: Groups, family: keyof typeof FAMILIES): T[] {
  const fields = FAMILIES[family].fields as readonly string[];
  return [...(groups.get(family) ?? new Map<string, number>())].map(([key, n]) => {
    const values = JSON.parse(key) as unknown[];
    return Object.fromEntries([...fields.map((f, i) => [f, values[i]]), ["n", n]]) as T;
  });
}

const sumOf = (groups: Groups, family: keyof typeof SUMS, field: string) => groups.get(family)?.get(field) ?? 0;

/**
 * The report's rows for a period from the daily rollups: rolled days summed in one statement,
 * every other stretch of the period (its partial first and last day, days not rolled up yet)
 * counted from the rows. The medians come from the histograms: each is the upper bound of the
 * bucket that holds it (rollup.ts, HISTOGRAM_BOUNDS), not the exact value the rows would give.
 */
export async function readTransparencyRowsFromRollups(db: D1Database, installationId: string, from: string, to: string, now: Date = new Date()): Promise<TransparencyRows> {
  const fromMs = Date.parse(from);
  const toMs = Date.parse(to);
  const firstDay = dayStart(fromMs) === fromMs ? fromMs : dayStart(fromMs) + DAY_MS;
  const { results: rolledDays } = await db
    .prepare(`SELECT day FROM transparency_rollup_days WHERE installation_id = ?1 AND day >= ?2 AND day < ?3 ORDER BY day`)
    .bind(installationId, iso(firstDay), iso(dayStart(toMs)))
    .all<{ day: string }>();
  const rolled = new Set(rolledDays.map((r) => Date.parse(r.day)));
  // The stretches not covered by a rolled day, merged where contiguous.
  const stretches: Array<[number, number]> = [];
  const uncovered = (start: number, end: number) => {
    if (end <= start) return;
    const last = stretches.at(-1);
    if (last && last[1] === start) last[1] = end;
    else stretches.push([start, end]);
  };
  let cursor = fromMs;
  for (let day = firstDay; day + DAY_MS <= toMs; day += DAY_MS) {
    if (!rolled.has(day)) continue;
    uncovered(cursor, day);
    cursor = day + DAY_MS;
  }
  uncovered(cursor, toMs);
  const groups: Groups = new Map();
  const statements: D1PreparedStatement[] = [];
  if (rolled.size > 0) {
    statements.push(
      db
        .prepare(`SELECT r.family, r.row_json, SUM(r.n) AS n FROM transparency_rollups r
          WHERE r.installation_id = ?1 AND r.day >= ?2 AND r.day < ?3
            AND EXISTS (SELECT 1 FROM transparency_rollup_days t WHERE t.installation_id = r.installation_id AND t.day = r.day)
          GROUP BY r.family, r.row_json`)
        .bind(installationId, iso(firstDay), iso(dayStart(toMs))),
    );
  }
  for (const [start, end] of stretches) statements.push(...familyStatements(db, installationId, iso(start), iso(end), iso(Math.min(end, now.getTime())), null));
  // One batch: a consistent snapshot, as the report read from the rows.
  const results = statements.length > 0 ? await db.batch<{ family: Family; row_json: string; n: number }>(statements) : [];
  for (const result of results) for (const row of result.results) addGroup(groups, row.family, row.row_json, row.n);

  const histogram = (family: "timeToAct" | "complaintTime", source: string | null) => {
    const counts = new Map<number, number>();
    for (const row of rowsOf<{ source?: string; bucket: number; n: number }>(groups, family)) {
      if (source !== null && source !== "*" && row.source !== source) continue;
      counts.set(row.bucket, (counts.get(row.bucket) ?? 0) + row.n);
    }
    let total = 0;
    for (const n of counts.values()) total += n;
    return { total, median: bucketQuantile(counts, 0.5) };
  };
  const sources = [...new Set(rowsOf<{ source: string }>(groups, "timeToAct").map((row) => row.source))];
  const versions = rowsOf<{ versionId: string; n: number }>(groups, "automatedVersions").sort((a, b) => b.n - a.n || (a.versionId < b.versionId ? -1 : 1));
  const complaintTime = histogram("complaintTime", null);
  return {
    reports: rowsOf(groups, "reports"),
    decisions: rowsOf(groups, "decisions"),
    timeToAct: ["*", ...sources].flatMap((source) => {
      const h = histogram("timeToAct", source);
      return h.total > 0 ? [{ source, acted: h.total, medianSeconds: h.median }] : [];
    }),
    complaintsReceived: rowsOf(groups, "complaintsReceived"),
    complaintsDecided: rowsOf(groups, "complaintsDecided"),
    complaintTime: { decided: complaintTime.total, medianSeconds: complaintTime.median },
    automatedVersions: versions.slice(0, 10),
    qa: { reviewed: sumOf(groups, "qa", "reviewed"), agreed: sumOf(groups, "qa", "agreed") },
    reversals: { reversed: sumOf(groups, "reversals", "reversed"), byAutomation: sumOf(groups, "reversals", "byAutomation"), withStatement: sumOf(groups, "reversals", "withStatement") },
    notifierSanctions: rowsOf(groups, "notifierSanctions"),
  };
}
