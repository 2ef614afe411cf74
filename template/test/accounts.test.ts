// Accounts and strikes: an account's history by the product's id of its owner; strikes from
// decisions walk the ladder warn → suspend (each rung's action delivered through its action type)
// and walk back when an appeal overturns a decision; DSA Art. 23(1): a suspension for manifestly
// illegal content is refused without a prior warning on record, and the transparency report
// counts Art. 23(1) suspensions apart; another installation's account is not found.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { installationDeleteStatements } from "../src/installations/backup";
import { personKey as personIndex } from "../src/lib/person-keys";
import { ADMIN_TOKEN, api, newInstallation, personKey, receiverLog, until, waitForRun } from "./helpers";

async function ladderSetup(path: string, policy: Record<string, unknown>) {
  return (await ladderInstallation(path, policy)).apiKey;
}

async function ladderInstallation(path: string, policy: Record<string, unknown>) {
  const installation = await newInstallation("accounts");
  const { apiKey } = installation;
  const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  expect(endpoint.status).toBe(201);
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
  for (const key of ["warn_user", "suspend_user"]) {
    const type = await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: endpoint.body.id } });
    expect(type.status).toBe(201);
  }
  const put = await api("/api/v1/strike-policy", { key: apiKey, method: "PUT", body: policy });
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  return installation;
}

async function reportAbout(apiKey: string, owner: string, subjectId: string) {
  const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: subjectId, ownerId: owner }, category: "scams_and_fraud", description: "A fake giveaway." } });
  expect(report.status).toBe(201);
  return report.body.id as string;
}

async function decide(apiKey: string, reportId: string, ground = "incompatible_content") {
  const decision = await api("/api/v1/decisions", {
    key: apiKey,
    body: {
      reportId,
      outcome: "removed",
      restrictions: { visibility: ["content_removed"] },
      statement: "The post ran a fake giveaway.",
      ground,
      ...(ground === "illegal_content" ? { legalGround: "Fraud offence under national criminal law" } : {}),
    },
  });
  expect(decision.status, JSON.stringify(decision.body)).toBe(201);
  return decision.body.id as string;
}

const account = async (apiKey: string, id: string) => {
  const read = await api(`/api/v1/accounts/${encodeURIComponent(id)}`, { key: apiKey });
  expect(read.status, JSON.stringify(read.body)).toBe(200);
  return read.body;
};

