// Settings: queues, triggers, action types, webhook endpoints (secret shown once), API keys (shown
// once, revocable), console users, AI providers and policies (settings/*.tsx). Everyone may read;
// only admins change things.
import { useState } from "react";
import { get, post, type Page, type Queue } from "../api";
import { useResource } from "../hooks";
import { useNavigate } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Empty, ErrorNote, formatSeconds, Loading, PageTitle, shortId, Tabs, useToast } from "../ui";
import { ProvidersTab } from "./settings/ai-providers";
import { ApiKeysTab } from "./settings/api-keys";
import { FormCard, Input, useSubmit } from "./settings/form";
import { PoliciesTab } from "./settings/policies";
import { TriggersTab } from "./settings/triggers";
import { UsersTab } from "./settings/users";
import { type Endpoint, WebhooksTab } from "./settings/webhooks";

type Tab = "queues" | "triggers" | "action-types" | "webhooks" | "api-keys" | "users" | "ai-providers" | "policies";
const TABS: Array<{ id: Tab; label: string }> = [
  { id: "queues", label: "Queues" },
  { id: "triggers", label: "Triggers" },
  { id: "action-types", label: "Action types" },
  { id: "webhooks", label: "Webhook endpoints" },
  { id: "api-keys", label: "API keys" },
  { id: "users", label: "Users" },
  { id: "ai-providers", label: "AI providers" },
  { id: "policies", label: "Policies" },
];

function QueuesTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const queues = useResource((signal) => get<Page<Queue>>("/queues", signal), []);
  const [form, setForm] = useState({ name: "", description: "", sla: "24", unit: "3600", priority: "0" });
  const create = useSubmit(async () => {
    await post("/queues", { name: form.name, ...(form.description ? { description: form.description } : {}), slaSeconds: Math.round(Number(form.sla) * Number(form.unit)), priority: Number(form.priority) || 0 });
    toast(`Queue ${form.name} created.`);
    setForm({ ...form, name: "", description: "" });
    queues.reload();
  });
  return (
    <>
      <ErrorNote error={queues.error} retry={queues.reload} />
      {queues.loading && !queues.data ? <Loading /> : null}
      {queues.data?.items.length === 0 ? <Empty>No queues yet.</Empty> : null}
      {queues.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">Queues</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">SLA</th>
              <th scope="col" className="num">
                Priority
              </th>
              <th scope="col" className="num">
                Open
              </th>
            </tr>
          </thead>
          <tbody>
            {queues.data.items.map((q) => (
              <tr key={q.id}>
                <th scope="row">{q.name}</th>
                <td>
                  <code>{q.id}</code>
                </td>
                <td>{formatSeconds(q.slaSeconds)}</td>
                <td className="num">{q.priority}</td>
                <td className="num">{q.open ?? "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {canAdmin ? (
        <FormCard title="New queue" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Create queue">
          <Input id="queue-name" label="Name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required maxLength={200} />
          <Input id="queue-description" label="Description" value={form.description} onChange={(e) => setForm({ ...form, description: e.target.value })} />
          <div className="field-row">
            <Input id="queue-sla" label="SLA" type="number" min={1} value={form.sla} onChange={(e) => setForm({ ...form, sla: e.target.value })} required />
            <div className="field">
              <label htmlFor="queue-unit">Unit</label>
              <select id="queue-unit" value={form.unit} onChange={(e) => setForm({ ...form, unit: e.target.value })}>
                <option value="60">minutes</option>
                <option value="3600">hours</option>
                <option value="86400">days</option>
              </select>
            </div>
            <Input id="queue-priority" label="Priority (0-100)" type="number" min={0} max={100} value={form.priority} onChange={(e) => setForm({ ...form, priority: e.target.value })} />
          </div>
        </FormCard>
      ) : null}
    </>
  );
}

function ActionTypesTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const types = useResource((signal) => get<Page<{ id: string; key: string; name: string; description: string | null; requiresApproval: boolean; reversible: boolean; endpointId: string }>>("/action-types", signal), []);
  const endpoints = useResource(canAdmin ? (signal) => get<Page<Endpoint>>("/webhook-endpoints", signal) : null, []);
  const [form, setForm] = useState({ key: "", name: "", description: "", requiresApproval: true, reversible: true, endpointId: "" });
  const create = useSubmit(async () => {
    await post("/action-types", { key: form.key, name: form.name, ...(form.description ? { description: form.description } : {}), requiresApproval: form.requiresApproval, reversible: form.reversible, endpointId: form.endpointId });
    toast(`Action type ${form.key} created.`);
    types.reload();
  });
  return (
    <>
      <ErrorNote error={types.error} retry={types.reload} />
      {types.data?.items.length === 0 ? <Empty>No action types.</Empty> : null}
      {types.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">Action types</caption>
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Name</th>
              <th scope="col">Approval</th>
              <th scope="col">Reversible</th>
              <th scope="col">Endpoint</th>
            </tr>
          </thead>
          <tbody>
            {types.data.items.map((t) => (
              <tr key={t.id}>
                <th scope="row">
                  <code>{t.key}</code>
                </th>
                <td>{t.name}</td>
                <td>{t.requiresApproval ? "always" : "by mode"}</td>
                <td>{t.reversible ? "yes" : "no"}</td>
                <td>
                  <code>{shortId(t.endpointId)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {canAdmin ? (
        <FormCard title="New action type" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Create action type">
          <Input id="at-key" label="Key" className="mono" value={form.key} onChange={(e) => setForm({ ...form, key: e.target.value })} required pattern="[A-Za-z0-9._:\-]{1,100}" help="Workflows name it in action nodes, e.g. remove_post." />
          <Input id="at-name" label="Name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required />
          <Input id="at-description" label="Description" value={form.description} onChange={(e) => setForm({ ...form, description: e.target.value })} />
          <div className="field">
            <label htmlFor="at-endpoint">Webhook endpoint</label>
            <select id="at-endpoint" value={form.endpointId} onChange={(e) => setForm({ ...form, endpointId: e.target.value })} required>
              <option value="">— choose —</option>
              {(endpoints.data?.items ?? []).map((e) => (
                <option key={e.id} value={e.id}>
                  {e.url}
                </option>
              ))}
            </select>
          </div>
          <label className="check">
            <input type="checkbox" checked={form.requiresApproval} onChange={(e) => setForm({ ...form, requiresApproval: e.target.checked })} /> Always needs a person's approval
          </label>
          <label className="check">
            <input type="checkbox" checked={form.reversible} onChange={(e) => setForm({ ...form, reversible: e.target.checked })} /> Reversible
          </label>
        </FormCard>
      ) : null}
    </>
  );
}

export function SettingsPage({ params }: { params: Record<string, string> }) {
  const navigate = useNavigate();
  const canAdmin = useCan("admin");
  const { user } = useSession();
  const tab = (TABS.some((t) => t.id === params.tab) ? params.tab : "queues") as Tab;
  return (
    <section data-ready="true">
      <PageTitle>Settings</PageTitle>
      {!canAdmin ? <p className="note note-info">{cannotReason(user.role, "admin")}</p> : null}
      <Tabs<Tab> label="Settings sections" value={tab} onChange={(id) => navigate(`/settings/${id}`, { replace: true })} tabs={TABS} />
      <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`} className="tabpanel">
        {tab === "queues" ? <QueuesTab canAdmin={canAdmin} /> : null}
        {tab === "triggers" ? <TriggersTab canAdmin={canAdmin} /> : null}
        {tab === "action-types" ? <ActionTypesTab canAdmin={canAdmin} /> : null}
        {tab === "webhooks" ? <WebhooksTab canAdmin={canAdmin} /> : null}
        {tab === "api-keys" ? <ApiKeysTab canAdmin={canAdmin} /> : null}
        {tab === "users" ? <UsersTab canAdmin={canAdmin} /> : null}
        {tab === "ai-providers" ? <ProvidersTab canAdmin={canAdmin} /> : null}
        {tab === "policies" ? <PoliciesTab canAdmin={canAdmin} /> : null}
      </div>
    </section>
  );
}
