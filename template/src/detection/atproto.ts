// The installation as an ATProto labeler: its settings (labeler_settings: the DID labels are
// served as, which labels are public, its signing key) and com.atproto.label.queryLabels over the
// public ones.
//
// Public is the installation's choice, made twice: the entity kinds (account and content kinds
// only: a personal kind, an IP, a device, an email, is refused, and its labels hold no clear
// subject anyway) and, optionally, the label values. Nothing is public until the settings exist.
// A label's `uri` is its subject as the product sent it (for a Bluesky-style product a DID or an
// at:// URI), so patterns match the subject text: exactly, or as a prefix ending in `*`.
//
// With a signing key every label carries `sig` (atproto-signing.ts); the key is generated here,
// sealed under the installation's key, and never leaves: only its did:key is shown. `sig` is
// ATProto's JSON form of bytes: {"$bytes": base64 without padding}.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { openPersonalData, sealPersonalData } from "../cases";
import { AppError } from "../errors";
import { didKeyOf, fromBase64, newLabelerKey, signLabel, toBase64, type UnsignedLabel } from "./atproto-signing";
import { OUTCOME_ENTITY_KINDS } from "./rule-sets";

const DID = /^did:[a-z]+:[A-Za-z0-9._:%-]{1,2000}$/u;
const LABEL_VALUE = /^[a-z0-9][a-z0-9_.:!-]{0,63}$/u;
/** URI patterns a query may name (the lexicon leaves the count open; this bounds the statement). */
export const MAX_URI_PATTERNS = 25;

interface SettingsRow {
  did: string;
  publicKindsJson: string;
  publicValuesJson: string | null;
  signingKeySealed: string | null;
  publicKey: string | null;
  updatedAt: string;
}

function settingsRow(db: D1Database, installationId: string) {
  return db
    .prepare(
      `SELECT did, public_kinds_json AS publicKindsJson, public_values_json AS publicValuesJson, signing_key_sealed AS signingKeySealed, public_key AS publicKey, updated_at AS updatedAt FROM labeler_settings WHERE installation_id = ?1`,
    )
    .bind(installationId)
    .first<SettingsRow>();
}

function serialize(row: SettingsRow | null) {
  if (!row) return { configured: false as const, did: null, publicKinds: [], publicValues: null, publicKey: null, signed: false, updatedAt: null };
  return {
    configured: true as const,
    did: row.did,
    publicKinds: JSON.parse(row.publicKindsJson) as string[],
    publicValues: row.publicValuesJson === null ? null : (JSON.parse(row.publicValuesJson) as string[]),
    publicKey: row.publicKey,
    signed: row.signingKeySealed !== null,
    updatedAt: row.updatedAt,
  };
}

export async function getLabelerSettings(env: Env, actor: Actor) {
  return serialize(await settingsRow(env.DB, actor.installationId));
}

/**
 * Sets the labeler: its DID, the public entity kinds (never a personal kind), optionally the only
 * public label values, and its signing key (`generate` a new one, `keep` the current, `remove`).
 * Audited with the did:key, never the key.
 */