describe("the strike ladder", () => {
  it("walks warn → suspend across decisions, delivering each rung's action, and walks back when an appeal overturns a decision", async () => {
    const path = "/ok/accounts-ladder";
    const apiKey = await ladderSetup(path, {
      categories: { scams_and_fraud: { points: 2 } },
      expiryDays: 90,
      authorityMode: "autonomous",
      ladder: [
        { points: 4, actionType: "suspend_user" },
        { points: 2, actionType: "warn_user" },
      ],
    });
    const policy = await api("/api/v1/strike-policy", { key: apiKey });
    expect(policy.body.ladder.map((rung: any) => [rung.points, rung.kind])).toEqual([
      [2, "warning"],
      [4, "suspension"],
    ]);

    const owner = `owner-${crypto.randomUUID()}`;
    const first = await reportAbout(apiKey, owner, "post-1");
    await decide(apiKey, first);
    let view = await account(apiKey, owner);
    expect(view.id).toBe(owner);
    expect(view.reports.items.map((r: any) => r.id)).toEqual([first]);
    expect(view.strikes.points).toBe(2);
    expect(view.sanctions.items).toMatchObject([{ kind: "warning", actionType: "warn_user", threshold: 2, state: "started", art23: false }]);
    expect(view.restrictions).toEqual([]);

    const second = await reportAbout(apiKey, owner, "post-2");
    const overturned = await decide(apiKey, second);
    view = await account(apiKey, owner);
    expect(view.strikes.points).toBe(4);
    expect(view.decisions.items).toHaveLength(2);
    const suspension = view.sanctions.items.find((s: any) => s.kind === "suspension");
    expect(suspension).toMatchObject({ actionType: "suspend_user", threshold: 4, state: "started" });
    expect(view.restrictions).toContainEqual(expect.objectContaining({ source: "sanction", kind: "suspension", id: suspension.id }));

    // Each rung's action went out through its action type, as any action does (signed, verified).
    const delivered = await until(async () => {
      const log = await receiverLog(path);
      const types = log.filter((entry) => entry.type === "action.execute").map((entry) => entry.data.actionType);
      return types.includes("warn_user") && types.includes("suspend_user") ? log : null;
    }, "both ladder actions delivered");
    const sent = delivered.find((entry) => entry.data.actionType === "suspend_user")!;
    expect(sent.verified).toBe(true);
    expect(sent.data).toMatchObject({ reportId: second, subject: { kind: "content", id: "post-2" }, params: { scope: "account", kind: "suspension", threshold: 4, sanctionId: suspension.id } });
    // Once applied, the suspension is recorded as a decision restricting the account (its statement of
    // reasons, DSA Art. 17), which gives no strike of its own.
    const suspended = await until(async () => (await api(`/api/v1/decisions?reportId=${second}`, { key: apiKey })).body.items?.find((d: any) => d.outcome === "account_suspended"), "the suspension's decision");
    expect(suspended).toMatchObject({ restrictions: { account: "suspended" }, restricts: true });
    expect((await api(`/api/v1/decisions/${suspended.id}/statement-of-reasons`, { key: apiKey })).status).toBe(200);
    expect((await account(apiKey, owner)).strikes.points).toBe(4);
    // The account's id never enters a run's input (runs hold plaintext): the product finds the owner of the subject.
    const runInput = await env.DB.prepare(`SELECT input_json AS input FROM workflow_runs WHERE id = ?1`).bind(suspension.runId).first<{ input: string }>();
    expect(runInput!.input).not.toContain(owner);

    // The appeal overturns the second decision: its strike is reversed and the suspension walked back.
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { decisionId: overturned, reason: "It was satire." } });
    expect(appeal.status).toBe(201);
    const resolved = await api(`/api/v1/appeals/${appeal.body.appeal?.id ?? appeal.body.id}/resolve`, { key: await personKey(apiKey), body: { outcome: "overturned" } });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    view = await account(apiKey, owner);
    expect(view.strikes.points).toBe(2);
    expect(view.strikes.items.find((s: any) => s.decisionId === overturned).state).toBe("reversed");
    expect(view.sanctions.items.find((s: any) => s.id === suspension.id).state).toBe("reversed");
    expect(view.sanctions.items.find((s: any) => s.kind === "warning").state).toBe("started");
    expect(view.restrictions).toEqual([]);
    expect(view.decisions.items.find((d: any) => d.id === overturned).reversed).toBe(true);
    expect(view.appeals.items).toHaveLength(1);

    // A new decision climbs the ladder again: a new suspension, not the reversed one.
    await decide(apiKey, await reportAbout(apiKey, owner, "post-3"));
    view = await account(apiKey, owner);
    expect(view.strikes.points).toBe(4);
    expect(view.sanctions.items.filter((s: any) => s.kind === "suspension").map((s: any) => s.state)).toEqual(["started", "reversed"]);
  });
});

