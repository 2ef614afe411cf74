// A rule set earns autonomy as a trigger does: its version runs in shadow and records what it would
// have done; people's later labels and negations on the same entities are its agreement; deploying
// it autonomous is refused (409 promotion.gate_not_met, the figures in details) until the gate holds.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, newInstallation } from "./helpers";

const rule = { id: "new-poster", when: "event.type == 'post.created'", outcome: { label: { entity: "account", value: "watch" } } };
const postBy = (account: string) => ({ id: `ev-${crypto.randomUUID()}`, type: "post.created", occurredAt: new Date().toISOString(), entities: { account }, data: {} });

describe("rule set promotion", () => {
  it("refuses autonomous until the shadow record agrees with people enough, then records the evidence", async () => {
    const { id: installationId, apiKey } = await newInstallation("rules-promotion");
    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "watch-posters" } });
    const version = await api(`/api/v1/rule-sets/${set.body.id}/versions`, { key: apiKey, body: { rules: [rule] } });
    const deploy = (authorityMode: string) => api(`/api/v1/rule-sets/${set.body.id}/deployment`, { key: apiKey, method: "PUT", body: { versionId: version.body.id, authorityMode } });

    // Nothing compared yet: the default gate refuses, with its figures.
    const early = await deploy("autonomous");
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe("promotion.gate_not_met");
    expect(early.body.error.details.requirements).toEqual([
      expect.objectContaining({ requirement: "compared_hits", required: 100, actual: 0, met: false }),
      expect.objectContaining({ requirement: "agreement_low", required: 0.9, actual: null, met: false }),
    ]);

    expect((await deploy("shadow")).status).toBe(200);
    const accounts = Array.from({ length: 10 }, (_, i) => `acct-${i}`);
    const sent = await api("/api/v1/events", { key: apiKey, body: { events: accounts.map(postBy) } });
    expect(sent.body.hits).toBe(10);
    // In shadow the rule labelled nobody.
    expect((await api("/api/v1/labels?entity=account&value=acct-0", { key: apiKey })).body.items).toEqual([]);

    // People decide: 9 labelled as the rule would have, 1 negated.
    for (const account of accounts.slice(0, 9)) expect((await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: account, label: "watch" } })).status).toBe(201);
    await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: "acct-9", label: "watch", negate: true } });
    // A label of another value is no comparison.
    await api("/api/v1/labels", { key: apiKey, body: { entity: "account", value: "acct-0", label: "other" } });

    const figures = await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: apiKey });
    expect(figures.status).toBe(200);
    expect(figures.body.version.rules).toEqual([expect.objectContaining({ ruleId: "new-poster", hits: 10, hits24h: 10, recordedOnly: 10, compared: 10, agreements: 9 })]);
    expect(figures.body.version.rules[0].agreement.value).toBeCloseTo(0.9);
    expect(figures.body.version.autonomous.met).toBe(false);

    // A gate these 10 comparisons meet (Wilson's lower bound of 9/10 is about 0.596).
    const gate = await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: apiKey, method: "PUT", body: { minComparedHits: 10, minAgreementLow: 0.6 } });
    expect(gate.body.version.autonomous.met).toBe(false);
    const stillRefused = await deploy("autonomous");
    expect(stillRefused.status).toBe(409);
    expect(stillRefused.body.error.details.requirements[1]).toMatchObject({ requirement: "agreement_low", met: false, agreement: { agreements: 9, compared: 10 } });
    await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: apiKey, method: "PUT", body: { minAgreementLow: 0.55 } });
    const promoted = await deploy("autonomous");
    expect(promoted.status, JSON.stringify(promoted.body)).toBe(200);
    expect(promoted.body.deployment.authorityMode).toBe("autonomous");
    const audit = await env.DB.prepare("SELECT details_json AS d FROM audit_events WHERE installation_id = ?1 AND action = 'rule_set.deployed' ORDER BY rowid DESC LIMIT 1").bind(installationId).first<{ d: string }>();
    const details = JSON.parse(audit!.d);
    expect(details.digest).toMatch(/^sha256:[0-9a-f]{64}$/u);
    expect(details.evidence.requirements.every((r: { met: boolean }) => r.met)).toBe(true);
    // Lowering needs no gate.
    expect((await deploy("shadow")).status).toBe(200);
  });

  it("compares a report outcome's shadow hits with later decisions about the subject: a restriction agrees, no_action disagrees", async () => {
    const { apiKey } = await newInstallation("rules-promotion-reports");
    const set = await api("/api/v1/rule-sets", { key: apiKey, body: { name: "report-links" } });
    const version = await api(`/api/v1/rule-sets/${set.body.id}/versions`, {
      key: apiKey,
      body: { rules: [{ id: "link-post", when: "event.type == 'post.created'", outcome: { report: { entity: "post", category: "scams_and_fraud" } } }] },
    });
    expect(version.status, JSON.stringify(version.body)).toBe(201);
    expect((await api(`/api/v1/rule-sets/${set.body.id}/deployment`, { key: apiKey, method: "PUT", body: { versionId: version.body.id, authorityMode: "shadow" } })).status).toBe(200);
    const posts = ["post-a", "post-b", "post-c"];
    const sent = await api("/api/v1/events", { key: apiKey, body: { events: posts.map((post) => ({ id: `ev-${post}`, type: "post.created", occurredAt: new Date().toISOString(), entities: { post }, data: {} })) } });
    expect(sent.body.hits).toBe(3);
    // Users report two of the posts; people decide: one removed, one left up. post-c is never decided.
    const decide = async (post: string, body: Record<string, unknown>) => {
      const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: post }, category: "scams_and_fraud" } });
      expect(report.status, JSON.stringify(report.body)).toBe(201);
      const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: report.body.id, ...body } });
      expect(decision.status, JSON.stringify(decision.body)).toBe(201);
    };
    await decide("post-a", { outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Removed: a scam link." });
    await decide("post-b", { outcome: "no_action" });
    const figures = await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: apiKey });
    expect(figures.body.version.rules).toEqual([expect.objectContaining({ ruleId: "link-post", hits: 3, recordedOnly: 3, compared: 2, agreements: 1 })]);
  });

  it("another installation's rule set gate is a 404", async () => {
    const a = await newInstallation("rules-promotion-a");
    const b = await newInstallation("rules-promotion-b");
    const set = await api("/api/v1/rule-sets", { key: a.apiKey, body: { name: "mine" } });
    expect((await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: b.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/rule-sets/${set.body.id}/gate`, { key: b.apiKey, method: "PUT", body: { minComparedHits: 0 } })).status).toBe(404);
  });
});
