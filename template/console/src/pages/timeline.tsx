// A report's (and its subject's) history: runs, tasks, decisions, actions, messages, appeals.
import { ApiError, get, type Page, type ReportSummary, type TimelineItem } from "../api";
import { useResource } from "../hooks";
import { Link } from "../router";
import { Empty, ErrorNote, Loading, StateBadge, Time } from "../ui";

const KIND_LABELS: Record<TimelineItem["kind"], string> = {
  report: "Report",
  run: "Workflow run",
  task: "Review task",
  decision: "Decision",
  action: "Action",
  message: "Message",
  appeal: "Appeal",
  handoff: "Handoff",
  audit: "Audit",
};

function linkOf(item: TimelineItem): string | null {
  switch (item.kind) {
    case "report":
      return `/reports/${encodeURIComponent(item.id)}`;
    case "run":
      return `/runs/${encodeURIComponent(item.id)}`;
    case "task":
      return `/tasks/${encodeURIComponent(item.id)}`;
    case "action":
      return "/approvals";
    default:
      return null;
  }
}

export function Timeline({ reportId }: { reportId: string }) {
  const timeline = useResource((signal) => get<{ items: TimelineItem[] }>(`/reports/${encodeURIComponent(reportId)}/timeline`, signal), [reportId]);
  if (timeline.loading && !timeline.data) return <Loading label="Loading the timeline…" />;
  if (timeline.error instanceof ApiError && timeline.error.code === "route.not_found") return <Empty>This server has no report timeline.</Empty>;
  if (timeline.error) return <ErrorNote error={timeline.error} retry={timeline.reload} />;
  const items = timeline.data?.items ?? [];
  if (items.length === 0) return <Empty>Nothing has happened on this report yet.</Empty>;
  return (
    <ol className="timeline" aria-label="Report timeline">
      {items.map((item, i) => {
        const href = linkOf(item);
        return (
          // biome-ignore lint/suspicious/noArrayIndexKey: kind and id name the entry; the index only breaks a tie between two entries of one record
          <li key={`${item.kind}-${item.id}-${i}`} className={`timeline-item kind-${item.kind}`}>
            <span className="timeline-kind">{KIND_LABELS[item.kind] ?? item.kind}</span>
            <span className="timeline-summary">{href ? <Link to={href}>{item.summary}</Link> : item.summary}</span>
            {item.state ? <StateBadge state={item.state} /> : null}
            <Time at={item.at} className="muted small" />
          </li>
        );
      })}
    </ol>
  );
}

/** Other reports about the same subject (its case). */
export function SubjectReports({ caseId, currentReportId }: { caseId: string; currentReportId?: string }) {
  const reports = useResource((signal) => get<Page<ReportSummary>>(`/reports?caseId=${encodeURIComponent(caseId)}&limit=50`, signal), [caseId]);
  if (reports.loading && !reports.data) return <Loading label="Loading the subject's reports…" />;
  if (reports.error) return <ErrorNote error={reports.error} retry={reports.reload} />;
  const items = reports.data?.items ?? [];
  return (
    <ul className="plain-list">
      {items.map((report) => (
        <li key={report.id}>
          {report.id === currentReportId ? <strong>This report</strong> : <Link to={`/reports/${encodeURIComponent(report.id)}`}>{report.category.replace(/_/gu, " ")}</Link>}
          {" · "}
          <span className="muted">{report.source.replace(/_/gu, " ")}</span>
          {" · "}
          <Time at={report.createdAt} />
        </li>
      ))}
    </ul>
  );
}
