// Bulk actions: a dry run counts and writes nothing; in assisted mode the whole waits for one
// approval; a bulk action killed halfway (runs started, their record lost) resumes from the
// schedule's sweep without a second run or a second delivery for any subject; a search's subjects
// are the installation's own.
import { createExecutionContext, env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sweepBulkActions } from "../src/accounts";
import { subjectsOf } from "../src/accounts/bulk-action-input";
import type { Actor } from "../src/auth";
import { api, newInstallation, personKey, receiverLog, until } from "./helpers";

/** An ExecutionContext with the Worker's exports, as the scheduled event gets one (starting an instance needs them). */
function scheduledContext(): ExecutionContext {
  const ctx = createExecutionContext();
  if (!(ctx as { exports?: unknown }).exports) Object.defineProperty(ctx, "exports", { value: exports });
  return ctx;
}

async function desk(path: string, authorityMode: "assisted" | "autonomous") {
  const { id: installationId, apiKey } = await newInstallation("bulk");
  const endpoint = await api("/api/v1/webhook-endpoints", { key: apiKey, body: { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 } });
  await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.body.secret }) });
  expect((await api("/api/v1/action-types", { key: apiKey, body: { key: "remove_post", name: "Remove", endpointId: endpoint.body.id } })).status).toBe(201);
  const policy = await api("/api/v1/strike-policy", { key: apiKey, method: "PUT", body: { categories: {}, expiryDays: 30, authorityMode, ladder: [] } });
  expect(policy.status).toBe(200);
  return { installationId, apiKey };
}

/** The decision's own category: some subjects have no report to take it from. */
const SPAM = { policyCategory: "scams_and_fraud" };

const count = async (sql: string, ...binds: unknown[]) =>
  (
    await env.DB.prepare(sql)
      .bind(...binds)
      .first<{ n: number }>()
  )?.n ?? 0;

