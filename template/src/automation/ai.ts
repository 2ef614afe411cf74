// AI proposals: providers behind one interface — the Workers AI binding, or any OpenAI-compatible
// chat-completions endpoint (base URL, model, key kept sealed). The model must answer with
// structured output { result_code, confidence, rationale } whose result_code is one of the node's
// result ports; tokens and latency are recorded with the step.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { openPersonalData, sealPersonalData } from "../cases";
import { AppError, notFound } from "../errors";
import { newId } from "../lib/crypto";
import type { JsonObject, JsonValue } from "../workflows";
import { ComponentExecutionError } from "./components";

export const AI_PROVIDER_KINDS = ["workers-ai", "openai-compatible"] as const;

interface ProviderRow {
  id: string;
  name: string;
  kind: (typeof AI_PROVIDER_KINDS)[number];
  baseUrl: string | null;
  model: string;
  apiKeySealed: string | null;
  timeoutMs: number;
  createdAt: string;
}

const COLUMNS = `id, name, kind, base_url AS baseUrl, model, api_key_sealed AS apiKeySealed, timeout_ms AS timeoutMs, created_at AS createdAt`;

function serialize(row: ProviderRow) {
  return { id: row.id, name: row.name, kind: row.kind, baseUrl: row.baseUrl, model: row.model, hasApiKey: row.apiKeySealed !== null, timeoutMs: row.timeoutMs, createdAt: row.createdAt };
}

/** Registers a provider; the API key is sealed at rest and never returned. */
export async function createProvider(env: Env, actor: Actor, input: { name?: string; kind: ProviderRow["kind"]; baseUrl?: string; model: string; apiKey?: string; timeoutMs?: number }) {
  if (input.kind === "openai-compatible") {
    let url: URL;
    try {
      url = new URL(input.baseUrl ?? "");
    } catch {
      throw new AppError("ai_provider.base_url_invalid", "openai-compatible providers need an absolute baseUrl.", { status: 422 });
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new AppError("ai_provider.base_url_invalid", "baseUrl must be http(s).", { status: 422 });
  }
  const id = newId("aip");
  const at = new Date().toISOString();
  const sealed = input.apiKey ? (await sealPersonalData(env, actor.installationId, `ai_provider:${id}`, { apiKey: input.apiKey })).sealed : null;
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO ai_providers (id, installation_id, name, kind, base_url, model, api_key_sealed, timeout_ms, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`).bind(
      id,
      actor.installationId,
      input.name ?? input.model,
      input.kind,
      input.baseUrl?.replace(/\/+$/u, "") ?? null,
      input.model,
      sealed,
      input.timeoutMs ?? 20_000,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `ai_provider:${id}:created`,
      action: "ai_provider.created",
      actor: actor.audit,
      target: { type: "ai_provider", id },
      details: { kind: input.kind, model: input.model, baseUrl: input.baseUrl ?? null, hasApiKey: sealed !== null },
      at,
    }),
  ]);
  return serialize((await env.DB.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE id = ?1`).bind(id).first<ProviderRow>())!);
}

