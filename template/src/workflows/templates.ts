// The template gallery: the example workflows of examples/ (described in examples/catalog.json and
// bundled by template-graphs.ts), what each names and whether this installation has it, and "use",
// which publishes one as a new workflow. The console and API clients read the same list.
import catalog from "../../examples/catalog.json";
import { AppError, type ErrorDetail, notFound } from "../errors";
import type { Actor } from "../auth";
import { kindOf } from "./kinds/descriptors";
import type { ConfigReference } from "./kinds/descriptor";
import { TEMPLATE_GRAPHS } from "./template-graphs";
import { parseWorkflowGraph } from "./validation";
import { unresolvedReferences } from "./version-references";
import { createWorkflow, publishVersion } from "./versions";

interface CatalogEntry {
  file: string;
  title: string;
  whenToUse: string;
  needs: string[];
}

/** A template's id is its file name without `.json` (`spam-triage`). */
const idOf = (file: string) => file.replace(/\.json$/u, "");

/**
 * The catalog's entries that have a bundled graph. An entry whose graph is not bundled is left out
 * rather than served broken; the onboarding test fails on it, so it cannot ship unnoticed.
 */
function entries(): Array<CatalogEntry & { id: string; graph: unknown }> {
  return (catalog as CatalogEntry[]).flatMap((entry) => (entry.file in TEMPLATE_GRAPHS ? [{ ...entry, id: idOf(entry.file), graph: TEMPLATE_GRAPHS[entry.file] }] : []));
}

export interface TemplateReference {
  type: ConfigReference["type"];
  name: string;
  /** JSON path in the graph (`$.nodes[3].config.queue_id`). */
  path: string;
  /** Whether the calling installation has it; publishing needs every one. */
  exists: boolean;
}

/** Everything the graph's nodes name, each checked against the installation (one D1 batch), and the publish problems of the missing ones. */
async function referencesOf(db: D1Database, installationId: string, graphInput: unknown): Promise<{ references: TemplateReference[]; problems: ErrorDetail[] }> {
  const graph = parseWorkflowGraph(graphInput);
  const found = graph.nodes.flatMap((node, index) => (kindOf(node.kind)?.references?.(node.config) ?? []).map((r) => ({ type: r.type, name: r.value, path: `$.nodes[${index}].${r.path}` })));
  if (found.length === 0) return { references: [], problems: [] };
  const problems = await unresolvedReferences(db, installationId, graph);
  const missing = new Set(problems.map((problem) => problem.path));
  return { references: found.map((r) => ({ ...r, exists: !missing.has(r.path) })), problems };
}

async function view(db: D1Database, installationId: string, entry: ReturnType<typeof entries>[number]) {
  const graph = entry.graph as { nodes: Array<{ kind: string }> };
  const { references } = await referencesOf(db, installationId, entry.graph);
  return {
    id: entry.id,
    file: `examples/${entry.file}`,
    title: entry.title,
    whenToUse: entry.whenToUse,
    needs: entry.needs,
    nodeCount: graph.nodes.length,
    kinds: [...new Set(graph.nodes.map((n) => n.kind))],
    references,
    ready: references.every((r) => r.exists),
    graph: entry.graph,
  };
}

/**
 * Every template, in catalog order, with its graph and its references checked against the
 * installation. (A template is the same for every installation, so it is not a resource with an
 * id in the path: the list is small and carries the graphs.)
 */
export async function listTemplates(db: D1Database, installationId: string) {
  return { items: await Promise.all(entries().map((entry) => view(db, installationId, entry))) };
}

/**
 * Publishes a template as a new workflow (named after the template unless `name` is given). What it
 * names must exist first: a missing queue, action type, provider, policy or endpoint is a 422
 * `workflow_template.references_missing` listing each (type, name, path and the API to create it
 * with), and nothing is written. A taken name is a 409 `workflow.name_taken`.
 */
export async function useTemplate(env: Env, actor: Actor, id: string, input: { name?: string }) {
  const entry = entries().find((e) => e.id === id);
  if (!entry) throw notFound("workflow_template");
  const { references, problems } = await referencesOf(env.DB, actor.installationId, entry.graph);
  if (problems.length > 0) {
    const byPath = new Map(references.map((r) => [r.path, r]));
    throw new AppError(
      "workflow_template.references_missing",
      `The template ${entry.title} names ${problems.length} thing${problems.length === 1 ? "" : "s"} this installation does not have yet; create ${problems.length === 1 ? "it" : "them"} first, then use the template again.`,
      {
        status: 422,
        details: problems.map((p) => ({ ...p, type: byPath.get(p.path)?.type ?? null, name: byPath.get(p.path)?.name ?? null })),
      },
    );
  }
  // Two batches (each with its audit event): publishVersion checks the references again, so a name
  // deleted in between still fails cleanly, leaving the new workflow without a version to edit.
  const workflow = await createWorkflow(env, actor, { name: input.name ?? entry.title, description: `From the template ${entry.title} (examples/${entry.file}).` });
  const version = await publishVersion(env, actor, workflow.id, entry.graph);
  return { template: entry.id, workflow, version };
}
