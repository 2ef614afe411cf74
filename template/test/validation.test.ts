// The graph validator: one test per problem code (with its JSON path), and the fork/join plan.
import { describe, expect, it } from "vitest";
import type { ErrorDetail } from "../src/errors";
import { NODE_KINDS } from "../src/workflows/kinds/descriptors";
import { MAX_GRAPH_BYTES, MAX_WAIT_SECONDS } from "../src/workflows/types";
import { GraphValidationError, parseWorkflowGraph, validateWorkflowGraph } from "../src/workflows/validation";
import { edge } from "./helpers";

type Node = Record<string, unknown> & { id: string };
type Edge = ReturnType<typeof edge>;

const start = (id = "start"): Node => ({ id, kind: "start" });
const end = (id = "done"): Node => ({ id, kind: "end", config: { terminal_code: "resolved" } });
const enrich = (id: string, extra: Record<string, unknown> = {}): Node => ({ id, kind: "enrichment", config: { component: "builtin.text_stats" }, ...extra });
const join = (id: string): Node => ({ id, kind: "join" });
const condition = (id: string, when = "input.flag == true"): Node => ({
  id,
  kind: "condition",
  config: { cases: [{ port: "yes", when }], case_ports: ["yes"], default_port: "no" },
});
const graph = (nodes: unknown[], edges: unknown[]) => ({ schemaVersion: 1, nodes, edges });

/** start → node → done, with each of `ports` of the node leading to done. */
function around(node: Node, ports: string[]) {
  return graph([start(), node, end()], [edge("start", "success", node.id), ...ports.map((port) => edge(node.id, port, "done"))]);
}

