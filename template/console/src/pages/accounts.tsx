// Search and accounts: one box over reports, cases, decisions and accounts (a reporter's id or
// contact and description words match through keyed hashes; each search with words is audited),
// and an account's page: points and restrictions first, then its reports, decisions, sanctions,
// appeals and related accounts — what a moderator reads in ten seconds before acting on a person.
import { type FormEvent, useState } from "react";
import { qs, server, type ApiResponse } from "../api";
import { useResource } from "../hooks";
import { Link, useNavigate, useSearchParam } from "../router";
import { Empty, ErrorNote, Loading, PageTitle, shortId, StateBadge, Time } from "../ui";
import { BulkActionPanel } from "./bulk-action";

type Account = ApiResponse<"get", "/accounts/:id">;
type Found = ApiResponse<"get", "/search">["items"][number];
const TYPES = ["report", "case", "decision", "account"] as const;

function hrefOf(item: Found): string | null {
  if (item.type === "report") return `/reports/${encodeURIComponent(String(item.id))}`;
  if (item.type === "account") return `/accounts/${encodeURIComponent(String(item.id))}`;
  return null;
}

export function SearchPage() {
  const navigate = useNavigate();
  const q = useSearchParam("q") ?? "";
  const type = (useSearchParam("type") ?? "report") as (typeof TYPES)[number];
  const [text, setText] = useState(q);
  const [kind, setKind] = useState(type);
  const results = useResource((signal) => (q || type !== "account" ? server.get("/search", { query: { q, type, limit: 50 }, signal }) : Promise.resolve({ items: [], nextCursor: null })), [q, type]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    navigate(`/search${qs({ q: text.trim(), type: kind })}`);
  };
  return (
    <section data-ready={results.data ? "true" : undefined}>
      <PageTitle subtitle="Words of a description, or exactly a reporter's id or contact; in accounts, exactly an account's id or an IP, device id or email it was seen with. Nothing is decrypted to search; each search with words is on the record.">
        Search
      </PageTitle>
      {/* biome-ignore lint/a11y/useSemanticElements: the form is the search landmark itself */}
      <form className="filters" role="search" onSubmit={submit}>
        <label htmlFor="search-q">Search</label>
        <input id="search-q" value={text} onChange={(e) => setText(e.target.value)} autoComplete="off" />
        <label htmlFor="search-type">In</label>
        <select id="search-type" value={kind} onChange={(e) => setKind(e.target.value as (typeof TYPES)[number])}>
          {TYPES.map((t) => (
            <option key={t} value={t}>
              {t}s
            </option>
          ))}
        </select>
        <button type="submit" className="btn">
          Search
        </button>
      </form>
      {results.error ? <ErrorNote error={results.error} retry={results.reload} /> : null}
      {results.loading && !results.data ? <Loading /> : null}
      {results.data && results.data.items.length === 0 ? <Empty>Nothing found.</Empty> : null}
      <ul className="list">
        {results.data?.items.map((item) => {
          const href = hrefOf(item);
          const label = `${item.type} ${shortId(String(item.id))}`;
          return (
            <li key={`${item.type}:${String(item.id)}`}>
              {href ? <Link to={href}>{label}</Link> : <span className="mono">{label}</span>}
              {"matchedBy" in item && item.matchedBy && item.matchedBy !== "id" ? <span className="muted"> · same {String(item.matchedBy)}</span> : null}
              {"reportCount" in item ? <span className="muted"> · {String(item.reportCount)} reports</span> : null} <Time at={String((item as { at?: unknown }).at ?? "")} />
            </li>
          );
        })}
      </ul>
      {q && type === "report" && results.data && results.data.items.length > 0 ? <BulkActionPanel key={`r:${q}`} source={{ search: { q } }} what="the subjects of these reports" /> : null}
      {type === "account" && results.data && results.data.items.length > 0 ? (
        <BulkActionPanel key={`a:${q}`} source={{ accounts: results.data.items.map((item) => String(item.id)) }} what={`the reported subjects of these ${results.data.items.length} accounts`} />
      ) : null}
    </section>
  );
}

export function AccountPage({ params }: { params: Record<string, string> }) {
  const id = params.id ?? "";
  const account = useResource((signal) => server.get("/accounts/:id", { params: { id }, signal }), [id]);
  const data: Account | undefined = account.data;
  return (
    <section data-ready={data ? "true" : undefined}>
      <PageTitle subtitle="Everything reported about, decided on and appealed by this account; opening it is on the record.">Account {shortId(id)}</PageTitle>
      {account.error ? <ErrorNote error={account.error} retry={account.reload} /> : null}
      {!data && !account.error ? <Loading /> : null}
      {data ? (
        <>
          <div className="stats" data-testid="account-summary">
            <div className="stat">
              <span className="muted small">Strike points</span>
              <strong>{data.strikes.points}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Reports</span>
              <strong>{data.reports.total}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Open cases</span>
              <strong>{data.openCases.items.length}</strong>
            </div>
            <div className="stat">
              <span className="muted small">Related accounts</span>
              <strong>{data.related.items.length}</strong>
              {Object.keys(data.related.count).length > 0 ? (
                <span className="muted small">
                  {Object.entries(data.related.count)
                    .map(([kind, n]) => `${n} by ${kind}`)
                    .join(" · ")}
                </span>
              ) : null}
            </div>
          </div>
          <BulkActionPanel
            key={id}
            source={{ accounts: [id, ...data.related.items.map((r) => r.account)] }}
            what={data.related.items.length > 0 ? `this account and its ${data.related.items.length} related accounts` : "this account's reported subjects"}
          />
          <h2>Restrictions now</h2>
          {data.restrictions.length === 0 ? <Empty>None.</Empty> : null}
          <ul className="list">
            {data.restrictions.map((r) => (
              <li key={r.id}>
                <StateBadge state={r.kind} /> {r.source} <Time at={r.since} />
              </li>
            ))}
          </ul>
          <h2>Sanctions</h2>
          <ul className="list">
            {data.sanctions.items.map((s) => (
              <li key={s.id}>
                <StateBadge state={s.state} /> {s.kind} ({s.actionType}){s.art23 ? " · DSA Art. 23(1)" : ""}
                {s.refusalCode ? ` · refused: ${s.refusalCode}` : ""} <Time at={s.createdAt} />
              </li>
            ))}
          </ul>
          <h2>Reports</h2>
          <ul className="list">
            {data.reports.items.map((r) => (
              <li key={r.id}>
                <Link to={`/reports/${encodeURIComponent(r.id)}`}>{r.category.replace(/_/gu, " ")}</Link> on {r.subject.kind} <span className="mono">{r.subject.id}</span> <Time at={r.createdAt} />
              </li>
            ))}
          </ul>
          <h2>Decisions</h2>
          <ul className="list">
            {data.decisions.items.map((d) => (
              <li key={d.id}>
                {d.outcome} ({d.policyCategory.replace(/_/gu, " ")}){d.reversed ? " · reversed on appeal" : ""} <Time at={d.decidedAt} />
              </li>
            ))}
          </ul>
          <h2>Related accounts</h2>
          {data.related.items.length === 0 ? <Empty>No account shares a signal with this one.</Empty> : null}
          <ul className="list">
            {data.related.items.map((r) => (
              <li key={r.account}>
                <Link to={`/accounts/${encodeURIComponent(r.account)}`}>{shortId(r.account)}</Link> shares{" "}
                {Object.entries(r.shared)
                  .map(([kind, n]) => `${n} ${kind}`)
                  .join(", ")}{" "}
                · last seen <Time at={r.lastSeen} />
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </section>
  );
}
