// Audit events: written in the same D1 batch as the state change they describe.
import { rowGuardClause, type RowGuard } from "../lib/d1";
import { canonicalJson } from "./canonical-json";

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

const GUARD_TABLES = ["workflow_events", "reports", "appeals", "workflow_runs", "human_tasks", "policies", "policy_versions", "api_keys"] as const;

/**
 * An `INSERT OR IGNORE` for one audit event, to be put in the caller's batch. With `onlyIf`, the
 * event is written only when that row exists by then in the batch, with the given column values
 * (so a batch whose guarded write did nothing records nothing). The one builder of audit rows.
 */
export function auditStatement(db: D1Database, event: AuditEventInput, onlyIf?: RowGuard & { table: (typeof GUARD_TABLES)[number] }): D1PreparedStatement {
  if (onlyIf && !GUARD_TABLES.includes(onlyIf.table)) throw new Error("audit_guard_table_invalid");
  const guard = onlyIf ? rowGuardClause(onlyIf, 11) : { sql: "", binds: [] };
  return db
    .prepare(`
    INSERT OR IGNORE INTO audit_events (
      id, installation_id, idempotency_key, action, actor_type, actor_id,
      target_type, target_id, details_json, created_at
    ) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 ${guard.sql}
  `)
    .bind(crypto.randomUUID(), event.installationId, event.idempotencyKey, event.action, event.actor.type, event.actor.id, event.target.type, event.target.id, canonicalJson(event.details ?? {}), event.at, ...guard.binds);
}

/** The actor recorded for everything the workflow runtime does on its own. */
export const RUNTIME_ACTOR = { type: "system", id: "workflow-runtime" } as const;
