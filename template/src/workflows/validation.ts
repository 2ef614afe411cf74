// parseWorkflowGraph: the one gate every graph passes before it is compiled or executed.
import { AppError, type ErrorDetail } from "../errors";
import { analyseContent } from "./content-access";
import { CURRENT_EXPRESSION_SEMANTICS, isExpressionSemantics, semanticsOf } from "./expression-semantics";
import { categoryLiteralProblems } from "./category-literals";
import { compileExpression, ExpressionError } from "./expressions";
import { checkBranchKeys, findCycle, planForks, reachableFrom, topologicalOrder } from "./graph-topology";
import { kindOf, NODE_KINDS, nodePorts } from "./kinds/descriptors";
import {
  EXPRESSION_SEMANTICS,
  type ExpressionSemantics,
  type JsonObject,
  type ParsedWorkflowGraph,
  type WorkflowEdgeV1,
  type WorkflowNodeKind,
  type WorkflowNodeV1,
  MAX_GRAPH_BYTES,
  MAX_NODES,
  MAX_WAIT_SECONDS,
  NODE_ID_PATTERN,
  PORT_PATTERN,
} from "./types";

const MAX_CONFIG_DEPTH = 32;
// The fixed structure around config is a few levels deep; anything nested deeper is refused up
// front, before JSON.stringify sees it (Node's overflows its stack near 10,000 levels) and before
// junk under an unknown key could be silently accepted.
const MAX_GRAPH_DEPTH = MAX_CONFIG_DEPTH + 32;
const MAX_ERRORS = 100;
const MAPPING_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/u;

/** Thrown by `parseWorkflowGraph`; `details` lists every problem with its JSON path. */
export class GraphValidationError extends AppError {
  constructor(readonly problems: ErrorDetail[]) {
    super("workflow_graph.invalid", `The workflow graph is invalid (${problems.length} problem${problems.length === 1 ? "" : "s"}).`, {
      status: 422,
      details: problems,
    });
  }
}

export type GraphValidationResult = { ok: true; graph: ParsedWorkflowGraph } | { ok: false; errors: ErrorDetail[] };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Depth of nested arrays/objects, measured iteratively so hostile nesting cannot overflow the stack. */
function exceedsDepth(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current !== "object" || current === null) continue;
    if (depth >= limit) return true;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * Finds a value nested deeper than `limit` anywhere in the input, iteratively. Returns where it
 * lies as a bounded path (`$`, `$.nodes[3]`, `$.nodes[3].config`, `$.edges[1]`), or null.
 * A cyclic object (only possible from JavaScript callers) counts as too deep.
 */
function findTooDeep(input: unknown, limit: number): string | null {
  const stack: Array<[unknown, number, string]> = [[input, 0, "$"]];
  while (stack.length > 0) {
    const [current, depth, where] = stack.pop()!;
    if (typeof current !== "object" || current === null) continue;
    if (depth >= limit) return where;
    const isArray = Array.isArray(current);
    for (const key of Object.keys(current)) {
      let child = where;
      if (depth === 0 && (key === "nodes" || key === "edges")) child = `$.${key}`;
      else if (depth === 1 && isArray && where !== "$") child = `${where}[${key}]`;
      else if (depth === 2 && key === "config" && where.startsWith("$.nodes[")) child = `${where}.config`;
      stack.push([(current as Record<string, unknown>)[key], depth + 1, child]);
    }
  }
  return null;
}

class Problems {
  readonly list: ErrorDetail[] = [];
  add(path: string, code: string, message: string): void {
    if (this.list.length < MAX_ERRORS) this.list.push({ path, code, message });
  }
  get full(): boolean {
    return this.list.length >= MAX_ERRORS;
  }
}

/** How a graph's expressions are checked: under its semantics; `fresh` (a graph being published) also refuses what only new graphs must not hold. */
interface ExpressionCheck {
  semantics: ExpressionSemantics;
  fresh: boolean;
}

