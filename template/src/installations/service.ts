// Installations (tenants) and their API keys. Keys are shown once and stored as SHA-256 hashes.
import { auditStatement } from "../audit";
import { notFound } from "../errors";
import { forgetApiKey } from "../lib/api-key-cache";
import { FEW_RECORD_ID_LENGTH, newId, newSecret, sha256Hex } from "../lib/crypto";
import { SCOPES, type Actor, type Scope } from "../auth";

async function keyStatement(db: D1Database, input: { installationId: string; name: string; scopes: readonly Scope[]; at: string; reviewer?: string }) {
  const id = newId("key", FEW_RECORD_ID_LENGTH);
  const apiKey = newSecret("sk");
  const statement = db
    .prepare(`
    INSERT INTO api_keys (id, installation_id, name, key_hash, key_prefix, scopes_json, created_at, reviewer)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
  `)
    .bind(id, input.installationId, input.name, await sha256Hex(apiKey), apiKey.slice(0, 10), JSON.stringify(input.scopes), input.at, input.reviewer ?? null);
  return { id, apiKey, statement };
}

/** Creates a tenant and its first key, which holds every scope. */
export async function createInstallation(env: Env, input: { name: string }) {
  const id = newId("inst", FEW_RECORD_ID_LENGTH);
  const at = new Date().toISOString();
  const key = await keyStatement(env.DB, { installationId: id, name: "initial", scopes: SCOPES, at });
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO installations (id, name, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)`).bind(id, input.name, at),
    key.statement,
    auditStatement(env.DB, {
      installationId: id,
      idempotencyKey: `installation:${id}:created`,
      action: "installation.created",
      actor: { type: "admin", id: "admin-token" },
      target: { type: "installation", id },
      details: { name: input.name, keyId: key.id },
      at,
    }),
  ]);
  return { id, name: input.name, apiKey: key.apiKey, apiKeyId: key.id, scopes: [...SCOPES], createdAt: at };
}

export async function listInstallations(env: Env) {
  const { results } = await env.DB.prepare(`SELECT id, name, created_at AS createdAt FROM installations ORDER BY created_at DESC LIMIT 500`).all();
  return results;
}

/** Creates a key (shown once); with `reviewer` it is a reviewer's key, whose answers and appeal outcomes are that person's. */
export async function createApiKey(env: Env, actor: Actor, input: { name: string; scopes: Scope[]; reviewer?: string }) {
  const at = new Date().toISOString();
  const key = await keyStatement(env.DB, { installationId: actor.installationId, name: input.name, scopes: input.scopes, at, ...(input.reviewer ? { reviewer: input.reviewer } : {}) });
  await env.DB.batch([
    key.statement,
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `api_key:${key.id}:created`,
      action: "api_key.created",
      actor: actor.audit,
      target: { type: "api_key", id: key.id },
      details: { name: input.name, scopes: input.scopes, reviewersKey: input.reviewer !== undefined },
      at,
    }),
  ]);
  return { id: key.id, name: input.name, scopes: input.scopes, reviewer: input.reviewer ?? null, apiKey: key.apiKey, createdAt: at };
}

export async function listApiKeys(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT id, name, key_prefix AS prefix, scopes_json AS scopesJson, reviewer, created_at AS createdAt, revoked_at AS revokedAt,
    last_used_at AS lastUsedAt FROM api_keys WHERE installation_id = ?1 ORDER BY created_at`)
    .bind(actor.installationId)
    .all<{ id: string; name: string; prefix: string; scopesJson: string; reviewer: string | null; createdAt: string; revokedAt: string | null; lastUsedAt: string | null }>();
  return results.map(({ scopesJson, ...row }) => ({ ...row, scopes: JSON.parse(scopesJson) as string[] }));
}

export async function revokeApiKey(env: Env, actor: Actor, id: string) {
  const at = new Date().toISOString();
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE api_keys SET revoked_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND revoked_at IS NULL`).bind(actor.installationId, id, at),
    // Only a key this very batch revoked is audited: an unknown (or another installation's) key is a 404 with no event.
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `api_key:${id}:revoked`,
        action: "api_key.revoked",
        actor: actor.audit,
        target: { type: "api_key", id },
        details: {},
        at,
      },
      { table: "api_keys", id, where: { installation_id: actor.installationId, revoked_at: at } },
    ),
  ]);
  forgetApiKey(id); // refused at once in this isolate (others: within lib/api-key-cache.ts's TTL)
  if ((update!.meta.changes ?? 0) === 0) {
    const exists = await env.DB.prepare(`SELECT revoked_at FROM api_keys WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first();
    if (!exists) throw notFound("api_key");
  }
  return (await listApiKeys(env, actor)).find((key) => key.id === id)!;
}

/** Records that a key authenticated (the auth layer calls it at most hourly per key). */
export function keyUsedStatement(db: D1Database, keyId: string, at: string): D1PreparedStatement {
  return db.prepare(`UPDATE api_keys SET last_used_at = ?1 WHERE id = ?2`).bind(at, keyId);
}
