// Settings → Policies: the documents AI proposals run under. Versions are immutable and digested;
// an ai_proposal node names a policy (its newest version) or one pinned version. Retiring a policy
// stops new versions, new references and runs under it.
import { useState } from "react";
import { post, server, type ItemOf } from "../../api";
import { useResource } from "../../hooks";
import { Empty, ErrorNote, Loading, shortId, Time, useToast } from "../../ui";
import { FormCard, Input, useSubmit } from "./form";

type Policy = ItemOf<"/policies">;

const shortDigest = (digest: string) => digest.slice(0, 19);

function PolicyDetail({ policy, canAdmin, onChanged }: { policy: Policy; canAdmin: boolean; onChanged: () => void }) {
  const toast = useToast();
  const detail = useResource((signal) => server.get("/policies/:id", { params: { id: policy.id }, signal }), [policy.id, policy.latest?.id, policy.retiredAt]);
  const [text, setText] = useState<string | null>(null);
  const publish = useSubmit(async () => {
    const version = await post<{ version: number; digest: string }>(`/policies/${encodeURIComponent(policy.id)}/versions`, { text: text ?? "" });
    toast(`${policy.name} v${version.version} published (${shortDigest(version.digest)}).`);
    setText(null);
    onChanged();
  });
  const retire = useSubmit(async () => {
    if (!window.confirm(`Retire ${policy.name}? Workflows naming it can no longer be published, and AI proposals under it fail to their error port.`)) return;
    await post(`/policies/${encodeURIComponent(policy.id)}/retire`, {});
    toast(`${policy.name} is retired.`);
    onChanged();
  });
  const latest = detail.data?.latest;
  return (
    <section className="card" aria-labelledby={`policy-${policy.id}`}>
      <h2 id={`policy-${policy.id}`} className="h3">
        {policy.name} {policy.retiredAt ? <span className="badge tone-muted">retired</span> : null}
      </h2>
      {policy.description ? <p>{policy.description}</p> : null}
      <ErrorNote error={detail.error} retry={detail.reload} />
      {detail.loading && !detail.data ? <Loading /> : null}
      {detail.data?.versions.length ? (
        <table className="table">
          <caption className="sr-only">Versions of {policy.name}</caption>
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Id</th>
              <th scope="col">Digest</th>
              <th scope="col">By</th>
              <th scope="col">Published</th>
            </tr>
          </thead>
          <tbody>
            {detail.data.versions.map((v) => (
              <tr key={v.id}>
                <th scope="row">v{v.version}</th>
                <td>
                  <code>{shortId(v.id)}</code>
                </td>
                <td>
                  <code title={v.digest}>{shortDigest(v.digest)}</code>
                </td>
                <td>{v.createdBy}</td>
                <td>
                  <Time at={v.createdAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : detail.data ? (
        <Empty>No version yet: nodes cannot name this policy until it has one.</Empty>
      ) : null}
      {latest ? (
        <details>
          <summary>Text of v{latest.version}</summary>
          <pre className="content-text">{latest.text}</pre>
        </details>
      ) : null}
      {canAdmin && !policy.retiredAt ? (
        <form className="form-card" onSubmit={(e) => void publish.submit(e)} aria-label={`New version of ${policy.name}`}>
          <div className="field">
            <label htmlFor={`policy-text-${policy.id}`}>New version</label>
            <textarea id={`policy-text-${policy.id}`} rows={8} value={text ?? latest?.text ?? ""} onChange={(e) => setText(e.target.value)} required maxLength={100_000} />
          </div>
          <ErrorNote error={publish.error ?? retire.error} />
          <button type="submit" className="btn btn-primary" disabled={publish.busy || text === null}>
            {publish.busy ? "Publishing…" : "Publish version"}
          </button>{" "}
          <button type="button" className="btn btn-danger" disabled={retire.busy} onClick={() => void retire.submit()}>
            Retire policy
          </button>
        </form>
      ) : null}
    </section>
  );
}

export function PoliciesTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const policies = useResource((signal) => server.get("/policies", { signal }), []);
  const [form, setForm] = useState({ name: "", description: "", text: "" });
  const create = useSubmit(async () => {
    await post("/policies", { name: form.name, ...(form.description ? { description: form.description } : {}), ...(form.text.trim() ? { text: form.text } : {}) });
    toast(`Policy ${form.name} created.`);
    setForm({ name: "", description: "", text: "" });
    policies.reload();
  });
  return (
    <>
      <p className="help">AI proposals run under a policy: its text leads the model's instructions, and each proposal records the version and digest it was made under.</p>
      <ErrorNote error={policies.error} retry={policies.reload} />
      {policies.loading && !policies.data ? <Loading /> : null}
      {policies.data?.items.length === 0 ? <Empty>No policies yet.</Empty> : null}
      {policies.data?.items.map((p) => (
        <PolicyDetail key={p.id} policy={p} canAdmin={canAdmin} onChanged={policies.reload} />
      ))}
      {canAdmin ? (
        <FormCard title="New policy" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Create policy">
          <Input id="policy-name" label="Name" className="mono" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required pattern="[A-Za-z0-9._:\-]{1,100}" help="Nodes name the policy by it, e.g. scams." />
          <Input id="policy-description" label="Description" value={form.description} onChange={(e) => setForm({ ...form, description: e.target.value })} />
          <div className="field">
            <label htmlFor="policy-text">Text of version 1</label>
            <textarea id="policy-text" rows={8} value={form.text} onChange={(e) => setForm({ ...form, text: e.target.value })} maxLength={100_000} aria-describedby="policy-text-help" />
            <p className="help" id="policy-text-help">
              Stored canonical (line ends and trailing spaces normalized) with its sha256 digest; a version never changes.
            </p>
          </div>
        </FormCard>
      ) : null}
    </>
  );
}
