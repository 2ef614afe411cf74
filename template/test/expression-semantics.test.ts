// Expression semantics: numbers from JSON under `cel` (the default, every graph
// published before the field existed) and `json-numbers-1`, evaluated both ways; a published
// version keeps the semantics it was published with.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { type ExpressionContext, ExpressionError, compileExpression, evaluateWorkflowExpression } from "../src/workflows/expressions";
import type { ExpressionSemantics, JsonValue } from "../src/workflows/types";
import { api, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

const INPUT = { n: 4, x: 3, y: 2, f: 2.5, count: 3, odd: 7 };
const context = (semantics: ExpressionSemantics | undefined, input: JsonValue = INPUT): ExpressionContext => ({ input, report: null, run: null, steps: {}, event: null, ...(semantics ? { semantics } : {}) });

function outcome(expression: string, semantics: ExpressionSemantics | undefined): { value: JsonValue } | { code: string; message: string } {
  try {
    return { value: evaluateWorkflowExpression(expression, context(semantics)) };
  } catch (error) {
    expect(error).toBeInstanceOf(ExpressionError);
    return { code: (error as ExpressionError).code, message: (error as Error).message };
  }
}

// expression → [under cel, under json-numbers-1]; a string is the failure's error code.
const TABLE: Array<[string, JsonValue | string, JsonValue | string]> = [
  ["input.count >= 3", true, true],
  ["input.n == 4", true, true],
  ["input.n > 3.5", true, true],
  ["input.n * 1.5", 6, 6],
  ["input.x / input.y", 1.5, 1.5],
  ["input.n % 2 == 0", "expression.failed", true],
  ["input.odd % 2 == 1", "expression.failed", true],
  ["input.n + 1", "expression.failed", 5],
  ["input.n * 2", "expression.failed", 8],
  ["input.x / 2", "expression.failed", 1.5],
  ["10 - input.x", "expression.failed", 7],
  ["3 / 2", 1, 1],
  ["7 % 2", 1, 1],
  ["int(input.n) % 2 == 0", true, true],
  ["-input.odd % 2", "expression.failed", -1],
  ["input.f % 2", "expression.failed", "expression.failed"],
];

describe("expression semantics, evaluated both ways", () => {
  for (const [expression, legacy, json] of TABLE) {
    it(`${expression}: cel → ${String(legacy)}, json-numbers-1 → ${String(json)}`, () => {
      for (const [semantics, expected] of [
        [undefined, legacy],
        ["cel", legacy],
        ["json-numbers-1", json],
      ] as const) {
        const result = outcome(expression, semantics);
        if (typeof expected === "string" && expected.startsWith("expression.")) expect(result).toMatchObject({ code: expected });
        else expect(result).toEqual({ value: expected });
      }
    });
  }

  it("says why a % on a fractional number or by zero fails under json-numbers-1", () => {
    expect(outcome("input.f % 2", "json-numbers-1")).toMatchObject({ code: "expression.failed", message: expect.stringContaining("% needs whole numbers") });
    expect(outcome("input.n % 0.0", "json-numbers-1")).toMatchObject({ code: "expression.failed", message: expect.stringContaining("modulus by zero") });
    expect(outcome("input.n % 1e300", "json-numbers-1")).toMatchObject({ code: "expression.failed", message: expect.stringContaining("% needs whole numbers") });
  });

  it("checks int/double literal arithmetic at compile time only under json-numbers-1", () => {
    expect(() => compileExpression("1 + 1.5 > 2")).toThrow(ExpressionError);
    expect(() => compileExpression("1 + 1.5 > 2", "cel")).toThrow(ExpressionError);
    expect(evaluateWorkflowExpression("1 + 1.5", context("json-numbers-1"))).toBe(2.5);
  });
});

function parityGraph(semantics?: ExpressionSemantics) {
  return {
    schemaVersion: 1,
    ...(semantics ? { expressionSemantics: semantics } : {}),
    nodes: [
      { id: "start", kind: "start" },
      { id: "route", kind: "condition", config: { cases: [{ port: "even", when: "input.n % 2 == 0" }], case_ports: ["even"], default_port: "odd" } },
      { id: "even", kind: "end", config: { terminal_code: "even" }, inputMapping: { half: "input.n / 2" } },
      { id: "odd", kind: "end", config: { terminal_code: "odd" } },
    ],
    edges: [edge("start", "success", "route"), edge("route", "even", "even"), edge("route", "odd", "odd")],
  };
}

describe("a published version keeps its semantics", () => {
  it("runs the same graph under each version's own semantics, and stores the semantics it was published with", async () => {
    const { apiKey } = await newInstallation();
    const legacy = await publish(apiKey, parityGraph("cel"));
    const json = await publish(apiKey, parityGraph("json-numbers-1"));

    const legacyRun = await waitForRun(apiKey, (await startRun(apiKey, legacy.id, { input: { n: 6 } })).id);
    expect(legacyRun.state).toBe("repair_required");
    expect(JSON.stringify(legacyRun.error ?? legacyRun)).toContain("expression.failed");

    const jsonRun = await waitForRun(apiKey, (await startRun(apiKey, json.id, { input: { n: 6 } })).id);
    expect(jsonRun.state).toBe("succeeded");
    expect(jsonRun.steps.find((s: { nodeId: string }) => s.nodeId === "route").output).toMatchObject({ port: "even" });
    expect(jsonRun.steps.find((s: { nodeId: string }) => s.nodeId === "even").output).toMatchObject({ terminalCode: "even", result: { half: 3 } });

    const legacyVersion = await api(`/api/v1/workflow-versions/${legacy.id}`, { key: apiKey });
    expect(legacyVersion.body.graph.expressionSemantics).toBe("cel");
    const jsonVersion = await api(`/api/v1/workflow-versions/${json.id}`, { key: apiKey });
    expect(jsonVersion.body.graph.expressionSemantics).toBe("json-numbers-1");

    // The old version still means what it meant: a second run of it fails the same way.
    const again = await waitForRun(apiKey, (await startRun(apiKey, legacy.id, { input: { n: 8 } })).id);
    expect(again.state).toBe("repair_required");
  });

  it("gives a graph published without the field json-numbers-1, written into its stored graph, so input.n % 2 == 0 works on JSON numbers", async () => {
    const { apiKey } = await newInstallation();
    const fresh = await publish(apiKey, parityGraph());
    const stored = await api(`/api/v1/workflow-versions/${fresh.id}`, { key: apiKey });
    expect(stored.body.graph.expressionSemantics).toBe("json-numbers-1");
    const run = await waitForRun(apiKey, (await startRun(apiKey, fresh.id, { input: { n: 6 } })).id);
    expect(run.state).toBe("succeeded");
    expect(run.steps.find((s: { nodeId: string }) => s.nodeId === "route").output).toMatchObject({ port: "even" });
    expect(run.steps.find((s: { nodeId: string }) => s.nodeId === "even").output).toMatchObject({ result: { half: 3 } });
    // Checking before publishing uses the same default: an int/double literal mix is valid.
    const graph = parityGraph();
    graph.nodes[1]!.config = { cases: [{ port: "even", when: "1 + 1.5 > 2.0" }], case_ports: ["even"], default_port: "odd" };
    const checked = await api("/api/v1/workflow-graphs/validate", { key: apiKey, body: { graph } });
    expect(checked.body).toMatchObject({ valid: true });
    // A trigger's when runs under its version's semantics: on the new version, % on a JSON number just works.
    const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "report.evidenceCount % 2 == 0", workflowVersionId: fresh.id, authorityMode: "shadow" } });
    expect(trigger.status, JSON.stringify(trigger.body)).toBe(201);
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: `acct-${crypto.randomUUID()}` }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    expect(report.body.runs).toEqual([expect.objectContaining({ triggerId: trigger.body.id, runId: expect.any(String) })]);
  });

  it("keeps cel for a version stored without the field (published before it existed)", async () => {
    const { apiKey } = await newInstallation();
    const old = await publish(apiKey, parityGraph("cel"));
    // A version from before the field: its stored graph has no expressionSemantics at all.
    const row = await env.DB.prepare("SELECT graph_json FROM workflow_versions WHERE id = ?1").bind(old.id).first<{ graph_json: string }>();
    const { expressionSemantics: _dropped, ...graph } = JSON.parse(row!.graph_json);
    await env.DB.prepare("UPDATE workflow_versions SET graph_json = ?2 WHERE id = ?1").bind(old.id, JSON.stringify(graph)).run();
    const run = await waitForRun(apiKey, (await startRun(apiKey, old.id, { input: { n: 6 } })).id);
    expect(run.state).toBe("repair_required");
    expect(JSON.stringify(run.error ?? run)).toContain("expression.failed");
  });

  it("refuses a condition or trigger comparing report.category with a value intake never stores, naming the key to write", async () => {
    const { apiKey } = await newInstallation();
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "categories" } });
    const graph = parityGraph();
    graph.nodes[1]!.config = { cases: [{ port: "even", when: "report.category == 'STATEMENT_CATEGORY_SCAMS_AND_FRAUD'" }], case_ports: ["even"], default_port: "odd" };
    const refused = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details).toContainEqual(expect.objectContaining({ path: "$.nodes[1].config.cases[0].when", code: "category_never_stored", message: expect.stringContaining("'scams_and_fraud'") }));
    graph.nodes[1]!.config = { cases: [{ port: "even", when: "report.category in ['violence', 'spam']" }], case_ports: ["even"], default_port: "odd" };
    const unknown = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details).toContainEqual(expect.objectContaining({ code: "category_never_stored", message: expect.stringContaining("'spam'") }));
    graph.nodes[1]!.config = { cases: [{ port: "even", when: "report.category == 'scams_and_fraud'" }], case_ports: ["even"], default_port: "odd" };
    const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph } });
    expect(version.status).toBe(201);

    const trigger = await api("/api/v1/triggers", {
      key: apiKey,
      body: { event: "report.created", when: "'STATEMENT_CATEGORY_SCAMS_AND_FRAUD' == report.category", workflowVersionId: version.body.id, authorityMode: "shadow" },
    });
    expect(trigger.status).toBe(422);
    expect(trigger.body.error).toMatchObject({ code: "trigger.when_invalid", message: expect.stringContaining("write 'scams_and_fraud' instead") });
    expect(trigger.body.error.details).toContainEqual(expect.objectContaining({ path: "$.when", code: "category_never_stored", instead: "scams_and_fraud" }));
    const good = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: "report.category == 'scams_and_fraud'", workflowVersionId: version.body.id, authorityMode: "shadow" } });
    expect(good.status).toBe(201);
  });

  it("refuses an unknown semantics, and checks expressions at publish under the declared one", async () => {
    const { apiKey } = await newInstallation();
    const workflow = await api("/api/v1/workflows", { key: apiKey, body: { name: "semantics" } });
    const unknown = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: { ...parityGraph(), expressionSemantics: "json-numbers-9" } } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details).toContainEqual(expect.objectContaining({ path: "$.expressionSemantics", code: "expression_semantics_unknown" }));

    const literal = (semantics?: ExpressionSemantics) => {
      const graph = parityGraph(semantics);
      graph.nodes[1]!.config = { cases: [{ port: "even", when: "1 + 1.5 > 2.0" }], case_ports: ["even"], default_port: "odd" };
      return graph;
    };
    const refused = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: literal("cel") } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details).toContainEqual(expect.objectContaining({ path: "$.nodes[1].config.cases[0].when", code: "expression.invalid" }));
    const accepted = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { key: apiKey, body: { graph: literal("json-numbers-1") } });
    expect(accepted.status).toBe(201);
  });

  it("checks a trigger's when under the semantics of the version it starts", async () => {
    const { apiKey } = await newInstallation();
    const legacy = await publish(apiKey, parityGraph("cel"));
    const json = await publish(apiKey, parityGraph("json-numbers-1"));
    const when = "report.evidenceCount + 1 > 0.5 && 1 + 1.5 > 2.0";
    const refused = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when, workflowVersionId: legacy.id, authorityMode: "shadow" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("trigger.when_invalid");
    const accepted = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when, workflowVersionId: json.id, authorityMode: "shadow" } });
    expect(accepted.status).toBe(201);

    // At intake each trigger's when runs under its own version's semantics.
    const even = "report.evidenceCount % 2 == 0";
    const legacyTrigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: even, workflowVersionId: legacy.id, authorityMode: "shadow" } });
    const jsonTrigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", when: even, workflowVersionId: json.id, authorityMode: "shadow" } });
    expect([legacyTrigger.status, jsonTrigger.status]).toEqual([201, 201]);
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "account", id: "acct-semantics" }, category: "scams_and_fraud" } });
    expect(report.status).toBe(201);
    const outcomes = new Map(report.body.runs.map((r: { triggerId: string }) => [r.triggerId, r]));
    expect(outcomes.get(legacyTrigger.body.id)).toMatchObject({ error: "expression.failed" });
    expect(outcomes.get(jsonTrigger.body.id)).toMatchObject({ runId: expect.any(String) });
  });
});
