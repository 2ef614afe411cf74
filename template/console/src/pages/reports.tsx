// Reports: search by subject and category, and one report's timeline; its personal data opens
// only on request (the access is audited).
import { useMemo, useState, type FormEvent } from "react";
import { get, qs, type ReportDetail, type ReportSummary } from "../api";
import { usePagedList, useResource } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { useSession } from "../session";
import { Empty, ErrorNote, Loading, PageTitle, shortId, Time } from "../ui";
import { collectMedia, ExternalLink, MediaGallery, snapshotText } from "./content";
import { RevealReporter } from "./task/panels";
import { SubjectReports, Timeline } from "./timeline";
import { POLICY_CATEGORIES as CATEGORIES } from "../../../src/lib/policy-categories";

export function ReportsPage() {
  const navigate = useNavigate();
  const subjectId = useSearchParam("subjectId") ?? "";
  const category = useSearchParam("category") ?? "";
  const [subject, setSubject] = useState(subjectId);
  const [cat, setCat] = useState(category);
  const list = usePagedList<ReportSummary>((cursor) => `/reports${qs({ subjectId, category, limit: 50, cursor })}`, [subjectId, category]);
  const { first } = list;
  const search = (event: FormEvent) => {
    event.preventDefault();
    navigate(`/reports${qs({ subjectId: subject.trim(), category: cat })}`);
  };
  const reports = list.items;
  return (
    <section data-ready={first.data ? "true" : undefined}>
      <PageTitle subtitle="Summaries only; a report's personal data opens on its page, and that access is audited.">Reports</PageTitle>
      {/* biome-ignore lint/a11y/useSemanticElements: the form is the search landmark itself; a <search> wrapper would add an element around the flex row of filters for the same landmark */}
      <form className="filters" role="search" onSubmit={search}>
        <label htmlFor="subject-search">Subject id</label>
        <input id="subject-search" className="mono" value={subject} onChange={(e) => setSubject(e.target.value)} autoComplete="off" />
        <label htmlFor="category-search">Category</label>
        <select id="category-search" value={cat} onChange={(e) => setCat(e.target.value)}>
          <option value="">any</option>
          {CATEGORIES.map((c) => (
            <option key={c} value={c}>
              {c.replace(/_/gu, " ")}
            </option>
          ))}
        </select>
        <button type="submit" className="btn">
          Search
        </button>
      </form>
      <ErrorNote error={first.error} retry={first.reload} />
      {first.loading && reports.length === 0 ? <Loading /> : null}
      {first.data && reports.length === 0 ? <Empty>No reports match.</Empty> : null}
      {reports.length > 0 ? (
        <table className="table">
          <caption className="sr-only">Reports, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Report</th>
              <th scope="col">Subject</th>
              <th scope="col">Category</th>
              <th scope="col">Source</th>
              <th scope="col" className="num">
                On subject
              </th>
              <th scope="col">Received</th>
            </tr>
          </thead>
          <tbody>
            {reports.map((r) => (
              <tr key={r.id}>
                <th scope="row">
                  <Link to={`/reports/${encodeURIComponent(r.id)}?case=${encodeURIComponent(r.caseId)}`}>{shortId(r.id)}</Link>
                </th>
                <td>
                  {r.subject.kind} <code>{r.subject.id}</code>
                </td>
                <td>{r.category.replace(/_/gu, " ")}</td>
                <td>{r.source.replace(/_/gu, " ")}</td>
                <td className="num">{r.caseReportCount}</td>
                <td>
                  <Time at={r.createdAt} />
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

function Opened({ report }: { report: ReportDetail }) {
  const { user } = useSession();
  const media = useMemo(() => collectMedia(report.subject.snapshot, report.evidence), [report]);
  return (
    <section className="card" aria-labelledby="opened-heading">
      <h2 id="opened-heading">Report details</h2>
      <dl className="kv">
        <div>
          <dt>Subject</dt>
          <dd>
            {report.subject.kind} <code>{report.subject.id}</code>
            {report.subject.url ? (
              <>
                {" "}
                · <ExternalLink href={report.subject.url}>{report.subject.url}</ExternalLink>
              </>
            ) : null}
          </dd>
        </div>
        <div>
          <dt>Category</dt>
          <dd>{report.category.replace(/_/gu, " ")}</dd>
        </div>
        <div>
          <dt>Reporter</dt>
          <dd>
            <RevealReporter report={report} />
          </dd>
        </div>
      </dl>
      {report.description ? (
        <blockquote className="content-text">
          <span className="muted small">What the reporter wrote</span>
          <p>{report.description}</p>
        </blockquote>
      ) : null}
      {snapshotText(report.subject.snapshot).map(([k, text]) => (
        <blockquote key={k} className="content-text">
          <span className="muted small">{k}</span>
          <p>{text}</p>
        </blockquote>
      ))}
      <MediaGallery items={media} blurByDefault={user.preferences.blurMedia} revealAllSignal={0} />
    </section>
  );
}

export function ReportPage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const caseParam = useSearchParam("case");
  const [open, setOpen] = useState(false);
  const report = useResource(open ? (signal) => get<ReportDetail>(`/reports/${encodeURIComponent(id)}`, signal) : null, [open, id]);
  const caseId = report.data?.caseId ?? caseParam;
  return (
    <section data-ready="true">
      <PageTitle subtitle={<Link to="/reports">All reports</Link>}>{`Report ${shortId(id)}`}</PageTitle>
      {!open ? (
        <div className="note note-info">
          <p>The report's content (description, snapshot, evidence) is sealed. Opening it is recorded in the audit trail; who reported stays sealed until you ask, with a reason.</p>
          <button type="button" className="btn" onClick={() => setOpen(true)}>
            Open report details
          </button>
        </div>
      ) : report.error ? (
        <ErrorNote error={report.error} retry={report.reload} />
      ) : report.data ? (
        <Opened report={report.data} />
      ) : (
        <Loading />
      )}
      <section className="card" aria-labelledby="timeline-heading">
        <h2 id="timeline-heading">Timeline</h2>
        <Timeline reportId={id} />
      </section>
      {caseId ? (
        <section className="card" aria-labelledby="subject-heading">
          <h2 id="subject-heading">Other reports on this subject</h2>
          <SubjectReports caseId={caseId} currentReportId={id} />
        </section>
      ) : null}
    </section>
  );
}
