// Fast backtests: the host walker evaluates a version over past reports with the same node
// executors as durable shadow runs, so their results agree report by report; a wait ends the
// evaluation with needs_review; progress, cancel and results are kept by backtest.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, STEP_OUTPUT } from "./helpers";

// Content, summary and a fork: a keyword bank reads the reported text, a condition reads the
// bank's verdict and the category, decisions are simulated; a fork checks branch handling.
const triage = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "bank", kind: "enrichment", config: { component: "keyword_bank", keywords: ["free crypto", "wire the fee"] }, inputMapping: { text: "string(content.snapshot.text) + ' ' + string(content.description)" } },
    {
      id: "route",
      kind: "condition",
      config: {
        cases: [
          { port: "scam", when: "steps.bank.data.matched && report.category == 'scams_and_fraud'" },
          { port: "violent", when: "!steps.bank.data.matched && report.category == 'violence'" },
        ],
        case_ports: ["scam", "violent"],
        default_port: "other",
      },
    },
    { id: "remove", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } },
    { id: "label", kind: "decision", config: { outcome: "label", restrictions: { visibility: ["content_labelled"] }, statement: "Labelled." } },
    { id: "notify", kind: "send_message", config: { recipient: "reporter", template: "Thanks" } },
    { id: "tally", kind: "join" },
    { id: "done", kind: "end", config: { terminal_code: "decided" } },
    { id: "keep", kind: "end", config: { terminal_code: "no_action" } },
  ],
  edges: [
    edge("start", "success", "bank"),
    edge("bank", "success", "route"),
    edge("route", "scam", "remove"),
    edge("route", "violent", "label"),
    edge("route", "other", "keep"),
    edge("remove", "recorded", "done"),
    edge("label", "recorded", "notify"),
    edge("label", "recorded", "tally"),
    edge("notify", "sent", "tally"),
    edge("tally", "success", "done"),
  ],
};

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    value = await read();
  }
  return value;
}

