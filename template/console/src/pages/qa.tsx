// Reviewer QA (admins only): per reviewer and per category, agreement with blind QA reviews and
// accuracy on golden items with their 95% intervals, kappa between reviewers, median time per task;
// and each queue's sampling settings. Reviewers never see this page (nor which tasks are golden).
import { server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { useNavigate, useSearchParam } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Empty, ErrorNote, formatSeconds, Loading, PageTitle, Tabs } from "../ui";

type Figures = ApiResponse<"get", "/qa/reviewers">;
type Row = Figures["overall"];

const WINDOWS = [
  { id: "7d", label: "7 days", days: 7 },
  { id: "30d", label: "30 days", days: 30 },
  { id: "90d", label: "90 days", days: 90 },
] as const;
type WindowId = (typeof WINDOWS)[number]["id"];

const pct = (value: number | null) => (value === null ? "—" : `${(value * 100).toFixed(1)}%`);

/** A proportion with its interval and the counts behind it; "no data" rather than a figure over nothing. */
function Share({ p }: { p: Row["qaAgreement"] }) {
  if (p.trials === 0) return <span className="muted">no data</span>;
  return (
    <span title={`95% Wilson interval ${pct(p.low)} – ${pct(p.high)}`}>
      {pct(p.value)}{" "}
      <span className="muted small">
        ({p.successes}/{p.trials}; {pct(p.low)}–{pct(p.high)})
      </span>
    </span>
  );
}

function Kappa({ k }: { k: Row["kappa"] }) {
  if (k.n === 0 || k.kappa === null) return <span className="muted">{k.n === 0 ? "no data" : "undefined"}</span>;
  return (
    <span title={`observed ${pct(k.observed)}, by chance ${pct(k.expected)}`}>
      {k.kappa.toFixed(2)} <span className="muted small">(n {k.n})</span>
    </span>
  );
}

