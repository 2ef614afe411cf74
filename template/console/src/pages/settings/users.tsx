// Settings → console users: roles, queue access, disabling.
import { useState } from "react";
import { api, get, post, type Page, type Queue } from "../../api";
import { useResource } from "../../hooks";
import { useSession } from "../../session";
import { Empty, ErrorNote, shortId, useToast } from "../../ui";
import { FormCard, Input, useSubmit } from "./form";

interface User {
  id: string;
  email: string;
  name: string;
  role: string;
  queueIds: string[] | null;
  disabled?: boolean;
  accessSignIn?: boolean;
}

function UserRow({ u, canAdmin, queueName, onChanged, isMe }: { u: User; canAdmin: boolean; queueName: (id: string) => string; onChanged: () => void; isMe: boolean }) {
  const toast = useToast();
  const [error, setError] = useState<unknown>(null);
  const update = async (patch: Record<string, unknown>, done: string) => {
    setError(null);
    try {
      await api(`/console-users/${encodeURIComponent(u.id)}`, { method: "PATCH", body: patch });
      toast(done);
      onChanged();
    } catch (e) {
      setError(e);
    }
  };
  return (
    <tr>
      <th scope="row">
        {u.name}
        {isMe ? <span className="muted small"> (you)</span> : null}
      </th>
      <td>{u.email}</td>
      <td>
        {canAdmin && !isMe ? (
          <select aria-label={`Role of ${u.email}`} value={u.role} onChange={(e) => void update({ role: e.target.value }, `${u.email} is now ${e.target.value}.`)}>
            <option value="admin">admin</option>
            <option value="moderator">moderator</option>
            <option value="viewer">viewer</option>
          </select>
        ) : (
          u.role
        )}
        <ErrorNote error={error} />
      </td>
      <td>{u.queueIds ? u.queueIds.map(queueName).join(", ") : "all"}</td>
      <td>{u.disabled ? <span className="badge tone-muted">disabled</span> : <span className="badge tone-ok">active</span>}</td>
      <td className="actions">
        {canAdmin && !isMe ? (
          <button type="button" className="btn btn-small" onClick={() => void update({ disabled: !u.disabled }, u.disabled ? `${u.email} can sign in again.` : `${u.email} is signed out and cannot sign in.`)}>
            {u.disabled ? "Enable" : "Disable"}
          </button>
        ) : null}
        {canAdmin ? (
          <button
            type="button"
            className="btn btn-small"
            title="Whether this email's Cloudflare Access sign-in lands in this installation"
            onClick={() => void update({ accessSignIn: !u.accessSignIn }, u.accessSignIn ? `${u.email} no longer signs in here through Cloudflare Access.` : `${u.email} signs in here through Cloudflare Access.`)}
          >
            {u.accessSignIn ? "Unbind Access" : "Bind Access"}
          </button>
        ) : null}
      </td>
    </tr>
  );
}

export function UsersTab({ canAdmin }: { canAdmin: boolean }) {
  const toast = useToast();
  const { user } = useSession();
  const users = useResource((signal) => get<Page<User>>("/console-users", signal), []);
  const queues = useResource((signal) => get<Page<Queue>>("/queues", signal), []);
  const [form, setForm] = useState({ email: "", name: "", role: "moderator", queueIds: [] as string[] });
  const create = useSubmit(async () => {
    await post<Record<string, unknown>>("/console-users", { email: form.email, name: form.name || form.email, role: form.role, ...(form.queueIds.length ? { queueIds: form.queueIds } : {}) });
    toast(`${form.email} can now use the console as ${form.role}.`);
    setForm({ email: "", name: "", role: form.role, queueIds: [] });
    users.reload();
  });
  const queueName = (id: string) => queues.data?.items.find((q) => q.id === id)?.name ?? shortId(id);
  return (
    <>
      <ErrorNote error={users.error} retry={users.reload} />
      {users.data?.items.length ? (
        <table className="table">
          <caption className="sr-only">Console users</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Queues</th>
              <th scope="col">State</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {users.data.items.map((u) => (
              <UserRow key={u.id} u={u} canAdmin={canAdmin} queueName={queueName} onChanged={users.reload} isMe={u.id === user.id} />
            ))}
          </tbody>
        </table>
      ) : users.data ? (
        <Empty>No console users.</Empty>
      ) : null}
      {canAdmin ? (
        <FormCard title="Add a console user" onSubmit={(e) => void create.submit(e)} busy={create.busy} error={create.error} submitLabel="Add user">
          <p className="help">
            Behind Cloudflare Access, people sign in with their email. Locally, an admin-token holder creates a one-time link: <code>POST /api/v1/console-signin-links</code>.
          </p>
          <Input id="user-email" label="Email" type="email" value={form.email} onChange={(e) => setForm({ ...form, email: e.target.value })} required />
          <Input id="user-name" label="Name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
          <div className="field">
            <label htmlFor="user-role">Role</label>
            <select id="user-role" value={form.role} onChange={(e) => setForm({ ...form, role: e.target.value })}>
              <option value="admin">admin — everything</option>
              <option value="moderator">moderator — review and approve</option>
              <option value="viewer">viewer — read only</option>
            </select>
          </div>
          <fieldset className="subfieldset">
            <legend>Queues (none ticked: all queues)</legend>
            <div className="check-grid">
              {(queues.data?.items ?? []).map((q) => (
                <label key={q.id} className="check">
                  <input type="checkbox" checked={form.queueIds.includes(q.id)} onChange={(e) => setForm({ ...form, queueIds: e.target.checked ? [...form.queueIds, q.id] : form.queueIds.filter((x) => x !== q.id) })} /> {q.name}
                </label>
              ))}
            </div>
          </fieldset>
        </FormCard>
      ) : null}
    </>
  );
}
