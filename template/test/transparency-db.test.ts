// DSA Transparency Database submission against a peer that speaks the documented
// API (test/peers/transparency-db.ts: batch limit 100, the 422 shapes, duplicate puids,
// existing-puid, bearer token, every statement validated against the schema): batches with a 422
// split, a lost response never leading to a second copy, personal data refused before sending, the
// token never returned, 429 backoff, and another installation's statuses a 404.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { personalDataFindings } from "../src/enforcement/transparency-db-privacy";
import { runSchedule, SWEEPS } from "../src/schedule";
import { api, edge, newInstallation, publish, waitForRun, personKey } from "./helpers";

interface PeerCall {
  method: string;
  path: string;
  puids: string[];
  status: number;
  authorization: string | null;
  accept: string | null;
}

const peerLog = async (token: string): Promise<PeerCall[]> => (await (await env.TDB_PEER.fetch(`http://tdb/_control/log?token=${token}`)).json()) as PeerCall[];
const peerStore = async (token: string) => (await (await env.TDB_PEER.fetch(`http://tdb/_control/statements?token=${token}`)).json()) as { statements: Array<Record<string, any>>; received: Record<string, number> };
const peerPlan = (token: string, control: { plan?: unknown[]; refuseFacts?: string }) => env.TDB_PEER.fetch("http://tdb/_control/plan", { method: "POST", body: JSON.stringify({ token, ...control }) });

const SWEEP = SWEEPS.filter((sweep) => sweep.name === "enforcement.transparency_db");
/** The registered sweep, as the scheduled handler runs it, at `at` (ms). */
async function sweep(at = Date.now()) {
  const run = await runSchedule(env, { cron: "* * * * *", scheduledTime: at }, SWEEP);
  expect(run.sweeps[0], JSON.stringify(run)).toMatchObject({ name: "enforcement.transparency_db", ok: true });
  return run.sweeps[0]!.summary!;
}

async function setup(options: { reporter?: unknown; ownerId?: string } = {}) {
  const { id, apiKey } = await newInstallation();
  const token = `tdb-${crypto.randomUUID()}`;
  const settings = await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { baseUrl: "https://tdb.test", token, enabled: true } });
  expect(settings.status, JSON.stringify(settings.body)).toBe(200);
  const report = await api("/api/v1/reports", {
    key: apiKey,
    body: { subject: { kind: "content", id: `post-${crypto.randomUUID().slice(0, 8)}`, ...(options.ownerId ? { ownerId: options.ownerId } : {}) }, category: "scams_and_fraud", ...(options.reporter ? { reporter: options.reporter } : {}) },
  });
  expect(report.status).toBe(201);
  return { installationId: id, apiKey, token, reportId: report.body.id as string };
}

async function decide(apiKey: string, reportId: string, statement: string): Promise<string> {
  const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId, outcome: "removed_scam", restrictions: { visibility: ["content_removed"] }, statement } });
  expect(decision.status, JSON.stringify(decision.body)).toBe(201);
  return decision.body.id;
}

async function decideMany(apiKey: string, reportId: string, statements: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < statements.length; i += 25) ids.push(...(await Promise.all(statements.slice(i, i + 25).map((s) => decide(apiKey, reportId, s)))));
  return ids;
}

const submission = async (apiKey: string, decisionId: string) => (await api(`/api/v1/transparency-database/submissions/${decisionId}`, { key: apiKey })).body;