function checkExpression(problems: Problems, path: string, expression: unknown, { semantics, fresh }: ExpressionCheck): void {
  try {
    compileExpression(expression, semantics);
    if (fresh && typeof expression === "string") {
      for (const problem of categoryLiteralProblems(expression, semantics)) problems.add(path, "category_never_stored", problem.message);
    }
  } catch (error) {
    // expression.invalid, or its cost over budget (expression.too_costly, expression.nesting_too_deep).
    if (error instanceof ExpressionError) problems.add(path, error.code, error.message);
    else throw error;
  }
}

function readNode(raw: unknown, index: number, problems: Problems, check: ExpressionCheck): WorkflowNodeV1 | null {
  const path = `$.nodes[${index}]`;
  if (!isRecord(raw)) {
    problems.add(path, "node_invalid", "A node must be an object.");
    return null;
  }
  const { id, kind } = raw;
  // `__proto__` cannot be a key of the `steps` record that expressions read.
  if (typeof id !== "string" || !NODE_ID_PATTERN.test(id) || id === "__proto__") {
    problems.add(`${path}.id`, "identifier_invalid", "A node id must be 1-100 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-' (and not __proto__).");
    return null;
  }
  if (typeof kind !== "string" || !kindOf(kind)) {
    problems.add(`${path}.kind`, "node_kind_unknown", `Unknown node kind; expected one of ${NODE_KINDS.join(", ")}.`);
    return null;
  }
  const config = raw.config ?? {};
  if (!isRecord(config)) {
    problems.add(`${path}.config`, "config_invalid", "config must be an object.");
    return null;
  }
  if (exceedsDepth(config, MAX_CONFIG_DEPTH)) {
    problems.add(`${path}.config`, "config_too_deep", `config may nest at most ${MAX_CONFIG_DEPTH} levels.`);
    return null;
  }
  const node: WorkflowNodeV1 = { id, kind: kind as WorkflowNodeKind, config: config as JsonObject };
  if (raw.inputMapping !== undefined) {
    if (!isRecord(raw.inputMapping)) {
      problems.add(`${path}.inputMapping`, "input_mapping_invalid", "inputMapping must be an object of CEL expressions.");
    } else {
      const mapping: Record<string, string> = {};
      for (const [key, expression] of Object.entries(raw.inputMapping)) {
        if (!MAPPING_KEY_PATTERN.test(key) || key === "__proto__") problems.add(`${path}.inputMapping`, "identifier_invalid", "inputMapping keys must be identifiers ([A-Za-z_][A-Za-z0-9_]*, ≤ 64, not __proto__).");
        else checkExpression(problems, `${path}.inputMapping.${key}`, expression, check);
        if (typeof expression === "string") mapping[key] = expression;
      }
      node.inputMapping = mapping;
    }
  }
  if (raw.errorPort !== undefined) {
    if (typeof raw.errorPort !== "string" || !PORT_PATTERN.test(raw.errorPort)) {
      problems.add(`${path}.errorPort`, "identifier_invalid", "errorPort must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'.");
    } else if (!kindOf(node.kind)!.canFail) {
      problems.add(`${path}.errorPort`, "error_port_not_allowed", `A ${node.kind} node cannot fail, so it has no error port.`);
    } else if (nodePorts(node).includes(raw.errorPort)) {
      problems.add(`${path}.errorPort`, "error_port_conflict", "errorPort must differ from the node's other ports.");
    } else {
      node.errorPort = raw.errorPort;
    }
  }
  if (raw.timeoutPolicy !== undefined) {
    const policy = raw.timeoutPolicy;
    if (!isRecord(policy)) {
      problems.add(`${path}.timeoutPolicy`, "timeout_policy_invalid", "timeoutPolicy must be an object.");
    } else {
      const { timeout_seconds: seconds, retries } = policy;
      if (seconds !== undefined && (!Number.isInteger(seconds) || (seconds as number) < 1 || (seconds as number) > MAX_WAIT_SECONDS)) {
        problems.add(`${path}.timeoutPolicy.timeout_seconds`, "timeout_policy_invalid", "timeout_seconds must be an integer from 1 to 31536000.");
      }
      if (retries !== undefined && (!Number.isInteger(retries) || (retries as number) < 0 || (retries as number) > 10)) {
        problems.add(`${path}.timeoutPolicy.retries`, "timeout_policy_invalid", "retries must be an integer from 0 to 10.");
      }
      node.timeoutPolicy = {
        ...(typeof seconds === "number" ? { timeout_seconds: seconds } : {}),
        ...(typeof retries === "number" ? { retries } : {}),
      };
    }
  }
  const descriptor = kindOf(node.kind)!;
  for (const problem of descriptor.validate?.(node) ?? []) problems.add(`${path}.${problem.path}`, problem.code, problem.message);
  for (const expression of descriptor.expressions?.(node.config) ?? []) checkExpression(problems, `${path}.${expression.path}`, expression.text, check);
  return node;
}

