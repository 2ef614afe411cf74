// The Mastodon connector against a peer Worker speaking Mastodon's documented admin
// webhook payloads and admin API (test/peers/mastodon.ts, host mastodon.test): signed
// report.created in, X-Hub-Signature checked, tenancy, and action types delivered through the
// admin API with the bearer token, a 422 dead-lettered and a 503 retried like any webhook.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, until, waitForRun } from "./helpers";

const peer = (env as unknown as { MASTODON_PEER: Fetcher }).MASTODON_PEER;

type Call = { method: string; path: string; form: Record<string, string>; authorization: string | null; status: number };

async function peerLog(token: string): Promise<Call[]> {
  return (await (await peer.fetch(`http://mastodon.test/_control/log?token=${encodeURIComponent(token)}`)).json()) as Call[];
}

async function connector(apiKey: string, extra: Record<string, unknown> = {}) {
  const token = `mastodon-admin-${crypto.randomUUID()}`;
  await peer.fetch("http://mastodon.test/_control/token", { method: "POST", body: JSON.stringify({ token }) });
  const created = await api("/api/v1/connectors", { key: apiKey, body: { kind: "mastodon", name: `m-${crypto.randomUUID()}`, baseUrl: "https://mastodon.test/", accessToken: token, retryBaseSeconds: 0, maxAttempts: 5, ...extra } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return { ...(created.body as { id: string; endpointId: string; webhookPath: string; webhookUrl: string; webhookSecret: string; baseUrl: string }), token };
}

/** The documented report.created payload and its X-Hub-Signature, made by the peer under `secret`. */
async function signedReport(secret: string, query: Record<string, string> = {}): Promise<{ body: string; signature: string }> {
  const params = new URLSearchParams({ secret, ...query });
  return (await (await peer.fetch(`http://mastodon.test/_control/report-created?${params}`)).json()) as { body: string; signature: string };
}

function deliver(path: string, body: string, signature?: string) {
  return api(path, { method: "POST", body, headers: signature === undefined ? {} : { "x-hub-signature": signature } });
}

describe("Mastodon report.created intake", () => {
  it("a signed report with one status becomes one report with the status as subject, sealed; a replay is the same report", async () => {
    const { apiKey } = await newInstallation("mastodon-one");
    const m = await connector(apiKey);
    expect(m.webhookSecret).toMatch(/^[0-9a-f]{64}$/u);
    expect(m.webhookUrl).toBe(`http://safest.test/api/v1/connectors/${m.id}/mastodon/webhook`);
    expect(m.baseUrl).toBe("https://mastodon.test");
    const signed = await signedReport(m.webhookSecret, { id: "9001", statuses: "1", category: "violation", comment: "This post is a scam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    expect(taken.body).toMatchObject({ accepted: true, event: "report.created", replayed: false });

    const report = await api(`/api/v1/reports/${taken.body.reportId}`, { key: apiKey });
    expect(report.body).toMatchObject({
      category: "other_violation_tc",
      source: "notice",
      subject: { kind: "content", id: "mastodon:mastodon.test:status:12300000000000001", url: "https://someothermastodonsite.com/@cheeseperson/111301083360371620", ownerId: "mastodon:mastodon.test:account:123454321" },
      description: "This post is a scam",
      reporter: { known: true },
    });
    expect(report.body.subject.snapshot).toMatchObject({ source: "mastodon", report: { id: "9001", category: "violation", forwarded: true }, account: { id: "123454321", acct: "cheeseperson@someothermastodonsite.com" } });
    expect(report.body.subject.snapshot.statuses).toHaveLength(1);
    // The reporting account's e-mail and IP never leave the payload; who reported is sealed.
    expect(JSON.stringify(report.body)).not.toContain("bobisaburger@mail.example");
    expect(JSON.stringify(report.body)).not.toContain("12.34.56.78");
    const revealed = await api(`/api/v1/reports/${taken.body.reportId}/reveal-reporter`, { key: apiKey, body: { reason: "check the connector" } });
    expect(revealed.body.reporter.id).toBe("mastodon:mastodon.test:account:123456789");
    const row = await env.DB.prepare("SELECT personal_data FROM reports WHERE id = ?1").bind(taken.body.reportId).first<{ personal_data: string }>();
    expect(row!.personal_data).not.toContain("123456789");
    expect(row!.personal_data).not.toContain("scam");

    const replay = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ reportId: taken.body.reportId, replayed: true });
    const count = await env.DB.prepare("SELECT COUNT(*) AS n FROM reports r JOIN connector_reports c ON c.report_id = r.id WHERE c.connector_id = ?1").bind(m.id).first<{ n: number }>();
    expect(count!.n).toBe(1);
    const audit = await api("/api/v1/audit-events?limit=200", { key: apiKey });
    expect(audit.body.items.map((e: any) => e.action)).toEqual(expect.arrayContaining(["connector.created", "report.received", "connector.report_received"]));
  });

  it("a report naming several statuses makes the account the subject with the statuses in the snapshot; a mapped rule sets the category", async () => {
    const { apiKey } = await newInstallation("mastodon-several");
    const m = await connector(apiKey, { rules: { "2": "illegal_or_harmful_speech" } });
    const signed = await signedReport(m.webhookSecret, { id: "9002", statuses: "3", category: "violation", rules: "1,2" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    const report = await api(`/api/v1/reports/${taken.body.reportId}`, { key: apiKey });
    expect(report.body).toMatchObject({ category: "illegal_or_harmful_speech", subject: { kind: "account", id: "mastodon:mastodon.test:account:123454321", url: "https://someothermastodonsite.com/@cheeseperson" } });
    expect(report.body.subject.snapshot.statuses.map((s: any) => s.id)).toEqual(["12300000000000001", "12300000000000002", "12300000000000003"]);
    expect(report.body.subject.snapshot.report.ruleIds).toEqual(["1", "2"]);
  });

  it("an account-only report makes the account the subject; Mastodon's spam maps to scams_and_fraud; other events are acknowledged and ignored", async () => {
    const { apiKey } = await newInstallation("mastodon-account");
    const m = await connector(apiKey);
    const signed = await signedReport(m.webhookSecret, { id: "9003", statuses: "0", category: "spam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status).toBe(201);
    const report = await api(`/api/v1/reports/${taken.body.reportId}`, { key: apiKey });
    expect(report.body).toMatchObject({ category: "scams_and_fraud", subject: { kind: "account", id: "mastodon:mastodon.test:account:123454321" } });
    expect(report.body.subject.snapshot.statuses).toEqual([]);

    const other = await signedReport(m.webhookSecret, { event: "account.created" });
    const ignored = await deliver(m.webhookPath, other.body, other.signature);
    expect(ignored.status).toBe(200);
    expect(ignored.body).toMatchObject({ accepted: true, event: "account.created", ignored: true, reportId: null });
  });

  it("a bad or missing signature is refused with 401 connector.bad_signature and takes in nothing", async () => {
    const { apiKey } = await newInstallation("mastodon-signature");
    const m = await connector(apiKey);
    const wrong = await signedReport("not-the-connector-secret-at-all", { id: "9004" });
    const genuine = await signedReport(m.webhookSecret, { id: "9004" });
    const attempts = [
      await deliver(m.webhookPath, wrong.body, wrong.signature),
      await deliver(m.webhookPath, genuine.body),
      await deliver(m.webhookPath, genuine.body.replace("9004", "9005"), genuine.signature),
      await deliver(m.webhookPath, genuine.body, genuine.signature.replace("sha256=", "sha1=")),
      await deliver(m.webhookPath, genuine.body, "sha256=zz"),
    ];
    for (const refused of attempts) {
      expect(refused.status).toBe(401);
      expect(refused.body.error.code).toBe("connector.bad_signature");
    }
    const count = await env.DB.prepare("SELECT COUNT(*) AS n FROM connector_reports WHERE connector_id = ?1").bind(m.id).first<{ n: number }>();
    expect(count!.n).toBe(0);
    const reports = await env.DB.prepare("SELECT COUNT(*) AS n FROM reports WHERE installation_id = (SELECT installation_id FROM connectors WHERE id = ?1)").bind(m.id).first<{ n: number }>();
    expect(reports!.n).toBe(0);
  });

  it("another installation's connector is a 404; secrets are never returned; a deleted connector's URL is a 404", async () => {
    const a = await newInstallation("mastodon-a");
    const b = await newInstallation("mastodon-b");
    const m = await connector(a.apiKey);
    for (const method of ["GET", "DELETE"]) {
      const foreign = await api(`/api/v1/connectors/${m.id}`, { method, key: b.apiKey });
      expect(foreign.status).toBe(404);
      expect(foreign.body.error.code).toBe("connector.not_found");
    }
    expect((await api("/api/v1/connectors", { key: b.apiKey })).body.items).toEqual([]);
    const listed = await api("/api/v1/connectors", { key: a.apiKey });
    expect(listed.body.items.map((c: any) => c.id)).toEqual([m.id]);
    const read = await api(`/api/v1/connectors/${m.id}`, { key: a.apiKey });
    for (const body of [listed.body, read.body]) {
      expect(JSON.stringify(body)).not.toContain(m.token);
      expect(JSON.stringify(body)).not.toContain(m.webhookSecret);
    }
    const sealed = await env.DB.prepare("SELECT access_token_sealed AS t, webhook_secret_sealed AS s FROM connectors WHERE id = ?1").bind(m.id).first<{ t: string; s: string }>();
    expect(sealed!.t).not.toContain(m.token);
    expect(sealed!.s).not.toContain(m.webhookSecret);

    const unknown = await signedReport(m.webhookSecret, { id: "9006" });
    const nowhere = await deliver("/api/v1/connectors/con_doesnotexist/mastodon/webhook", unknown.body, unknown.signature);
    expect(nowhere.status).toBe(404);
    expect(nowhere.body.error.code).toBe("connector.not_found");

    const deleted = await api(`/api/v1/connectors/${m.id}`, { method: "DELETE", key: a.apiKey });
    expect(deleted.status).toBe(200);
    expect(deleted.body.state).toBe("deleted");
    const after = await deliver(m.webhookPath, unknown.body, unknown.signature);
    expect(after.status).toBe(404);
    expect((await api(`/api/v1/connectors/${m.id}`, { key: a.apiKey })).status).toBe(404);
    const endpoint = (await api("/api/v1/webhook-endpoints", { key: a.apiKey })).body.items.find((e: any) => e.id === m.endpointId);
    expect(endpoint.state).toBe("disabled");
  });
});

/** On every report from Mastodon: suspend the account (with a text), then resolve the report. */
const suspendGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "suspend", kind: "action", errorPort: "failed", config: { action_type: "mastodon.suspend", approval_timeout_seconds: 3600 }, inputMapping: { text: "'Suspended for ' + report.category" } },
    { id: "resolve", kind: "action", errorPort: "failed", config: { action_type: "close_report", approval_timeout_seconds: 3600 }, inputMapping: {} },
    { id: "done", kind: "end", config: { terminal_code: "applied" } },
    { id: "stopped", kind: "end", config: { terminal_code: "stopped" } },
    { id: "failed", kind: "end", config: { terminal_code: "failed" } },
  ],
  edges: [
    edge("start", "success", "suspend"),
    edge("suspend", "applied", "resolve"),
    edge("suspend", "rejected", "stopped"),
    edge("suspend", "expired", "stopped"),
    edge("suspend", "failed", "failed"),
    edge("resolve", "applied", "done"),
    edge("resolve", "rejected", "stopped"),
    edge("resolve", "expired", "stopped"),
    edge("resolve", "failed", "failed"),
  ],
};

async function actionSetup(label: string) {
  const { apiKey } = await newInstallation(`mastodon-${label}`);
  const m = await connector(apiKey, { actions: { close_report: "resolve" } });
  for (const [key, name] of [
    ["mastodon.suspend", "Suspend on Mastodon"],
    ["close_report", "Resolve the Mastodon report"],
  ]) {
    const type = await api("/api/v1/action-types", { key: apiKey, body: { key, name, endpointId: m.endpointId } });
    expect(type.status, JSON.stringify(type.body)).toBe(201);
  }
  // An action type on the connector whose key maps to nothing is shown as such.
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "ban_forever", name: "Not a Mastodon action", endpointId: m.endpointId } })).status).toBe(201);
  const read = await api(`/api/v1/connectors/${m.id}`, { key: apiKey });
  expect(read.body.actionTypes.map((t: any) => [t.key, t.mastodonAction])).toEqual([
    ["ban_forever", null],
    ["close_report", "resolve"],
    ["mastodon.suspend", "suspend"],
  ]);
  const version = await publish(apiKey, suspendGraph);
  const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status, JSON.stringify(trigger.body)).toBe(201);
  return { apiKey, m };
}

