// Case management end to end: intake → trigger → run → task → claim → complete → run resumes.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openPersonalData, rewrapDataKeys, sealPersonalData } from "../src/cases/reports/report-crypto";
import { api, personKey, edge, newInstallation, publish, waitForRun } from "./helpers";

const reviewSchema = {
  type: "object",
  required: ["verdict"],
  additionalProperties: false,
  properties: { verdict: { enum: ["remove", "keep"] }, note: { type: "string", maxLength: 500 } },
};

function reviewGraph(queue: string, timeoutSeconds = 3600) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue, response_schema: reviewSchema, timeout_seconds: timeoutSeconds }, inputMapping: { category: "report.category", subject: "input.report.subject.id" } },
      { id: "verdict", kind: "condition", config: { cases: [{ port: "remove", when: "steps.review.event.payload.response.verdict == 'remove'" }], case_ports: ["remove"], default_port: "keep" } },
      { id: "removed", kind: "end", config: { terminal_code: "removed" } },
      { id: "kept", kind: "end", config: { terminal_code: "kept" } },
      { id: "expired", kind: "end", config: { terminal_code: "expired" } },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "verdict"), edge("review", "timeout", "expired"), edge("verdict", "remove", "removed"), edge("verdict", "keep", "kept")],
  };
}

const reportBody = (subjectId: string, extra: Record<string, unknown> = {}) => ({
  subject: { kind: "content", id: subjectId, url: `https://example.social/p/${subjectId}`, snapshot: { text: "buy cheap pills at scam.example" } },
  category: "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
  reporter: { id: "user-4242", contact: "reporter.person@example.org" },
  description: "This account keeps posting scam links to my DMs",
  evidence: [{ kind: "screenshot", text: "screenshot of the DM from user-4242" }],
  ...extra,
});

async function setup(options: { timeoutSeconds?: number; when?: string } = {}) {
  const { apiKey } = await newInstallation();
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: "scams", slaSeconds: 3600, priority: 5 } });
  expect(queue.status).toBe(201);
  const version = await publish(apiKey, reviewGraph("scams", options.timeoutSeconds));
  const trigger = await api("/api/v1/triggers", {
    key: apiKey,
    body: { event: "report.created", when: options.when ?? "report.category == 'scams_and_fraud'", workflowVersionId: version.id, authorityMode: "autonomous" },
  });
  expect(trigger.status).toBe(201);
  const intake = await api("/api/v1/api-keys", { key: apiKey, body: { name: "product", scopes: ["reports:write"] } });
  const reviewer = await api("/api/v1/api-keys", { key: apiKey, body: { name: "console", scopes: ["review", "personal_data:read"] } });
  return { apiKey, queueId: queue.body.id as string, versionId: version.id, intakeKey: intake.body.apiKey as string, reviewKey: reviewer.body.apiKey as string };
}

