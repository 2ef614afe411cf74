// Workflows and versions: create, publish (validate → compile → store artifact), retire.
import { auditStatement, canonicalJson } from "../audit";
import { AppError, conflict, notFound } from "../errors";
import { newId, sha256Hex } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";
import type { Actor } from "../auth";
import { artifactStatement, compileWorkflowArtifact } from "./artifacts";
import type { StepMode } from "./fusion";
import { GraphValidationError, parseWorkflowGraph } from "./validation";
import { unresolvedReferences } from "./version-references";
import { getVersionRow, getWorkflowRow, type VersionRow } from "./versions-queries";

export async function createWorkflow(env: Env, actor: Actor, input: { name: string; description?: string }) {
  const id = newId("wf");
  const at = new Date().toISOString();
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO workflows (id, installation_id, name, description, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)`).bind(id, actor.installationId, input.name, input.description ?? null, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `workflow:${id}:created`,
        action: "workflow.created",
        actor: actor.audit,
        target: { type: "workflow", id },
        details: { name: input.name },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("workflow.name_taken", "A workflow with this name already exists.");
    throw error;
  }
  return { id, name: input.name, description: input.description ?? null, createdAt: at, updatedAt: at };
}

/**
 * Validates, compiles and stores a new immutable version; 422 with every problem when invalid.
 * `steps`: `fused` (default) runs consecutive fusable nodes as one Workflows step; `per_node` one each.
 */
export async function publishVersion(env: Env, actor: Actor, workflowId: string, graphInput: unknown, options: { steps?: StepMode } = {}) {
  const workflow = await getWorkflowRow(env.DB, actor.installationId, workflowId);
  if (!workflow) throw notFound("workflow");
  const graph = parseWorkflowGraph(graphInput, { fresh: true });
  const missing = await unresolvedReferences(env.DB, actor.installationId, graph);
  if (missing.length > 0) throw new GraphValidationError(missing);
  const graphJson = canonicalJson({ schemaVersion: 1, ...(graph.expressionSemantics ? { expressionSemantics: graph.expressionSemantics } : {}), nodes: graph.nodes, edges: graph.edges });
  const steps = options.steps ?? "fused";
  const artifact = await compileWorkflowArtifact(graph, { steps });
  const at = new Date().toISOString();
  const versionId = newId("wfv");
  const stored = await artifactStatement(env, { installationId: actor.installationId, artifact, at });
  // The version number is assigned inside the insert, so concurrent publishes cannot collide silently.
  const insertVersion = env.DB.prepare(`
    INSERT INTO workflow_versions (id, installation_id, workflow_id, version, graph_json, graph_digest, artifact_id, created_at)
    SELECT ?1, ?2, ?3, COALESCE(MAX(version), 0) + 1, ?4, ?5, ?6, ?7 FROM workflow_versions WHERE installation_id = ?2 AND workflow_id = ?3
  `).bind(versionId, actor.installationId, workflowId, graphJson, `sha256:${await sha256Hex(graphJson)}`, stored.id, at);
  try {
    await env.DB.batch([
      stored.statement,
      insertVersion,
      env.DB.prepare(`UPDATE workflows SET updated_at = ?3 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, workflowId, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `workflow_version:${versionId}:published`,
        action: "workflow.version_published",
        actor: actor.audit,
        target: { type: "workflow_version", id: versionId },
        details: { workflowId, workflowName: workflow.name, artifactId: stored.id, artifactDigest: artifact.digest, nodes: graph.nodes.length, steps },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError("workflow_version.conflict", "Another version was published at the same moment; retry.", { status: 409, retryable: true });
    throw error;
  }
  const row = await getVersionRow(env.DB, actor.installationId, versionId);
  return serializeVersion(row!);
}

export async function retireVersion(env: Env, actor: Actor, versionId: string) {
  const row = await getVersionRow(env.DB, actor.installationId, versionId);
  if (!row) throw notFound("workflow_version");
  if (!row.retiredAt) {
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE workflow_versions SET retired_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND retired_at IS NULL`).bind(actor.installationId, versionId, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `workflow_version:${versionId}:retired`,
        action: "workflow.version_retired",
        actor: actor.audit,
        target: { type: "workflow_version", id: versionId },
        details: { workflowId: row.workflowId, version: row.version },
        at,
      }),
    ]);
  }
  return serializeVersion((await getVersionRow(env.DB, actor.installationId, versionId))!);
}

export function serializeVersion(row: VersionRow) {
  return {
    id: row.id,
    workflowId: row.workflowId,
    workflowName: row.workflowName,
    version: row.version,
    graph: JSON.parse(row.graphJson) as unknown,
    graphDigest: row.graphDigest,
    artifact: { id: row.artifactId, digest: row.artifactDigest, sizeBytes: row.artifactSizeBytes, storage: row.artifactStorage },
    createdAt: row.createdAt,
    retiredAt: row.retiredAt,
  };
}