async function reportRun(apiKey: string, m: { webhookPath: string; webhookSecret: string }, remoteId: string) {
  const signed = await signedReport(m.webhookSecret, { id: remoteId, statuses: "2", category: "spam" });
  const taken = await deliver(m.webhookPath, signed.body, signed.signature);
  expect(taken.status, JSON.stringify(taken.body)).toBe(201);
  expect(taken.body.runs).toBe(1);
  const run = await until(async () => (await api(`/api/v1/runs?limit=5`, { key: apiKey })).body.items?.[0], "the triggered run");
  return { reportId: taken.body.reportId as string, run: await waitForRun(apiKey, run.id) };
}

describe("action types delivered through the Mastodon admin API", () => {
  it("suspends the reported account with the report and the text, then resolves the report, with the connector's bearer token", async () => {
    const { apiKey, m } = await actionSetup("deliver");
    const { run } = await reportRun(apiKey, m, "7001");
    expect(run.output.terminalCode).toBe("applied");
    const calls = await peerLog(m.token);
    expect(calls.map((call) => `${call.method} ${call.path} ${call.status}`)).toEqual(["POST /api/v1/admin/accounts/123454321/action 200", "POST /api/v1/admin/reports/7001/resolve 200"]);
    expect(calls[0]!.form).toEqual({ type: "suspend", report_id: "7001", text: "Suspended for scams_and_fraud", send_email_notification: "false" });
    expect(calls.every((call) => call.authorization === `Bearer ${m.token}`)).toBe(true);
    const deliveries = (await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}`, { key: apiKey })).body.items;
    expect(deliveries.map((d: any) => [d.eventType, d.state, d.attempts])).toEqual([
      ["action.execute", "delivered", 1],
      ["action.execute", "delivered", 1],
    ]);
  });

  it("in assisted mode nothing reaches Mastodon until a reviewer approves; then the account is suspended", async () => {
    const { apiKey } = await newInstallation("mastodon-assisted");
    const m = await connector(apiKey, { actions: { close_report: "resolve" }, notifyByEmail: true });
    for (const key of ["mastodon.suspend", "close_report"]) expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: m.endpointId } })).status).toBe(201);
    const version = await publish(apiKey, suspendGraph);
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "assisted" } })).status).toBe(201);
    const signed = await signedReport(m.webhookSecret, { id: "7010", statuses: "1", category: "spam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status).toBe(201);
    const pending = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items?.[0], "the suspension proposal");
    expect(pending).toMatchObject({ actionType: "mastodon.suspend", reportId: taken.body.reportId });
    expect(await peerLog(m.token)).toEqual([]);
    expect((await api(`/api/v1/action-proposals/${pending.id}/approve`, { key: apiKey, body: { approver: "lead-mod" } })).status).toBe(200);
    const resolve = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key: apiKey })).body.items?.find((p: any) => p.actionType === "close_report"), "the resolve proposal");
    expect((await api(`/api/v1/action-proposals/${resolve.id}/approve`, { key: apiKey, body: { approver: "lead-mod" } })).status).toBe(200);
    const run = await waitForRun(apiKey, (await api("/api/v1/runs?limit=5", { key: apiKey })).body.items[0].id);
    expect(run.output.terminalCode).toBe("applied");
    const calls = await peerLog(m.token);
    expect(calls.map((call) => `${call.path} ${call.status}`)).toEqual(["/api/v1/admin/accounts/123454321/action 200", "/api/v1/admin/reports/7010/resolve 200"]);
    expect(calls[0]!.form).toMatchObject({ type: "suspend", report_id: "7010", send_email_notification: "true" });
  });

  it("a 422 from Mastodon is dead-lettered at once and the run takes its error path", async () => {
    const { apiKey, m } = await actionSetup("unprocessable");
    await peer.fetch("http://mastodon.test/_control/plan", { method: "POST", body: JSON.stringify({ token: m.token, plan: [{ status: 422 }] }) });
    const { run } = await reportRun(apiKey, m, "7002");
    expect(run.output.terminalCode).toBe("failed");
    expect(run.steps.find((s: any) => s.nodeId === "suspend").errorCode).toBe("action.delivery_failed");
    const [delivery] = (await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}`, { key: apiKey })).body.items;
    const detail = await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey });
    expect(detail.body).toMatchObject({ state: "dead", attempts: 1, lastStatus: 422 });
    expect((await peerLog(m.token)).map((call) => call.status)).toEqual([422]);
  });

  it("a 503 from Mastodon is retried with the endpoint's backoff, then delivered once", async () => {
    const { apiKey, m } = await actionSetup("unavailable");
    await peer.fetch("http://mastodon.test/_control/plan", { method: "POST", body: JSON.stringify({ token: m.token, plan: [{ status: 503 }, { status: 503 }] }) });
    const { run } = await reportRun(apiKey, m, "7003");
    expect(run.output.terminalCode).toBe("applied");
    const deliveries = (await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}`, { key: apiKey })).body.items;
    // Delivery ids are random: the suspension's is the one whose source (its proposal) is the suspend node's.
    const suspend = deliveries.find((d: any) => d.sourceId.includes("suspend"));
    expect(deliveries).toHaveLength(2);
    const detail = await api(`/api/v1/webhook-deliveries/${suspend.id}`, { key: apiKey });
    expect(detail.body).toMatchObject({ state: "delivered", attempts: 3 });
    expect(detail.body.history.map((a: any) => a.statusCode)).toEqual([503, 503, 200]);
    // A 5xx may come after Mastodon applied the call: the account is read back before each retry.
    expect((await peerLog(m.token)).map((call) => `${call.method} ${call.path} ${call.status}`)).toEqual([
      "POST /api/v1/admin/accounts/123454321/action 503",
      "GET /api/v1/admin/accounts/123454321 200",
      "POST /api/v1/admin/accounts/123454321/action 503",
      "GET /api/v1/admin/accounts/123454321 200",
      "POST /api/v1/admin/accounts/123454321/action 200",
      "POST /api/v1/admin/reports/7003/resolve 200",
    ]);
  });
});

describe("connector settings", () => {
  it("refuses a base URL that may not be reached, an unknown category and a name taken twice", async () => {
    const { apiKey } = await newInstallation("mastodon-settings");
    const body = { kind: "mastodon", name: "main", baseUrl: "https://mastodon.test", accessToken: "settings-token-0123" };
    const local = await api("/api/v1/connectors", { key: apiKey, body: { ...body, baseUrl: "https://169.254.169.254" } });
    expect(local.status).toBe(422);
    expect(local.body.error.code).toBe("connector.base_url_not_allowed");
    const invalid = await api("/api/v1/connectors", { key: apiKey, body: { ...body, baseUrl: "mastodon.test" } });
    expect(invalid.body.error.code).toBe("connector.base_url_invalid");
    const category = await api("/api/v1/connectors", { key: apiKey, body: { ...body, categories: { spam: "junk" } } });
    expect(category.status).toBe(422);
    expect(category.body.error.code).toBe("connector.category_unknown");
    const given = await api("/api/v1/connectors", { key: apiKey, body: { ...body, webhookSecret: "a-secret-mastodon-generated" } });
    expect(given.status).toBe(201);
    expect(given.body.webhookSecret).toBe("a-secret-mastodon-generated");
    expect(given.body.categories).toEqual({ spam: "scams_and_fraud", legal: "not_specified_notice", violation: "other_violation_tc", other: "other_violation_tc" });
    expect(given.body.actions).toMatchObject({ "mastodon.suspend": "suspend", "mastodon.resolve": "resolve" });
    const taken = await api("/api/v1/connectors", { key: apiKey, body });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe("connector.name_taken");
    const unknownAction = await api("/api/v1/connectors", { key: apiKey, body: { ...body, name: "other", actions: { ban: "obliterate" } } });
    expect(unknownAction.status).toBe(400);
  });
});

describe("changing a connector", () => {
  it("a new webhook secret is shown once and the old one no longer verifies; a new rule mapping applies to the next report; an empty change is refused", async () => {
    const { apiKey } = await newInstallation("mastodon-update");
    const m = await connector(apiKey);
    const rotated = await api(`/api/v1/connectors/${m.id}`, { method: "PATCH", key: apiKey, body: { rotateWebhookSecret: true, rules: { "7": "violence" } } });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    expect(rotated.body.webhookSecret).toMatch(/^[0-9a-f]{64}$/u);
    expect(rotated.body.webhookSecret).not.toBe(m.webhookSecret);
    expect(rotated.body.rules).toEqual({ "7": "violence" });
    expect((await api(`/api/v1/connectors/${m.id}`, { key: apiKey })).body.webhookSecret).toBeUndefined();
    const old = await signedReport(m.webhookSecret, { id: "9101" });
    expect((await deliver(m.webhookPath, old.body, old.signature)).body.error.code).toBe("connector.bad_signature");
    const fresh = await signedReport(rotated.body.webhookSecret, { id: "9101", rules: "7", statuses: "0" });
    const taken = await deliver(m.webhookPath, fresh.body, fresh.signature);
    expect(taken.status).toBe(201);
    expect((await api(`/api/v1/reports/${taken.body.reportId}`, { key: apiKey })).body.category).toBe("violence");
    const empty = await api(`/api/v1/connectors/${m.id}`, { method: "PATCH", key: apiKey, body: {} });
    expect(empty.status).toBe(400);
  });
});

describe("telling reporters", () => {
  it("with tellReporters, the reporter gets the receipt and the decision on their report as direct statuses within 500 characters", async () => {
    const { apiKey } = await newInstallation("mastodon-tell");
    const m = await connector(apiKey, { tellReporters: true });
    expect(m).toMatchObject({ tellReporters: true });
    const signed = await signedReport(m.webhookSecret, { id: "7020", statuses: "1", category: "spam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status).toBe(201);
    const statement = "The post advertised a fake giveaway that asked for card details. ".repeat(8);
    const decided = await api("/api/v1/decisions", { key: apiKey, body: { reportId: taken.body.reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement } });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    const statuses = await until(async () => {
      const calls = (await peerLog(m.token)).filter((call) => call.path === "/api/v1/statuses");
      return calls.length >= 2 && calls;
    }, "the receipt and the decision");
    expect(statuses.every((call) => call.status === 200 && call.form.visibility === "direct" && call.form.status!.startsWith("@bobisaburger ") && [...call.form.status!].length <= 500)).toBe(true);
    const decision = statuses.find((call) => call.form.status!.includes("After review"))!;
    expect(decision.form.status).toContain("content removed");
    expect(decision.form.status).toContain(`reference ${decided.body.id}`);
    expect(decision.form.status).toContain("out-of-court dispute settlement");
    expect(statuses.some((call) => !call.form.status!.includes("After review"))).toBe(true);
  });

  it("without tellReporters nothing is posted, and a message with no handle to reach is dead, not sent", async () => {
    const { apiKey } = await newInstallation("mastodon-quiet");
    const m = await connector(apiKey);
    const signed = await signedReport(m.webhookSecret, { id: "7021", statuses: "0", category: "spam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect((await api("/api/v1/decisions", { key: apiKey, body: { reportId: taken.body.reportId, outcome: "no_action" } })).status).toBe(201);
    const endpoint = (await api("/api/v1/webhook-endpoints", { key: apiKey })).body.items.find((e: any) => e.id === m.endpointId);
    expect(endpoint.eventTypes).toEqual(["action.execute"]);
    expect((await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}`, { key: apiKey })).body.items).toEqual([]);

    const on = await api(`/api/v1/connectors/${m.id}`, { method: "PATCH", key: apiKey, body: { tellReporters: true } });
    expect(on.body.tellReporters).toBe(true);
    // A report made through the API names a reporter by id only: there is no handle to write to.
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: "mastodon:mastodon.test:account:42" }, category: "scams_and_fraud", reporter: { id: "someone-elsewhere" } } });
    expect(report.status).toBe(201);
    const dead = await until(async () => (await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}&state=dead`, { key: apiKey })).body.items?.[0], "the receipt, dead");
    expect(dead).toMatchObject({ eventType: "message.send", attempts: 1, lastError: "connector_recipient_unknown" });
    expect((await peerLog(m.token)).filter((call) => call.path === "/api/v1/statuses")).toEqual([]);
  });

  it("with tellReporters, a report the connector did not take in is never messaged, and an @ in the text mentions nobody", async () => {
    const { apiKey } = await newInstallation("mastodon-strangers");
    const m = await connector(apiKey, { tellReporters: true });
    // Through the API, with a contact that looks like a handle of the server: not this connector's reporter.
    const stranger = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: "mastodon:mastodon.test:account:43" }, category: "scams_and_fraud", reporter: { id: "api-client-1", contact: "@alice" } } });
    expect(stranger.status).toBe(201);
    const dead = await until(async () => (await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}&state=dead`, { key: apiKey })).body.items?.[0], "the stranger's receipt, dead");
    expect(dead).toMatchObject({ eventType: "message.send", lastError: "connector_recipient_unknown" });
    // The connector's own reporter is told; the statement's @mentions are neutralised (a zero-width space after each @).
    const signed = await signedReport(m.webhookSecret, { id: "7022", statuses: "1", category: "spam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    const decided = await api("/api/v1/decisions", {
      key: apiKey,
      body: { reportId: taken.body.reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Spam, also sent to @victim and @x@evil.example." },
    });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    const decision = await until(async () => (await peerLog(m.token)).find((call) => call.path === "/api/v1/statuses" && call.form.status?.includes("After review")), "the decision status");
    const mentions = decision.form.status!.match(/@[A-Za-z0-9_]/gu) ?? [];
    expect(mentions, decision.form.status).toEqual(["@b"]); // the reporter's handle only
    expect(decision.form.status).toContain("@\u200Bvictim");
    expect((await peerLog(m.token)).filter((call) => call.path === "/api/v1/statuses").every((call) => call.form.status!.startsWith("@bobisaburger "))).toBe(true);
  });
});

