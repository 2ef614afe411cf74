// Rules (admins): rule sets over the product's event stream. Pick or create a rule set, edit its
// rules as JSON, test them live against pasted events (nothing counted or applied), publish a
// version and deploy it in an authority mode; the rule set's hits since yesterday show its hit
// rate and, in shadow, what it would have done. Per rule of the deployed version: its hit rate and
// its shadow agreement (how often people's later labels agreed with what it would have done), and
// whether the version meets the rule set's gate for autonomous.
import { useState } from "react";
import { type ApiResponse, server } from "../api";
import { useResource } from "../hooks";
import { ErrorNote, Loading, PageTitle } from "../ui";

type Rules = ApiResponse<"get", "/rule-set-versions/:id">["rules"];
type TestResult = ApiResponse<"post", "/rule-sets/test">["results"][number];
const MODES = ["off", "shadow", "assisted", "autonomous"] as const;

const SAMPLE_RULES = JSON.stringify([{ id: "post-burst", when: "count('post.created', entity.account, '10m') > 20", outcome: { label: { entity: "account", value: "spam-burst", expiresIn: "24h" } } }], null, 2);
const sampleEvents = () => JSON.stringify([{ id: "test-1", type: "post.created", occurredAt: new Date().toISOString(), entities: { account: "acct-1", ip: "203.0.113.7" }, data: { length: 42 } }], null, 2);

function parse<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`The ${what} are not valid JSON.`);
  }
}

export function RulesPage() {
  const sets = useResource((signal) => server.get("/rule-sets", { signal }), []);
  const [selected, setSelected] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [error, setError] = useState<unknown>(null);
  const create = async () => {
    setError(null);
    try {
      const created = await server.post("/rule-sets", { name });
      setName("");
      sets.reload();
      setSelected(created.id);
    } catch (e) {
      setError(e);
    }
  };
  return (
    <section>
      <PageTitle subtitle="Rules over the product's events: counters, labels, and what a hit does in each authority mode.">Rules</PageTitle>
      <ErrorNote error={error ?? sets.error} />
      {sets.loading && !sets.data ? <Loading /> : null}
      <div className="form-card">
        <ul data-testid="rule-sets">
          {(sets.data?.items ?? []).map((set) => (
            <li key={set.id}>
              <button type="button" className={set.id === selected ? "btn btn-small" : "btn btn-small btn-quiet"} onClick={() => setSelected(set.id)}>
                {set.name}
              </button>{" "}
              {set.deployment ? `${set.deployment.authorityMode}` : "not deployed"}
            </li>
          ))}
        </ul>
        <div className="field">
          <label htmlFor="rule-set-name">New rule set</label>
          <input id="rule-set-name" value={name} onChange={(e) => setName(e.target.value)} />
          <button type="button" className="btn btn-small" disabled={!name} onClick={() => void create()}>
            Create
          </button>
        </div>
      </div>
      {selected ? <RuleSetEditor key={selected} id={selected} onChange={sets.reload} /> : null}
    </section>
  );
}

