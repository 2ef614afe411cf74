// Settings → triggers: which event starts which workflow version, under which authority, when a
// CEL condition holds; enabling and disabling them.
import { useState } from "react";
import { get, type Page, post, type Workflow } from "../../api";
import { useResource } from "../../hooks";
import { Empty, ErrorNote, Loading, shortId, StateBadge, useToast } from "../../ui";
import { FormCard, Input, useSubmit } from "./form";

interface Trigger {
  id: string;
  name: string | null;
  event: string;
  when: string;
  workflowVersionId: string;
  authorityMode: string;
  enabled: boolean;
  createdAt: string;
}

async function loadVersions(signal: AbortSignal) {
  const workflows = await get<Page<Workflow>>("/workflows", signal);
  const details = await Promise.all(workflows.items.slice(0, 50).map((w) => get<Workflow>(`/workflows/${encodeURIComponent(w.id)}`, signal)));
  return details.flatMap((w) => (w.versions ?? []).filter((v) => !v.retiredAt).map((v) => ({ id: v.id, label: `${w.name} v${v.version}` })));
}

export function TriggersTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const triggers = useResource((signal) => get<Page<Trigger>>("/triggers", signal), []);
  const versions = useResource(canAdmin ? loadVersions : null, []);
  const [form, setForm] = useState({ name: "", event: "report.created", when: "true", workflowVersionId: "", authorityMode: "autonomous" });
  const create = useSubmit(async () => {
    await post("/triggers", { ...(form.name ? { name: form.name } : {}), event: form.event, when: form.when, workflowVersionId: form.workflowVersionId, authorityMode: form.authorityMode });
    toast("Trigger created.");
    triggers.reload();
  });
  const toggle = async (t: Trigger) => {
    await post(`/triggers/${encodeURIComponent(t.id)}/${t.enabled ? "disable" : "enable"}`, {});
    triggers.reload();
  };
  return (
    <>
      <ErrorNote error={triggers.error} retry={triggers.reload} />
      {triggers.loading && !triggers.data ? <Loading /> : null}
      {triggers.data?.items.length === 0 ? <Empty>No triggers: reports start no workflow yet.</Empty> : null}
      {triggers.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">Triggers</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Event</th>
              <th scope="col">When</th>
              <th scope="col">Version</th>
              <th scope="col">Mode</th>
              <th scope="col">State</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {triggers.data.items.map((t) => (
              <tr key={t.id}>
                <th scope="row">{t.name ?? shortId(t.id)}</th>
                <td>{t.event}</td>
                <td>
                  <code>{t.when}</code>
                </td>
                <td>
                  <code>{shortId(t.workflowVersionId)}</code>
                </td>
                <td>{t.authorityMode}</td>
                <td>
                  <StateBadge state={t.enabled ? "enabled" : "disabled"} />
                </td>
                <td>
                  {canAdmin ? (
                    <button type="button" className="btn btn-small" onClick={() => void toggle(t)}>
                      {t.enabled ? "Disable" : "Enable"}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {canAdmin ? (
        <FormCard title="New trigger" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Create trigger">
          <Input id="trigger-name" label="Name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
          <div className="field">
            <label htmlFor="trigger-event">Event</label>
            <select id="trigger-event" value={form.event} onChange={(e) => setForm({ ...form, event: e.target.value })}>
              <option value="report.created">report.created</option>
              <option value="appeal.created">appeal.created</option>
            </select>
          </div>
          <Input id="trigger-when" label="When (CEL over report)" className="mono" value={form.when} onChange={(e) => setForm({ ...form, when: e.target.value })} help="e.g. report.category == 'scams_and_fraud'" />
          <div className="field">
            <label htmlFor="trigger-version">Workflow version</label>
            <select id="trigger-version" value={form.workflowVersionId} onChange={(e) => setForm({ ...form, workflowVersionId: e.target.value })} required>
              <option value="">— choose —</option>
              {(versions.data ?? []).map((v) => (
                <option key={v.id} value={v.id}>
                  {v.label}
                </option>
              ))}
            </select>
          </div>
          <div className="field">
            <label htmlFor="trigger-mode">Authority mode</label>
            <select id="trigger-mode" value={form.authorityMode} onChange={(e) => setForm({ ...form, authorityMode: e.target.value })}>
              <option value="shadow">shadow (simulate every effect)</option>
              <option value="assisted">assisted (actions need approval)</option>
              <option value="autonomous">autonomous</option>
              <option value="off">off</option>
            </select>
          </div>
        </FormCard>
      ) : null}
    </>
  );
}
