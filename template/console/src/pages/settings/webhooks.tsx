// Settings → webhook endpoints: where events are delivered (the signing secret is shown once),
// their retry policy, and the latest deliveries.
import { useState } from "react";
import { get, type Page, post } from "../../api";
import { useResource } from "../../hooks";
import { Empty, ErrorNote, SecretOnce, shortId, StateBadge, Time } from "../../ui";
import { FormCard, Input, useSubmit } from "./form";

export interface Endpoint {
  id: string;
  url: string;
  description: string | null;
  eventTypes: string[];
  retryBaseSeconds: number;
  maxAttempts: number;
  state: string;
  createdAt: string;
}

export function WebhooksTab({ canAdmin }: { canAdmin: boolean }) {
  const endpoints = useResource((signal) => get<Page<Endpoint>>("/webhook-endpoints", signal), []);
  const deliveries = useResource((signal) => get<Page<{ id: string; endpointId: string; eventType?: string; type?: string; state: string; attempts: number; createdAt: string }>>("/webhook-deliveries?limit=20", signal), []);
  const [form, setForm] = useState({ url: "", description: "", eventTypes: [] as string[] });
  const [secret, setSecret] = useState<string | null>(null);
  const create = useSubmit(async () => {
    const created = await post<Endpoint & { secret: string }>("/webhook-endpoints", { url: form.url, ...(form.description ? { description: form.description } : {}), eventTypes: form.eventTypes });
    setSecret(created.secret);
    setForm({ url: "", description: "", eventTypes: [] });
    endpoints.reload();
  });
  const toggle = async (e: Endpoint) => {
    await post(`/webhook-endpoints/${encodeURIComponent(e.id)}/${e.state === "enabled" ? "disable" : "enable"}`, {});
    endpoints.reload();
  };
  return (
    <>
      {secret ? <SecretOnce title="Signing secret" secret={secret} onDone={() => setSecret(null)} /> : null}
      <ErrorNote error={endpoints.error} retry={endpoints.reload} />
      {endpoints.data?.items.length === 0 ? <Empty>No webhook endpoints.</Empty> : null}
      {endpoints.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">Webhook endpoints</caption>
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Id</th>
              <th scope="col">Events</th>
              <th scope="col">Retries</th>
              <th scope="col">State</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {endpoints.data.items.map((e) => (
              <tr key={e.id}>
                <th scope="row">
                  <code>{e.url}</code>
                </th>
                <td>
                  <code>{shortId(e.id)}</code>
                </td>
                <td>{e.eventTypes.join(", ") || <span className="muted">named by action types</span>}</td>
                <td>
                  {e.maxAttempts} × from {e.retryBaseSeconds} s
                </td>
                <td>
                  <StateBadge state={e.state} />
                </td>
                <td>
                  {canAdmin ? (
                    <button type="button" className="btn btn-small" onClick={() => void toggle(e)}>
                      {e.state === "enabled" ? "Disable" : "Enable"}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {deliveries.data?.items.length ? (
        <>
          <h2 className="h3">Recent deliveries</h2>
          <table className="table">
            <caption className="sr-only">Recent deliveries</caption>
            <thead>
              <tr>
                <th scope="col">Delivery</th>
                <th scope="col">Event</th>
                <th scope="col">State</th>
                <th scope="col" className="num">
                  Attempts
                </th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.data.items.map((d) => (
                <tr key={d.id}>
                  <th scope="row">
                    <code>{shortId(d.id)}</code>
                  </th>
                  <td>{d.eventType ?? d.type ?? "—"}</td>
                  <td>
                    <StateBadge state={d.state} />
                  </td>
                  <td className="num">{d.attempts}</td>
                  <td>
                    <Time at={d.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : null}
      {canAdmin ? (
        <FormCard title="New webhook endpoint" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Create endpoint">
          <Input id="hook-url" label="URL" type="url" value={form.url} onChange={(e) => setForm({ ...form, url: e.target.value })} required help="Deliveries are signed (Standard Webhooks); the secret is shown once." />
          <Input id="hook-description" label="Description" value={form.description} onChange={(e) => setForm({ ...form, description: e.target.value })} />
          <fieldset className="subfieldset">
            <legend>Also receive</legend>
            {["message.send", "report.handoff"].map((t) => (
              <label key={t} className="check">
                <input type="checkbox" checked={form.eventTypes.includes(t)} onChange={(e) => setForm({ ...form, eventTypes: e.target.checked ? [...form.eventTypes, t] : form.eventTypes.filter((x) => x !== t) })} /> {t}
              </label>
            ))}
          </fieldset>
        </FormCard>
      ) : null}
    </>
  );
}
