// The webhook endpoint a connector delivers through (connectors/). Its url is
// `connector://<connector id>`: webhooks.ts hands its deliveries to the connector's transport
// instead of signing a Standard Webhook, so they keep the outbox, retries and dead letters of
// every other delivery. Only these builders write such a row (the API refuses that url).
import { auditStatement } from "../audit";
import { sealPersonalData } from "../cases";
import { newSecret } from "../lib/crypto";

export type ConnectorEventType = "action.execute" | "message.send";

/** The url of a connector's endpoint. */
export const connectorEndpointUrl = (connectorId: string) => `connector://${connectorId}`;

/** The endpoint row (and its audit event) for the connector's creating batch. */
export async function connectorEndpointStatements(
  env: Env,
  input: {
    installationId: string;
    endpointId: string;
    connectorId: string;
    /** action.execute, and message.send when the connector tells reporters. */
    eventTypes: ConnectorEventType[];
    retryBaseSeconds: number;
    maxAttempts: number;
    actor: { type: "system" | "api_key" | "admin" | "user"; id: string };
    at: string;
  },
): Promise<D1PreparedStatement[]> {
  // The row needs a signing secret; a connector's deliveries are never signed with it.
  const { sealed } = await sealPersonalData(env, input.installationId, `webhook_endpoint:${input.endpointId}`, { secret: newSecret("unused") }, { scope: "installation" });
  return [
    env.DB.prepare(`INSERT INTO webhook_endpoints (id, installation_id, url, description, secret_sealed, event_types_json, retry_base_seconds, max_attempts, state, created_at, updated_at, name)
      VALUES (?1, ?2, ?3, ?4, ?5, ?9, ?6, ?7, 'enabled', ?8, ?8, NULL)`).bind(
      input.endpointId,
      input.installationId,
      connectorEndpointUrl(input.connectorId),
      `Delivered through connector ${input.connectorId}`,
      sealed,
      input.retryBaseSeconds,
      input.maxAttempts,
      input.at,
      JSON.stringify(input.eventTypes),
    ),
    auditStatement(env.DB, {
      installationId: input.installationId,
      idempotencyKey: `webhook_endpoint:${input.endpointId}:created`,
      action: "webhook_endpoint.created",
      actor: input.actor,
      target: { type: "webhook_endpoint", id: input.endpointId },
      details: { connectorId: input.connectorId, eventTypes: input.eventTypes },
      at: input.at,
    }),
  ];
}

/** Disables a deleted connector's endpoint (its pending deliveries then end dead, `endpoint_disabled`). */
export function disableConnectorEndpointStatement(db: D1Database, input: { installationId: string; endpointId: string; at: string }): D1PreparedStatement {
  return db
    .prepare(`UPDATE webhook_endpoints SET state = 'disabled', disabled_reason = 'connector_deleted', updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND url LIKE 'connector://%'`)
    .bind(input.installationId, input.endpointId, input.at);
}

/** The events a connector's endpoint takes (a change of its tellReporters setting). */
export function connectorEndpointEventsStatement(db: D1Database, input: { installationId: string; endpointId: string; eventTypes: ConnectorEventType[]; at: string }): D1PreparedStatement {
  return db
    .prepare(`UPDATE webhook_endpoints SET event_types_json = ?3, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2 AND url LIKE 'connector://%'`)
    .bind(input.installationId, input.endpointId, JSON.stringify(input.eventTypes), input.at);
}
