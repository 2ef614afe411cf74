// Connectors of an installation: create, list, read, delete. A connector holds a
// product's base URL, its admin token and the HMAC secret of its intake URL, both sealed and
// never returned (the secret is shown once, at creation), its mapping of categories and action
// types, and the webhook endpoint its deliveries go through (enforcement/connector-endpoints.ts).
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { sealPersonalData } from "../cases";
import { connectorEndpointEventsStatement, connectorEndpointStatements, disableConnectorEndpointStatement } from "../enforcement";
import { AppError, conflict, notFound } from "../errors";
import { isUniqueViolation } from "../lib/d1";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { newId } from "../lib/crypto";
import { activeConnectorRow, CONNECTOR_COLUMNS, configOf, tokenContext, webhookPath, webhookSecretContext, type ConnectorRow } from "./connector-rows";
import { mastodonConfig } from "./mastodon-mapping";

function serialize(row: ConnectorRow) {
  const config = configOf(row);
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    baseUrl: row.baseUrl,
    endpointId: row.endpointId,
    webhookPath: webhookPath(row.id),
    categories: config.categories,
    rules: config.rules,
    actions: config.actions,
    notifyByEmail: config.notifyByEmail,
    tellReporters: config.tellReporters ?? false,
    state: row.state,
    createdAt: row.createdAt,
  };
}

/** The server's origin: an absolute https URL (http only under ALLOW_LOCAL_EGRESS), no credentials, checked like webhook URLs. */
function baseUrlOf(env: Env, value: string): string {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new AppError("connector.base_url_invalid", "baseUrl must be the server's absolute https URL, e.g. https://mastodon.example.", { status: 422 });
  }
  if ((parsed.protocol !== "https:" && parsed.protocol !== "http:") || parsed.username || parsed.password) {
    throw new AppError("connector.base_url_invalid", "baseUrl must be the server's absolute https URL, without credentials.", { status: 422 });
  }
  const refusal = egressRefusal(parsed, { allowLocal: allowLocalEgress(env) });
  if (refusal) throw new AppError("connector.base_url_not_allowed", `baseUrl: ${refusal.message}`, { status: 422, details: { field: "baseUrl", reason: refusal.reason, host: refusal.host } });
  return parsed.origin;
}

