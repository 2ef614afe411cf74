// What the product hears of an account's ladder after the fact: `account.sanction_reversed` when an
// appeal walks a sanction back (to the endpoint that applied it, and to the endpoints subscribed),
// `account.strike_expired` when a strike stops counting (to the subscribed endpoints); signed
// Standard Webhooks through the outbox, each written once however often the sweep runs.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sweepAccountNotices } from "../src/accounts/notices";
import { api, newInstallation, personKey, receiverLog, until } from "./helpers";

async function endpoint(apiKey: string, path: string, eventTypes: string[] = []) {
  const created = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5, eventTypes } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: created.body.secret }) });
  return created.body.id as string;
}

async function reportAndDecide(apiKey: string, owner: string, subjectId: string) {
  const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: subjectId, ownerId: owner }, category: "scams_and_fraud", description: "A fake giveaway." } });
  expect(report.status).toBe(201);
  const decision = await api("/api/v1/decisions", {
    key: apiKey,
    body: { reportId: report.body.id, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "The post ran a fake giveaway.", ground: "incompatible_content" },
  });
  expect(decision.status, JSON.stringify(decision.body)).toBe(201);
  return { reportId: report.body.id as string, decisionId: decision.body.id as string };
}

const deliveries = async (installationId: string, eventType: string) =>
  (await env.DB.prepare(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND event_type = ?2`).bind(installationId, eventType).first<{ n: number }>())?.n ?? 0;

describe("account notices", () => {
  it("an appeal that overturns the decision a sanction's own action recorded walks the sanction back, and the product is told why", async () => {
    const { id: installationId, apiKey } = await newInstallation("account-notices-own");
    const applied = "/ok/notices-own-decision";
    const actionEndpoint = await endpoint(apiKey, applied);
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "suspend_user", name: "Suspend", endpointId: actionEndpoint } })).status).toBe(201);
    const policy = await api("/api/v1/strike-policy", {
      key: apiKey,
      method: "PUT",
      body: { categories: { scams_and_fraud: { points: 2 } }, expiryDays: 90, authorityMode: "autonomous", ladder: [{ points: 2, actionType: "suspend_user" }] },
    });
    expect(policy.status, JSON.stringify(policy.body)).toBe(200);

    const owner = `owner-${crypto.randomUUID()}`;
    const content = await reportAndDecide(apiKey, owner, "post-own");
    const suspension = (await api(`/api/v1/accounts/${owner}`, { key: apiKey })).body.sanctions.items[0];
    expect(suspension).toMatchObject({ kind: "suspension", state: "started" });
    // Applied, the suspension is a decision of its own (its statement of reasons): that is what the account holder appeals.
    const own = await until(async () => (await api(`/api/v1/decisions?reportId=${content.reportId}`, { key: apiKey })).body.items?.find((d: any) => d.outcome === "account_suspended"), "the suspension's decision");
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: own.id, reason: "My account was not the spammer." } });
    expect(appeal.status, JSON.stringify(appeal.body)).toBe(201);
    const resolved = await api(`/api/v1/appeals/${appeal.body.appeal?.id ?? appeal.body.id}/resolve`, { key: await personKey(apiKey), body: { outcome: "overturned" } });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);

    const view = (await api(`/api/v1/accounts/${owner}`, { key: apiKey })).body;
    expect(view.sanctions.items.find((s: any) => s.id === suspension.id).state).toBe("reversed");
    expect(view.restrictions).toEqual([]);
    // The content decision stands, and with it its strike.
    expect(view.strikes.points).toBe(2);
    const audited = await env.DB.prepare(`SELECT json_extract(details_json, '$.reason') AS reason FROM audit_events WHERE installation_id = ?1 AND action = 'account.sanction_reversed' AND target_id = ?2`)
      .bind(installationId, suspension.id)
      .first<{ reason: string }>();
    expect(audited).toEqual({ reason: "decision_overturned" });

    await sweepAccountNotices(env, new Date());
    const [notice] = await until(async () => {
      const log = (await receiverLog(applied)).filter((entry) => entry.type === "account.sanction_reversed" && entry.data.sanctionId === suspension.id);
      return log.length > 0 ? log : null;
    }, "the reversal notice");
    expect(notice!.data).toMatchObject({ kind: "suspension", actionType: "suspend_user", reason: "decision_overturned" });
  });

  it("tells the product when an appeal walks a sanction back and when a strike expires, once each", async () => {
    const { id: installationId, apiKey } = await newInstallation("account-notices");
    const applied = "/ok/notices-applied";
    const subscribed = "/ok/notices-subscribed";
    const actionEndpoint = await endpoint(apiKey, applied);
    await endpoint(apiKey, subscribed, ["account.sanction_reversed", "account.strike_expired"]);
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "warn_user", name: "Warn", endpointId: actionEndpoint } })).status).toBe(201);
    const policy = await api("/api/v1/strike-policy", { key: apiKey, method: "PUT", body: { categories: { scams_and_fraud: { points: 2 } }, expiryDays: 1, authorityMode: "autonomous", ladder: [{ points: 2, actionType: "warn_user" }] } });
    expect(policy.status, JSON.stringify(policy.body)).toBe(200);

    const owner = `owner-${crypto.randomUUID()}`;
    const first = await reportAndDecide(apiKey, owner, "post-n1");
    const warning = (await api(`/api/v1/accounts/${owner}`, { key: apiKey })).body.sanctions.items[0];
    expect(warning).toMatchObject({ kind: "warning", state: "started" });
    // Nothing to tell yet.
    await sweepAccountNotices(env, new Date());
    expect(await deliveries(installationId, "account.sanction_reversed")).toBe(0);

    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: first.decisionId, reason: "It was satire." } });
    expect(appeal.status).toBe(201);
    const resolved = await api(`/api/v1/appeals/${appeal.body.appeal?.id ?? appeal.body.id}/resolve`, { key: await personKey(apiKey), body: { outcome: "overturned" } });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    expect((await api(`/api/v1/accounts/${owner}`, { key: apiKey })).body.sanctions.items[0].state).toBe("reversed");

    const swept = await sweepAccountNotices(env, new Date());
    expect(swept.notices).toBeGreaterThanOrEqual(2);
    for (const path of [applied, subscribed]) {
      const [notice] = await until(async () => {
        const log = (await receiverLog(path)).filter((entry) => entry.type === "account.sanction_reversed" && entry.data.sanctionId === warning.id);
        return log.length > 0 ? log : null;
      }, `the reversal at ${path}`);
      expect(notice!.verified).toBe(true);
      expect(notice!.data).toMatchObject({ kind: "warning", actionType: "warn_user", reason: "strike_reversed", reportId: first.reportId, subject: { kind: "content", id: "post-n1" } });
      // The account's id is never sent (the product knows the subject's owner).
      expect(JSON.stringify(notice!.data)).not.toContain(owner);
    }

    // A strike that stops counting: told once it expired, with the account's points left.
    const second = await reportAndDecide(apiKey, owner, "post-n2");
    const strike = (await api(`/api/v1/accounts/${owner}`, { key: apiKey })).body.strikes.items.find((s: any) => s.decisionId === second.decisionId);
    await sweepAccountNotices(env, new Date());
    expect(await deliveries(installationId, "account.strike_expired")).toBe(0);
    const later = new Date(Date.parse(strike.expiresAt) + 1_000);
    await sweepAccountNotices(env, later);
    const [expired] = await until(async () => {
      const log = (await receiverLog(subscribed)).filter((entry) => entry.type === "account.strike_expired" && entry.data.strikeId === strike.id);
      return log.length > 0 ? log : null;
    }, "the expiry");
    expect(expired!.data).toMatchObject({ decisionId: second.decisionId, points: 2, accountPoints: 0, subject: { kind: "content", id: "post-n2" }, expiredAt: strike.expiresAt });
    // Not to the action type's endpoint, which did not subscribe; and once, however often the sweep runs.
    expect((await receiverLog(applied)).some((entry) => entry.type === "account.strike_expired")).toBe(false);
    await sweepAccountNotices(env, later);
    await sweepAccountNotices(env, new Date(later.getTime() + 60_000));
    expect(await deliveries(installationId, "account.sanction_reversed")).toBe(2);
    expect(await deliveries(installationId, "account.strike_expired")).toBe(1);
    // The reversed strike never expires into a notice.
    expect((await env.DB.prepare(`SELECT expiry_notified_at AS at FROM strikes WHERE decision_id = ?1`).bind(first.decisionId).first<{ at: string | null }>())?.at).toBeNull();
  });
  it("tells no connector endpoint nor a disabled one of a reversal (a connector takes actions, not notices), and marks each sanction told", async () => {
    const { id: installationId, apiKey } = await newInstallation("account-notices-connector");
    const plain = "/ok/notices-plain";
    const plainEndpoint = await endpoint(apiKey, plain);
    const disabledEndpoint = await endpoint(apiKey, "/ok/notices-disabled");
    expect((await api(`/api/v1/webhook-endpoints/${disabledEndpoint}/disable`, { key: apiKey, method: "POST" })).status).toBe(200);
    const token = `mastodon-admin-${crypto.randomUUID()}`;
    await (env as unknown as { MASTODON_PEER: Fetcher }).MASTODON_PEER.fetch("http://mastodon.test/_control/token", { method: "POST", body: JSON.stringify({ token }) });
    const masto = await api("/api/v1/connectors", { key: apiKey, body: { kind: "mastodon", name: `m-${crypto.randomUUID()}`, baseUrl: "https://mastodon.test/", accessToken: token, retryBaseSeconds: 0, maxAttempts: 5 } });
    expect(masto.status, JSON.stringify(masto.body)).toBe(201);
    const byEndpoint: Record<string, string> = { suspend_on_mastodon: masto.body.endpointId, warn_quietly: disabledEndpoint, warn_user: plainEndpoint };
    for (const [key, endpointId] of Object.entries(byEndpoint)) expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId } })).status).toBe(201);
    // Three sanctions an appeal walked back, one per action type (as the appeal's resolution leaves them).
    const at = new Date().toISOString();
    await env.DB.batch(
      Object.keys(byEndpoint).map((actionType) =>
        env.DB.prepare(`INSERT INTO account_sanctions (id, installation_id, account_key, source, threshold, kind, action_type_key, state, run_id, created_at, updated_at)
            VALUES (?1, ?2, 'pk1_notices', 'ladder', 2, 'warning', ?3, 'reversed', ?4, ?5, ?5)`).bind(`san_${actionType}`, installationId, actionType, `run_${crypto.randomUUID()}`, at),
      ),
    );

    await sweepAccountNotices(env, new Date());
    // Only the plain endpoint that applied its sanction hears of it; every sanction is marked told.
    const written = await env.DB.prepare(`SELECT endpoint_id AS endpointId, source_id AS sourceId FROM webhook_deliveries WHERE installation_id = ?1 AND event_type = 'account.sanction_reversed'`)
      .bind(installationId)
      .all<{ endpointId: string; sourceId: string }>();
    expect(written.results).toEqual([{ endpointId: plainEndpoint, sourceId: `account_sanction:san_warn_user:reversed:${plainEndpoint}` }]);
    const [notice] = await until(async () => {
      const log = (await receiverLog(plain)).filter((entry) => entry.type === "account.sanction_reversed");
      return log.length > 0 ? log : null;
    }, "the plain endpoint's notice");
    expect(notice!.data).toMatchObject({ sanctionId: "san_warn_user", actionType: "warn_user" });
    expect(await deliveries(installationId, "account.sanction_reversed")).toBe(1);
    const unmarked = await env.DB.prepare(`SELECT COUNT(*) AS n FROM account_sanctions WHERE installation_id = ?1 AND reversal_notified_at IS NULL`).bind(installationId).first<{ n: number }>();
    expect(unmarked!.n).toBe(0);
    // No dead delivery, so no alert about one.
    expect((await env.DB.prepare(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND state = 'dead'`).bind(installationId).first<{ n: number }>())!.n).toBe(0);
  });
});
