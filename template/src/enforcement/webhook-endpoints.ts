// Webhook endpoints: the receivers an installation registers (URL checked against the egress
// rules, signing secret shown once and stored sealed, event types, retry settings), their
// create/list/enable/disable API, and the reads that find them (by id or name, by subscribed event
// type). The deliveries sent to them, and their attempts, are webhooks.ts.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { sealPersonalData } from "../cases";
import { AppError, notFound } from "../errors";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { newId } from "../lib/crypto";

export interface EndpointRow {
  id: string;
  name: string | null;
  installationId: string;
  url: string;
  description: string | null;
  secretSealed: string;
  eventTypesJson: string;
  retryBaseSeconds: number;
  maxAttempts: number;
  state: string;
  createdAt: string;
}

const ENDPOINT_COLUMNS = `id, name, installation_id AS installationId, url, description, secret_sealed AS secretSealed, event_types_json AS eventTypesJson,
  retry_base_seconds AS retryBaseSeconds, max_attempts AS maxAttempts, state, created_at AS createdAt`;

function serializeEndpoint(row: EndpointRow) {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    description: row.description,
    eventTypes: JSON.parse(row.eventTypesJson) as string[],
    retryBaseSeconds: row.retryBaseSeconds,
    maxAttempts: row.maxAttempts,
    state: row.state,
    createdAt: row.createdAt,
  };
}

export function getEndpointRow(db: D1Database, installationId: string, id: string): Promise<EndpointRow | null> {
  return db.prepare(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<EndpointRow>();
}

/** An endpoint a graph names: by id, or by its name (unique in the installation). */
export function findEndpointRow(db: D1Database, installationId: string, ref: string): Promise<EndpointRow | null> {
  return db.prepare(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE installation_id = ?1 AND (id = ?2 OR name = ?2) ORDER BY id = ?2 DESC LIMIT 1`).bind(installationId, ref).first<EndpointRow>();
}

function checkUrl(env: Env, url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new AppError("webhook_endpoint.url_invalid", "url must be an absolute http(s) URL.", { status: 422 });
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new AppError("webhook_endpoint.url_invalid", "url must be an absolute http(s) URL.", { status: 422 });
  if (parsed.username || parsed.password) throw new AppError("webhook_endpoint.url_invalid", "url must not carry credentials; the signature authenticates deliveries.", { status: 422 });
  // No loopback, private, link-local or metadata targets, and https unless developing locally.
  const refusal = egressRefusal(parsed, { allowLocal: allowLocalEgress(env) });
  if (refusal) throw new AppError("webhook_endpoint.url_not_allowed", `url: ${refusal.message}`, { status: 422, details: { field: "url", reason: refusal.reason, host: refusal.host } });
}

/** Creates an endpoint; its signing secret is returned this once and stored sealed. */
export async function createEndpoint(env: Env, actor: Actor, input: { url: string; name?: string; description?: string; eventTypes?: string[]; retryBaseSeconds?: number; maxAttempts?: number }) {
  checkUrl(env, input.url);
  if (input.name && (await findEndpointRow(env.DB, actor.installationId, input.name))) {
    throw new AppError("webhook_endpoint.name_taken", `An endpoint of this installation is already named ${input.name}; choose another name.`, { status: 409 });
  }
  const id = newId("whe");
  const secret = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
  const { sealed } = await sealPersonalData(env, actor.installationId, `webhook_endpoint:${id}`, { secret }, { scope: "installation" });
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO webhook_endpoints (id, installation_id, url, description, secret_sealed, event_types_json, retry_base_seconds, max_attempts, state, created_at, updated_at, name)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'enabled', ?9, ?9, ?10)`).bind(
      id,
      actor.installationId,
      input.url,
      input.description ?? null,
      sealed,
      JSON.stringify(input.eventTypes ?? []),
      input.retryBaseSeconds ?? 5,
      input.maxAttempts ?? 8,
      at,
      input.name ?? null,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `webhook_endpoint:${id}:created`,
      action: "webhook_endpoint.created",
      actor: actor.audit,
      target: { type: "webhook_endpoint", id },
      details: { url: input.url, eventTypes: input.eventTypes ?? [] },
      at,
    }),
  ]);
  return { ...serializeEndpoint((await getEndpointRow(env.DB, actor.installationId, id))!), secret };
}

export async function listEndpoints(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE installation_id = ?1 ORDER BY created_at`).bind(actor.installationId).all<EndpointRow>();
  return results.map(serializeEndpoint);
}

export async function setEndpointState(env: Env, actor: Actor, id: string, state: "enabled" | "disabled") {
  const row = await getEndpointRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("webhook_endpoint");
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE webhook_endpoints SET state = ?3, disabled_reason = NULL, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id, state, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `webhook_endpoint:${id}:${state}:${at}`,
      action: `webhook_endpoint.${state}`,
      actor: actor.audit,
      target: { type: "webhook_endpoint", id },
      details: {},
      at,
    }),
  ]);
  return serializeEndpoint((await getEndpointRow(env.DB, actor.installationId, id))!);
}

/** Enabled endpoints of the installation that subscribe to `eventType`, as a statement for the caller's batch of reads. Host-internal. */
export function subscribedEndpointsStatement(db: D1Database, installationId: string, eventType: string): D1PreparedStatement {
  return db
    .prepare(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints w
    WHERE installation_id = ?1 AND state = 'enabled' AND EXISTS (SELECT 1 FROM json_each(w.event_types_json) WHERE value = ?2) ORDER BY created_at`)
    .bind(installationId, eventType);
}

/** SQL for the ids of the enabled endpoints subscribed to an event type, comma-joined in creation order (NULL when none), over the given parameters. */
export function subscribedEndpointIdsSql(installation: string, eventType: string): string {
  return `(SELECT group_concat(id, ',') FROM (SELECT id FROM webhook_endpoints w
    WHERE installation_id = ${installation} AND state = 'enabled' AND EXISTS (SELECT 1 FROM json_each(w.event_types_json) WHERE value = ${eventType}) ORDER BY created_at))`;
}

/** Enabled endpoints of the installation that subscribe to `eventType`. Host-internal. */
export async function subscribedEndpoints(db: D1Database, installationId: string, eventType: string): Promise<EndpointRow[]> {
  return (await subscribedEndpointsStatement(db, installationId, eventType).all<EndpointRow>()).results;
}
