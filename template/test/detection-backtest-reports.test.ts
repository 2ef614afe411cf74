// A rule set version backtested retroactively on the stored reports: each report is replayed, in
// the order it came, as a report.created event about its subject, through the sampled-event
// backtest's replay (counters in memory, nothing applied); another installation's reports never.
import { describe, expect, it } from "vitest";
import { api, newInstallation } from "./helpers";

async function report(key: string, subject: { kind: string; id: string }, category: string) {
  const response = await api("/api/v1/reports", { key, body: { subject, category } });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.report?.id ?? response.body.id;
}

describe("backtest on stored reports", () => {
  it("replays the reports of a range as report.created events: counters over them, categories, nothing applied", async () => {
    const { apiKey } = await newInstallation("backtest-reports");
    const other = await newInstallation("backtest-reports-other");
    const start = new Date(Date.now() - 1_000).toISOString();
    for (let i = 0; i < 4; i += 1) await report(apiKey, { kind: "account", id: "acct-reported" }, i === 0 ? "scams_and_fraud" : "illegal_or_harmful_speech");
    await report(apiKey, { kind: "account", id: "acct-once" }, "scams_and_fraud");
    await report(apiKey, { kind: "content", id: "post-1" }, "scams_and_fraud");
    // Another installation's reports about the same account do not count.
    for (let i = 0; i < 3; i += 1) await report(other.apiKey, { kind: "account", id: "acct-reported" }, "scams_and_fraud");

    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "report-velocity" } });
    const version = await api(`/api/v1/rule-sets/${set.body.id}/versions`, {
      key: apiKey,
      body: {
        rules: [
          { id: "reported-thrice", when: "count('report.created', entity.account, '24h') >= 3", outcome: { label: { entity: "account", value: "often-reported" } } },
          { id: "scam", when: "event.data.category == 'scams_and_fraud'", outcome: { label: { entity: "account", value: "scam-reported" } } },
        ],
      },
    });
    expect(version.status, JSON.stringify(version.body)).toBe(201);

    const backtest = await api(`/api/v1/rule-set-versions/${version.body.id}/backtests`, { key: apiKey, body: { source: "reports", from: start } });
    expect(backtest.status, JSON.stringify(backtest.body)).toBe(200);
    expect(backtest.body).toMatchObject({ source: "reports", events: 6, truncated: false });
    const byRule = Object.fromEntries((backtest.body.rules as Array<{ ruleId: string; hits: number; errors: number; exampleEventIds: string[] }>).map((rule) => [rule.ruleId, rule]));
    // The 3rd and 4th reports about acct-reported; the content report has no account (an error, not a hit).
    expect(byRule["reported-thrice"]).toMatchObject({ hits: 2, errors: 1 });
    expect(byRule["reported-thrice"]!.exampleEventIds.every((id) => id.startsWith("report:"))).toBe(true);
    expect(byRule.scam).toMatchObject({ hits: 3, errors: 0 });

    // Nothing was applied.
    expect((await api("/api/v1/labels?entity=account&value=acct-reported", { key: apiKey })).body.items).toEqual([]);
    // A range after the reports replays nothing; the samples source (the default) has none here.
    const later = await api(`/api/v1/rule-set-versions/${version.body.id}/backtests`, { key: apiKey, body: { source: "reports", from: new Date(Date.now() + 60_000).toISOString(), to: new Date(Date.now() + 120_000).toISOString() } });
    expect(later.body.events).toBe(0);
    const samples = await api(`/api/v1/rule-set-versions/${version.body.id}/backtests`, { key: apiKey, body: { from: start } });
    expect(samples.body).toMatchObject({ source: "samples", events: 0 });
    // Another installation cannot backtest this version.
    expect((await api(`/api/v1/rule-set-versions/${version.body.id}/backtests`, { key: other.apiKey, body: { source: "reports" } })).status).toBe(404);
  });
});
