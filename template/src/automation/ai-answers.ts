// What an AI proposal says to the model and how its answer becomes a port (pure functions). The
// system message is the policy text under a header naming its version and digest, then the node's
// instructions, then the output contract; the user message is the node's mapped input as JSON.
// Output adapters: `json` (the contract) and `llama_guard` (`safe` / `unsafe` + categories, mapped
// to ports by the node's `label_ports`).
import type { JsonValue } from "../workflows";
import type { AiOutputFormat } from "./ai";
import type { ChatMessage } from "./ai-models";
import { ComponentExecutionError } from "./components";

export interface PromptPolicy {
  id: string;
  policyName: string;
  version: number;
  digest: string;
  text: string;
}

export interface Answer {
  port: string;
  confidence: number | null;
  rationale: string | null;
  policySections: string[] | null;
}

function contract(format: AiOutputFormat, resultPorts: string[]): string {
  if (format === "llama_guard") return `Answer "safe", or "unsafe" followed on the next line by the comma-separated codes of the violated categories.`;
  return `Answer with one JSON object and nothing else: {"result_code": one of ${JSON.stringify(resultPorts)}, "confidence": a number from 0 to 1, "rationale": a short explanation, "policy_sections": the sections of the policy the answer relies on, as a list of strings (optional)}.`;
}

/** The messages of one proposal. */
export function buildPrompt(input: { policy: PromptPolicy | null; instructions: string; resultPorts: string[]; format: AiOutputFormat; input: JsonValue }): ChatMessage[] {
  const parts: string[] = [];
  if (input.policy) parts.push(`# Policy: ${input.policy.policyName}, version ${input.policy.version} (${input.policy.id}, ${input.policy.digest})\n\n${input.policy.text}`);
  if (input.instructions.trim()) parts.push(`# Instructions\n\n${input.instructions.trim()}`);
  parts.push(`# Answer\n\n${contract(input.format, input.resultPorts)}`);
  return [
    { role: "system", content: parts.join("\n\n") },
    { role: "user", content: JSON.stringify(input.input) },
  ];
}

const SECTION = /^[\p{L}\p{N} ._:§()/-]{1,200}$/u;
const CATEGORY = /^[A-Za-z0-9_.:-]{1,100}$/u;

function parseJsonAnswer(content: string, resultPorts: string[]): Answer {
  let parsed: { result_code?: unknown; confidence?: unknown; rationale?: unknown; policy_sections?: unknown };
  try {
    parsed = JSON.parse(content) as typeof parsed;
  } catch {
    throw new ComponentExecutionError("ai.output_malformed", false, "The model's answer is not JSON.");
  }
  if (!parsed || typeof parsed !== "object" || typeof parsed.result_code !== "string") throw new ComponentExecutionError("ai.output_malformed", false, "The model's answer has no result_code.");
  if (!resultPorts.includes(parsed.result_code)) throw new ComponentExecutionError("ai.result_port_invalid", false, "The model proposed a result that is not one of the node's result ports.");
  const sections = Array.isArray(parsed.policy_sections) ? parsed.policy_sections.filter((s): s is string => typeof s === "string" && SECTION.test(s)).slice(0, 50) : null;
  return {
    port: parsed.result_code,
    confidence: typeof parsed.confidence === "number" && parsed.confidence >= 0 && parsed.confidence <= 1 ? parsed.confidence : null,
    rationale: typeof parsed.rationale === "string" ? parsed.rationale.slice(0, 2_000) : null,
    policySections: sections,
  };
}

/**
 * Llama Guard answers `safe`, or `unsafe` and a line of categories (`S1,S10`). Each category goes
 * to `label_ports[category]`, or else to `label_ports.unsafe`; `safe` to `label_ports.safe`; a label
 * without a mapping to the port of its own name. When several categories give several ports, the
 * one listed first in `result_ports` wins (result ports are listed by precedence).
 */
function parseLlamaGuardAnswer(content: string, resultPorts: string[], labelPorts: Record<string, string>): Answer {
  const lines = content
    .trim()
    .split(/\r?\n/u)
    .map((line) => line.trim())
    .filter(Boolean);
  const verdict = lines[0]?.toLowerCase();
  if (verdict !== "safe" && verdict !== "unsafe") throw new ComponentExecutionError("ai.output_malformed", false, "The model's answer is neither 'safe' nor 'unsafe'.");
  const categories =
    verdict === "unsafe"
      ? (lines[1] ?? "")
          .split(",")
          .map((c) => c.trim())
          .filter((c) => CATEGORY.test(c))
          .slice(0, 50)
      : [];
  const unsafePort = labelPorts.unsafe ?? "unsafe";
  const candidates = verdict === "safe" ? [labelPorts.safe ?? "safe"] : categories.length ? categories.map((c) => labelPorts[c] ?? unsafePort) : [unsafePort];
  const port = resultPorts.find((p) => candidates.includes(p));
  if (!port) throw new ComponentExecutionError("ai.result_port_invalid", false, "The model's label maps to no result port of the node; map it with config.label_ports.");
  return { port, confidence: null, rationale: lines.join("\n").slice(0, 2_000), policySections: verdict === "unsafe" ? categories : null };
}

export function parseAnswer(format: AiOutputFormat, content: string, resultPorts: string[], labelPorts: Record<string, string>): Answer {
  return format === "llama_guard" ? parseLlamaGuardAnswer(content, resultPorts, labelPorts) : parseJsonAnswer(content, resultPorts);
}