async function waitForTask(key: string, queueId: string, timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api(`/api/v1/queues/${queueId}/tasks`, { key });
    if (body.items?.length) return body.items[0];
    if (Date.now() > deadline) throw new Error("no task appeared");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("intake to decision", () => {
  it("a report triggers a run whose task is claimed, answered, and resumes the run", async () => {
    const { apiKey, queueId, intakeKey, reviewKey } = await setup();
    const intake = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-1") });
    expect(intake.status).toBe(201);
    expect(intake.body).toMatchObject({ category: "scams_and_fraud", subject: { kind: "content", id: "post-1" }, caseReportCount: 1 });
    expect(intake.body.runs).toHaveLength(1);
    const runId = intake.body.runs[0].runId;
    const task = await waitForTask(reviewKey, queueId);
    // Listings never carry the sealed context; reading the task opens it.
    expect(task).toMatchObject({ runId, reportId: intake.body.id, state: "open", priority: 5, context: null, contextSealed: true });
    expect((await api(`/api/v1/tasks/${task.id}`, { key: reviewKey })).body.context).toEqual({ category: "scams_and_fraud", subject: "post-1" });
    expect(Date.parse(task.dueAt) - Date.parse(task.createdAt)).toBe(3_600_000);
    const claimed = await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "mod-ana" } });
    expect(claimed.status).toBe(200);
    expect(claimed.body.claim.reviewer).toBe("mod-ana");
    const done = await api(`/api/v1/tasks/${task.id}/complete`, { key: reviewKey, body: { reviewer: "mod-ana", response: { verdict: "remove", note: "scam" } } });
    expect(done.status).toBe(200);
    expect(done.body.state).toBe("completed");
    const run = await waitForRun(apiKey, runId);
    expect(run.state).toBe("succeeded");
    expect(run.output.terminalCode).toBe("removed");
    expect(run.steps.find((s: any) => s.nodeId === "review").output).toMatchObject({ port: "completed", event: { payload: { reviewer: "mod-ana", response: { verdict: "remove" } } } });
    const timeline = await api(`/api/v1/reports/${intake.body.id}/timeline`, { key: reviewKey });
    expect(timeline.status).toBe(200);
    expect(timeline.body.items.map((item: any) => item.kind)).toEqual(expect.arrayContaining(["report", "run", "task"]));
    expect(timeline.body.items[0].kind).toBe("report");
    const stats = await api(`/api/v1/queues/${queueId}/stats`, { key: reviewKey });
    expect(stats.body).toMatchObject({ open: 0, claimed: 0, breachedSla: 0, timeToComplete: { sample: 1 } });
    expect(stats.body.timeToComplete.p50Seconds).toBeGreaterThanOrEqual(0);
  });

  it("intake answers the report as a read of it does, and a queue's tasks and /next tell an unknown queue (404) from an empty one", async () => {
    const { apiKey, queueId, intakeKey, reviewKey } = await setup({ when: "false" });
    const first = await api("/api/v1/reports", { key: intakeKey, body: { ...reportBody("post-read"), categorySpecification: ["KEYWORD_PHISHING"] } });
    const second = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-read", { evidence: [] }) });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body).toMatchObject({ caseId: first.body.caseId, caseReportCount: 2, evidenceCount: 0 });
    for (const intake of [first, second]) {
      const { runs: _runs, ...summary } = intake.body;
      const read = await api(`/api/v1/reports/${intake.body.id}`, { key: apiKey });
      // The read opens the subject's sealed fields too; the case has two reports by now.
      expect(read.body).toMatchObject({ ...summary, caseReportCount: 2 });
    }
    expect((await api(`/api/v1/queues/${queueId}/tasks`, { key: reviewKey })).body).toEqual({ items: [], nextCursor: null });
    const code = async (path: string, body?: unknown) => (await api(path, { key: reviewKey, ...(body ? { body } : {}) })).body.error?.code;
    expect(await code("/api/v1/queues/q_unknown/tasks")).toBe("queue.not_found");
    expect(await code("/api/v1/queues/q_unknown/tasks?cursor=nonsense")).toBe("queue.not_found");
    expect(await code(`/api/v1/queues/${queueId}/tasks?cursor=nonsense`)).toBe("request.invalid_cursor");
    expect(await code("/api/v1/queues/q_unknown/next", { reviewer: "mod-ana" })).toBe("queue.not_found");
    expect(await code(`/api/v1/queues/${queueId}/next`, { reviewer: "mod-ana" })).toBe("queue.empty");
  });

  it("a report the trigger's condition does not match starts nothing", async () => {
    const { intakeKey } = await setup();
    const intake = await api("/api/v1/reports", { key: intakeKey, body: { ...reportBody("post-x"), category: "animal_welfare" } });
    expect(intake.status).toBe(201);
    expect(intake.body.runs).toEqual([]);
  });

  it("an unanswered task expires through the timeout port", async () => {
    const { apiKey, intakeKey, queueId, reviewKey } = await setup({ timeoutSeconds: 1 });
    const intake = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-2") });
    const run = await waitForRun(apiKey, intake.body.runs[0].runId);
    expect(run.output.terminalCode).toBe("expired");
    const expired = await api(`/api/v1/queues/${queueId}/tasks?state=expired`, { key: reviewKey });
    expect(expired.body.items).toHaveLength(1);
  });
});

