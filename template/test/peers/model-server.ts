// An OpenAI-compatible chat-completions endpoint for tests, as a separate Worker with deterministic
// answers chosen by the requested model: "fixed-remove" → a valid proposal, "wrong-port" → a result
// outside the node's ports, "malformed" → non-JSON content, "slow" → answers after 3 s.
export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.method !== "POST" || !url.pathname.endsWith("/chat/completions")) return new Response("not found", { status: 404 });
    if (request.headers.get("authorization") !== "Bearer sk-test-model-key") return Response.json({ error: { message: "bad key" } }, { status: 401 });
    const body = (await request.json()) as { model: string; messages: Array<{ role: string; content: string }> };
    const user = body.messages.find((m) => m.role === "user")?.content ?? "";
    let content: string;
    switch (body.model) {
      case "fixed-remove":
        content = JSON.stringify({ result_code: user.includes("scam") ? "remove" : "keep", confidence: 0.92, rationale: "Matches the scam pattern." });
        break;
      case "wrong-port":
        content = JSON.stringify({ result_code: "banana", confidence: 0.5, rationale: "?" });
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
    return Response.json({
      id: "chatcmpl-test",
      object: "chat.completion",
      model: body.model,
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      usage: { prompt_tokens: Math.ceil(JSON.stringify(body.messages).length / 4), completion_tokens: Math.ceil(content.length / 4) },
    });
  },
};