describe("bulk actions", () => {
  it("a search that would need more than its bound of pages to name its subjects is refused (422 bulk_action.search_too_broad), not read to its end", async () => {
    const { id: installationId, apiKey } = await newInstallation("bulk-broad");
    // Five reports about one subject: pages of two reports name it again and again.
    for (let i = 0; i < 5; i++) {
      const filed = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "ring-1" }, category: "scams_and_fraud", description: `Same scam, take ${i}` } });
      expect(filed.status).toBe(201);
    }
    const actor: Actor = { installationId, scopes: ["admin"], audit: { type: "admin", id: "test" } };
    const input = { search: { category: "scams_and_fraud" }, actionType: "remove_post", reason: "Spam wave", dryRun: true };
    // Three pages of two hold all five: read to the end.
    expect(await subjectsOf(env, actor, input, { max: 3, size: 2 })).toEqual([{ kind: "content", id: "ring-1" }]);
    // Two pages leave one report unread: refused, with a code.
    const refused = await subjectsOf(env, actor, input, { max: 2, size: 2 }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ code: "bulk_action.search_too_broad", status: 422 });
  });

  it("a dry run counts the subjects and writes nothing; a search names the installation's own subjects", async () => {
    const { installationId, apiKey } = await desk("/ok/bulk-dry", "autonomous");
    const other = await newInstallation("bulk-other");
    for (const [key, subjectId] of [
      [apiKey, "spam-1"],
      [other.apiKey, "spam-elsewhere"],
    ] as const) {
      const filed = await api("/api/v1/reports", { key, body: { subject: { kind: "content", id: subjectId }, category: "scams_and_fraud", description: "Buy cheap followers now" } });
      expect(filed.status).toBe(201);
    }
    const dry = await api("/api/v1/bulk-actions", {
      key: apiKey,
      body: {
        subjects: [
          { kind: "content", id: "spam-1" },
          { kind: "content", id: "spam-2" },
          { kind: "content", id: "spam-1" },
        ],
        actionType: "remove_post",
        reason: "Spam wave",
        decision: SPAM,
        dryRun: true,
      },
    });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ dryRun: true, subjects: 2, withCase: 1, withoutCase: 1, authorityMode: "autonomous" });
    const bySearch = await api("/api/v1/bulk-actions", { key: apiKey, body: { search: { q: "cheap followers" }, actionType: "remove_post", reason: "Spam wave", dryRun: true } });
    expect(bySearch.body).toMatchObject({ subjects: 1, withCase: 1 });
    expect(await count(`SELECT COUNT(*) AS n FROM bulk_actions WHERE installation_id = ?1`, installationId)).toBe(0);
    expect(await count(`SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1`, installationId)).toBe(0);
    // Acting on the search: only this installation's subject, though another's report says the same.
    const acted = await api("/api/v1/bulk-actions", { key: apiKey, body: { search: { q: "cheap followers" }, actionType: "remove_post", reason: "Spam wave" } });
    expect(acted.status).toBe(201);
    const items = await env.DB.prepare(`SELECT subject_id AS subjectId FROM bulk_action_items WHERE bulk_action_id = ?1`).bind(acted.body.id).all<{ subjectId: string }>();
    expect(items.results.map((item) => item.subjectId)).toEqual(["spam-1"]);
  });

  it("waits for one approval in assisted mode, by a person other than the creator's, then acts on every subject", async () => {
    const { apiKey } = await desk("/ok/bulk-assisted", "assisted");
    const created = await api("/api/v1/bulk-actions", {
      key: apiKey,
      body: {
        subjects: [
          { kind: "content", id: "a-1" },
          { kind: "content", id: "a-2" },
        ],
        actionType: "remove_post",
        reason: "Spam wave",
        decision: SPAM,
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ state: "approval_required", total: 2, started: 0 });
    // Four eyes: the creator's own approval is refused; so is an automation key's the creator mints
    // (no person behind it), and a person's other key; another person's goes through.
    const own = await api(`/api/v1/bulk-actions/${created.body.id}/approve`, { key: apiKey, method: "POST" });
    expect(own.status).toBe(403);
    expect(own.body.error.code).toBe("bulk_action.self_approval");
    const minted = (await api("/api/v1/api-keys", { key: apiKey, body: { name: "lead", scopes: ["review"] } })).body.apiKey as string;
    const byAutomation = await api(`/api/v1/bulk-actions/${created.body.id}/approve`, { key: minted, method: "POST" });
    expect(byAutomation.status).toBe(403);
    expect(byAutomation.body.error.code).toBe("bulk_action.approver_not_person");
    expect((await api(`/api/v1/bulk-actions/${created.body.id}`, { key: apiKey })).body).toMatchObject({ state: "approval_required", started: 0 });
    // A bulk action a person created: their second key (the same reviewer, named otherwise cased) is still them.
    const dana = await personKey(apiKey, "Dana Admin");
    const danas = await api("/api/v1/bulk-actions", { key: dana, body: { subjects: [{ kind: "content", id: "d-1" }], actionType: "remove_post", reason: "Spam wave", decision: SPAM } });
    expect(danas.status, JSON.stringify(danas.body)).toBe(201);
    const danaAgain = await personKey(apiKey, " dana admin", ["review"]);
    const byHerself = await api(`/api/v1/bulk-actions/${danas.body.id}/approve`, { key: danaAgain, method: "POST" });
    expect(byHerself.status).toBe(403);
    expect(byHerself.body.error.code).toBe("bulk_action.self_approval");
    expect((await api(`/api/v1/bulk-actions/${danas.body.id}`, { key: apiKey })).body).toMatchObject({ state: "approval_required", started: 0 });
    const approver = await personKey(apiKey, "Lee Lead", ["review"]);
    const approved = await api(`/api/v1/bulk-actions/${created.body.id}/approve`, { key: approver, method: "POST" });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    expect(approved.body).toMatchObject({ state: "completed", started: 2 });
    const again = await api(`/api/v1/bulk-actions/${created.body.id}/approve`, { key: approver, method: "POST" });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("bulk_action.state_conflict");
    const delivered = await until(async () => {
      const log = (await receiverLog("/ok/bulk-assisted")).filter((entry) => entry.type === "action.execute");
      return log.length >= 2 ? log : null;
    }, "both deliveries");
    expect(delivered.map((entry) => entry.data.params.subject.id).sort()).toEqual(["a-1", "a-2"]);
    expect(delivered[0]!.data.params).toMatchObject({ scope: "subject", bulkActionId: created.body.id, reason: "Spam wave" });
  });

  it("resumes a bulk action killed halfway without a second run or delivery for any subject", async () => {
    const path = "/ok/bulk-resume";
    const { installationId, apiKey } = await desk(path, "autonomous");
    const subjects = Array.from({ length: 8 }, (_, i) => ({ kind: "content", id: `wave-${i}` }));
    const created = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason: "Spam wave", decision: SPAM } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // The request started its first slice; a drain after it goes on with the rest.
    expect(created.body).toMatchObject({ state: "running", total: 8, started: 5 });
    const id = created.body.id as string;
    await until(async () => (await api(`/api/v1/bulk-actions/${id}`, { key: apiKey })).body.state === "completed", "the drain to finish");
    // Killed after a run started but before its item was recorded: the item reads as not started, the action as running.
    const lost = await env.DB.prepare(`SELECT run_id AS runId FROM bulk_action_items WHERE bulk_action_id = ?1 AND position = 3`).bind(id).first<{ runId: string }>();
    await env.DB.batch([env.DB.prepare(`UPDATE bulk_action_items SET run_id = NULL WHERE bulk_action_id = ?1 AND position = 3`).bind(id), env.DB.prepare(`UPDATE bulk_actions SET state = 'running', started = 7 WHERE id = ?1`).bind(id)]);

    const swept = await sweepBulkActions(env, new Date(), scheduledContext());
    expect(swept.started).toBe(1);
    const read = await api(`/api/v1/bulk-actions/${id}`, { key: apiKey });
    expect(read.body).toMatchObject({ state: "completed", started: 8, progress: 1 });
    // The lost item got its first run back (the run's Idempotency-Key is the item's), not a second one.
    const resumed = await env.DB.prepare(`SELECT run_id AS runId FROM bulk_action_items WHERE bulk_action_id = ?1 AND position = 3`).bind(id).first<{ runId: string }>();
    expect(resumed!.runId).toBe(lost!.runId);
    expect(await count(`SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND idempotency_key LIKE ?2`, installationId, `bulk_action:${id}:%`)).toBe(8);

    const delivered = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.type === "action.execute");
      return log.length >= 8 ? log : null;
    }, "eight deliveries");
    expect(delivered.map((entry) => entry.data.params.subject.id).sort()).toEqual(subjects.map((s) => s.id).sort());
    expect(await count(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND source_type = 'action'`, installationId)).toBe(8);
    // One audit event per subject.
    expect(await count(`SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'bulk_action.item_started'`, installationId)).toBe(8);
  });

  it("records one decision per subject with its statement of reasons, queued for the Transparency Database, a subject nobody reported decided on the decision's category, and a resumed bulk action doubles neither a delivery nor a decision", async () => {
    const path = "/ok/bulk-decisions";
    const { installationId, apiKey } = await desk(path, "autonomous");
    const other = await newInstallation("bulk-decisions-other");
    const reported = Array.from({ length: 5 }, (_, i) => `spam-post-${i}`);
    for (const id of reported) {
      const filed = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id, ownerId: "spammer" }, category: "scams_and_fraud", description: "Cheap followers" } });
      expect(filed.status).toBe(201);
    }
    // Another installation's report on a subject of the same id: not a report here (the subject is unreported here).
    const foreign = await api("/api/v1/reports", { key: other.apiKey, body: { subject: { kind: "content", id: "foreign-post" }, category: "scams_and_fraud" } });
    expect(foreign.status).toBe(201);
    const unreported = ["foreign-post", "unreported-post"];
    const subjects = [...reported, ...unreported].map((id) => ({ kind: "content", id }));
    const reason = "Part of a coordinated spam wave selling fake followers.";

    const invalid = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason, decision: { ground: "illegal_content" } } });
    expect(invalid.status).toBe(422);
    expect(invalid.body.error.code).toBe("bulk_action.decision_invalid");
    expect(invalid.body.error.details).toContainEqual(expect.objectContaining({ path: "$.decision.legalGround" }));
    // A restriction of subjects nobody reported here needs the decision's category (no report gives it), in a dry run too.
    for (const dryRun of [true, false]) {
      const uncategorised = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason, dryRun } });
      expect(uncategorised.status).toBe(422);
      expect(uncategorised.body.error.code).toBe("bulk_action.policy_category_required");
      expect(uncategorised.body.error.details).toContainEqual(expect.objectContaining({ path: "$.decision.policyCategory" }));
    }
    expect(await count(`SELECT COUNT(*) AS n FROM bulk_actions WHERE installation_id = ?1`, installationId)).toBe(0);
    const dry = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason, decision: SPAM, dryRun: true } });
    expect(dry.body).toMatchObject({ subjects: 7, withCase: 5, withoutCase: 2, decisions: { outcome: "content_removed", restricts: true, subjects: 7 } });

    const created = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason, decision: SPAM } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    expect(created.body.decision).toMatchObject({ outcome: "content_removed", restrictions: { visibility: ["content_removed"] }, ground: "incompatible_content", policy_category: "scams_and_fraud", automated_decision: "fully" });
    await until(async () => (await api(`/api/v1/bulk-actions/${id}`, { key: apiKey })).body.state === "completed", "every run started");
    // Killed halfway: two items (one reported, one not) lost the record of their started runs.
    const lost = await env.DB.prepare(`SELECT position, run_id AS runId FROM bulk_action_items WHERE bulk_action_id = ?1 AND position IN (2, 5) ORDER BY position`).bind(id).all<{ position: number; runId: string }>();
    await env.DB.batch([
      env.DB.prepare(`UPDATE bulk_action_items SET run_id = NULL WHERE bulk_action_id = ?1 AND position IN (2, 5)`).bind(id),
      env.DB.prepare(`UPDATE bulk_actions SET state = 'running', started = 5 WHERE id = ?1`).bind(id),
    ]);
    // The sweep resumes them (or the request's drain, finishing its last pause, got there first: the same runs either way).
    await sweepBulkActions(env, new Date(), scheduledContext());
    const resumed = await env.DB.prepare(`SELECT position, run_id AS runId FROM bulk_action_items WHERE bulk_action_id = ?1 AND position IN (2, 5) ORDER BY position`).bind(id).all<{ position: number; runId: string }>();
    expect(resumed.results).toEqual(lost.results);

    const done = await until(async () => {
      const read = (await api(`/api/v1/bulk-actions/${id}`, { key: apiKey })).body;
      return read.runs.succeeded === 7 && read.decisions === 7 ? read : null;
    }, "every run done");
    expect(done).toMatchObject({ state: "completed", started: 7, progress: 1, decisions: 7, transparencyDbStatements: 7 });
    expect(
      await count(
        `SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND idempotency_key LIKE ?2 AND (CASE WHEN output_json LIKE '@t%' THEN substr(output_json, 3) ELSE json_extract(output_json, '$.terminalCode') END) = 'applied'`,
        installationId,
        `bulk_action:${id}:%`,
      ),
    ).toBe(7);

    // One decision per subject, each with the reason as its statement of reasons: the reported ones
    // on their reports, the others naming their subject without a report.
    const decisions = await env.DB.prepare(`SELECT id, subject_id AS subjectId, report_id AS reportId, policy_category AS category, statement_text AS statement, outcome FROM decisions WHERE installation_id = ?1 ORDER BY subject_id`)
      .bind(installationId)
      .all<{ id: string; subjectId: string; reportId: string | null; category: string; statement: string; outcome: string }>();
    expect(decisions.results.map((d) => d.subjectId)).toEqual([...reported, ...unreported].sort());
    for (const decision of decisions.results) {
      expect(decision).toMatchObject({ statement: reason, outcome: "content_removed", category: "scams_and_fraud" });
      expect(decision.reportId === null).toBe(unreported.includes(decision.subjectId));
    }
    for (const decision of [decisions.results[0]!, decisions.results.find((d) => d.subjectId === "unreported-post")!]) {
      const sor = await api(`/api/v1/decisions/${decision.id}/statement-of-reasons`, { key: apiKey });
      expect(sor.status).toBe(200);
      expect(JSON.stringify(sor.body)).toContain(reason);
    }
    // Queued for the Transparency Database per subject, as a single decision is.
    const queued = await env.DB.prepare(`SELECT decision_id AS decisionId, state FROM tdb_submissions WHERE installation_id = ?1 ORDER BY decision_id`).bind(installationId).all<{ decisionId: string; state: string }>();
    expect(queued.results.map((q) => q.decisionId)).toEqual(decisions.results.map((d) => d.id).sort());
    expect(queued.results.every((q) => q.state === "pending")).toBe(true);
    expect(await count(`SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'decision.recorded'`, installationId)).toBe(7);
    // The other installation's report got nothing.
    expect(await count(`SELECT COUNT(*) AS n FROM decisions WHERE installation_id = ?1`, other.id)).toBe(0);
    expect(await count(`SELECT COUNT(*) AS n FROM bulk_action_items WHERE bulk_action_id = ?1 AND report_id IS NOT NULL`, id)).toBe(5);

    const delivered = await until(async () => {
      const log = (await receiverLog(path)).filter((entry) => entry.type === "action.execute");
      return log.length >= 7 ? log : null;
    }, "seven deliveries");
    expect(delivered.map((entry) => entry.data.params.subject.id).sort()).toEqual(subjects.map((s) => s.id).sort());
    expect(await count(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE installation_id = ?1 AND source_type = 'action'`, installationId)).toBe(7);
  });

  it("a paused bulk action starts nothing until resumed (then its runs replay, none doubled), and a cancelled one never starts", async () => {
    const { installationId, apiKey } = await desk("/ok/bulk-pause", "assisted");
    const approver = await personKey(apiKey, "Lee Lead", ["review"]);
    const subjects = Array.from({ length: 6 }, (_, i) => ({ kind: "content", id: `held-${i}` }));

    // Cancelled while waiting for approval: no run, ever; approving it afterwards is a conflict.
    const dropped = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason: "Spam wave", decision: SPAM } });
    expect(dropped.body.state).toBe("approval_required");
    const cancelled = await api(`/api/v1/bulk-actions/${dropped.body.id}/cancel`, { key: apiKey, method: "POST" });
    expect(cancelled.body).toMatchObject({ state: "cancelled", started: 0 });
    await sweepBulkActions(env, new Date(), scheduledContext());
    const late = await api(`/api/v1/bulk-actions/${dropped.body.id}/approve`, { key: approver, method: "POST" });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe("bulk_action.state_conflict");
    expect(await count(`SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND idempotency_key LIKE ?2`, installationId, `bulk_action:${dropped.body.id}:%`)).toBe(0);

    // Approved and run to the end; pausing it now is a conflict.
    const held = await api("/api/v1/bulk-actions", { key: apiKey, body: { subjects, actionType: "remove_post", reason: "Spam wave", decision: SPAM } });
    const id = held.body.id as string;
    expect((await api(`/api/v1/bulk-actions/${id}/approve`, { key: approver, method: "POST" })).status).toBe(200);
    await until(async () => (await api(`/api/v1/bulk-actions/${id}`, { key: apiKey })).body.state === "completed", "every run started");
    const tooLate = await api(`/api/v1/bulk-actions/${id}/pause`, { key: apiKey, method: "POST" });
    expect(tooLate.status).toBe(409);
    expect(tooLate.body.error.code).toBe("bulk_action.state_conflict");
    // Then as if it had been paused halfway: three of its subjects read as not started.
    const before = await env.DB.prepare(`SELECT position, run_id AS runId FROM bulk_action_items WHERE bulk_action_id = ?1 ORDER BY position`).bind(id).all<{ position: number; runId: string }>();
    await env.DB.batch([env.DB.prepare(`UPDATE bulk_action_items SET run_id = NULL WHERE bulk_action_id = ?1 AND position >= 3`).bind(id), env.DB.prepare(`UPDATE bulk_actions SET state = 'paused', started = 3 WHERE id = ?1`).bind(id)]);
    expect((await api(`/api/v1/bulk-actions/${id}`, { key: apiKey })).body).toMatchObject({ state: "paused", started: 3, progress: 0.5 });
    expect((await sweepBulkActions(env, new Date(), scheduledContext())).started).toBe(0);
    expect(await count(`SELECT COUNT(*) AS n FROM bulk_action_items WHERE bulk_action_id = ?1 AND run_id IS NULL`, id)).toBe(3);
    // Resumed: the three start again as the runs they already were (nothing doubled).
    const resumed = await api(`/api/v1/bulk-actions/${id}/resume`, { key: apiKey, method: "POST" });
    expect(resumed.body).toMatchObject({ state: "completed", started: 6 });
    const after = await env.DB.prepare(`SELECT position, run_id AS runId FROM bulk_action_items WHERE bulk_action_id = ?1 ORDER BY position`).bind(id).all<{ position: number; runId: string }>();
    expect(after.results).toEqual(before.results);
    expect(await count(`SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND target_id = ?2 AND action = 'bulk_action.resumed'`, installationId, id)).toBe(1);
  });
  it("naming subjects by accounts is a search of personal data: audited (a dry run's too) with the accounts only as a digest", async () => {
    const { apiKey } = await desk("/ok/bulk-accounts", "autonomous");
    const owner = `owner-${crypto.randomUUID()}`;
    for (const id of ["acct-post-1", "acct-post-2"]) {
      expect((await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id, ownerId: owner }, category: "scams_and_fraud" } })).status).toBe(201);
    }
    const searched = async () => (await api("/api/v1/audit-events?action=search.personal_data_searched&limit=10", { key: apiKey })).body.items as Array<{ actor: unknown; details: Record<string, unknown> }>;
    expect(await searched()).toEqual([]);
    const dry = await api("/api/v1/bulk-actions", { key: apiKey, body: { accounts: [owner, "nobody-here"], actionType: "remove_post", reason: "Spam wave", dryRun: true } });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ dryRun: true, subjects: 2, withCase: 2 });
    const [event] = await searched();
    expect(event!.details).toMatchObject({ type: "account", fields: ["account.id"], via: "bulk_action", dryRun: true, accounts: 2, results: 2 });
    expect(event!.details.queryDigest).toEqual(expect.any(String));
    expect(JSON.stringify(event)).not.toContain(owner);
    // Acting on them is another search on the record.
    expect((await api("/api/v1/bulk-actions", { key: apiKey, body: { accounts: [owner], actionType: "remove_post", reason: "Spam wave" } })).status).toBe(201);
    expect((await searched()).map((e) => e.details.dryRun).sort()).toEqual([false, true]);
  });
});
