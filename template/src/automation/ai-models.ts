// The model call: one interface over the provider kinds — an OpenAI-compatible chat-completions
// endpoint (as Ollama, vLLM and llama.cpp serve gpt-oss-safeguard or Llama Guard) and the Workers
// AI binding (`env.AI.run(model, input)`). Redirects are never followed: the Authorization header
// must not leave for another address.
import { openPersonalData } from "../cases";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import type { AiOutputFormat, ProviderRow } from "./ai";
import { ComponentExecutionError } from "./components";

export interface ChatMessage {
  role: "system" | "user";
  content: string;
}

export interface Completion {
  content: string;
  usage: { promptTokens: number | null; completionTokens: number | null };
}

interface ChatProvider {
  complete(messages: ChatMessage[], signal: AbortSignal): Promise<Completion>;
}

/** The shape of the Workers AI binding this module uses (a test binds a fake of the same shape). */
interface AiBinding {
  run(model: string, input: unknown, options?: unknown): Promise<unknown>;
}

type Usage = { prompt_tokens?: number; completion_tokens?: number } | undefined;
const usageOf = (usage: Usage): Completion["usage"] => ({ promptTokens: usage?.prompt_tokens ?? null, completionTokens: usage?.completion_tokens ?? null });

// JSON mode only for the JSON contract: a Llama Guard model answers in plain text.
const responseFormat = (format: AiOutputFormat) => (format === "json" ? { response_format: { type: "json_object" } } : {});

function openAiCompatible(row: ProviderRow, apiKey: string | null): ChatProvider {
  return {
    async complete(messages, signal) {
      const response = await fetch(`${row.baseUrl}/chat/completions`, {
        method: "POST",
        signal,
        redirect: "manual",
        headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model: row.model, messages, temperature: 0, ...responseFormat(row.outputFormat) }),
      });
      if (response.status >= 300 && response.status < 400) {
        throw new ComponentExecutionError(
          "ai_provider.redirect_refused",
          false,
          `The model endpoint answered ${response.status} (a redirect); redirects are not followed so the API key stays with the configured address. Set the provider's baseUrl to the final address.`,
        );
      }
      if (response.status === 429 || response.status >= 500) throw new ComponentExecutionError("ai_provider.unavailable", true, `The model endpoint answered ${response.status}.`);
      if (!response.ok) throw new ComponentExecutionError("ai_provider.rejected", false, `The model endpoint answered ${response.status}.`);
      const body = (await response.json().catch(() => null)) as { choices?: Array<{ message?: { content?: unknown } }>; usage?: Usage } | null;
      const content = body?.choices?.[0]?.message?.content;
      if (typeof content !== "string") throw new ComponentExecutionError("ai.output_malformed", false, "The model endpoint's answer has no message content.");
      return { content, usage: usageOf(body?.usage) };
    },
  };
}

function workersAi(env: Env, row: ProviderRow): ChatProvider {
  const ai = (env as unknown as { AI?: AiBinding }).AI;
  return {
    async complete(messages) {
      if (!ai) throw new ComponentExecutionError("ai_provider.unavailable", false, "No AI binding is configured; add one to wrangler.jsonc to use Workers AI.");
      const result = (await ai.run(row.model, { messages, ...responseFormat(row.outputFormat) })) as { response?: unknown; usage?: Usage } | null;
      const content = typeof result?.response === "string" ? result.response : JSON.stringify(result?.response ?? null);
      return { content, usage: usageOf(result?.usage) };
    },
  };
}

/**
 * Sends the messages to the provider within its timeout. Timeouts, 429/5xx and unreachable
 * endpoints are retryable; a redirect, another 4xx and an answer without content are not.
 */
export async function completeChat(env: Env, installationId: string, row: ProviderRow, messages: ChatMessage[]): Promise<Completion & { latencyMs: number }> {
  // Checked again at call time: a provider registered before the check, or a setting turned off since.
  const refusal = row.kind === "openai-compatible" ? egressRefusal(`${row.baseUrl}/chat/completions`, { allowLocal: allowLocalEgress(env) }) : null;
  if (refusal) throw new ComponentExecutionError("ai_provider.egress_refused", false, `The provider's baseUrl is not allowed: ${refusal.message}`);
  const apiKey = row.apiKeySealed ? (await openPersonalData<{ apiKey: string }>(env, installationId, `ai_provider:${row.id}`, row.apiKeySealed)).apiKey : null;
  const provider = row.kind === "workers-ai" ? workersAi(env, row) : openAiCompatible(row, apiKey);
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  // The binding takes no signal, so the deadline races the call rather than only aborting it.
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new ComponentExecutionError("ai.timeout", true, `The model did not answer within ${row.timeoutMs} ms.`));
    }, row.timeoutMs);
  });
  const started = Date.now();
  try {
    const completion = await Promise.race([provider.complete(messages, controller.signal), deadline]);
    return { ...completion, latencyMs: Date.now() - started };
  } catch (error) {
    if (error instanceof ComponentExecutionError) throw error;
    if (controller.signal.aborted) throw new ComponentExecutionError("ai.timeout", true, `The model did not answer within ${row.timeoutMs} ms.`);
    throw new ComponentExecutionError("ai_provider.unavailable", true, "The model endpoint could not be reached.");
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}
