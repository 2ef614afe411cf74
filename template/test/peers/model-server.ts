// An OpenAI-compatible chat-completions endpoint for tests, as a separate Worker with deterministic
// answers chosen by the requested model: "fixed-remove" → a valid proposal, "wrong-port" → a result
// outside the node's ports, "malformed" → non-JSON content, "slow" → answers after 3 s,
// "policy-reader" → "remove" only when the system prompt carries the policy's marker
// (MARKER-POLICY-7), citing section 4.2; "llama-guard" → Llama Guard's `safe` / `unsafe\nS2,S10`
// from words of the user message (and 400 if asked for JSON mode, which Llama Guard cannot do);
// "redirect" → a 307 to an address that would answer a valid proposal if the redirect were followed.
// "held" → answers `keep` only once the test releases it (POST /_control/release?prefix=…), so a
// test can act while a model call is in flight without a clock.
// GET /_control/log?prefix=/v1/x lists what arrived under that path (path, model, whether the user
// message was non-empty), so a test can prove a request never reached the model.
const received: Array<{ path: string; model: string | null; hadUserMessage: boolean }> = [];
/** Path prefixes released by the test; a held request polls for its own (a promise resolved by another request would count as hung in workerd). */
const releasedPrefixes: string[] = [];

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/_control/log") {
      const prefix = url.searchParams.get("prefix") ?? "";
      return Response.json(received.filter((entry) => entry.path.startsWith(prefix)));
    }
    if (url.pathname === "/_control/release") {
      const prefix = url.searchParams.get("prefix") ?? "";
      releasedPrefixes.push(prefix);
      return Response.json({ released: prefix });
    }
    const seen = await request
      .clone()
      .json()
      .then((b) => b as { model?: string; messages?: Array<{ role: string; content: string }> })
      .catch(() => null);
    received.push({ path: url.pathname, model: seen?.model ?? null, hadUserMessage: Boolean(seen?.messages?.some((m) => m.role === "user" && m.content)) });
    if (request.method !== "POST" || !url.pathname.endsWith("/chat/completions")) return new Response("not found", { status: 404 });
    if (request.headers.get("authorization") !== "Bearer sk-test-model-key") return Response.json({ error: { message: "bad key" } }, { status: 401 });
    const body = (await request.json()) as { model: string; messages: Array<{ role: string; content: string }>; response_format?: unknown };
    const user = body.messages.find((m) => m.role === "user")?.content ?? "";
    const system = body.messages.find((m) => m.role === "system")?.content ?? "";
    let content: string;
    if (url.pathname.includes("/followed/")) return completion(body, JSON.stringify({ result_code: "remove", confidence: 1, rationale: "followed a redirect" }));
    switch (body.model) {
      case "policy-reader":
        content = JSON.stringify(
          system.includes("MARKER-POLICY-7")
            ? { result_code: "remove", confidence: 0.8, rationale: "Section 4.2 of the policy applies.", policy_sections: ["4.2"] }
            : { result_code: "keep", confidence: 0.6, rationale: "No policy in the prompt." },
        );
        break;
      case "harassment-judge": {
        // Reads the policy (system) and the reported post (user); its rationale quotes the post, as models do.
        const post = (JSON.parse(user) as { post?: string }).post ?? "";
        const abusive = /\b(idiot|loser)\b/iu.test(post);
        content = JSON.stringify(
          system.includes("Harassment policy")
            ? { result_code: abusive ? "harassment" : "not_harassment", confidence: abusive ? 0.88 : 0.7, rationale: `The post says "${post.slice(0, 80)}".`, policy_sections: abusive ? ["2.1"] : [] }
            : { result_code: "not_harassment", confidence: 0.1, rationale: "No policy was given." },
        );
        break;
      }
      case "llama-guard": {
        if (body.response_format !== undefined) return Response.json({ error: { message: "llama guard has no JSON mode" } }, { status: 400 });
        const categories = [...(user.includes("scam") ? ["S2"] : []), ...(user.includes("hate") ? ["S10"] : [])];
        content = categories.length ? `unsafe\n${categories.join(",")}` : "safe";
        break;
      }
      case "redirect":
        return new Response(null, { status: 307, headers: { location: "https://model.test/v1/followed/chat/completions" } });
      case "fixed-remove":
        content = JSON.stringify({ result_code: user.includes("scam") ? "remove" : "keep", confidence: 0.92, rationale: "Matches the scam pattern." });
        break;
      case "wrong-port":
        content = JSON.stringify({ result_code: "banana", confidence: 0.5, rationale: "?" });
        break;
      case "held":
        for (let waited = 0; !releasedPrefixes.some((prefix) => url.pathname.startsWith(prefix)) && waited < 60_000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
        content = JSON.stringify({ result_code: "keep", confidence: 0.5, rationale: "released" });
        break;
      case "malformed":
        content = "I think you should remove it.";
        break;
      case "slow":
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        content = JSON.stringify({ result_code: "keep", confidence: 0.1, rationale: "late" });
        break;
      default:
        return Response.json({ error: { message: "unknown model" } }, { status: 400 });
    }
    return completion(body, content);
  },
};

function completion(body: { model: string; messages: unknown }, content: string): Response {
  return Response.json({
    id: "chatcmpl-test",
    object: "chat.completion",
    model: body.model,
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { prompt_tokens: Math.ceil(JSON.stringify(body.messages).length / 4), completion_tokens: Math.ceil(content.length / 4) },
  });
}
