// Detection: rule sets over product events, with sliding-window counters on Durable Objects and
// entity labels. Time is driven by the events' occurredAt, never by waiting on the wall clock.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepExpiredLabels, sweepOldSamples } from "../src/detection";
import { api, newInstallation, publish, startEndGraph, until } from "./helpers";

const VELOCITY = "count('post.created', entity.account, '10m') > 20";

async function deployRules(key: string, rules: unknown[], authorityMode = "autonomous"): Promise<{ ruleSetId: string; versionId: string }> {
  const set = await api("/api/v1/rule-sets", { key, body: { name: `rules-${crypto.randomUUID()}` } });
  expect(set.status, JSON.stringify(set.body)).toBe(201);
  const version = await api(`/api/v1/rule-sets/${set.body.id}/versions`, { key, body: { rules } });
  expect(version.status, JSON.stringify(version.body)).toBe(201);
  // These tests are about what rules do, not how they earn autonomy (test/detection-promotion.test.ts): the gate is waived.
  if (authorityMode === "autonomous") expect((await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key, method: "PUT", body: { minComparedHits: 0, minAgreementLow: 0 } })).status).toBe(200);
  const deployed = await api(`/api/v1/rule-sets/${set.body.id}/deployment`, { key, method: "PUT", body: { versionId: version.body.id, authorityMode } });
  expect(deployed.status, JSON.stringify(deployed.body)).toBe(200);
  return { ruleSetId: set.body.id, versionId: version.body.id };
}

const velocityRule = { id: "burst", when: VELOCITY, outcome: { label: { entity: "account", value: "spam-burst" } } };

function post(account: string, at: number, id = `ev-${crypto.randomUUID()}`) {
  return { id, type: "post.created", occurredAt: new Date(at).toISOString(), entities: { account }, data: { length: 10 } };
}

async function send(key: string, events: unknown[]) {
  const response = await api("/api/v1/events", { key, body: { events } });
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return response.body as {
    accepted: number;
    rejected: number;
    duplicates: number;
    hits: number;
    results: Array<{ id: string; status: string; hits?: Array<{ ruleId: string; applied: boolean; authorityMode: string }>; ruleErrors?: unknown[]; error?: { code: string } }>;
  };
}

async function labelsOf(key: string, account: string) {
  const response = await api(`/api/v1/labels?entity=account&value=${encodeURIComponent(account)}`, { key });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.items as Array<{ value: string; source: string; createdAt: string; expiresAt: string | null }>;
}

describe("rule set versions", () => {
  it("are published with a digest and refuse what cannot run: a bad when, a non-literal window, an action outcome", async () => {
    const { apiKey } = await newInstallation("rules-publish");
    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "velocity" } });
    const ok = await api(`/api/v1/rule-sets/${set.body.id}/versions`, { key: apiKey, body: { rules: [velocityRule] } });
    expect(ok.status).toBe(201);
    expect(ok.body.digest).toMatch(/^sha256:[0-9a-f]{64}$/u);
    expect(ok.body.version).toBe(1);
    expect(ok.body.expressionSemantics).toBe("json-numbers-1");
    const bad = await api(`/api/v1/rule-sets/${set.body.id}/versions`, {
      key: apiKey,
      body: {
        rules: [
          { id: "a", when: "event.type ==", outcome: { label: { entity: "account", value: "x" } } },
          { id: "b", when: "count('post.created', entity.account, event.data.window) > 1", outcome: { label: { entity: "account", value: "x" } } },
          { id: "c", when: "true", outcome: { action: { type: "ban" } } },
        ],
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("rule_set.invalid");
    const codes = bad.body.error.details.map((d: { path: string; code: string }) => `${d.path} ${d.code}`);
    expect(codes).toEqual(["$.rules[0].when expression.invalid", "$.rules[1].when rule.counter_invalid", "$.rules[2].outcome.action rule_set.outcome_unsupported"]);
    const dup = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "velocity" } });
    expect(dup.status).toBe(409);
  });
});

