// Workflow artifacts: kernel + graph compiled into one immutable ES module, stored by digest.
import { AppError } from "../errors";
import { byteLength, newId, sha256Hex } from "../lib/crypto";
import { KERNEL_SOURCE } from "./kernel/kernel-source.generated";
import { fusable, type StepMode } from "./fusion";
import { kindOf } from "./kinds/descriptors";
import { KERNEL_PROTOCOL, SUPPORTED_KERNEL_PROTOCOLS, type KernelGraph } from "./runtime-protocol";
import type { ParsedWorkflowGraph } from "./types";
import { stablePlanSql } from "../lib/stable-plan";

/** The compatibility date loaded workflow workers run with. */
export const ARTIFACT_COMPATIBILITY_DATE = "2026-04-01";
const DEFAULT_INLINE_MAX_BYTES = 65_536;

export interface CompiledArtifact {
  source: string;
  digest: string;
  sizeBytes: number;
  kernelProtocol: number;
}

export interface ArtifactRow {
  id: string;
  installationId: string;
  compatibilityDate: string;
  bundleDigest: string;
  bundleR2Key: string | null;
  inlineSourceText: string | null;
  status: string;
  kernelProtocol: number;
}

/**
 * Kernel + graph → one ES module; its digest is `sha256:<hex>` of the exact source text. Each node
 * carries its kind's kernel protocol, so the kernel never needs to know what a kind is; with
 * `steps: "fused"` (the default) nodes that fuse (fusion.ts) are marked, and the kernel runs each
 * group from such a node as one step. `per_node` keeps one step per node (the measured baseline).
 */
export async function compileWorkflowArtifact(graph: ParsedWorkflowGraph, options: { steps?: StepMode } = {}): Promise<CompiledArtifact> {
  const fuse = (options.steps ?? "fused") === "fused";
  const kernelGraph: KernelGraph = {
    nodes: graph.nodes.map((node) => {
      const kind = kindOf(node.kind)!;
      return { ...node, protocol: kind.protocol, effect: kind.shadow !== undefined, ...(fuse && fusable(node) ? { fuse: true } : {}) };
    }),
    edges: graph.edges,
    plan: graph.plan,
  };
  const source = `const GRAPH = Object.freeze(${JSON.stringify(kernelGraph)});\n${KERNEL_SOURCE}`;
  return { source, digest: `sha256:${await sha256Hex(source)}`, sizeBytes: byteLength(source), kernelProtocol: KERNEL_PROTOCOL };
}

/**
 * Prepares the artifact row; large sources go to R2 first (content-addressed, so a failed D1
 * batch leaves at most an unreferenced object, never a row without its source).
 */
export async function artifactStatement(env: Env, input: { installationId: string; artifact: CompiledArtifact; at: string }): Promise<{ id: string; statement: D1PreparedStatement }> {
  const id = newId("art");
  const limit = Number(env.ARTIFACT_INLINE_MAX_BYTES ?? DEFAULT_INLINE_MAX_BYTES) || DEFAULT_INLINE_MAX_BYTES;
  let r2Key: string | null = null;
  if (input.artifact.sizeBytes > limit) {
    r2Key = `artifacts/${input.artifact.digest.replace("sha256:", "")}.js`;
    await env.WORKFLOW_ARTIFACTS.put(r2Key, input.artifact.source, { httpMetadata: { contentType: "text/javascript" } });
  }
  const statement = env.DB.prepare(`
    INSERT INTO workflow_artifacts (
      id, installation_id, compatibility_date, bundle_digest, bundle_r2_key,
      inline_source_text, size_bytes, status, kernel_protocol, created_at
    ) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'ready', ?9, ?8)
  `).bind(id, input.installationId, ARTIFACT_COMPATIBILITY_DATE, input.artifact.digest, r2Key, r2Key ? null : input.artifact.source, input.artifact.sizeBytes, input.at, input.artifact.kernelProtocol);
  return { id, statement };
}