describe("leases", () => {
  it("two concurrent claims give exactly one lease", async () => {
    const { intakeKey, queueId, reviewKey } = await setup();
    await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-3") });
    const task = await waitForTask(reviewKey, queueId);
    const claims = await Promise.all(["mod-a", "mod-b", "mod-c"].map((reviewer) => api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer } })));
    expect(claims.map((c) => c.status).sort()).toEqual([200, 409, 409]);
    const losers = claims.filter((c) => c.status === 409);
    for (const loser of losers) expect(loser.body.error.code).toBe("task.already_claimed");
    const winner = claims.find((c) => c.status === 200)!.body.claim.reviewer;
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'task.claimed' AND target_id = ?").bind(task.id).first<{ n: number }>();
    expect(audit?.n).toBe(1);
    // The holder can renew; the others still cannot take it.
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: winner } })).status).toBe(200);
  });

  it("an expired lease makes the task claimable again; release gives it back", async () => {
    const { intakeKey, queueId, reviewKey } = await setup();
    await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-4") });
    const task = await waitForTask(reviewKey, queueId);
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "mod-a", leaseSeconds: 30 } })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "mod-b" } })).status).toBe(409);
    // Time passes: the lease ends.
    await env.DB.prepare("UPDATE human_tasks SET lease_expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?").bind(task.id).run();
    expect((await api(`/api/v1/tasks/${task.id}`, { key: reviewKey })).body.state).toBe("open");
    const late = await api(`/api/v1/tasks/${task.id}/complete`, { key: reviewKey, body: { reviewer: "mod-a", response: { verdict: "keep" } } });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe("task.lease_required");
    const taken = await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "mod-b" } });
    expect(taken.status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/release`, { key: reviewKey, body: { reviewer: "mod-a" } })).status).toBe(409);
    expect((await api(`/api/v1/tasks/${task.id}/release`, { key: reviewKey, body: { reviewer: "mod-b" } })).body.state).toBe("open");
  });

  it("an invalid response gets 422 with its failing paths, and nothing changes", async () => {
    const { apiKey, intakeKey, queueId, reviewKey } = await setup();
    const intake = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-5") });
    const task = await waitForTask(reviewKey, queueId);
    await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "mod-a" } });
    const bad = await api(`/api/v1/tasks/${task.id}/complete`, { key: reviewKey, body: { reviewer: "mod-a", response: { verdict: "delete-everything", extra: 1 } } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("task.response_invalid");
    expect(bad.body.error.details.map((d: any) => d.path)).toEqual(expect.arrayContaining(["$.verdict"]));
    const after = await api(`/api/v1/tasks/${task.id}`, { key: reviewKey });
    expect(after.body).toMatchObject({ state: "claimed", response: null });
    const events = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_events WHERE run_id = ?").bind(intake.body.runs[0].runId).first<{ n: number }>();
    expect(events?.n).toBe(0);
    expect((await api(`/api/v1/runs/${intake.body.runs[0].runId}`, { key: apiKey })).body.state).toBe("waiting");
  });
});

describe("intake", () => {
  it("an Idempotency-Key in the form the platform gives its rules' and connectors' reports is refused (422), and writes nothing", async () => {
    const { intakeKey, reviewKey } = await setup();
    const refused = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-reserved"), headers: { "idempotency-key": "rule:rsv_1:r1:evt-1001" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("report.idempotency_key_reserved");
    // A connector's form is not even a well-formed key for a client.
    expect((await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-reserved"), headers: { "idempotency-key": "#connector:ep_1:42" } })).status).toBe(400);
    expect((await api("/api/v1/reports?subjectId=post-reserved", { key: reviewKey })).body.items).toEqual([]);
  });

  it("the same Idempotency-Key gives one report; a different body with it is a 409", async () => {
    const { intakeKey, reviewKey } = await setup();
    const first = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-6"), headers: { "idempotency-key": "product-report-77" } });
    const again = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-6"), headers: { "idempotency-key": "product-report-77" } });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect(again.body.runs[0].runId).toBe(first.body.runs[0].runId);
    const conflict = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-7"), headers: { "idempotency-key": "product-report-77" } });
    expect(conflict.status).toBe(409);
    const reports = await api(`/api/v1/reports?caseId=${first.body.caseId}`, { key: reviewKey });
    expect(reports.body.items).toHaveLength(1);
    // The request's digest is kept for a key's replays only: a report sent without a key keeps none.
    const unkeyed = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-8") });
    expect(unkeyed.status).toBe(201);
    const digests = await env.DB.prepare("SELECT id, request_digest AS digest FROM reports WHERE id IN (?1, ?2)").bind(first.body.id, unkeyed.body.id).all<{ id: string; digest: string | null }>();
    expect(Object.fromEntries(digests.results.map((row) => [row.id, row.digest]))).toEqual({ [first.body.id]: expect.stringMatching(/^sha256:[0-9a-f]{64}$/u), [unkeyed.body.id]: "" });
  });

  it("reports about the same subject share a case that counts them", async () => {
    const { intakeKey, reviewKey } = await setup({ when: "false" });
    const a = await api("/api/v1/reports", { key: intakeKey, body: reportBody("acct-9", { subject: { kind: "account", id: "acct-9" } }) });
    const b = await api("/api/v1/reports", { key: intakeKey, body: { ...reportBody("acct-9", { subject: { kind: "account", id: "acct-9" } }), category: "reasonHarassmentDoxxing" } });
    const c = await api("/api/v1/reports", { key: intakeKey, body: reportBody("other") });
    expect(b.body.caseId).toBe(a.body.caseId);
    expect(b.body.category).toBe("data_protection_and_privacy_violations");
    expect(b.body.caseReportCount).toBe(2);
    expect(c.body.caseId).not.toBe(a.body.caseId);
    const kase = await api(`/api/v1/cases/${a.body.caseId}`, { key: reviewKey });
    expect(kase.body).toMatchObject({ subjectKind: "account", subjectId: "acct-9", reportCount: 2 });
    const unknown = await api("/api/v1/reports", { key: intakeKey, body: { ...reportBody("x"), category: "bad vibes" } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.code).toBe("report.category_unknown");
  });

  it("the D1 rows of a report hold no plaintext personal data; authorized reads decrypt it", async () => {
    const { intakeKey, reviewKey, apiKey } = await setup();
    const intake = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-8") });
    const secrets = ["reporter.person@example.org", "user-4242", "keeps posting scam links", "scam.example", "https://example.social/p/post-8", "screenshot of the DM"];
    const tables = ["reports", "cases", "audit_events", "workflow_runs", "workflow_step_runs", "workflow_step_outputs", "human_tasks", "workflow_events", "data_keys"];
    for (const table of tables) {
      const { results } = await env.DB.prepare(`SELECT * FROM ${table}`).all();
      const dump = JSON.stringify(results);
      for (const secret of secrets) expect(dump.includes(secret), `${table} holds "${secret}"`).toBe(false);
    }
    const read = await api(`/api/v1/reports/${intake.body.id}`, { key: reviewKey });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ reporter: { known: true, revealed: false }, description: "This account keeps posting scam links to my DMs", subject: { url: "https://example.social/p/post-8" } });
    expect(JSON.stringify(read.body)).not.toContain("reporter.person@example.org");
    expect((await api(`/api/v1/reports/${intake.body.id}`, { key: intakeKey })).status).toBe(403);
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'report.personal_data_viewed' AND target_id = ?").bind(intake.body.id).first<{ n: number }>();
    expect(audit?.n).toBe(1);
    expect(apiKey).toBeTruthy();
  });

  it("rotating the data key keeps old reports readable and seals new ones with the new key", async () => {
    const { apiKey, intakeKey, reviewKey } = await setup({ when: "false" });
    const before = await api("/api/v1/reports", { key: intakeKey, body: reportBody("rot-1") });
    // Two keys so far: the period's, and the installation's own (it wraps the reporter's key).
    const { installationId } = (await env.DB.prepare("SELECT installation_id AS installationId FROM reports WHERE id = ?1").bind(before.body.id).first<{ installationId: string }>())!;
    const versions = await env.DB.prepare("SELECT MAX(version) AS v FROM data_keys WHERE installation_id = ?1").bind(installationId).first<{ v: number }>();
    expect(versions!.v).toBe(2);
    const rotated = await api("/api/v1/data-keys/rotate", { key: apiKey, method: "POST" });
    expect(rotated.status).toBe(201);
    expect(rotated.body.version).toBe(3);
    const after = await api("/api/v1/reports", { key: intakeKey, body: reportBody("rot-2") });
    const keys = await env.DB.prepare("SELECT data_key_id AS k FROM reports WHERE id IN (?, ?) ORDER BY created_at").bind(before.body.id, after.body.id).all<{ k: string }>();
    expect(keys.results[0]!.k).not.toBe(keys.results[1]!.k);
    expect((await api(`/api/v1/reports/${before.body.id}`, { key: reviewKey })).body.description).toContain("scam links");
    expect((await api(`/api/v1/reports/${after.body.id}`, { key: reviewKey })).body.description).toContain("scam links");
  });

  it("a new master key takes over after rewrapping; sealed data stays readable and bound to its row", async () => {
    const { id: installationId } = await newInstallation();
    const sealed = await sealPersonalData(env, installationId, "report:r1", { contact: "a@b.c" });
    const rolled = { ...env, REPORT_MASTER_KEY: "the-next-master-key-0123456789abcdef0123456789", REPORT_MASTER_KEY_PREVIOUS: env.REPORT_MASTER_KEY } as Env;
    const result = await rewrapDataKeys(rolled);
    expect(result.rewrapped).toBeGreaterThan(0);
    const onlyNew = { ...env, REPORT_MASTER_KEY: rolled.REPORT_MASTER_KEY } as Env;
    expect(await openPersonalData(onlyNew, installationId, "report:r1", sealed.sealed)).toEqual({ contact: "a@b.c" });
    await expect(openPersonalData(onlyNew, installationId, "report:r2", sealed.sealed)).rejects.toMatchObject({ code: "crypto.open_failed" });
    // Put the test master key back for the other tests of this file.
    await rewrapDataKeys({ ...env, REPORT_MASTER_KEY_PREVIOUS: rolled.REPORT_MASTER_KEY } as Env);
  });
});

describe("access", () => {
  it("wrong scopes get 403 and another installation gets 404", async () => {
    const { intakeKey, reviewKey, queueId } = await setup();
    const intake = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-9") });
    const task = await waitForTask(reviewKey, queueId);
    expect((await api("/api/v1/reports", { key: reviewKey, body: reportBody("p") })).body.error.code).toBe("auth.scope_missing");
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: intakeKey, body: {} })).status).toBe(403);
    expect((await api("/api/v1/queues", { key: reviewKey, body: { name: "x", slaSeconds: 60 } })).status).toBe(403);
    const other = await newInstallation("other");
    for (const path of [`/api/v1/reports/${intake.body.id}`, `/api/v1/tasks/${task.id}`, `/api/v1/queues/${queueId}/tasks`, `/api/v1/queues/${queueId}/stats`, `/api/v1/cases/${intake.body.caseId}`]) {
      const response = await api(path, { key: other.apiKey });
      expect(response.status, path).toBe(404);
    }
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: other.apiKey, body: {} })).status).toBe(404);
  });
});

describe("queue listing", () => {
  it("orders by due date, then priority, with a cursor", async () => {
    const { apiKey, queueId, reviewKey } = await setup({ when: "false" });
    const { results } = await env.DB.prepare("SELECT installation_id AS i FROM queues WHERE id = ?").bind(queueId).all<{ i: string }>();
    const installationId = results[0]!.i;
    const version = await publish(apiKey, reviewGraph("scams"));
    const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous" } });
    const rows = [
      ["t-late", "2030-01-02T00:00:00.000Z", 0],
      ["t-early-low", "2030-01-01T00:00:00.000Z", 1],
      ["t-early-high", "2030-01-01T00:00:00.000Z", 9],
      ["t-mid", "2030-01-01T12:00:00.000Z", 5],
    ] as const;
    for (const [id, due, priority] of rows) {
      await env.DB.prepare("INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, branch_key, state, updated_at) VALUES (?1, ?2, ?1, 'human_task', '', 'waiting', ?3)").bind(id, run.body.id, due).run();
      await env.DB.prepare(`INSERT INTO human_tasks (id, installation_id, run_id, step_run_id, task_type, state, queue_id, priority, context_json, context_digest, response_schema_json, due_at, created_at, updated_at)
        VALUES (?1, ?2, ?3, ?1, 'review', 'open', ?4, ?5, '{}', 'x', '{}', ?6, ?6, ?6)`)
        .bind(id, installationId, run.body.id, queueId, priority, due)
        .run();
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await api(`/api/v1/queues/${queueId}/tasks?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { key: reviewKey });
      seen.push(...page.body.items.map((t: any) => t.id).filter((id: string) => id.startsWith("t-")));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(["t-early-high", "t-early-low", "t-mid", "t-late"]);
    const next = await api(`/api/v1/queues/${queueId}/next`, { key: reviewKey, body: { reviewer: "mod-z" } });
    expect(next.body.id).not.toBe("t-late");
  });
});

