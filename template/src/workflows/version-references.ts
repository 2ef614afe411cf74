// At publish: everything a graph's configs name (queues, action types, providers, policies,
// components, endpoints, linked versions) must exist in the publishing installation. One D1 batch,
// one query per kind of reference; each missing name is a problem at its JSON path.
import type { ErrorDetail } from "../errors";
import { kindOf } from "./kinds/descriptors";
import type { ConfigReference } from "./kinds/descriptor";
import type { ParsedWorkflowGraph } from "./types";

/** Per reference type: the names of the installation's rows that satisfy it (`?1` installation, `?2` JSON list of names). */
const LOOKUPS: Record<ConfigReference["type"], { sql: string; what: string; create: string }> = {
  queue: {
    sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT id FROM queues WHERE installation_id = ?1) OR value IN (SELECT name FROM queues WHERE installation_id = ?1)`,
    what: "queue (by id or name)",
    create: "POST /api/v1/queues",
  },
  action_type: { sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT key FROM action_types WHERE installation_id = ?1)`, what: "action type (by key)", create: "POST /api/v1/action-types" },
  ai_provider: {
    sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT id FROM ai_providers WHERE installation_id = ?1) OR value IN (SELECT name FROM ai_providers WHERE installation_id = ?1)`,
    what: "AI provider (by id or name)",
    create: "POST /api/v1/ai-providers",
  },
  // A version id, or a policy's name (its newest version at run time); retired policies do not count.
  policy_version: {
    sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT v.id FROM policy_versions v JOIN policies p ON p.id = v.policy_id WHERE v.installation_id = ?1 AND p.retired_at IS NULL)
      OR value IN (SELECT p.name FROM policies p WHERE p.installation_id = ?1 AND p.retired_at IS NULL AND EXISTS (SELECT 1 FROM policy_versions v WHERE v.policy_id = p.id))`,
    what: "live policy version or policy with a version (by id or name)",
    create: "POST /api/v1/policies",
  },
  component_version: {
    sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT id FROM component_versions WHERE installation_id = ?1)`,
    what: "component version",
    create: "POST /api/v1/components/:id/versions",
  },
  webhook_endpoint: {
    sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT id FROM webhook_endpoints WHERE installation_id = ?1) OR value IN (SELECT name FROM webhook_endpoints WHERE installation_id = ?1 AND name IS NOT NULL)`,
    what: "webhook endpoint (by id or name)",
    create: "POST /api/v1/webhook-endpoints",
  },
  workflow_version: {
    sql: `SELECT value FROM json_each(?2) WHERE value IN (SELECT id FROM workflow_versions WHERE installation_id = ?1 AND retired_at IS NULL)`,
    what: "live workflow version",
    create: "POST /api/v1/workflows/:id/versions",
  },
};

const SHOWABLE = /^[A-Za-z0-9._:-]{1,100}$/u;

export async function unresolvedReferences(db: D1Database, installationId: string, graph: ParsedWorkflowGraph): Promise<ErrorDetail[]> {
  const found: Array<ConfigReference & { nodePath: string }> = [];
  graph.nodes.forEach((node, index) => {
    for (const reference of kindOf(node.kind)?.references?.(node.config) ?? []) found.push({ ...reference, nodePath: `$.nodes[${index}]` });
  });
  if (found.length === 0) return [];
  const types = [...new Set(found.map((r) => r.type))];
  const results = await db.batch<{ value: string }>(
    types.map((type) => {
      const names = [...new Set(found.filter((r) => r.type === type).map((r) => r.value))];
      return db.prepare(LOOKUPS[type].sql).bind(installationId, JSON.stringify(names));
    }),
  );
  const existing = new Map(types.map((type, i) => [type, new Set((results[i]?.results ?? []).map((row) => row.value))]));
  return found
    .filter((r) => !existing.get(r.type)!.has(r.value))
    .map((r) => ({
      path: `${r.nodePath}.${r.path}`,
      code: "reference_not_found",
      message: `No ${LOOKUPS[r.type].what}${SHOWABLE.test(r.value) ? ` ${r.value}` : ""} exists in this installation; create it first (${LOOKUPS[r.type].create}) or fix the name.`,
    }));
}