function RuleSetEditor({ id, onChange }: { id: string; onChange: () => void }) {
  const detail = useResource((signal) => server.get("/rule-sets/:id", { params: { id }, signal }), [id]);
  const hits = useResource((signal) => server.get("/rule-sets/:id/hits", { params: { id }, signal }), [id]);
  const deployedVersion = detail.data?.deployment?.versionId ?? null;
  const figures = useResource((signal) => server.get("/rule-sets/:id/gate", { params: { id }, signal }), [id, deployedVersion]);
  const latest = detail.data?.versions[0]?.id;
  const version = useResource(latest ? (signal) => server.get("/rule-set-versions/:id", { params: { id: latest }, signal }) : null, [latest]);
  const [rules, setRules] = useState<string | null>(null);
  const [events, setEvents] = useState(sampleEvents);
  const [results, setResults] = useState<TestResult[] | null>(null);
  const [mode, setMode] = useState<(typeof MODES)[number]>("shadow");
  const [error, setError] = useState<unknown>(null);
  const text = rules ?? (version.data ? JSON.stringify(version.data.rules, null, 2) : SAMPLE_RULES);
  const act = async (what: () => Promise<unknown>) => {
    setError(null);
    try {
      await what();
    } catch (e) {
      setError(e);
    }
  };
  const test = () => act(async () => setResults((await server.post("/rule-sets/test", { rules: parse<Rules>(text, "rules"), events: parse<Array<Record<string, unknown>>>(events, "events") })).results));
  const publish = () =>
    act(async () => {
      await server.post("/rule-sets/:id/versions", { rules: parse<Rules>(text, "rules") }, { params: { id } });
      setRules(null);
      detail.reload();
    });
  const deploy = () =>
    act(async () => {
      if (!latest) throw new Error("Publish a version first.");
      await server.put("/rule-sets/:id/deployment", { versionId: latest, authorityMode: mode }, { params: { id } });
      detail.reload();
      figures.reload();
      onChange();
    });
  return (
    <div className="form-card" data-testid="rule-set-editor">
      <h2>{detail.data?.name ?? "Rule set"}</h2>
      <p className="help">
        {detail.data?.deployment ? `Deployed: version ${detail.data.versions.find((v) => v.id === detail.data?.deployment?.versionId)?.version ?? "?"} in ${detail.data.deployment.authorityMode}.` : "Not deployed."} Latest version:{" "}
        {detail.data?.versions[0]?.version ?? "none"}.
      </p>
      <ErrorNote error={error ?? detail.error} />
      <div className="field">
        <label htmlFor="rules-json">Rules (JSON: id, when, outcome)</label>
        <textarea id="rules-json" rows={12} value={text} onChange={(e) => setRules(e.target.value)} spellCheck={false} />
      </div>
      <div className="field">
        <label htmlFor="events-json">Events to test against (JSON; nothing is counted or applied)</label>
        <textarea id="events-json" rows={8} value={events} onChange={(e) => setEvents(e.target.value)} spellCheck={false} />
      </div>
      <p>
        <button type="button" className="btn" onClick={() => void test()}>
          Test
        </button>{" "}
        <button type="button" className="btn" onClick={() => void publish()}>
          Publish a version
        </button>{" "}
        <label htmlFor="deploy-mode">Mode</label>{" "}
        <select id="deploy-mode" value={mode} onChange={(e) => setMode(e.target.value as (typeof MODES)[number])}>
          {MODES.map((m) => (
            <option key={m} value={m}>
              {m}
            </option>
          ))}
        </select>{" "}
        <button type="button" className="btn" disabled={!latest} onClick={() => void deploy()}>
          Deploy the latest version
        </button>
      </p>
      {results ? (
        <table data-testid="rule-test-results">
          <thead>
            <tr>
              <th>Event</th>
              <th>Would hit</th>
              <th>Counters read</th>
            </tr>
          </thead>
          <tbody>
            {results.map((result) => (
              <tr key={String(result.id)}>
                <td>{String(result.id)}</td>
                <td>{"hits" in result && result.hits ? result.hits.map((h) => h.ruleId).join(", ") || "—" : "error" in result && result.error ? result.error.code : "—"}</td>
                <td>{"counters" in result && result.counters ? result.counters.map((c) => `${c.call} = ${c.value}`).join("; ") || "—" : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <RuleFigures
        figures={figures.data ?? null}
        onRefresh={() => {
          figures.reload();
          hits.reload();
        }}
      />
      <h3>Hits since {hits.data ? new Date(hits.data.since).toLocaleString() : "yesterday"}</h3>
      <ul data-testid="rule-hit-totals">
        {(hits.data?.totals ?? []).map((t) => (
          <li key={`${t.versionId}/${t.ruleId}/${t.authorityMode}/${t.applied}`}>
            {t.ruleId}: {t.hits} in {t.authorityMode} {t.applied ? "(applied)" : "(recorded only)"}
          </li>
        ))}
        {hits.data && hits.data.totals.length === 0 ? <li>None.</li> : null}
      </ul>
    </div>
  );
}

const percent = (value: number | null) => (value === null ? "—" : `${Math.round(value * 100)}%`);

/** Per rule of the deployed version: hit rate and shadow agreement; and the gate for autonomous. */
function RuleFigures({ figures, onRefresh }: { figures: ApiResponse<"get", "/rule-sets/:id/gate"> | null; onRefresh: () => void }) {
  const version = figures?.version ?? null;
  return (
    <>
      <h3>Hit rate and shadow agreement{version ? ` (version ${version.version})` : ""}</h3>
      {version ? (
        <>
          <table data-testid="rule-figures">
            <thead>
              <tr>
                <th>Rule</th>
                <th>Hits, last 24 h</th>
                <th>Hits, this version</th>
                <th>Recorded only</th>
                <th>Compared with people</th>
                <th>Agreement (95% lower bound)</th>
              </tr>
            </thead>
            <tbody>
              {version.rules.map((rule) => (
                <tr key={rule.ruleId}>
                  <td>{rule.ruleId}</td>
                  <td>{rule.hits24h}</td>
                  <td>{rule.hits}</td>
                  <td>{rule.recordedOnly}</td>
                  <td>{rule.compared}</td>
                  <td>{rule.compared === 0 ? "—" : `${rule.agreements} of ${rule.compared}: ${percent(rule.agreement.value)} (≥ ${percent(rule.agreement.low)})`}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p className="help" data-testid="rule-gate">
            Autonomous {version.autonomous.met ? "is open to this version" : "needs"}: {figures?.gate.minComparedHits} comparisons and agreement's lower bound of at least {percent(figures?.gate.minAgreementLow ?? null)}
            {figures?.source === "default" ? " (the default gate)" : ""}.
          </p>
        </>
      ) : (
        <p className="help">Deploy a version to see its rules' hit rate and shadow agreement.</p>
      )}
      <button type="button" className="btn btn-small btn-quiet" onClick={onRefresh}>
        Refresh the figures
      </button>
    </>
  );
}
