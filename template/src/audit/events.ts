// Audit events: written in the same D1 batch as the state change they describe.
import { rowGuardClause, type RowGuard } from "../lib/d1";
import { canonicalJson } from "./canonical-json";
import { auditKeys, signText } from "./keys";
import { auditEventId, storeCreatedAt, storeMac } from "./stored";
import type { AuditRow } from "./chain";
import { stablePlanSql } from "../lib/stable-plan";

export interface AuditEventInput {
  installationId: string;
  /** Unique per logical event: a repeated call with the same key writes nothing. */
  idempotencyKey: string;
  action: string;
  actor: { type: "system" | "api_key" | "admin" | "user"; id: string };
  target: { type: string; id: string };
  details?: Record<string, unknown>;
  at: string;
}

/**
 * The fields an event's MAC covers (not `seq`, which the insert assigns), as one text: v1 names the
 * idempotency key; v2 (a lean event, stored.ts) has none, its id being the key's digest.
 */
export function entryMacText(row: Omit<AuditRow, "seq" | "entryMac" | "prevHash" | "hash">): string {
  const common = {
    id: row.id,
    installationId: row.installationId,
    action: row.action,
    actor: { type: row.actorType, id: row.actorId },
    target: { type: row.targetType, id: row.targetId },
    details: row.detailsJson,
    createdAt: row.createdAt,
  };
  return canonicalJson(row.idempotencyKey === null ? { v: 2, ...common } : { v: 1, ...common, idempotencyKey: row.idempotencyKey });
}

const GUARD_TABLES = [
  "workflow_events",
  "workflow_waits",
  "reports",
  "appeals",
  "workflow_runs",
  "human_tasks",
  "policies",
  "policy_versions",
  "api_keys",
  "action_proposals",
  "handoffs",
  "alerts",
  "triggers",
  "action_types",
  "trigger_demotions",
  "redress_messages",
  "messages",
  "notifier_sanctions",
  "trusted_flaggers",
  "backtests",
  "bulk_actions",
  "rule_sets",
] as const;

/** A guard on an audit event: written only if that row exists by then in the batch. */
type AuditGuard = RowGuard & { table: (typeof GUARD_TABLES)[number] };

/**
 * An `INSERT OR IGNORE` for one audit event, to be put in the caller's batch. With `onlyIf`, the
 * event is written only when that row exists by then in the batch, with the given column values
 * (so a batch whose guarded write did nothing records nothing). The one builder of audit rows.
 * Each row carries its MAC (`entry_mac`, under the audit key) from the start, so an event edited
 * before the sealer chains it is caught (see chain.ts), and its `seq` (the installation's next, read
 * from audit_events_seq in the same statement: D1 runs one statement at a time), so the row is
 * written once; migration 0003's trigger numbers only rows inserted without one.
 *
 * The row is a lean (v2) one (stored.ts): its id is the digest of the installation and the
 * idempotency key, and the unique index on id makes a repeated write do nothing; the key itself is
 * not stored. An event written under the same key before migration 0036 (a v1 row, which stores
 * the key) also makes it do nothing (audit_events_idempotency, partial: v1 rows only).
 */
export function auditStatement(db: D1Database, event: AuditEventInput, onlyIf?: AuditGuard): D1PreparedStatement {
  if (onlyIf && !GUARD_TABLES.includes(onlyIf.table)) throw new Error("audit_guard_table_invalid");
  const guard = onlyIf ? rowGuardClause(onlyIf, 12) : { sql: "", binds: [] };
  const row = storedRow(event);
  const { id, detailsJson } = row;
  const statement = db
    .prepare(
      stablePlanSql(`
    INSERT INTO audit_events (
      id, installation_id, action, actor_type, actor_id,
      target_type, target_id, details_json, created_at, entry_mac, seq
    ) SELECT ?1, ?2, ?4, ?5, ?6, ?7, ?8, ?9, CASE WHEN typeof(?10) = 'text' THEN ?10 ELSE CAST(?10 AS INTEGER) END, ?11, (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE installation_id = ?2)
    WHERE NOT EXISTS (SELECT 1 FROM audit_events WHERE idempotency_key = ?3 AND installation_id = ?2) ${guard.sql.replace(/^WHERE /u, "AND ")}
    ON CONFLICT (id) DO NOTHING
  `),
    )
    .bind(id, row.installationId, event.idempotencyKey, row.action, row.actorType, row.actorId, row.targetType, row.targetId, detailsJson, storeCreatedAt(row.createdAt), row.entryMac, ...guard.binds);
  BUILT.set(statement, { events: [event], rows: [listRow(event, row)], ...(onlyIf ? { lastOnlyIf: onlyIf } : {}) });
  return statement;
}

