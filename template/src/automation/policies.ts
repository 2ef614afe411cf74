// Policies: versioned, immutable documents an ai_proposal node is run under. A version's text is
// stored canonical (NFC, LF line ends, no trailing spaces) with the `sha256:` digest of exactly that
// text, checked again whenever a run loads it; retiring a policy stops new versions, new references
// at publish and runs under it, while its versions stay readable.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError, conflict, notFound } from "../errors";
import { newId, sha256Hex } from "../lib/crypto";
import { isUniqueViolation } from "../lib/d1";

export const MAX_POLICY_TEXT_CHARS = 100_000;

/** The canonical form of a policy text: what is stored and digested. */
export function canonicalPolicyText(text: string): string {
  return text
    .normalize("NFC")
    .replace(/\r\n?/gu, "\n")
    .split("\n")
    .map((line) => line.replace(/[ \t]+$/u, ""))
    .join("\n")
    .replace(/^\n+|\n+$/gu, "");
}

export async function policyDigest(canonicalText: string): Promise<string> {
  return `sha256:${await sha256Hex(canonicalText)}`;
}

interface PolicyRow {
  id: string;
  name: string;
  description: string | null;
  createdBy: string;
  createdAt: string;
  retiredAt: string | null;
}

export interface PolicyVersionRow {
  id: string;
  policyId: string;
  policyName: string;
  version: number;
  text: string;
  digest: string;
  createdBy: string;
  createdAt: string;
  retiredAt: string | null;
}

const POLICY_COLUMNS = `id, name, description, created_by AS createdBy, created_at AS createdAt, retired_at AS retiredAt`;
const VERSION_COLUMNS = `v.id, v.policy_id AS policyId, p.name AS policyName, v.version, v.text, v.digest, v.created_by AS createdBy, v.created_at AS createdAt, p.retired_at AS retiredAt`;
const SUMMARY_COLUMNS = `id, version, digest, created_by AS createdBy, created_at AS createdAt`;

const actorName = (actor: Actor) => `${actor.audit.type}:${actor.audit.id}`;

function policyRow(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT ${POLICY_COLUMNS} FROM policies WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<PolicyRow>();
}

/** A version by id, with its policy's name and retirement; null when not in this installation. */
export function getPolicyVersionRow(db: D1Database, installationId: string, versionId: string): Promise<PolicyVersionRow | null> {
  return db.prepare(`SELECT ${VERSION_COLUMNS} FROM policy_versions v JOIN policies p ON p.id = v.policy_id WHERE v.installation_id = ?1 AND v.id = ?2`).bind(installationId, versionId).first<PolicyVersionRow>();
}

/** The newest version of the policy with this name; null when there is none. */
export function newestPolicyVersionRow(db: D1Database, installationId: string, policyName: string): Promise<PolicyVersionRow | null> {
  return db
    .prepare(`SELECT ${VERSION_COLUMNS} FROM policy_versions v JOIN policies p ON p.id = v.policy_id WHERE p.installation_id = ?1 AND p.name = ?2 ORDER BY v.version DESC LIMIT 1`)
    .bind(installationId, policyName)
    .first<PolicyVersionRow>();
}

function serializeVersion(row: PolicyVersionRow) {
  return { id: row.id, policyId: row.policyId, policyName: row.policyName, version: row.version, text: row.text, digest: row.digest, createdBy: row.createdBy, createdAt: row.createdAt };
}

function versionStatements(db: D1Database, actor: Actor, input: { id: string; policyId: string; name: string; text: string; digest: string; at: string }) {
  return [
    // Numbered in the insert itself, and only while the policy is live: a retired policy gets no version.
    db
      .prepare(`
      INSERT INTO policy_versions (id, installation_id, policy_id, version, text, digest, created_by, created_at)
      SELECT ?1, ?2, ?3, COALESCE((SELECT MAX(version) FROM policy_versions WHERE policy_id = ?3), 0) + 1, ?4, ?5, ?6, ?7
      FROM policies WHERE id = ?3 AND installation_id = ?2 AND retired_at IS NULL`)
      .bind(input.id, actor.installationId, input.policyId, input.text, input.digest, actorName(actor), input.at),
    auditStatement(
      db,
      {
        installationId: actor.installationId,
        idempotencyKey: `policy_version:${input.id}:published`,
        action: "policy.version_published",
        actor: actor.audit,
        target: { type: "policy_version", id: input.id },
        details: { policyId: input.policyId, name: input.name, digest: input.digest },
        at: input.at,
      },
      { table: "policy_versions", id: input.id },
    ),
  ];
}

