// The review task: the report (opened for the reviewer; the access is audited), the subject's
// content behind wellness controls, the subject's history, what automation proposed and why, and
// the answer form generated from the task's response_schema. Keyboard first: 1-9 choose the
// outcome, Ctrl+Enter submits, c claims, v reveals media, n takes the next task, ? lists keys.
import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { ApiError, get, post, type Queue, type ReportDetail, type RunDetail, type Step, type Task } from "../api";
import { isTyping, useInterval, useResource, useShortcuts } from "../hooks";
import { Link, useNavigate } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Details, ErrorNote, Json, Loading, PageTitle, shortId, StateBadge, Time, useToast } from "../ui";
import { collectMedia, ExternalLink, MediaGallery, snapshotText } from "./content";
import { useNextTask } from "./queues";
import { buildResponse, fieldsOf, initialValues, problemsByField, ResponseFields, type Values } from "./response-form";
import { SubjectReports, Timeline } from "./timeline";

const LEASE_RENEW_MS = 5 * 60_000;

function ContextList({ value }: { value: unknown }) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return <Json value={value} label="Task context" />;
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return <p className="muted">The workflow passed no context.</p>;
  return (
    <dl className="kv">
      {entries.map(([key, v]) => (
        <div key={key}><dt>{key}</dt><dd>{typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : <Json value={v} label={key} />}</dd></div>
      ))}
    </dl>
  );
}

function SubjectContent({ report, blurByDefault, revealSignal }: { report: ReportDetail; blurByDefault: boolean; revealSignal: number }) {
  const media = useMemo(() => collectMedia(report.subject.snapshot, report.evidence), [report]);
  const texts = snapshotText(report.subject.snapshot);
  const snapshot = report.subject.snapshot;
  const hasOther = snapshot !== null && snapshot !== undefined && typeof snapshot === "object";
  return (
    <section className="card" aria-labelledby="subject-heading">
      <h2 id="subject-heading">Reported {report.subject.kind}</h2>
      <dl className="kv">
        <div><dt>Subject</dt><dd><code>{report.subject.id}</code></dd></div>
        {report.subject.url ? <div><dt>Link</dt><dd><ExternalLink href={report.subject.url}>{report.subject.url}</ExternalLink></dd></div> : null}
        {report.subject.ownerId ? <div><dt>Owner</dt><dd><code>{report.subject.ownerId}</code></dd></div> : null}
      </dl>
      {texts.map(([key, text]) => (
        <blockquote key={key} className="content-text"><span className="muted small">{key}</span><p>{text}</p></blockquote>
      ))}
      <MediaGallery items={media} blurByDefault={blurByDefault} revealAllSignal={revealSignal} />
      {snapshot === null || snapshot === undefined ? <p className="muted">The reporter sent no snapshot of the content.</p> : null}
      {hasOther ? <Details summary="Full snapshot (JSON)"><Json value={snapshot} label="Snapshot" /></Details> : null}
    </section>
  );
}