describe("report and run outcomes", () => {
  it("refuse personal entity kinds at publish, naming the rule", async () => {
    const { apiKey } = await newInstallation("rules-personal");
    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "personal" } });
    const bad = await api(`/api/v1/rule-sets/${set.body.id}/versions`, {
      key: apiKey,
      body: {
        rules: [
          { id: "report-ip", when: "true", outcome: { report: { entity: "ip", category: "scams_and_fraud" } } },
          { id: "run-device", when: "true", outcome: { run: { workflowVersionId: "wfv_none", entity: "device" } } },
          { id: "label-ip", when: "true", outcome: { label: { entity: "ip", value: "bad-ip" } } },
        ],
      },
    });
    expect(bad.status).toBe(422);
    const details = bad.body.error.details as Array<{ path: string; code: string; message: string }>;
    const personal = details.filter((d) => d.code === "rule_set.entity_personal");
    expect(personal.map((d) => d.path)).toEqual(["$.rules[0].outcome.report.entity", "$.rules[1].outcome.run.entity"]);
    expect(personal[0]!.message).toContain("report-ip");
    expect(details.some((d) => d.path.startsWith("$.rules[2]"))).toBe(false);
  });

  it("start a run no higher than the workflow's own triggers have earned: an autonomous rule set runs a version its trigger runs in shadow, in shadow", async () => {
    const { apiKey } = await newInstallation("rules-run-ceiling");
    const version = await publish(apiKey, startEndGraph);
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "false", workflowVersionId: version.id, authorityMode: "shadow" } });
    expect(trigger.status, JSON.stringify(trigger.body)).toBe(201);
    await deployRules(apiKey, [{ id: "escalate", when: "event.type == 'account.flagged'", outcome: { run: { workflowVersionId: version.id, entity: "account" } } }]);
    const sent = await send(apiKey, [{ id: "f-ceiling", type: "account.flagged", occurredAt: new Date().toISOString(), entities: { account: "acct-c" } }]);
    expect(sent.results[0]!.hits).toMatchObject([{ ruleId: "escalate", applied: true, authorityMode: "autonomous" }]);
    const run = await env.DB.prepare("SELECT authority_mode AS mode FROM workflow_runs WHERE workflow_version_id = ?1").bind(version.id).first<{ mode: string }>();
    expect(run).toEqual({ mode: "shadow" });
  });

  it("report an account as its own owner, so strikes accrue to it", async () => {
    const { apiKey } = await newInstallation("rules-owner");
    await deployRules(apiKey, [{ id: "flag", when: "event.type == 'account.flagged'", outcome: { report: { entity: "account", category: "scams_and_fraud" } } }]);
    await send(apiKey, [{ id: "f1", type: "account.flagged", occurredAt: new Date().toISOString(), entities: { account: "acct-own" } }]);
    const reports = await api("/api/v1/reports?subjectId=acct-own", { key: apiKey });
    expect(reports.body.items).toHaveLength(1);
    const report = await api(`/api/v1/reports/${reports.body.items[0].id}`, { key: apiKey });
    expect(report.status, JSON.stringify(report.body)).toBe(200);
    expect(report.body.subject.ownerId).toBe("acct-own");
  });
});

describe("rule set limits", () => {
  it("refuse a version reading too many counters, and a deployment past the installation's rule cap", async () => {
    const { apiKey } = await newInstallation("rules-limits");
    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "counters" } });
    const many = await api(`/api/v1/rule-sets/${set.body.id}/versions`, {
      key: apiKey,
      body: { rules: Array.from({ length: 65 }, (_, i) => ({ id: `c${i}`, when: `count('t${i}', entity.account, '1h') > 1`, outcome: { label: { entity: "account", value: "x" } } })) },
    });
    expect(many.status).toBe(422);
    expect(many.body.error.details.map((d: { code: string }) => d.code)).toEqual(["rule_set.too_many_counters"]);
    const full = Array.from({ length: 200 }, (_, i) => ({ id: `r${i}`, when: `event.type == 'e${i}'`, outcome: { label: { entity: "account", value: "x" } } }));
    await deployRules(apiKey, full);
    await deployRules(apiKey, full);
    const third = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "third" } });
    const version = await api(`/api/v1/rule-sets/${third.body.id}/versions`, { key: apiKey, body: { rules: full } });
    const refused = await api(`/api/v1/rule-sets/${third.body.id}/deployment`, { key: apiKey, method: "PUT", body: { versionId: version.body.id, authorityMode: "shadow" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("rule_set.too_many_deployed_rules");
    const off = await api(`/api/v1/rule-sets/${third.body.id}/deployment`, { key: apiKey, method: "PUT", body: { versionId: version.body.id, authorityMode: "off" } });
    expect(off.status).toBe(200);
  });
});

