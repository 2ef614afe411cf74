// Workflows: the list, one workflow's versions (view, edit from, retire, shadow run on sample
// input, shadow report), and a comparison of two versions.
import { useState, type FormEvent } from "react";
import { get, post, type Page, type Run, type Workflow, type WorkflowVersion } from "../api";
import { GraphView } from "../graph/view";
import { useResource } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { ShadowReport } from "./shadow-report";
import { cannotReason, useCan, useSession } from "../session";
import { Details, Empty, ErrorNote, Json, Loading, PageTitle, Time, useToast } from "../ui";

export { ComparePage } from "./workflows/compare";

export function WorkflowsPage() {
  const canAdmin = useCan("admin");
  const navigate = useNavigate();
  const workflows = useResource((signal) => get<Page<Workflow>>("/workflows", signal), []);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [creating, setCreating] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const create = async (event: FormEvent) => {
    event.preventDefault();
    setCreating(true);
    setError(null);
    try {
      const created = await post<Workflow>("/workflows", { name, ...(description ? { description } : {}) });
      navigate(`/workflows/${encodeURIComponent(created.id)}/edit`);
    } catch (e) {
      setError(e);
    } finally {
      setCreating(false);
    }
  };
  const items = workflows.data?.items ?? [];
  return (
    <section data-ready={workflows.data ? "true" : undefined}>
      <PageTitle subtitle="Graphs of nodes that decide what happens to a report; each published version is immutable.">Workflows</PageTitle>
      <ErrorNote error={workflows.error} retry={workflows.reload} />
      {workflows.loading && !workflows.data ? <Loading /> : null}
      {workflows.data && items.length === 0 ? <Empty>No workflows yet.</Empty> : null}
      {items.length > 0 ? (
        <table className="table">
          <caption className="sr-only">Workflows</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Description</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {items.map((w) => (
              <tr key={w.id}>
                <th scope="row">
                  <Link to={`/workflows/${encodeURIComponent(w.id)}`}>{w.name}</Link>
                </th>
                <td>{w.description ?? <span className="muted">—</span>}</td>
                <td>
                  <Time at={w.updatedAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {canAdmin ? (
        <form className="card form-card" onSubmit={(e) => void create(e)} aria-labelledby="new-workflow">
          <h2 id="new-workflow" className="h3">
            New workflow
          </h2>
          <div className="field">
            <label htmlFor="wf-name">Name</label>
            <input id="wf-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} autoComplete="off" />
          </div>
          <div className="field">
            <label htmlFor="wf-desc">Description</label>
            <input id="wf-desc" value={description} onChange={(e) => setDescription(e.target.value)} maxLength={2000} />
          </div>
          <ErrorNote error={error} />
          <button type="submit" className="btn btn-primary" disabled={creating || name.trim() === ""}>
            Create and open the editor
          </button>
        </form>
      ) : null}
    </section>
  );
}

function ShadowRun({ versionId }: { versionId: string }) {
  const navigate = useNavigate();
  const [input, setInput] = useState('{\n  "category": "scams_and_fraud"\n}');
  const [reportId, setReportId] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const start = async (event: FormEvent) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(input);
    } catch {
      setError(new Error("The sample input must be a JSON object."));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const run = await post<Run>("/runs", { workflowVersionId: versionId, authorityMode: "shadow", input: parsed, ...(reportId ? { reportId } : {}) });
      navigate(`/runs/${encodeURIComponent(run.id)}`);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={(e) => void start(e)} className="form-card">
      <p className="help">A shadow run executes the graph for real but simulates every effect: no task, message, decision or action leaves the system.</p>
      <div className="field">
        <label htmlFor={`sample-${versionId}`}>Sample input (JSON)</label>
        <textarea id={`sample-${versionId}`} className="mono" rows={5} value={input} onChange={(e) => setInput(e.target.value)} />
      </div>
      <div className="field">
        <label htmlFor={`report-${versionId}`}>Report id (optional: the run reads it as report)</label>
        <input id={`report-${versionId}`} className="mono" value={reportId} onChange={(e) => setReportId(e.target.value)} />
      </div>
      <ErrorNote error={error} />
      <button type="submit" className="btn" disabled={busy}>
        {busy ? "Starting…" : "Start shadow run"}
      </button>
    </form>
  );
}

export function WorkflowPage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const canAdmin = useCan("admin");
  const { user } = useSession();
  const navigate = useNavigate();
  const toast = useToast();
  const published = useSearchParam("published");
  const workflow = useResource((signal) => get<Workflow>(`/workflows/${encodeURIComponent(id)}`, signal), [id]);
  const versions = workflow.data?.versions ?? [];
  const [viewing, setViewing] = useState<string | null>(null);
  const current = viewing ?? versions[0]?.id ?? null;
  const version = useResource(current ? (signal) => get<WorkflowVersion>(`/workflow-versions/${encodeURIComponent(current)}`, signal) : null, [current]);
  const [compare, setCompare] = useState<string[]>([]);
  const [error, setError] = useState<unknown>(null);
  const retire = async (versionId: string) => {
    if (!window.confirm("Retire this version? Triggers and new runs can no longer use it; running runs finish.")) return;
    try {
      await post(`/workflow-versions/${encodeURIComponent(versionId)}/retire`, {});
      toast("Version retired.");
      workflow.reload();
    } catch (e) {
      setError(e);
    }
  };
  if (workflow.error)
    return (
      <section>
        <PageTitle>Workflow</PageTitle>
        <ErrorNote error={workflow.error} retry={workflow.reload} />
      </section>
    );
  if (!workflow.data) return <Loading />;
  return (
    <section data-ready="true">
      <PageTitle
        subtitle={workflow.data.description ?? undefined}
        actions={
          canAdmin ? (
            <Link className="btn btn-primary" to={`/workflows/${encodeURIComponent(id)}/edit${versions[0] ? `?from=${encodeURIComponent(versions[0].id)}` : ""}`}>
              {versions.length ? "Edit (new version)" : "Open the editor"}
            </Link>
          ) : null
        }
      >
        {workflow.data.name}
      </PageTitle>
      {published ? (
        <p className="note note-ok" role="status" data-testid="published">
          Published. Connect it to reports with a trigger under <Link to="/settings/triggers">Settings → Triggers</Link>.
        </p>
      ) : null}
      {!canAdmin ? <p className="note note-info">{cannotReason(user.role, "admin")}</p> : null}
      <ErrorNote error={error} />
      {versions.length === 0 ? (
        <Empty>No version published yet.</Empty>
      ) : (
        <>
          <table className="table">
            <caption>Versions (newest first). Tick two to compare.</caption>
            <thead>
              <tr>
                <th scope="col">Compare</th>
                <th scope="col">Version</th>
                <th scope="col">Published</th>
                <th scope="col">Artifact</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {versions.map((v) => (
                <tr key={v.id} className={v.id === current ? "row-current" : undefined}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`Compare version ${v.version}`}
                      checked={compare.includes(v.id)}
                      onChange={(e) => setCompare((list) => (e.target.checked ? [...list.filter((x) => x !== v.id), v.id].slice(-2) : list.filter((x) => x !== v.id)))}
                    />
                  </td>
                  <th scope="row">v{v.version}</th>
                  <td>
                    <Time at={v.createdAt} />
                  </td>
                  <td>
                    <code className="small" title={v.artifactDigest}>
                      {v.artifactDigest.slice(0, 19)}…
                    </code>
                  </td>
                  <td>{v.retiredAt ? <span className="badge tone-muted">retired</span> : <span className="badge tone-ok">active</span>}</td>
                  <td className="actions">
                    <button type="button" className="btn btn-small" onClick={() => setViewing(v.id)} aria-pressed={v.id === current}>
                      View
                    </button>
                    {canAdmin ? (
                      <Link className="btn btn-small" to={`/workflows/${encodeURIComponent(id)}/edit?from=${encodeURIComponent(v.id)}`}>
                        Edit from
                      </Link>
                    ) : null}
                    {canAdmin && !v.retiredAt ? (
                      <button type="button" className="btn btn-small btn-quiet" onClick={() => void retire(v.id)}>
                        Retire
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <button
            type="button"
            className="btn"
            disabled={compare.length !== 2}
            onClick={() => {
              const [a, b] = [...compare].sort((x, y) => (versions.find((v) => v.id === x)?.version ?? 0) - (versions.find((v) => v.id === y)?.version ?? 0));
              navigate(`/workflows/${encodeURIComponent(id)}/compare?a=${encodeURIComponent(a!)}&b=${encodeURIComponent(b!)}`);
            }}
          >
            Compare selected versions
          </button>
        </>
      )}
      {version.data ? (
        <section aria-labelledby="version-heading" className="card">
          <h2 id="version-heading">Version {version.data.version}</h2>
          <GraphView graph={version.data.graph} label={`Graph of version ${version.data.version}`} />
          <Details summary="Graph JSON">
            <Json value={version.data.graph} label="Graph JSON" />
          </Details>
          {canAdmin && !version.data.retiredAt ? (
            <Details summary="Start a shadow run on sample input">
              <ShadowRun versionId={version.data.id} />
            </Details>
          ) : null}
          <Details summary="Shadow report (agreement with people's decisions)">
            <ShadowReport versionId={version.data.id} />
          </Details>
          <p>
            <Link to={`/runs?workflowVersionId=${encodeURIComponent(version.data.id)}`}>Runs of this version</Link>
          </p>
        </section>
      ) : version.loading ? (
        <Loading />
      ) : null}
    </section>
  );
}