describe("appeals", () => {
  it("an appeal starts the appeal workflow, its task carries the appeal, and the outcome is recorded", async () => {
    const { apiKey, intakeKey } = await setup({ when: "false" });
    // A complaint is decided by a person: a reviewer's key.
    const reviewKey = await personKey(apiKey, "senior-mod");
    const appealsQueue = await api("/api/v1/queues", { key: apiKey, body: { name: "appeals", slaSeconds: 86_400 } });
    const schema = { type: "object", required: ["outcome"], properties: { outcome: { enum: ["upheld", "overturned"] } } };
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "second-look", kind: "human_task", config: { queue_id: "appeals", response_schema: schema } },
        { id: "done", kind: "end", config: { terminal_code: "appeal_reviewed" } },
      ],
      edges: [edge("start", "success", "second-look"), edge("second-look", "completed", "done"), edge("second-look", "timeout", "done")],
    });
    await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const report = await api("/api/v1/reports", { key: intakeKey, body: reportBody("post-10") });
    const appeal = await api("/api/v1/appeals", { key: intakeKey, body: { reportId: report.body.id, appellant: { id: "author-1", contact: "author@example.net" }, reason: "It was satire, not a scam." } });
    expect(appeal.status).toBe(201);
    expect(appeal.body.state).toBe("open");
    const task = await waitForTask(reviewKey, appealsQueue.body.id);
    expect(task.appealId).toBe(appeal.body.id);
    expect(task.reportId).toBe(report.body.id);
    await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "senior-mod" } });
    const done = await api(`/api/v1/tasks/${task.id}/complete`, { key: reviewKey, body: { reviewer: "senior-mod", response: { outcome: "overturned" } } });
    expect(done.status).toBe(200);
    const read = await api(`/api/v1/appeals/${appeal.body.id}`, { key: reviewKey });
    expect(read.body).toMatchObject({ state: "overturned", outcome: "overturned", decidedBy: "senior-mod", reason: "It was satire, not a scam.", appellant: { contact: "author@example.net" } });
    const run = await waitForRun(apiKey, appeal.body.runs[0].runId);
    expect(run.state).toBe("succeeded");
    const dump = JSON.stringify((await env.DB.prepare("SELECT * FROM appeals").all()).results);
    expect(dump).not.toContain("satire");
    expect(dump).not.toContain("author@example.net");
    const again = await api(`/api/v1/appeals/${appeal.body.id}/resolve`, { key: reviewKey, body: { outcome: "upheld" } });
    expect(again.status).toBe(409);
  });
});