/** Objects nested `levels` deep ({ a: { a: … } }), built iteratively. */
function nest(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

function problemsOf(input: unknown): ErrorDetail[] {
  const result = validateWorkflowGraph(input);
  expect(result.ok).toBe(false);
  return result.ok ? [] : result.errors;
}

/** Asserts the exact list of [code, path] the validator reports. */
function expectProblems(input: unknown, expected: Array<[code: string, path: string]>): ErrorDetail[] {
  const problems = problemsOf(input);
  expect(problems.map((p) => [p.code, p.path])).toEqual(expected);
  for (const problem of problems) expect(problem.message).toEqual(expect.any(String));
  return problems;
}

function plan(input: unknown): Record<string, string> {
  const result = validateWorkflowGraph(input);
  if (!result.ok) throw new Error(`expected a valid graph, got ${JSON.stringify(result.errors)}`);
  return result.graph.plan.forkJoins;
}

const minimal = () => graph([start(), end()], [edge("start", "success", "done")]);

describe("graph shape", () => {
  it("graph_invalid: the graph is not an object", () => {
    for (const input of ["graph", null, [], 42, undefined]) expectProblems(input, [["graph_invalid", "$"]]);
  });

  it("graph_invalid: nodes and edges are not arrays", () => {
    expectProblems({ schemaVersion: 1, nodes: {}, edges: "none" }, [
      ["graph_invalid", "$.nodes"],
      ["graph_invalid", "$.edges"],
    ]);
  });

  it("graph_invalid: the graph holds a value JSON cannot represent", () => {
    expectProblems({ ...minimal(), note: 1n }, [["graph_invalid", "$"]]);
  });

  it("schema_version_unsupported: schemaVersion other than 1", () => {
    expectProblems({ ...minimal(), schemaVersion: 2 }, [["schema_version_unsupported", "$.schemaVersion"]]);
    expectProblems({ ...minimal(), schemaVersion: "1" }, [["schema_version_unsupported", "$.schemaVersion"]]);
  });

  it("graph_too_large: more than 256 KiB of JSON, counted in bytes", () => {
    const padded = (note: string) => around(enrich("e", { config: { component: "builtin.text_stats", note } }), ["success"]);
    const base = new TextEncoder().encode(JSON.stringify(padded(""))).byteLength;
    expect(validateWorkflowGraph(padded("a".repeat(MAX_GRAPH_BYTES - base))).ok).toBe(true);
    expectProblems(padded("a".repeat(MAX_GRAPH_BYTES - base + 1)), [["graph_too_large", "$"]]);
    // "é" is two bytes in UTF-8: half as many characters already exceed the limit.
    expectProblems(padded("é".repeat(Math.ceil((MAX_GRAPH_BYTES - base + 1) / 2))), [["graph_too_large", "$"]]);
  });

  it("graph_too_many_nodes: more than 500 nodes", () => {
    const nodes = Array.from({ length: 501 }, (_, i) => end(`n${i}`));
    expectProblems(graph(nodes, []), [["graph_too_many_nodes", "$.nodes"]]);
  });

  it("accepts exactly 500 nodes", () => {
    const middle = Array.from({ length: 498 }, (_, i) => enrich(`e${i}`));
    const ids = ["start", ...middle.map((n) => n.id), "done"];
    const edges = ids.slice(1).map((id, i) => edge(ids[i]!, "success", id));
    expect(validateWorkflowGraph(graph([start(), ...middle, end()], edges)).ok).toBe(true);
  });

  it("graph_too_many_edges: more than 2000 edges", () => {
    const edges = Array.from({ length: 2001 }, () => edge("start", "success", "done"));
    expectProblems(graph([start(), end()], edges), [["graph_too_many_edges", "$.edges"]]);
  });

  it("graph_too_deep: nesting outside config is refused before it is serialized", () => {
    expectProblems({ ...minimal(), meta: nest(100) }, [["graph_too_deep", "$"]]);
    const deepEdge = { from: { nodeId: "start", port: "success", extra: nest(100) }, to: { nodeId: "done" } };
    expectProblems(graph([start(), end()], [deepEdge]), [["graph_too_deep", "$.edges[0]"]]);
    expectProblems(graph([start(), enrich("e", { inputMapping: nest(100) }), end()], []), [["graph_too_deep", "$.nodes[1]"]]);
  });

  it("stops at 100 problems", () => {
    const nodes = Array.from({ length: 150 }, (_, i) => ({ id: `n${i}`, kind: "teleport" }));
    const problems = problemsOf(graph(nodes, []));
    expect(problems).toHaveLength(100);
    expect(new Set(problems.map((p) => p.code))).toEqual(new Set(["node_kind_unknown"]));
  });
});

describe("nodes", () => {
  it("node_invalid: a node that is not an object", () => {
    expectProblems(graph([start(), end(), "oops"], [edge("start", "success", "done")]), [["node_invalid", "$.nodes[2]"]]);
  });

  it("identifier_invalid: a bad node id", () => {
    for (const id of ["has space", "", "x".repeat(101), "slash/no", 7, "__proto__"]) {
      expectProblems(graph([start(), end(), { id, kind: "end" }], [edge("start", "success", "done")]), [["identifier_invalid", "$.nodes[2].id"]]);
    }
  });

  it("accepts ids that happen to be Object.prototype names", () => {
    const ids = ["constructor", "toString", "hasOwnProperty", "valueOf"];
    const nodes = [start(), ...ids.map((id) => enrich(id)), join("j"), end()];
    const edges = [...ids.map((id) => edge("start", "success", id)), ...ids.map((id) => edge(id, "success", "j")), edge("j", "success", "done")];
    expect(plan(graph(nodes, edges))).toEqual({ "start:success": "j" });
  });

  it("identifier_invalid: bad inputMapping keys, error ports and case ports", () => {
    expectProblems(around(enrich("e", { inputMapping: { "1st": "input.x" } }), ["success"]), [["identifier_invalid", "$.nodes[1].inputMapping"]]);
    expectProblems(around(enrich("e", { inputMapping: JSON.parse('{"__proto__": "input.x"}') }), ["success"]), [["identifier_invalid", "$.nodes[1].inputMapping"]]);
    expectProblems(around(enrich("e", { errorPort: "bad port" }), ["success"]), [["identifier_invalid", "$.nodes[1].errorPort"]]);
    const route = { id: "route", kind: "condition", config: { cases: [], case_ports: ["bad port"], default_port: "no" } };
    expectProblems(around(route, ["no"]), [["identifier_invalid", "$.nodes[1].config.case_ports[0]"]]);
  });

  it("node_kind_unknown: a kind outside the fifteen", () => {
    for (const kind of ["teleport", "constructor", "__proto__", 3]) {
      expectProblems(graph([start(), end(), { id: "x", kind }], [edge("start", "success", "done")]), [["node_kind_unknown", "$.nodes[2].kind"]]);
    }
  });

  it("node_duplicate_id: the same id twice", () => {
    expectProblems(graph([start(), end(), end()], [edge("start", "success", "done")]), [["node_duplicate_id", "$.nodes[2].id"]]);
  });

  it("start_missing, start_duplicate and end_missing", () => {
    expectProblems(graph([end()], []), [["start_missing", "$.nodes"]]);
    expectProblems(graph([start(), start("again"), end()], [edge("start", "success", "done"), edge("again", "success", "done")]), [["start_duplicate", "$.nodes"]]);
    expectProblems(graph([start(), enrich("e")], [edge("start", "success", "e")]), [["end_missing", "$.nodes"]]);
  });

  it("config_too_deep: config nests more than 32 levels", () => {
    const deep = (levels: number) => around(enrich("e", { config: { component: "builtin.text_stats", extra: nest(levels) } }), ["success"]);
    expect(validateWorkflowGraph(deep(31)).ok).toBe(true);
    expectProblems(deep(32), [["config_too_deep", "$.nodes[1].config"]]);
    expectProblems(deep(200), [["config_too_deep", "$.nodes[1].config"]]);
  });

  it("config_invalid: config that is not an object", () => {
    expectProblems(around(enrich("e", { config: ["component"] }), ["success"]), [["config_invalid", "$.nodes[1].config"]]);
  });

  it("config_invalid: delay seconds beyond one year", () => {
    const delay = (seconds: unknown) => around({ id: "wait", kind: "delay", config: { seconds } }, ["completed"]);
    expect(validateWorkflowGraph(delay(MAX_WAIT_SECONDS)).ok).toBe(true);
    expectProblems(delay(MAX_WAIT_SECONDS + 1), [["config_invalid", "$.nodes[1].config.seconds"]]);
    expectProblems(delay(0), [["config_invalid", "$.nodes[1].config.seconds"]]);
    expectProblems(delay(1.5), [["config_invalid", "$.nodes[1].config.seconds"]]);
  });

  it("config_invalid: wait_for_event without event_type", () => {
    expectProblems(around({ id: "w", kind: "wait_for_event", config: { timeout_seconds: 60 } }, ["received", "timeout"]), [["config_invalid", "$.nodes[1].config.event_type"]]);
    expectProblems(around({ id: "w", kind: "wait_for_event", config: { event_type: "has space" } }, ["received", "timeout"]), [["config_invalid", "$.nodes[1].config.event_type"]]);
  });

  it("config_invalid: start_linked_workflow without workflow_version_id", () => {
    expectProblems(around({ id: "link", kind: "start_linked_workflow", config: {} }, ["started"]), [["config_invalid", "$.nodes[1].config.workflow_version_id"]]);
  });

  it("config_invalid: action without action_type", () => {
    expectProblems(around({ id: "act", kind: "action", config: { approval_timeout_seconds: 60 } }, ["applied", "rejected", "expired"]), [["config_invalid", "$.nodes[1].config.action_type"]]);
  });

  it("config_invalid: a case port with no case", () => {
    const route = { id: "route", kind: "condition", config: { cases: [], case_ports: ["yes"], default_port: "no" } };
    expectProblems(around(route, ["yes", "no"]), [["config_invalid", "$.nodes[1].config.case_ports"]]);
  });

  it("delay_timestamp_required: delay_until without inputMapping.timestamp", () => {
    expectProblems(around({ id: "until", kind: "delay_until" }, ["completed"]), [["delay_timestamp_required", "$.nodes[1].inputMapping.timestamp"]]);
    expect(validateWorkflowGraph(around({ id: "until", kind: "delay_until", inputMapping: { timestamp: "input.at" } }, ["completed"])).ok).toBe(true);
  });

  it("port_duplicate: a port declared twice", () => {
    const route = (config: Record<string, unknown>) => around({ id: "route", kind: "condition", config }, ["yes", "no"]);
    expectProblems(route({ cases: [{ port: "yes", when: "true" }], case_ports: ["yes", "yes"], default_port: "no" }), [["port_duplicate", "$.nodes[1].config.case_ports[1]"]]);
    expectProblems(
      route({
        cases: [
          { port: "yes", when: "true" },
          { port: "yes", when: "false" },
        ],
        case_ports: ["yes"],
        default_port: "no",
      }),
      [["port_duplicate", "$.nodes[1].config.cases[1].port"]],
    );
  });

  it("expression.invalid: invalid CEL in a condition case", () => {
    expectProblems(around(condition("route", "input.category =="), ["yes", "no"]), [["expression.invalid", "$.nodes[1].config.cases[0].when"]]);
    // An undeclared variable is caught when the version is published, not when a run reaches it.
    expectProblems(around(condition("route", "category == 'spam'"), ["yes", "no"]), [["expression.invalid", "$.nodes[1].config.cases[0].when"]]);
  });

  it("expression.invalid: invalid CEL in an inputMapping", () => {
    expectProblems(around(enrich("e", { inputMapping: { text: "input.text", score: "input.score +" } }), ["success"]), [["expression.invalid", "$.nodes[1].inputMapping.score"]]);
    expectProblems(around(enrich("e", { inputMapping: { score: 5 } }), ["success"]), [["expression.invalid", "$.nodes[1].inputMapping.score"]]);
  });

  it("input_mapping_invalid: inputMapping that is not an object", () => {
    expectProblems(around(enrich("e", { inputMapping: "input.text" }), ["success"]), [["input_mapping_invalid", "$.nodes[1].inputMapping"]]);
  });

  it("error_port_conflict: an error port named like a regular port", () => {
    const action = { id: "act", kind: "action", config: { action_type: "remove_content" }, errorPort: "rejected" };
    expectProblems(around(action, ["applied", "rejected", "expired"]), [["error_port_conflict", "$.nodes[1].errorPort"]]);
  });

  it("error_port_not_allowed: start, end and join cannot fail", () => {
    expectProblems(graph([{ ...start(), errorPort: "oops" }, end()], [edge("start", "success", "done")]), [["error_port_not_allowed", "$.nodes[0].errorPort"]]);
    expectProblems(graph([start(), { ...end(), errorPort: "oops" }], [edge("start", "success", "done")]), [["error_port_not_allowed", "$.nodes[1].errorPort"]]);
  });

  it("timeout_policy_invalid: bad timeout_seconds, retries or shape", () => {
    expectProblems(around(enrich("e", { timeoutPolicy: { timeout_seconds: 0, retries: 11 } }), ["success"]), [
      ["timeout_policy_invalid", "$.nodes[1].timeoutPolicy.timeout_seconds"],
      ["timeout_policy_invalid", "$.nodes[1].timeoutPolicy.retries"],
    ]);
    expectProblems(around(enrich("e", { timeoutPolicy: 30 }), ["success"]), [["timeout_policy_invalid", "$.nodes[1].timeoutPolicy"]]);
  });
});

describe("edges", () => {
  it("edge_invalid: an edge without from/to objects", () => {
    expectProblems(graph([start(), end()], [edge("start", "success", "done"), { from: "start", to: "done" }]), [["edge_invalid", "$.edges[1]"]]);
  });

  it("edge_from_unknown_node", () => {
    expectProblems(graph([start(), end()], [edge("start", "success", "done"), edge("ghost", "success", "done")]), [["edge_from_unknown_node", "$.edges[1].from.nodeId"]]);
  });

  it("edge_port_unknown: a port the node does not have", () => {
    expectProblems(graph([start(), end()], [edge("start", "success", "done"), edge("start", "failure", "done")]), [["edge_port_unknown", "$.edges[1].from.port"]]);
    expectProblems(graph([start(), end(), end("other")], [edge("start", "success", "done"), edge("done", "success", "other")]), [["edge_port_unknown", "$.edges[1].from.port"]]);
  });

  it("edge_port_unknown: a case whose port is not in case_ports, without echoing arbitrary text", () => {
    const hostile = "<script>alert(1)</script>";
    const route = { id: "route", kind: "condition", config: { cases: [{ port: hostile, when: "true" }], case_ports: [], default_port: "no" } };
    const [problem] = expectProblems(around(route, ["no"]), [["edge_port_unknown", "$.nodes[1].config.cases[0].port"]]);
    expect(problem!.message).not.toContain(hostile);
  });

  it("edge_to_unknown_node", () => {
    expectProblems(graph([start(), end()], [edge("start", "success", "done"), edge("start", "success", "ghost")]), [["edge_to_unknown_node", "$.edges[1].to.nodeId"]]);
  });

  it("edge_to_start", () => {
    expectProblems(graph([start(), condition("route"), end()], [edge("start", "success", "route"), edge("route", "yes", "done"), edge("route", "no", "start")]), [["edge_to_start", "$.edges[2].to.nodeId"]]);
  });

  it("edge_duplicate: the same edge twice", () => {
    expectProblems(graph([start(), end()], [edge("start", "success", "done"), edge("start", "success", "done")]), [["edge_duplicate", "$.edges[1]"]]);
  });

  it("port_unconnected: a declared port with no edge, error ports included", () => {
    expectProblems(graph([start(), condition("route"), end()], [edge("start", "success", "route"), edge("route", "yes", "done")]), [["port_unconnected", "$.nodes[1]"]]);
    expectProblems(around(enrich("e", { errorPort: "failed" }), ["success"]), [["port_unconnected", "$.nodes[1]"]]);
    expect(validateWorkflowGraph(around(enrich("e", { errorPort: "failed" }), ["success", "failed"])).ok).toBe(true);
  });
});

describe("structure", () => {
  it("graph_cycle: points at an edge on the cycle, not at one downstream of it", () => {
    const nodes = [start(), enrich("a"), condition("b"), enrich("c"), end()];
    // c → done comes first but only lies downstream of the cycle a → b → a.
    const edges = [edge("c", "success", "done"), edge("start", "success", "a"), edge("a", "success", "b"), edge("b", "yes", "a"), edge("b", "no", "c")];
    const [problem] = expectProblems(graph(nodes, edges), [["graph_cycle", "$.edges[2]"]]);
    expect(problem!.message).toContain("through a → b;");
  });

  it("graph_cycle: a self-loop", () => {
    expectProblems(graph([start(), condition("route"), end()], [edge("start", "success", "route"), edge("route", "yes", "route"), edge("route", "no", "done")]), [["graph_cycle", "$.edges[1]"]]);
  });

  it("node_unreachable: a node no path from start reaches", () => {
    expectProblems(graph([start(), end(), end("orphan")], [edge("start", "success", "done")]), [["node_unreachable", "$.nodes[2]"]]);
  });

  it("fork_join_missing: branches that end instead of meeting", () => {
    expectProblems(graph([start(), end("a"), end("b")], [edge("start", "success", "a"), edge("start", "success", "b")]), [["fork_join_missing", "$.nodes[0]"]]);
  });

  it("fork_join_missing: one path inside a branch escapes the join", () => {
    const nodes = [start(), condition("route"), enrich("other"), join("meet"), end(), end("escape")];
    const edges = [edge("start", "success", "route"), edge("start", "success", "other"), edge("route", "yes", "meet"), edge("route", "no", "escape"), edge("other", "success", "meet"), edge("meet", "success", "done")];
    const problems = problemsOf(graph(nodes, edges));
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ["fork_join_missing", "$.nodes[0]"],
      ["join_unmatched", "$.nodes[3]"],
    ]);
  });

  it("join_unmatched: a join no fork leads to", () => {
    expectProblems(graph([start(), join("j"), end()], [edge("start", "success", "j"), edge("j", "success", "done")]), [["join_unmatched", "$.nodes[1]"]]);
  });

  it("join_shared: two forks that close at the same join", () => {
    const nodes = [start(), enrich("a"), enrich("b"), enrich("c"), enrich("d"), join("j"), end()];
    const edges = [
      edge("start", "success", "a"),
      edge("start", "success", "b"),
      edge("a", "success", "c"),
      edge("a", "success", "d"),
      edge("c", "success", "j"),
      edge("d", "success", "j"),
      edge("b", "success", "j"),
      edge("j", "success", "done"),
    ];
    expectProblems(graph(nodes, edges), [["join_shared", "$.nodes[1]"]]);
  });

  it("branch_nesting_too_deep: a branch key longer than 100 characters", () => {
    const outer = "o".repeat(60);
    const inner = "i".repeat(60);
    const nodes = [start(), enrich(outer), enrich("side"), enrich(inner), enrich("short"), join("j1"), join("j2"), end()];
    const edges = [
      edge("start", "success", outer),
      edge("start", "success", "side"),
      edge(outer, "success", inner),
      edge(outer, "success", "short"),
      edge(inner, "success", "j1"),
      edge("short", "success", "j1"),
      edge("j1", "success", "j2"),
      edge("side", "success", "j2"),
      edge("j2", "success", "done"),
    ];
    expectProblems(graph(nodes, edges), [["branch_nesting_too_deep", "$.nodes[3]"]]);
  });
});

