// Reading connectors (no writes, nothing of enforcement): the rows, their sealing contexts and
// settings, shared by the service, the intake and the delivery transport.
import type { MastodonConfig } from "./mastodon-mapping";

export interface ConnectorRow {
  id: string;
  installationId: string;
  kind: "mastodon";
  name: string;
  baseUrl: string;
  endpointId: string;
  accessTokenSealed: string | null;
  webhookSecretSealed: string | null;
  configJson: string;
  state: "active" | "deleted";
  createdAt: string;
}

export const CONNECTOR_COLUMNS = `id, installation_id AS installationId, kind, name, base_url AS baseUrl, endpoint_id AS endpointId, access_token_sealed AS accessTokenSealed,
  webhook_secret_sealed AS webhookSecretSealed, config_json AS configJson, state, created_at AS createdAt`;

/** Sealing contexts of a connector's two secrets. */
export const tokenContext = (id: string) => `connector:${id}:token`;
export const webhookSecretContext = (id: string) => `connector:${id}:webhook_secret`;

/** The path Mastodon posts its admin webhooks to (no bearer key: the HMAC authenticates). */
export const webhookPath = (id: string) => `/api/v1/connectors/${id}/mastodon/webhook`;

/** An active connector of the installation, or null (a deleted one is not found). */
export function activeConnectorRow(db: D1Database, installationId: string, id: string): Promise<ConnectorRow | null> {
  return db.prepare(`SELECT ${CONNECTOR_COLUMNS} FROM connectors WHERE installation_id = ?1 AND id = ?2 AND state = 'active'`).bind(installationId, id).first<ConnectorRow>();
}

/**
 * An active connector by its id alone, for its intake URL, which names no installation: the id is
 * unguessable and the HMAC of each delivery proves the sender holds the connector's secret.
 */
export function connectorRowByIdUnsafe(db: D1Database, id: string): Promise<ConnectorRow | null> {
  return db.prepare(`SELECT ${CONNECTOR_COLUMNS} FROM connectors WHERE id = ?1 AND state = 'active'`).bind(id).first<ConnectorRow>();
}

export function configOf(row: ConnectorRow): MastodonConfig {
  return JSON.parse(row.configJson) as MastodonConfig;
}
