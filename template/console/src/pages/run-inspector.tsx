// The run inspector: the version's graph with each node's state, the selected node's steps and
// outputs, the run's waits and events, and (for admins) terminate, send event and repair (retry,
// route to a port, migrate to another version) with a reason.
import { useState } from "react";
import { get, post, type AuditEvent, type Page, type RunDetail, type Step, type WorkflowVersion } from "../api";
import { GraphView } from "../graph/view";
import { useInterval, useResource } from "../hooks";
import { Link } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { AbsoluteTime, Details, Empty, ErrorNote, Json, Loading, PageTitle, shortId, StateBadge, Time, useToast } from "../ui";
import { RepairRun } from "./run-inspector/repair-run";
import { SendEvent } from "./run-inspector/send-event";

const TERMINAL = ["succeeded", "failed", "terminated", "superseded"];
const REPAIRABLE = ["repair_required", "failed"];

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
