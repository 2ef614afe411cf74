// The task page's read-only panels: the task's context, the reported content, the report's facts,
// and what automation did before the task.
import { useMemo, useState } from "react";
import { post, type ReportDetail, type RunDetail, type Step } from "../../api";
import { Link } from "../../router";
import { Details, Json, shortId, StateBadge, Time } from "../../ui";
import { collectMedia, ExternalLink, MediaGallery, snapshotText } from "../content";

/** Who reported stays sealed until a reviewer asks, with a reason; the reveal is audited. */
export function RevealReporter({ report }: { report: ReportDetail }) {
  const [asking, setAsking] = useState(false);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [shown, setShown] = useState<{ id: string | null; contact: string | null } | null>(null);
  if (!report.reporter.known) return <span className="muted">anonymous</span>;
  if (shown)
    return (
      <span data-testid="reporter-revealed">
        {shown.id ?? "unnamed"}
        {shown.contact ? <span className="muted"> · {shown.contact}</span> : null}
      </span>
    );
  if (!asking)
    return (
      <button type="button" className="btn btn-quiet" data-testid="reveal-reporter" onClick={() => setAsking(true)}>
        Reveal who reported…
      </button>
    );
  const reveal = async () => {
    setBusy(true);
    setError(null);
    try {
      setShown((await post<{ reporter: { id: string | null; contact: string | null } }>(`/reports/${encodeURIComponent(report.id)}/reveal-reporter`, { reason })).reporter);
    } catch (caught) {
      setError(caught instanceof Error ? caught.message : String(caught));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        void reveal();
      }}
    >
      <label>
        Why do you need to know? (recorded in the audit trail)
        <input value={reason} onChange={(event) => setReason(event.target.value)} data-testid="reveal-reason" />
      </label>
      <button type="submit" className="btn" disabled={busy || reason.trim().length < 3}>
        Reveal
      </button>
      <button type="button" className="btn btn-quiet" onClick={() => setAsking(false)}>
        Cancel
      </button>
      {error ? <p className="error small">{error}</p> : null}
    </form>
  );
}

export function ContextList({ value, sealed }: { value: unknown; sealed?: boolean }) {
  if (sealed && value === null) return <p className="muted">This task's context is sealed: it holds reported content, which your role may not open.</p>;
  if (!value || typeof value !== "object" || Array.isArray(value)) return <Json value={value} label="Task context" />;
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return <p className="muted">The workflow passed no context.</p>;
  return (
    <dl className="kv">
      {entries.map(([key, v]) => (
        <div key={key}>
          <dt>{key}</dt>
          <dd>{typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : <Json value={v} label={key} />}</dd>
        </div>
      ))}
    </dl>
  );
}

export function SubjectContent({ report, blurByDefault, greyscaleLocked = false, revealSignal }: { report: ReportDetail; blurByDefault: boolean; greyscaleLocked?: boolean; revealSignal: number }) {
  const media = useMemo(() => collectMedia(report.subject.snapshot, report.evidence), [report]);
  const texts = snapshotText(report.subject.snapshot);
  const snapshot = report.subject.snapshot;
  const hasOther = snapshot !== null && snapshot !== undefined && typeof snapshot === "object";
  return (
    <section className="card" aria-labelledby="subject-heading">
      <h2 id="subject-heading">Reported {report.subject.kind}</h2>
      <dl className="kv">
        <div>
          <dt>Subject</dt>
          <dd>
            <code>{report.subject.id}</code>
          </dd>
        </div>
        {report.subject.url ? (
          <div>
            <dt>Link</dt>
            <dd>
              <ExternalLink href={report.subject.url}>{report.subject.url}</ExternalLink>
            </dd>
          </div>
        ) : null}
        {report.subject.ownerId ? (
          <div>
            <dt>Owner</dt>
            <dd>
              <code>{report.subject.ownerId}</code>
            </dd>
          </div>
        ) : null}
      </dl>
      {texts.map(([key, text]) => (
        <blockquote key={key} className="content-text">
          <span className="muted small">{key}</span>
          <p>{text}</p>
        </blockquote>
      ))}
      <MediaGallery items={media} blurByDefault={blurByDefault} greyscaleLocked={greyscaleLocked} revealAllSignal={revealSignal} />
      {snapshot === null || snapshot === undefined ? <p className="muted">The reporter sent no snapshot of the content.</p> : null}
      {hasOther ? (
        <Details summary="Full snapshot (JSON)">
          <Json value={snapshot} label="Snapshot" />
        </Details>
      ) : null}
    </section>
  );
}

