// The editor's drafts, kept in this browser's localStorage: the unpublished graph of a workflow
// with its node positions, and the positions alone for a published version.
import type { Graph, GraphNode } from "../../api";

export type Positions = Record<string, { x: number; y: number }>;
export interface Draft {
  nodes: GraphNode[];
  edges: Graph["edges"];
  positions: Positions;
  basedOn: string | null;
  savedAt: string;
}

export const draftKey = (workflowId: string) => `safest.draft.${workflowId}`;
export const positionsKey = (workflowId: string) => `safest.positions.${workflowId}`;

export function readJson<T>(key: string): T | null {
  try {
    const raw = window.localStorage.getItem(key);
    return raw ? (JSON.parse(raw) as T) : null;
  } catch {
    return null;
  }
}

export function writeJson(key: string, value: unknown): void {
  try {
    if (value === null) window.localStorage.removeItem(key);
    else window.localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Storage full or disabled: the draft lives only in memory.
  }
}