function ReportFacts({ report }: { report: ReportDetail }) {
  return (
    <section className="card" aria-labelledby="report-heading">
      <h2 id="report-heading">Report</h2>
      <dl className="kv">
        <div><dt>Category</dt><dd>{report.category.replace(/_/gu, " ")}{report.categorySpecification.length ? <span className="muted"> · {report.categorySpecification.join(", ")}</span> : null}</dd></div>
        <div><dt>Source</dt><dd>{report.source.replace(/_/gu, " ")}</dd></div>
        <div><dt>Received</dt><dd><Time at={report.createdAt} /></dd></div>
        <div><dt>Reporter</dt><dd>{report.reporter?.id ?? <span className="muted">anonymous</span>}{report.reporter?.contact ? <span className="muted"> · {report.reporter.contact}</span> : null}</dd></div>
        <div><dt>Reports on this subject</dt><dd>{report.caseReportCount}</dd></div>
      </dl>
      {report.description ? <blockquote className="content-text"><span className="muted small">What the reporter wrote</span><p>{report.description}</p></blockquote> : null}
      {(report.evidence ?? []).length > 0 ? (
        <>
          <h3>Evidence</h3>
          <ul className="plain-list">
            {(report.evidence ?? []).map((item, i) => (
              <li key={i}><span className="badge tone-muted">{item.kind}</span> {item.text ? <span>{item.text}</span> : null} {item.url ? <ExternalLink href={item.url}>link</ExternalLink> : null} {item.sha256 ? <code className="small">sha256 {item.sha256.slice(0, 12)}…</code> : null}</li>
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
function AutomationSummary({ run, taskStepNodeIds }: { run: RunDetail; taskStepNodeIds: Set<string> }) {
  const automated = run.steps.filter((s: Step) => ["ai_proposal", "enrichment", "condition"].includes(s.kind) && !taskStepNodeIds.has(s.nodeId));
  return (
    <section className="card" aria-labelledby="automation-heading">
      <h2 id="automation-heading">What automation did</h2>
      <p className="muted small">Run <Link to={`/runs/${encodeURIComponent(run.id)}`}>{shortId(run.id)}</Link> · mode <strong>{run.authorityMode}</strong> · <StateBadge state={run.state} /></p>
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
                  <p>Proposed <strong>{String(out.resultCode ?? out.port ?? "—")}</strong>{percent(out.confidence) ? <> with {percent(out.confidence)} confidence</> : null}
                    {out.provider && typeof out.provider === "object" ? <span className="muted small"> · {String((out.provider as Record<string, unknown>).model ?? "")}</span> : null}</p>
                  {typeof out.rationale === "string" ? <blockquote className="content-text rationale"><span className="muted small">Why</span><p>{out.rationale}</p></blockquote> : null}
                </div>
              ) : null}
              {step.kind === "enrichment" && !failed ? (
                <div>
                  <p>{typeof out.component === "string" ? <>Component <code>{out.component}</code></> : "Component"}{typeof out.latencyMs === "number" ? <span className="muted small"> · {out.latencyMs} ms</span> : null}</p>
                  {enrichmentSummary(out.data) ? <p>{enrichmentSummary(out.data)}</p> : null}
                  <Details summary="What it found"><Json value={out.data ?? out} label={`${step.nodeId} output`} /></Details>
                </div>
              ) : null}
              {step.kind === "condition" && !failed ? <p>Routed to <strong>{String(out.port ?? "—")}</strong></p> : null}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

function ShortcutHelp({ onClose }: { onClose: () => void }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const previous = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    return () => previous?.focus();
  }, []);
  return (
    <div className="dialog-backdrop" onClick={onClose}>
      <div className="dialog" role="dialog" aria-modal="true" aria-labelledby="shortcuts-title" tabIndex={-1} ref={ref} onClick={(e) => e.stopPropagation()}
        onKeyDown={(e) => { if (e.key === "Escape") onClose(); }}>
        <h2 id="shortcuts-title">Keyboard shortcuts</h2>
        <dl className="kv shortcuts">
          <div><dt><kbd>1</kbd>–<kbd>9</kbd></dt><dd>Choose an outcome</dd></div>
          <div><dt><kbd>Ctrl</kbd> + <kbd>Enter</kbd></dt><dd>Submit the answer</dd></div>
          <div><dt><kbd>c</kbd></dt><dd>Claim this task</dd></div>
          <div><dt><kbd>v</kbd></dt><dd>Reveal or hide all media</dd></div>
          <div><dt><kbd>n</kbd></dt><dd>Next task in this queue</dd></div>
          <div><dt><kbd>?</kbd></dt><dd>This list</dd></div>
        </dl>
        <button type="button" className="btn" onClick={onClose}>Close</button>
      </div>
    </div>
  );
}

export function TaskPage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const { user } = useSession();
  const canReview = useCan("review");
  const navigate = useNavigate();
  const toast = useToast();
  const { next, busy: nextBusy } = useNextTask();
  const task = useResource((signal) => get<Task>(`/tasks/${encodeURIComponent(id)}`, signal), [id]);
  const t = task.data;
  const report = useResource(t?.reportId ? (signal) => get<ReportDetail>(`/reports/${encodeURIComponent(t.reportId!)}`, signal) : null, [t?.reportId]);
  const run = useResource(t?.runId ? (signal) => get<RunDetail>(`/runs/${encodeURIComponent(t.runId)}`, signal) : null, [t?.runId]);
  const queue = useResource(t?.queueId ? (signal) => get<Queue>(`/queues/${encodeURIComponent(t.queueId!)}`, signal) : null, [t?.queueId]);
  const appeal = useResource(t?.appealId ? (signal) => get<Record<string, unknown>>(`/appeals/${encodeURIComponent(t.appealId!)}`, signal) : null, [t?.appealId]);

  const schemaKey = t ? JSON.stringify(t.responseSchema) : "";
  const form = useMemo(() => (schemaKey ? fieldsOf(JSON.parse(schemaKey)) : null), [schemaKey]);
  const [values, setValues] = useState<Values>({});
  const [rawJson, setRawJson] = useState("{}");
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [submitting, setSubmitting] = useState(false);
  const [acting, setActing] = useState(false);
  const [actionError, setActionError] = useState<unknown>(null);
  const [revealSignal, setRevealSignal] = useState(0);
  const [help, setHelp] = useState(false);
  const nextButton = useRef<HTMLButtonElement>(null);
  const formRef = useRef<HTMLFormElement>(null);

  useEffect(() => {
    if (form) setValues(initialValues(form.fields));
  }, [form]);

  const mine = !!t?.claim && (t.claim.reviewer === user.email || t.claim.reviewer === user.id);
  const claimable = !!t && canReview && t.state === "open";
  const answerable = !!t && canReview && t.state === "claimed" && mine;
  const done = t?.state === "completed";

  // Keep the lease while the reviewer is on the page.
  useInterval(() => {
    if (!answerable) return;
    post<Task>(`/tasks/${encodeURIComponent(id)}/claim`, {}).then((updated) => task.setData(updated), () => task.reload());
  }, LEASE_RENEW_MS, answerable);

  useEffect(() => {
    if (done) nextButton.current?.focus();
  }, [done]);

  const claim = async () => {
    setActing(true);
    setActionError(null);
    try {
      task.setData(await post<Task>(`/tasks/${encodeURIComponent(id)}/claim`, {}));
      toast("Task claimed. It is yours until you answer or release it.");
      window.setTimeout(() => formRef.current?.querySelector<HTMLInputElement>("input:not([disabled]), textarea:not([disabled])")?.focus(), 0);
    } catch (error) {
      setActionError(error);
      task.reload();
    } finally {
      setActing(false);
    }
  };

  const release = async () => {
    setActing(true);
    setActionError(null);
    try {
      await post(`/tasks/${encodeURIComponent(id)}/release`, {});
      toast("Task released to the queue.");
      navigate(t?.queueId ? `/queues/${encodeURIComponent(t.queueId)}` : "/");
    } catch (error) {
      setActionError(error);
    } finally {
      setActing(false);
    }
  };

  const submit = async (event?: FormEvent) => {
    event?.preventDefault();
    if (!t || !answerable || submitting) return;
    let response: unknown;
    if (form) {
      const built = buildResponse(form.fields, values);
      if (Object.keys(built.problems).length > 0) {
        setProblems(built.problems);
        const first = form.fields.find((f) => built.problems[f.name]);
        if (first) formRef.current?.querySelector<HTMLElement>(`[name="answer-${first.name}"], #answer-${first.name}`)?.focus();
        return;
      }
      response = built.response;
    } else {
      try {
        response = JSON.parse(rawJson);
      } catch {
        setProblems({ "": "The answer must be valid JSON." });
        return;
      }
    }
    setSubmitting(true);
    setProblems({});
    setActionError(null);
    try {
      task.setData(await post<Task>(`/tasks/${encodeURIComponent(id)}/complete`, { response }));
      toast("Answer recorded; the workflow continues.");
      run.reload();
    } catch (error) {
      if (error instanceof ApiError && error.code === "task.response_invalid") setProblems(problemsByField(error.details));
      else setActionError(error);
    } finally {
      setSubmitting(false);
    }
  };

  useShortcuts((event) => {
    if (help) return false;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (answerable) void submit();
      return answerable;
    }
    if (isTyping(event) || event.altKey || event.ctrlKey || event.metaKey) return false;
    if (event.key === "?") {
      setHelp(true);
      return true;
    }
    if (event.key === "v") {
      setRevealSignal((n) => n + 1);
      return true;
    }
    if (event.key === "c" && claimable) {
      void claim();
      return true;
    }
    if (event.key === "n" && t?.queueId && canReview && (done || !answerable)) {
      void next(t.queueId);
      return true;
    }
    if (/^[1-9]$/u.test(event.key) && answerable && form?.primary) {
      const field = form.fields.find((f) => f.name === form.primary)!;
      const option = field.options?.[Number(event.key) - 1];
      if (!option) return false;
      setValues((v) => ({ ...v, [field.name]: option.value }));
      setProblems((p) => ({ ...p, [field.name]: "" }));
      formRef.current?.querySelector<HTMLInputElement>(`[data-testid="option-${field.name}-${String(option.value)}"]`)?.focus();
      return true;
    }
    return false;
  });

  if (task.error && !t) return <section><PageTitle>Task</PageTitle><ErrorNote error={task.error} retry={task.reload} /></section>;
  if (!t) return <Loading label="Loading the task…" />;

  const taskNodeIds = new Set<string>();
  const leaseEnds = t.claim?.leaseExpiresAt;
  return (
    <section className="task-page" data-ready="true" data-task-state={t.state}>
      <PageTitle
        subtitle={<>
          {queue.data ? <Link to={`/queues/${encodeURIComponent(queue.data.id)}`}>{queue.data.name}</Link> : "No queue"} · {t.taskType.replace(/_/gu, " ")} · <StateBadge state={t.state} />
          {" · "}{t.slaBreached ? <span className="text-bad">past SLA (due <Time at={t.dueAt} />)</span> : <>due <Time at={t.dueAt} /></>}
          {t.claim ? <> · claimed by {mine ? "you" : t.claim.reviewer}{leaseEnds ? <>, lease ends <Time at={leaseEnds} /></> : null}</> : null}
        </>}
        actions={<>
          <button type="button" className="btn btn-quiet" onClick={() => setHelp(true)} aria-keyshortcuts="?">Shortcuts</button>
          {answerable ? <button type="button" className="btn" disabled={acting} onClick={() => void release()}>Release</button> : null}
          {t.queueId && canReview ? <button type="button" className="btn" ref={done ? nextButton : undefined} disabled={nextBusy !== null} onClick={() => void next(t.queueId!)} aria-keyshortcuts="n">Next task</button> : null}
        </>}
      >Review task</PageTitle>
      <ErrorNote error={actionError} />
      <div className="task-grid">
        <div className="task-main">
          {t.reportId ? (
            report.data ? (
              <>
                <SubjectContent report={report.data} blurByDefault={user.preferences.blurMedia} revealSignal={revealSignal} />
                <ReportFacts report={report.data} />
              </>
            ) : report.error ? <ErrorNote error={report.error} retry={report.reload} /> : <Loading label="Opening the report…" />
          ) : <p className="muted">This task has no report.</p>}
          {appeal.data ? (
            <section className="card" aria-labelledby="appeal-heading">
              <h2 id="appeal-heading">Appeal</h2>
              <blockquote className="content-text"><span className="muted small">Appellant's reason</span><p>{String(appeal.data.reason ?? "")}</p></blockquote>
            </section>
          ) : null}
          <section className="card" aria-labelledby="context-heading">
            <h2 id="context-heading">From the workflow</h2>
            <ContextList value={t.context} />
          </section>
          {t.reportId ? (
            <section className="card" aria-labelledby="history-heading">
              <h2 id="history-heading">Subject history</h2>
              {report.data ? <SubjectReports caseId={report.data.caseId} currentReportId={report.data.id} /> : null}
              <h3>Timeline</h3>
              <Timeline reportId={t.reportId} />
            </section>
          ) : null}
        </div>
        <aside className="task-side" aria-label="Decision">
          {run.data ? <AutomationSummary run={run.data} taskStepNodeIds={taskNodeIds} /> : run.error ? <ErrorNote error={run.error} /> : null}
          <section className="card answer" aria-labelledby="answer-heading">
            <h2 id="answer-heading">{done ? "Answer" : "Your answer"}</h2>
            {!canReview ? <p className="note note-info" data-testid="cannot-review">{cannotReason(user.role, "review")}</p> : null}
            {claimable ? (
              <div className="claim-box">
                <p>Claim the task to answer it; nobody else can take it while your lease lasts.</p>
                <button type="button" className="btn btn-primary" disabled={acting} onClick={() => void claim()} aria-keyshortcuts="c" data-testid="claim">Claim task</button>
              </div>
            ) : null}
            {t.state === "claimed" && !mine ? <p className="note note-warn">{t.claim?.reviewer ?? "Someone"} is reviewing this task.</p> : null}
            {done ? (
              <div className="note note-ok" role="status" data-testid="task-completed">
                <p>Answered by {t.completedBy === user.email ? "you" : t.completedBy} <Time at={t.completedAt} />.</p>
                <Json value={t.response} label="Recorded answer" />
              </div>
            ) : null}
            {t.state === "expired" || t.state === "cancelled" ? <p className="note note-warn">This task is {t.state}; it takes no answer.</p> : null}
            {!done && (answerable || claimable || (t.state === "claimed" && mine)) ? (
              <form ref={formRef} onSubmit={(e) => void submit(e)} aria-describedby="answer-hint" noValidate
                onKeyDown={(e) => {
                  // Enter on an option submits; in text areas it stays a new line.
                  const target = e.target as HTMLElement;
                  if (e.key === "Enter" && !e.ctrlKey && !e.metaKey && target.tagName === "INPUT" && ["radio", "checkbox"].includes((target as HTMLInputElement).type)) {
                    e.preventDefault();
                    void submit();
                  }
                }}>
                <fieldset disabled={!answerable || submitting} className="bare">
                  <legend className="sr-only">Answer</legend>
                  {form ? (
                    <ResponseFields fields={form.fields} primary={form.primary} values={values} problems={problems} disabled={!answerable || submitting}
                      onChange={(name, value) => { setValues((v) => ({ ...v, [name]: value })); setProblems((p) => ({ ...p, [name]: "" })); }} />
                  ) : (
                    <div className={`field${problems[""] ? " field-invalid" : ""}`}>
                      <label htmlFor="answer-json">Answer (JSON matching the task's schema)</label>
                      <textarea id="answer-json" className="mono" rows={6} value={rawJson} onChange={(e) => setRawJson(e.target.value)} />
                      <Details summary="Response schema"><Json value={t.responseSchema} label="Response schema" /></Details>
                    </div>
                  )}
                  {problems[""] ? <p className="field-error" role="alert">{problems[""]}</p> : null}
                </fieldset>
                <div className="form-actions">
                  <button type="submit" className="btn btn-primary" disabled={!answerable || submitting} aria-keyshortcuts="Control+Enter" data-testid="submit-answer">{submitting ? "Submitting…" : "Submit answer"}</button>
                  <span id="answer-hint" className="muted small"><kbd>Ctrl</kbd>+<kbd>Enter</kbd> submits</span>
                </div>
              </form>
            ) : null}
          </section>
        </aside>
      </div>
      {help ? <ShortcutHelp onClose={() => setHelp(false)} /> : null}
    </section>
  );
}