export async function putLabelerSettings(env: Env, actor: Actor, input: { did: string; publicKinds: string[]; publicValues?: string[] | null; signingKey?: "generate" | "keep" | "remove" }) {
  if (!DID.test(input.did)) throw new AppError("labeler.did_invalid", "did is the labeler's DID, e.g. did:plc:abc123 or did:web:labels.example.com.", { status: 422 });
  const personal = input.publicKinds.filter((kind) => !Object.hasOwn(OUTCOME_ENTITY_KINDS, kind));
  if (personal.length > 0)
    throw new AppError("labeler.kind_personal", `Only account and content kinds may be public (${Object.keys(OUTCOME_ENTITY_KINDS).join(", ")}); remove ${personal.join(", ")}.`, {
      status: 422,
      details: { kinds: personal },
    });
  const badValue = (input.publicValues ?? []).find((value) => !LABEL_VALUE.test(value));
  if (badValue !== undefined) throw new AppError("labeler.value_invalid", `publicValues holds label values (lowercase letters, digits, _ . : ! -); ${JSON.stringify(badValue)} is not one.`, { status: 422 });
  const current = await settingsRow(env.DB, actor.installationId);
  const mode = input.signingKey ?? "keep";
  let sealedKey = current?.signingKeySealed ?? null;
  let publicKey = current?.publicKey ?? null;
  if (mode === "generate") {
    const secretKey = newLabelerKey();
    sealedKey = (await sealPersonalData(env, actor.installationId, "labeler_key", { secretKey: toBase64(secretKey) }, { scope: "installation" })).sealed;
    publicKey = didKeyOf(secretKey);
  } else if (mode === "remove") {
    sealedKey = null;
    publicKey = null;
  }
  const at = new Date().toISOString();
  const publicKinds = [...new Set(input.publicKinds)].sort();
  const publicValues = input.publicValues ? [...new Set(input.publicValues)].sort() : null;
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO labeler_settings (installation_id, did, public_kinds_json, public_values_json, signing_key_sealed, public_key, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
      ON CONFLICT (installation_id) DO UPDATE SET did = excluded.did, public_kinds_json = excluded.public_kinds_json, public_values_json = excluded.public_values_json,
        signing_key_sealed = excluded.signing_key_sealed, public_key = excluded.public_key, updated_at = excluded.updated_at`).bind(
      actor.installationId,
      input.did,
      JSON.stringify(publicKinds),
      publicValues === null ? null : JSON.stringify(publicValues),
      sealedKey,
      publicKey,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `labeler:${at}:${crypto.randomUUID()}`,
      action: "labeler.updated",
      actor: actor.audit,
      target: { type: "installation", id: actor.installationId },
      details: { did: input.did, publicKinds, publicValues, publicKey, signingKey: mode },
      at,
    }),
  ]);
  return getLabelerSettings(env, actor);
}

type Pattern = { exact: string } | { prefix: string };

/** A pattern as the query reads it: an exact subject, or a prefix (a pattern ending in `*`). */
function parsePattern(pattern: string): Pattern {
  if (pattern.length === 0 || pattern.length > 2000) throw new AppError("label.uri_pattern_invalid", "A URI pattern is 1 to 2,000 characters: a full URI, or a prefix ending in '*'.", { status: 400 });
  const star = pattern.indexOf("*");
  if (star === -1) return { exact: pattern };
  if (star !== pattern.length - 1) throw new AppError("label.uri_pattern_invalid", "A URI pattern may hold '*' only at its end (a prefix), e.g. at://did:plc:abc/*.", { status: 400 });
  return { prefix: pattern.slice(0, -1) };
}

/**
 * The patterns of one query made disjoint: a prefix inside another prefix, an exact subject under
 * a prefix and a repeated exact subject are dropped, so no label matches two of them.
 */
function disjointPatterns(patterns: readonly Pattern[]): Pattern[] {
  const prefixes: string[] = [];
  // Sorted, a prefix comes before every subject that starts with it, and everything between the two starts with it too.
  for (const prefix of [...new Set(patterns.flatMap((p) => ("prefix" in p ? [p.prefix] : [])))].sort()) {
    const last = prefixes.at(-1);
    if (last === undefined || !prefix.startsWith(last)) prefixes.push(prefix);
  }
  const exacts = [...new Set(patterns.flatMap((p) => ("exact" in p ? [p.exact] : [])))].filter((exact) => !prefixes.some((prefix) => exact.startsWith(prefix)));
  return [...prefixes.map((prefix) => ({ prefix })), ...exacts.map((exact) => ({ exact }))];
}

/**
 * The queryLabels statement for some patterns: one branch per pattern, each a seek on
 * entity_labels_subject (an exact subject is `subject = ?`, a prefix the range from it up to it
 * followed by the highest code point), joined by UNION ALL (the patterns are made disjoint first,
 * so a label comes once) and ordered by rowid, the cursor. Binds: ?1 installation, ?2 the cursor's
 * rowid, ?3 now, ?4 the public kinds (JSON), ?5 the public values (JSON or NULL), ?6 the limit,
 * then `binds`. Exported so a test can read its query plan.
 */
export function labelQuerySql(patterns: readonly Pattern[]): { sql: string; binds: string[] } {
  const kept = disjointPatterns(patterns);
  const branches = kept.map((pattern, index) => {
    const param = `?${7 + index}`;
    const match = "exact" in pattern ? `subject = ${param}` : `subject >= ${param} AND subject < ${param} || char(0x10FFFF)`;
    return `SELECT rowid AS id, subject, value, negated, created_at AS createdAt, expires_at AS expiresAt FROM entity_labels
      WHERE installation_id = ?1 AND ${match} AND rowid > ?2 AND (expires_at IS NULL OR expires_at > ?3)
        AND entity_kind IN (SELECT value FROM json_each(?4)) AND (?5 IS NULL OR value IN (SELECT value FROM json_each(?5)))`;
  });
  return { sql: `${branches.join("\n      UNION ALL ")}\n      ORDER BY id LIMIT ?6`, binds: kept.map((pattern) => ("exact" in pattern ? pattern.exact : pattern.prefix)) };
}

/**
 * com.atproto.label.queryLabels: the public labels (live, or negated: `neg: true`) whose subject
 * matches one of the patterns, oldest first, a page of `limit` from `cursor`. `sources` that do not
 * name this labeler's DID match nothing. Signed when the labeler has a key.
 */
export async function queryLabels(env: Env, actor: Actor, input: { uriPatterns: string[]; sources: string[]; limit: number; cursor: string | null }) {
  const settings = await settingsRow(env.DB, actor.installationId);
  if (!settings) throw new AppError("label.atproto_unavailable", "This installation is not an ATProto labeler yet: PUT /api/v1/labeler with its DID and the entity kinds whose labels are public.", { status: 409 });
  if (input.uriPatterns.length === 0) throw new AppError("label.uri_pattern_invalid", "Name at least one uriPatterns: a full URI (did:… or at://…), or a prefix ending in '*'.", { status: 400 });
  if (input.uriPatterns.length > MAX_URI_PATTERNS) throw new AppError("label.uri_pattern_invalid", `A query names at most ${MAX_URI_PATTERNS} uriPatterns.`, { status: 400 });
  const patterns = input.uriPatterns.map(parsePattern);
  if (input.sources.length > 0 && !input.sources.includes(settings.did)) return { cursor: undefined, labels: [] };
  const after = input.cursor === null ? 0 : Number(input.cursor);
  const now = new Date().toISOString();
  const query = labelQuerySql(patterns);
  const { results } = await env.DB.prepare(query.sql)
    .bind(actor.installationId, after, now, settings.publicKindsJson, settings.publicValuesJson, input.limit, ...query.binds)
    .all<{ id: number; subject: string; value: string; negated: number; createdAt: string; expiresAt: string | null }>();
  const secretKey = settings.signingKeySealed === null ? null : fromBase64((await openPersonalData<{ secretKey: string }>(env, actor.installationId, "labeler_key", settings.signingKeySealed)).secretKey);
  const labels = results.map((row) => {
    const label: UnsignedLabel = {
      ver: 1,
      src: settings.did,
      uri: row.subject,
      val: row.value,
      ...(row.negated === 1 ? { neg: true as const } : {}),
      cts: row.createdAt,
      ...(row.expiresAt === null ? {} : { exp: row.expiresAt }),
    };
    return secretKey === null ? label : { ...label, sig: { $bytes: toBase64(signLabel(label, secretKey)).replace(/=+$/u, "") } };
  });
  return { cursor: results.length === input.limit ? String(results[results.length - 1]!.id) : undefined, labels };
}
