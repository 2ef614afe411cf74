// Review home: every queue the reviewer can see with its open, claimed and SLA figures, and
// "Next task", which claims the top of a queue and opens it.
import { useState } from "react";
import { ApiError, get, post, qs, type Page, type Queue, type Task } from "../api";
import { useInterval, usePagedList, useResource } from "../hooks";
import { Link, useNavigate } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Empty, ErrorNote, formatSeconds, Loading, PageTitle, shortId, StateBadge, Tabs, Time, useToast } from "../ui";
import { capReachedNotice, ExposureSummary, rememberNext, WellnessNotice, type CapNotice, type NextTask } from "./wellness-notice";

/**
 * Claims the first task of a queue and opens it; says so when the queue is empty, and (`capNotice`)
 * when only work of categories whose daily exposure limit the reviewer reached is left. What it
 * skipped for that reason the task page it opens says (wellness-notice.tsx).
 */
export function useNextTask() {
  const navigate = useNavigate();
  const toast = useToast();
  const [busy, setBusy] = useState<string | null>(null);
  const [capNotice, setCapNotice] = useState<CapNotice | null>(null);
  const next = async (queueId: string) => {
    setBusy(queueId);
    try {
      const task = await post<NextTask>(`/queues/${encodeURIComponent(queueId)}/next`, {});
      setCapNotice(null);
      rememberNext(task);
      navigate(`/tasks/${encodeURIComponent(task.id)}`);
    } catch (error) {
      if (error instanceof ApiError && error.code === "queue.empty") toast("This queue has no open task right now.", "ok");
      else if (error instanceof ApiError && error.code === "wellness.exposure_cap_reached") {
        setCapNotice(capReachedNotice(error.details));
        toast("You reached today's exposure limit for the work left in this queue.", "ok");
      } else toast(error instanceof Error ? error.message : String(error), "bad");
    } finally {
      setBusy(null);
    }
  };
  return { next, busy, capNotice };
}

function Due({ at }: { at: string | null | undefined }) {
  if (!at) return <span className="muted">—</span>;
  const overdue = Date.parse(at) < Date.now();
  return (
    <span className={overdue ? "text-bad" : undefined}>
      {overdue ? "overdue, " : "due "}
      <Time at={at} />
    </span>
  );
}

