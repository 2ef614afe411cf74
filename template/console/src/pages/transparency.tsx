// The DSA transparency report (admins only) for a chosen period: the figures of the Commission's
// quantitative template the platform holds, section by section, what it cannot know and why, and
// the CSV to fill the template with.
import { type FormEvent, useState } from "react";
import { qs, server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { useNavigate, useSearchParam } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Details, ErrorNote, formatSeconds, Json, Loading, PageTitle } from "../ui";

// ?format=csv answers a CSV Response; the page reads the JSON.
type Report = Exclude<ApiResponse<"get", "/transparency-report">, Response>;
type Actions = Report["sections"]["notices"]["actions"];
interface NotKnown {
  known: false;
  reason: string;
  notRecordedYet?: true;
}

const isNotKnown = (value: unknown): value is NotKnown => typeof value === "object" && value !== null && (value as { known?: unknown }).known === false;
const label = (key: string) => key.replace(/_/gu, " ");
const pct = (value: number | null) => (value === null ? "—" : `${(value * 100).toFixed(1)}%`);
const today = () => new Date().toISOString().slice(0, 10);

/** Every figure the report says it cannot know, wherever it is, with the reason. */
function notKnownOf(value: unknown, path: string, out: Array<{ path: string; figure: NotKnown }>): Array<{ path: string; figure: NotKnown }> {
  if (isNotKnown(value)) out.push({ path, figure: value });
  else if (typeof value === "object" && value !== null && !Array.isArray(value)) for (const [key, child] of Object.entries(value)) notKnownOf(child, path ? `${path}.${key}` : key, out);
  return out;
}