describe("DSA Art. 23(1)", () => {
  it("refuses a suspension for manifestly illegal content without a prior warning on record, and counts Art. 23(1) suspensions apart", async () => {
    const apiKey = await ladderSetup("/ok/accounts-art23", {
      categories: { scams_and_fraud: { points: 5 } },
      expiryDays: 90,
      authorityMode: "assisted",
      ladder: [{ points: 5, actionType: "suspend_user" }],
    });
    const owner = `owner-${crypto.randomUUID()}`;
    const reportId = await reportAbout(apiKey, owner, "post-illegal");
    await decide(apiKey, reportId, "illegal_content");
    // The ladder reached a suspension for manifestly illegal content: refused, no action started.
    let view = await account(apiKey, owner);
    expect(view.strikes.items).toMatchObject([{ manifestlyIllegal: true, points: 5 }]);
    expect(view.sanctions.items).toMatchObject([{ kind: "suspension", art23: true, state: "refused", refusalCode: "account.art23_warning_required", runId: null }]);

    // A person's suspension is refused with a typed error, and nothing is written.
    const refused = await api(`/api/v1/accounts/${owner}/sanctions`, { key: apiKey, body: { actionType: "suspend_user", manifestlyIllegal: true, reason: "Repeated illegal offers." } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("account.art23_warning_required");
    expect((await account(apiKey, owner)).sanctions.items).toHaveLength(1);

    // The server decides what is an Art. 23(1) suspension: the account's counting strike for
    // manifestly illegal content, and the action type's kind, whatever the client says.
    for (const body of [{ actionType: "suspend_user" }, { actionType: "suspend_user", kind: "restriction" }, { actionType: "suspend_user", kind: "warning", manifestlyIllegal: false }]) {
      const sneaked = await api(`/api/v1/accounts/${owner}/sanctions`, { key: apiKey, body: { ...body, reason: "Repeated illegal offers." } });
      expect(sneaked.status, JSON.stringify(body)).toBe(409);
      expect(sneaked.body.error.code).toBe("account.art23_warning_required");
    }

    // A warning whose action still waits for approval was not given: it does not count.
    const warning = await api(`/api/v1/accounts/${owner}/sanctions`, { key: apiKey, body: { actionType: "warn_user", reason: "First warning." } });
    expect(warning.status, JSON.stringify(warning.body)).toBe(201);
    expect(warning.body).toMatchObject({ kind: "warning", state: "started", source: "manual" });
    const early = await api(`/api/v1/accounts/${owner}/sanctions`, { key: apiKey, body: { actionType: "suspend_user", reason: "Repeated illegal offers." } });
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe("account.art23_warning_required");

    // Once the warning's action was approved and delivered (its run succeeded), the suspension goes ahead (assisted: its action waits for approval).
    const warned = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items?.find((p: any) => p.runId === warning.body.runId), "the warning's proposal");
    const approved = await api(`/api/v1/action-proposals/${warned.id}/approve`, { key: apiKey, body: { approver: "lead-mod", reason: "warn first" } });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    expect((await waitForRun(apiKey, warning.body.runId)).state).toBe("succeeded");
    const suspended = await api(`/api/v1/accounts/${owner}/sanctions`, { key: apiKey, body: { actionType: "suspend_user", manifestlyIllegal: true, reason: "Repeated illegal offers." } });
    expect(suspended.status, JSON.stringify(suspended.body)).toBe(201);
    expect(suspended.body).toMatchObject({ kind: "suspension", art23: true, state: "started" });
    const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items?.find((p: any) => p.runId === suspended.body.runId), "the suspension's proposal");
    expect(proposal).toMatchObject({ actionType: "suspend_user", authorityMode: "assisted" });
    view = await account(apiKey, owner);
    expect(view.restrictions).toContainEqual(expect.objectContaining({ source: "sanction", kind: "suspension" }));

    const report = await api("/api/v1/transparency-report", { key: apiKey });
    expect(report.status).toBe(200);
    expect(report.body.sections.suspensions.manifestlyIllegalContent).toEqual({ suspensions: 1, refusedWithoutPriorWarning: 1 });
  });
});

