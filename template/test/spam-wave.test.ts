// A coordinated spam wave in one sitting: the lead moderator pastes the wave's IP into the account
// search (a keyed hash; nothing decrypted), opens one account and its related accounts, dry-runs a
// bulk action over the ring's reported subjects, then acts: one decision per subject with its
// statement of reasons. Another installation's accounts with the same IP stay out of every step.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, newInstallation, until } from "./helpers";

describe("a spam wave in one sitting", () => {
  it("finds the ring by its IP, sees the related accounts, and acts on every reported subject of the ring with a dry run first", async () => {
    const { id: installationId, apiKey } = await newInstallation("spam-wave");
    const other = await newInstallation("spam-wave-other");
    const path = "/ok/spam-wave";
    const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove", endpointId: endpoint.body.id } })).status).toBe(201);
    expect((await api("/api/v1/strike-policy", { key: apiKey, method: "PUT", body: { categories: {}, expiryDays: 30, authorityMode: "autonomous", ladder: [] } })).status).toBe(200);

    const ip = `192.0.2.${Math.floor(Math.random() * 200) + 1}`;
    const ring = [0, 1, 2].map((i) => `ring-${i}-${crypto.randomUUID()}`);
    const file = (key: string, owner: string, subjectId: string, signals: Record<string, string>) =>
      api("/api/v1/reports", { key, body: { subject: { kind: "content", id: subjectId, ownerId: owner, signals }, category: "scams_and_fraud", description: "Cheap followers" } });
    for (const [i, owner] of ring.entries()) for (const n of [0, 1]) expect((await file(apiKey, owner, `wave-${i}-${n}`, { ip })).status).toBe(201);
    expect((await file(apiKey, `bystander-${crypto.randomUUID()}`, "bystander-post", { ip: "192.0.2.250" })).status).toBe(201);
    expect((await file(other.apiKey, `elsewhere-${crypto.randomUUID()}`, "elsewhere-post", { ip })).status).toBe(201);

    // The IP finds the ring's three accounts (by key), and nothing of the other installation.
    const found = await api(`/api/v1/search?type=account&q=${encodeURIComponent(ip)}`, { key: apiKey });
    expect(found.status, JSON.stringify(found.body)).toBe(200);
    expect(found.body.items).toHaveLength(3);
    for (const item of found.body.items) expect(item).toMatchObject({ type: "account", matchedBy: "ip", reportCount: 2 });
    expect(JSON.stringify(found.body)).not.toContain(ip);
    const opened = await api(`/api/v1/accounts/${found.body.items[0].id}`, { key: apiKey });
    expect(opened.status).toBe(200);
    expect(opened.body.related.count).toEqual({ ip: 2 });
    const ringKeys = [found.body.items[0].id, ...opened.body.related.items.map((r: any) => r.account)];
    expect(new Set(ringKeys).size).toBe(3);
    // The same IP in the other installation finds only its own account.
    expect((await api(`/api/v1/search?type=account&q=${encodeURIComponent(ip)}`, { key: other.apiKey })).body.items).toHaveLength(1);

    const reason = "Coordinated spam wave: fake follower offers from one IP.";
    const dry = await api("/api/v1/bulk-actions", { key: apiKey, body: { accounts: ringKeys, actionType: "remove_post", reason, dryRun: true } });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ subjects: 6, withCase: 6, withoutCase: 0, decisions: { outcome: "content_removed", restricts: true, subjects: 6 } });
    // Another installation's key names the ring in vain: its keys find none of its reports.
    const otherEndpoint = await api("/api/v1/webhook-endpoints", { key: other.apiKey, body: { url: "https://hooks.product.test/ok/spam-wave-other" } });
    expect((await api("/api/v1/action-types", { key: other.apiKey, body: { key: "remove_post", name: "Remove", endpointId: otherEndpoint.body.id } })).status).toBe(201);
    const foreign = await api("/api/v1/bulk-actions", { key: other.apiKey, body: { accounts: ringKeys, actionType: "remove_post", reason, dryRun: true } });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.code).toBe("bulk_action.invalid");

    const acted = await api("/api/v1/bulk-actions", { key: apiKey, body: { accounts: ringKeys, actionType: "remove_post", reason } });
    expect(acted.status, JSON.stringify(acted.body)).toBe(201);
    const done = await until(async () => {
      const read = (await api(`/api/v1/bulk-actions/${acted.body.id}`, { key: apiKey })).body;
      return read.decisions === 6 ? read : null;
    }, "six decisions");
    expect(done).toMatchObject({ total: 6, started: 6, transparencyDbStatements: 6 });
    const decided = await env.DB.prepare(`SELECT subject_id AS id FROM decisions WHERE installation_id = ?1 ORDER BY subject_id`).bind(installationId).all<{ id: string }>();
    expect(decided.results.map((d) => d.id)).toEqual(["wave-0-0", "wave-0-1", "wave-1-0", "wave-1-1", "wave-2-0", "wave-2-1"]);
    // The search touched personal data: on the record, with the fields it matched.
    const audited = await api("/api/v1/audit-events?action=search.personal_data_searched&limit=10", { key: apiKey });
    expect(audited.body.items.find((item: any) => item.details.via === undefined).details).toMatchObject({ type: "account", fields: ["account.id", "account.signals"], results: 3 });
    // So did naming the ring's accounts to the bulk action (the dry run and the real one).
    expect(
      audited.body.items
        .filter((item: any) => item.details.via === "bulk_action")
        .map((item: any) => item.details.dryRun)
        .sort(),
    ).toEqual([false, true]);
  });
});