async function seedReports(apiKey: string, count: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  const pending = [];
  for (let i = 0; i < count; i++) {
    const scammy = i % 3 === 0;
    const category = i % 4 === 0 ? "violence" : i % 4 === 1 ? "animal_welfare" : "scams_and_fraud";
    pending.push(
      api("/api/v1/reports", {
        key: apiKey,
        body: { subject: { kind: "content", id: `${tag}-${i}`, snapshot: { text: scammy ? "get free crypto now" : "a holiday photo" } }, category, description: i % 5 === 0 ? "they want me to wire the fee" : "see post" },
      }).then((r) => {
        expect(r.status).toBe(201);
        ids.push(r.body.id);
      }),
    );
    if (pending.length === 20) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  return ids;
}

const backtest = (apiKey: string, id: string) => api(`/api/v1/backtests/${id}`, { key: apiKey }).then((r) => r.body);

describe("fast backtests", () => {
  it("stops at a wait with needs_review, and a failing node without an error port fails that report only", async () => {
    const { apiKey } = await newInstallation();
    const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `q-${crypto.randomUUID().slice(0, 8)}`, slaSeconds: 3600 } });
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        {
          id: "route",
          kind: "condition",
          config: {
            cases: [
              { port: "review", when: "report.category == 'violence'" },
              { port: "broken", when: "report.category == 'animal_welfare'" },
            ],
            case_ports: ["review", "broken"],
            default_port: "fine",
          },
        },
        { id: "ask", kind: "human_task", config: { queue_id: queue.body.id, timeout_seconds: 3600 } },
        { id: "fail", kind: "condition", config: { cases: [{ port: "never", when: "int(report.category) == 1" }], case_ports: ["never"], default_port: "x" } },
        { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
        { id: "ok", kind: "end", config: { terminal_code: "fine" } },
      ],
      edges: [
        edge("start", "success", "route"),
        edge("route", "review", "ask"),
        edge("route", "broken", "fail"),
        edge("route", "fine", "ok"),
        edge("ask", "completed", "done"),
        edge("ask", "timeout", "done"),
        edge("fail", "never", "done"),
        edge("fail", "x", "ok"),
      ],
    };
    const version = await publish(apiKey, graph);
    const ids = await seedReports(apiKey, 8, "wait");
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    const done = await until(
      () => backtest(apiKey, started.body.id),
      (b) => b.state === "completed",
      60_000,
    );
    // Categories cycle violence, animal_welfare, scams, scams: 2 reviews, 2 failures, 4 fine.
    expect(done.progress.byState).toEqual({ needs_review: 2, failed: 2, completed: 4 });
    const review = await api(`/api/v1/backtests/${started.body.id}/results?state=needs_review`, { key: apiKey });
    expect(review.body.items.map((r: any) => [r.stoppedAt, r.outcome])).toEqual([
      ["ask", null],
      ["ask", null],
    ]);
    const failed = await api(`/api/v1/backtests/${started.body.id}/results?state=failed`, { key: apiKey });
    expect(failed.body.items.every((r: any) => r.stoppedAt === "fail" && typeof r.errorCode === "string" && r.errorCode.length > 0)).toBe(true);
    // No task was created for a backtest.
    const tasks = await env.DB.prepare("SELECT COUNT(*) AS n FROM human_tasks WHERE queue_id = ?1").bind(queue.body.id).first<{ n: number }>();
    expect(tasks?.n).toBe(0);
  }, 90_000);

  it("a backtest of three chunks cancelled while model calls are in flight stops after those slices, keeps what it evaluated, and is another installation's 404", async () => {
    const { apiKey } = await newInstallation();
    const other = await newInstallation();
    // Every proposal waits at the model peer until the test releases it: the cancel lands mid-flight by construction.
    const tag = `/v1/held-${crypto.randomUUID()}`;
    const provider = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: `https://model.test${tag}`, model: "held", apiKey: "sk-test-model-key", timeoutMs: 60_000 } });
    expect(provider.status, JSON.stringify(provider.body)).toBe(201);
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "propose", kind: "ai_proposal", errorPort: "error", config: { provider_id: provider.body.id, instructions: "Classify.", result_ports: ["remove", "keep"] }, inputMapping: { category: "report.category" } },
        { id: "removed", kind: "end", config: { terminal_code: "remove" } },
        { id: "kept", kind: "end", config: { terminal_code: "keep" } },
        { id: "failed", kind: "end", config: { terminal_code: "error" } },
      ],
      edges: [edge("start", "success", "propose"), edge("propose", "remove", "removed"), edge("propose", "keep", "kept"), edge("propose", "error", "failed")],
    });
    // 504 reports are three chunks (250, 250, 4); intake's per-key rate is shared by two keys.
    const second = await api("/api/v1/api-keys", { key: apiKey, body: { name: "seeding", scopes: ["reports:write"] } });
    const ids = [...(await seedReports(apiKey, 252, "cancel-a")), ...(await seedReports(second.body.apiKey, 252, "cancel-b"))];
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const chunks = async () => (await env.DB.prepare("SELECT seq, done_at AS doneAt FROM backtest_chunks WHERE backtest_id = ?1 ORDER BY seq").bind(started.body.id).all<{ seq: number; doneAt: string | null }>()).results;
    expect(await chunks()).toHaveLength(3);
    const modelLog = async () => (await (await fetch(`https://model.test/_control/log?prefix=${encodeURIComponent(tag)}`)).json()) as unknown[];
    // A first slice of 8 reports is at the model, held there: the backtest is mid-flight.
    expect((await until(modelLog, (log) => log.length >= 8, 30_000)).length).toBeGreaterThanOrEqual(8);
    expect(await backtest(apiKey, started.body.id)).toMatchObject({ state: "running", progress: { processed: 0 } });

    expect((await api(`/api/v1/backtests/${started.body.id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(`/api/v1/backtests/${started.body.id}/cancel`, { key: other.apiKey, body: {} })).status).toBe(404);
    expect((await api(`/api/v1/backtests/${started.body.id}/results`, { key: other.apiKey })).status).toBe(404);
    const cancelled = await api(`/api/v1/backtests/${started.body.id}/cancel`, { key: apiKey, body: {} });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toMatchObject({ state: "cancelled", cancelledAt: expect.any(String) });
    const again = await api(`/api/v1/backtests/${started.body.id}/cancel`, { key: apiKey, body: {} });
    expect(again.body.error.code).toBe("backtest.not_running");

    await fetch(`https://model.test/_control/release?prefix=${encodeURIComponent(tag)}`, { method: "POST" });
    // Every chunk settles: one in flight finishes its slice, records it and stops; one not yet started does nothing.
    const settled = await until(chunks, (rows) => rows.every((row) => row.doneAt !== null), 30_000);
    expect(settled.every((row) => row.doneAt !== null)).toBe(true);
    const after = await backtest(apiKey, started.body.id);
    expect(after).toMatchObject({ state: "cancelled", progress: { total: 504 } });
    // What was evaluated is exactly what reached the model, and that is at most the first slice of
    // each chunk (8 + 8 + 4): no slice after the cancel reached it.
    const reached = (await modelLog()).length;
    expect(after.progress.processed).toBe(reached);
    expect(reached).toBeGreaterThanOrEqual(8);
    expect(reached).toBeLessThanOrEqual(8 + 8 + 4);
    const results = await api(`/api/v1/backtests/${started.body.id}/results?limit=200`, { key: apiKey });
    expect(results.body.items).toHaveLength(reached);
    expect(results.body.items.every((item: { terminalCode: string }) => item.terminalCode === "keep")).toBe(true);
    const audit = await env.DB.prepare("SELECT action FROM audit_events WHERE target_id = ?1 ORDER BY seq").bind(started.body.id).all<{ action: string }>();
    expect(audit.results.map((r) => r.action)).toEqual(["backtest.started", "backtest.cancelled"]);
    // Another installation's reports are not found, like reports that do not exist.
    const foreign = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: other.apiKey, body: { reportIds: ids.slice(0, 2) } });
    expect(foreign.status).toBe(404);
    const theirs = await publish(other.apiKey, triage);
    const crossed = await api(`/api/v1/workflow-versions/${theirs.id}/backtests`, { key: other.apiKey, body: { reportIds: ids.slice(0, 2) } });
    expect(crossed.body.error.code).toBe("report.not_found");
  });

  it("refuses a durable backtest over 1,000 reports and a selection without ids or range", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, triage);
    const big = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { from: "2020-01-01T00:00:00Z", limit: 5000, engine: "durable" } });
    expect(big.body.error.code).toBe("backtest.too_large");
    const none = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: {} });
    expect(none.body.error.code).toBe("backtest.selection_required");
  });

  // Last: the durable runs it starts keep the queues busy for a while after it ends.
  it("agree with durable shadow runs report by report on the same 200 reports", async () => {
    const { apiKey } = await newInstallation();
    const ids = await seedReports(apiKey, 200, "eq");
    const version = await publish(apiKey, triage);
    const fast = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    expect(fast.status).toBe(202);
    expect(fast.body).toMatchObject({ engine: "fast", progress: { total: 200 } });
    const durable = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids, engine: "durable" } });
    expect(durable.status).toBe(202);
    const fastDone = await until(
      () => backtest(apiKey, fast.body.id),
      (b) => b.state === "completed",
      60_000,
    );
    expect(fastDone.progress).toMatchObject({ total: 200, processed: 200, byState: { completed: 200 } });
    // Durable runs take minutes in the test pool; the wait is generous, not a target.
    const durableDone = await until(
      () => backtest(apiKey, durable.body.id),
      (b) => b.state === "completed",
      270_000,
    );
    expect(durableDone.state, JSON.stringify(durableDone.progress)).toBe("completed");
    expect(durableDone.progress.byState).toEqual({ succeeded: 200 });

    // Durable: the last simulated decision's outcome, else the end node's terminal code.
    const { results: runs } = await env.DB.prepare(`
      SELECT r.report_id AS reportId, CASE WHEN r.output_json LIKE '@t%' THEN substr(r.output_json, 3) ELSE json_extract(r.output_json, '$.terminalCode') END AS terminalCode,
        (SELECT json_extract(${STEP_OUTPUT.json}, '$.outcome') FROM workflow_step_runs s ${STEP_OUTPUT.join}
          WHERE s.run_id = r.id AND ${STEP_OUTPUT.json} IS NOT NULL AND s.node_type = 'decision' ORDER BY s.finished_at DESC LIMIT 1) AS outcome,
        (SELECT json_group_array(s.node_id) FROM (SELECT node_id FROM workflow_step_runs WHERE run_id = r.id ORDER BY node_id) s) AS nodes
      FROM workflow_runs r WHERE r.backtest_id = ?1`)
      .bind(durable.body.id)
      .all<{ reportId: string; terminalCode: string; outcome: string | null; nodes: string }>();
    expect(runs).toHaveLength(200);
    const { results: fastRows } = await env.DB.prepare("SELECT report_id AS reportId, outcome, terminal_code AS terminalCode, path_json AS path FROM backtest_results WHERE backtest_id = ?1")
      .bind(fast.body.id)
      .all<{ reportId: string; outcome: string; terminalCode: string; path: string }>();
    const byReport = new Map(fastRows.map((row) => [row.reportId, row]));
    for (const run of runs) {
      const evaluated = byReport.get(run.reportId);
      expect(evaluated, run.reportId).toBeDefined();
      expect({ outcome: evaluated!.outcome, terminalCode: evaluated!.terminalCode, nodes: [...(JSON.parse(evaluated!.path) as string[])].sort() }, run.reportId).toEqual({
        outcome: run.outcome ?? run.terminalCode,
        terminalCode: run.terminalCode,
        nodes: JSON.parse(run.nodes),
      });
    }
    // Every path of the graph was taken, so the comparison covered all of them.
    const outcomes = new Set(fastRows.map((row) => row.outcome));
    expect([...outcomes].sort()).toEqual(["label", "no_action", "remove"]);
    // The walker writes nothing a run would: no decisions, messages, runs for the fast backtest.
    const written = await env.DB.prepare("SELECT (SELECT COUNT(*) FROM decisions WHERE report_id IN (SELECT value FROM json_each(?1))) AS decisions, (SELECT COUNT(*) FROM workflow_runs WHERE backtest_id = ?2) AS runs")
      .bind(JSON.stringify(ids), fast.body.id)
      .first<{ decisions: number; runs: number }>();
    expect(written).toEqual({ decisions: 0, runs: 0 });
    // One content read per backtest and node, as for durable backtests.
    const reads = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'report.content_read' AND target_id = ?1").bind(fast.body.id).first<{ n: number }>();
    expect(reads?.n).toBe(1);
    // Results are listed by report, without content.
    const page = await api(`/api/v1/backtests/${fast.body.id}/results?limit=5&state=completed`, { key: apiKey });
    expect(page.status).toBe(200);
    expect(page.body.items).toHaveLength(5);
    expect(Object.keys(page.body.items[0]).sort()).toEqual(["errorCode", "evaluatedAt", "outcome", "path", "reportId", "state", "stoppedAt", "terminalCode"]);
    const next = await api(`/api/v1/backtests/${fast.body.id}/results?limit=5&cursor=${page.body.nextCursor}`, { key: apiKey });
    expect(next.body.items[0].reportId > page.body.items[4].reportId).toBe(true);
  }, 330_000);
});