const plan = (token: string, entries: Array<{ status: number; lost?: boolean; resetInSeconds?: number }>) => peer.fetch("http://mastodon.test/_control/plan", { method: "POST", body: JSON.stringify({ token, plan: entries }) });
const deliveriesOf = async (apiKey: string, endpointId: string) => (await api(`/api/v1/webhook-deliveries?endpointId=${endpointId}`, { key: apiKey })).body.items as Array<Record<string, any>>;
const uniqueAccount = () => `5${Math.floor(Math.random() * 1e9)}`;

describe("Mastodon as the real server behaves", () => {
  it("a 429 with X-RateLimit-Reset and no Retry-After defers the receipt to the window's end: not counted as an attempt, never given up", async () => {
    const { apiKey } = await newInstallation("mastodon-throttled");
    const m = await connector(apiKey, { tellReporters: true });
    // The window holds past five calls: counted attempts retried inside it would all be 429 and the receipt given up.
    await plan(
      m.token,
      Array.from({ length: 5 }, () => ({ status: 429, resetInSeconds: 3600 })),
    );
    const before = Date.now();
    const signed = await signedReport(m.webhookSecret, { id: "7501", statuses: "1", category: "spam" });
    expect((await deliver(m.webhookPath, signed.body, signed.signature)).status).toBe(201);
    const receipt = await until(async () => (await deliveriesOf(apiKey, m.endpointId)).find((d) => d.attempts >= 1), "the throttled receipt");
    const detail = (await api(`/api/v1/webhook-deliveries/${receipt.id}`, { key: apiKey })).body;
    expect(detail).toMatchObject({ state: "pending", attempts: 1, lastStatus: 429, lastError: "rate_limited" });
    const due = (await env.DB.prepare("SELECT next_attempt_at AS at FROM webhook_deliveries WHERE id = ?1").bind(receipt.id).first<{ at: string }>())!.at;
    // Not before the window ends (the reset is an hour ahead): no retries burnt inside it.
    expect(Date.parse(due)).toBeGreaterThanOrEqual(before + 3_590_000);
    expect((await peerLog(m.token)).filter((call) => call.path === "/api/v1/statuses")).toHaveLength(1);
    // The window ends (the clock moved past the reset): the receipt is sent, once.
    await plan(m.token, []);
    await env.DB.prepare("UPDATE webhook_deliveries SET next_attempt_at = ?2 WHERE id = ?1")
      .bind(receipt.id, new Date(Date.now() - 600_000).toISOString())
      .run();
    const { sweepPendingDeliveries } = await import("../src/enforcement/webhooks");
    await sweepPendingDeliveries(env);
    const delivered = await until(async () => {
      const d = (await api(`/api/v1/webhook-deliveries/${receipt.id}`, { key: apiKey })).body;
      return d.state === "delivered" && d;
    }, "the receipt, delivered");
    expect(delivered.history.map((a: any) => [a.statusCode, a.error])).toEqual([
      [429, "rate_limited"],
      [200, null],
    ]);
  });

  it("accepts a webhook secret of 12 characters, Mastodon's own minimum", async () => {
    const { apiKey } = await newInstallation("mastodon-short-secret");
    const m = await connector(apiKey, { webhookSecret: "abcdefghijkl" });
    expect(m.webhookSecret).toBe("abcdefghijkl");
    const signed = await signedReport("abcdefghijkl", { id: "7502" });
    expect((await deliver(m.webhookPath, signed.body, signed.signature)).status).toBe(201);
    expect((await api("/api/v1/connectors", { key: apiKey, body: { kind: "mastodon", name: "short", baseUrl: "https://mastodon.test/", accessToken: m.token, webhookSecret: "abcdefghijk" } })).status).toBe(400);
  });

  it("report.updated with action_taken resolves ours: its review is ended (the waiting run terminated, its task cancelled); reopened, it is open again", async () => {
    const { apiKey } = await newInstallation("mastodon-updated");
    const m = await connector(apiKey);
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `q-${crypto.randomUUID().slice(0, 8)}`, slaSeconds: 3600 } });
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: queue.body.id, timeout_seconds: 86_400 } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const created = await signedReport(m.webhookSecret, { id: "7503" });
    const taken = await deliver(m.webhookPath, created.body, created.signature);
    expect(taken.status).toBe(201);
    const task = await until(async () => (await api(`/api/v1/queues/${queue.body.id}/tasks`, { key: apiKey })).body.items?.[0], "the review task");
    // An update of a report this connector never took in is acknowledged and ignored.
    const stranger = await signedReport(m.webhookSecret, { id: "7599", event: "report.updated", action_taken: "true" });
    expect((await deliver(m.webhookPath, stranger.body, stranger.signature)).body).toMatchObject({ event: "report.updated", ignored: true, reportId: null });

    const resolved = await signedReport(m.webhookSecret, { id: "7503", event: "report.updated", action_taken: "true" });
    const answer = await deliver(m.webhookPath, resolved.body, resolved.signature);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toMatchObject({ event: "report.updated", reportId: taken.body.reportId, ignored: false, resolved: 1 });
    const row = await env.DB.prepare("SELECT resolved_at AS at, resolved_by AS by FROM connector_reports WHERE connector_id = ?1 AND remote_report_id = '7503'").bind(m.id).first<{ at: string | null; by: string | null }>();
    expect(row).toMatchObject({ by: "report" });
    expect(row!.at).not.toBeNull();
    const run = (await api(`/api/v1/runs?limit=5`, { key: apiKey })).body.items[0];
    expect((await api(`/api/v1/runs/${run.id}`, { key: apiKey })).body.state).toBe("terminated");
    const cancelled = await env.DB.prepare("SELECT state FROM human_tasks WHERE id = ?1").bind(task.id).first<{ state: string }>();
    expect(cancelled!.state).toBe("cancelled");
    const audit = (await api("/api/v1/audit-events?limit=200", { key: apiKey })).body.items;
    expect(audit.find((e: any) => e.action === "connector.report_resolved")).toMatchObject({ target: { type: "report", id: taken.body.reportId } });

    const reopened = await signedReport(m.webhookSecret, { id: "7503", event: "report.updated", action_taken: "false" });
    expect((await deliver(m.webhookPath, reopened.body, reopened.signature)).status).toBe(200);
    const open = await env.DB.prepare("SELECT resolved_at AS at FROM connector_reports WHERE connector_id = ?1 AND remote_report_id = '7503'").bind(m.id).first<{ at: string | null }>();
    expect(open!.at).toBeNull();
  });

  it("an account action resolves every open report about that account here, as Mastodon does", async () => {
    const { apiKey } = await newInstallation("mastodon-account-wide");
    const m = await connector(apiKey, { actions: { close_report: "resolve" } });
    for (const key of ["mastodon.suspend", "close_report"]) expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: m.endpointId } })).status).toBe(201);
    const target = uniqueAccount();
    const reports: string[] = [];
    for (const id of ["7511", "7512"]) {
      const signed = await signedReport(m.webhookSecret, { id, target });
      reports.push((await deliver(m.webhookPath, signed.body, signed.signature)).body.reportId);
    }
    const other = await signedReport(m.webhookSecret, { id: "7513", target: uniqueAccount() });
    expect((await deliver(m.webhookPath, other.body, other.signature)).status).toBe(201);
    const version = await publish(apiKey, suspendGraph);
    const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: reports[0] } });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    expect((await waitForRun(apiKey, run.body.id)).output.terminalCode).toBe("applied");
    const { results } = await env.DB.prepare("SELECT remote_report_id AS id, resolved_by AS by FROM connector_reports WHERE connector_id = ?1 ORDER BY remote_report_id").bind(m.id).all<{ id: string; by: string | null }>();
    expect(results).toEqual([
      { id: "7511", by: "account_action" },
      { id: "7512", by: "account_action" },
      { id: "7513", by: null },
    ]);
  });

  it("after an answer lost on the way back, the account is read back before a retry: the action (and its e-mail) is not repeated", async () => {
    const { apiKey } = await newInstallation("mastodon-read-back");
    // mastodon.suspend mapped to a warning (`none`): Mastodon records a warning and e-mails it each time it is called.
    const m = await connector(apiKey, { actions: { "mastodon.suspend": "none", close_report: "resolve" }, notifyByEmail: true });
    for (const key of ["mastodon.suspend", "close_report"]) expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: m.endpointId } })).status).toBe(201);
    const target = uniqueAccount();
    const signed = await signedReport(m.webhookSecret, { id: "7521", target });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    await plan(m.token, [{ status: 504, lost: true }]);
    const version = await publish(apiKey, suspendGraph);
    const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: taken.body.reportId } });
    expect((await waitForRun(apiKey, run.body.id)).output.terminalCode).toBe("applied");
    const calls = (await peerLog(m.token)).map((call) => `${call.method} ${call.path} ${call.status}`);
    expect(calls).toEqual([`POST /api/v1/admin/accounts/${target}/action 504`, "GET /api/v1/admin/reports/7521 200", "POST /api/v1/admin/reports/7521/resolve 200"]);
    const warnings = (await (await peer.fetch(`http://mastodon.test/_control/warnings?token=${encodeURIComponent(m.token)}&account=${target}`)).json()) as { warnings: number };
    expect(warnings.warnings).toBe(1);
    const warn = (await deliveriesOf(apiKey, m.endpointId)).find((d) => d.sourceId.includes("suspend"))!;
    expect((await api(`/api/v1/webhook-deliveries/${warn.id}`, { key: apiKey })).body).toMatchObject({ state: "delivered", attempts: 2 });
  });

  it("acts only on accounts its own reports named: a report made through the API about another account of the server (an admin's) is never acted on", async () => {
    const { apiKey } = await newInstallation("mastodon-foreign-target");
    const m = await connector(apiKey);
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "mastodon.suspend", name: "suspend", endpointId: m.endpointId } })).status).toBe(201);
    const admin = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: "mastodon:mastodon.test:account:1" }, category: "scams_and_fraud" } });
    expect(admin.status).toBe(201);
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "suspend", kind: "action", errorPort: "failed", config: { action_type: "mastodon.suspend", approval_timeout_seconds: 3600 }, inputMapping: {} },
        { id: "done", kind: "end", config: { terminal_code: "applied" } },
        { id: "failed", kind: "end", config: { terminal_code: "failed" } },
      ],
      edges: [edge("start", "success", "suspend"), edge("suspend", "applied", "done"), edge("suspend", "rejected", "failed"), edge("suspend", "expired", "failed"), edge("suspend", "failed", "failed")],
    });
    const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: admin.body.id } });
    expect((await waitForRun(apiKey, run.body.id)).output.terminalCode).toBe("failed");
    expect((await deliveriesOf(apiKey, m.endpointId))[0]).toMatchObject({ state: "dead", lastError: "connector_target_unknown" });
    expect(await peerLog(m.token)).toEqual([]);
  });

  it("a connector_reports row naming this connector but another installation (a crafted backup) does not make a genuine report replayed", async () => {
    const { apiKey } = await newInstallation("mastodon-victim");
    const m = await connector(apiKey);
    const attacker = await newInstallation("mastodon-attacker");
    const theirs = await api("/api/v1/reports", { key: attacker.apiKey, body: { subject: { kind: "content", id: "x-1" }, category: "scams_and_fraud" } });
    await env.DB.prepare("INSERT INTO connector_reports (connector_id, remote_report_id, installation_id, report_id, target_account_id, created_at) VALUES (?1, '7531', ?2, ?3, '1', ?4)")
      .bind(m.id, attacker.id, theirs.body.id, new Date().toISOString())
      .run();
    const signed = await signedReport(m.webhookSecret, { id: "7531" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    expect(taken.body.replayed).toBe(false);
    expect(taken.body.reportId).not.toBe(theirs.body.id);
    const row = await env.DB.prepare("SELECT report_id AS reportId FROM connector_reports WHERE connector_id = ?1 AND remote_report_id = '7531'").bind(m.id).first<{ reportId: string }>();
    expect(row!.reportId).toBe(taken.body.reportId);
  });

  it("the reporter's messages quote Mastodon's report number, never ours, and say 'an account'", async () => {
    const { apiKey } = await newInstallation("mastodon-wording");
    const m = await connector(apiKey, { tellReporters: true });
    const signed = await signedReport(m.webhookSecret, { id: "7541", statuses: "0", category: "spam" });
    const taken = await deliver(m.webhookPath, signed.body, signed.signature);
    expect(taken.status).toBe(201);
    expect((await api("/api/v1/decisions", { key: apiKey, body: { reportId: taken.body.reportId, outcome: "no_action" } })).status).toBe(201);
    const statuses = await until(async () => {
      const calls = (await peerLog(m.token)).filter((call) => call.path === "/api/v1/statuses");
      return calls.length >= 2 && calls.map((call) => call.form.status!);
    }, "the receipt and the decision");
    const receipt = statuses.find((text) => !text.includes("After review"))!;
    expect(receipt).toContain("your report #7541 about an account");
    expect(statuses.find((text) => text.includes("After review"))).toContain("your report #7541");
    for (const text of statuses) {
      expect(text).not.toContain(taken.body.reportId);
      expect(text).not.toContain("a account");
    }
  });
});

