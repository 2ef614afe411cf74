// A fake of the Workers AI binding, of the same shape (`env.AI.run(model, input)`), bound as AI
// through a service binding to this entrypoint: deterministic answers by model name.
// "@cf/meta/llama-guard-3-8b" answers Llama Guard's own format from the user message; "@cf/test/
// policy-reader" answers JSON (as an object, as Workers AI does in JSON mode) choosing "remove" only
// when the system prompt carries the policy's marker.
import { WorkerEntrypoint } from "cloudflare:workers";

interface Input {
  messages?: Array<{ role: string; content: string }>;
  response_format?: unknown;
}

export class FakeAi extends WorkerEntrypoint {
  async run(model: string, input: Input): Promise<unknown> {
    const system = input.messages?.find((m) => m.role === "system")?.content ?? "";
    const user = input.messages?.find((m) => m.role === "user")?.content ?? "";
    const usage = { prompt_tokens: Math.ceil((system.length + user.length) / 4), completion_tokens: 7 };
    if (model === "@cf/meta/llama-guard-3-8b") {
      if (input.response_format !== undefined) throw new Error("llama guard takes no response_format");
      return { response: user.includes("hate") ? "unsafe\nS10" : "safe", usage };
    }
    if (model === "@cf/test/policy-reader") {
      const marked = system.includes("MARKER-POLICY-7");
      return { response: { result_code: marked ? "remove" : "keep", confidence: 0.7, rationale: marked ? "The policy's marker applies." : "No policy seen.", policy_sections: marked ? ["2"] : [] }, usage };
    }
    throw new Error(`5007: No such model ${model}`);
  }
}

export default {
  fetch(): Response {
    return new Response("the fake AI binding speaks RPC only", { status: 404 });
  },
};
