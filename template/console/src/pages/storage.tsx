// Storage (admins): the installation's hot window, what it holds in D1 table by table and in the
// R2 archive, and when D1 fills at the last week's pace, drawn as a projection against the limit.
import { type FormEvent, useState } from "react";
import { server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { cannotReason, useCan, useSession } from "../session";
import { Details, ErrorNote, Loading, PageTitle, Time, useToast } from "../ui";

type Report = ApiResponse<"get", "/storage">;

const MB = 1024 * 1024;
const GB = 1024 * MB;

export function bytes(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (value >= GB) return `${(value / GB).toFixed(2)} GB`;
  if (value >= MB) return `${(value / MB).toFixed(1)} MB`;
  if (value >= 1024) return `${(value / 1024).toFixed(1)} KB`;
  return `${Math.round(value)} B`;
}

/**
 * D1's use from today until the limit at the last week's pace: a straight line, since the pace is
 * one figure (bytes a day). Drawn with its numbers beside it, never as the only statement.
 */
function Projection({ used, limit, daysUntilFull }: { used: number; limit: number; daysUntilFull: number | null }) {
  const w = 560;
  const h = 180;
  const pad = { left: 56, right: 12, top: 12, bottom: 28 };
  const days = daysUntilFull === null ? 365 : Math.max(1, Math.min(daysUntilFull, 3 * 365));
  const perDay = daysUntilFull === null || daysUntilFull === 0 ? 0 : (limit - used) / daysUntilFull;
  const x = (day: number) => pad.left + (day / days) * (w - pad.left - pad.right);
  const y = (value: number) => pad.top + (1 - Math.min(value, limit) / limit) * (h - pad.top - pad.bottom);
  const end = used + perDay * days;
  const summary =
    daysUntilFull === null
      ? `D1 holds ${bytes(used)} of ${bytes(limit)}; it did not grow over the last week.`
      : `D1 holds ${bytes(used)} of ${bytes(limit)}; at the last week's pace (${bytes(perDay)} a day) it is full in ${daysUntilFull.toLocaleString()} days.`;
  return (
    <figure className="chart" data-testid="storage-projection">
      <figcaption>{summary}</figcaption>
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={summary} width="100%">
        <line x1={pad.left} x2={w - pad.right} y1={y(limit)} y2={y(limit)} stroke="currentColor" strokeDasharray="4 4" opacity={0.6} />
        <text x={pad.left - 6} y={y(limit) + 4} textAnchor="end" fontSize="11" fill="currentColor">
          {bytes(limit)}
        </text>
        <text x={pad.left - 6} y={y(0) + 4} textAnchor="end" fontSize="11" fill="currentColor">
          0
        </text>
        <line x1={pad.left} x2={w - pad.right} y1={y(0)} y2={y(0)} stroke="currentColor" opacity={0.3} />
        <line x1={x(0)} y1={y(used)} x2={x(days)} y2={y(end)} stroke="#2f7bbf" strokeWidth={2} />
        <circle cx={x(0)} cy={y(used)} r={3} fill="#2f7bbf" />
        <text x={x(0)} y={h - 8} fontSize="11" fill="currentColor">
          today
        </text>
        <text x={x(days)} y={h - 8} fontSize="11" textAnchor="end" fill="currentColor">
          {daysUntilFull === null ? "in a year" : `in ${days.toLocaleString()} days`}
        </text>
      </svg>
    </figure>
  );
}

function HotWindowForm({ report, onSaved }: { report: Report; onSaved: () => void }) {
  const [hotDays, setHotDays] = useState(String(report.hotDays));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const toast = useToast();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await server.put("/storage/settings", { hotDays: Number(hotDays) });
      toast(`The hot window is ${hotDays} days.`);
      onSaved();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="form-card" onSubmit={(e) => void submit(e)} aria-labelledby="hot-window-heading">
      <h2 id="hot-window-heading">Hot window</h2>
      <p className="muted small">
        A closed case older than this (its reports, runs, tasks, decisions, appeals and deliveries) moves to one R2 object, and sealed audit events older than this move to immutable audit segments in R2. An ended run's step-by-step history
        (steps, outputs, waits, events) leaves D1 an hour after the run ends (at once with 0 days). Every read serves them as before, and full verification walks both.
      </p>
      <label>
        Days a closed case stays in D1
        <input type="number" min={0} max={3650} step={1} required value={hotDays} onChange={(e) => setHotDays(e.target.value)} />
      </label>
      <ErrorNote error={error} />
      <button type="submit" className="btn" disabled={busy}>
        Save
      </button>
    </form>
  );
}