describe("tenancy", () => {
  it("another installation's account is not found, and nothing of it is told", async () => {
    const apiKey = await ladderSetup("/ok/accounts-tenancy", { categories: { scams_and_fraud: { points: 1 } }, expiryDays: 30, ladder: [] });
    const owner = `owner-${crypto.randomUUID()}`;
    await decide(apiKey, await reportAbout(apiKey, owner, "post-t"));
    expect((await account(apiKey, owner)).strikes.points).toBe(1);
    const other = await newInstallation("accounts-other");
    const foreign = await api(`/api/v1/accounts/${owner}`, { key: other.apiKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("account.not_found");
    const sanction = await api(`/api/v1/accounts/${owner}/sanctions`, { key: other.apiKey, body: { actionType: "warn_user", reason: "x" } });
    expect(sanction.status).toBe(404);
  });
});

describe("related accounts", () => {
  it("lists the accounts that share a signal, with counts and first/last seen, keeping the signals only as keyed hashes and never across installations", async () => {
    const { id: installationId, apiKey } = await newInstallation("accounts-related");
    const other = await newInstallation("accounts-related-other");
    const ip = `203.0.113.${Math.floor(Math.random() * 200) + 1}`;
    const device = `device-${crypto.randomUUID()}`;
    const owners = [`spammer-${crypto.randomUUID()}`, `spammer-${crypto.randomUUID()}`, `spammer-${crypto.randomUUID()}`];
    const file = (key: string, owner: string, subjectId: string, signals: Record<string, string>) =>
      api("/api/v1/reports", { key, body: { subject: { kind: "content", id: subjectId, ownerId: owner, signals }, category: "scams_and_fraud" } });
    expect((await file(apiKey, owners[0]!, "r-1", { ip, deviceId: device })).status).toBe(201);
    expect((await file(apiKey, owners[1]!, "r-2", { ip: ` ${ip.toUpperCase()} `, deviceId: device })).status).toBe(201);
    expect((await file(apiKey, owners[2]!, "r-3", { ip })).status).toBe(201);
    expect((await file(apiKey, owners[0]!, "r-4", { ip })).status).toBe(201);
    // Another installation's account with the very same signals.
    expect((await file(other.apiKey, `elsewhere-${crypto.randomUUID()}`, "r-x", { ip, deviceId: device })).status).toBe(201);

    const view = await account(apiKey, owners[0]!);
    expect(view.related.signals).toMatchObject({ ip: { count: 1 }, device: { count: 1 } });
    expect(view.related.count).toEqual({ ip: 2, device: 1 });
    expect(view.related.items).toHaveLength(2);
    const [closest, next] = view.related.items;
    expect(closest).toMatchObject({ shared: { ip: 1, device: 1 }, sharedSignals: 2 });
    expect(next).toMatchObject({ shared: { ip: 1 }, sharedSignals: 1 });
    // A related account opens by its key (its id is not stored).
    const opened = await account(apiKey, closest.account);
    expect(opened.reports.items.map((r: any) => r.subject.id)).toEqual(["r-2"]);
    expect((await api(`/api/v1/accounts/${closest.account}`, { key: other.apiKey })).status).toBe(404);

    const rows = await env.DB.prepare(`SELECT * FROM account_signals WHERE installation_id = ?1`).bind(installationId).all();
    expect(rows.results.length).toBe(5);
    const atRest = JSON.stringify(rows.results);
    for (const value of [ip, device, ...owners]) expect(atRest).not.toContain(value);
    const otherView = await api(`/api/v1/accounts/${owners[0]}`, { key: other.apiKey });
    expect(otherView.status).toBe(404);
  });
});

describe("who may read an account", () => {
  async function raw(path: string, init: RequestInit = {}) {
    return (exports as any).default.fetch(new Request(`http://safest.test${path}`, { redirect: "manual", ...init })) as Promise<Response>;
  }
  async function signIn(installationId: string, email: string, role: string) {
    const link = await api("/api/v1/console-signin-links", { key: "test-admin-token", body: { installationId, email, role } });
    expect(link.status).toBe(201);
    const cookie = (await raw(link.body.path)).headers.get("set-cookie")!.split(";")[0]!;
    return async (path: string) => {
      const response = await raw(path, { headers: { cookie } });
      return { status: response.status, body: (await response.json()) as any };
    };
  }

  it("needs personal_data:read (or admin), as an account search does, and refuses a console user limited to some queues", async () => {
    const { id: installationId, apiKey } = await newInstallation("accounts-readers");
    const owner = `owner-${crypto.randomUUID()}`;
    await reportAbout(apiKey, owner, "post-r");
    expect((await account(apiKey, owner)).reports.total).toBe(1);

    const keyWith = async (scopes: string[]) => (await api("/api/v1/api-keys", { key: apiKey, body: { name: scopes.join("+"), scopes } })).body.apiKey as string;
    for (const scopes of [["read"], ["review"]]) {
      const refused = await api(`/api/v1/accounts/${owner}`, { key: await keyWith(scopes) });
      expect(refused.status, scopes.join()).toBe(403);
      expect(refused.body.error.code).toBe("auth.scope_missing");
    }
    const allowed = await api(`/api/v1/accounts/${owner}`, { key: await keyWith(["review", "personal_data:read"]) });
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);

    // A sanction's refusals do not tell a `review` key (no personal_data:read) whether a person was
    // reported: an unknown action type is refused first, the same for an account never reported.
    const reviewer = await keyWith(["review"]);
    for (const who of [owner, `never-reported-${crypto.randomUUID()}`]) {
      const probe = await api(`/api/v1/accounts/${who}/sanctions`, { key: reviewer, body: { actionType: "no_such_type", reason: "probe" } });
      expect(probe.status, who).toBe(404);
      expect(probe.body.error.code, who).toBe("action_type.not_found");
    }

    const viewer = await signIn(installationId, `viewer-${crypto.randomUUID().slice(0, 6)}@example.org`, "viewer");
    expect((await viewer(`/api/v1/accounts/${owner}`)).status).toBe(403);

    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `q-${crypto.randomUUID().slice(0, 8)}`, slaSeconds: 3600 } });
    const email = `mod-${crypto.randomUUID().slice(0, 6)}@example.org`;
    expect((await api("/api/v1/console-users", { key: apiKey, body: { email, role: "moderator", queueIds: [queue.body.id] } })).status).toBe(201);
    const limited = await signIn(installationId, email, "moderator");
    const read = await limited(`/api/v1/accounts/${owner}`);
    expect(read.status).toBe(403);
    expect(read.body.error.code).toBe("account.queue_limited");
    const searched = await limited(`/api/v1/search?type=account&q=${owner}`);
    expect(searched.status).toBe(403);
    expect(searched.body.error.code).toBe("search.queue_limited");
    const listed = await limited(`/api/v1/search?type=report`);
    expect(listed.status).toBe(403);
    expect(listed.body.error.code).toBe("search.queue_limited");
  });
});

