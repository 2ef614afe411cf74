// Audit events: written in the same D1 batch as the state change they describe.
import { rowGuardClause, type RowGuard } from "../lib/d1";
import { canonicalJson } from "./canonical-json";
import { auditKeys, signText } from "./keys";
import { auditEventId, storeCreatedAt, storeMac } from "./stored";
import type { AuditRow } from "./chain";

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
export function auditStatement(db: D1Database, event: AuditEventInput, onlyIf?: RowGuard & { table: (typeof GUARD_TABLES)[number] }): D1PreparedStatement {
  if (onlyIf && !GUARD_TABLES.includes(onlyIf.table)) throw new Error("audit_guard_table_invalid");
  const guard = onlyIf ? rowGuardClause(onlyIf, 12) : { sql: "", binds: [] };
  const id = auditEventId(event.installationId, event.idempotencyKey);
  const detailsJson = canonicalJson(event.details ?? {});
  const row = {
    id,
    installationId: event.installationId,
    idempotencyKey: null,
    action: event.action,
    actorType: event.actor.type,
    actorId: event.actor.id,
    targetType: event.target.type,
    targetId: event.target.id,
    detailsJson,
    createdAt: event.at,
  };
  const signed = signText(auditKeys(), entryMacText(row));
  return db
    .prepare(`
    INSERT INTO audit_events (
      id, installation_id, action, actor_type, actor_id,
      target_type, target_id, details_json, created_at, entry_mac, seq
    ) SELECT ?1, ?2, ?4, ?5, ?6, ?7, ?8, ?9, CASE WHEN typeof(?10) = 'text' THEN ?10 ELSE CAST(?10 AS INTEGER) END, ?11, (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE installation_id = ?2)
    WHERE NOT EXISTS (SELECT 1 FROM audit_events WHERE idempotency_key = ?3 AND installation_id = ?2) ${guard.sql.replace(/^WHERE /u, "AND ")}
    ON CONFLICT (id) DO NOTHING
  `)
    .bind(id, row.installationId, event.idempotencyKey, row.action, row.actorType, row.actorId, row.targetType, row.targetId, detailsJson, storeCreatedAt(row.createdAt), signed ? storeMac(signed.keyId, signed.mac) : null, ...guard.binds);
}

/** The actor recorded for everything the workflow runtime does on its own. */
export const RUNTIME_ACTOR = { type: "system", id: "workflow-runtime" } as const;
