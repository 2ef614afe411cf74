// Acting on many subjects at once from where they were found: a search's reports, the accounts an
// IP found, an account and its related accounts. A dry run first (how many subjects, how many get a
// decision (a restriction: every one, with its statement of reasons), whether approval is needed), then
// the bulk action itself, its progress, and pause, resume or cancel — a spam wave in one sitting.
import { type FormEvent, useState } from "react";
import { ApiError, server, type ApiBody, type ApiResponse } from "../api";
import { useInterval, useResource } from "../hooks";
import { ErrorNote, Field, StateBadge } from "../ui";

type Body = ApiBody<"post", "/bulk-actions">;
type Source = Pick<Body, "search" | "accounts" | "subjects">;
type Progress = ApiResponse<"get", "/bulk-actions/:id">;
interface DryRun {
  subjects: number;
  withCase: number;
  withoutCase: number;
  approvalRequired: boolean;
  decisions: { outcome: string; restricts: boolean; subjects: number };
}

export function BulkActionPanel({ source, what }: { source: Source; what: string }) {
  const types = useResource((signal) => server.get("/action-types", { signal }), []);
  const [actionType, setActionType] = useState("");
  const [reason, setReason] = useState("");
  const [dry, setDry] = useState<DryRun | null>(null);
  const [progress, setProgress] = useState<Progress | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const chosen = actionType || (types.data as Array<{ key: string }> | undefined)?.[0]?.key || "";
  const body = (dryRun: boolean) => ({ ...source, actionType: chosen, reason: reason.trim(), dryRun }) as Body;
  const run = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  const check = (event: FormEvent) => {
    event.preventDefault();
    void run(async () => setDry((await server.post("/bulk-actions", body(true))) as unknown as DryRun));
  };
  const start = () => void run(async () => setProgress((await server.post("/bulk-actions", body(false))) as unknown as Progress));
  const move = (verb: "pause" | "resume" | "cancel") =>
    void run(async () => {
      if (!progress) return;
      const path = `/bulk-actions/:id/${verb}` as const;
      setProgress(await server.post(path, undefined, { params: { id: progress.id } }));
    });
  const live = progress !== null && ["running", "approval_required"].includes(progress.state);
  useInterval(
    () => {
      if (progress) void server.get("/bulk-actions/:id", { params: { id: progress.id } }).then(setProgress, setError);
    },
    2_000,
    live,
  );
  return (
    <details className="card" data-testid="bulk-action">
      <summary>Act on {what}…</summary>
      {types.error ? <ErrorNote error={types.error} retry={types.reload} /> : null}
      {progress ? (
        <div data-testid="bulk-progress">
          <p>
            <StateBadge state={progress.state} /> {progress.started} of {progress.total} started · {progress.decisions} decisions · {progress.transparencyDbStatements} queued for the Transparency Database
            {progress.runs.failed ? ` · ${progress.runs.failed} failed` : ""}
          </p>
          <progress max={progress.total} value={progress.started} />
          <p>
            {progress.state === "running" ? (
              <button type="button" className="btn" disabled={busy} onClick={() => move("pause")}>
                Pause
              </button>
            ) : null}
            {progress.state === "paused" ? (
              <button type="button" className="btn" disabled={busy} onClick={() => move("resume")}>
                Resume
              </button>
            ) : null}
            {["running", "paused", "approval_required"].includes(progress.state) ? (
              <button type="button" className="btn btn-danger" disabled={busy} onClick={() => move("cancel")}>
                Cancel
              </button>
            ) : null}
            {progress.state === "approval_required" ? <span className="muted"> Waiting for another person's approval (assisted).</span> : null}
          </p>
        </div>
      ) : (
        <form onSubmit={check}>
          <Field label="Action type">
            {(props) => (
              <select
                {...props}
                value={chosen}
                onChange={(e) => {
                  setActionType(e.target.value);
                  setDry(null);
                }}
              >
                {((types.data as Array<{ key: string; name: string }> | undefined) ?? []).map((t) => (
                  <option key={t.key} value={t.key}>
                    {t.name} ({t.key})
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Reason" help="The statement of reasons of each subject's decision: the facts and circumstances relied on.">
            {(props) => (
              <textarea
                {...props}
                value={reason}
                required
                maxLength={2000}
                onChange={(e) => {
                  setReason(e.target.value);
                  setDry(null);
                }}
              />
            )}
          </Field>
          <button type="submit" className="btn" disabled={busy || !chosen || !reason.trim()}>
            Dry run
          </button>
          {dry ? (
            <div data-testid="bulk-dry-run">
              <p>
                <strong>{dry.subjects}</strong> subjects: {dry.decisions.subjects} get a decision ({dry.decisions.outcome}
                {dry.decisions.restricts ? ", with its statement of reasons" : ", not restricting"}){dry.decisions.subjects < dry.subjects ? `; ${dry.subjects - dry.decisions.subjects} without a report are acted on only` : ""}.
                {dry.approvalRequired ? " Another person approves it before anything goes out." : ""}
              </p>
              <button type="button" className="btn btn-primary" disabled={busy} onClick={start}>
                Act on {dry.subjects} subjects
              </button>
            </div>
          ) : null}
        </form>
      )}
      {error ? <ErrorNote error={error instanceof ApiError ? error : new Error(String(error))} /> : null}
    </details>
  );
}