export function ReportFacts({ report }: { report: ReportDetail }) {
  return (
    <section className="card" aria-labelledby="report-heading">
      <h2 id="report-heading">Report</h2>
      <dl className="kv">
        <div>
          <dt>Category</dt>
          <dd>
            {report.category.replace(/_/gu, " ")}
            {report.categorySpecification.length ? <span className="muted"> · {report.categorySpecification.join(", ")}</span> : null}
          </dd>
        </div>
        <div>
          <dt>Source</dt>
          <dd>{report.source.replace(/_/gu, " ")}</dd>
        </div>
        <div>
          <dt>Received</dt>
          <dd>
            <Time at={report.createdAt} />
          </dd>
        </div>
        <div>
          <dt>Reporter</dt>
          <dd>
            <RevealReporter report={report} />
          </dd>
        </div>
        <div>
          <dt>Reports on this subject</dt>
          <dd>{report.caseReportCount}</dd>
        </div>
      </dl>
      {report.description ? (
        <blockquote className="content-text">
          <span className="muted small">What the reporter wrote</span>
          <p>{report.description}</p>
        </blockquote>
      ) : null}
      {(report.evidence ?? []).length > 0 ? (
        <>
          <h3>Evidence</h3>
          <ul className="plain-list">
            {(report.evidence ?? []).map((item, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: the report's evidence, a read-only list redrawn whole on each load, never reordered; its items have no id and may repeat
              <li key={i}>
                <span className="badge tone-muted">{item.kind}</span> {item.text ? <span>{item.text}</span> : null} {item.url ? <ExternalLink href={item.url}>link</ExternalLink> : null}{" "}
                {item.sha256 ? <code className="small">sha256 {item.sha256.slice(0, 12)}…</code> : null}
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </section>
  );
}

function percent(value: unknown): string | null {
  return typeof value === "number" ? `${Math.round(value * 100)}%` : null;
}

/** One line for the built-in components' findings (banks, subject history); others show as JSON. */
function enrichmentSummary(data: unknown): string | null {
  if (!data || typeof data !== "object" || Array.isArray(data)) return null;
  const d = data as Record<string, unknown>;
  if (typeof d.reportCount === "number") {
    return `${d.reportCount} report${d.reportCount === 1 ? "" : "s"} and ${Number(d.decisionCount ?? 0)} decision${d.decisionCount === 1 ? "" : "s"} on this subject so far.`;
  }
  if (typeof d.matched === "boolean") {
    const hits = [...(Array.isArray(d.keywords) ? d.keywords : []), ...(Array.isArray(d.patterns) ? d.patterns : []), ...(Array.isArray(d.matches) ? d.matches : [])].map(String);
    return d.matched ? `Matched: ${hits.slice(0, 8).join(", ")}${hits.length > 8 ? "…" : ""}` : "No match.";
  }
  return null;
}

/** What the automated steps of the run did before this task: proposals, enrichments, routes. */
export function AutomationSummary({ run, taskStepNodeIds }: { run: RunDetail; taskStepNodeIds: Set<string> }) {
  const automated = run.steps.filter((s: Step) => ["ai_proposal", "enrichment", "condition"].includes(s.kind) && !taskStepNodeIds.has(s.nodeId));
  return (
    <section className="card" aria-labelledby="automation-heading">
      <h2 id="automation-heading">What automation did</h2>
      <p className="muted small">
        Run <Link to={`/runs/${encodeURIComponent(run.id)}`}>{shortId(run.id)}</Link> · mode <strong>{run.authorityMode}</strong> · <StateBadge state={run.state} />
      </p>
      {automated.length === 0 ? <p className="muted">No automated step (AI proposal, enrichment, routing) ran before this task.</p> : null}
      <ul className="automation">
        {automated.map((step) => {
          const out = (step.output ?? {}) as Record<string, unknown>;
          const simulated = out.simulated === true;
          const failed = step.state === "failed" || typeof out.errorCode === "string";
          return (
            <li key={step.id} className={`automation-step kind-${step.kind}`}>
              <div className="automation-head">
                <strong>{step.nodeId}</strong> <span className="muted small">{step.kind.replace(/_/gu, " ")}</span>
                {simulated ? <span className="badge tone-muted">simulated</span> : null}
                {failed ? <span className="badge tone-bad">failed{typeof out.errorCode === "string" ? `: ${out.errorCode}` : step.errorCode ? `: ${step.errorCode}` : ""}</span> : null}
              </div>
              {step.kind === "ai_proposal" && !failed ? (
                <div data-testid="ai-proposal">
                  <p>
                    Proposed <strong>{String(out.resultCode ?? out.port ?? "—")}</strong>
                    {percent(out.confidence) ? <> with {percent(out.confidence)} confidence</> : null}
                    {out.provider && typeof out.provider === "object" ? <span className="muted small"> · {String((out.provider as Record<string, unknown>).model ?? "")}</span> : null}
                  </p>
                  {typeof out.rationale === "string" ? (
                    <blockquote className="content-text rationale">
                      <span className="muted small">Why</span>
                      <p>{out.rationale}</p>
                    </blockquote>
                  ) : null}
                  {out.policy && typeof out.policy === "object" ? <PolicyLine policy={out.policy as Record<string, unknown>} sections={out.policySections} /> : null}
                </div>
              ) : null}
              {step.kind === "enrichment" && !failed ? (
                <div>
                  <p>
                    {typeof out.component === "string" ? (
                      <>
                        Component <code>{out.component}</code>
                      </>
                    ) : (
                      "Component"
                    )}
                    {typeof out.latencyMs === "number" ? <span className="muted small"> · {out.latencyMs} ms</span> : null}
                  </p>
                  {enrichmentSummary(out.data) ? <p>{enrichmentSummary(out.data)}</p> : null}
                  <Details summary="What it found">
                    <Json value={out.data ?? out} label={`${step.nodeId} output`} />
                  </Details>
                </div>
              ) : null}
              {step.kind === "condition" && !failed ? (
                <p>
                  Routed to <strong>{String(out.port ?? "—")}</strong>
                </p>
              ) : null}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

/** Which policy text drove a proposal: name, version and digest, and the sections it cited. */
function PolicyLine({ policy, sections }: { policy: Record<string, unknown>; sections: unknown }) {
  const cited = Array.isArray(sections) ? sections.filter((x): x is string => typeof x === "string") : [];
  return (
    <p className="muted small" data-testid="ai-proposal-policy">
      Under policy <strong>{String(policy.name ?? "")}</strong> v{String(policy.version ?? "?")} <code title={String(policy.digest ?? "")}>{String(policy.digest ?? "").slice(0, 19)}</code>
      {cited.length ? <> · cites {cited.join(", ")}</> : null}
    </p>
  );
}
