// The desk's morning page: intake, queue health, runs, deliveries, automation and appeals over a
// range, from GET /metrics (hourly rollups). Charts are small inline SVGs drawn here (no chart
// library: nothing to download, no runtime code generation, and each chart has a text summary and
// its numbers in a table). This page is its own chunk: the review pages do not load it.
import { server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { ErrorNote, Loading, PageTitle, shortId } from "../ui";
import { Chart, duration, num, pct, Stat, sum } from "./dashboard/chart";

type Metrics = ApiResponse<"get", "/metrics">;
type Series = Metrics["series"][number];

const RANGES = [
  { id: "24h", label: "Last 24 hours", hours: 24, step: "hour" },
  { id: "7d", label: "Last 7 days", hours: 24 * 7, step: "hour" },
  { id: "30d", label: "Last 30 days", hours: 24 * 30, step: "day" },
] as const;
type RangeId = (typeof RANGES)[number]["id"];

export function DashboardPage() {
  const navigate = useNavigate();
  const rangeId = (useSearchParam("range") ?? "24h") as RangeId;
  const range = RANGES.find((r) => r.id === rangeId) ?? RANGES[0];
  const metrics = useResource(
    (signal) => {
      const to = new Date();
      const from = new Date(to.getTime() - range.hours * 3_600_000);
      return server.get("/metrics", { query: { from: from.toISOString(), to: to.toISOString(), step: range.step }, signal });
    },
    [range.id],
  );
  const data = metrics.data;
  return (
    <section data-ready={data ? "true" : undefined}>
      <PageTitle
        subtitle={
          data ? (
            <>Rolled up hourly{data.rolledThrough ? <> through {new Date(data.rolledThrough).toLocaleString()}</> : " (no complete hour rolled up by the schedule yet; these figures were recomputed on request)"}.</>
          ) : (
            "Rolled up hourly by the schedule."
          )
        }
        actions={
          // biome-ignore lint/a11y/useSemanticElements: toggle buttons that navigate, not form fields, so not a <fieldset>
          <div className="filters" role="group" aria-label="Range">
            {RANGES.map((r) => (
              <button key={r.id} type="button" className={`btn btn-small${r.id === range.id ? " btn-primary" : ""}`} aria-pressed={r.id === range.id} onClick={() => navigate(`/dashboard?range=${r.id}`, { replace: true })}>
                {r.label}
              </button>
            ))}
          </div>
        }
      >
        Dashboard
      </PageTitle>
      <ErrorNote error={metrics.error} retry={metrics.reload} />
      {metrics.loading && !data ? <Loading /> : null}
      {data ? <Figures data={data} /> : null}
    </section>
  );
}

function Figures({ data }: { data: Metrics }) {
  const { summary, steps, step, names } = data;
  const of = (metric: string) => data.series.filter((s) => s.metric === metric);
  const queueName = (id: string | null | undefined) => (id ? (names.queues[id] ?? shortId(id)) : "—");
  const versionName = (id: string | null | undefined) => {
    const v = id ? names.versions[id] : undefined;
    return v ? `${v.workflowName} v${v.version}` : shortId(id);
  };
  const total = (series: Series[], where: (dims: Series["dims"]) => boolean = () => true) => series.filter((s) => where(s.dims)).reduce((a, s) => a + (s.total ?? 0), 0);

  const reports = of("reports.received");
  const byCategory = new Map<string, number>();
  const bySource = new Map<string, number>();
  for (const s of reports) {
    byCategory.set(s.dims.category ?? "—", (byCategory.get(s.dims.category ?? "—") ?? 0) + (s.total ?? 0));
    bySource.set(s.dims.source ?? "—", (bySource.get(s.dims.source ?? "—") ?? 0) + (s.total ?? 0));
  }

  const queueIds = [...new Set([...of("queue.depth"), ...of("tasks.sla_breaches")].map((s) => s.dims.queue).filter((q): q is string => typeof q === "string"))];
  const depth = of("queue.depth");
  const queueRows = queueIds
    .map((id) => {
      const firstAction = data.histograms.find((h) => h.metric === "queue.first_action_seconds" && h.dims.queue === id)?.total;
      return {
        id,
        depth: depth.find((s) => s.dims.queue === id)?.total ?? null,
        oldest: of("queue.oldest_seconds").find((s) => s.dims.queue === id)?.total ?? null,
        breaches: total(of("tasks.sla_breaches"), (d) => d.queue === id),
        completed: total(of("tasks.ended"), (d) => d.queue === id && d.state === "completed"),
        firstAction,
      };
    })
    .sort((a, b) => (b.depth ?? 0) - (a.depth ?? 0));
  const topQueues = queueRows.slice(0, 5);

  const ended = of("runs.ended");
  const runStates = ["succeeded", "repair_required", "failed", "terminated"];
  const versions = [...new Set([...of("runs.created"), ...ended].map((s) => s.dims.version).filter((v): v is string => typeof v === "string"))];
  const versionRows = versions
    .map((id) => {
      const codes = new Map<string, number>();
      for (const s of ended) if (s.dims.version === id && s.dims.code) codes.set(s.dims.code, (codes.get(s.dims.code) ?? 0) + (s.total ?? 0));
      return {
        id,
        created: total(of("runs.created"), (d) => d.version === id),
        states: Object.fromEntries(runStates.map((state) => [state, total(ended, (d) => d.version === id && d.state === state)])),
        codes: [...codes.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3),
      };
    })
    .sort((a, b) => b.created - a.created);

  const decisions = of("decisions.made");
  const modes = [...new Set(decisions.map((s) => s.dims.mode ?? "manual"))];
  return (
    <>
      <div className="stats dashboard-stats" data-testid="dashboard-summary">
        <Stat label="Reports in" value={num(summary.reports)} testId="stat-reports" />
        <Stat label="Open tasks now" value={num(summary.openTasks)} testId="stat-open" />
        <Stat label="SLA breaches" value={num(summary.slaBreaches)} tone={summary.slaBreaches > 0 ? "bad" : undefined} testId="stat-breaches" />
        <Stat label="Runs needing repair" value={num(summary.runsNeedingRepair)} tone={summary.runsNeedingRepair > 0 ? "bad" : undefined} />
        <Stat label="Dead deliveries" value={num(summary.deliveriesDead)} tone={summary.deliveriesDead > 0 ? "bad" : undefined} />
        <Stat label="Fully automated decisions" value={pct(summary.automationShare.fully)} />
        <Stat label="Appeals overturned" value={pct(summary.overturnRate)} testId="stat-overturn" />
      </div>

      <div className="dashboard-grid">
        <div className="card">
          <h2>Intake</h2>
          <Chart title={`Reports per ${step}`} lines={[{ label: "Reports", points: sum(reports, steps.length) }]} steps={steps} step={step} bars />
          <div className="field-row">
            <table className="table table-compact">
              <caption className="sr-only">Reports by category</caption>
              <thead>
                <tr>
                  <th scope="col">Category</th>
                  <th scope="col" className="num">
                    Reports
                  </th>
                </tr>
              </thead>
              <tbody>
                {[...byCategory.entries()]
                  .sort((a, b) => b[1] - a[1])
                  .map(([category, n]) => (
                    <tr key={category}>
                      <td>{category.replace(/_/gu, " ")}</td>
                      <td className="num">{num(n)}</td>
                    </tr>
                  ))}
              </tbody>
            </table>
            <table className="table table-compact">
              <caption className="sr-only">Reports by source</caption>
              <thead>
                <tr>
                  <th scope="col">Source</th>
                  <th scope="col" className="num">
                    Reports
                  </th>
                </tr>
              </thead>
              <tbody>
                {[...bySource.entries()]
                  .sort((a, b) => b[1] - a[1])
                  .map(([source, n]) => (
                    <tr key={source}>
                      <td>{source.replace(/_/gu, " ")}</td>
                      <td className="num">{num(n)}</td>
                    </tr>
                  ))}
              </tbody>
            </table>
          </div>
        </div>

        <div className="card">
          <h2>Queues</h2>
          <Chart title="Tasks waiting" lines={topQueues.map((q) => ({ label: queueName(q.id), points: (depth.find((s) => s.dims.queue === q.id)?.points ?? []).map((p) => p ?? 0) }))} steps={steps} step={step} />
          <table className="table table-compact" data-testid="queue-health">
            <caption className="sr-only">Queue health</caption>
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col" className="num">
                  Waiting
                </th>
                <th scope="col" className="num">
                  Oldest
                </th>
                <th scope="col" className="num">
                  SLA breaches
                </th>
                <th scope="col" className="num">
                  Completed
                </th>
                <th scope="col" className="num">
                  First action p50
                </th>
                <th scope="col" className="num">
                  p90
                </th>
              </tr>
            </thead>
            <tbody>
              {queueRows.map((q) => (
                <tr key={q.id}>
                  <th scope="row">
                    <Link to={`/queues/${encodeURIComponent(q.id)}`}>{queueName(q.id)}</Link>
                  </th>
                  <td className="num">{num(q.depth)}</td>
                  <td className="num">{duration(q.oldest)}</td>
                  <td className={`num${q.breaches > 0 ? " text-bad" : ""}`}>{num(q.breaches)}</td>
                  <td className="num">{num(q.completed)}</td>
                  <td className="num">{q.firstAction?.p50 === null || !q.firstAction ? "—" : `≤ ${duration(q.firstAction.p50)}`}</td>
                  <td className="num">{q.firstAction?.p90 === null || !q.firstAction ? "—" : `≤ ${duration(q.firstAction.p90)}`}</td>
                </tr>
              ))}
              {queueRows.length === 0 ? (
                <tr>
                  <td colSpan={7} className="muted">
                    No queues yet.
                  </td>
                </tr>
              ) : null}
            </tbody>
          </table>
        </div>

        <div className="card">
          <h2>Runs</h2>
          <Chart
            title={`Runs ended per ${step}`}
            lines={runStates.map((state) => ({
              label: state.replace(/_/gu, " "),
              points: sum(
                ended.filter((s) => s.dims.state === state),
                steps.length,
              ),
            }))}
            steps={steps}
            step={step}
          />
          <table className="table table-compact" data-testid="runs-by-version">
            <caption className="sr-only">Runs by workflow version</caption>
            <thead>
              <tr>
                <th scope="col">Workflow version</th>
                <th scope="col" className="num">
                  Started
                </th>
                {runStates.map((s) => (
                  <th key={s} scope="col" className="num">
                    {s.replace(/_/gu, " ")}
                  </th>
                ))}
                <th scope="col">Top error codes</th>
              </tr>
            </thead>
            <tbody>
              {versionRows.map((v) => (
                <tr key={v.id}>
                  <th scope="row">
                    <Link to={`/runs?workflowVersionId=${encodeURIComponent(v.id)}`}>{versionName(v.id)}</Link>
                  </th>
                  <td className="num">{num(v.created)}</td>
                  {runStates.map((s) => (
                    <td key={s} className={`num${s !== "succeeded" && (v.states[s] ?? 0) > 0 ? " text-bad" : ""}`}>
                      {num(v.states[s])}
                    </td>
                  ))}
                  <td>
                    {v.codes.length ? (
                      v.codes.map(([code, n]) => (
                        <span key={code}>
                          <code>{code}</code> ×{n}{" "}
                        </span>
                      ))
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                </tr>
              ))}
              {versionRows.length === 0 ? (
                <tr>
                  <td colSpan={runStates.length + 3} className="muted">
                    No runs in this range.
                  </td>
                </tr>
              ) : null}
            </tbody>
          </table>
        </div>

        <div className="card">
          <h2>Deliveries</h2>
          <Chart
            title={`Webhook deliveries per ${step}`}
            lines={["delivered", "dead"].map((state) => ({
              label: state,
              points: sum(
                of("deliveries.ended").filter((s) => s.dims.state === state),
                steps.length,
              ),
            }))}
            steps={steps}
            step={step}
          />
          <p>
            Pending now: <strong>{num(summary.deliveriesPending)}</strong> · created in range: {num(total(of("deliveries.created")))} · dead-lettered:{" "}
            <span className={summary.deliveriesDead > 0 ? "text-bad" : undefined}>{num(summary.deliveriesDead)}</span>
          </p>
        </div>

        <div className="card">
          <h2>Decisions and appeals</h2>
          <table className="table table-compact" data-testid="decisions-by-mode">
            <caption className="sr-only">Decisions by automation</caption>
            <thead>
              <tr>
                <th scope="col">Run mode</th>
                <th scope="col" className="num">
                  Fully automated
                </th>
                <th scope="col" className="num">
                  Partially
                </th>
                <th scope="col" className="num">
                  By a person
                </th>
              </tr>
            </thead>
            <tbody>
              {modes.map((mode) => (
                <tr key={mode}>
                  <th scope="row">{mode}</th>
                  {["fully", "partially", "not_automated"].map((a) => (
                    <td key={a} className="num">
                      {num(total(decisions, (d) => (d.mode ?? "manual") === mode && d.automated === a))}
                    </td>
                  ))}
                </tr>
              ))}
              {modes.length === 0 ? (
                <tr>
                  <td colSpan={4} className="muted">
                    No decisions in this range.
                  </td>
                </tr>
              ) : null}
            </tbody>
          </table>
          <p>
            {num(summary.decisions)} decisions: {pct(summary.automationShare.fully)} fully automated, {pct(summary.automationShare.partially)} partially, {pct(summary.automationShare.not_automated)} by a person. {num(summary.appeals)}{" "}
            appeals taken in, {num(summary.appealsDecided)} decided, {pct(summary.overturnRate)} overturned.
          </p>
        </div>
      </div>
    </>
  );
}