function CountsTable({ title, counts, testId }: { title: string; counts: Record<string, number>; testId?: string }) {
  const rows = Object.entries(counts);
  return (
    <table className="table table-compact" data-testid={testId}>
      <caption>{title}</caption>
      <tbody>
        {rows.length === 0 ? (
          <tr>
            <td className="muted">none</td>
          </tr>
        ) : (
          rows.map(([key, n]) => (
            <tr key={key}>
              <th scope="row">{label(key)}</th>
              <td className="num">{n}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

function ActionsFigures({ actions, testId }: { actions: Actions; testId: string }) {
  return (
    <div data-testid={testId}>
      <div className="stats">
        <div className="stat">
          <span className="muted small">Actions (restrictions)</span>
          <strong>{actions.actions}</strong>
        </div>
        <div className="stat">
          <span className="muted small">Decisions not to act</span>
          <strong>{actions.decisionsNotToAct}</strong>
        </div>
        <div className="stat">
          <span className="muted small">Decided by automation (fully / partially)</span>
          <strong>
            {actions.byAutomatedDecision.fully ?? 0} / {actions.byAutomatedDecision.partially ?? 0}
          </strong>
        </div>
      </div>
      <div className="grid-columns">
        <CountsTable title="By type of restriction" counts={actions.byRestrictionType} />
        <CountsTable title="By category" counts={actions.byCategory} />
        <CountsTable title="By ground" counts={actions.byGround} />
        <CountsTable title="By detection" counts={actions.byAutomatedDetection} />
      </div>
      <Details summary="By restriction">
        <div className="grid-columns">
          {Object.entries(actions.byRestriction).map(([type, counts]) => (
            <CountsTable key={type} title={label(type)} counts={counts} />
          ))}
        </div>
      </Details>
    </div>
  );
}

function Median({ seconds }: { seconds: number | null }) {
  return <>{seconds === null ? "—" : formatSeconds(seconds)}</>;
}

export function TransparencyPage() {
  const isAdmin = useCan("admin");
  const { user } = useSession();
  const navigate = useNavigate();
  const year = String(new Date().getUTCFullYear());
  const from = useSearchParam("from") ?? `${year}-01-01`;
  const to = useSearchParam("to") ?? today();
  const [form, setForm] = useState({ from, to });
  const report = useResource(isAdmin ? async (signal) => (await server.get("/transparency-report", { query: { from, to }, signal })) as Report : null, [from, to, isAdmin]);
  if (!isAdmin)
    return (
      <section>
        <PageTitle>Transparency report</PageTitle>
        <p className="note">{cannotReason(user.role, "admin")}</p>
      </section>
    );
  const choose = (period: { from: string; to: string }) => {
    setForm(period);
    navigate(`/transparency${qs(period)}`);
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    choose(form);
  };
  const data = report.data;
  const s = data?.sections;
  const unknown = s ? notKnownOf(s, "", []) : [];
  const lastYear = String(Number(year) - 1);
  return (
    <section data-ready={data ? "true" : undefined}>
      <PageTitle subtitle="The figures of the Commission's quantitative template (Implementing Regulation (EU) 2024/2835) that this installation holds, for a period. Figures it cannot know are listed, never estimated.">
        Transparency report
      </PageTitle>
      <form className="filters" onSubmit={submit} aria-label="Reporting period">
        <label htmlFor="treport-from">From</label>
        <input id="treport-from" type="date" value={form.from} onChange={(e) => setForm({ ...form, from: e.target.value })} required />
        <label htmlFor="treport-to">To (included)</label>
        <input id="treport-to" type="date" value={form.to} onChange={(e) => setForm({ ...form, to: e.target.value })} required />
        <button type="submit" className="btn">
          Show
        </button>
        <button type="button" className="btn btn-quiet" onClick={() => choose({ from: `${year}-01-01`, to: today() })}>
          {year} so far
        </button>
        <button type="button" className="btn btn-quiet" onClick={() => choose({ from: `${lastYear}-01-01`, to: `${lastYear}-12-31` })}>
          {lastYear}
        </button>
      </form>
      <ErrorNote error={report.error} retry={report.reload} />
      {report.loading && !data ? <Loading /> : null}
      {data && s ? (
        <>
          <p className="muted small">
            Period {data.period.from} to {data.period.to} ({data.period.note}). Download as CSV:{" "}
            <a href={`/api/v1/transparency-report.csv${qs({ from, to })}`} download data-testid="treport-csv">
              one row per figure
            </a>
          </p>
          <h2>
            Notices (Art. 16) <span className="muted small">template 1.3</span>
          </h2>
          <div className="stats" data-testid="treport-notices">
            <div className="stat">
              <span className="muted small">Notices received</span>
              <strong>{s.notices.received.total}</strong>
            </div>
            <div className="stat">
              <span className="muted small">From trusted flaggers</span>
              <strong>{s.notices.received.bySubmitter.trusted_flagger ?? 0}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Acted on</span>
              <strong>{s.notices.timeToAct.actedOn}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Median time to act</span>
              <strong>
                <Median seconds={s.notices.timeToAct.medianSeconds} />
              </strong>
            </div>
          </div>
          <CountsTable title="Notices received by category" counts={s.notices.received.byCategory} />
          <h3>Actions taken on notices</h3>
          <ActionsFigures actions={s.notices.actions} testId="treport-notice-actions" />
          <h2>
            Own-initiative moderation <span className="muted small">template 1.4</span>
          </h2>
          <ActionsFigures actions={s.ownInitiative.actions} testId="treport-own-actions" />
          <h2>
            Complaints (Art. 20) <span className="muted small">template 1.5</span>
          </h2>
          <div className="stats" data-testid="treport-complaints">
            <div className="stat">
              <span className="muted small">Received</span>
              <strong>{s.complaints.received.total}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Decided</span>
              <strong>{s.complaints.decided.total}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Upheld / overturned</span>
              <strong>
                {s.complaints.decided.upheld} / {s.complaints.decided.overturned}
              </strong>
            </div>
            <div className="stat">
              <span className="muted small">Median time to decide</span>
              <strong>
                <Median seconds={s.complaints.medianSecondsToDecide} />
              </strong>
            </div>
            <div className="stat">
              <span className="muted small">Resolved by automation</span>
              <strong>{s.complaints.decidedByAutomation}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Reversals recorded</span>
              <strong>{s.complaints.reversalsRecorded.reversed}</strong>
            </div>
          </div>
          <h2>
            Suspensions (Art. 23) <span className="muted small">template 1.5.1</span>
          </h2>
          <p>
            Accounts suspended: <strong>{s.suspensions.accountRestrictions.suspended}</strong>; terminated: <strong>{s.suspensions.accountRestrictions.terminated}</strong>. <span className="muted small">{s.suspensions.note}</span>
          </p>
          <p>
            Notifiers of manifestly unfounded notices: warned <strong>{s.suspensions.manifestlyUnfoundedNotices.warnings}</strong>, suspended <strong>{s.suspensions.manifestlyUnfoundedNotices.suspensions}</strong>.
          </p>
          <h2>
            Automated means and their accuracy <span className="muted small">template 1.6</span>
          </h2>
          <table className="table table-compact" data-testid="treport-accuracy">
            <caption className="sr-only">Indicators of accuracy</caption>
            <tbody>
              <tr>
                <th scope="row">Complaints on automated decisions overturned</th>
                <td>
                  {pct(s.automatedMeans.complaintsOnAutomatedDecisions.overturnRate.value)}{" "}
                  <span className="muted small">
                    ({s.automatedMeans.complaintsOnAutomatedDecisions.overturned}/{s.automatedMeans.complaintsOnAutomatedDecisions.decided})
                  </span>
                </td>
              </tr>
              <tr>
                <th scope="row">Complaints on people's decisions overturned</th>
                <td>
                  {pct(s.automatedMeans.complaintsOnHumanDecisions.overturnRate.value)}{" "}
                  <span className="muted small">
                    ({s.automatedMeans.complaintsOnHumanDecisions.overturned}/{s.automatedMeans.complaintsOnHumanDecisions.decided})
                  </span>
                </td>
              </tr>
              <tr>
                <th scope="row">Reviewer QA agreement</th>
                <td>
                  {pct(s.automatedMeans.reviewerQa.agreement.value)}{" "}
                  <span className="muted small">
                    ({s.automatedMeans.reviewerQa.agreement.successes}/{s.automatedMeans.reviewerQa.reviewed})
                  </span>
                </td>
              </tr>
              {s.automatedMeans.shadowEvaluations.map((v) => (
                <tr key={v.workflowVersionId}>
                  <th scope="row">
                    Shadow agreement of <code>{v.workflowVersionId}</code> ({v.automatedDecisions} automated decisions)
                  </th>
                  <td>
                    {pct(v.agreement.value)}{" "}
                    <span className="muted small">
                      ({v.agreement.successes}/{v.runsCompared} compared)
                    </span>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <p className="muted small">
            {s.automatedMeans.definitions.overturnRate} {s.automatedMeans.definitions.shadowEvaluations}
          </p>
          <h2>Not known to the platform</h2>
          <ul data-testid="treport-not-known">
            {unknown.map(({ path, figure }) => (
              <li key={path}>
                <code>{path}</code>
                {figure.notRecordedYet ? <span className="badge tone-info">not recorded yet</span> : null}: {figure.reason}
              </li>
            ))}
          </ul>
          <Details summary="The full report (JSON)">
            <Json value={data} label="Transparency report" />
          </Details>
        </>
      ) : null}
    </section>
  );
}