export function StoragePage() {
  const isAdmin = useCan("admin");
  const role = useSession().user.role;
  const report = useResource(isAdmin ? async (signal) => await server.get("/storage", { signal }) : null, [isAdmin]);
  if (!isAdmin) return <p className="note">{cannotReason(role, "admin")}</p>;
  if (report.error) return <ErrorNote error={report.error} retry={report.reload} />;
  if (!report.data) return <Loading label="Measuring storage…" />;
  const r = report.data;
  const used = r.d1.databaseBytes ?? r.d1.bytesEstimate;
  return (
    <>
      <PageTitle subtitle="What this installation keeps in D1 and in the R2 archive, and when D1 fills">Storage</PageTitle>
      <dl className="stats" data-testid="storage-figures">
        <div>
          <dt>Hot window</dt>
          <dd>
            {r.hotDays} days{r.hotDaysIsDefault ? " (default)" : ""}
          </dd>
          <dd className="muted small">run step history: {r.runHistoryMinutes} minutes</dd>
          {r.auditHotMinutes !== undefined && (
            <dd className="muted small">
              audit events: {r.auditHotMinutes} minutes (in segments of {r.auditSegmentMinEvents}+ events; the rest for the window)
            </dd>
          )}
          {r.deliveryPayloadMinutes !== undefined && <dd className="muted small">settled webhook deliveries' payloads and attempts: {r.deliveryPayloadMinutes} minutes</dd>}
        </div>
        <div>
          <dt>D1 (whole database)</dt>
          <dd>{bytes(r.d1.databaseBytes)}</dd>
        </div>
        <div>
          <dt>This installation in D1 (estimate)</dt>
          <dd>{bytes(r.d1.bytesEstimate)}</dd>
        </div>
        <div>
          <dt>Archived runs</dt>
          <dd>{r.archivedRuns.toLocaleString()}</dd>
        </div>
        <div>
          <dt>Archived cases</dt>
          <dd>{r.archivedCases.toLocaleString()}</dd>
        </div>
        <div>
          <dt>Archive</dt>
          <dd>{bytes(r.archiveBytes)}</dd>
        </div>
        <div>
          <dt>Oldest hot run</dt>
          <dd>
            <Time at={r.oldestHotRecordAt} />
          </dd>
        </div>
        <div>
          <dt>Days until D1 is full</dt>
          <dd>{r.daysUntilFull === null ? "not growing" : r.daysUntilFull.toLocaleString()}</dd>
        </div>
      </dl>
      <Projection used={used} limit={r.d1.limitBytes} daysUntilFull={r.daysUntilFull} />
      <HotWindowForm report={r} onSaved={report.reload} />
      <table className="table table-compact">
        <caption>D1 by table (this installation)</caption>
        <thead>
          <tr>
            <th scope="col">Table</th>
            <th scope="col" className="num">
              Rows
            </th>
            <th scope="col" className="num">
              Bytes (estimate)
            </th>
          </tr>
        </thead>
        <tbody>
          {[...r.d1.tables]
            .sort((a, b) => b.bytesEstimate - a.bytesEstimate)
            .map((t) => (
              <tr key={t.name}>
                <th scope="row">
                  <code>{t.name}</code>
                </th>
                <td className="num">{t.rows.toLocaleString()}</td>
                <td className="num">{bytes(t.bytesEstimate)}</td>
              </tr>
            ))}
        </tbody>
      </table>
      <Details summary="How these figures are made">
        <p className="small">{r.d1.estimateMethod}</p>
      </Details>
    </>
  );
}