function FiguresTable({ rows, label, first }: { rows: Array<Row & { name: string; qaReviewsDone?: number }>; label: string; first: string }) {
  if (rows.length === 0) return <Empty>Nothing reviewed in this window.</Empty>;
  return (
    <table className="table table-compact" data-testid={`qa-${first.toLowerCase()}`}>
      <caption className="sr-only">{label}</caption>
      <thead>
        <tr>
          <th scope="col">{first}</th>
          <th scope="col" className="num">
            Tasks
          </th>
          <th scope="col" className="num">
            Median time
          </th>
          <th scope="col">Agreement with QA</th>
          <th scope="col">Kappa</th>
          <th scope="col">Golden accuracy</th>
          {rows.some((r) => r.qaReviewsDone !== undefined) ? (
            <th scope="col" className="num">
              QA reviews done
            </th>
          ) : null}
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.name}>
            <th scope="row">{r.name.replace(/_/gu, " ")}</th>
            <td className="num">{r.tasksCompleted}</td>
            <td className="num">{r.medianSecondsPerTask === null ? "—" : formatSeconds(r.medianSecondsPerTask)}</td>
            <td>
              <Share p={r.qaAgreement} />
            </td>
            <td>
              <Kappa k={r.kappa} />
            </td>
            <td>
              <Share p={r.goldenAccuracy} />
            </td>
            {r.qaReviewsDone !== undefined ? <td className="num">{r.qaReviewsDone}</td> : null}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function QaPage() {
  const isAdmin = useCan("admin");
  const { user } = useSession();
  const navigate = useNavigate();
  const windowId = (useSearchParam("window") ?? "30d") as WindowId;
  const window = WINDOWS.find((w) => w.id === windowId) ?? WINDOWS[1];
  const figures = useResource(isAdmin ? (signal) => server.get("/qa/reviewers", { query: { since: new Date(Date.now() - window.days * 86_400_000).toISOString() }, signal }) : null, [window.id, isAdmin]);
  const settings = useResource(isAdmin ? (signal) => server.get("/qa/settings", { signal }) : null, [isAdmin]);
  const queues = useResource(isAdmin ? (signal) => server.get("/queues", { signal }) : null, [isAdmin]);
  const golden = useResource(isAdmin ? (signal) => server.get("/qa/golden-items", { signal }) : null, [isAdmin]);
  if (!isAdmin)
    return (
      <section>
        <PageTitle>Reviewer QA</PageTitle>
        <p className="note">{cannotReason(user.role, "admin")}</p>
      </section>
    );
  const data = figures.data;
  const queueName = (id: string | null) => queues.data?.items.find((q) => q.id === id)?.name ?? id ?? "—";
  return (
    <section data-ready={data ? "true" : undefined}>
      <PageTitle subtitle="Blind second reviews of a sample of completed tasks, and golden items with known answers. Reviewers are not told which tasks are either.">Reviewer QA</PageTitle>
      <Tabs tabs={WINDOWS.map((w) => ({ id: w.id, label: w.label }))} value={window.id} onChange={(id) => navigate(`/qa?window=${id}`)} label="Window" />
      <ErrorNote error={figures.error} retry={figures.reload} />
      {figures.loading && !data ? <Loading /> : null}
      {data ? (
        <>
          <p className="muted small" data-testid="qa-definition">
            {data.agreement} Intervals are 95% Wilson intervals; kappa is Cohen's, first answer against QA answer.
          </p>
          <div className="stats">
            <div className="stat">
              <span className="muted small">Agreement with QA</span>
              <strong>
                <Share p={data.overall.qaAgreement} />
              </strong>
            </div>
            <div className="stat">
              <span className="muted small">Kappa between reviewers</span>
              <strong>
                <Kappa k={data.overall.kappa} />
              </strong>
            </div>
            <div className="stat">
              <span className="muted small">Golden accuracy</span>
              <strong>
                <Share p={data.overall.goldenAccuracy} />
              </strong>
            </div>
            <div className="stat">
              <span className="muted small">Median time per task</span>
              <strong>{data.overall.medianSecondsPerTask === null ? "—" : formatSeconds(data.overall.medianSecondsPerTask)}</strong>
            </div>
          </div>
          <h2>Per reviewer</h2>
          <FiguresTable rows={data.reviewers.map((r) => ({ ...r, name: r.reviewer }))} label="Figures per reviewer" first="Reviewer" />
          <h2>Per category</h2>
          <FiguresTable rows={data.categories.map((c) => ({ ...c, name: c.category }))} label="Figures per category" first="Category" />
        </>
      ) : null}
      <h2>Sampling per queue</h2>
      <ErrorNote error={settings.error} retry={settings.reload} />
      {settings.data && settings.data.items.length === 0 ? <Empty>No queue is sampled. Set a rate with PUT /api/v1/queues/:id/qa-settings.</Empty> : null}
      {settings.data && settings.data.items.length > 0 ? (
        <table className="table table-compact" data-testid="qa-settings">
          <caption className="sr-only">QA sampling per queue</caption>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col" className="num">
                Sampled
              </th>
              <th scope="col">QA queue</th>
              <th scope="col">Compared on</th>
            </tr>
          </thead>
          <tbody>
            {settings.data.items.map((s) => (
              <tr key={s.queueId}>
                <th scope="row">{queueName(s.queueId)}</th>
                <td className="num">{pct(s.rate)}</td>
                <td>{queueName(s.qaQueueId)}</td>
                <td>
                  <code>{s.compareField}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <h2>Golden items</h2>
      <ErrorNote error={golden.error} retry={golden.reload} />
      {golden.data && golden.data.items.length === 0 ? <Empty>No golden items yet. Write one from a task with a known answer: POST /api/v1/qa/golden-items.</Empty> : null}
      {golden.data && golden.data.items.length > 0 ? (
        <table className="table table-compact" data-testid="qa-golden">
          <caption className="sr-only">Golden items and how they were answered</caption>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">Category</th>
              <th scope="col">Known answer</th>
              <th scope="col">Task</th>
              <th scope="col">Answered by</th>
              <th scope="col">Result</th>
            </tr>
          </thead>
          <tbody>
            {golden.data.items.map((g) => (
              <tr key={g.id}>
                <td>{queueName(g.queueId)}</td>
                <td>{g.category ? g.category.replace(/_/gu, " ") : "—"}</td>
                <td>
                  <code>{g.comparedOn}</code>
                </td>
                <td>{g.taskState ?? "—"}</td>
                <td>{g.result?.reviewer ?? <span className="muted">not yet</span>}</td>
                <td>{g.result ? g.result.correct ? <span className="badge tone-ok">right</span> : <span className="badge tone-bad">wrong: {g.result.answered}</span> : <span className="muted">—</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
