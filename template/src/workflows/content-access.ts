// Who may read the reported content. Three circles: the report's summary is open to
// every expression; its content (`content`: snapshot, description, subject URL and owner, evidence,
// an appeal's reason) only to nodes whose kind declares `content` (kinds/descriptors.ts); the
// reporter never to automation. What a node that read content derives from it (matched keywords,
// a model's rationale) is sealed like the content itself: later nodes see its verdict fields only,
// unless they may read content too. Pure: the same analysis runs at publish and in the runtime.
import { mentionsVariable, referencedSteps } from "./expressions";
import { kindOf, nodeExpressions } from "./kinds/descriptors";
import type { JsonObject, JsonValue, WorkflowNodeV1 } from "./types";

/** Output fields every node keeps open: the kernel walks by `port`; the rest describe the step, not the content. */
const ALWAYS_OPEN = ["port", "status", "simulated", "effectSuppressed", "simulationCode", "errorCode", "exhausted", "terminalCode"];

export interface StepReference {
  id: string;
  /** The fields read below the step's output, as far as they are static (`data.keywords`). */
  path: string[];
}

const IDENTIFIER = /[A-Za-z_][A-Za-z0-9_]*/uy;
const QUOTED = /\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]/uy;

/**
 * The static paths an expression reads under `steps` (`steps.bank.data.matched` → bank, [data,
 * matched]); null when it reads `steps` dynamically (`steps[x]`, `steps.exists(…)`). A path stops
 * at a computed index or a method call (`….keywords.size()` reads `keywords`).
 */
export function stepReferences(expression: string): StepReference[] | null {
  if (referencedSteps(expression) === null) return null;
  const found: StepReference[] = [];
  for (const match of expression.matchAll(/\bsteps\b/gu)) {
    let at = match.index + match[0].length;
    const segments: string[] = [];
    for (;;) {
      let cursor = at;
      while (expression[cursor] === " ") cursor += 1;
      let segment: string | undefined;
      if (expression[cursor] === ".") {
        cursor += 1;
        if (expression[cursor] === "?") cursor += 1;
        while (expression[cursor] === " ") cursor += 1;
        IDENTIFIER.lastIndex = cursor;
        const name = IDENTIFIER.exec(expression);
        if (!name) break;
        let after = cursor + name[0].length;
        while (expression[after] === " ") after += 1;
        if (expression[after] === "(") break; // a method or macro, not a field
        segment = name[0];
        cursor += name[0].length;
      } else if (expression[cursor] === "[") {
        QUOTED.lastIndex = cursor + 1;
        const quoted = QUOTED.exec(expression);
        if (!quoted) break;
        segment = quoted[1] ?? quoted[2];
        cursor = QUOTED.lastIndex;
      } else {
        break;
      }
      segments.push(segment!);
      at = cursor;
    }
    const [id, ...path] = segments;
    if (id) found.push({ id, path });
  }
  return found;
}

function openFieldsOf(node: WorkflowNodeV1): readonly string[] | "all" {
  return kindOf(node.kind)?.content?.openOutput ?? "all";
}

/** Whether `path` (below a step's output) stays open when that step read content. */
export function isOpenPath(openOutput: readonly string[] | "all", path: string[]): boolean {
  if (openOutput === "all" || path.length === 0) return true;
  const fields = [...ALWAYS_OPEN, ...openOutput];
  for (let depth = 1; depth <= path.length; depth++) {
    if (fields.includes(path.slice(0, depth).join("."))) return true;
  }
  // A parent of open fields (`data` when `data.matched` is open) shows only those fields.
  const prefix = `${path.join(".")}.`;
  return fields.some((field) => field.startsWith(prefix));
}

export interface ContentAnalysis {
  /** Nodes whose context holds the content (and earlier nodes' sealed outputs). */
  readers: Set<string>;
  problems: Array<{ nodeId: string; path: string; code: "content_not_readable_here"; message: string }>;
}

const analyses = new WeakMap<readonly WorkflowNodeV1[], ContentAnalysis>();

/**
 * Which nodes read content, and where a node that may not read it tries to. A node may read it when
 * its kind declares `content`; it reads it when an expression names `content`, or a sealed field
 * of a node that read it (which makes its own output derived, hence sealed, too).
 */
export function analyseContent(nodes: readonly WorkflowNodeV1[]): ContentAnalysis {
  const cached = analyses.get(nodes);
  if (cached) return cached;
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const texts = new Map(nodes.map((node) => [node.id, nodeExpressions(node).filter((e): e is { path: string; text: string } => typeof e.text === "string")]));
  const readers = new Set<string>();
  const readsSealed = (reference: StepReference) => readers.has(reference.id) && !isOpenPath(openFieldsOf(byId.get(reference.id)!), reference.path);
  for (let changed = true; changed; ) {
    changed = false;
    for (const node of nodes) {
      if (readers.has(node.id) || !kindOf(node.kind)?.content) continue;
      const reads = texts.get(node.id)!.some(({ text }) => {
        if (mentionsVariable(text, "content")) return true;
        const references = stepReferences(text);
        return references === null ? readers.size > 0 : references.some(readsSealed);
      });
      if (reads) {
        readers.add(node.id);
        changed = true;
      }
    }
  }
  const problems: ContentAnalysis["problems"] = [];
  for (const node of nodes) {
    if (kindOf(node.kind)?.content) continue;
    for (const { path, text } of texts.get(node.id)!) {
      if (mentionsVariable(text, "content")) {
        problems.push({
          nodeId: node.id,
          path,
          code: "content_not_readable_here",
          message: `A ${node.kind} node may not read content (the report's snapshot, description, subject URL and owner, evidence); only enrichment, ai_proposal, human_task and handoff nodes may. Read a verdict of one of them instead (e.g. steps.<id>.data.matched).`,
        });
        continue;
      }
      const sealed = (stepReferences(text) ?? []).find(readsSealed);
      if (sealed) {
        const open = openFieldsOf(byId.get(sealed.id)!);
        problems.push({
          nodeId: node.id,
          path,
          code: "content_not_readable_here",
          message: `steps.${sealed.id}.${sealed.path.join(".")} is derived from the reported content and sealed; a ${node.kind} node may read only its open fields (${open === "all" ? "all" : open.join(", ")}).`,
        });
      }
    }
  }
  const analysis = { readers, problems };
  analyses.set(nodes, analysis);
  return analysis;
}

function pick(source: JsonObject, path: string[], target: JsonObject): void {
  const [head, ...rest] = path;
  if (head === undefined || !Object.hasOwn(source, head)) return;
  const value = source[head] as JsonValue;
  if (rest.length === 0) {
    Object.defineProperty(target, head, { value, enumerable: true, writable: true, configurable: true });
    return;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return;
  const child = (Object.hasOwn(target, head) ? target[head] : {}) as JsonObject;
  Object.defineProperty(target, head, { value: child, enumerable: true, writable: true, configurable: true });
  pick(value, rest, child);
}

/**
 * The open view of a content reader's output (its open fields only) and whether anything was held
 * back; for other nodes the output is open as it is.
 */
export function openView(node: WorkflowNodeV1, readsContent: boolean, output: Record<string, unknown>): { open: Record<string, unknown>; sealed: boolean } {
  const fields = openFieldsOf(node);
  if (!readsContent || fields === "all") return { open: output, sealed: false };
  const open: JsonObject = {};
  for (const field of [...ALWAYS_OPEN, ...fields]) pick(output as JsonObject, field.split("."), open);
  return { open, sealed: JSON.stringify(open) !== JSON.stringify(output) };
}