/**
 * The statements auditStatement and auditEventsStatement built, with their events, the events'
 * rows as bound (so combining statements does not compute a MAC again) and the last one's guard
 * (for combineAuditStatements: a combined statement combined again is its events).
 */
const BUILT = new WeakMap<D1PreparedStatement, { events: readonly AuditEventInput[]; rows: readonly ListRow[]; lastOnlyIf?: AuditGuard }>();

/** An event's stored row as auditEventsSql's list (?2) holds it: id, idempotency key, action, actor type and id, target type and id, details, created_at, MAC. */
type ListRow = [string, string, string, string, string, string, string, string, string | number, string | null];

function listRow(event: AuditEventInput, row: ReturnType<typeof storedRow> = storedRow(event)): ListRow {
  return [row.id, event.idempotencyKey, row.action, row.actorType, row.actorId, row.targetType, row.targetId, row.detailsJson, storeCreatedAt(row.createdAt), row.entryMac];
}

/** A lean (v2) row as auditStatement writes it, its MAC included (stored form), without its seq. */
function storedRow(event: AuditEventInput) {
  const row = {
    id: auditEventId(event.installationId, event.idempotencyKey),
    installationId: event.installationId,
    idempotencyKey: null,
    action: event.action,
    actorType: event.actor.type,
    actorId: event.actor.id,
    targetType: event.target.type,
    targetId: event.target.id,
    detailsJson: canonicalJson(event.details ?? {}),
    createdAt: event.at,
  };
  const signed = signText(auditKeys(), entryMacText(row));
  return { ...row, entryMac: signed ? storeMac(signed.keyId, signed.mac) : null };
}

/** auditEventsStatement's SQL: ?1 the installation, ?2 the JSON list of events, then `lastGuard`'s own (from ?3); planned once (lib/stable-plan.ts). */
export function auditEventsSql(lastGuard: string | null): string {
  return stablePlanSql(`
    INSERT INTO audit_events (
      id, installation_id, action, actor_type, actor_id,
      target_type, target_id, details_json, created_at, entry_mac, seq
    ) SELECT id, ?1, action, actor_type, actor_id, target_type, target_id, details_json, created_at, entry_mac,
      (SELECT COALESCE(MAX(seq), 0) FROM audit_events WHERE installation_id = ?1) + ROW_NUMBER() OVER (ORDER BY ord)
    FROM (SELECT CAST(key AS INTEGER) AS ord, value ->> '$[0]' AS id, value ->> '$[1]' AS idempotency_key, value ->> '$[2]' AS action,
        value ->> '$[3]' AS actor_type, value ->> '$[4]' AS actor_id, value ->> '$[5]' AS target_type, value ->> '$[6]' AS target_id,
        value ->> '$[7]' AS details_json, value ->> '$[8]' AS created_at, value ->> '$[9]' AS entry_mac
      FROM json_each(?2)) AS e
    WHERE NOT EXISTS (SELECT 1 FROM json_each(?2) AS earlier WHERE earlier.value ->> '$[0]' = e.id AND CAST(earlier.key AS INTEGER) < e.ord)
      AND NOT EXISTS (SELECT 1 FROM audit_events WHERE id = e.id)
      AND NOT EXISTS (SELECT 1 FROM audit_events WHERE idempotency_key = e.idempotency_key AND installation_id = ?1)
      ${lastGuard ?? ""}
  `);
}

