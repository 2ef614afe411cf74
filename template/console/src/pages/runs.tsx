// Runs, newest first, filtered by state or version.
import { qs, type Run } from "../api";
import { usePagedList } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { useCan } from "../session";
import { Details, Empty, ErrorNote, Loading, PageTitle, shortId, StateBadge, Time } from "../ui";
import { BulkRunOperation } from "./run-operations";

const STATES = ["", "running", "waiting", "repair_required", "succeeded", "failed", "terminated"];

export function RunsPage() {
  const navigate = useNavigate();
  const state = useSearchParam("state") ?? "";
  const versionId = useSearchParam("workflowVersionId") ?? "";
  const list = usePagedList<Run>((cursor) => `/runs${qs({ state, workflowVersionId: versionId, limit: 50, cursor })}`, [state, versionId]);
  const { first } = list;
  const runs = list.items;
  const canAdmin = useCan("admin");
  return (
    <section data-ready={first.data ? "true" : undefined}>
      <PageTitle
        subtitle={
          versionId ? (
            <>
              Version <code>{shortId(versionId)}</code> · <Link to="/runs">all runs</Link>
            </>
          ) : undefined
        }
      >
        Runs
      </PageTitle>
      <div className="filters">
        <label htmlFor="run-state">State</label>
        <select id="run-state" value={state} onChange={(e) => navigate(`/runs${qs({ state: e.target.value, workflowVersionId: versionId })}`, { replace: true })}>
          {STATES.map((s) => (
            <option key={s} value={s}>
              {s ? s.replace(/_/gu, " ") : "any"}
            </option>
          ))}
        </select>
      </div>
      {canAdmin ? (
        <Details summary="Bulk repair (terminate, retry, migrate)">
          <BulkRunOperation state={state} versionId={versionId} />
        </Details>
      ) : null}
      <ErrorNote error={first.error} retry={first.reload} />
      {first.loading && runs.length === 0 ? <Loading /> : null}
      {first.data && runs.length === 0 ? <Empty>No runs.</Empty> : null}
      {runs.length > 0 ? (
        <table className="table">
          <caption className="sr-only">Runs</caption>
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Workflow</th>
              <th scope="col">Version</th>
              <th scope="col">State</th>
              <th scope="col">Mode</th>
              <th scope="col">Current node</th>
              <th scope="col">Report</th>
              <th scope="col">Started</th>
              <th scope="col">Finished</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((run) => (
              <tr key={run.id}>
                <th scope="row">
                  <Link to={`/runs/${encodeURIComponent(run.id)}`}>{shortId(run.id)}</Link>
                </th>
                <td>{run.workflowId ? <Link to={`/workflows/${encodeURIComponent(run.workflowId)}`}>{run.workflowName ?? shortId(run.workflowId)}</Link> : <span className="muted">—</span>}</td>
                <td>
                  {run.workflowVersion !== null ? (
                    <Link to={`/runs${qs({ workflowVersionId: run.workflowVersionId })}`} title={run.workflowVersionId}>
                      v{run.workflowVersion}
                    </Link>
                  ) : (
                    <code>{shortId(run.workflowVersionId)}</code>
                  )}
                </td>
                <td>
                  <StateBadge state={run.state} />
                  {run.error ? <span className="muted small"> {run.error.code}</span> : null}
                </td>
                <td>{run.authorityMode}</td>
                <td>{run.currentNodeId ? <code>{run.currentNodeId}</code> : <span className="muted">—</span>}</td>
                <td>{run.reportId ? <Link to={`/reports/${encodeURIComponent(run.reportId)}`}>{shortId(run.reportId)}</Link> : <span className="muted">—</span>}</td>
                <td>
                  <Time at={run.startedAt ?? run.createdAt} />
                </td>
                <td>
                  <Time at={run.finishedAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <ErrorNote error={list.moreError} />
      {list.hasMore ? (
        <button type="button" className="btn" disabled={list.loadingMore} onClick={() => void list.loadMore()}>
          {list.loadingMore ? "Loading…" : "Show more"}
        </button>
      ) : null}
    </section>
  );
}
