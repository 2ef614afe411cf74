// The child-safety desk's admin screens: hash banks with the exchange each one follows (status,
// cursor, last sync, errors, sync now), and CyberTipline submissions (state, NCMEC's report id,
// files, the preservation hold; resume, reconcile a /submit whose outcome is unknown, release the
// hold with a reason). Everything here is admin-only, as the API is.
import { type FormEvent, useState } from "react";
import { ApiError, errorMessage, qs, server, type ApiResponse, type ItemOf } from "../api";
import { useResource } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Details, Empty, ErrorNote, Json, Loading, PageTitle, shortId, StateBadge, Time, useToast } from "../ui";

type Bank = ItemOf<"/hash-banks">;
type Follow = ApiResponse<"get", "/hash-banks/:id/exchange">;
type Submission = ApiResponse<"get", "/cybertipline/reports/:id">;

/** NCMEC may have received a /submit whose answer never came back: only an admin can say which. */
const OUTCOME_UNKNOWN = "cybertipline.submit_outcome_unknown";
const SUBMISSION_STATES = ["", "pending", "opened", "finished", "rejected"];

function AdminOnly({ title }: { title: string }) {
  const { user } = useSession();
  return (
    <section>
      <PageTitle>{title}</PageTitle>
      <p className="note">{cannotReason(user.role, "admin")}</p>
    </section>
  );
}