/**
 * One statement that writes several events of one installation, with exactly the rows (id, MAC,
 * details, created_at) the events' own auditStatement statements would write one after another,
 * and the seq numbers they would take: events already written (the same id, or a v1 row under the
 * same idempotency key), repeats of an earlier event of the list, and the last event when
 * `lastOnlyIf` is given and its row does not exist are left out first, then the rest are numbered
 * consecutively in list order after the installation's last seq — so a skipped event leaves no gap
 * and a repeated batch writes nothing. SQLite computes the SELECT (the window function, which reads
 * audit_events, runs over the rows the WHERE kept) in full before the first row goes in. No ON
 * CONFLICT: the filter leaves nothing that could conflict, and a conflict anyway fails the batch
 * loudly rather than leaving a gap in seq.
 */
export function auditEventsStatement(db: D1Database, events: readonly AuditEventInput[], lastOnlyIf?: AuditGuard): D1PreparedStatement {
  return eventsStatement(
    db,
    events,
    events.map((event) => listRow(event)),
    lastOnlyIf,
  );
}

/** auditEventsStatement with the events' rows as their own statements bound them (combineAuditStatements). */
function eventsStatement(db: D1Database, events: readonly AuditEventInput[], rows: readonly ListRow[], lastOnlyIf?: AuditGuard): D1PreparedStatement {
  if (lastOnlyIf && !GUARD_TABLES.includes(lastOnlyIf.table)) throw new Error("audit_guard_table_invalid");
  const guard = lastOnlyIf ? rowGuardClause(lastOnlyIf, 3) : null;
  const { installationId, list } = eventList(events, rows);
  const lastGuard = guard ? `AND (e.ord < ${events.length - 1} OR ${guard.sql.replace(/^WHERE /u, "")})` : null;
  const statement = db.prepare(auditEventsSql(lastGuard)).bind(installationId, list, ...(guard?.binds ?? []));
  BUILT.set(statement, { events, rows, ...(lastOnlyIf ? { lastOnlyIf } : {}) });
  return statement;
}

/** auditEventsSql's list (?2): each event's stored row as an array, of one installation. */
function eventList(events: readonly AuditEventInput[], rows: readonly ListRow[] = events.map((event) => listRow(event))): { installationId: string; list: string } {
  const installationId = events[0]?.installationId;
  if (installationId === undefined || events.some((event) => event.installationId !== installationId)) throw new Error("audit_events_installation_mixed");
  return { installationId, list: JSON.stringify(rows) };
}

/**
 * One statement for events of one installation of which each is written only if the row its target
 * names (`onlyIf.table`, id = the event's target id) exists by then in the batch with `onlyIf.where`'s
 * values: the events of the writes a batch may have made, for a statement that made one of them
 * (e.g. a claim of the first of several tasks still claimable: an event per task, the one it took
 * holds). The events written have exactly the rows (id, MAC, details) their own auditStatement
 * statements, each guarded by its target's row, would write one after another, numbered
 * consecutively in list order; an event already written (the same id) is left out. Never combined
 * with others (combineAuditStatements leaves it as it is): its guards are its own.
 */
export function auditEachTargetStatement(db: D1Database, events: readonly AuditEventInput[], onlyIf: Omit<AuditGuard, "id">): D1PreparedStatement {
  if (!GUARD_TABLES.includes(onlyIf.table)) throw new Error("audit_guard_table_invalid");
  const guard = rowGuardClause({ table: onlyIf.table, ...(onlyIf.where ? { where: onlyIf.where } : {}) }, 3, "e.target_id");
  const { installationId, list } = eventList(events);
  return db.prepare(auditEventsSql(guard.sql.replace(/^WHERE /u, "AND "))).bind(installationId, list, ...guard.binds);
}

/**
 * A batch with each run of two or more audit events of one installation (auditStatement's, with no
 * other audit event between them) written by ONE statement (auditEventsStatement) where the last of
 * the run stood: the events keep their order (so their seq), and the rows they describe, written
 * before them, still come first. A run is of unguarded events (no `onlyIf`), and may end with one
 * guarded event: the combined statement takes that event's place, so its guard is evaluated at the
 * same point of the batch as before (an event moved to a later point is only ever an unguarded
 * one). Everything else stays as it is. The batch's answers are one per statement of the new list,
 * so a caller that reads them by position must not use this.
 */