function generatedSecret(): string {
  return [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export interface CreateConnectorInput {
  kind: "mastodon";
  name: string;
  baseUrl: string;
  accessToken: string;
  webhookSecret?: string;
  categories?: Partial<Record<string, string>>;
  rules?: Record<string, string>;
  actions?: Record<string, string>;
  notifyByEmail?: boolean;
  tellReporters?: boolean;
  retryBaseSeconds?: number;
  maxAttempts?: number;
}

/**
 * Creates a connector and its delivery endpoint in one batch (audited). The webhook secret (given,
 * or generated) is returned this once, with the intake path to paste into Mastodon.
 */
export async function createConnector(env: Env, actor: Actor, input: CreateConnectorInput) {
  const baseUrl = baseUrlOf(env, input.baseUrl);
  const config = mastodonConfig(input);
  const id = newId("con");
  const endpointId = newId("whe");
  const secret = input.webhookSecret ?? generatedSecret();
  const at = new Date().toISOString();
  const token = await sealPersonalData(env, actor.installationId, tokenContext(id), { token: input.accessToken }, { scope: "installation" });
  const hmac = await sealPersonalData(env, actor.installationId, webhookSecretContext(id), { secret }, { scope: "installation" });
  try {
    await env.DB.batch([
      ...(await connectorEndpointStatements(env, {
        installationId: actor.installationId,
        endpointId,
        connectorId: id,
        eventTypes: eventTypesOf(config),
        retryBaseSeconds: input.retryBaseSeconds ?? 5,
        maxAttempts: input.maxAttempts ?? 8,
        actor: actor.audit,
        at,
      })),
      env.DB.prepare(`INSERT INTO connectors (id, installation_id, kind, name, base_url, endpoint_id, access_token_sealed, webhook_secret_sealed, config_json, state, created_at, updated_at)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'active', ?10, ?10)`).bind(id, actor.installationId, input.kind, input.name, baseUrl, endpointId, token.sealed, hmac.sealed, JSON.stringify(config), at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `connector:${id}:created`,
        action: "connector.created",
        actor: actor.audit,
        target: { type: "connector", id },
        // Never the token or the secret.
        details: { kind: input.kind, name: input.name, baseUrl, endpointId, secretGiven: input.webhookSecret !== undefined, actions: config.actions },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("connector.name_taken", "A connector of this installation already has this name; choose another.");
    throw error;
  }
  return { ...serialize((await activeConnectorRow(env.DB, actor.installationId, id))!), webhookSecret: secret };
}

export async function listConnectors(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${CONNECTOR_COLUMNS} FROM connectors WHERE installation_id = ?1 AND state = 'active' ORDER BY created_at, id`).bind(actor.installationId).all<ConnectorRow>();
  return results.map(serialize);
}

/**
 * A connector with the action types delivered through it and what each does on the server
 * (`mastodonAction: null`: the key has no mapping, so its deliveries end dead,
 * connector_action_unmapped — map it with PATCH actions).
 */
export async function getConnector(env: Env, actor: Actor, id: string) {
  const row = await activeConnectorRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("connector");
  const { results } = await env.DB.prepare(`SELECT id, key, name FROM action_types WHERE installation_id = ?1 AND endpoint_id = ?2 ORDER BY key`).bind(actor.installationId, row.endpointId).all<{ id: string; key: string; name: string }>();
  const { actions } = configOf(row);
  return { ...serialize(row), actionTypes: results.map((type) => ({ ...type, mastodonAction: Object.hasOwn(actions, type.key) ? actions[type.key] : null })) };
}

export interface UpdateConnectorInput {
  accessToken?: string;
  webhookSecret?: string;
  rotateWebhookSecret?: boolean;
  categories?: Partial<Record<string, string>>;
  rules?: Record<string, string>;
  actions?: Record<string, string>;
  notifyByEmail?: boolean;
  tellReporters?: boolean;
}

/** What a connector's endpoint is subscribed to. */
const eventTypesOf = (config: { tellReporters?: boolean }) => (config.tellReporters ? ["action.execute", "message.send"] : ["action.execute"]) as Array<"action.execute" | "message.send">;

/**
 * Changes a connector's settings (audited with the names of what changed, never a value): a new
 * access token; a new webhook secret (given, or generated with rotateWebhookSecret) returned this
 * once; a mapping given replaces that mapping (categories and actions over their defaults).
 */
export async function updateConnector(env: Env, actor: Actor, id: string, input: UpdateConnectorInput) {
  const row = await activeConnectorRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("connector");
  const current = configOf(row);
  const given = mastodonConfig({ categories: input.categories, rules: input.rules, actions: input.actions, notifyByEmail: input.notifyByEmail });
  const config = {
    categories: input.categories ? given.categories : current.categories,
    rules: input.rules ? given.rules : current.rules,
    actions: input.actions ? given.actions : current.actions,
    notifyByEmail: input.notifyByEmail ?? current.notifyByEmail,
    tellReporters: input.tellReporters ?? current.tellReporters ?? false,
  };
  const secret = input.webhookSecret ?? (input.rotateWebhookSecret ? generatedSecret() : null);
  const token = input.accessToken ? (await sealPersonalData(env, actor.installationId, tokenContext(id), { token: input.accessToken }, { scope: "installation" })).sealed : row.accessTokenSealed;
  const hmac = secret ? (await sealPersonalData(env, actor.installationId, webhookSecretContext(id), { secret }, { scope: "installation" })).sealed : row.webhookSecretSealed;
  const changed = Object.entries({ accessToken: input.accessToken, webhookSecret: secret, categories: input.categories, rules: input.rules, actions: input.actions, notifyByEmail: input.notifyByEmail, tellReporters: input.tellReporters })
    .filter(([, value]) => value !== undefined && value !== null)
    .map(([name]) => name);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE connectors SET access_token_sealed = ?3, webhook_secret_sealed = ?4, config_json = ?5, updated_at = ?6 WHERE installation_id = ?1 AND id = ?2 AND state = 'active'`).bind(
      actor.installationId,
      id,
      token,
      hmac,
      JSON.stringify(config),
      at,
    ),
    connectorEndpointEventsStatement(env.DB, { installationId: actor.installationId, endpointId: row.endpointId, eventTypes: eventTypesOf(config), at }),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `connector:${id}:updated:${crypto.randomUUID()}`,
      action: "connector.updated",
      actor: actor.audit,
      target: { type: "connector", id },
      details: { changed, actions: config.actions },
      at,
    }),
  ]);
  const updated = await activeConnectorRow(env.DB, actor.installationId, id);
  if (!updated) throw notFound("connector");
  return { ...serialize(updated), ...(secret ? { webhookSecret: secret } : {}) };
}

/**
 * Deletes a connector: its secrets are dropped (its intake URL answers 404 from now on), its
 * endpoint is disabled (pending deliveries end dead, `endpoint_disabled`). What it took in stays.
 */
export async function deleteConnector(env: Env, actor: Actor, id: string) {
  const row = await activeConnectorRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("connector");
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE connectors SET state = 'deleted', access_token_sealed = NULL, webhook_secret_sealed = NULL, deleted_at = ?3, updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND state = 'active'`).bind(
      actor.installationId,
      id,
      at,
    ),
    disableConnectorEndpointStatement(env.DB, { installationId: actor.installationId, endpointId: row.endpointId, at }),
    // One event however many deletes race (the key is the connector's).
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `connector:${id}:deleted`,
      action: "connector.deleted",
      actor: actor.audit,
      target: { type: "connector", id },
      details: { kind: row.kind, name: row.name },
      at,
    }),
  ]);
  return { ...serialize(row), state: "deleted" as const };
}