/** A bank's follow, or null when it follows no exchange (the API's 404 hash_exchange.not_following). */
async function followOf(bankId: string, signal: AbortSignal): Promise<Follow | null> {
  try {
    return await server.get("/hash-banks/:id/exchange", { params: { id: bankId }, signal });
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

function ExchangeStatus({ bank }: { bank: Bank }) {
  const toast = useToast();
  const follow = useResource((signal) => followOf(bank.id, signal), [bank.id]);
  const [syncing, setSyncing] = useState(false);
  const [syncError, setSyncError] = useState<unknown>(undefined);
  const f = follow.data;
  const syncNow = async () => {
    setSyncing(true);
    setSyncError(undefined);
    try {
      const result = await server.post("/hash-banks/:id/exchange/sync", undefined, { params: { id: bank.id } });
      if (result.status) follow.setData(result.status);
      toast("Sync finished.");
    } catch (error) {
      setSyncError(error);
    } finally {
      setSyncing(false);
    }
  };
  if (follow.loading && f === undefined) return <Loading />;
  if (follow.error) return <ErrorNote error={follow.error} retry={follow.reload} />;
  if (!f) return <span className="muted">Follows no exchange</span>;
  return (
    <div data-testid={`exchange-${bank.id}`}>
      <dl className="kv">
        <dt>Exchange</dt>
        <dd>
          {f.kind} <span className="muted small">{f.baseUrl}</span>
        </dd>
        <dt>Status</dt>
        <dd>
          {f.syncing ? <StateBadge state="running" /> : f.lastError ? <StateBadge state="failed" /> : <StateBadge state="succeeded" />}
          {f.failures > 0 ? <span className="muted small"> {f.failures} failed syncs in a row</span> : null}
        </dd>
        <dt>Last sync</dt>
        <dd>
          <Time at={f.lastSyncAt} /> (last success <Time at={f.lastSuccessAt} />; next <Time at={f.nextSyncAt} />, every {f.intervalMinutes} min)
        </dd>
        <dt>Brought in</dt>
        <dd>
          {f.counts.upserts} added or updated, {f.counts.deletes} deleted, over {f.counts.pages} pages
        </dd>
        <dt>Last error</dt>
        <dd>{f.lastError ? <code>{`${f.lastError.code}${f.lastError.status ? ` (HTTP ${f.lastError.status})` : ""}`}</code> : <span className="muted">none</span>}</dd>
        <dt>Contributes back</dt>
        <dd>{f.contribute ? "yes (opted in; each contribution audited)" : f.contributionSupported ? "no (not opted in)" : "not offered by this exchange"}</dd>
      </dl>
      <Details summary="Cursor and filters">
        <Json value={{ cursor: f.cursor, filters: f.filters }} label="Cursor and filters" />
      </Details>
      <button type="button" className="btn" disabled={syncing || f.syncing} onClick={() => void syncNow()}>
        {syncing ? "Syncing…" : "Sync now"}
      </button>
      <ErrorNote error={syncError} />
    </div>
  );
}

export function HashBanksPage() {
  const isAdmin = useCan("admin");
  const banks = useResource(isAdmin ? async (signal) => (await server.get("/hash-banks", { signal })).items : null, [isAdmin]);
  if (!isAdmin) return <AdminOnly title="Hash banks" />;
  const items = banks.data ?? [];
  return (
    <section data-ready={banks.data ? "true" : undefined}>
      <PageTitle subtitle="Banks of known PDQ hashes that reports' media are matched against, and the exchange each one follows.">Hash banks</PageTitle>
      <ErrorNote error={banks.error} retry={banks.reload} />
      {banks.loading && !banks.data ? <Loading /> : null}
      {banks.data && items.length === 0 ? <Empty>No hash banks yet. Create one with POST /api/v1/hash-banks.</Empty> : null}
      {items.map((bank) => (
        <article key={bank.id} className="card" data-testid={`bank-${bank.id}`}>
          <h2>{bank.name}</h2>
          <p className="muted small">
            {bank.kind} · threshold {bank.threshold} bits · quality floor {bank.qualityFloor} · {bank.shards} shards · <code>{shortId(bank.id)}</code>
          </p>
          <ExchangeStatus bank={bank} />
        </article>
      ))}
    </section>
  );
}

export function CyberTiplinePage() {
  const isAdmin = useCan("admin");
  const navigate = useNavigate();
  const state = useSearchParam("state") ?? "";
  const list = useResource(isAdmin ? async (signal) => (await server.get("/cybertipline/reports", { query: { limit: 200, ...(state ? { state: state as "pending" } : {}) }, signal })).items : null, [isAdmin, state]);
  if (!isAdmin) return <AdminOnly title="CyberTipline reports" />;
  const items = list.data ?? [];
  return (
    <section data-ready={list.data ? "true" : undefined}>
      <PageTitle subtitle="Reports a person confirmed and the platform sent to NCMEC's CyberTipline, with the files and the one-year preservation hold.">CyberTipline reports</PageTitle>
      <div className="filters">
        <label htmlFor="ctr-state">State</label>
        <select id="ctr-state" value={state} onChange={(e) => navigate(`/cybertipline${qs({ state: e.target.value })}`, { replace: true })}>
          {SUBMISSION_STATES.map((s) => (
            <option key={s} value={s}>
              {s || "any"}
            </option>
          ))}
        </select>
      </div>
      <ErrorNote error={list.error} retry={list.reload} />
      {list.loading && !list.data ? <Loading /> : null}
      {list.data && items.length === 0 ? <Empty>No CyberTipline submissions.</Empty> : null}
      {items.length > 0 ? (
        <table className="table">
          <caption className="sr-only">CyberTipline submissions</caption>
          <thead>
            <tr>
              <th scope="col">Submission</th>
              <th scope="col">State</th>
              <th scope="col">NCMEC report id</th>
              <th scope="col">Files</th>
              <th scope="col">Last error</th>
              <th scope="col">Report</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {items.map((s) => (
              <tr key={s.id}>
                <th scope="row">
                  <Link to={`/cybertipline/${encodeURIComponent(s.id)}`}>{shortId(s.id)}</Link>
                </th>
                <td>
                  <StateBadge state={s.state} />
                  {s.lastErrorCode === OUTCOME_UNKNOWN ? <span className="badge tone-warn"> needs reconciling</span> : null}
                </td>
                <td>{s.ncmecReportId ?? <span className="muted">—</span>}</td>
                <td className="num">{s.files.length}</td>
                <td>{s.lastErrorCode ? <code>{s.lastErrorCode}</code> : <span className="muted">—</span>}</td>
                <td>
                  <Link to={`/reports/${encodeURIComponent(s.reportId)}`}>{shortId(s.reportId)}</Link>
                </td>
                <td>
                  <Time at={s.createdAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

function Reconcile({ submission, onDone }: { submission: Submission; onDone: (s: Submission) => void }) {
  const [reportId, setReportId] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const send = async (body: { ncmecReportId: string } | { resend: true }) => {
    setBusy(true);
    setError(undefined);
    try {
      onDone(await server.post("/cybertipline/reports/:id/reconcile", body, { params: { id: submission.id } }));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void send({ ncmecReportId: reportId.trim() });
  };
  return (
    <div className="card" data-testid="reconcile">
      <h2>Reconcile the submission</h2>
      <p>
        The platform sent /submit but never learnt NCMEC's answer. Look the report up in NCMEC's records: if NCMEC holds it, enter its report id (the files are then uploaded to it); if NCMEC holds none, send it again. Either choice is
        audited.
      </p>
      <form className="filters" onSubmit={submit}>
        <label htmlFor="ctr-ncmec-id">NCMEC report id</label>
        <input id="ctr-ncmec-id" value={reportId} onChange={(e) => setReportId(e.target.value)} pattern="[A-Za-z0-9_\-]{1,64}" required />
        <button type="submit" className="btn" disabled={busy}>
          NCMEC holds it
        </button>
        <button type="button" className="btn btn-quiet" disabled={busy} onClick={() => void send({ resend: true })}>
          NCMEC holds none: send again
        </button>
      </form>
      <ErrorNote error={error} />
    </div>
  );
}

function ReleaseHold({ holdId }: { holdId: string }) {
  const toast = useToast();
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [released, setReleased] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!window.confirm("Release the preservation hold? The preserved files are erased by the next sweep, before the year NCMEC preservation asks for ends.")) return;
    setBusy(true);
    setError(undefined);
    try {
      await server.post("/preservation-holds/:id/release", { reason: reason.trim() }, { params: { id: holdId } });
      setReleased(true);
      toast("Hold released.");
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  if (released) return <p className="note">The hold was released; the preserved files go with the next sweep.</p>;
  return (
    <Details summary="Release the preservation hold early">
      <form onSubmit={(e) => void submit(e)}>
        <label htmlFor="hold-reason">Reason (kept in the audit trail)</label>
        <textarea id="hold-reason" value={reason} onChange={(e) => setReason(e.target.value)} required maxLength={2000} rows={3} />
        <button type="submit" className="btn btn-danger" disabled={busy || reason.trim() === ""}>
          Release hold
        </button>
      </form>
      <ErrorNote error={error} />
    </Details>
  );
}

export function CyberTiplineReportPage({ params }: { params: Record<string, string> }) {
  const isAdmin = useCan("admin");
  const id = params.id ?? "";
  const submission = useResource(isAdmin ? (signal) => server.get("/cybertipline/reports/:id", { params: { id }, signal }) : null, [isAdmin, id]);
  const [resumeError, setResumeError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  if (!isAdmin) return <AdminOnly title="CyberTipline report" />;
  const s = submission.data;
  const resume = async () => {
    setBusy(true);
    setResumeError(undefined);
    try {
      submission.setData(await server.post("/cybertipline/reports/:id/resume", undefined, { params: { id } }));
    } catch (e) {
      setResumeError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section data-ready={s ? "true" : undefined}>
      <PageTitle subtitle={<Link to="/cybertipline">All CyberTipline reports</Link>}>CyberTipline report {shortId(id)}</PageTitle>
      <ErrorNote error={submission.error} retry={submission.reload} />
      {submission.loading && !s ? <Loading /> : null}
      {s ? (
        <>
          <dl className="kv">
            <dt>State</dt>
            <dd>
              <StateBadge state={s.state} /> after {s.attempts} attempts
              {s.nextAttemptAt && s.state !== "finished" ? (
                <>
                  {" "}
                  · next <Time at={s.nextAttemptAt} />
                </>
              ) : null}
            </dd>
            <dt>NCMEC report id</dt>
            <dd>{s.ncmecReportId ?? <span className="muted">not yet</span>}</dd>
            <dt>Report</dt>
            <dd>
              <Link to={`/reports/${encodeURIComponent(s.reportId)}`}>{shortId(s.reportId)}</Link>
              {s.caseId ? <span className="muted small"> case {shortId(s.caseId)}</span> : null}
            </dd>
            <dt>Confirmed by</dt>
            <dd>
              <code>{s.confirmedById}</code>
              {s.confirmationTaskId ? <span className="muted small"> (task {shortId(s.confirmationTaskId)})</span> : null}
            </dd>
            <dt>Last error</dt>
            <dd>{s.lastErrorCode ? <code>{`${s.lastErrorCode}${s.lastResponseCode === null ? "" : ` (NCMEC response code ${s.lastResponseCode})`}`}</code> : <span className="muted">none</span>}</dd>
            <dt>Created / finished</dt>
            <dd>
              <Time at={s.createdAt} /> / <Time at={s.finishedAt} />
            </dd>
            <dt>Report XML digest</dt>
            <dd>
              <code>{s.xmlDigest ?? "—"}</code>
            </dd>
          </dl>
          <h2>Files</h2>
          {s.files.length === 0 ? (
            <Empty>No files.</Empty>
          ) : (
            <table className="table table-compact">
              <caption className="sr-only">Files of the submission</caption>
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">SHA-256</th>
                  <th scope="col">NCMEC file id</th>
                  <th scope="col">Details sent</th>
                  <th scope="col">Preserved copy</th>
                </tr>
              </thead>
              <tbody>
                {s.files.map((file, index) => (
                  <tr key={file.sha256}>
                    <td className="num">{index}</td>
                    <td>
                      <code>{file.sha256}</code>
                    </td>
                    <td>{file.fileId ?? <span className="muted">not uploaded yet</span>}</td>
                    <td>{file.detailsSent ? "yes" : "no"}</td>
                    <td>
                      {s.evidenceErasedAt ? (
                        <span className="muted">erased</span>
                      ) : (
                        <a href={`/api/v1/cybertipline/reports/${encodeURIComponent(s.id)}/file${qs({ index })}`} download>
                          download (audited)
                        </a>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>Preservation</h2>
          {s.evidenceErasedAt ? (
            <p>
              The hold ended and the preserved files were erased <Time at={s.evidenceErasedAt} />.
            </p>
          ) : s.holdId ? (
            <>
              <p>
                The report and its files are sealed and held (hold <code>{shortId(s.holdId)}</code>): retention and erasure requests cannot remove them until the hold ends.
              </p>
              <ReleaseHold holdId={s.holdId} />
            </>
          ) : (
            <p className="muted">No hold recorded.</p>
          )}
          {s.lastErrorCode === OUTCOME_UNKNOWN && s.ncmecReportId === null ? <Reconcile submission={s} onDone={submission.setData} /> : null}
          {s.state !== "finished" && s.lastErrorCode !== OUTCOME_UNKNOWN ? (
            <p>
              <button type="button" className="btn" disabled={busy} onClick={() => void resume()}>
                {busy ? "Resuming…" : "Resume now"}
              </button>{" "}
              <span className="muted small">From the step it stopped at; never a second report.</span>
            </p>
          ) : null}
          <ErrorNote error={resumeError} />
          {resumeError instanceof ApiError ? <p className="muted small">{errorMessage(resumeError)}</p> : null}
        </>
      ) : null}
    </section>
  );
}