describe("a person's erasure", () => {
  it("exports their account's strikes and sanctions, and erasing them unlinks the account: it no longer answers", async () => {
    const apiKey = await ladderSetup("/ok/accounts-erasure", { categories: { scams_and_fraud: { points: 1 } }, expiryDays: 30, authorityMode: "autonomous", ladder: [{ points: 1, actionType: "warn_user" }] });
    const owner = `owner-${crypto.randomUUID()}`;
    await decide(apiKey, await reportAbout(apiKey, owner, "post-e"));
    // The warning's run is done before the erasure (a case with work under way is held back).
    const runId = await until(async () => (await account(apiKey, owner)).sanctions.items[0]?.runId ?? null, "the warning's run");
    expect((await waitForRun(apiKey, runId)).state).toBe("succeeded");
    const before = await account(apiKey, owner);
    expect(before.strikes.items).toHaveLength(1);
    expect(before.sanctions.items).toHaveLength(1);

    const exported = await api("/api/v1/personal-data/export", { key: apiKey, body: { subjectOwner: { id: owner } } });
    expect(exported.status, JSON.stringify(exported.body)).toBe(200);
    expect(exported.body.account.strikes).toMatchObject([{ id: before.strikes.items[0].id, points: 1, manifestlyIllegal: false }]);
    expect(exported.body.account.sanctions).toMatchObject([{ id: before.sanctions.items[0].id, kind: "warning", actionType: "warn_user" }]);

    const erased = await api("/api/v1/personal-data/erase", { key: apiKey, body: { subjectOwner: { id: owner } } });
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    expect(erased.body.held.reports).toBe(0);
    const gone = await api(`/api/v1/accounts/${owner}`, { key: apiKey });
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe("account.not_found");
    const key = await env.DB.prepare(`SELECT COUNT(*) AS n FROM strikes WHERE id = ?1 AND account_key LIKE 'pk1_%'`).bind(before.strikes.items[0].id).first<{ n: number }>();
    expect(key?.n).toBe(0);
    expect((await api("/api/v1/personal-data/export", { key: apiKey, body: { subjectOwner: { id: owner } } })).body.account).toEqual({ strikes: [], sanctions: [] });
  });

  it("a backup taken before the erasure, once restored, gets the account side erased again: its signals gone, its strikes and sanctions unlinked", async () => {
    const { id: installationId, apiKey } = await ladderInstallation("/ok/accounts-erasure-restore", {
      categories: { scams_and_fraud: { points: 1 } },
      expiryDays: 30,
      authorityMode: "autonomous",
      ladder: [{ points: 1, actionType: "warn_user" }],
    });
    const owner = `owner-${crypto.randomUUID()}`;
    const filed = await api("/api/v1/reports", {
      key: apiKey,
      body: { subject: { kind: "content", id: "post-restore", ownerId: owner, signals: { ip: "203.0.113.77", deviceId: "device-restore" } }, category: "scams_and_fraud", description: "A fake giveaway." },
    });
    expect(filed.status).toBe(201);
    await decide(apiKey, filed.body.id);
    const runId = await until(async () => (await account(apiKey, owner)).sanctions.items[0]?.runId ?? null, "the warning's run");
    expect((await waitForRun(apiKey, runId)).state).toBe("succeeded");
    const key = personIndex(installationId, owner, env)!;
    const accountRows = async () =>
      (await env.DB.prepare(
        `SELECT (SELECT COUNT(*) FROM account_signals WHERE installation_id = ?1 AND account_key = ?2) AS signals, (SELECT COUNT(*) FROM strikes WHERE installation_id = ?1 AND account_key = ?2) AS strikes, (SELECT COUNT(*) FROM account_sanctions WHERE installation_id = ?1 AND account_key = ?2) AS sanctions`,
      )
        .bind(installationId, key)
        .first())!;
    expect(await accountRows()).toEqual({ signals: 2, strikes: 1, sanctions: 1 });
    const backup = await api("/api/v1/installation/export", { key: apiKey, method: "POST" });
    expect(backup.status).toBe(200);

    const erased = await api("/api/v1/personal-data/erase", { key: apiKey, body: { subjectOwner: { id: owner } } });
    expect(erased.status, JSON.stringify(erased.body)).toBe(200);
    expect(await accountRows()).toEqual({ signals: 0, strikes: 0, sanctions: 0 });

    // The installation is lost and the backup from before the erasure restored.
    await env.DB.batch(installationDeleteStatements(env.DB, installationId));
    await env.AUDIT_ANCHORS.delete(`audit/${installationId}/head.json`);
    const restored = await api("/api/v1/installations/import", { key: ADMIN_TOKEN, body: backup.body });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    expect(restored.body.erasuresReapplied).toMatchObject({ people: 1, reports: 1 });
    expect(await accountRows()).toEqual({ signals: 0, strikes: 0, sanctions: 0 });
    const gone = await api(`/api/v1/accounts/${owner}`, { key: apiKey });
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe("account.not_found");
  });
});
