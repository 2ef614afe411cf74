// Settings → AI providers: register (key sealed, never shown again), how each model answers, and
// whether it may receive reported content (off by default for external endpoints; audited).
import { useState } from "react";
import { api, post, server, type ItemOf } from "../../api";
import { useResource } from "../../hooks";
import { Empty, ErrorNote, shortId, useToast } from "../../ui";
import { FormCard, Input, useSubmit } from "./form";

type Provider = ItemOf<"/ai-providers">;

function ContentCell({ p, canAdmin, onChanged }: { p: Provider; canAdmin: boolean; onChanged: () => void }) {
  const toast = useToast();
  const [error, setError] = useState<unknown>(null);
  const toggle = async () => {
    const next = !p.contentAllowed;
    if (next && p.kind !== "workers-ai" && !window.confirm(`Allow ${p.name} (${p.baseUrl ?? "external"}) to receive reported content? It leaves your installation.`)) return;
    setError(null);
    try {
      await api(`/ai-providers/${encodeURIComponent(p.id)}`, { method: "PATCH", body: { contentAllowed: next } });
      toast(next ? `${p.name} may now receive reported content.` : `${p.name} no longer receives reported content.`);
      onChanged();
    } catch (e) {
      setError(e);
    }
  };
  return (
    <td>
      {p.contentAllowed ? <span className="badge tone-warn">allowed</span> : <span className="badge tone-muted">not allowed</span>}
      {canAdmin ? (
        <>
          {" "}
          <button type="button" className="btn btn-small" onClick={() => void toggle()}>
            {p.contentAllowed ? "Forbid" : "Allow"}
          </button>
        </>
      ) : null}
      <ErrorNote error={error} />
    </td>
  );
}

export function ProvidersTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const providers = useResource((signal) => server.get("/ai-providers", { signal }), []);
  const [form, setForm] = useState({ name: "", kind: "openai-compatible", baseUrl: "", model: "", apiKey: "", outputFormat: "json", contentAllowed: false });
  const create = useSubmit(async () => {
    await post("/ai-providers", {
      name: form.name || form.model,
      kind: form.kind,
      model: form.model,
      outputFormat: form.outputFormat,
      contentAllowed: form.kind === "workers-ai" || form.contentAllowed,
      ...(form.baseUrl ? { baseUrl: form.baseUrl } : {}),
      ...(form.apiKey ? { apiKey: form.apiKey } : {}),
    });
    toast("AI provider registered; its key is sealed and never shown again.");
    setForm({ ...form, apiKey: "" });
    providers.reload();
  });
  return (
    <>
      <ErrorNote error={providers.error} retry={providers.reload} />
      {providers.data?.items.length === 0 ? <Empty>No AI providers.</Empty> : null}
      {providers.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">AI providers</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">Kind</th>
              <th scope="col">Model</th>
              <th scope="col">Answers</th>
              <th scope="col">Key</th>
              <th scope="col">Reported content</th>
            </tr>
          </thead>
          <tbody>
            {providers.data.items.map((p) => (
              <tr key={p.id}>
                <th scope="row">{p.name}</th>
                <td>
                  <code>{shortId(p.id)}</code>
                </td>
                <td>{p.kind}</td>
                <td>{p.model}</td>
                <td>{p.outputFormat === "llama_guard" ? "Llama Guard labels" : "JSON"}</td>
                <td>{p.hasApiKey ? "sealed" : "none"}</td>
                <ContentCell p={p} canAdmin={canAdmin} onChanged={providers.reload} />
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {canAdmin ? (
        <FormCard title="Register an AI provider" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Register">
          <Input id="ai-name" label="Name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
          <div className="field">
            <label htmlFor="ai-kind">Kind</label>
            <select id="ai-kind" value={form.kind} onChange={(e) => setForm({ ...form, kind: e.target.value })}>
              <option value="openai-compatible">OpenAI-compatible endpoint</option>
              <option value="workers-ai">Workers AI</option>
            </select>
          </div>
          {form.kind === "openai-compatible" ? (
            <Input id="ai-base" label="Base URL" type="url" value={form.baseUrl} onChange={(e) => setForm({ ...form, baseUrl: e.target.value })} help="e.g. Ollama, vLLM or llama.cpp serving gpt-oss-safeguard or Llama Guard." />
          ) : null}
          <Input id="ai-model" label="Model" value={form.model} onChange={(e) => setForm({ ...form, model: e.target.value })} required />
          <div className="field">
            <label htmlFor="ai-format">How the model answers</label>
            <select id="ai-format" value={form.outputFormat} onChange={(e) => setForm({ ...form, outputFormat: e.target.value })}>
              <option value="json">JSON: result_code, confidence, rationale, policy_sections</option>
              <option value="llama_guard">Llama Guard: safe / unsafe + categories (map them with the node's label ports)</option>
            </select>
          </div>
          {form.kind === "openai-compatible" ? <Input id="ai-key" label="API key" type="password" value={form.apiKey} onChange={(e) => setForm({ ...form, apiKey: e.target.value })} help="Sealed at rest and never returned." /> : null}
          {form.kind === "openai-compatible" ? (
            <label className="check">
              <input type="checkbox" checked={form.contentAllowed} onChange={(e) => setForm({ ...form, contentAllowed: e.target.checked })} /> May receive reported content (it leaves the installation)
            </label>
          ) : (
            <p className="help">Workers AI runs inside Cloudflare and may receive reported content.</p>
          )}
        </FormCard>
      ) : null}
    </>
  );
}
