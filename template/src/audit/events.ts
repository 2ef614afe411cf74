// Audit events: written in the same D1 batch as the state change they describe.
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

const GUARD_TABLES = ["workflow_events", "reports", "appeals", "workflow_runs"] as const;

/**
 * An `INSERT OR IGNORE` for one audit event, to be put in the caller's batch. With `onlyIf`, the
 * event is written only when that row exists by then in the batch (so a batch whose guarded
 * write did nothing records nothing).
 */
export function auditStatement(
  db: D1Database,
  event: AuditEventInput,
  onlyIf?: { table: (typeof GUARD_TABLES)[number]; id: string },
): D1PreparedStatement {
  if (onlyIf && !GUARD_TABLES.includes(onlyIf.table)) throw new Error("audit_guard_table_invalid");
  const guard = onlyIf ? `WHERE EXISTS (SELECT 1 FROM ${onlyIf.table} WHERE id = ?11)` : "";
  const statement = db.prepare(`
    INSERT OR IGNORE INTO audit_events (
      id, installation_id, idempotency_key, action, actor_type, actor_id,
      target_type, target_id, details_json, created_at
    ) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 ${guard}
  `);
  const binds = [
    crypto.randomUUID(), event.installationId, event.idempotencyKey, event.action, event.actor.type, event.actor.id,
    event.target.type, event.target.id, canonicalJson(event.details ?? {}), event.at,
  ];
  return onlyIf ? statement.bind(...binds, onlyIf.id) : statement.bind(...binds);
}

/** The actor recorded for everything the workflow runtime does on its own. */
export const RUNTIME_ACTOR = { type: "system", id: "workflow-runtime" } as const;