// Artifact rows are immutable (written once at publish, never updated), and so is the artifact a
// version names: a row read with its version live is kept for the life of the isolate, bounded,
// under its artifact and version. It is served only to a caller that read in the same request that
// the version is its installation's and live (`live`), and only when the row is that installation's.
const artifactRows = new Map<string, ArtifactRow>();
/** How many artifact rows an isolate keeps (inline sources are at most ARTIFACT_INLINE_MAX_BYTES each). */
export const ARTIFACT_CACHE_LIMIT = 32;

const artifactKey = (artifactId: string, workflowVersionId: string) => `${artifactId}|${workflowVersionId}`;

/** Whether this isolate keeps the row of this artifact and version (for tests of the bound). */
export function artifactRowCached(artifactId: string, workflowVersionId: string): boolean {
  return artifactRows.has(artifactKey(artifactId, workflowVersionId));
}

/** loadArtifactRow's read (?1 artifact, ?2 version, ?3 the installation or null), planned once (lib/stable-plan.ts). */
export const ARTIFACT_ROW_SQL = stablePlanSql(`
    SELECT a.id, a.installation_id AS installationId, a.compatibility_date AS compatibilityDate,
      a.bundle_digest AS bundleDigest, a.bundle_r2_key AS bundleR2Key,
      a.inline_source_text AS inlineSourceText, a.status, a.kernel_protocol AS kernelProtocol
    FROM workflow_artifacts a JOIN workflow_versions v ON v.artifact_id = a.id
    WHERE a.id = ?1 AND v.id = ?2 AND v.retired_at IS NULL AND (?3 IS NULL OR a.installation_id = ?3) LIMIT 1
  `);

/**
 * The artifact of a live (not retired) version; throws `workflow_artifact.not_ready` otherwise.
 * `live`: the caller read, in this request, that the version is this installation's, not retired,
 * and names this artifact (createRun's version read); the isolate's copy of the row is then enough.
 * Without it (a Workflows instance loading its version), retirement is checked in D1 every time;
 * with it, a row read from D1 must be that installation's too.
 */
export async function loadArtifactRow(env: Env, artifactId: string, workflowVersionId: string, live?: { installationId: string }): Promise<ArtifactRow> {
  const key = artifactKey(artifactId, workflowVersionId);
  const cached = live ? artifactRows.get(key) : undefined;
  if (cached && cached.installationId === live!.installationId) return cached;
  const row = await env.DB.prepare(ARTIFACT_ROW_SQL)
    .bind(artifactId, workflowVersionId, live?.installationId ?? null)
    .first<ArtifactRow>();
  if (row?.status !== "ready") throw new AppError("workflow_artifact.not_ready", "The workflow artifact is not available.", { status: 409 });
  if (!SUPPORTED_KERNEL_PROTOCOLS.includes(row.kernelProtocol)) {
    throw new AppError("workflow_artifact.kernel_protocol_unsupported", `The artifact speaks kernel protocol ${row.kernelProtocol}, which this platform version no longer serves; publish the graph again.`, { status: 409 });
  }
  artifactRows.delete(key);
  if (artifactRows.size >= ARTIFACT_CACHE_LIMIT) artifactRows.delete(artifactRows.keys().next().value!);
  artifactRows.set(key, row);
  return row;
}

/** The artifact's source, refused unless its digest matches the recorded one. Checked at every load. */
export async function loadArtifactSource(env: Env, artifact: ArtifactRow): Promise<string> {
  let source = artifact.inlineSourceText;
  if (source === null && artifact.bundleR2Key) source = (await (await env.WORKFLOW_ARTIFACTS.get(artifact.bundleR2Key))?.text()) ?? null;
  if (source === null) throw new AppError("workflow_artifact.missing", "The workflow artifact's source is missing.", { status: 409 });
  if (`sha256:${await sha256Hex(source)}` !== artifact.bundleDigest) {
    throw new AppError("workflow_artifact.digest_mismatch", "The workflow artifact does not match its digest and was refused.", { status: 409 });
  }
  return source;
}
