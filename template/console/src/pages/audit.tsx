// The audit trail in order, filtered, with its hash chain verified on request.
import { useState, type FormEvent } from "react";
import { get, qs, type AuditEvent } from "../api";
import { usePagedList } from "../hooks";
import { useNavigate, useSearchParam } from "../router";
import { AbsoluteTime, Empty, ErrorNote, Json, Loading, PageTitle, shortId } from "../ui";

interface Verdict {
  ok: boolean;
  events: number;
  head?: string;
  firstBroken?: { seq: number; id: string | null; reason: string };
}

const REASONS: Record<string, string> = {
  seq_gap: "an event is missing (gap in the sequence)",
  unsealed: "an event was never sealed into the chain",
  prev_hash_mismatch: "an event does not point at its predecessor",
  hash_mismatch: "an event was changed after it was sealed",
  entry_mac_mismatch: "an event does not match the keyed MAC it was written with (changed, or not written by the platform)",
  checkpoint_invalid: "a checkpoint's keyed MAC does not verify",
  checkpoint_mismatch: "the chain no longer passes through a keyed checkpoint (recomputed after an edit)",
  tail_missing: "the newest events are gone (a checkpoint counts more events than the chain has)",
  anchor_missing: "the checkpoint kept outside D1 (R2) is missing",
  anchor_mismatch: "the checkpoint kept outside D1 (R2) does not match D1's checkpoints",
};

export function AuditPage() {
  const navigate = useNavigate();
  const filters = { action: useSearchParam("action") ?? "", targetType: useSearchParam("targetType") ?? "", targetId: useSearchParam("targetId") ?? "" };
  const [form, setForm] = useState(filters);
  const [verdict, setVerdict] = useState<Verdict | null>(null);
  const [verifying, setVerifying] = useState(false);
  const [verifyError, setVerifyError] = useState<unknown>(null);
  const list = usePagedList<AuditEvent>((cursor) => `/audit-events${qs({ ...filters, limit: 100, cursor })}`, [filters.action, filters.targetType, filters.targetId]);
  const { first } = list;
  const verify = async () => {
    setVerifying(true);
    setVerifyError(null);
    setVerdict(null);
    try {
      setVerdict(await get<Verdict>("/audit/verify"));
    } catch (e) {
      setVerifyError(e);
    } finally {
      setVerifying(false);
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    navigate(`/audit${qs(form)}`);
  };
  const events = list.items;
  return (
    <section data-ready={first.data ? "true" : undefined}>
      <PageTitle
        subtitle="Every state change, in order; each event's hash covers the one before it."
        actions={
          <button type="button" className="btn btn-primary" onClick={() => void verify()} disabled={verifying} data-testid="verify-chain">
            {verifying ? "Verifying…" : "Verify chain"}
          </button>
        }
      >
        Audit trail
      </PageTitle>
      <div role="status" aria-live="polite" data-testid="verify-result">
        {verdict ? (
          verdict.ok ? (
            <p className="note note-ok">
              Chain verified: all {verdict.events} events are intact
              {verdict.head ? (
                <>
                  {" "}
                  (head <code>{verdict.head.slice(0, 16)}…</code>)
                </>
              ) : null}
              .
            </p>
          ) : (
            <p className="note note-error">
              Chain broken at event {verdict.firstBroken?.seq}: {REASONS[verdict.firstBroken?.reason ?? ""] ?? verdict.firstBroken?.reason}. {verdict.events} events before it verify.
            </p>
          )
        ) : null}
      </div>
      <ErrorNote error={verifyError} />
      {/* biome-ignore lint/a11y/useSemanticElements: the form is the search landmark itself; a <search> wrapper would add an element around the flex row of filters for the same landmark */}
      <form className="filters" role="search" onSubmit={submit} aria-label="Filter the audit trail">
        <label htmlFor="audit-action">Action</label>
        <input id="audit-action" className="mono" placeholder="task or task.completed" value={form.action} onChange={(e) => setForm({ ...form, action: e.target.value })} />
        <label htmlFor="audit-type">Target type</label>
        <input id="audit-type" className="mono" placeholder="workflow_run" value={form.targetType} onChange={(e) => setForm({ ...form, targetType: e.target.value })} />
        <label htmlFor="audit-target">Target id</label>
        <input id="audit-target" className="mono" value={form.targetId} onChange={(e) => setForm({ ...form, targetId: e.target.value })} />
        <button type="submit" className="btn">
          Filter
        </button>
      </form>
      <ErrorNote error={first.error} retry={first.reload} />
      {first.loading && events.length === 0 ? <Loading /> : null}
      {first.data && events.length === 0 ? <Empty>No events match.</Empty> : null}
      {events.length > 0 ? (
        <table className="table audit-table">
          <caption className="sr-only">Audit events, oldest first</caption>
          <thead>
            <tr>
              <th scope="col" className="num">
                #
              </th>
              <th scope="col">When</th>
              <th scope="col">Action</th>
              <th scope="col">Actor</th>
              <th scope="col">Target</th>
              <th scope="col">Details</th>
              <th scope="col">Hash</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <tr key={e.id}>
                <td className="num">{e.seq}</td>
                <td>
                  <AbsoluteTime at={e.createdAt} />
                </td>
                <th scope="row">
                  <code>{e.action}</code>
                </th>
                <td>
                  {e.actor.type} <code className="small">{shortId(e.actor.id)}</code>
                </td>
                <td>
                  {e.target.type} <code className="small">{shortId(e.target.id)}</code>
                </td>
                <td>
                  {e.details && typeof e.details === "object" && Object.keys(e.details as object).length ? (
                    <details>
                      <summary>details</summary>
                      <Json value={e.details} label={`Details of event ${e.seq}`} />
                    </details>
                  ) : (
                    <span className="muted">—</span>
                  )}
                </td>
                <td>
                  {e.hash ? (
                    <code className="small" title={e.hash}>
                      {e.hash.slice(0, 10)}…
                    </code>
                  ) : (
                    <span className="muted">unsealed</span>
                  )}
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
