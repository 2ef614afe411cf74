// The run inspector: the version's graph with each node's state, the selected node's steps and
// outputs, the run's waits and events, and (for admins) terminate, send event and repair (retry,
// route to a port, migrate to another version) with a reason.
import { useState, type FormEvent } from "react";
import { get, post, type AuditEvent, type Page, type RunDetail, type Step, type Workflow, type WorkflowVersion } from "../api";
import { portsOf } from "../graph/kinds";
import { GraphView } from "../graph/view";
import { useInterval, useResource } from "../hooks";
import { Link } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { AbsoluteTime, Details, Empty, ErrorNote, Json, Loading, PageTitle, shortId, StateBadge, Time, useToast } from "../ui";

const TERMINAL = ["succeeded", "failed", "terminated", "superseded"];
const REPAIRABLE = ["repair_required", "failed"];

type RepairAction = "retry" | "route" | "migrate";

/** Retry the failed node, route it to a port (a person's decision), or migrate the run to another version; each with a reason. */
function RepairRun({ run, version, onRepaired }: { run: RunDetail; version: WorkflowVersion; onRepaired: () => void }) {
  const failed = run.steps.filter((s) => s.state === "failed" && s.output === null);
  const nodeId = failed[0]?.nodeId ?? run.currentNodeId ?? "";
  const node = version.graph.nodes.find((n) => n.id === nodeId);
  const ports = node ? portsOf(node) : [];
  const workflow = useResource((signal) => get<Workflow>(`/workflows/${encodeURIComponent(version.workflowId)}`, signal), [version.workflowId]);
  const others = (workflow.data?.versions ?? []).filter((v) => v.id !== version.id && !v.retiredAt);
  const [action, setAction] = useState<RepairAction>("retry");
  const [port, setPort] = useState(ports[0] ?? "");
  const [target, setTarget] = useState("");
  const [reason, setReason] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const toast = useToast();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = action === "route" ? { action, port, reason } : action === "migrate" ? { action, workflowVersionId: target || others[0]?.id || "", reason } : { action, reason };
      await post(`/runs/${encodeURIComponent(run.id)}/repair`, body);
      toast(action === "retry" ? `Node ${nodeId} runs again.` : action === "route" ? `Node ${nodeId} routed to ${port}.` : "The run continues on the chosen version.");
      setReason("");
      onRepaired();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={(e) => void submit(e)} className="form-card" aria-labelledby="repair-heading" data-testid="repair-form">
      <h2 id="repair-heading">Repair</h2>
      <p className="help">
        Node <code>{nodeId || "—"}</code> failed. The run keeps its id and history and continues in a new instance; recorded nodes are not run again.
      </p>
      <fieldset className="field">
        <legend>Action</legend>
        <label>
          <input type="radio" name="repair-action" value="retry" checked={action === "retry"} onChange={() => setAction("retry")} /> Retry the node (after its provider or component was fixed)
        </label>
        <label>
          <input type="radio" name="repair-action" value="route" checked={action === "route"} onChange={() => setAction("route")} /> Route it to a port (your decision, recorded as such)
        </label>
        <label>
          <input type="radio" name="repair-action" value="migrate" checked={action === "migrate"} onChange={() => setAction("migrate")} disabled={others.length === 0} /> Migrate to another version
          {others.length === 0 ? " (no other live version)" : ""}
        </label>
      </fieldset>
      {action === "route" ? (
        <div className="field">
          <label htmlFor="repair-port">Port</label>
          <select id="repair-port" value={port} onChange={(e) => setPort(e.target.value)} required>
            {ports.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      {action === "migrate" ? (
        <div className="field">
          <label htmlFor="repair-version">Version</label>
          <select id="repair-version" value={target || others[0]?.id || ""} onChange={(e) => setTarget(e.target.value)} required>
            {others.map((v) => (
              <option key={v.id} value={v.id}>
                v{v.version} · {shortId(v.id)}
              </option>
            ))}
          </select>
          <p className="help">Refused if a recorded node differs there (kind, ports, config) or the failed node is missing.</p>
        </div>
      ) : null}
      <div className="field">
        <label htmlFor="repair-reason">Reason</label>
        <textarea id="repair-reason" rows={2} value={reason} onChange={(e) => setReason(e.target.value)} required maxLength={1000} />
        <p className="help">Recorded in the audit trail with your name.</p>
      </div>
      <ErrorNote error={error} />
      <button type="submit" className="btn btn-primary" disabled={busy || !reason.trim() || (action === "route" && !port)}>
        Repair the run
      </button>
    </form>
  );
}

function SendEvent({ run, onSent }: { run: RunDetail; onSent: () => void }) {
  const waiting = run.waits.filter((w) => w.state === "waiting" && w.waitType === "event");
  const [type, setType] = useState(waiting[0]?.eventType ?? "");
  const [payload, setPayload] = useState("{}");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const toast = useToast();
  const send = async (event: FormEvent) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      setError(new Error("The payload must be a JSON object."));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await post(`/runs/${encodeURIComponent(run.id)}/events`, { type, payload: parsed });
      toast(`Event ${type} sent.`);
      onSent();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={(e) => void send(e)} className="form-card">
      <div className="field">
        <label htmlFor="event-type">Event type</label>
        <input id="event-type" className="mono" list="event-types" value={type} onChange={(e) => setType(e.target.value)} required pattern="[A-Za-z0-9._:\-]{1,100}" autoComplete="off" />
        <datalist id="event-types">
          {waiting.map((w) => (
            <option key={w.id} value={w.eventType} />
          ))}
        </datalist>
        <p className="help">{waiting.length ? `The run waits for: ${[...new Set(waiting.map((w) => w.eventType))].join(", ")}.` : "The run is not waiting for an event."}</p>
      </div>
      <div className="field">
        <label htmlFor="event-payload">Payload (JSON object)</label>
        <textarea id="event-payload" className="mono" rows={4} value={payload} onChange={(e) => setPayload(e.target.value)} />
      </div>
      <ErrorNote error={error} />
      <button type="submit" className="btn" disabled={busy || !type}>
        Send event
      </button>
    </form>
  );
}

function StepCard({ step }: { step: Step }) {
  return (
    <li className="card step">
      <div className="proposal-head">
        <strong>{step.nodeId}</strong>
        <span className="muted small">
          {step.kind.replace(/_/gu, " ")} · branch {step.branchKey}
        </span>
        <StateBadge state={step.state} />
        {step.errorCode ? <span className="badge tone-bad">{step.errorCode}</span> : null}
      </div>
      <dl className="kv small">
        <div>
          <dt>Started</dt>
          <dd>
            <AbsoluteTime at={step.startedAt} />
          </dd>
        </div>
        {step.waitingAt ? (
          <div>
            <dt>Waiting since</dt>
            <dd>
              <AbsoluteTime at={step.waitingAt} />
            </dd>
          </div>
        ) : null}
        <div>
          <dt>Finished</dt>
          <dd>
            <AbsoluteTime at={step.finishedAt} />
          </dd>
        </div>
        {step.outputDigest ? (
          <div>
            <dt>Output digest</dt>
            <dd>
              <code>{step.outputDigest.slice(0, 23)}…</code>
            </dd>
          </div>
        ) : null}
      </dl>
      {step.output ? <Json value={step.output} label={`Output of ${step.nodeId}`} /> : <p className="muted small">No output recorded.</p>}
    </li>
  );
}

export function RunPage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const canAdmin = useCan("admin");
  const { user } = useSession();
  const toast = useToast();
  const run = useResource((signal) => get<RunDetail>(`/runs/${encodeURIComponent(id)}`, signal), [id]);
  const r = run.data;
  const version = useResource(r ? (signal) => get<WorkflowVersion>(`/workflow-versions/${encodeURIComponent(r.workflowVersionId)}`, signal) : null, [r?.workflowVersionId]);
  const events = useResource((signal) => get<Page<AuditEvent>>(`/audit-events?targetType=workflow_run&targetId=${encodeURIComponent(id)}&limit=200`, signal), [id]);
  const live = !!r && !TERMINAL.includes(r.state);
  useInterval(
    () => {
      run.reload();
      events.reload();
    },
    2000,
    live,
  );
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

  const terminate = async () => {
    if (!window.confirm("Terminate this run? Its waits and tasks are cancelled; this cannot be undone.")) return;
    try {
      await post(`/runs/${encodeURIComponent(id)}/terminate`, {});
      toast("Run terminated.");
      run.reload();
    } catch (e) {
      setError(e);
    }
  };

  if (run.error && !r)
    return (
      <section>
        <PageTitle>Run</PageTitle>
        <ErrorNote error={run.error} retry={run.reload} />
      </section>
    );
  if (!r) return <Loading label="Loading the run…" />;

  const byNode = new Map<string, Step[]>();
  for (const step of r.steps) byNode.set(step.nodeId, [...(byNode.get(step.nodeId) ?? []), step]);
  const stateOf = (nodeId: string) => {
    const steps = byNode.get(nodeId);
    return steps?.length ? steps[steps.length - 1]!.state : "not_reached";
  };
  const shownSteps = selected ? (byNode.get(selected) ?? []) : r.steps;

  return (
    <section className="run-page" data-ready="true" data-run-state={r.state}>
      <PageTitle
        subtitle={
          <>
            <StateBadge state={r.state} /> · mode <strong>{r.authorityMode}</strong>
            {version.data ? (
              <>
                {" "}
                · <Link to={`/workflows/${encodeURIComponent(version.data.workflowId)}`}>{version.data.workflowName}</Link> v{version.data.version}
              </>
            ) : null}
            {r.reportId ? (
              <>
                {" "}
                · report <Link to={`/reports/${encodeURIComponent(r.reportId)}`}>{shortId(r.reportId)}</Link>
              </>
            ) : null}
            {r.parentRunId ? (
              <>
                {" "}
                · started by <Link to={`/runs/${encodeURIComponent(r.parentRunId)}`}>{shortId(r.parentRunId)}</Link>
              </>
            ) : null}
          </>
        }
        actions={
          canAdmin && live ? (
            <button type="button" className="btn btn-danger" onClick={() => void terminate()}>
              Terminate
            </button>
          ) : null
        }
      >{`Run ${shortId(r.id)}`}</PageTitle>
      <p className="sr-only" role="status" aria-live="polite" data-testid="run-state">
        Run state: {r.state.replace(/_/gu, " ")}
      </p>
      <ErrorNote error={error} />
      {r.error ? (
        <p className="note note-error">
          Error <code>{r.error.code}</code>
          {r.error.summary ? `: ${r.error.summary}` : ""}
        </p>
      ) : null}
      {canAdmin && REPAIRABLE.includes(r.state) && version.data ? (
        <RepairRun
          run={r}
          version={version.data}
          onRepaired={() => {
            run.reload();
            events.reload();
          }}
        />
      ) : null}
      {r.repairs.length ? (
        <Details summary={`Repairs (${r.repairs.length})`}>
          <ol className="plain-list">
            {r.repairs.map((rep) => (
              <li key={rep.id}>
                <strong>{rep.action}</strong> of <code>{rep.nodeId}</code>
                {rep.port ? (
                  <>
                    {" "}
                    to <code>{rep.port}</code>
                  </>
                ) : null}{" "}
                — {rep.reason} <Time at={rep.createdAt} />
              </li>
            ))}
          </ol>
        </Details>
      ) : null}
      <dl className="stats">
        <div>
          <dt>Created</dt>
          <dd>
            <Time at={r.createdAt} />
          </dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>
            <Time at={r.startedAt} />
          </dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd>
            <Time at={r.finishedAt} />
          </dd>
        </div>
        <div>
          <dt>Current node</dt>
          <dd>{r.currentNodeId ? <code>{r.currentNodeId}</code> : "—"}</dd>
        </div>
        <div>
          <dt>Steps</dt>
          <dd>{r.steps.length}</dd>
        </div>
        {r.output && typeof r.output === "object" && "terminalCode" in (r.output as object) ? (
          <div>
            <dt>Outcome</dt>
            <dd>
              <code>{String((r.output as Record<string, unknown>).terminalCode)}</code>
            </dd>
          </div>
        ) : null}
      </dl>
      {version.data ? (
        <GraphView graph={version.data.graph} label="Run graph: each node shows its state" selected={selected} onSelect={setSelected} extra={(nodeId) => ({ state: stateOf(nodeId), steps: byNode.get(nodeId)?.length ?? 0 })} />
      ) : version.error ? (
        <ErrorNote error={version.error} />
      ) : (
        <Loading label="Drawing the graph…" />
      )}
      <div className="run-grid">
        <section aria-labelledby="steps-heading">
          <h2 id="steps-heading">
            {selected ? (
              <>
                Steps of <code>{selected}</code>{" "}
                <button type="button" className="btn btn-small btn-quiet" onClick={() => setSelected(null)}>
                  Show all
                </button>
              </>
            ) : (
              "Steps"
            )}
          </h2>
          {shownSteps.length === 0 ? (
            <Empty>{selected ? "This node was not reached." : "No step has run yet."}</Empty>
          ) : (
            <ol className="plain-list cards">
              {shownSteps.map((s) => (
                <StepCard key={s.id} step={s} />
              ))}
            </ol>
          )}
        </section>
        <section aria-labelledby="waits-heading">
          <h2 id="waits-heading">Waits</h2>
          {r.waits.length === 0 ? (
            <Empty>The run has not waited.</Empty>
          ) : (
            <table className="table">
              <caption className="sr-only">Waits of the run</caption>
              <thead>
                <tr>
                  <th scope="col">Kind</th>
                  <th scope="col">Event</th>
                  <th scope="col">State</th>
                  <th scope="col">Deadline</th>
                  <th scope="col">Satisfied</th>
                </tr>
              </thead>
              <tbody>
                {r.waits.map((w) => (
                  <tr key={w.id}>
                    <td>{w.waitType}</td>
                    <td>
                      <code>{w.eventType}</code>
                    </td>
                    <td>
                      <StateBadge state={w.state} />
                    </td>
                    <td>
                      <Time at={w.deadlineAt} />
                    </td>
                    <td>
                      <Time at={w.satisfiedAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>Events and audit</h2>
          {events.data?.items.length ? (
            <ol className="plain-list">
              {events.data.items.map((e) => (
                <li key={e.id}>
                  <code>{e.action}</code>{" "}
                  <span className="muted small">
                    by {e.actor.type} {shortId(e.actor.id)}
                  </span>{" "}
                  <Time at={e.createdAt} />
                </li>
              ))}
            </ol>
          ) : (
            <Empty>No events recorded.</Empty>
          )}
          {canAdmin && live ? (
            <Details summary="Send an event">
              <SendEvent run={r} onSent={run.reload} />
            </Details>
          ) : null}
          {!canAdmin && live ? <p className="muted small">{cannotReason(user.role, "admin")}</p> : null}
          <Details summary="Input and output">
            <h3>Input</h3>
            <Json value={r.input} label="Run input" />
            <h3>Output</h3>
            <Json value={r.output} label="Run output" />
          </Details>
        </section>
      </div>
    </section>
  );
}