interface KnownNodes {
  nodes: Map<string, WorkflowNodeV1>;
  /** Ids of nodes that were refused (their problem is already reported). */
  rejected: Set<string>;
}

function readEdge(raw: unknown, index: number, known: KnownNodes, problems: Problems): WorkflowEdgeV1 | null {
  const { nodes, rejected } = known;
  const path = `$.edges[${index}]`;
  if (!isRecord(raw) || !isRecord(raw.from) || !isRecord(raw.to)) {
    problems.add(path, "edge_invalid", "An edge must be { from: { nodeId, port }, to: { nodeId } }.");
    return null;
  }
  const fromId = raw.from.nodeId;
  const port = raw.from.port;
  const toId = raw.to.nodeId;
  // An edge touching a refused node is skipped: "does not exist" would mislead about a node that does.
  if (typeof fromId === "string" && !nodes.has(fromId) && rejected.has(fromId)) return null;
  if (typeof toId === "string" && !nodes.has(toId) && rejected.has(toId)) return null;
  if (typeof fromId !== "string" || !nodes.has(fromId)) {
    problems.add(`${path}.from.nodeId`, "edge_from_unknown_node", "The edge starts at a node that does not exist.");
    return null;
  }
  const from = nodes.get(fromId)!;
  if (typeof port !== "string" || !nodePorts(from).includes(port)) {
    const ports = nodePorts(from);
    problems.add(`${path}.from.port`, "edge_port_unknown", ports.length ? `Node ${fromId} has no such port; its ports are ${ports.join(", ")}.` : `Node ${fromId} (${from.kind}) has no output ports.`);
    return null;
  }
  if (typeof toId !== "string" || !nodes.has(toId)) {
    problems.add(`${path}.to.nodeId`, "edge_to_unknown_node", "The edge ends at a node that does not exist.");
    return null;
  }
  if (nodes.get(toId)!.kind === "start") {
    problems.add(`${path}.to.nodeId`, "edge_to_start", "No edge may lead into the start node.");
    return null;
  }
  return { from: { nodeId: fromId, port }, to: { nodeId: toId } };
}

/** Validates a graph and returns every problem found, each with a JSON path and stable code. */
/**
 * `fresh`: the graph is being published (or checked before publishing), not read back. A fresh
 * graph without `expressionSemantics` gets the current one (CURRENT_EXPRESSION_SEMANTICS), written
 * into the stored graph, and its expressions may not compare `report.category` with a value no
 * report holds. A stored graph without the field keeps `cel`, the meaning it was published with.
 */