describe("a velocity rule", () => {
  it("fires on the 21st post in 10 minutes and not on the 20th", async () => {
    const { apiKey } = await newInstallation("rules-velocity");
    await deployRules(apiKey, [velocityRule]);
    const base = Date.now() - 3600_000;
    const first = await send(
      apiKey,
      Array.from({ length: 20 }, (_, i) => post("acct-1", base + i * 10_000)),
    );
    expect(first.hits).toBe(0);
    expect(first.results.every((r) => r.status === "evaluated")).toBe(true);
    expect(await labelsOf(apiKey, "acct-1")).toEqual([]);
    // A test of the rule on the next post: it would hit, reading 21; nothing is counted or applied.
    for (let i = 0; i < 2; i++) {
      const tested = await api("/api/v1/rule-sets/test", { key: apiKey, body: { rules: [velocityRule], events: [post("acct-1", base + 200_000, "probe")] } });
      expect(tested.status, JSON.stringify(tested.body)).toBe(200);
      expect(tested.body.results).toEqual([{ id: "probe", status: "evaluated", hits: [{ ruleId: "burst", outcome: velocityRule.outcome }], ruleErrors: [], counters: [{ call: "count('post.created', entity.account, '10m')", value: 21 }] }]);
    }
    expect(await labelsOf(apiKey, "acct-1")).toEqual([]);
    const twentyFirst = await send(apiKey, [post("acct-1", base + 200_000)]);
    expect(twentyFirst.hits).toBe(1);
    expect(twentyFirst.results[0]!.hits).toEqual([expect.objectContaining({ ruleId: "burst", applied: true, authorityMode: "autonomous" })]);
    const labels = await labelsOf(apiKey, "acct-1");
    expect(labels).toEqual([expect.objectContaining({ value: "spam-burst", expiresAt: null })]);
    expect(labels[0]!.source).toMatch(/^rule:rsv_[0-9A-Za-z]+\/burst$/u);
  });

  it("slides its window: posts older than 10 minutes stop counting", async () => {
    const { apiKey } = await newInstallation("rules-slide");
    await deployRules(apiKey, [velocityRule]);
    const base = Date.now() - 3600_000;
    // 20 posts at base+0s … base+190s.
    expect(
      (
        await send(
          apiKey,
          Array.from({ length: 20 }, (_, i) => post("acct-s", base + i * 10_000)),
        )
      ).hits,
    ).toBe(0);
    // At base+605s the window (base+5s, base+605s] holds posts 2…20 and this one: 20, no hit.
    expect((await send(apiKey, [post("acct-s", base + 605_000)])).hits).toBe(0);
    // At base+606s: 19 + 2 = 21, a hit.
    expect((await send(apiKey, [post("acct-s", base + 606_000)])).hits).toBe(1);
  });

  it("keeps its window when an event dated a few minutes ahead arrives, and refuses events over a day old", async () => {
    const { apiKey } = await newInstallation("rules-clock");
    await deployRules(apiKey, [velocityRule]);
    const base = Date.now() - 9 * 60_000;
    await send(
      apiKey,
      Array.from({ length: 20 }, (_, i) => post("acct-c", base + i * 1_000)),
    );
    // Within the allowed skew: accepted, but the shard's rows are pruned against the server clock.
    const ahead = await send(apiKey, [post("acct-c", Date.now() + 4 * 60_000)]);
    expect(ahead.accepted).toBe(1);
    const late = await send(apiKey, [post("acct-c", base + 30_000)]);
    expect(late.results[0]!.hits?.map((h) => h.ruleId)).toEqual(["burst"]);
    const stale = await send(apiKey, [post("acct-c", Date.now() - 25 * 3600_000)]);
    expect(stale.results[0]!.error?.code).toBe("event.occurred_at_stale");
  });

  it("in shadow records what it would have done and does nothing", async () => {
    const { apiKey, id } = await newInstallation("rules-shadow");
    const { ruleSetId, versionId } = await deployRules(apiKey, [velocityRule], "shadow");
    const base = Date.now() - 3600_000;
    const sent = await send(
      apiKey,
      Array.from({ length: 21 }, (_, i) => post("acct-sh", base + i * 1_000)),
    );
    expect(sent.hits).toBe(1);
    expect(sent.results[20]!.hits).toEqual([expect.objectContaining({ ruleId: "burst", applied: false, authorityMode: "shadow" })]);
    expect(await labelsOf(apiKey, "acct-sh")).toEqual([]);
    const hit = await env.DB.prepare("SELECT applied, authority_mode AS mode, outcome_json AS outcome FROM rule_hits WHERE installation_id = ?1 AND rule_set_version_id = ?2").bind(id, versionId).all();
    expect(hit.results).toEqual([{ applied: 0, mode: "shadow", outcome: JSON.stringify(velocityRule.outcome) }]);
    const listed = await api(`/api/v1/rule-sets/${ruleSetId}/hits`, { key: apiKey });
    expect(listed.status).toBe(200);
    expect(listed.body.totals).toEqual([{ versionId, ruleId: "burst", authorityMode: "shadow", applied: false, hits: 1 }]);
    expect(listed.body.items).toEqual([expect.objectContaining({ ruleId: "burst", eventId: sent.results[20]!.id, applied: false, outcome: velocityRule.outcome, result: null })]);
  });

  it("counts an event retried with the same id once", async () => {
    const { apiKey } = await newInstallation("rules-retry");
    await deployRules(apiKey, [velocityRule]);
    const base = Date.now() - 3600_000;
    const once = post("acct-r", base, "ev-same");
    const first = await send(apiKey, [once]);
    expect(first.results[0]!.status).toBe("evaluated");
    // The same id 30 times, across batches and within one: still one post.
    for (let i = 0; i < 3; i++) {
      const again = await send(
        apiKey,
        Array.from({ length: 10 }, () => once),
      );
      expect(again.results.every((r) => r.status === "duplicate")).toBe(true);
      expect(again.hits).toBe(0);
    }
    // 19 more distinct posts make 20: still no hit; the 21st fires.
    expect(
      (
        await send(
          apiKey,
          Array.from({ length: 19 }, (_, i) => post("acct-r", base + (i + 1) * 1_000)),
        )
      ).hits,
    ).toBe(0);
    expect((await send(apiKey, [post("acct-r", base + 30_000)])).hits).toBe(1);
  });

  it("never sees another installation's counters or labels", async () => {
    const [a, b] = await Promise.all([newInstallation("rules-tenant-a"), newInstallation("rules-tenant-b")]);
    await Promise.all([deployRules(a.apiKey, [velocityRule]), deployRules(b.apiKey, [velocityRule])]);
    const base = Date.now() - 3600_000;
    expect(
      (
        await send(
          a.apiKey,
          Array.from({ length: 21 }, (_, i) => post("acct-shared", base + i * 1_000)),
        )
      ).hits,
    ).toBe(1);
    expect(await labelsOf(a.apiKey, "acct-shared")).toHaveLength(1);
    // The same account id, the same times, in B: its own first post.
    expect((await send(b.apiKey, [post("acct-shared", base + 21_000)])).hits).toBe(0);
    expect(await labelsOf(b.apiKey, "acct-shared")).toEqual([]);
  });
});

