// Automation that reads what was reported: `content` in the expressions of the kinds that
// may read it, refused at publish elsewhere; derived outputs sealed; the reporter nowhere in
// automation; every read on the record; nothing readable at rest.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, waitForRun, waitForWait, asOldFormOutputs } from "./helpers";

const MARKER = "zebra-lantern-7731";
const REPORTER = "reporter-hidden-4409@example.org";

/** keyword bank over the content → condition on its verdict → a review task showing the content. */
function triageGraph(queueId: string) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      {
        id: "bank",
        kind: "enrichment",
        config: { component: "keyword_bank", keywords: ["free crypto", "wire the fee"] },
        inputMapping: { text: "string(content.snapshot.text) + ' ' + string(content.description)" },
      },
      { id: "route", kind: "condition", config: { cases: [{ port: "spam", when: "steps.bank.data.matched && steps.bank.data.count >= 1" }], case_ports: ["spam"], default_port: "clean" } },
      { id: "review", kind: "human_task", config: { queue_id: queueId, timeout_seconds: 3600 }, inputMapping: { text: "content.snapshot.text", hits: "steps.bank.data.keywords" } },
      { id: "spam", kind: "end", config: { terminal_code: "spam" } },
      { id: "clean", kind: "end", config: { terminal_code: "clean" } },
    ],
    edges: [edge("start", "success", "bank"), edge("bank", "success", "route"), edge("route", "spam", "review"), edge("route", "clean", "clean"), edge("review", "completed", "spam"), edge("review", "timeout", "spam")],
  };
}

async function setup() {
  const { id: installationId, apiKey } = await newInstallation();
  const queue = await api("/api/v1/queues", { key: apiKey, body: { name: `spam-${crypto.randomUUID().slice(0, 8)}`, slaSeconds: 3600 } });
  expect(queue.status).toBe(201);
  return { installationId, apiKey, queueId: queue.body.id as string };
}

async function report(apiKey: string, text: string, extra: Record<string, unknown> = {}) {
  const created = await api("/api/v1/reports", {
    key: apiKey,
    body: {
      subject: { kind: "content", id: `post-${crypto.randomUUID().slice(0, 8)}`, snapshot: { text }, url: `https://social.example/p/${MARKER}`, ownerId: `owner-${MARKER}` },
      category: "scams_and_fraud",
      description: `The post says ${MARKER} and asks for money`,
      reporter: { id: "reporter-77", contact: REPORTER },
      ...extra,
    },
  });
  expect(created.status).toBe(201);
  return created.body as { id: string; runs: Array<{ runId: string }> };
}

async function key(apiKey: string, scopes: string[]) {
  const created = await api("/api/v1/api-keys", { key: apiKey, body: { name: scopes.join("+"), scopes } });
  expect(created.status).toBe(201);
  return created.body.apiKey as string;
}

/** The tables (and a bit of the row) where `needle` appears in plaintext. */
async function tablesHolding(needle: string): Promise<string[]> {
  return (await everyRow())
    .split("\n")
    .filter((line) => line.includes(needle))
    .map((line) => `${line.slice(0, line.indexOf(":"))} …${line.slice(Math.max(0, line.indexOf(needle) - 200), line.indexOf(needle) + 40)}`);
}

/** Every row of every table, as text. */
async function everyRow(): Promise<string> {
  const { results: tables } = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'sqlite_%'").all<{ name: string }>();
  const dumps: string[] = [];
  for (const { name } of tables) {
    const { results } = await env.DB.prepare(`SELECT * FROM "${name}"`).all();
    dumps.push(`${name}:${JSON.stringify(results)}`);
  }
  return dumps.join("\n");
}