export async function listProviders(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE installation_id = ?1 ORDER BY created_at`).bind(actor.installationId).all<ProviderRow>();
  return results.map(serialize);
}

interface Completion {
  content: string;
  usage: { promptTokens: number | null; completionTokens: number | null };
}

/** One interface over the provider kinds. */
interface ChatProvider {
  complete(messages: Array<{ role: "system" | "user"; content: string }>, signal: AbortSignal): Promise<Completion>;
}

function openAiCompatible(row: ProviderRow, apiKey: string | null): ChatProvider {
  return {
    async complete(messages, signal) {
      const response = await fetch(`${row.baseUrl}/chat/completions`, {
        method: "POST",
        signal,
        headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model: row.model, messages, temperature: 0, response_format: { type: "json_object" } }),
      });
      if (response.status === 429 || response.status >= 500) throw new ComponentExecutionError("ai_provider.unavailable", true, `The model endpoint answered ${response.status}.`);
      if (!response.ok) throw new ComponentExecutionError("ai_provider.rejected", false, `The model endpoint answered ${response.status}.`);
      const body = (await response.json().catch(() => null)) as { choices?: Array<{ message?: { content?: unknown } }>; usage?: { prompt_tokens?: number; completion_tokens?: number } } | null;
      const content = body?.choices?.[0]?.message?.content;
      if (typeof content !== "string") throw new ComponentExecutionError("ai.output_malformed", false, "The model endpoint's answer has no message content.");
      return { content, usage: { promptTokens: body?.usage?.prompt_tokens ?? null, completionTokens: body?.usage?.completion_tokens ?? null } };
    },
  };
}

function workersAi(env: Env, row: ProviderRow): ChatProvider {
  const ai = (env as unknown as { AI?: { run(model: string, input: unknown, options?: unknown): Promise<unknown> } }).AI;
  return {
    async complete(messages) {
      if (!ai) throw new ComponentExecutionError("ai_provider.unavailable", false, "No AI binding is configured; add one to wrangler.jsonc to use Workers AI.");
      const result = (await ai.run(row.model, { messages, response_format: { type: "json_object" } })) as { response?: unknown; usage?: { prompt_tokens?: number; completion_tokens?: number } };
      const content = typeof result.response === "string" ? result.response : JSON.stringify(result.response ?? null);
      return { content, usage: { promptTokens: result.usage?.prompt_tokens ?? null, completionTokens: result.usage?.completion_tokens ?? null } };
    },
  };
}

const OUTPUT_CONTRACT = (ports: string[]) => `Answer with one JSON object and nothing else: {"result_code": one of ${JSON.stringify(ports)}, "confidence": a number from 0 to 1, "rationale": a short explanation}.`;

/**
 * Asks the node's provider for a proposal on the node's mapped input. Timeouts and 5xx are
 * retryable; malformed output and a result outside `result_ports` are not (they go to the error port).
 */
export async function executeAgentProposal(env: Env, input: { installationId: string; providerId: string; instructions: string; resultPorts: string[]; input: JsonValue }): Promise<JsonObject> {
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE installation_id = ?1 AND id = ?2`).bind(input.installationId, input.providerId).first<ProviderRow>();
  if (!row) throw new ComponentExecutionError("ai_provider.unknown", false, "The node's AI provider does not exist in this installation.");
  const apiKey = row.apiKeySealed ? (await openPersonalData<{ apiKey: string }>(env, input.installationId, `ai_provider:${row.id}`, row.apiKeySealed)).apiKey : null;
  const provider = row.kind === "workers-ai" ? workersAi(env, row) : openAiCompatible(row, apiKey);
  const started = Date.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), row.timeoutMs);
  let completion: Completion;
  try {
    completion = await provider.complete(
      [
        { role: "system", content: `${input.instructions}\n\n${OUTPUT_CONTRACT(input.resultPorts)}` },
        { role: "user", content: JSON.stringify(input.input) },
      ],
      controller.signal,
    );
  } catch (error) {
    if (error instanceof ComponentExecutionError) throw error;
    if (controller.signal.aborted) throw new ComponentExecutionError("ai.timeout", true, `The model did not answer within ${row.timeoutMs} ms.`);
    throw new ComponentExecutionError("ai_provider.unavailable", true, "The model endpoint could not be reached.");
  } finally {
    clearTimeout(timer);
  }
  const latencyMs = Date.now() - started;
  let parsed: { result_code?: unknown; confidence?: unknown; rationale?: unknown };
  try {
    parsed = JSON.parse(completion.content) as typeof parsed;
  } catch {
    throw new ComponentExecutionError("ai.output_malformed", false, "The model's answer is not JSON.");
  }
  if (!parsed || typeof parsed !== "object" || typeof parsed.result_code !== "string") throw new ComponentExecutionError("ai.output_malformed", false, "The model's answer has no result_code.");
  if (!input.resultPorts.includes(parsed.result_code)) throw new ComponentExecutionError("ai.result_port_invalid", false, "The model proposed a result that is not one of the node's result ports.");
  const confidence = typeof parsed.confidence === "number" && parsed.confidence >= 0 && parsed.confidence <= 1 ? parsed.confidence : null;
  return {
    port: parsed.result_code,
    resultCode: parsed.result_code,
    confidence,
    rationale: typeof parsed.rationale === "string" ? parsed.rationale.slice(0, 2_000) : null,
    provider: { id: row.id, kind: row.kind, model: row.model },
    usage: completion.usage,
    latencyMs,
  };
}

export async function getProvider(env: Env, actor: Actor, id: string) {
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM ai_providers WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<ProviderRow>();
  if (!row) throw notFound("ai_provider");
  return serialize(row);
}