describe("removing a single post on Mastodon", () => {
  it("Mastodon's admin API cannot remove one post: an action type for it on the connector is never carried out or claimed applied (dead with connector_action_unmapped, the run takes its error port, nothing reaches the server), and no mapping to a post deletion is accepted", async () => {
    const { apiKey } = await newInstallation("mastodon-remove-post");
    const m = await connector(apiKey);
    expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove the post", endpointId: m.endpointId } })).status).toBe(201);
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post" }, inputMapping: {} },
        { id: "done", kind: "end", config: { terminal_code: "applied" } },
        { id: "stopped", kind: "end", config: { terminal_code: "stopped" } },
        { id: "failed", kind: "end", config: { terminal_code: "failed" } },
      ],
      edges: [edge("start", "success", "remove"), edge("remove", "applied", "done"), edge("remove", "rejected", "stopped"), edge("remove", "expired", "stopped"), edge("remove", "failed", "failed")],
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const { run } = await reportRun(apiKey, m, "7101");
    expect(run.output.terminalCode).toBe("failed");
    const proposal = (await api("/api/v1/action-proposals", { key: apiKey })).body.items.find((p: any) => p.actionType === "remove_post");
    expect(proposal.state).not.toBe("applied");
    const [delivery] = (await api(`/api/v1/webhook-deliveries?endpointId=${m.endpointId}`, { key: apiKey })).body.items;
    expect((await api(`/api/v1/webhook-deliveries/${delivery.id}`, { key: apiKey })).body).toMatchObject({ state: "dead", attempts: 1, lastError: "connector_action_unmapped" });
    expect(await peerLog(m.token)).toEqual([]);
    // The connector's actions are account actions and resolving the report: a post deletion is not one of them.
    const mapped = await api("/api/v1/connectors", { key: apiKey, body: { kind: "mastodon", name: "deleting", baseUrl: "https://mastodon.test", accessToken: "settings-token-0123", actions: { remove_post: "delete_status" } } });
    expect(mapped.status).toBe(400);
  });
});

