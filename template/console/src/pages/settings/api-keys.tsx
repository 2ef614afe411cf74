// Settings → API keys: list (with when each key was last used), create (shown once), revoke.
import { useState } from "react";
import { post, server, type ItemOf } from "../../api";
import { useResource } from "../../hooks";
import { Empty, ErrorNote, SecretOnce, Time, useToast } from "../../ui";
import { FormCard, Input, useSubmit } from "./form";

type ApiKey = ItemOf<"/api-keys">;

export function ApiKeysTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const keys = useResource((signal) => server.get("/api-keys", { signal }), []);
  const [form, setForm] = useState({ name: "", scopes: ["reports:write"] as string[] });
  const [secret, setSecret] = useState<string | null>(null);
  const create = useSubmit(async () => {
    const created = await post<{ id: string; apiKey: string }>("/api-keys", form);
    setSecret(created.apiKey);
    keys.reload();
  });
  const revoke = async (key: ApiKey) => {
    if (!window.confirm(`Revoke ${key.name}? Anything using it stops working at once.`)) return;
    await post(`/api-keys/${encodeURIComponent(key.id)}/revoke`, {});
    toast(`Revoked ${key.name}.`);
    keys.reload();
  };
  return (
    <>
      {secret ? <SecretOnce title="API key" secret={secret} onDone={() => setSecret(null)} /> : null}
      <ErrorNote error={keys.error} retry={keys.reload} />
      {keys.data?.items.length === 0 ? <Empty>No API keys.</Empty> : null}
      {keys.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">API keys</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Scopes</th>
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">State</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.data.items.map((k) => (
              <tr key={k.id}>
                <th scope="row">{k.name}</th>
                <td>{k.scopes.join(", ")}</td>
                <td>
                  <Time at={k.createdAt} />
                </td>
                <td>
                  <Time at={k.lastUsedAt} />
                </td>
                <td>{k.revokedAt ? <span className="badge tone-muted">revoked</span> : <span className="badge tone-ok">active</span>}</td>
                <td>
                  {canAdmin && !k.revokedAt ? (
                    <button type="button" className="btn btn-small btn-danger" onClick={() => void revoke(k)}>
                      Revoke
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {canAdmin ? (
        <FormCard title="New API key" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Create key">
          <Input id="key-name" label="Name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required help="Who or what uses it, e.g. the product's report form." />
          <fieldset className="subfieldset">
            <legend>Scopes</legend>
            {[
              ["reports:write", "Send reports and appeals"],
              ["review", "Review: claim and answer tasks, approve actions"],
              ["read", "Read everything"],
              ["admin", "Administer the installation"],
            ].map(([scope, label]) => (
              <label key={scope} className="check">
                <input type="checkbox" checked={form.scopes.includes(scope!)} onChange={(e) => setForm({ ...form, scopes: e.target.checked ? [...form.scopes, scope!] : form.scopes.filter((s) => s !== scope) })} /> <code>{scope}</code> —{" "}
                {label}
              </label>
            ))}
          </fieldset>
        </FormCard>
      ) : null}
    </>
  );
}
