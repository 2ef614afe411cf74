// The review task: the report (opened for the reviewer; the access is audited), the subject's
// content behind wellness controls, the subject's history, what automation proposed and why, and
// the answer form generated from the task's response_schema. Keyboard first: 1-9 choose the
// outcome, Ctrl+Enter submits, c claims, v reveals media, n takes the next task, ? lists keys.
import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { ApiError, get, post, type Queue, type ReportDetail, type RunDetail, type Task } from "../api";
import { isTyping, useInterval, useResource, useShortcuts } from "../hooks";
import { Link, useNavigate } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Details, ErrorNote, Json, Loading, PageTitle, StateBadge, Time, useToast } from "../ui";
import { useNextTask } from "./queues";
import { buildResponse, fieldsOf, initialValues, problemsByField, ResponseFields, type Values } from "./response-form";
import { AutomationSummary, ContextList, ReportFacts, SubjectContent } from "./task/panels";
import { ShortcutHelp } from "./task/shortcut-help";
import { SubjectReports, Timeline } from "./timeline";
import { skippedFor, WellnessNotice } from "./wellness-notice";

const LEASE_RENEW_MS = 5 * 60_000;

export function TaskPage({ params }: { params: Record<string, string> }) {
  const id = params.id!;
  const { user } = useSession();
  const canReview = useCan("review");
  const navigate = useNavigate();
  const toast = useToast();
  const { next, busy: nextBusy, capNotice } = useNextTask();
  const task = useResource((signal) => get<Task>(`/tasks/${encodeURIComponent(id)}`, signal), [id]);
  const t = task.data;
  // Reported content opens for roles that may read personal data (the API says the same: 403).
  const report = useResource(t?.reportId && canReview ? (signal) => get<ReportDetail>(`/reports/${encodeURIComponent(t.reportId!)}`, signal) : null, [t?.reportId, canReview]);
  const run = useResource(t?.runId ? (signal) => get<RunDetail>(`/runs/${encodeURIComponent(t.runId!)}`, signal) : null, [t?.runId]);
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
  useInterval(
    () => {
      if (!answerable) return;
      post<Task>(`/tasks/${encodeURIComponent(id)}/claim`, {}).then(
        (updated) => task.setData(updated),
        () => task.reload(),
      );
    },
    LEASE_RENEW_MS,
    answerable,
  );

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

  if (task.error && !t)
    return (
      <section>
        <PageTitle>Task</PageTitle>
        <ErrorNote error={task.error} retry={task.reload} />
      </section>
    );
  if (!t) return <Loading label="Loading the task…" />;

  const taskNodeIds = new Set<string>();
  const leaseEnds = t.claim?.leaseExpiresAt;
  return (
    <section className="task-page" data-ready="true" data-task-state={t.state}>
      <PageTitle
        subtitle={
          <>
            {queue.data ? <Link to={`/queues/${encodeURIComponent(queue.data.id)}`}>{queue.data.name}</Link> : "No queue"} · {t.taskType.replace(/_/gu, " ")} · <StateBadge state={t.state} />
            {" · "}
            {t.slaBreached ? (
              <span className="text-bad">
                past SLA (due <Time at={t.dueAt} />)
              </span>
            ) : (
              <>
                due <Time at={t.dueAt} />
              </>
            )}
            {t.claim ? (
              <>
                {" "}
                · claimed by {mine ? "you" : t.claim.reviewer}
                {leaseEnds ? (
                  <>
                    , lease ends <Time at={leaseEnds} />
                  </>
                ) : null}
              </>
            ) : null}
          </>
        }
        actions={
          <>
            <button type="button" className="btn btn-quiet" onClick={() => setHelp(true)} aria-keyshortcuts="?">
              Shortcuts
            </button>
            {answerable ? (
              <button type="button" className="btn" disabled={acting} onClick={() => void release()}>
                Release
              </button>
            ) : null}
            {t.queueId && canReview ? (
              <button type="button" className="btn" ref={done ? nextButton : undefined} disabled={nextBusy !== null} onClick={() => void next(t.queueId!)} aria-keyshortcuts="n">
                Next task
              </button>
            ) : null}
          </>
        }
      >
        Review task
      </PageTitle>
      <WellnessNotice notice={capNotice ?? skippedFor(id)} />
      <ErrorNote error={actionError} />
      <div className="task-grid">
        <div className="task-main">
          {t.reportId && !canReview ? (
            <p className="note note-info" data-testid="content-sealed">
              The reported content is sealed: your role may not open personal data. Reviewers see it here.
            </p>
          ) : t.reportId ? (
            report.data ? (
              <>
                <SubjectContent
                  report={report.data}
                  // A strict (child-safety) queue blurs whatever the reviewer's preference, and keeps the greyscale after a reveal.
                  blurByDefault={t.display.locked || user.preferences.blurMedia}
                  greyscaleLocked={t.display.locked}
                  revealSignal={revealSignal}
                />
                <ReportFacts report={report.data} />
              </>
            ) : report.error ? (
              <ErrorNote error={report.error} retry={report.reload} />
            ) : (
              <Loading label="Opening the report…" />
            )
          ) : (
            <p className="muted">This task has no report.</p>
          )}
          {appeal.data ? (
            <section className="card" aria-labelledby="appeal-heading">
              <h2 id="appeal-heading">Appeal</h2>
              <blockquote className="content-text">
                <span className="muted small">Appellant's reason</span>
                <p>{String(appeal.data.reason ?? "")}</p>
              </blockquote>
            </section>
          ) : null}
          <section className="card" aria-labelledby="context-heading">
            <h2 id="context-heading">From the workflow</h2>
            <ContextList value={t.context} sealed={t.contextSealed} />
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
            {!canReview ? (
              <p className="note note-info" data-testid="cannot-review">
                {cannotReason(user.role, "review")}
              </p>
            ) : null}
            {claimable ? (
              <div className="claim-box">
                <p>Claim the task to answer it; nobody else can take it while your lease lasts.</p>
                <button type="button" className="btn btn-primary" disabled={acting} onClick={() => void claim()} aria-keyshortcuts="c" data-testid="claim">
                  Claim task
                </button>
              </div>
            ) : null}
            {t.state === "claimed" && !mine ? <p className="note note-warn">{t.claim?.reviewer ?? "Someone"} is reviewing this task.</p> : null}
            {done ? (
              <div className="note note-ok" role="status" data-testid="task-completed">
                <p>
                  Answered by {t.completedBy === user.email ? "you" : t.completedBy} <Time at={t.completedAt} />.
                </p>
                <Json value={t.response} label="Recorded answer" />
              </div>
            ) : null}
            {t.state === "expired" || t.state === "cancelled" ? <p className="note note-warn">This task is {t.state}; it takes no answer.</p> : null}
            {!done && (answerable || claimable || (t.state === "claimed" && mine)) ? (
              <form
                ref={formRef}
                onSubmit={(e) => void submit(e)}
                aria-describedby="answer-hint"
                noValidate
                onKeyDown={(e) => {
                  // Enter on an option submits; in text areas it stays a new line.
                  const target = e.target as HTMLElement;
                  if (e.key === "Enter" && !e.ctrlKey && !e.metaKey && target.tagName === "INPUT" && ["radio", "checkbox"].includes((target as HTMLInputElement).type)) {
                    e.preventDefault();
                    void submit();
                  }
                }}
              >
                <fieldset disabled={!answerable || submitting} className="bare">
                  <legend className="sr-only">Answer</legend>
                  {form ? (
                    <ResponseFields
                      fields={form.fields}
                      primary={form.primary}
                      values={values}
                      problems={problems}
                      disabled={!answerable || submitting}
                      onChange={(name, value) => {
                        setValues((v) => ({ ...v, [name]: value }));
                        setProblems((p) => ({ ...p, [name]: "" }));
                      }}
                    />
                  ) : (
                    <div className={`field${problems[""] ? " field-invalid" : ""}`}>
                      <label htmlFor="answer-json">Answer (JSON matching the task's schema)</label>
                      <textarea id="answer-json" className="mono" rows={6} value={rawJson} onChange={(e) => setRawJson(e.target.value)} />
                      <Details summary="Response schema">
                        <Json value={t.responseSchema} label="Response schema" />
                      </Details>
                    </div>
                  )}
                  {problems[""] ? (
                    <p className="field-error" role="alert">
                      {problems[""]}
                    </p>
                  ) : null}
                </fieldset>
                <div className="form-actions">
                  <button type="submit" className="btn btn-primary" disabled={!answerable || submitting} aria-keyshortcuts="Control+Enter" data-testid="submit-answer">
                    {submitting ? "Submitting…" : "Submit answer"}
                  </button>
                  <span id="answer-hint" className="muted small">
                    <kbd>Ctrl</kbd>+<kbd>Enter</kbd> submits
                  </span>
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