/** Creates a policy; with `text`, its version 1 in the same batch. The name is unique per installation. */
export async function createPolicy(env: Env, actor: Actor, input: { name: string; description?: string; text?: string }) {
  const id = newId("pol");
  const at = new Date().toISOString();
  const statements = [
    env.DB.prepare(`INSERT INTO policies (id, installation_id, name, description, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`).bind(id, actor.installationId, input.name, input.description ?? null, actorName(actor), at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `policy:${id}:created`,
      action: "policy.created",
      actor: actor.audit,
      target: { type: "policy", id },
      details: { name: input.name },
      at,
    }),
  ];
  if (input.text !== undefined) {
    const text = checkedText(input.text);
    statements.push(...versionStatements(env.DB, actor, { id: newId("plv"), policyId: id, name: input.name, text, digest: await policyDigest(text), at }));
  }
  try {
    await env.DB.batch(statements);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("policy.name_taken", "A policy with this name already exists; add a version to it instead (POST /api/v1/policies/:id/versions).");
    throw error;
  }
  return getPolicy(env, actor, id);
}

function checkedText(text: string): string {
  const canonical = canonicalPolicyText(text);
  if (canonical.length === 0) throw new AppError("policy.text_empty", "A policy version needs text: the policy the model is to apply.", { status: 422 });
  if (canonical.length > MAX_POLICY_TEXT_CHARS) throw new AppError("policy.text_too_large", `A policy version may be at most ${MAX_POLICY_TEXT_CHARS} characters; split the policy.`, { status: 413 });
  return canonical;
}

/**
 * Publishes the next version of a policy (immutable; numbered 1, 2, …) and returns it with its
 * digest. A text whose canonical form equals the newest version's is not published again: that
 * version is returned with `created: false`.
 */
export async function addPolicyVersion(env: Env, actor: Actor, policyId: string, input: { text: string }) {
  const policy = await policyRow(env.DB, actor.installationId, policyId);
  if (!policy) throw notFound("policy");
  if (policy.retiredAt) throw conflict("policy.retired", "The policy is retired and takes no new versions; create a new policy.");
  const text = checkedText(input.text);
  const digest = await policyDigest(text);
  const newest = await newestPolicyVersionRow(env.DB, actor.installationId, policy.name);
  if (newest?.digest === digest) return { version: serializeVersion(newest), created: false };
  const id = newId("plv");
  const at = new Date().toISOString();
  await env.DB.batch(versionStatements(env.DB, actor, { id, policyId, name: policy.name, text, digest, at }));
  const row = await getPolicyVersionRow(env.DB, actor.installationId, id);
  if (!row) throw conflict("policy.retired", "The policy was retired meanwhile and takes no new versions.");
  return { version: serializeVersion(row), created: true };
}

export async function listPolicies(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`
    SELECT p.id, p.name, p.description, p.created_by AS createdBy, p.created_at AS createdAt, p.retired_at AS retiredAt,
      (SELECT json_object('id', v.id, 'version', v.version, 'digest', v.digest, 'createdAt', v.created_at) FROM policy_versions v WHERE v.policy_id = p.id ORDER BY v.version DESC LIMIT 1) AS latestJson
    FROM policies p WHERE p.installation_id = ?1 ORDER BY p.name`)
    .bind(actor.installationId)
    .all<PolicyRow & { latestJson: string | null }>();
  return results.map(({ latestJson, ...row }) => ({ ...row, latest: latestJson ? (JSON.parse(latestJson) as { id: string; version: number; digest: string; createdAt: string }) : null }));
}

/** A policy with its versions (newest first; texts through GET /policy-versions/:id) and its newest text. */
export async function getPolicy(env: Env, actor: Actor, id: string) {
  const policy = await policyRow(env.DB, actor.installationId, id);
  if (!policy) throw notFound("policy");
  const { results } = await env.DB.prepare(`SELECT ${SUMMARY_COLUMNS} FROM policy_versions WHERE installation_id = ?1 AND policy_id = ?2 ORDER BY version DESC`)
    .bind(actor.installationId, id)
    .all<{ id: string; version: number; digest: string; createdBy: string; createdAt: string }>();
  const newest = results[0] ? await getPolicyVersionRow(env.DB, actor.installationId, results[0].id) : null;
  return { ...policy, versions: results, latest: newest ? serializeVersion(newest) : null };
}

export async function getPolicyVersion(env: Env, actor: Actor, versionId: string) {
  const row = await getPolicyVersionRow(env.DB, actor.installationId, versionId);
  if (!row) throw notFound("policy_version");
  return { ...serializeVersion(row), retiredAt: row.retiredAt };
}

/** Retires a policy (idempotent: retiring a retired policy changes nothing and answers it again). */
export async function retirePolicy(env: Env, actor: Actor, id: string) {
  const policy = await policyRow(env.DB, actor.installationId, id);
  if (!policy) throw notFound("policy");
  if (!policy.retiredAt) {
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE policies SET retired_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND retired_at IS NULL`).bind(actor.installationId, id, at),
      auditStatement(
        env.DB,
        { installationId: actor.installationId, idempotencyKey: `policy:${id}:retired`, action: "policy.retired", actor: actor.audit, target: { type: "policy", id }, details: { name: policy.name }, at },
        { table: "policies", id, where: { retired_at: at } },
      ),
    ]);
  }
  return getPolicy(env, actor, id);
}
