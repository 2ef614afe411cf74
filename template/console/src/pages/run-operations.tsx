// Bulk repair from the runs list: terminate, retry or migrate the runs the page's filter shows
// (version, state) and an error code or creation window, with a dry run (count and sample) first,
// then the background operation's progress.
import { useState, type FormEvent } from "react";
import { get, post } from "../api";
import { useInterval } from "../hooks";
import { Link } from "../router";
import { ErrorNote, shortId } from "../ui";

type Action = "terminate" | "retry" | "migrate";
interface Dry {
  count: number;
  sample: Array<{ id: string; state: string; errorCode: string | null }>;
}
interface Operation {
  id: string;
  state: string;
  progress: { total: number; processed: number; succeeded: number; failed: number; skipped: number };
}

export function BulkRunOperation({ state, versionId }: { state: string; versionId: string }) {
  const [action, setAction] = useState<Action>("retry");
  const [errorCode, setErrorCode] = useState("");
  const [target, setTarget] = useState("");
  const [reason, setReason] = useState("");
  const [dry, setDry] = useState<Dry | null>(null);
  const [operation, setOperation] = useState<Operation | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const body = (dryRun: boolean) => ({
    action,
    filter: { ...(versionId ? { workflowVersionId: versionId } : {}), ...(state ? { state } : {}), ...(errorCode ? { errorCode } : {}) },
    ...(action === "migrate" ? { workflowVersionId: target } : {}),
    reason: reason || "dry run",
    ...(dryRun ? { dryRun: true } : {}),
  });
  useInterval(
    () => {
      if (operation) void get<Operation>(`/run-operations/${encodeURIComponent(operation.id)}`).then(setOperation, setError);
    },
    1000,
    !!operation && operation.state !== "completed",
  );
  const run = async (event: FormEvent, dryRun: boolean) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (dryRun) setDry(await post<Dry>("/run-operations", body(true)));
      else setOperation(await post<Operation>("/run-operations", body(false)));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="form-card" onSubmit={(e) => void run(e, false)} aria-labelledby="bulk-heading" data-testid="bulk-form">
      <h2 id="bulk-heading">Bulk repair</h2>
      <p className="help">
        Takes the runs of the filter above{versionId ? "" : " (all versions)"}
        {state ? ` in state ${state.replace(/_/gu, " ")}` : ""}. Run a dry run first.
      </p>
      <div className="field">
        <label htmlFor="bulk-action">Action</label>
        <select
          id="bulk-action"
          value={action}
          onChange={(e) => {
            setAction(e.target.value as Action);
            setDry(null);
          }}
        >
          <option value="retry">Retry the failed node</option>
          <option value="migrate">Migrate to a version</option>
          <option value="terminate">Terminate</option>
        </select>
      </div>
      <div className="field">
        <label htmlFor="bulk-error">Error code (optional)</label>
        <input
          id="bulk-error"
          className="mono"
          value={errorCode}
          onChange={(e) => {
            setErrorCode(e.target.value);
            setDry(null);
          }}
          pattern="[A-Za-z0-9._:\-]{1,100}"
        />
      </div>
      {action === "migrate" ? (
        <div className="field">
          <label htmlFor="bulk-version">Target version id</label>
          <input id="bulk-version" className="mono" value={target} onChange={(e) => setTarget(e.target.value)} required />
        </div>
      ) : null}
      <div className="field">
        <label htmlFor="bulk-reason">Reason</label>
        <textarea id="bulk-reason" rows={2} value={reason} onChange={(e) => setReason(e.target.value)} maxLength={1000} />
        <p className="help">Recorded in the audit trail of every run.</p>
      </div>
      <ErrorNote error={error} />
      <button type="button" className="btn" disabled={busy || (action === "migrate" && !target)} onClick={(e) => void run(e, true)}>
        Dry run
      </button>{" "}
      <button type="submit" className="btn btn-primary" disabled={busy || !dry || dry.count === 0 || !reason.trim()}>
        Start ({dry ? dry.count : "?"} runs)
      </button>
      {dry ? (
        <p role="status" data-testid="bulk-dry">
          {dry.count} runs match{dry.sample.length ? ", e.g. " : "."}
          {dry.sample.map((r, i) => (
            <span key={r.id}>
              {i ? ", " : ""}
              <Link to={`/runs/${encodeURIComponent(r.id)}`}>{shortId(r.id)}</Link>
            </span>
          ))}
        </p>
      ) : null}
      {operation ? (
        <p role="status" data-testid="bulk-progress">
          Operation <code>{shortId(operation.id)}</code> {operation.state}: {operation.progress.processed}/{operation.progress.total} done ({operation.progress.succeeded} succeeded, {operation.progress.failed} failed,{" "}
          {operation.progress.skipped} skipped).
        </p>
      ) : null}
    </form>
  );
}