describe("valid graphs and the fork/join plan", () => {
  it("returns the normalized graph: known fields only, config defaulted", () => {
    const result = validateWorkflowGraph({ ...minimal(), extra: true, nodes: [{ ...start(), note: "x" }, end()] });
    expect(result).toEqual({
      ok: true,
      graph: {
        schemaVersion: 1,
        nodes: [
          { id: "start", kind: "start", config: {} },
          { id: "done", kind: "end", config: { terminal_code: "resolved" } },
        ],
        edges: [edge("start", "success", "done")],
        plan: { forkJoins: {} },
      },
    });
  });

  it("a fork whose branches take different paths, one through a condition whose ports both reach the join", () => {
    const nodes = [start(), condition("triage", "input.priority > 5"), enrich("enrich"), enrich("escalate"), join("meet"), end()];
    const edges = [
      edge("start", "success", "triage"),
      edge("start", "success", "enrich"),
      edge("triage", "yes", "escalate"),
      edge("triage", "no", "meet"),
      edge("escalate", "success", "meet"),
      edge("enrich", "success", "meet"),
      edge("meet", "success", "done"),
    ];
    expect(plan(graph(nodes, edges))).toEqual({ "start:success": "meet" });
  });

  it("a condition whose two ports lead to the same node is not a fork", () => {
    const edges = [edge("start", "success", "route"), edge("route", "yes", "done"), edge("route", "no", "done")];
    expect(plan(graph([start(), condition("route"), end()], edges))).toEqual({});
  });

  it("nested forks each get their own join, also when a condition port forks", () => {
    const nodes = [start(), enrich("split"), enrich("b"), enrich("c"), enrich("d"), join("inner"), join("outer"), condition("route"), enrich("e"), enrich("f"), join("third"), end()];
    const edges = [
      edge("start", "success", "split"),
      edge("start", "success", "b"),
      edge("split", "success", "c"),
      edge("split", "success", "d"),
      edge("c", "success", "inner"),
      edge("d", "success", "inner"),
      edge("inner", "success", "outer"),
      edge("b", "success", "outer"),
      edge("outer", "success", "route"),
      edge("route", "yes", "e"),
      edge("route", "yes", "f"),
      edge("route", "no", "third"),
      edge("e", "success", "third"),
      edge("f", "success", "third"),
      edge("third", "success", "done"),
    ];
    expect(plan(graph(nodes, edges))).toEqual({ "start:success": "outer", "split:success": "inner", "route:yes": "third" });
  });

  it("all sixteen node kinds appear in one valid graph", () => {
    const nodes: Node[] = [
      start(),
      { id: "route", kind: "condition", config: { cases: [{ port: "spam", when: "input.category == 'spam'" }], case_ports: ["spam"], default_port: "other" } },
      { id: "enrich", kind: "enrichment", config: { component_version_id: "cv_1" }, inputMapping: { text: "input.text" }, errorPort: "error" },
      { id: "pause", kind: "delay", config: { seconds: 60 } },
      { id: "until", kind: "delay_until", inputMapping: { timestamp: "input.review_at" } },
      join("together"),
      { id: "propose", kind: "ai_proposal", config: { provider_id: "ai_1", instructions: "Classify.", result_ports: ["remove", "keep"] } },
      { id: "review", kind: "human_task", config: { queue_id: "q_1", timeout_seconds: 3600, response_schema: { type: "object" } } },
      { id: "appeal", kind: "wait_for_event", config: { event_type: "appeal.filed", timeout_seconds: 86_400 } },
      { id: "notify", kind: "send_message", config: { template: "Thanks", recipient: "reporter" } },
      { id: "decide", kind: "decision", config: { policy_category: "scams_and_fraud", outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Spam." } },
      { id: "escalate", kind: "handoff", config: { queue_id: "q_2" } },
      { id: "linked", kind: "start_linked_workflow", config: { workflow_version_id: "wv_1" } },
      { id: "act", kind: "action", config: { action_type: "remove_content" }, errorPort: "failed", timeoutPolicy: { timeout_seconds: 30, retries: 3 } },
      { id: "tipline", kind: "ncmec_report", config: { confirmation_node: "review" }, errorPort: "not_reported" },
      end(),
      end("broken"),
    ];
    const edges: Edge[] = [
      edge("start", "success", "route"),
      edge("route", "spam", "enrich"),
      edge("route", "other", "enrich"),
      edge("enrich", "success", "pause"),
      edge("enrich", "success", "until"),
      edge("enrich", "error", "broken"),
      edge("pause", "completed", "together"),
      edge("until", "completed", "together"),
      edge("together", "success", "propose"),
      edge("propose", "remove", "review"),
      edge("propose", "keep", "review"),
      edge("review", "completed", "appeal"),
      edge("review", "timeout", "appeal"),
      edge("appeal", "received", "notify"),
      edge("appeal", "timeout", "notify"),
      edge("notify", "sent", "decide"),
      edge("decide", "recorded", "escalate"),
      edge("escalate", "handed_off", "linked"),
      edge("linked", "started", "act"),
      edge("act", "applied", "tipline"),
      edge("tipline", "reported", "done"),
      edge("tipline", "not_reported", "broken"),
      edge("act", "rejected", "done"),
      edge("act", "expired", "done"),
      edge("act", "failed", "broken"),
    ];
    const result = validateWorkflowGraph(graph(nodes, edges));
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    expect(new Set(result.graph.nodes.map((n) => n.kind))).toEqual(new Set(NODE_KINDS));
    expect(result.graph.plan.forkJoins).toEqual({ "enrich:success": "together" });
    expect(result.graph.nodes.find((n) => n.id === "act")).toMatchObject({ errorPort: "failed", timeoutPolicy: { timeout_seconds: 30, retries: 3 } });
  });
});

describe("parseWorkflowGraph", () => {
  it("returns the parsed graph with its plan", () => {
    expect(parseWorkflowGraph(minimal()).plan).toEqual({ forkJoins: {} });
  });

  it("throws workflow_graph.invalid (422) listing every problem", () => {
    const input = graph([start(), end(), end("orphan"), { id: "x", kind: "teleport" }], [edge("start", "success", "done")]);
    let thrown: unknown;
    try {
      parseWorkflowGraph(input);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GraphValidationError);
    const error = thrown as GraphValidationError;
    expect(error.code).toBe("workflow_graph.invalid");
    expect(error.status).toBe(422);
    expect(error.details).toEqual(problemsOf(input));
    expect(error.problems.map((p) => p.code)).toEqual(["node_kind_unknown"]);
  });
});