async function everyObject(): Promise<string> {
  const texts: string[] = [];
  for (const bucket of [env.WORKFLOW_ARTIFACTS]) {
    let cursor: string | undefined;
    do {
      const page = await bucket.list(cursor ? { cursor } : {});
      for (const object of page.objects) texts.push((await (await bucket.get(object.key))?.text()) ?? "");
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
  }
  return texts.join("\n");
}

async function contentReads(runOrBacktest: string) {
  const { results } = await env.DB.prepare("SELECT details_json AS details FROM audit_events WHERE action = 'report.content_read' AND details_json LIKE ?1").bind(`%${runOrBacktest}%`).all<{ details: string }>();
  return results.map((row) => JSON.parse(row.details) as { nodeId: string; purpose: string; runId: string });
}

describe("content at publish", () => {
  it("refuses content outside the kinds that may read it, with the JSON path", async () => {
    const { apiKey } = await setup();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "route", kind: "condition", config: { cases: [{ port: "yes", when: "content.description.contains('x')" }], case_ports: ["yes"], default_port: "no" } },
        { id: "done", kind: "end", inputMapping: { text: "content.description" } },
      ],
      edges: [edge("start", "success", "route"), edge("route", "yes", "done"), edge("route", "no", "done")],
    };
    const refused = await api("/api/v1/workflows", { key: apiKey, body: { name: `refused-${crypto.randomUUID()}` } });
    const published = await api(`/api/v1/workflows/${refused.body.id}/versions`, { key: apiKey, body: { graph } });
    expect(published.status).toBe(422);
    const problems = published.body.error.details as Array<{ path: string; code: string }>;
    expect(problems).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: "$.nodes[1].config.cases[0].when", code: "content_not_readable_here" }), expect.objectContaining({ path: "$.nodes[2].inputMapping.text", code: "content_not_readable_here" })]),
    );
  });

  it("refuses a sealed field of a content reader in a decision, and accepts its verdict", async () => {
    const { apiKey, queueId } = await setup();
    const graph = triageGraph(queueId);
    const leaking = structuredClone(graph);
    leaking.nodes.push({
      id: "decide",
      kind: "decision",
      config: { outcome: "content_removed", statement: "Spam: {{hits}}", restrictions: { visibility: ["content_removed"] } },
      inputMapping: { hits: "steps.bank.data.keywords.join(', ')" },
    } as never);
    leaking.edges = leaking.edges.map((e) => (e.from.nodeId === "review" ? edge("review", e.from.port, "decide") : e));
    leaking.edges.push(edge("decide", "recorded", "spam"));
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: `leak-${crypto.randomUUID()}` } });
    const refused = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: leaking } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details).toEqual([expect.objectContaining({ path: "$.nodes[6].inputMapping.hits", code: "content_not_readable_here" })]);
    (leaking.nodes[6] as { inputMapping: Record<string, string> }).inputMapping = { hits: "string(steps.bank.data.count)" };
    const accepted = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: leaking } });
    expect(accepted.status).toBe(201);
  });

  it("refuses content in a trigger's condition", async () => {
    const { apiKey, queueId } = await setup();
    const version = await publish(apiKey, triageGraph(queueId));
    const refused = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow", when: "content.description != ''" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toContain("content_not_readable_here");
  });
});

