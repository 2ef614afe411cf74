// A version's shadow report: agreement with people's decisions and Cohen's kappa, the per-outcome
// table (precision, recall, F1 with 95% intervals and the counts behind them), the CSV downloads.
import { server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { Details, ErrorNote, Json, Loading } from "../ui";

type Report = ApiResponse<"get", "/workflow-versions/:id/shadow-report">;
interface Share {
  value: number | null;
  low: number | null;
  high: number | null;
  successes: number;
  trials: number;
}

const percent = (x: number | null) => (x === null ? "—" : `${(x * 100).toFixed(1)}%`);
const fixed = (x: number | null) => (x === null ? "—" : x.toFixed(2));

function ShareCell({ share }: { share: Share }) {
  if (share.value === null) return <td className="num muted">— (0 cases)</td>;
  return (
    <td className="num">
      {percent(share.value)}{" "}
      <span className="muted">
        [{percent(share.low)}–{percent(share.high)}] {share.successes}/{share.trials}
      </span>
    </td>
  );
}

export function ShadowReport({ versionId }: { versionId: string }) {
  const report = useResource((signal) => server.get("/workflow-versions/:id/shadow-report", { params: { id: versionId }, signal }), [versionId]);
  if (report.loading) return <Loading />;
  if (report.error) return <ErrorNote error={report.error} />;
  const data: Report | undefined = report.data;
  if (!data) return null;
  const csv = `/api/v1/workflow-versions/${encodeURIComponent(versionId)}/shadow-report.csv`;
  return (
    <div>
      <p>
        {data.runsCompared} of {data.shadowRuns} shadow runs compared with people's decisions ({data.withoutHumanDecision} without one yet). Agreement {percent(data.agreement.value)}
        {data.agreement.value === null ? "" : ` (95% interval ${percent(data.agreement.low)}–${percent(data.agreement.high)})`}; Cohen's kappa {fixed(data.kappa.kappa)}.
      </p>
      {data.outcomes.length > 0 ? (
        <table className="table">
          <caption>Per outcome: the version's proposal against people's decision (95% Wilson intervals, cases behind each figure)</caption>
          <thead>
            <tr>
              <th scope="col">Outcome</th>
              <th scope="col" className="num">
                Precision
              </th>
              <th scope="col" className="num">
                Recall
              </th>
              <th scope="col" className="num">
                F1
              </th>
              <th scope="col" className="num">
                Agreed / proposed otherwise / missed
              </th>
            </tr>
          </thead>
          <tbody>
            {data.outcomes.map((o) => (
              <tr key={o.outcome}>
                <th scope="row">{o.outcome}</th>
                <ShareCell share={o.precision} />
                <ShareCell share={o.recall} />
                <td className="num">{fixed(o.f1)}</td>
                <td className="num">
                  {o.truePositives} / {o.falsePositives} / {o.falseNegatives}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <p>
        Download as CSV:{" "}
        <a href={csv} download>
          every figure
        </a>{" "}
        (with slices by category, source and week) ·{" "}
        <a href={`${csv}?rows=reports`} download>
          one row per compared report
        </a>
      </p>
      <Details summary="The full report (JSON)">
        <Json value={data} label="Shadow report" />
      </Details>
    </div>
  );
}