/** Instance URLs no connector may call: loopback, private, link-local and IPv4-mapped IPv6 (as a restored row or a turned-off ALLOW_LOCAL_EGRESS leaves them). */
const FORBIDDEN_INSTANCES = ["https://127.0.0.1", "https://10.1.2.3", "https://169.254.10.20", "https://[fe80::1]", "https://[::ffff:10.0.0.1]", "https://[::ffff:127.0.0.1]"];

describe("the instance URL at call time", () => {
  it("a connector whose stored instance URL is loopback, private, link-local or mapped is refused at call time: its action and its message to the reporter are dead as egress_refused, and nothing leaves", async () => {
    const { apiKey } = await newInstallation("mastodon-egress");
    const m = await connector(apiKey, { actions: { close_report: "resolve" } });
    for (const key of ["mastodon.suspend", "close_report"]) expect((await api("/api/v1/action-types", { key: apiKey, body: { key, name: key, endpointId: m.endpointId } })).status).toBe(201);
    const version = await publish(apiKey, suspendGraph);
    // One report a URL, taken in while the URL was a public one (nothing is sent at intake without tellReporters).
    const reports: string[] = [];
    for (const [i] of FORBIDDEN_INSTANCES.entries()) {
      const signed = await signedReport(m.webhookSecret, { id: `76${i}0`, statuses: "1", category: "spam", target: uniqueAccount() });
      const taken = await deliver(m.webhookPath, signed.body, signed.signature);
      expect(taken.status, JSON.stringify(taken.body)).toBe(201);
      reports.push(taken.body.reportId);
    }
    expect((await api(`/api/v1/connectors/${m.id}`, { method: "PATCH", key: apiKey, body: { tellReporters: true } })).body.tellReporters).toBe(true);
    const tags: string[] = [];
    for (const [i, instance] of FORBIDDEN_INSTANCES.entries()) {
      // Written straight into D1: the creation check (tested in egress.test.ts) never saw it.
      const tag = `/mastodon-egress-${crypto.randomUUID()}`;
      tags.push(tag);
      await env.DB.prepare("UPDATE connectors SET base_url = ?2 WHERE id = ?1").bind(m.id, `${instance}${tag}`).run();
      const before = new Set((await deliveriesOf(apiKey, m.endpointId)).map((d) => d.id));
      // An action: the run's suspension goes through the connector.
      const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: reports[i] } });
      expect(run.status, JSON.stringify(run.body)).toBe(201);
      const done = await waitForRun(apiKey, run.body.id);
      expect(done.output.terminalCode, instance).toBe("failed");
      expect(done.steps.find((s: any) => s.nodeId === "suspend").errorCode, instance).toBe("action.delivery_failed");
      // A message: the decision on the report, to its reporter as a direct status.
      const decided = await api("/api/v1/decisions", { key: apiKey, body: { reportId: reports[i], outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Removed: a scam." } });
      expect(decided.status, JSON.stringify(decided.body)).toBe(201);
      const refused = (d: Record<string, any>) => d.state === "dead" && d.attempts === 1 && d.lastError === "egress_refused";
      const added = await until(async () => {
        const fresh = (await deliveriesOf(apiKey, m.endpointId)).filter((d) => !before.has(d.id));
        return fresh.some((d) => d.eventType === "message.send" && refused(d)) && fresh.some((d) => d.eventType === "action.execute") && fresh;
      }, `the action and the reporter's message through ${instance}, dead`);
      expect(added.filter((d) => d.eventType === "action.execute").map(refused), instance).toEqual([true]);
      expect(
        added.filter((d) => d.eventType === "message.send" && refused(d)),
        instance,
      ).toHaveLength(1);
      // The decision's other message (to the account's owner, who has no handle here) is dead before any URL is read.
      expect(
        added.filter((d) => !refused(d)).map((d) => [d.eventType, d.state, d.lastError]),
        instance,
      ).toEqual(added.filter((d) => !refused(d)).map(() => ["message.send", "dead", "connector_recipient_unknown"]));
    }
    // Nothing reached the instance (the Mastodon peer) nor any address the URLs name (the receiver answers every other host).
    expect(await peerLog(m.token)).toEqual([]);
    const received = (await (await env.RECEIVER.fetch("http://receiver/_control/log")).json()) as Array<{ path: string }>;
    expect(received.filter((entry) => tags.some((tag) => entry.path.startsWith(tag)))).toEqual([]);
  });
});
