// The graph the editor saves: a new workflow's empty graph, the expression semantics a saved graph
// declares, and the graph as the server expects it (empty optional parts dropped). Neither the DOM
// nor the API client is needed here, so the Worker's tests import this module as the editor does.
import { CURRENT_EXPRESSION_SEMANTICS, DEFAULT_EXPRESSION_SEMANTICS, type ExpressionSemantics } from "../../../src/workflows/expression-semantics";

/** A node as the editor holds it (console/src/api.ts `GraphNode`). */
interface EditorNode {
  id: string;
  kind: string;
  config?: Record<string, unknown>;
  inputMapping?: Record<string, string>;
  errorPort?: string;
  timeoutPolicy?: { timeout_seconds?: number; retries?: number };
}

/**
 * What a saved graph's expressions mean: a new version keeps the semantics of the version it is
 * based on (a stored graph without the field means `cel`), so editing never changes what its
 * expressions mean; a new workflow gets the current one.
 */
export function editorSemantics(base: { graph: { expressionSemantics?: ExpressionSemantics } } | null): ExpressionSemantics {
  return base ? (base.graph.expressionSemantics ?? DEFAULT_EXPRESSION_SEMANTICS) : CURRENT_EXPRESSION_SEMANTICS;
}

/** The graph a new workflow starts from: nothing on the canvas, the current semantics declared. */
export function newGraph(): { schemaVersion: 1; expressionSemantics: ExpressionSemantics; nodes: never[]; edges: never[] } {
  return { schemaVersion: 1, expressionSemantics: editorSemantics(null), nodes: [], edges: [] };
}

/** A graph without empty optional parts, as the server expects it; it declares `expressionSemantics` when given. */
export function cleanGraph<N extends EditorNode, E>(nodes: N[], edges: E[], expressionSemantics?: ExpressionSemantics): { schemaVersion: 1; expressionSemantics?: ExpressionSemantics; nodes: EditorNode[]; edges: E[] } {
  return {
    schemaVersion: 1,
    ...(expressionSemantics ? { expressionSemantics } : {}),
    nodes: nodes.map((n) => {
      const out: EditorNode = { id: n.id, kind: n.kind };
      if (n.config && Object.keys(n.config).length > 0) out.config = n.config;
      if (n.inputMapping && Object.keys(n.inputMapping).length > 0) out.inputMapping = n.inputMapping;
      if (n.errorPort) out.errorPort = n.errorPort;
      if (n.timeoutPolicy && Object.keys(n.timeoutPolicy).length > 0) out.timeoutPolicy = n.timeoutPolicy;
      return out;
    }),
    edges,
  };
}
