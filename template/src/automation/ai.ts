// AI providers: the Workers AI binding, or any OpenAI-compatible chat-completions endpoint (base
// URL, model, key kept sealed). Each says how its model answers (`outputFormat`) and whether it may
// receive reported content (`contentAllowed`: off by default for external endpoints). What a
// proposal asks and records is ai-proposal.ts.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { sealPersonalData } from "../cases";
import { AppError, notFound } from "../errors";
import { newId } from "../lib/crypto";
import { allowLocalEgress, egressRefusal } from "../lib/egress";

export const AI_PROVIDER_KINDS = ["workers-ai", "openai-compatible"] as const;
/** `json`: { result_code, confidence, rationale, policy_sections? }; `llama_guard`: `safe` / `unsafe` + categories. */
export const AI_OUTPUT_FORMATS = ["json", "llama_guard"] as const;
export type AiOutputFormat = (typeof AI_OUTPUT_FORMATS)[number];

export interface ProviderRow {
  id: string;
  name: string;
  kind: (typeof AI_PROVIDER_KINDS)[number];
  baseUrl: string | null;
  model: string;
  apiKeySealed: string | null;
  timeoutMs: number;
  contentAllowed: number;
  outputFormat: AiOutputFormat;
  createdAt: string;
}

const COLUMNS = `id, name, kind, base_url AS baseUrl, model, api_key_sealed AS apiKeySealed, timeout_ms AS timeoutMs, content_allowed AS contentAllowed, output_format AS outputFormat, created_at AS createdAt`;

function serialize(row: ProviderRow) {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    baseUrl: row.baseUrl,
    model: row.model,
    hasApiKey: row.apiKeySealed !== null,
    timeoutMs: row.timeoutMs,
    contentAllowed: row.contentAllowed === 1,
    outputFormat: row.outputFormat,
    createdAt: row.createdAt,
  };
}

export function getProviderRow(db: D1Database, installationId: string, id: string): Promise<ProviderRow | null> {
  return db.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<ProviderRow>();
}

/** The provider a graph names: by id, or by name (the first registered with it). */
export function findProviderRow(db: D1Database, installationId: string, ref: string): Promise<ProviderRow | null> {
  return db.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE installation_id = ?1 AND (id = ?2 OR name = ?2) ORDER BY id = ?2 DESC, created_at LIMIT 1`).bind(installationId, ref).first<ProviderRow>();
}

/**
 * Registers a provider; the API key is sealed at rest and never returned. `contentAllowed`
 * defaults to true for Workers AI (inside Cloudflare) and false for an external endpoint.
 */
export async function createProvider(
  env: Env,
  actor: Actor,
  input: { name?: string; kind: ProviderRow["kind"]; baseUrl?: string; model: string; apiKey?: string; timeoutMs?: number; contentAllowed?: boolean; outputFormat?: AiOutputFormat },
) {
  if (input.kind === "openai-compatible") {
    let url: URL;
    try {
      url = new URL(input.baseUrl ?? "");
    } catch {
      throw new AppError("ai_provider.base_url_invalid", "openai-compatible providers need an absolute baseUrl.", { status: 422 });
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new AppError("ai_provider.base_url_invalid", "baseUrl must be http(s).", { status: 422 });
    const refusal = egressRefusal(url.toString(), { allowLocal: allowLocalEgress(env) });
    if (refusal) throw new AppError("ai_provider.base_url_not_allowed", `baseUrl: ${refusal.message}`, { status: 422, details: { reason: refusal.reason, host: refusal.host } });
  }
  const id = newId("aip");
  const at = new Date().toISOString();
  const contentAllowed = input.contentAllowed ?? input.kind === "workers-ai";
  const outputFormat = input.outputFormat ?? "json";
  const sealed = input.apiKey ? (await sealPersonalData(env, actor.installationId, `ai_provider:${id}`, { apiKey: input.apiKey }, { scope: "installation" })).sealed : null;
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO ai_providers (id, installation_id, name, kind, base_url, model, api_key_sealed, timeout_ms, content_allowed, output_format, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`).bind(
      id,
      actor.installationId,
      input.name ?? input.model,
      input.kind,
      input.baseUrl?.replace(/\/+$/u, "") ?? null,
      input.model,
      sealed,
      input.timeoutMs ?? 20_000,
      contentAllowed ? 1 : 0,
      outputFormat,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `ai_provider:${id}:created`,
      action: "ai_provider.created",
      actor: actor.audit,
      target: { type: "ai_provider", id },
      details: { kind: input.kind, model: input.model, baseUrl: input.baseUrl ?? null, hasApiKey: sealed !== null, contentAllowed, outputFormat },
      at,
    }),
  ]);
  return serialize((await getProviderRow(env.DB, actor.installationId, id))!);
}

export async function listProviders(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE installation_id = ?1 ORDER BY created_at`).bind(actor.installationId).all<ProviderRow>();
  return results.map(serialize);
}

export async function getProvider(env: Env, actor: Actor, id: string) {
  const row = await getProviderRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("ai_provider");
  return serialize(row);
}

/** Allows or forbids a provider to receive reported content; audited with the previous value. */
export async function updateProvider(env: Env, actor: Actor, id: string, input: { contentAllowed: boolean }) {
  const row = await getProviderRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("ai_provider");
  if ((row.contentAllowed === 1) !== input.contentAllowed) {
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE ai_providers SET content_allowed = ?3 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id, input.contentAllowed ? 1 : 0),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `ai_provider:${id}:content_allowed:${crypto.randomUUID()}`,
        action: "ai_provider.updated",
        actor: actor.audit,
        target: { type: "ai_provider", id },
        details: { name: row.name, contentAllowed: input.contentAllowed, previous: { contentAllowed: row.contentAllowed === 1 } },
        at,
      }),
    ]);
  }
  return getProvider(env, actor, id);
}
