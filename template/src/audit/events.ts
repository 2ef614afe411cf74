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

/** An `INSERT OR IGNORE` for one audit event, to be put in the caller's batch. */
export function auditStatement(db: D1Database, event: AuditEventInput): D1PreparedStatement {
  return db.prepare(`
    INSERT OR IGNORE INTO audit_events (
      id, installation_id, idempotency_key, action, actor_type, actor_id,
      target_type, target_id, details_json, created_at
    ) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
  `).bind(
    crypto.randomUUID(), event.installationId, event.idempotencyKey, event.action, event.actor.type, event.actor.id,
    event.target.type, event.target.id, canonicalJson(event.details ?? {}), event.at,
  );
}

/** The actor recorded for everything the workflow runtime does on its own. */
export const RUNTIME_ACTOR = { type: "system", id: "workflow-runtime" } as const;
