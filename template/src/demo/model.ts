// The demo model: a deterministic stand-in for an OpenAI-compatible chat-completions endpoint,
// served under /demo/model by `npm start` (DEMO_PEERS="on") so that AI proposals work with no
// account and no network. It is NOT a classifier: it looks for words of a short list in the
// user message and says so in every answer ("Demo model: …"). The node's result ports are read
// from the output contract in the system message (src/automation/ai-answers.ts), so it answers
// any ai_proposal node: a match picks the first port that does not read as "no" (not_*, no_*,
// keep, safe, ok, other…), no match the first one that does.
import { AppError } from "../errors";

export const DEMO_MODEL_NAME = "demo-moderation-model";

/** Words that make the demo model flag a post: invented insults of the demo dataset, and a few common ones. */
const FLAGGED_WORDS = ["idiot", "loser", "clown", "pathetic", "nobody likes you", "get lost", "worthless", "stupid", "shut up"];
const NEGATIVE_PORT = /^(?:not?_|keep$|safe$|ok$|other$|allow|benign|clean|none$|no$)/u;

interface ChatRequest {
  model?: unknown;
  messages?: unknown;
  response_format?: unknown;
}

export interface DemoCompletion {
  id: string;
  object: "chat.completion";
  model: string;
  system_fingerprint: string;
  choices: Array<{ index: number; message: { role: "assistant"; content: string }; finish_reason: "stop" }>;
  usage: { prompt_tokens: number; completion_tokens: number };
}

function messagesOf(body: ChatRequest): Array<{ role: string; content: string }> {
  if (!Array.isArray(body.messages)) throw new AppError("demo_model.request_invalid", "messages must be an array of { role, content }.", { status: 400 });
  return body.messages.map((m) => ({ role: String((m as { role?: unknown })?.role ?? ""), content: String((m as { content?: unknown })?.content ?? "") }));
}

/** The result ports the system message's output contract lists (`"result_code": one of [...]`). */
export function resultPortsOf(system: string): string[] {
  const match = /"result_code": one of (\[[^\]]*\])/u.exec(system);
  if (!match) return [];
  try {
    const ports = JSON.parse(match[1]!) as unknown;
    return Array.isArray(ports) ? ports.filter((p): p is string => typeof p === "string") : [];
  } catch {
    return [];
  }
}

/** The words of the list found in `text` (case-insensitive, whole words). */
export function flaggedWords(text: string): string[] {
  const lowered = text.toLowerCase();
  return FLAGGED_WORDS.filter((word) => new RegExp(`(^|[^a-z])${word.replace(/ /gu, "\\s+")}([^a-z]|$)`, "u").test(lowered));
}

/** The policy sections the system message numbers (`2.1 …` at the start of a line), for the answer to cite. */
function firstSection(system: string): string | null {
  return /^\s*(\d+\.\d+)\s/mu.exec(system)?.[1] ?? null;
}

/** The demo model's answer to one chat request (deterministic: the same request, the same answer). */
export function demoCompletion(body: ChatRequest): DemoCompletion {
  const messages = messagesOf(body);
  const system = messages
    .filter((m) => m.role === "system")
    .map((m) => m.content)
    .join("\n");
  const user = messages
    .filter((m) => m.role === "user")
    .map((m) => m.content)
    .join("\n");
  const found = flaggedWords(user);
  let content: string;
  if (/Answer "safe", or "unsafe"/u.test(system)) {
    // The llama_guard output format: no JSON, safe / unsafe + category codes.
    content = found.length > 0 ? "unsafe\nS10" : "safe";
  } else {
    const ports = resultPortsOf(system);
    if (ports.length === 0) throw new AppError("demo_model.contract_missing", "The system message has no output contract listing the result ports; the demo model answers ai_proposal prompts only.", { status: 400 });
    const positive = ports.find((p) => !NEGATIVE_PORT.test(p)) ?? ports[0]!;
    const negative = ports.find((p) => NEGATIVE_PORT.test(p)) ?? ports.at(-1)!;
    const section = firstSection(system);
    content = JSON.stringify(
      found.length > 0
        ? {
            result_code: positive,
            confidence: 0.9,
            rationale: `Demo model (a word list, not a real classifier): the post contains ${found.map((w) => `"${w}"`).join(", ")}.`,
            ...(section ? { policy_sections: [section] } : {}),
          }
        : { result_code: negative, confidence: 0.6, rationale: "Demo model (a word list, not a real classifier): none of its words is in the post." },
    );
  }
  return {
    id: `chatcmpl-demo-${found.length}`,
    object: "chat.completion",
    model: DEMO_MODEL_NAME,
    system_fingerprint: "safest-tools-demo",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { prompt_tokens: Math.ceil((system.length + user.length) / 4), completion_tokens: Math.ceil(content.length / 4) },
  };
}
