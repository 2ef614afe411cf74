// SQL for workflows and their versions.

export interface WorkflowRow {
  id: string;
  name: string;
  description: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface VersionRow {
  id: string;
  workflowId: string;
  workflowName: string;
  version: number;
  graphJson: string;
  graphDigest: string;
  artifactId: string;
  artifactDigest: string;
  artifactSizeBytes: number;
  artifactStorage: "inline" | "r2";
  createdAt: string;
  retiredAt: string | null;
}

const VERSION_COLUMNS = `
  v.id, v.workflow_id AS workflowId, w.name AS workflowName, v.version, v.graph_json AS graphJson,
  v.graph_digest AS graphDigest, v.artifact_id AS artifactId, a.bundle_digest AS artifactDigest,
  a.size_bytes AS artifactSizeBytes, CASE WHEN a.bundle_r2_key IS NULL THEN 'inline' ELSE 'r2' END AS artifactStorage,
  v.created_at AS createdAt, v.retired_at AS retiredAt`;

export function getWorkflowRow(db: D1Database, installationId: string, workflowId: string): Promise<WorkflowRow | null> {
  return db
    .prepare(`SELECT id, name, description, created_at AS createdAt, updated_at AS updatedAt
    FROM workflows WHERE installation_id = ?1 AND id = ?2`)
    .bind(installationId, workflowId)
    .first<WorkflowRow>();
}

export async function listWorkflowRows(db: D1Database, installationId: string): Promise<WorkflowRow[]> {
  const { results } = await db
    .prepare(`SELECT id, name, description, created_at AS createdAt, updated_at AS updatedAt
    FROM workflows WHERE installation_id = ?1 ORDER BY created_at DESC, id DESC LIMIT 500`)
    .bind(installationId)
    .all<WorkflowRow>();
  return results;
}

export function getVersionRow(db: D1Database, installationId: string, versionId: string): Promise<VersionRow | null> {
  return db
    .prepare(`SELECT ${VERSION_COLUMNS} FROM workflow_versions v
    JOIN workflows w ON w.id = v.workflow_id JOIN workflow_artifacts a ON a.id = v.artifact_id
    WHERE v.installation_id = ?1 AND v.id = ?2`)
    .bind(installationId, versionId)
    .first<VersionRow>();
}

export async function listVersionRows(db: D1Database, installationId: string, workflowId: string): Promise<VersionRow[]> {
  const { results } = await db
    .prepare(`SELECT ${VERSION_COLUMNS} FROM workflow_versions v
    JOIN workflows w ON w.id = v.workflow_id JOIN workflow_artifacts a ON a.id = v.artifact_id
    WHERE v.installation_id = ?1 AND v.workflow_id = ?2 ORDER BY v.version DESC`)
    .bind(installationId, workflowId)
    .all<VersionRow>();
  return results;
}