describe("rules", () => {
  it("count distinct entities per entity, read other event types' counters, and report an entity", async () => {
    const { apiKey } = await newInstallation("rules-distinct");
    await deployRules(apiKey, [
      { id: "many-ips", when: "distinct('ip', entity.account, '24h') >= 3", outcome: { label: { entity: "account", value: "many-ips" } } },
      { id: "new-and-busy", when: "event.type == 'account.flagged' && count('post.created', entity.account, '1h') >= 2", outcome: { report: { entity: "account", category: "scams_and_fraud" } } },
    ]);
    const base = Date.now() - 3600_000;
    const at = (i: number) => new Date(base + i * 1_000).toISOString();
    const sent = await send(apiKey, [
      { id: "d1", type: "login", occurredAt: at(1), entities: { account: "acct-d", ip: "10.0.0.1" } },
      { id: "d2", type: "login", occurredAt: at(2), entities: { account: "acct-d", ip: "10.0.0.1" } },
      { id: "d3", type: "post.created", occurredAt: at(3), entities: { account: "acct-d", ip: "10.0.0.2" } },
      { id: "d4", type: "post.created", occurredAt: at(4), entities: { account: "acct-d", ip: "10.0.0.3" } },
      { id: "d5", type: "account.flagged", occurredAt: at(5), entities: { account: "acct-d" } },
    ]);
    // d5 names no ip: it adds none, but still reads the account's three.
    expect(sent.results.map((r) => (r.hits ?? []).map((h) => h.ruleId))).toEqual([[], [], [], ["many-ips"], ["many-ips", "new-and-busy"]]);
    expect((await labelsOf(apiKey, "acct-d")).map((l) => l.value)).toEqual(["many-ips"]);
    const reports = await api("/api/v1/reports?subjectId=acct-d", { key: apiKey });
    expect(reports.body.items).toHaveLength(1);
    expect(reports.body.items[0].category).toBe("scams_and_fraud");
  });

  it("open at most 50 reports per request; the rest are recorded as capped", async () => {
    const { id, apiKey } = await newInstallation("rules-cap");
    await deployRules(apiKey, [{ id: "each", when: "event.type == 'account.flagged'", outcome: { report: { entity: "account", category: "scams_and_fraud" } } }]);
    const at = new Date().toISOString();
    const sent = await send(
      apiKey,
      Array.from({ length: 52 }, (_, i) => ({ id: `cap-${i}`, type: "account.flagged", occurredAt: at, entities: { account: `acct-cap-${i}` } })),
    );
    expect(sent.hits).toBe(52);
    expect(sent.results.filter((r) => r.hits?.[0]?.applied).length).toBe(50);
    const reports = await env.DB.prepare("SELECT COUNT(*) AS n FROM reports WHERE installation_id = ?").bind(id).first<{ n: number }>();
    expect(reports!.n).toBe(50);
    const capped = await env.DB.prepare("SELECT COUNT(*) AS n FROM rule_hits WHERE installation_id = ? AND applied = 0 AND result_json LIKE '%rule.outcomes_capped%'").bind(id).first<{ n: number }>();
    expect(capped!.n).toBe(2);
  });

  it("reject a bad event on its own and evaluate the rest of the batch", async () => {
    const { apiKey } = await newInstallation("rules-reject");
    await deployRules(apiKey, [{ id: "any", when: "event.type == 'post.created'", outcome: { label: { entity: "account", value: "poster" } } }]);
    const sent = await send(apiKey, [
      { id: "ok", type: "post.created", occurredAt: new Date().toISOString(), entities: { account: "acct-x" } },
      { id: "future", type: "post.created", occurredAt: new Date(Date.now() + 3600_000).toISOString(), entities: { account: "acct-x" } },
      { id: "bad-entity", type: "post.created", occurredAt: new Date().toISOString(), entities: { Account: "acct-x" } },
    ]);
    expect(sent.results.map((r) => r.error?.code ?? r.status)).toEqual(["evaluated", "event.occurred_at_future", "event.entities_invalid"]);
    expect(sent.accepted).toBe(1);
    expect(sent.rejected).toBe(2);
  });

  it("reject an event whose data nests too deep on its own, and evaluate the rest of the batch, with sampling on", async () => {
    const { apiKey } = await newInstallation("rules-deep");
    expect((await api("/api/v1/event-settings", { key: apiKey, method: "PUT", body: { sampleRate: 1 } })).status).toBe(200);
    await deployRules(apiKey, [{ id: "any", when: "event.type == 'post.created'", outcome: { label: { entity: "account", value: "poster" } } }]);
    const at = new Date().toISOString();
    const fine = { id: "ok", type: "post.created", occurredAt: at, entities: { account: "acct-x" }, data: { a: [[[{ b: 1 }]]] } };
    // 6,000 arrays deep: about 12 KB of JSON, deep enough to exhaust a recursive reader's stack.
    const deep = `{"id":"deep","type":"post.created","occurredAt":"${at}","entities":{"account":"acct-x"},"data":{"a":${"[".repeat(6000)}${"]".repeat(6000)}}}`;
    const response = await api("/api/v1/events", { key: apiKey, body: `{"events":[${JSON.stringify(fine)},${deep}]}` });
    expect(response.status, JSON.stringify(response.body)).toBe(202);
    expect(response.body.results.map((r: { status: string; error?: { code: string } }) => r.error?.code ?? r.status)).toEqual(["evaluated", "event.data_invalid"]);
  });

  it("need the events:write scope to send events", async () => {
    const { apiKey } = await newInstallation("rules-scope");
    const key = await api("/api/v1/api-keys", { key: apiKey, body: { name: "admin only", scopes: ["admin"] } });
    const refused = await api("/api/v1/events", { key: key.body.apiKey, body: { events: [post("acct", Date.now())] } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("auth.scope_missing");
  });
});

describe("sampled events", () => {
  it("are kept sealed only when asked for, and a version is backtested over them", async () => {
    const { apiKey, id } = await newInstallation("rules-sample");
    const count = () => env.DB.prepare("SELECT COUNT(*) AS n FROM event_samples WHERE installation_id = ?1").bind(id).first<{ n: number }>();
    const base = Date.now() - 3600_000;
    await send(apiKey, [post("acct-sample", base, "before-sampling")]);
    expect((await count())?.n).toBe(0);
    expect((await api("/api/v1/event-settings", { key: apiKey, method: "PUT", body: { sampleRate: 1 } })).status).toBe(200);
    await send(
      apiKey,
      Array.from({ length: 25 }, (_, i) => post("acct-sample", base + (i + 1) * 1_000, `sampled-${i}`)),
    );
    expect((await count())?.n).toBe(25);
    const stored = await env.DB.prepare("SELECT sealed FROM event_samples WHERE installation_id = ?1").bind(id).all<{ sealed: string }>();
    expect(JSON.stringify(stored.results)).not.toContain("acct-sample");
    // Published, never deployed: the backtest replays the sample as in shadow.
    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "candidate" } });
    const version = await api(`/api/v1/rule-sets/${set.body.id}/versions`, { key: apiKey, body: { rules: [velocityRule, { id: "never", when: "event.type == 'x'", outcome: { label: { entity: "account", value: "x" } } }] } });
    const backtest = await api(`/api/v1/rule-set-versions/${version.body.id}/backtests`, { key: apiKey, body: { from: new Date(base - 1_000).toISOString() } });
    expect(backtest.status, JSON.stringify(backtest.body)).toBe(200);
    expect(backtest.body.events).toBe(25);
    // The 21st to 25th sampled posts are over 20 in 10 minutes.
    expect(backtest.body.rules).toEqual([
      { ruleId: "burst", hits: 5, errors: 0, exampleEventIds: ["sampled-20", "sampled-21", "sampled-22", "sampled-23", "sampled-24"] },
      { ruleId: "never", hits: 0, errors: 0, exampleEventIds: [] },
    ]);
    expect(await labelsOf(apiKey, "acct-sample")).toEqual([]);
    const audited = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'event_samples.read'").bind(id).first<{ n: number }>();
    expect(audited?.n).toBe(1);
    // Kept 30 days: a sweep 31 days on deletes them.
    await sweepOldSamples(env, new Date(Date.now() + 31 * 86_400_000));
    expect((await count())?.n).toBe(0);
  });
});

