// What an attacker's review found, each tried the way it was found: through the API, with the
// scope or role the attacker held. Every test here failed on the code before its fix.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { asUser, keyWith, signIn } from "./attacker-fixture";
import { api, edge, newInstallation, publish, waitForRun } from "./helpers";
import { answer, holesSetup, openIn, openTask, sampleEverything } from "./holes-fixture";

describe("sealed fields need personal_data:read", () => {
  it("GET /appeals/:id shows a read key and a viewer no appellant id, contact or reason, and audits no view; personal_data:read opens them", async () => {
    const { id, apiKey } = await newInstallation("attack-appeal-read");
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "post-1" }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { reportId: report.body.id, appellantRole: "notifier", appellant: { id: "user-77", contact: "ann@example.org" }, reason: "my secret reason" } });
    expect(appeal.status, JSON.stringify(appeal.body)).toBe(201);
    const readKey = await keyWith(apiKey, ["read"]);
    const viewer = await signIn(id, "viewer@example.org", "viewer");
    for (const answer of [await api(`/api/v1/appeals/${appeal.body.id}`, { key: readKey }), await asUser(viewer, `/appeals/${appeal.body.id}`)]) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body).toMatchObject({ id: appeal.body.id, appellant: null, reason: null, personalDataSealed: true });
      expect(JSON.stringify(answer.body)).not.toMatch(/user-77|ann@example|secret reason/u);
    }
    const viewed = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND action = 'appeal.personal_data_viewed'").bind(id).first<{ n: number }>();
    expect(viewed?.n).toBe(0);
    const personal = await api(`/api/v1/appeals/${appeal.body.id}`, { key: await keyWith(apiKey, ["read", "personal_data:read"]) });
    expect(personal.body).toMatchObject({ appellant: { id: "user-77", contact: "ann@example.org" }, reason: "my secret reason", personalDataSealed: false });
  });

  it("GET /qa/golden-items and its answers are refused to a moderator and a read key", async () => {
    const { id, apiKey } = await newInstallation("attack-golden-read");
    const moderator = await signIn(id, "mod@example.org", "moderator");
    const refused = await asUser(moderator, "/qa/golden-items");
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("auth.scope_missing");
    const readKey = await keyWith(apiKey, ["read", "review"]);
    expect((await api("/api/v1/qa/golden-items", { key: readKey })).status).toBe(403);
    expect((await api("/api/v1/qa/golden-items", { key: apiKey })).status).toBe(200);
  });
});

describe("QA review is blind", () => {
  it("the QA task's times do not repeat the original's completion, and task.completed events carry no hash a reviewer can recompute or compare", async () => {
    const s = await holesSetup("attack-qa-blind");
    await sampleEverything(s);
    const first = await openTask(s);
    const second = await openTask(s);
    const done = await answer(s.reviewKey, first.id, "alice", { outcome: "remove" });
    await answer(s.reviewKey, second.id, "alice", { outcome: "remove" });
    const qaTasks = await openIn(s.otherKey, s.qaQueue);
    expect(qaTasks).toHaveLength(2);
    const completions = [done.completedAt, (await api(`/api/v1/tasks/${second.id}`, { key: s.apiKey })).body.completedAt];
    for (const qa of qaTasks) {
      expect(completions).not.toContain(qa.createdAt);
      expect(Date.parse(qa.createdAt)).toBeLessThan(Date.parse(completions[0]) + 1);
    }

    const completedEvent = async (taskId: string) => (await api(`/api/v1/audit-events?action=task.completed&targetId=${taskId}`, { key: s.otherKey })).body.items[0];
    const events = [await completedEvent(first.id), await completedEvent(second.id)].filter(Boolean);
    expect(events).toHaveLength(2);
    const unkeyed = `sha256:${[...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify({ outcome: "remove" }))))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
    for (const event of events) {
      expect(event.details.responseDigest).toMatch(/^hmac-sha256:[0-9a-f]{64}$/u);
      expect(event.details.responseDigest).not.toBe(unkeyed);
    }
    // The same answer on two tasks: the digests cannot be compared to tell it.
    expect(events[0].details.responseDigest).not.toBe(events[1].details.responseDigest);
  });
});

describe("a report's snapshot is bounded at intake", () => {
  it("a snapshot padded past what rules read is refused with a code; one at the bound is still matched by a content rule", async () => {
    const { apiKey } = await newInstallation("attack-padded-snapshot");
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "bank", kind: "enrichment", config: { component: "keyword_bank", keywords: ["free crypto"] }, inputMapping: { text: "string(content.snapshot.text)" } },
        { id: "route", kind: "condition", config: { cases: [{ port: "spam", when: "steps.bank.data.matched" }], case_ports: ["spam"], default_port: "clean" } },
        { id: "spam", kind: "end", config: { terminal_code: "spam" } },
        { id: "clean", kind: "end", config: { terminal_code: "clean" } },
      ],
      edges: [edge("start", "success", "bank"), edge("bank", "success", "route"), edge("route", "spam", "spam"), edge("route", "clean", "clean")],
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const send = (snapshot: unknown) => api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}`, snapshot }, category: "scams_and_fraud" } });

    const padded = await send({ text: `free crypto ${"a".repeat(70_000)}` });
    expect(padded.status, JSON.stringify(padded.body).slice(0, 300)).toBe(422);
    expect(padded.body.error.code).toBe("report.snapshot_over_bounds");
    const huge = await send({ parts: Array.from({ length: 5 }, () => "b".repeat(60_000)) });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe("report.snapshot_too_large");

    const atBound = await send({ text: `free crypto ${"a".repeat(65_536 - 12)}` });
    expect(atBound.status, JSON.stringify(atBound.body).slice(0, 300)).toBe(201);
    const run = await waitForRun(apiKey, atBound.body.runs[0].runId);
    expect(run.state).toBe("succeeded");
    expect(run.output.terminalCode).toBe("spam");
  });
});

describe("POST /runs keeps to what a hand-started run may be", () => {
  it("refuses the platform's reserved Idempotency-Key prefixes and a mode above the version's trigger", async () => {
    const { apiKey } = await newInstallation("attack-manual-runs");
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    });
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } });
    expect(trigger.status).toBe(201);
    const start = (authorityMode: string, key?: string) => api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode, input: {} }, ...(key ? { headers: { "idempotency-key": key } } : {}) });

    for (const key of [`trigger:${trigger.body.id}:rpt_forged`, "backtest:bt_1:rpt_1", "linked:run_1:node:main", "account_sanction:sanc_1", "bulk_action:bulk_1:0", "rule:ver_1:rule_1:evt_1"]) {
      const refused = await start("shadow", key);
      expect(refused.status, key).toBe(422);
      expect(refused.body.error.code).toBe("run.idempotency_key_reserved");
    }
    const above = await start("autonomous");
    expect(above.status).toBe(403);
    expect(above.body.error.code).toBe("run.authority_above_trigger");
    expect((await start("shadow", "my-own-key")).status).toBe(201);
  });
});