describe("content in a run", () => {
  it("a report.created trigger's keyword bank reads the reported text; outputs derived from it are sealed; nothing readable at rest", async () => {
    const { apiKey, queueId } = await setup();
    const version = await publish(apiKey, triageGraph(queueId));
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const spam = await report(apiKey, `Get FREE CRYPTO now ${MARKER}`);
    const clean = await report(apiKey, `A photo of my cat ${MARKER}`);
    const cleanRun = await waitForRun(apiKey, clean.runs[0]!.runId);
    expect(cleanRun.output).toMatchObject({ terminalCode: "clean" });
    const spamRunId = spam.runs[0]!.runId;
    await waitForWait(apiKey, spamRunId);

    // The verdict is open; the matched keywords are sealed.
    const detail = await api(`/api/v1/runs/${spamRunId}`, { key: apiKey });
    const bank = detail.body.steps.find((s: { nodeId: string }) => s.nodeId === "bank");
    expect(bank.output).toMatchObject({ port: "success", component: "keyword_bank", data: { matched: true, count: 1 } });
    expect(bank.output.data.keywords).toBeUndefined();
    expect(bank.sealed).toBe(true);
    const opened = await api(`/api/v1/runs/${spamRunId}/content`, { key: apiKey });
    expect(opened.status).toBe(200);
    expect(opened.body.items).toEqual([expect.objectContaining({ nodeId: "bank", output: expect.objectContaining({ data: expect.objectContaining({ keywords: ["free crypto"] }) }) })]);
    const reviewer = await key(apiKey, ["review"]);
    expect((await api(`/api/v1/runs/${spamRunId}/content`, { key: reviewer })).status).toBe(403);

    // The task shows the content to a reader of personal data only, and that read is audited.
    const tasks = await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey });
    const listed = tasks.body.items.find((t: { runId: string }) => t.runId === spamRunId);
    expect(listed).toMatchObject({ context: null, contextSealed: true });
    expect((await api(`/api/v1/tasks/${listed.id}`, { key: reviewer })).body).toMatchObject({ context: null, contextSealed: true });
    const moderator = await key(apiKey, ["review", "personal_data:read"]);
    const task = await api(`/api/v1/tasks/${listed.id}`, { key: moderator });
    expect(task.body.context).toEqual({ text: `Get FREE CRYPTO now ${MARKER}`, hits: ["free crypto"] });
    await api(`/api/v1/tasks/${listed.id}`, { key: moderator });
    const viewed = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'task.content_viewed' AND target_id = ?1").bind(listed.id).first<{ n: number }>();
    expect(viewed?.n).toBe(1);

    // One content read per run and node that opened it.
    expect((await contentReads(spamRunId)).map((r) => `${r.nodeId}:${r.purpose}`).sort()).toEqual(["bank:enrichment", "review:human_review"]);
    expect((await contentReads(clean.runs[0]!.runId)).map((r) => r.nodeId)).toEqual(["bank"]);

    // Neither the content nor the reporter's contact is readable anywhere at rest.
    const rows = await everyRow();
    expect(rows).toContain(spamRunId);
    expect(rows).not.toContain(MARKER);
    expect(rows).not.toContain(REPORTER);
    expect(rows.toLowerCase()).not.toContain("free crypto now");
    const objects = await everyObject();
    expect(objects).not.toContain(MARKER);
  });

  it("the reporter stays out: not in content, contexts or outputs; revealed only on request, with a reason, audited", async () => {
    const { apiKey, queueId } = await setup();
    const graph = triageGraph(queueId);
    (graph.nodes[3] as { inputMapping: Record<string, string> }).inputMapping = { everything: "content", text: "content.snapshot.text" };
    const version = await publish(apiKey, graph);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "assisted" } });
    const created = await report(apiKey, `wire the fee ${MARKER}`);
    const runId = created.runs[0]!.runId;
    await waitForWait(apiKey, runId);
    const task = (await api(`/api/v1/queues/${queueId}/tasks`, { key: apiKey })).body.items.find((t: { runId: string }) => t.runId === runId);
    const opened = await api(`/api/v1/tasks/${task.id}`, { key: apiKey });
    expect(opened.body.context.everything).toMatchObject({ description: expect.stringContaining(MARKER), url: `https://social.example/p/${MARKER}`, ownerId: `owner-${MARKER}`, snapshot: { text: expect.any(String) } });
    expect(JSON.stringify(opened.body)).not.toContain(REPORTER);
    expect(JSON.stringify(opened.body)).not.toContain("reporter-77");

    const read = await api(`/api/v1/reports/${created.id}`, { key: apiKey });
    expect(read.body.description).toContain(MARKER);
    expect(read.body.reporter).toEqual({ known: true, revealed: false });
    expect(JSON.stringify(read.body)).not.toContain(REPORTER);
    const readOnly = await key(apiKey, ["read"]);
    expect((await api(`/api/v1/reports/${created.id}`, { key: readOnly })).status).toBe(403);
    const reviewer = await key(apiKey, ["review"]);
    expect((await api(`/api/v1/reports/${created.id}`, { key: reviewer })).status).toBe(403);
    const revealed = await api(`/api/v1/reports/${created.id}/reveal-reporter`, { key: apiKey, body: { reason: "The reporter asked to be contacted about an appeal." } });
    expect(revealed.body.reporter).toEqual({ id: "reporter-77", contact: REPORTER });
    const audit = await env.DB.prepare("SELECT details_json AS details FROM audit_events WHERE action = 'report.reporter_revealed' AND target_id = ?1").bind(created.id).first<{ details: string }>();
    expect(JSON.parse(audit!.details)).toEqual({ reason: "The reporter asked to be contacted about an appeal." });
    expect(await everyRow()).not.toContain(REPORTER);
  });

  it("shadow runs read content the same way", async () => {
    const { apiKey, queueId } = await setup();
    const version = await publish(apiKey, triageGraph(queueId));
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } });
    const created = await report(apiKey, `free crypto for all ${MARKER}`);
    const run = await waitForRun(apiKey, created.runs[0]!.runId);
    expect(run.state).toBe("succeeded");
    const bank = run.steps.find((s: { nodeId: string }) => s.nodeId === "bank");
    expect(bank).toMatchObject({ sealed: true, output: { data: { matched: true, count: 1 } } });
    // The review is simulated in shadow: nothing is shown to anyone, so nothing is read for it.
    expect((await contentReads(run.id)).map((r) => r.nodeId)).toEqual(["bank"]);
  });

  it("a node run twice (a retry) records one content read", async () => {
    const { apiKey, queueId } = await setup();
    const version = await publish(apiKey, triageGraph(queueId));
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const created = await report(apiKey, `free crypto ${MARKER}`);
    const runId = created.runs[0]!.runId;
    await waitForWait(apiKey, runId);
    const capability = (exports as any).WorkflowRuntimeCapability({ props: { artifactId: version.artifact.id, workflowVersionId: version.id } });
    const again = await capability.executeNode({ runId, authorityMode: "autonomous", nodeId: "bank", nodeKind: "enrichment" });
    // The sandbox learns the port, nothing of the step's data.
    expect(again).toEqual({ port: "success" });
    expect((await contentReads(runId)).filter((r) => r.nodeId === "bank")).toHaveLength(1);
  });

  it("a backtest records one content read per node, not one per report", async () => {
    const { apiKey, queueId } = await setup();
    const version = await publish(apiKey, triageGraph(queueId));
    const ids = [(await report(apiKey, `free crypto ${MARKER}`)).id, (await report(apiKey, `hello ${MARKER}`)).id, (await report(apiKey, `wire the fee ${MARKER}`)).id];
    const started = await api(`/api/v1/workflow-versions/${version.id}/backtests`, { key: apiKey, body: { reportIds: ids } });
    expect(started.status).toBe(202);
    const backtestId = started.body.id as string;
    const deadline = Date.now() + 20_000;
    let state = started.body.state;
    while (state !== "completed" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      state = (await api(`/api/v1/backtests/${backtestId}`, { key: apiKey })).body.state;
    }
    expect(state).toBe("completed");
    const reads = await env.DB.prepare("SELECT target_type AS type, details_json AS details FROM audit_events WHERE action = 'report.content_read' AND target_id = ?1").bind(backtestId).all<{ type: string; details: string }>();
    expect(reads.results.map((r) => r.type)).toEqual(["backtest"]);
    expect(JSON.parse(reads.results[0]!.details)).toMatchObject({ nodeId: "bank", backtestId });
  });
});

