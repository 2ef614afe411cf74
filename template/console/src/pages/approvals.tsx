// Action proposals waiting for a person: approve (the action is delivered) or reject with a
// reason (the run leaves by its rejected port).
import { useState } from "react";
import { get, post, qs, type Page, type Proposal } from "../api";
import { useInterval, useResource } from "../hooks";
import { Link } from "../router";
import { cannotReason, useCan, useSession } from "../session";
import { Empty, ErrorNote, Json, Loading, PageTitle, shortId, StateBadge, Tabs, Time, useToast } from "../ui";

type Filter = "approval_required" | "applied" | "rejected" | "expired" | "cancelled" | "all";

function ProposalRow({ proposal, canReview, onDone }: { proposal: Proposal; canReview: boolean; onDone: () => void }) {
  const toast = useToast();
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const decide = async (approve: boolean) => {
    setBusy(true);
    setError(null);
    try {
      await post(`/action-proposals/${encodeURIComponent(proposal.id)}/${approve ? "approve" : "reject"}`, approve ? {} : { reason });
      toast(approve ? `Approved ${proposal.actionType}; it is being delivered.` : `Rejected ${proposal.actionType}.`);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const pending = proposal.state === "approval_required";
  return (
    <li className="card proposal" data-testid="proposal">
      <div className="proposal-head">
        <h2 className="h3">{proposal.actionType}</h2>
        <StateBadge state={proposal.state} />
        <span className="muted small">
          proposed <Time at={proposal.createdAt} />
          {pending ? (
            <>
              {" "}
              · expires <Time at={proposal.expiresAt} />
            </>
          ) : null}
        </span>
      </div>
      <dl className="kv">
        <div>
          <dt>Run</dt>
          <dd>
            <Link to={`/runs/${encodeURIComponent(proposal.runId)}`}>{shortId(proposal.runId)}</Link> · node <code>{proposal.nodeId}</code> · {proposal.authorityMode}
          </dd>
        </div>
        {proposal.reportId ? (
          <div>
            <dt>Report</dt>
            <dd>
              <Link to={`/reports/${encodeURIComponent(proposal.reportId)}`}>{shortId(proposal.reportId)}</Link>
            </dd>
          </div>
        ) : null}
        {proposal.decidedBy ? (
          <div>
            <dt>Decided by</dt>
            <dd>
              {proposal.decidedBy} <Time at={proposal.decidedAt} />
              {proposal.reason ? ` — ${proposal.reason}` : ""}
            </dd>
          </div>
        ) : null}
      </dl>
      <Json value={proposal.params} label="Action parameters" />
      <ErrorNote error={error} />
      {pending && canReview ? (
        rejecting ? (
          <form
            className="inline-form"
            onSubmit={(e) => {
              e.preventDefault();
              void decide(false);
            }}
          >
            <label htmlFor={`reason-${proposal.id}`}>Reason for rejecting</label>
            {/* biome-ignore lint/a11y/noAutofocus: the field appears because the person pressed Reject; the reason is what they type next */}
            <input id={`reason-${proposal.id}`} value={reason} onChange={(e) => setReason(e.target.value)} required maxLength={2000} autoFocus />
            <button type="submit" className="btn btn-danger" disabled={busy || reason.trim() === ""}>
              Reject
            </button>
            <button type="button" className="btn btn-quiet" onClick={() => setRejecting(false)}>
              Cancel
            </button>
          </form>
        ) : (
          <div className="form-actions">
            <button type="button" className="btn btn-primary" disabled={busy} onClick={() => void decide(true)} data-testid="approve">
              Approve
            </button>
            <button type="button" className="btn" disabled={busy} onClick={() => setRejecting(true)} data-testid="reject">
              Reject…
            </button>
          </div>
        )
      ) : null}
    </li>
  );
}

export function ApprovalsPage() {
  const canReview = useCan("review");
  const { user } = useSession();
  const [filter, setFilter] = useState<Filter>("approval_required");
  const proposals = useResource((signal) => get<Page<Proposal>>(`/action-proposals${qs({ state: filter === "all" ? undefined : filter, limit: 100 })}`, signal), [filter]);
  useInterval(proposals.reload, 15_000, filter === "approval_required");
  const items = proposals.data?.items ?? [];
  return (
    <section data-ready={proposals.data ? "true" : undefined}>
      <PageTitle subtitle="Actions that automation proposed and that need a person's approval before they are delivered.">Approvals</PageTitle>
      {!canReview ? (
        <p className="note note-info" data-testid="cannot-review">
          {cannotReason(user.role, "review")}
        </p>
      ) : null}
      <Tabs<Filter>
        label="Proposal state"
        value={filter}
        onChange={setFilter}
        tabs={[
          { id: "approval_required", label: "Waiting" },
          { id: "applied", label: "Applied" },
          { id: "rejected", label: "Rejected" },
          { id: "expired", label: "Expired" },
          { id: "cancelled", label: "Cancelled" },
          { id: "all", label: "All" },
        ]}
      />
      <div role="tabpanel" id={`panel-${filter}`} aria-labelledby={`tab-${filter}`}>
        <ErrorNote error={proposals.error} retry={proposals.reload} />
        {proposals.loading && !proposals.data ? <Loading /> : null}
        {proposals.data && items.length === 0 ? <Empty>{filter === "approval_required" ? "Nothing is waiting for approval." : "No proposals here."}</Empty> : null}
        <ul className="plain-list cards">
          {items.map((proposal) => (
            <ProposalRow key={proposal.id} proposal={proposal} canReview={canReview} onDone={proposals.reload} />
          ))}
        </ul>
      </div>
    </section>
  );
}