describe("labels", () => {
  it("are read by rules for every entity of a batch", async () => {
    const { apiKey } = await newInstallation("labels-read");
    await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: "acct-l7", label: "watch" } });
    await api("/api/v1/labels", { key: apiKey, body: { entity: "ip", value: "198.51.100.7", label: "bad-ip" } });
    await deployRules(apiKey, [{ id: "watched", when: "'watch' in labels.account || 'bad-ip' in labels.ip", outcome: { label: { entity: "account", value: "seen" } } }], "shadow");
    const at = new Date().toISOString();
    const sent = await send(
      apiKey,
      Array.from({ length: 300 }, (_, i) => ({ id: `l-${i}`, type: "login", occurredAt: at, entities: { account: `acct-l${i}`, ip: `198.51.100.${i % 256}` } })),
    );
    const hit = sent.results.flatMap((r, i) => ((r.hits ?? []).length > 0 ? [i] : []));
    expect(hit).toEqual([7, 7 + 256]);
  });

  it("disappear at their expiry", async () => {
    const { apiKey, id } = await newInstallation("labels-expiry");
    // A rule's label lasts from its event: one drawn from an event two hours old, for an hour, is already gone.
    await deployRules(apiKey, [
      { id: "old", when: "event.type == 'old'", outcome: { label: { entity: "account", value: "brief", expiresIn: "1h" } } },
      { id: "new", when: "event.type == 'new'", outcome: { label: { entity: "account", value: "lasting", expiresIn: "3h" } } },
    ]);
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000).toISOString();
    await send(apiKey, [
      { id: "e-old", type: "old", occurredAt: twoHoursAgo, entities: { account: "acct-e" } },
      { id: "e-new", type: "new", occurredAt: twoHoursAgo, entities: { account: "acct-e" } },
    ]);
    expect((await labelsOf(apiKey, "acct-e")).map((l) => l.value)).toEqual(["lasting"]);
    // A person's label with a one-second expiry: there, then gone.
    const put = await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: "acct-p", label: "watch", expiresIn: "1s" } });
    expect(put.status).toBe(201);
    expect((await labelsOf(apiKey, "acct-p")).map((l) => l.value)).toEqual(["watch"]);
    await until(async () => (await labelsOf(apiKey, "acct-p")).length === 0, "the label to expire", 10_000);
    // The sweep then deletes the expired rows.
    const rows = () => env.DB.prepare("SELECT COUNT(*) AS n FROM entity_labels WHERE installation_id = ?1").bind(id).first<{ n: number }>();
    expect((await rows())?.n).toBe(3);
    await sweepExpiredLabels(env, new Date());
    expect((await rows())?.n).toBe(1);
  });

  it("of a personal entity are looked up only with personal_data:read, audited under the entity key", async () => {
    const { id, apiKey } = await newInstallation("labels-personal");
    const put = await api("/api/v1/labels", { key: apiKey, body: { entity: "ip", value: "203.0.113.9", label: "bad-ip" } });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const reader = await api("/api/v1/api-keys", { key: apiKey, body: { name: "reader", scopes: ["read"] } });
    const refused = await api("/api/v1/labels?entity=ip&value=203.0.113.9", { key: reader.body.apiKey });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("auth.scope_missing");
    // An account is not personal data here: a read key looks it up.
    expect((await api("/api/v1/labels?entity=account&value=a1", { key: reader.body.apiKey })).status).toBe(200);
    const lookups = () => env.DB.prepare("SELECT * FROM audit_events WHERE installation_id = ? AND action = 'label.personal_lookup'").bind(id).all();
    expect((await lookups()).results).toHaveLength(0);
    const allowed = await api("/api/v1/labels?entity=ip&value=203.0.113.9", { key: apiKey });
    expect(allowed.status).toBe(200);
    expect(allowed.body.items.map((l: { value: string }) => l.value)).toEqual(["bad-ip"]);
    const audited = (await lookups()).results;
    expect(audited).toHaveLength(1);
    expect(JSON.stringify(audited)).not.toContain("203.0.113.9");
  });

  it("have no ATProto view until the installation is a labeler: a typed 409 (the view is test/detection-atproto.test.ts)", async () => {
    const { apiKey } = await newInstallation("labels-atproto");
    const response = await api("/api/v1/xrpc/com.atproto.label.queryLabels?uriPatterns=did:plc:abc", { key: apiKey });
    expect(response.status).toBe(409);
    expect(response.body.error.code).toBe("label.atproto_unavailable");
  });

  it("a person's negation stands against a rule", async () => {
    const { apiKey } = await newInstallation("labels-negation");
    await deployRules(apiKey, [{ id: "any", when: "true", outcome: { label: { entity: "account", value: "suspect" } } }]);
    const negated = await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: "acct-n", label: "suspect", negate: true } });
    expect(negated.status).toBe(201);
    await send(apiKey, [post("acct-n", Date.now())]);
    expect(await labelsOf(apiKey, "acct-n")).toEqual([]);
    await send(apiKey, [post("acct-other", Date.now())]);
    expect((await labelsOf(apiKey, "acct-other")).map((l) => l.value)).toEqual(["suspect"]);
  });
});