describe("rows sealed after the fact", () => {
  it("task contexts and derived step outputs written in plaintext before sealing are sealed by the Worker, and still open", async () => {
    const { sealLegacyTaskContexts } = await import("../src/cases");
    const { sealLegacyStepOutputs } = await import("../src/workflows");
    const { apiKey, queueId } = await setup();
    const graph = triageGraph(queueId);
    // A graph as before content existed: the bank reads the run's input.
    (graph.nodes[1] as { inputMapping: Record<string, string> }).inputMapping = { text: "input.text" };
    (graph.nodes[3] as { inputMapping: Record<string, string> }).inputMapping = { text: "input.text" };
    const version = await publish(apiKey, graph);
    const started = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: { text: "free crypto, an input the API client sent" } } });
    const runId = started.body.id as string;
    await waitForWait(apiKey, runId);
    const legacyText = `legacy plaintext ${MARKER}`;
    // What rows looked like before migration 0007.
    await env.DB.prepare("UPDATE human_tasks SET context_sealed = NULL, context_json = ?2 WHERE run_id = ?1")
      .bind(runId, JSON.stringify({ text: legacyText }))
      .run();
    const bankStep = `${runId}:bank:main:1`;
    // Step outputs as a release before migration 0070 wrote them (an outputs row).
    expect(await asOldFormOutputs(runId)).toBeGreaterThanOrEqual(1);
    await env.DB.prepare(`UPDATE workflow_step_outputs SET inline_json = ?2, data_classification_json = '["legacy"]' WHERE step_run_id = ?1`)
      .bind(bankStep, JSON.stringify({ port: "success", component: "keyword_bank", data: { matched: true, count: 1, keywords: [legacyText], patterns: [] }, latencyMs: 0 }))
      .run();
    expect(await everyRow()).toContain(legacyText);

    expect((await sealLegacyTaskContexts(env)).sealed).toBeGreaterThanOrEqual(1);
    // A step output of a run still going is left as it is (a later node may read it).
    expect((await sealLegacyStepOutputs(env)).sealed).toBe(0);
    await env.DB.prepare("UPDATE workflow_runs SET state = 'terminated' WHERE id = ?1").bind(runId).run();
    expect((await sealLegacyStepOutputs(env)).sealed).toBeGreaterThanOrEqual(1);
    expect(await sealLegacyTaskContexts(env)).toEqual({ sealed: 0 });

    expect(await everyRow()).not.toContain(legacyText);
    const task = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(runId).first<{ id: string }>())!;
    expect((await api(`/api/v1/tasks/${task.id}`, { key: apiKey })).body.context).toEqual({ text: legacyText });
    const detail = await api(`/api/v1/runs/${runId}`, { key: apiKey });
    expect(detail.body.steps.find((s: { nodeId: string }) => s.nodeId === "bank")).toMatchObject({ sealed: true, output: { data: { matched: true, count: 1 } } });
    const opened = await api(`/api/v1/runs/${runId}/content`, { key: apiKey });
    expect(opened.body.items[0].output.data.keywords).toEqual([legacyText]);
  });
});