export function combineAuditStatements(db: D1Database, statements: readonly D1PreparedStatement[]): D1PreparedStatement[] {
  type Run = { at: number[]; events: AuditEventInput[]; rows: ListRow[]; lastOnlyIf?: AuditGuard };
  const runs: Run[] = [];
  let current: Run | null = null;
  for (const [index, statement] of statements.entries()) {
    const built = BUILT.get(statement);
    if (!built) continue;
    if (current && current.events[0]!.installationId !== built.events[0]!.installationId) current = null;
    if (!current) {
      current = { at: [], events: [], rows: [] };
      runs.push(current);
    }
    current.at.push(index);
    current.events.push(...built.events);
    current.rows.push(...built.rows);
    if (built.lastOnlyIf) {
      // A guarded event ends its run (its guard must not be evaluated later than it was).
      current.lastOnlyIf = built.lastOnlyIf;
      current = null;
    }
  }
  const replaced = new Map<number, D1PreparedStatement | null>();
  for (const run of runs) {
    if (run.at.length < 2) continue;
    for (const index of run.at) replaced.set(index, null);
    replaced.set(run.at.at(-1)!, eventsStatement(db, run.events, run.rows, run.lastOnlyIf));
  }
  if (replaced.size === 0) return [...statements];
  return statements.flatMap((statement, index) => {
    const replacement = replaced.get(index);
    return replacement === undefined ? [statement] : replacement === null ? [] : [replacement];
  });
}

/**
 * A batch with ALL its audit events (auditStatement's and auditEventsStatement's, of one
 * installation) written by ONE statement where the last of them stood, each event under its own
 * guard (`onlyIf`; for a combined statement, on its last event), evaluated there. Unlike
 * combineAuditStatements, a guarded event may move later: only for a caller whose batch removes
 * no row an event is guarded on after that event's place (so each guard finds there what it found
 * before; intake's rows are only ever inserted). The events keep their order and their rows, and
 * what an event's guard or idempotency leaves out leaves no gap in seq (auditEventsStatement). The
 * batch's answers are one per statement of the new list.
 */
export function mergeAuditStatements(db: D1Database, statements: readonly D1PreparedStatement[]): D1PreparedStatement[] {
  const at: number[] = [];
  const guarded: Array<{ event: AuditEventInput; row: ListRow; onlyIf?: AuditGuard }> = [];
  for (const [index, statement] of statements.entries()) {
    const built = BUILT.get(statement);
    if (!built) continue;
    at.push(index);
    for (const [position, event] of built.events.entries()) guarded.push({ event, row: built.rows[position]!, ...(built.lastOnlyIf && position === built.events.length - 1 ? { onlyIf: built.lastOnlyIf } : {}) });
  }
  if (at.length < 2) return [...statements];
  const last = at.at(-1)!;
  const merged = auditEventsGuardedStatement(db, guarded);
  return statements.flatMap((statement, index) => (index === last ? [merged] : at.includes(index) ? [] : [statement]));
}

/** auditEventsStatement with a guard per event (each evaluated where the statement stands). */
function auditEventsGuardedStatement(db: D1Database, guarded: ReadonlyArray<{ event: AuditEventInput; row: ListRow; onlyIf?: AuditGuard }>): D1PreparedStatement {
  const events = guarded.map((item) => item.event);
  const installationId = events[0]?.installationId;
  if (installationId === undefined || events.some((event) => event.installationId !== installationId)) throw new Error("audit_events_installation_mixed");
  const binds: (string | number | null)[] = [];
  const cases: string[] = [];
  for (const [ord, { onlyIf }] of guarded.entries()) {
    if (!onlyIf) continue;
    if (!GUARD_TABLES.includes(onlyIf.table)) throw new Error("audit_guard_table_invalid");
    const clause = rowGuardClause(onlyIf, 3 + binds.length);
    binds.push(...clause.binds);
    cases.push(`WHEN ${ord} THEN ${clause.sql.replace(/^WHERE /u, "")}`);
  }
  const list = guarded.map((item) => item.row);
  const guards = cases.length > 0 ? `AND CASE e.ord ${cases.join(" ")} ELSE 1 END` : null;
  // Not registered in BUILT: its guards are per event, which a later combination could not keep.
  return db.prepare(auditEventsSql(guards)).bind(installationId, JSON.stringify(list), ...binds);
}

/** The actor recorded for everything the workflow runtime does on its own. */
export const RUNTIME_ACTOR = { type: "system", id: "workflow-runtime" } as const;