export function QueuesPage() {
  const canReview = useCan("review");
  const { user } = useSession();
  const queues = useResource((signal) => get<Page<Queue>>("/queues", signal), []);
  useInterval(queues.reload, 15_000);
  const { next, busy, capNotice } = useNextTask();
  const items = queues.data?.items ?? [];
  const totals = items.reduce((sum, q) => ({ open: sum.open + (q.open ?? 0), breached: sum.breached + (q.breachedSla ?? 0) }), { open: 0, breached: 0 });
  return (
    <section aria-busy={queues.loading} data-ready={queues.data ? "true" : undefined}>
      <PageTitle subtitle={queues.data ? `${totals.open} open task${totals.open === 1 ? "" : "s"} · ${totals.breached} past SLA` : undefined}>Review queues</PageTitle>
      {!canReview ? <p className="note note-info">{cannotReason(user.role, "review")}</p> : null}
      <WellnessNotice notice={capNotice} />
      {canReview ? <ExposureSummary /> : null}
      <ErrorNote error={queues.error} retry={queues.reload} />
      {!queues.data && queues.loading ? <Loading /> : null}
      {queues.data && items.length === 0 ? (
        <Empty>
          No queues{user.queueIds ? " are assigned to you" : " yet"}. {user.role === "admin" ? <Link to="/settings/queues">Create one in Settings</Link> : null}
        </Empty>
      ) : null}
      {items.length > 0 ? (
        <table className="table">
          <caption className="sr-only">Queues with their open, claimed and overdue tasks</caption>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col" className="num">
                Open
              </th>
              <th scope="col" className="num">
                Claimed
              </th>
              <th scope="col" className="num">
                Past SLA
              </th>
              <th scope="col">Oldest open</th>
              <th scope="col">SLA</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {items.map((queue) => (
              <tr key={queue.id}>
                <th scope="row">
                  <Link to={`/queues/${encodeURIComponent(queue.id)}`}>{queue.name}</Link>
                  {queue.description ? <div className="muted small">{queue.description}</div> : null}
                </th>
                <td className="num" data-testid="queue-open">
                  {queue.open ?? 0}
                </td>
                <td className="num">{queue.claimed ?? 0}</td>
                <td className="num">{(queue.breachedSla ?? 0) > 0 ? <span className="badge tone-bad">{queue.breachedSla}</span> : 0}</td>
                <td>
                  <Due at={queue.oldestDueAt} />
                </td>
                <td>{formatSeconds(queue.slaSeconds)}</td>
                <td className="actions">
                  {canReview ? (
                    <button type="button" className="btn btn-primary" disabled={busy !== null || (queue.open ?? 0) === 0} onClick={() => void next(queue.id)} aria-label={`Next task in ${queue.name}`}>
                      {busy === queue.id ? "Claiming…" : "Next task"}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

type TaskState = "open" | "claimed" | "completed" | "expired";

export function QueuePage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const canReview = useCan("review");
  const { user } = useSession();
  const [state, setState] = useState<TaskState>("open");
  const queue = useResource((signal) => get<Queue>(`/queues/${encodeURIComponent(id)}`, signal), [id]);
  const stats = useResource(
    (signal) =>
      get<{ open: number; claimed: number; breachedSla: number; oldestOpenDueAt: string | null; timeToComplete: { sample: number; p50Seconds: number | null; p90Seconds: number | null } }>(`/queues/${encodeURIComponent(id)}/stats`, signal),
    [id],
  );
  const list = usePagedList<Task>((cursor) => `/queues/${encodeURIComponent(id)}/tasks${qs({ state, limit: 50, cursor })}`, [id, state]);
  const { first } = list;
  const { next, busy, capNotice } = useNextTask();
  const tasks = list.items;
  const s = stats.data;
  return (
    <section data-ready={first.data ? "true" : undefined}>
      <PageTitle
        subtitle={queue.data ? `SLA ${formatSeconds(queue.data.slaSeconds)} · priority ${queue.data.priority}` : undefined}
        actions={
          canReview ? (
            <button type="button" className="btn btn-primary" data-testid="next-task" disabled={busy !== null || (s ? s.open === 0 : false)} onClick={() => void next(id)}>
              {busy ? "Claiming…" : "Next task"}
            </button>
          ) : null
        }
      >
        {queue.data?.name ?? "Queue"}
      </PageTitle>
      {!canReview ? <p className="note note-info">{cannotReason(user.role, "review")}</p> : null}
      <WellnessNotice notice={capNotice} />
      <ErrorNote error={queue.error ?? stats.error} />
      {s ? (
        <dl className="stats">
          <div>
            <dt>Open</dt>
            <dd>{s.open}</dd>
          </div>
          <div>
            <dt>Claimed</dt>
            <dd>{s.claimed}</dd>
          </div>
          <div>
            <dt>Past SLA</dt>
            <dd className={s.breachedSla > 0 ? "text-bad" : undefined}>{s.breachedSla}</dd>
          </div>
          <div>
            <dt>Oldest open</dt>
            <dd>
              <Due at={s.oldestOpenDueAt} />
            </dd>
          </div>
          <div>
            <dt>Time to complete (p50 / p90, 30 days)</dt>
            <dd>{s.timeToComplete.p50Seconds === null ? "—" : `${Math.round(s.timeToComplete.p50Seconds)} s / ${Math.round(s.timeToComplete.p90Seconds ?? 0)} s`}</dd>
          </div>
        </dl>
      ) : null}
      <Tabs<TaskState>
        label="Task state"
        value={state}
        onChange={setState}
        tabs={[
          { id: "open", label: "Open" },
          { id: "claimed", label: "Claimed" },
          { id: "completed", label: "Completed" },
          { id: "expired", label: "Expired" },
        ]}
      />
      <div role="tabpanel" id={`panel-${state}`} aria-labelledby={`tab-${state}`}>
        <ErrorNote error={first.error} retry={first.reload} />
        {first.loading && tasks.length === 0 ? <Loading /> : null}
        {first.data && tasks.length === 0 ? <Empty>No {state} tasks.</Empty> : null}
        {tasks.length > 0 ? (
          <table className="table">
            <caption className="sr-only">{state} tasks in SLA order</caption>
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Type</th>
                <th scope="col">Due</th>
                <th scope="col">State</th>
                <th scope="col">Reviewer</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {tasks.map((task) => (
                <tr key={task.id}>
                  <th scope="row">
                    <Link to={`/tasks/${encodeURIComponent(task.id)}`}>{shortId(task.id)}</Link>
                  </th>
                  <td>{task.taskType}</td>
                  <td>
                    <Due at={task.dueAt} />
                  </td>
                  <td>
                    <StateBadge state={task.state} />
                  </td>
                  <td>{task.claim?.reviewer ?? task.completedBy ?? <span className="muted">—</span>}</td>
                  <td>
                    <Time at={task.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
        <ErrorNote error={list.moreError} />
        {list.hasMore ? (
          <button type="button" className="btn" onClick={() => void list.loadMore()} disabled={list.loadingMore}>
            {list.loadingMore ? "Loading…" : "Show more"}
          </button>
        ) : null}
      </div>
    </section>
  );
}