describe("content of an appeal", () => {
  it("an appeal run's nodes read the appeal's reason as content.appealReason", async () => {
    const { apiKey, queueId } = await setup();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: queueId, timeout_seconds: 3600 }, inputMapping: { why: "content.appealReason", post: "content.snapshot.text" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
    };
    const version = await publish(apiKey, graph);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "appeal.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
    const created = await report(apiKey, `contested post ${MARKER}`);
    const appeal = await api("/api/v1/appeals", { key: apiKey, body: { reportId: created.id, reason: `I was quoting a news article ${MARKER}` } });
    expect(appeal.status).toBe(201);
    const runId = appeal.body.runs[0].runId as string;
    await waitForWait(apiKey, runId);
    const task = (await env.DB.prepare("SELECT id FROM human_tasks WHERE run_id = ?1").bind(runId).first<{ id: string }>())!;
    expect((await api(`/api/v1/tasks/${task.id}`, { key: apiKey })).body.context).toEqual({ why: `I was quoting a news article ${MARKER}`, post: `contested post ${MARKER}` });
    expect(await tablesHolding(MARKER)).toEqual([]);
  });
});

describe("who may open content", () => {
  async function raw(path: string, init: RequestInit = {}) {
    return (exports as any).default.fetch(new Request(`http://safest.test${path}`, { redirect: "manual", ...init })) as Promise<Response>;
  }
  async function signIn(installationId: string, email: string, role: string) {
    const link = await api("/api/v1/console-signin-links", { key: "test-admin-token", body: { installationId, email, role } });
    expect(link.status).toBe(201);
    const cookie = (await raw(link.body.path)).headers.get("set-cookie")!.split(";")[0]!;
    return (path: string) => raw(path, { headers: { cookie } });
  }

  it("a moderator limited to some queues opens only the reports behind them; a viewer opens none", async () => {
    const { installationId, apiKey } = await setup();
    const reportIn = async (queueName: string) => {
      const queue = await api("/api/v1/queues", { key: apiKey, body: { name: queueName, slaSeconds: 3600 } });
      const version = await publish(apiKey, {
        schemaVersion: 1,
        nodes: [
          { id: "start", kind: "start" },
          { id: "review", kind: "human_task", config: { queue_id: queue.body.id, timeout_seconds: 3600 }, inputMapping: { text: "content.snapshot.text" } },
          { id: "done", kind: "end" },
        ],
        edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
      });
      const created = await report(apiKey, `queued ${MARKER}`);
      const run = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {}, reportId: created.id } });
      await waitForWait(apiKey, run.body.id);
      return { queueId: queue.body.id as string, reportId: created.id };
    };
    const mine = await reportIn(`mine-${crypto.randomUUID().slice(0, 6)}`);
    const other = await reportIn(`other-${crypto.randomUUID().slice(0, 6)}`);
    const email = `mod-${crypto.randomUUID().slice(0, 6)}@example.org`;
    expect((await api("/api/v1/console-users", { key: apiKey, body: { email, role: "moderator", queueIds: [mine.queueId] } })).status).toBe(201);
    const moderator = await signIn(installationId, email, "moderator");
    const opened = await moderator(`/api/v1/reports/${mine.reportId}`);
    expect(opened.status).toBe(200);
    expect(((await opened.json()) as { subject: { snapshot: { text: string } } }).subject.snapshot.text).toContain(MARKER);
    expect((await moderator(`/api/v1/reports/${other.reportId}`)).status).toBe(404);
    const viewer = await signIn(installationId, `viewer-${crypto.randomUUID().slice(0, 6)}@example.org`, "viewer");
    expect((await viewer(`/api/v1/reports/${mine.reportId}`)).status).toBe(403);
    expect((await viewer(`/api/v1/reports?limit=5`)).status).toBe(200);
  });
});