describe("Transparency Database submission", () => {
  it("submits restricting decisions in batches of at most 100 and splits a 422: the named statements rejected, the rest stored", async () => {
    const { apiKey, token, reportId } = await setup();
    await peerPlan(token, { refuseFacts: "REFUSE-ME" });
    const refusedAt = new Set([5, 120, 229]);
    const texts = Array.from({ length: 230 }, (_, i) => (refusedAt.has(i) ? `Scam advert number ${i}. REFUSE-ME` : `Scam advert number ${i}, removed under our terms on fraud.`));
    const ids = await decideMany(apiKey, reportId, texts);
    // A decision not to act is not queued.
    const noAction = await api("/api/v1/decisions", { key: apiKey, body: { reportId, outcome: "no_action" } });
    expect((await api(`/api/v1/transparency-database/submissions/${noAction.body.id}`, { key: apiKey })).status).toBe(404);
    expect((await submission(apiKey, ids[0]!)).state).toBe("pending");

    const summary = await sweep();
    expect(summary).toMatchObject({ submitted: 227, rejected: 3, failedCalls: 0 });
    const calls = (await peerLog(token)).filter((c) => c.path === "/api/v1/statements");
    expect(calls.every((c) => c.puids.length >= 1 && c.puids.length <= 100 && c.authorization === "bearer")).toBe(true);
    // Asked for JSON, the database answers a refused batch with its errors; without that header it answers 302.
    expect((await peerLog(token)).every((c) => c.accept === "application/json")).toBe(true);
    // Three batches (100, 100, 30); each with a refused statement is answered 422, then sent again without it.
    expect(calls.map((c) => [c.puids.length, c.status])).toEqual([
      [100, 422],
      [99, 201],
      [100, 422],
      [99, 201],
      [30, 422],
      [29, 201],
    ]);
    const store = await peerStore(token);
    expect(store.statements).toHaveLength(227);
    expect(new Set(store.statements.map((s) => s.puid)).size).toBe(227);

    const refusedIds = ids.filter((_, i) => refusedAt.has(i));
    for (const id of refusedIds) {
      const s = await submission(apiKey, id);
      expect(s).toMatchObject({ state: "rejected", rejectedBy: "database", errorCode: "transparency_db.rejected_by_database", uuid: null });
      expect(Object.keys(s.errors)).toEqual(["decision_facts"]);
      expect(store.statements.find((x) => x.puid === id)).toBeUndefined();
    }
    const accepted = await submission(apiKey, ids[7]!);
    const stored = store.statements.find((x) => x.puid === ids[7]);
    expect(accepted).toMatchObject({ state: "submitted", confirmedBy: "created", uuid: stored!.uuid, permalink: stored!.permalink, errors: null });

    const rejected = await api("/api/v1/transparency-database/submissions?state=rejected", { key: apiKey });
    expect(rejected.body.items.map((s: any) => s.decisionId).sort()).toEqual([...refusedIds].sort());
    const page = await api("/api/v1/transparency-database/submissions?state=submitted&limit=200", { key: apiKey });
    expect(page.body.items).toHaveLength(200);
    const rest = await api(`/api/v1/transparency-database/submissions?state=submitted&limit=200&cursor=${page.body.nextCursor}`, { key: apiKey });
    expect(rest.body.items).toHaveLength(27);
    expect((await api("/api/v1/transparency-database/settings", { key: apiKey })).body.submissions).toEqual({ pending: 0, submitted: 227, rejected: 3 });

    // A fix: redacted facts, re-submitted; a submitted statement is never re-submitted.
    const again = await api(`/api/v1/transparency-database/submissions/${refusedIds[0]}/resubmit`, { key: apiKey, body: { decisionFacts: "Scam advert, removed under our terms on fraud." } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ state: "pending", overridden: ["decisionFacts"] });
    expect((await api(`/api/v1/transparency-database/submissions/${ids[7]}/resubmit`, { key: apiKey, body: {} })).body.error.code).toBe("transparency_db.not_rejected");
    await sweep();
    const fixed = await submission(apiKey, refusedIds[0]!);
    expect(fixed).toMatchObject({ state: "submitted", confirmedBy: "created" });
    expect((await peerStore(token)).statements.find((x) => x.puid === refusedIds[0])).toMatchObject({
      decision_facts: "Scam advert, removed under our terms on fraud.",
      incompatible_content_explanation: "Scam advert, removed under our terms on fraud.",
    });
  });

  it("a workflow's restricting decision is queued in its step's batch and submitted", async () => {
    const { apiKey, token } = await setup();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        {
          id: "decide",
          kind: "decision",
          config: { outcome: "removed_scam", ground: "incompatible_content", statement: "The post advertised a fraudulent investment scheme.", restrictions: { visibility: ["content_removed"] } },
        },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-wf" }, category: "scams_and_fraud" } });
    const run = await waitForRun(apiKey, report.body.runs[0].runId);
    const decisionId = run.steps.find((s: any) => s.nodeId === "decide").output.decisionId;
    expect(await submission(apiKey, decisionId)).toMatchObject({ state: "pending", puid: decisionId });
    await sweep();
    expect(await submission(apiKey, decisionId)).toMatchObject({ state: "submitted" });
    expect((await peerStore(token)).statements[0]).toMatchObject({ puid: decisionId, automated_decision: "AUTOMATED_DECISION_FULLY", source_type: "SOURCE_ARTICLE_16" });
  });

  it("a lost response (stored, then a 504) is looked up by puid on the retry: never sent twice", async () => {
    const { apiKey, token, reportId } = await setup();
    await peerPlan(token, { plan: [{ lost: true }] });
    const first = await decideMany(apiKey, reportId, ["Scam one.", "Scam two.", "Scam three."]);
    const now = Date.now();
    const lost = await sweep(now);
    expect(lost).toMatchObject({ submitted: 0, failedCalls: 1, deferred: 3 });
    expect(await submission(apiKey, first[0]!)).toMatchObject({ state: "pending", inDoubt: true, lastStatus: 504 });
    const settings = (await api("/api/v1/transparency-database/settings", { key: apiKey })).body;
    expect(settings).toMatchObject({ lastStatus: 504, lastError: "http_504" });
    expect(Date.parse(settings.pausedUntil)).toBeGreaterThan(now);
    // While it waits, nothing is sent.
    await sweep(now + 1000);
    expect((await peerLog(token)).length).toBe(1);

    const later = await decide(apiKey, reportId, "Scam four.");
    const retried = await sweep(Date.parse(settings.pausedUntil) + 1000);
    expect(retried).toMatchObject({ alreadyThere: 3, submitted: 1 });
    const calls = await peerLog(token);
    const byId = (a: string[], b: string[]) => a[0]!.localeCompare(b[0]!);
    expect(
      calls
        .filter((c) => c.method === "GET")
        .map((c) => [c.path.split("/").pop()!, String(c.status)])
        .sort(byId),
    ).toEqual(first.map((id) => [id, "302"]).sort(byId));
    expect(calls.filter((c) => c.method === "POST").map((c) => [...c.puids].sort())).toEqual([[...first].sort(), [later]]);
    const store = await peerStore(token);
    for (const id of [...first, later]) expect(store.received[id]).toBe(1);
    expect(store.statements).toHaveLength(4);
    expect(await submission(apiKey, first[1]!)).toMatchObject({ state: "submitted", confirmedBy: "existing_puid", inDoubt: false });
    expect(await submission(apiKey, later)).toMatchObject({ state: "submitted", confirmedBy: "created" });
  });

  it("a puid the database already holds (errors.existing_puids) is confirmed by existing-puid, and the rest of the batch is sent", async () => {
    const { apiKey, token, reportId } = await setup();
    const [held] = await decideMany(apiKey, reportId, ["Scam held."]);
    await sweep();
    // The platform lost its record of the submission (say, restored from an older backup).
    await env.DB.prepare(`UPDATE tdb_submissions SET state = 'pending', in_doubt = 0, confirmed_by = NULL, uuid = NULL WHERE decision_id = ?1`).bind(held).run();
    const fresh = await decideMany(apiKey, reportId, ["Scam fresh one.", "Scam fresh two."]);
    const summary = await sweep();
    expect(summary).toMatchObject({ alreadyThere: 1, submitted: 2, rejected: 0 });
    const posts = (await peerLog(token)).filter((c) => c.method === "POST");
    expect(posts.slice(1).map((c) => c.status)).toEqual([422, 201]);
    expect([...posts.at(-1)!.puids].sort()).toEqual([...fresh].sort());
    expect(await submission(apiKey, held!)).toMatchObject({ state: "submitted", confirmedBy: "existing_puid" });
    expect((await peerStore(token)).statements).toHaveLength(3);
  });

  it("a statement whose facts hold personal data is refused before submission, with a clear code and no value stored", async () => {
    const { apiKey, token, reportId } = await setup({ reporter: { id: "reporter-4711", contact: "Rita Example" }, ownerId: "owner-8812" });
    const texts = [
      "The seller asked buyers to write to seller@example.com for the payment details.",
      "Posted by owner-8812 in three groups.",
      "Reported by reporter-4711 after a purchase.",
      "The advert said: call +49 30 1234567 to invest.",
      "The scam page logged visitors from 203.0.113.9.",
      "Same scheme as https://social.example/@alice/12345.",
      "Rita Example was asked to pay in advance.",
      "The post advertised a fraudulent investment scheme, contrary to our terms on scams.",
    ];
    const ids = await decideMany(apiKey, reportId, texts);
    const summary = await sweep();
    expect(summary).toMatchObject({ submitted: 1, rejected: 7 });
    const kinds: string[][] = [];
    for (const id of ids.slice(0, 7)) {
      const s = await submission(apiKey, id);
      expect(s).toMatchObject({ state: "rejected", rejectedBy: "platform", errorCode: "transparency_db.personal_data" });
      kinds.push([...new Set((s.errors as Array<{ kind: string }>).map((e) => e.kind))]);
    }
    expect(kinds).toEqual([["email_address"], ["subject_owner_id"], ["reporter_id"], ["phone_number"], ["ip_address"], ["user_url"], ["reporter_contact"]]);
    // Never sent: the database received only the clean statement.
    const store = await peerStore(token);
    expect(Object.keys(store.received)).toEqual([ids[7]]);
    // The refusals record field and kind, never the value.
    const rows = JSON.stringify((await env.DB.prepare("SELECT * FROM tdb_submissions").all()).results) + JSON.stringify((await env.DB.prepare("SELECT details_json FROM audit_events WHERE action LIKE 'transparency_db.%'").all()).results);
    for (const value of ["seller@example.com", "owner-8812", "reporter-4711", "1234567", "203.0.113.9", "@alice", "Rita Example"]) expect(rows).not.toContain(value);
    // A redaction that still holds personal data is refused at once.
    const bad = await api(`/api/v1/transparency-database/submissions/${ids[1]}/resubmit`, { key: apiKey, body: { decisionFacts: "Posted by OWNER-8812." } });
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({ code: "transparency_db.personal_data", details: [{ path: "$.decisionFacts", code: "subject_owner_id" }] });
  });

  it("the personal data check does not flag dates, times, amounts or content ids", () => {
    const clean = { decision_facts: "On 2024-01-31 at 10:30:00 the post post-88 (v1.2) asked for 1500 EUR; see https://example.com/posts/12345 and rule 4.2.", puid: "dec_0123456789" };
    expect(personalDataFindings(clean, { values: [] })).toEqual([]);
    expect(personalDataFindings({ decision_facts: "Ask fe80::1 or did:plc:abc123xyz or (555) 123-4567" }, { values: [] }).map((f) => f.kind)).toEqual(["phone_number", "ip_address", "decentralized_id"]);
  });

  it("the token is sealed at rest and never returned or audited", async () => {
    const { id, apiKey } = await newInstallation();
    const token = `tdb-${crypto.randomUUID()}`;
    const put = await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { preset: "sandbox", token, enabled: true } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ enabled: true, preset: "sandbox", baseUrl: "https://sandbox.sor.dsa.ec.europa.eu", tokenSet: true });
    const got = await api("/api/v1/transparency-database/settings", { key: apiKey });
    // Changing something else keeps the token.
    const off = await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { preset: "sandbox", enabled: false } });
    expect(off.body).toMatchObject({ enabled: false, baseUrl: "https://sandbox.sor.dsa.ec.europa.eu", tokenSet: true });
    // The stored token is only ever sent to the host it was given for: another host needs it again.
    const elsewhere = await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { baseUrl: "https://tdb.test", enabled: true } });
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body.error.code).toBe("transparency_db.token_required");
    expect((await api("/api/v1/transparency-database/settings", { key: apiKey })).body).toMatchObject({ baseUrl: "https://sandbox.sor.dsa.ec.europa.eu", enabled: false });
    const stored = await env.DB.prepare("SELECT * FROM tdb_settings WHERE installation_id = ?1").bind(id).first();
    const audit = await env.DB.prepare("SELECT details_json FROM audit_events WHERE installation_id = ?1").bind(id).all();
    for (const text of [JSON.stringify(put.body), JSON.stringify(got.body), JSON.stringify(off.body), JSON.stringify(stored), JSON.stringify(audit.results)]) expect(text).not.toContain(token);
    expect(String((stored as { token_sealed: string }).token_sealed)).toMatch(/^v1\./u);
    // Enabling without any token is refused.
    const other = await newInstallation();
    const refused = await api("/api/v1/transparency-database/settings", { method: "PUT", key: other.apiKey, body: { preset: "production", enabled: true } });
    expect(refused.body.error.code).toBe("transparency_db.token_missing");
  });

  it("a 429 pauses the installation for its retry-after; a 503 leaves the batch in doubt, looked up before it is sent again", async () => {
    const { apiKey, token, reportId } = await setup();
    await peerPlan(token, { plan: [{ status: 429, retryAfter: 120 }, { status: 503 }] });
    const ids = await decideMany(apiKey, reportId, ["Scam a.", "Scam b."]);
    const now = Date.now();
    expect(await sweep(now)).toMatchObject({ failedCalls: 1, submitted: 0 });
    const settings = (await api("/api/v1/transparency-database/settings", { key: apiKey })).body;
    expect(settings).toMatchObject({ lastStatus: 429, lastError: "http_429" });
    expect(Date.parse(settings.pausedUntil)).toBe(now + 120_000);
    expect(await submission(apiKey, ids[0]!)).toMatchObject({ state: "pending", inDoubt: false, attempts: 1 });
    // Before retry-after has passed: no call at all.
    await sweep(now + 60_000);
    expect(await peerLog(token)).toHaveLength(1);
    // After it: a 503 (maybe stored), so the rows stay in doubt…
    expect(await sweep(now + 121_000)).toMatchObject({ failedCalls: 1 });
    expect(await submission(apiKey, ids[0]!)).toMatchObject({ state: "pending", inDoubt: true, lastStatus: 503 });
    const paused = (await api("/api/v1/transparency-database/settings", { key: apiKey })).body.pausedUntil;
    // …and are looked up (404: not there) before they are sent once more.
    expect(await sweep(Date.parse(paused) + 1000)).toMatchObject({ submitted: 2, alreadyThere: 0 });
    const calls = await peerLog(token);
    expect(calls.map((c) => [c.method, c.status])).toEqual([
      ["POST", 429],
      ["POST", 503],
      ["GET", 404],
      ["GET", 404],
      ["POST", 201],
    ]);
    expect((await api("/api/v1/transparency-database/settings", { key: apiKey })).body).toMatchObject({ pausedUntil: null, lastError: null, lastStatus: 201 });
  });

  it("a token the database refuses (401) pauses submission with token_rejected; nothing is in doubt", async () => {
    const { apiKey, reportId } = await setup();
    const wrong = `wrong-${crypto.randomUUID()}`;
    await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { token: wrong, enabled: true } });
    const [id] = await decideMany(apiKey, reportId, ["Scam with a bad token."]);
    expect(await sweep()).toMatchObject({ failedCalls: 1, submitted: 0 });
    const settings = (await api("/api/v1/transparency-database/settings", { key: apiKey })).body;
    expect(settings).toMatchObject({ lastStatus: 401, lastError: "token_rejected", baseUrl: "https://tdb.test", tokenSet: true });
    expect(JSON.stringify(settings)).not.toContain(wrong);
    expect(await submission(apiKey, id!)).toMatchObject({ state: "pending", inDoubt: false, lastStatus: 401 });
  });

  it("another installation's submissions are a 404, its list is empty, and its sweep never sends them", async () => {
    const a = await setup();
    const [decisionId] = await decideMany(a.apiKey, a.reportId, ["Scam for A."]);
    const b = await newInstallation();
    expect((await api(`/api/v1/transparency-database/submissions/${decisionId}`, { key: b.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/transparency-database/submissions/${decisionId}/resubmit`, { key: b.apiKey, body: {} })).status).toBe(404);
    expect((await api("/api/v1/transparency-database/submissions", { key: b.apiKey })).body.items).toEqual([]);
    const bToken = `tdb-${crypto.randomUUID()}`;
    await api("/api/v1/transparency-database/settings", { method: "PUT", key: b.apiKey, body: { baseUrl: "https://tdb.test", token: bToken, enabled: true } });
    expect((await api("/api/v1/transparency-database/submit", { method: "POST", key: b.apiKey })).body).toMatchObject({ batches: 0, submitted: 0 });
    expect(await peerLog(bToken)).toEqual([]);
    expect((await api("/api/v1/transparency-database/submit", { method: "POST", key: a.apiKey })).body).toMatchObject({ batches: 1, submitted: 1 });
    expect((await peerStore(a.token)).statements.map((s) => s.puid)).toEqual([decisionId]);
  });
});

describe("Transparency Database: statements as the database reads them", () => {
  const voluntaryReport = async (apiKey: string) => {
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `own-${crypto.randomUUID().slice(0, 8)}` }, category: "scams_and_fraud", source: "voluntary" } });
    expect(report.status).toBe(201);
    return report.body.id as string;
  };

  it("a statement longer than the database's 2,000-character explanation is refused here, then submitted once resubmitted with a shorter explanation", async () => {
    const { apiKey, token, reportId } = await setup();
    const long = `The advert promised returns of 40% a week. ${"It named no company and no licence. ".repeat(70)}`.trim();
    expect(long.length).toBeGreaterThan(2000);
    const id = await decide(apiKey, reportId, long);
    await sweep();
    expect(await submission(apiKey, id)).toMatchObject({ state: "rejected", rejectedBy: "platform", errorCode: "transparency_db.statement_invalid" });
    expect((await peerLog(token)).filter((c) => c.method === "POST")).toHaveLength(0);
    // The statement as the API renders it says why, with a 4xx, not a 5xx.
    const rendered = await api(`/api/v1/decisions/${id}/statement-of-reasons`, { key: apiKey });
    expect(rendered.status).toBe(409);
    expect(rendered.body.error.code).toBe("statement_of_reasons.invalid");

    const again = await api(`/api/v1/transparency-database/submissions/${id}/resubmit`, { key: apiKey, body: { explanation: "A fraudulent investment advert, removed under our terms on fraud." } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    await sweep();
    expect(await submission(apiKey, id)).toMatchObject({ state: "submitted", confirmedBy: "created" });
    const stored = (await peerStore(token)).statements.find((s) => s.puid === id)!;
    expect(stored.decision_facts).toBe(long);
    expect(stored.incompatible_content_explanation).toBe("A fraudulent investment advert, removed under our terms on fraud.");
  });

  it("texts are read as the database reads them (trimmed, blank is absent): an explanation of blanks is refused here and never sent", async () => {
    const { apiKey, token, reportId } = await setup();
    await peerPlan(token, { refuseFacts: "REFUSE-ME" });
    const id = await decide(apiKey, reportId, "A scam advert. REFUSE-ME");
    await sweep();
    expect(await submission(apiKey, id)).toMatchObject({ state: "rejected", rejectedBy: "database" });
    const posts = (await peerLog(token)).filter((c) => c.method === "POST").length;
    expect((await api(`/api/v1/transparency-database/submissions/${id}/resubmit`, { key: apiKey, body: { decisionFacts: "A scam advert.", explanation: "    " } })).status).toBe(200);
    await sweep();
    const refused = await submission(apiKey, id);
    expect(refused).toMatchObject({ state: "rejected", rejectedBy: "platform", errorCode: "transparency_db.statement_invalid" });
    expect(JSON.stringify(refused.errors)).toContain("incompatible_content_explanation");
    expect((await peerLog(token)).filter((c) => c.method === "POST")).toHaveLength(posts);
  });

  it("a legal or contractual ground of blanks is refused when the decision is made, with the field to fix", async () => {
    const { apiKey, reportId } = await setup();
    const illegal = await api("/api/v1/decisions", { key: apiKey, body: { reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Fraud.", ground: "illegal_content", legalGround: "   " } });
    expect(illegal.status).toBe(422);
    expect(illegal.body.error.code).toBe("decision.config_invalid");
    expect(JSON.stringify(illegal.body.error.details)).toContain("$.legalGround");
    const contractual = await api("/api/v1/decisions", { key: apiKey, body: { reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "Fraud.", contractualGround: " \t " } });
    expect(contractual.status).toBe(422);
    expect(JSON.stringify(contractual.body.error.details)).toContain("$.contractualGround");
    // Facts of blanks are no facts: the database would read them as absent.
    const blankFacts = await api("/api/v1/decisions", { key: apiKey, body: { reportId, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: "   " } });
    expect(blankFacts.status).toBe(422);
    expect(blankFacts.body.error.code).toBe("decision.config_invalid");
  });

  it("the statement carries the clause of the terms relied on, the content's own date, and automated detection only where automation detected it", async () => {
    const { apiKey, token } = await setup();
    const own = await voluntaryReport(apiKey);
    // A person's decision on their own initiative: detected by people unless they say otherwise.
    const byPerson = await api("/api/v1/decisions", {
      key: await personKey(apiKey, "Pat Person"),
      body: { reportId: own, outcome: "removed_scam", restrictions: { visibility: ["content_removed"] }, statement: "A fraudulent advert.", contractualGround: "Terms § 4.2: no fraudulent offers", contentDate: "2026-03-01" },
    });
    expect(byPerson.status, JSON.stringify(byPerson.body)).toBe(201);
    expect(byPerson.body.automatedDetection).toBe(false);
    const person = await personKey(apiKey);
    const flagged = await api("/api/v1/decisions", { key: person, body: { reportId: own, outcome: "removed_scam", restrictions: { visibility: ["content_removed"] }, statement: "Flagged by our classifier.", automatedDetection: true } });
    expect(flagged.status).toBe(201);
    // Automation that found and decided on its own: detected by automation.
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "decide", kind: "decision", config: { outcome: "removed_scam", statement: "Automated removal.", restrictions: { visibility: ["content_removed"] }, content_date: "{{published}}" }, inputMapping: { published: "'2026-02-14'" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "decide"), edge("decide", "recorded", "done")],
    });
    const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: own } });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    const done = await waitForRun(apiKey, run.body.id);
    const automatedId = done.steps.find((s: any) => s.nodeId === "decide").output.decisionId;
    await sweep();
    const stored = new Map((await peerStore(token)).statements.map((s) => [s.puid, s]));
    expect(stored.get(byPerson.body.id)).toMatchObject({ automated_detection: "No", automated_decision: "AUTOMATED_DECISION_NOT_AUTOMATED", content_date: "2026-03-01", incompatible_content_ground: "Terms § 4.2: no fraudulent offers" });
    expect(stored.get(flagged.body.id)).toMatchObject({ automated_detection: "Yes", automated_decision: "AUTOMATED_DECISION_NOT_AUTOMATED" });
    // No clause named: the terms' rules on the category, never the outcome code.
    expect(stored.get(flagged.body.id)!.incompatible_content_ground).not.toBe("removed_scam");
    expect(stored.get(flagged.body.id)!.incompatible_content_ground).toContain("scams and fraud");
    expect(stored.get(automatedId)).toMatchObject({ automated_detection: "Yes", automated_decision: "AUTOMATED_DECISION_FULLY", content_date: "2026-02-14" });
    // A date the content cannot have is refused at decision time.
    const future = await api("/api/v1/decisions", { key: apiKey, body: { reportId: own, outcome: "removed_scam", restrictions: { visibility: ["content_removed"] }, statement: "x", contentDate: "2999-01-01" } });
    expect(future.status).toBe(422);
  });

  it("a decision reversed on appeal before its statement was stored is counted with its uuid once it is", async () => {
    const { apiKey, reportId } = await setup();
    const early = await decide(apiKey, reportId, "Scam, stored before the appeal.");
    await sweep();
    expect(await submission(apiKey, early)).toMatchObject({ state: "submitted" });
    const late = await decide(apiKey, reportId, "Scam, stored after the appeal.");
    for (const decisionId of [early, late]) {
      const filed = await api("/api/v1/appeals", { key: apiKey, body: { decisionId, reason: "I disagree." } });
      expect(filed.status).toBe(201);
      const resolved = await api(`/api/v1/appeals/${filed.body.id}/resolve`, { key: await personKey(apiKey), body: { outcome: "overturned" } });
      expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    }
    await sweep();
    expect(await submission(apiKey, late)).toMatchObject({ state: "submitted" });
    const period = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString() };
    const figures = await api(`/api/v1/transparency-report?from=${encodeURIComponent(period.from)}&to=${encodeURIComponent(period.to)}`, { key: apiKey });
    expect(figures.status).toBe(200);
    expect(figures.body.sections.complaints.reversalsRecorded).toMatchObject({ reversed: 2, withStatementUuid: 2 });
  });

  it("a batch settled wholly by lookups (after a lost response) starts the failure count over", async () => {
    const { installationId, apiKey, token, reportId } = await setup();
    await peerPlan(token, { plan: [{ lost: true }] });
    await decideMany(apiKey, reportId, ["Scam one.", "Scam two."]);
    const now = Date.now();
    await sweep(now);
    const failures = async () => (await env.DB.prepare("SELECT failures, paused_until AS pausedUntil FROM tdb_settings WHERE installation_id = ?1").bind(installationId).first<{ failures: number; pausedUntil: string }>())!;
    const paused = await failures();
    expect(paused.failures).toBe(1);
    const settled = await sweep(Date.parse(paused.pausedUntil) + 1000);
    expect(settled).toMatchObject({ alreadyThere: 2, submitted: 0 });
    expect((await peerLog(token)).filter((c) => c.method === "POST")).toHaveLength(1);
    expect((await failures()).failures).toBe(0);
  });
});
