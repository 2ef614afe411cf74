// An AI proposal under a policy: the host resolves the node's policy version (by id, or a policy's
// name meaning its newest version), checks the provider may receive what the node reads, builds
// the prompt, calls the model and records which policy text drove which answer.
import type { JsonObject, JsonValue } from "../workflows";
import { findProviderRow } from "./ai";
import { buildPrompt, parseAnswer } from "./ai-answers";
import { completeChat } from "./ai-models";
import { ComponentExecutionError } from "./components";
import { getPolicyVersionRow, newestPolicyVersionRow, type PolicyVersionRow, policyDigest } from "./policies";

/** The policy version a node names: a version id, or a policy name (its newest version now). */
async function resolvePolicy(env: Env, installationId: string, reference: string): Promise<PolicyVersionRow> {
  const row = (await getPolicyVersionRow(env.DB, installationId, reference)) ?? (await newestPolicyVersionRow(env.DB, installationId, reference));
  if (!row) throw new ComponentExecutionError("ai.policy_unknown", false, "The node's policy_version_id names no policy version or policy of this installation.");
  if (row.retiredAt) throw new ComponentExecutionError("ai.policy_retired", false, "The node's policy is retired; publish a workflow version that names a live policy.");
  if ((await policyDigest(row.text)) !== row.digest) throw new ComponentExecutionError("ai.policy_digest_mismatch", false, "The policy version's text does not match its digest.");
  return row;
}

export interface AgentProposalInput {
  installationId: string;
  providerId: string;
  /** `config.policy_version_id`: a policy version id or a policy name. */
  policyReference?: string;
  instructions: string;
  resultPorts: string[];
  /** `config.label_ports`, for providers whose model answers in its own labels. */
  labelPorts?: Record<string, string>;
  /** Whether the node's input carries the report's content: then the provider must allow it. */
  readsContent?: boolean;
  /** The node's mapped input; evaluated only once the provider may receive it. */
  input: () => Promise<JsonValue>;
}

/**
 * Asks the node's provider for a proposal. Timeouts and 5xx are retryable; a provider that may not
 * receive content the node reads, a redirect, malformed output and a result outside `result_ports`
 * are not (they go to the error port). The output records the policy version and digest, the
 * provider and model, tokens, latency, the answer and the prompt.
 */
export async function executeAgentProposal(env: Env, input: AgentProposalInput): Promise<JsonObject> {
  const row = await findProviderRow(env.DB, input.installationId, input.providerId);
  if (!row) throw new ComponentExecutionError("ai_provider.unknown", false, "The node's AI provider does not exist in this installation.");
  if (input.readsContent && row.contentAllowed !== 1) {
    throw new ComponentExecutionError(
      "ai_provider.content_not_allowed",
      false,
      "The node's input includes reported content, which this AI provider may not receive; allow it on the provider (PATCH /api/v1/ai-providers/:id { contentAllowed: true }) or map no content.",
    );
  }
  const policy = input.policyReference === undefined ? null : await resolvePolicy(env, input.installationId, input.policyReference);
  const prompt = buildPrompt({ policy, instructions: input.instructions, resultPorts: input.resultPorts, format: row.outputFormat, input: await input.input() });
  const completion = await completeChat(env, input.installationId, row, prompt);
  const answer = parseAnswer(row.outputFormat, completion.content, input.resultPorts, input.labelPorts ?? {});
  return {
    port: answer.port,
    resultCode: answer.port,
    confidence: answer.confidence,
    rationale: answer.rationale,
    policySections: answer.policySections,
    policy: policy ? { id: policy.policyId, name: policy.policyName, versionId: policy.id, version: policy.version, digest: policy.digest } : null,
    provider: { id: row.id, kind: row.kind, model: row.model, outputFormat: row.outputFormat },
    usage: completion.usage,
    latencyMs: completion.latencyMs,
    prompt: prompt.map((m) => ({ role: m.role, content: m.content })),
  };
}