export function validateWorkflowGraph(input: unknown, options: { fresh?: boolean } = {}): GraphValidationResult {
  const fresh = options.fresh === true;
  if (fresh && isRecord(input) && input.expressionSemantics === undefined) input = { ...input, expressionSemantics: CURRENT_EXPRESSION_SEMANTICS };
  const problems = new Problems();
  if (!isRecord(input)) return { ok: false, errors: [{ path: "$", code: "graph_invalid", message: "A workflow graph must be a JSON object." }] };
  const deep = findTooDeep(input, MAX_GRAPH_DEPTH);
  if (deep !== null) {
    return {
      ok: false,
      errors: [
        deep.endsWith(".config")
          ? { path: deep, code: "config_too_deep", message: `config may nest at most ${MAX_CONFIG_DEPTH} levels.` }
          : { path: deep, code: "graph_too_deep", message: `A graph may nest at most ${MAX_GRAPH_DEPTH} levels.` },
      ],
    };
  }
  let text: string;
  try {
    text = JSON.stringify(input);
  } catch {
    // Only values that JSON cannot hold get here (BigInt from a JavaScript caller); depth is bounded above.
    return { ok: false, errors: [{ path: "$", code: "graph_invalid", message: "The workflow graph is not serializable JSON." }] };
  }
  if (new TextEncoder().encode(text).byteLength > MAX_GRAPH_BYTES) {
    return { ok: false, errors: [{ path: "$", code: "graph_too_large", message: `A graph may be at most ${MAX_GRAPH_BYTES} bytes of JSON.` }] };
  }
  if (input.schemaVersion !== 1) problems.add("$.schemaVersion", "schema_version_unsupported", "schemaVersion must be 1.");
  if (input.expressionSemantics !== undefined && !isExpressionSemantics(input.expressionSemantics)) {
    problems.add("$.expressionSemantics", "expression_semantics_unknown", `expressionSemantics must be one of ${EXPRESSION_SEMANTICS.join(", ")} (absent means cel).`);
  }
  const semantics = semanticsOf(input);
  if (!Array.isArray(input.nodes)) problems.add("$.nodes", "graph_invalid", "nodes must be an array.");
  if (!Array.isArray(input.edges)) problems.add("$.edges", "graph_invalid", "edges must be an array.");
  if (problems.list.length > 0) return { ok: false, errors: problems.list };
  const rawNodes = input.nodes as unknown[];
  const rawEdges = input.edges as unknown[];
  if (rawNodes.length > MAX_NODES) return { ok: false, errors: [{ path: "$.nodes", code: "graph_too_many_nodes", message: `A graph may have at most ${MAX_NODES} nodes.` }] };
  if (rawEdges.length > MAX_NODES * 4) return { ok: false, errors: [{ path: "$.edges", code: "graph_too_many_edges", message: `A graph may have at most ${MAX_NODES * 4} edges.` }] };

  const nodes = new Map<string, WorkflowNodeV1>();
  const rejected = new Set<string>();
  rawNodes.forEach((raw, index) => {
    if (problems.full) return;
    const node = readNode(raw, index, problems, { semantics, fresh });
    if (!node) {
      if (isRecord(raw) && typeof raw.id === "string") rejected.add(raw.id);
      return;
    }
    if (nodes.has(node.id)) problems.add(`$.nodes[${index}].id`, "node_duplicate_id", `Node id ${node.id} is used twice.`);
    else nodes.set(node.id, node);
  });
  const starts = [...nodes.values()].filter((n) => n.kind === "start");
  if (starts.length === 0) problems.add("$.nodes", "start_missing", "A graph needs exactly one start node.");
  if (starts.length > 1) problems.add("$.nodes", "start_duplicate", "A graph needs exactly one start node.");
  if (![...nodes.values()].some((n) => n.kind === "end")) problems.add("$.nodes", "end_missing", "A graph needs at least one end node.");

  const edges: WorkflowEdgeV1[] = [];
  const edgeKeys = new Set<string>();
  rawEdges.forEach((raw, index) => {
    if (problems.full) return;
    const edge = readEdge(raw, index, { nodes, rejected }, problems);
    if (!edge) return;
    const key = `${edge.from.nodeId}\u0000${edge.from.port}\u0000${edge.to.nodeId}`;
    if (edgeKeys.has(key)) problems.add(`$.edges[${index}]`, "edge_duplicate", "The same edge appears twice.");
    else {
      edgeKeys.add(key);
      edges.push(edge);
    }
  });
  if (problems.list.length > 0) return { ok: false, errors: problems.list };

  const nodeList = [...nodes.values()];
  const { order, cyclic } = topologicalOrder(nodeList, edges);
  if (cyclic.length > 0) {
    const cycle = findCycle(cyclic, edges);
    const through = cycle.nodes.slice(0, 5).join(" → ") + (cycle.nodes.length > 5 ? " → …" : "");
    problems.add(`$.edges[${cycle.edgeIndex}]`, "graph_cycle", `The graph has a cycle through ${through}; graphs must be acyclic.`);
    return { ok: false, errors: problems.list };
  }
  const startId = starts[0]!.id;
  // Problems about a node point at its position in the submitted `nodes` array.
  const nodeIndex = new Map<string, number>();
  rawNodes.forEach((raw, index) => {
    if (isRecord(raw) && typeof raw.id === "string" && !nodeIndex.has(raw.id)) nodeIndex.set(raw.id, index);
  });
  const pathOf = (nodeId: string): string => `$.nodes[${nodeIndex.get(nodeId)}]`;
  const reachable = reachableFrom(startId, edges);
  for (const node of nodeList) {
    if (!reachable.has(node.id)) problems.add(pathOf(node.id), "node_unreachable", `Node ${node.id} cannot be reached from the start node.`);
  }
  for (const node of nodeList) {
    if (node.kind === "end") continue;
    for (const port of nodePorts(node)) {
      if (!edges.some((e) => e.from.nodeId === node.id && e.from.port === port)) {
        problems.add(pathOf(node.id), "port_unconnected", `Port ${port} of node ${node.id} has no edge; connect every port so no path silently stops.`);
      }
    }
  }
  // A kind that needs a person's answer first (ncmec_report): its confirming human_task lies on every path to it.
  for (const node of nodeList) {
    const confirming = kindOf(node.kind)?.confirmedBy?.(node.config);
    if (confirming === undefined) continue;
    if (nodes.get(confirming)?.kind !== "human_task") {
      problems.add(`${pathOf(node.id)}.config.confirmation_node`, "confirmation_node_invalid", `${confirming} is not a human_task node of this graph; a person confirms in a review task before ${node.id}.`);
    } else if (
      reachableFrom(
        startId,
        edges.filter((e) => e.from.nodeId !== confirming && e.to.nodeId !== confirming),
      ).has(node.id)
    ) {
      problems.add(pathOf(node.id), "confirmation_bypassed", `A path reaches ${node.id} without passing the review task ${confirming}; every path to it must pass a person's confirmation.`);
    }
  }
  if (problems.list.length > 0) return { ok: false, errors: problems.list };
  const forkJoins = planForks(nodes, edges, order, problems, pathOf);
  if (problems.list.length === 0) checkBranchKeys(startId, edges, forkJoins, problems, pathOf);
  // Content is readable only where a node's kind needs it (content-access.ts).
  for (const problem of analyseContent(nodeList).problems) problems.add(`${pathOf(problem.nodeId)}.${problem.path}`, problem.code, problem.message);
  if (problems.list.length > 0) return { ok: false, errors: problems.list };
  // The field is kept only when present, so a graph published before it existed reads back unchanged
  // (a fresh graph always has it, above).
  const declared = input.expressionSemantics !== undefined ? { expressionSemantics: semantics } : {};
  return { ok: true, graph: { schemaVersion: 1, ...declared, nodes: nodeList, edges, plan: { forkJoins } } };
}

/** Returns the validated graph with its fork/join plan, or throws `GraphValidationError`. */
export function parseWorkflowGraph(input: unknown, options: { fresh?: boolean } = {}): ParsedWorkflowGraph {
  const result = validateWorkflowGraph(input, options);
  if (!result.ok) throw new GraphValidationError(result.errors);
  return result.graph;
}
