// A trigger's run stores the report summary it starts with in a compact form (`@r` and the values
// alone), and an end node's plain output as `@t` and its code; the API, the engine, the shadow
// figures and a repeat of the run's key read the canonical JSON. A row of the previous form (the
// canonical JSON stored as it is) reads alike.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../src/audit";
import { runInputJson, runOutputJson, storedRunInput, storedRunOutput } from "../src/workflows/run-input";
import { getRunByIdempotencyKey } from "../src/workflows/runs-queries";
import { api, edge, newInstallation, publish, until, waitForRun } from "./helpers";

const summary = (over: Record<string, unknown> = {}) => ({
  report: {
    caseId: "case_yWORe7gvlt06QjZN1P2Bze",
    category: "scams_and_fraud",
    categorySpecification: ["scam_phishing"],
    createdAt: "2026-12-02T20:47:02.331Z",
    evidenceCount: 1,
    id: "rpt_b4XJc6np4yFsjOn5AAcFb6",
    source: "notice",
    subject: { id: 'c04ea5e0-post-5 "quoted" \u00e9\n', kind: "content" },
    ...over,
  },
});

describe("a run's stored input", () => {
  it("stores a report summary compactly and reads back the very same canonical JSON", () => {
    const json = canonicalJson(summary());
    const stored = storedRunInput(json, "rpt_b4XJc6np4yFsjOn5AAcFb6");
    expect(stored.startsWith("@r[")).toBe(true);
    // The report's id is the run's report_id: left out.
    expect(stored).not.toContain("rpt_b4XJc6np4yFsjOn5AAcFb6");
    expect(stored.length).toBeLessThan(json.length - 100);
    expect(runInputJson(stored, "rpt_b4XJc6np4yFsjOn5AAcFb6")).toBe(json);
    // A summary of another report than the run's keeps its id.
    const other = storedRunInput(json, "rpt_other");
    expect(other.startsWith("@r[")).toBe(true);
    expect(runInputJson(other, "rpt_other")).toBe(json);
    expect(runInputJson(storedRunInput(json, null), null)).toBe(json);
  });

  it("keeps any other input as its canonical JSON", () => {
    for (const value of [
      {},
      [1, 2],
      { report: { id: "rpt_x" } },
      summary({ extra: true }),
      summary({ evidenceCount: "1" }),
      summary({ subject: { id: "s", kind: "content", owner: "o" } }),
      { ...summary(), event: "report.created" },
      { report: null },
    ]) {
      const json = canonicalJson(value);
      expect(storedRunInput(json, "rpt_b4XJc6np4yFsjOn5AAcFb6")).toBe(json);
      expect(runInputJson(json, "rpt_b4XJc6np4yFsjOn5AAcFb6")).toBe(json);
    }
  });

  it("stores an end node's plain output as its code; any other output as its JSON", () => {
    const plain = canonicalJson({ port: "terminal", terminalCode: "removed" });
    expect(storedRunOutput(plain)).toBe("@tremoved");
    expect(runOutputJson("@tremoved")).toBe(plain);
    expect(runOutputJson(null)).toBeNull();
    for (const value of [{ port: "terminal", terminalCode: "removed", result: { a: 1 } }, { port: "terminal", terminalCode: 3 }, { port: "started" }, { port: "terminal", terminalCode: "x", extra: null }]) {
      const json = canonicalJson(value);
      expect(storedRunOutput(json)).toBe(json);
      expect(runOutputJson(json)).toBe(json);
    }
  });

  it("a trigger's run stores its report compactly; the API, the engine and a row of the previous form read the same input", async () => {
    const inst = await newInstallation("run-input");
    const queue = await api("/api/v1/queues", { key: inst.apiKey, body: { name: "review-run-input", slaSeconds: 3600 } });
    expect(queue.status).toBe(201);
    const version = await publish(inst.apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        {
          id: "review",
          kind: "human_task",
          config: { queue_id: queue.body.id, response_schema: { type: "object", required: ["verdict"], properties: { verdict: { enum: ["remove", "keep"] } } } },
          inputMapping: { category: "report.category", subject: "report.subject.id", caseId: "report.caseId" },
        },
        { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
        { id: "late", kind: "end", config: { terminal_code: "expired" } },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "late")],
    });
    const trigger = await api("/api/v1/triggers", { key: inst.apiKey, body: { event: "report.created", when: "true", workflowVersionId: version.id, authorityMode: "autonomous" } });
    expect(trigger.status).toBe(201);
    const reviewer = await api("/api/v1/api-keys", { key: inst.apiKey, body: { name: "review tool", scopes: ["review", "read", "personal_data:read"] } });
    expect(reviewer.status).toBe(201);
    const reviewKey = reviewer.body.apiKey as string;
    const report = await api("/api/v1/reports", { key: inst.apiKey, body: { subject: { kind: "account", id: "acct-run-input" }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    const task = await until(() => env.DB.prepare("SELECT id, run_id AS runId FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2").bind(inst.id, report.body.id).first<{ id: string; runId: string }>(), "a task");
    const stored = (await env.DB.prepare("SELECT input_json AS input, idempotency_key AS k FROM workflow_runs WHERE id = ?1").bind(task.runId).first<{ input: string; k: string }>())!;
    expect(stored.input.startsWith("@r[")).toBe(true);
    // What the run answers is the report's summary, as the report itself tells it.
    const run = await api(`/api/v1/runs/${task.runId}`, { key: inst.apiKey });
    expect(run.status).toBe(200);
    const r = report.body;
    expect(run.body.input).toEqual({
      report: { caseId: r.caseId, category: r.category, categorySpecification: r.categorySpecification ?? [], createdAt: r.createdAt, evidenceCount: r.evidenceCount, id: r.id, source: r.source, subject: r.subject },
    });
    // The engine read it: the task's context took three of its values (its reviewer opens them).
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: reviewKey, body: { reviewer: "rita" } })).status).toBe(200);
    const opened = await api(`/api/v1/tasks/${task.id}`, { key: reviewKey });
    expect(opened.status).toBe(200);
    expect(opened.body.context).toMatchObject({ category: "scams_and_fraud", subject: "acct-run-input", caseId: r.caseId });
    // A repeat of the run's key finds it with the same input.
    const byKey = await getRunByIdempotencyKey(env.DB, inst.id, stored.k);
    expect(byKey?.id).toBe(task.runId);
    expect(JSON.parse(byKey!.inputJson)).toEqual(run.body.input);
    // The previous release's row: the canonical JSON stored as it is. It answers the same.
    const canonical = canonicalJson(run.body.input);
    await env.DB.prepare("UPDATE workflow_runs SET input_json = ?2 WHERE id = ?1").bind(task.runId, canonical).run();
    expect((await api(`/api/v1/runs/${task.runId}`, { key: inst.apiKey })).body.input).toEqual(run.body.input);
    const listed = await api(`/api/v1/runs?limit=5`, { key: inst.apiKey });
    expect(listed.body.items.find((x: { id: string }) => x.id === task.runId)?.input).toEqual(run.body.input);
    // And the engine goes on with it.
    const done = await api(`/api/v1/tasks/${task.id}/complete`, { key: reviewKey, body: { reviewer: "rita", response: { verdict: "keep" } } });
    expect(done.status).toBe(200);
    const ended = await waitForRun(inst.apiKey, task.runId);
    expect(ended.state).toBe("succeeded");
    // Its end node's output is stored as its code, and answered whole; a row of the previous form alike.
    const output = await env.DB.prepare("SELECT output_json AS output FROM workflow_runs WHERE id = ?1").bind(task.runId).first<{ output: string }>();
    expect(output?.output).toBe("@treviewed");
    expect(ended.output).toEqual({ port: "terminal", terminalCode: "reviewed" });
    await env.DB.prepare("UPDATE workflow_runs SET output_json = ?2 WHERE id = ?1").bind(task.runId, canonicalJson(ended.output)).run();
    expect((await api(`/api/v1/runs/${task.runId}`, { key: inst.apiKey })).body.output).toEqual({ port: "terminal", terminalCode: "reviewed" });
  });
});
