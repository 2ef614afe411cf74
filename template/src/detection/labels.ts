// Entity labels (entity_labels): what rules and people say about an account, an IP, a device…,
// with provenance (a rule set version's rule, or the person: API key or console user), an
// optional expiry and negation. The entity is stored only as its keyed hash (lib/person-keys.ts).
// A label past its expiry is gone for every reader at once (reads filter on it).
//
// Precedence: a person's label or negation stands against rules until it expires (a rule's hit
// does not overwrite it); a rule's label is refreshed by the next hit (new source and expiry).
import { auditStatement } from "../audit";
import { type Actor, canReadPersonalData } from "../auth";
import { AppError } from "../errors";
import { newId } from "../lib/crypto";
import { entityKey } from "../lib/person-keys";
import { enqueueWritten, labelChangeDeliveries, labelEndpoints } from "./label-webhooks";
import { OUTCOME_ENTITY_KINDS, parseDuration } from "./rule-sets";
import { ENTITY_KIND } from "./rules-language";

const LABEL_VALUE = /^[a-z0-9][a-z0-9_.:!-]{0,63}$/u;

export interface LabelWrite {
  installationId: string;
  entityKey: string;
  kind: string;
  value: string;
  sourceId: string;
  at: string;
  expiresAt: string | null;
  /** labelSubject(kind, id). */
  subject: string | null;
}

/** A label's subject in the clear: the entity's id for account and content kinds (OUTCOME_ENTITY_KINDS), null for personal kinds. */
export function labelSubject(kind: string, value: string): string | null {
  return Object.hasOwn(OUTCOME_ENTITY_KINDS, kind) ? value : null;
}

/**
 * A rule's label, for the caller's batch: written unless the entity has the value from a person
 * (a label or a negation) that has not expired. Idempotent: a repeat refreshes the same row.
 */
export function ruleLabelStatement(db: D1Database, label: LabelWrite): D1PreparedStatement {
  return db
    .prepare(`
      INSERT INTO entity_labels (installation_id, entity_key, value, entity_kind, negated, source_type, source_id, created_at, expires_at, subject)
      VALUES (?1, ?2, ?3, ?4, 0, 'rule', ?5, ?6, ?7, ?8)
      ON CONFLICT (installation_id, entity_key, value) DO UPDATE SET
        negated = 0, source_type = 'rule', source_id = excluded.source_id, expires_at = excluded.expires_at, subject = COALESCE(excluded.subject, entity_labels.subject),
        created_at = CASE WHEN entity_labels.expires_at IS NOT NULL AND entity_labels.expires_at <= ?6 THEN excluded.created_at ELSE entity_labels.created_at END
      WHERE entity_labels.source_type = 'rule' OR (entity_labels.expires_at IS NOT NULL AND entity_labels.expires_at <= ?6)`)
    .bind(label.installationId, label.entityKey, label.value, label.kind, label.sourceId, label.at, label.expiresAt, label.subject);
}

function checkEntity(entity: string, value: string): void {
  if (!ENTITY_KIND.test(entity)) throw new AppError("label.entity_invalid", "entity is an entity kind such as account, ip or device (lowercase letters, digits, _).", { status: 400 });
  if (value.length === 0 || value.length > 512) throw new AppError("label.entity_invalid", "value is the entity's id (1 to 512 characters).", { status: 400 });
}

/**
 * The labels an entity carries now (not expired, not negated), oldest first. Looking up a personal
 * entity (an ip, a device, an email: any kind that is not an account or content) by its raw value
 * tells whether that person is known, so it needs `personal_data:read` (or `admin`) and is audited
 * under the entity's key (never its value).
 */
export async function listLabels(env: Env, actor: Actor, query: { entity: string; value: string }) {
  checkEntity(query.entity, query.value);
  const key = entityKey(actor.installationId, query.entity, query.value, env);
  if (!Object.hasOwn(OUTCOME_ENTITY_KINDS, query.entity)) {
    if (!canReadPersonalData(actor))
      throw new AppError("auth.scope_missing", `Looking up a ${query.entity} entity opens personal data: it needs personal_data:read or admin.`, { status: 403, details: { required: ["personal_data:read", "admin"] } });
    const at = new Date().toISOString();
    await auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `label_lookup:${newId("lbl")}`,
      action: "label.personal_lookup",
      actor: actor.audit,
      target: { type: "entity", id: key },
      details: { entity: query.entity },
      at,
    }).run();
  }
  const { results } = await env.DB.prepare(`
      SELECT value, source_type AS sourceType, source_id AS sourceId, created_at AS createdAt, expires_at AS expiresAt
      FROM entity_labels WHERE installation_id = ?1 AND entity_key = ?2 AND negated = 0 AND (expires_at IS NULL OR expires_at > ?3)
      ORDER BY created_at, value`)
    .bind(actor.installationId, key, new Date().toISOString())
    .all<{ value: string; sourceType: "rule" | "person"; sourceId: string; createdAt: string; expiresAt: string | null }>();
  return { items: results.map((row) => ({ value: row.value, source: `${row.sourceType}:${row.sourceId}`, createdAt: row.createdAt, expiresAt: row.expiresAt })) };
}

/**
 * A person labels an entity, or negates a value (`negate`: rules do not apply it while the
 * negation stands). The principal is the source; the change is audited with the entity's key
 * (never its id).
 */
export async function putLabelByPerson(env: Env, actor: Actor, input: { entity: string; value: string; label: string; negate?: boolean; expiresIn?: string }) {
  checkEntity(input.entity, input.value);
  if (!LABEL_VALUE.test(input.label)) throw new AppError("label.value_invalid", "label is 1 to 64 lowercase letters, digits and _ . : ! -, starting with a letter or digit.", { status: 422 });
  const ttl = input.expiresIn === undefined ? null : parseDuration(input.expiresIn);
  if (input.expiresIn !== undefined && ttl === null) throw new AppError("label.expiry_invalid", "expiresIn is a duration such as '30m', '24h' or '90d' (at most 365 days).", { status: 422 });
  const key = entityKey(actor.installationId, input.entity, input.value, env);
  const at = new Date().toISOString();
  const expiresAt = ttl === null ? null : new Date(Date.now() + ttl).toISOString();
  const sourceId = `${actor.audit.type}:${actor.audit.id}`;
  const change = input.negate ? "negated" : "applied";
  const deliveries = await labelChangeDeliveries(env, await labelEndpoints(env.DB, actor.installationId, change), {
    installationId: actor.installationId,
    change,
    entityKind: input.entity,
    entityKey: key,
    entityId: input.value,
    label: input.label,
    source: `person:${sourceId}`,
    createdAt: at,
    expiresAt,
    changeKey: `${key}\u0000${input.label}\u0000${at}\u0000${crypto.randomUUID()}`,
    at,
  });
  const results = await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO entity_labels (installation_id, entity_key, value, entity_kind, negated, source_type, source_id, created_at, expires_at, subject)
      VALUES (?1, ?2, ?3, ?4, ?5, 'person', ?6, ?7, ?8, ?9)
      ON CONFLICT (installation_id, entity_key, value) DO UPDATE SET negated = excluded.negated, source_type = 'person', source_id = excluded.source_id, created_at = excluded.created_at, expires_at = excluded.expires_at,
        subject = excluded.subject`).bind(actor.installationId, key, input.label, input.entity, input.negate ? 1 : 0, sourceId, at, expiresAt, labelSubject(input.entity, input.value)),
    ...deliveries.map((delivery) => delivery.statement),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `label:${key}:${input.label}:${at}`,
      action: input.negate ? "label.negated" : "label.applied",
      actor: actor.audit,
      target: { type: "entity", id: key },
      details: { entity: input.entity, label: input.label, expiresAt },
      at,
    }),
  ]);
  await enqueueWritten(
    env,
    deliveries.map((delivery, i) => ({ id: delivery.id, index: 1 + i })),
    results,
  );
  return { entity: input.entity, label: input.label, negated: input.negate === true, source: `person:${sourceId}`, createdAt: at, expiresAt };
}

/**
 * The live labels of many entities (by key), for rules that read `labels`: one query per
 * LABEL_KEYS_PER_QUERY keys (the keys bound as one JSON array, read with json_each), so a full
 * batch of events costs a few queries, not one per entity.
 */
export async function labelsOfEntities(db: D1Database, installationId: string, keys: string[], at: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const unique = [...new Set(keys)];
  for (let i = 0; i < unique.length; i += LABEL_KEYS_PER_QUERY) {
    const chunk = unique.slice(i, i + LABEL_KEYS_PER_QUERY);
    const { results } = await db
      .prepare(`SELECT entity_key AS entityKey, value FROM entity_labels WHERE installation_id = ?1 AND entity_key IN (SELECT value FROM json_each(?3)) AND negated = 0 AND (expires_at IS NULL OR expires_at > ?2)`)
      .bind(installationId, at, JSON.stringify(chunk))
      .all<{ entityKey: string; value: string }>();
    for (const row of results) out.set(row.entityKey, [...(out.get(row.entityKey) ?? []), row.value]);
  }
  return out;
}

const LABEL_KEYS_PER_QUERY = 4_000;

const EXPIRED_SLICE = 500;

/**
 * Deletes labels past their expiry, a bounded slice per call (readers already ignore them; this
 * keeps the table to live labels), and sends `label.expired` for each live (not negated) one to the
 * endpoints its installation subscribed, in the delete's batch. Each delivery is guarded on the
 * label still having that expiry (a rule may have refreshed it since the slice was read); the
 * delete takes the same rows under the same condition. `more` is 1 when the slice was full.
 */
export async function sweepExpiredLabels(env: Env, now: Date): Promise<{ deleted: number; more: number }> {
  const at = now.toISOString();
  const { results: expired } = await env.DB.prepare(`
      SELECT installation_id AS installationId, entity_key AS entityKey, value, entity_kind AS entityKind, negated, source_type AS sourceType, source_id AS sourceId,
        created_at AS createdAt, expires_at AS expiresAt
      FROM entity_labels WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ${EXPIRED_SLICE}`)
    .bind(at)
    .all<{ installationId: string; entityKey: string; value: string; entityKind: string; negated: number; sourceType: string; sourceId: string; createdAt: string; expiresAt: string }>();
  if (expired.length === 0) return { deleted: 0, more: 0 };
  const endpoints = new Map<string, string[]>();
  for (const installationId of new Set(expired.filter((row) => row.negated === 0).map((row) => row.installationId))) endpoints.set(installationId, await labelEndpoints(env.DB, installationId, "expired"));
  const statements: D1PreparedStatement[] = [];
  const deliveries: Array<{ id: string; index: number }> = [];
  const sentAt = new Date(Math.min(Date.now(), now.getTime())).toISOString();
  for (const row of expired) {
    const ids = row.negated === 0 ? (endpoints.get(row.installationId) ?? []) : [];
    if (ids.length === 0) continue;
    const made = await labelChangeDeliveries(
      env,
      ids,
      {
        installationId: row.installationId,
        change: "expired",
        entityKind: row.entityKind,
        entityKey: row.entityKey,
        label: row.value,
        source: `${row.sourceType}:${row.sourceId}`,
        createdAt: row.createdAt,
        expiresAt: row.expiresAt,
        changeKey: `${row.entityKey}\u0000${row.value}\u0000${row.expiresAt}`,
        // The delivery is due now (the sweep's time may be ahead of the clock, e.g. a catch-up).
        at: sentAt,
      },
      { table: "entity_labels", where: { installation_id: row.installationId, entity_key: row.entityKey, value: row.value, expires_at: row.expiresAt, negated: 0 } },
    );
    for (const delivery of made) {
      deliveries.push({ id: delivery.id, index: statements.length });
      statements.push(delivery.statement);
    }
  }
  const deleteIndex = statements.length;
  statements.push(
    env.DB.prepare(`DELETE FROM entity_labels WHERE (installation_id, entity_key, value) IN (SELECT value ->> '$[0]', value ->> '$[1]', value ->> '$[2]' FROM json_each(?1)) AND expires_at IS NOT NULL AND expires_at <= ?2`).bind(
      JSON.stringify(expired.map((row) => [row.installationId, row.entityKey, row.value])),
      at,
    ),
  );
  const results = await env.DB.batch(statements);
  await enqueueWritten(env, deliveries, results);
  const deleted = results[deleteIndex]?.meta.changes ?? 0;
  return { deleted, more: expired.length === EXPIRED_SLICE ? 1 : 0 };
}

/** How long a sampled event is kept for backtests. */
export const SAMPLE_RETENTION_DAYS = 30;

/**
 * Deletes sampled events older than SAMPLE_RETENTION_DAYS, a bounded slice per installation that
 * has event settings (those that ever sampled), through the (installation, time) index.
 */
export async function sweepOldSamples(env: Env, now: Date): Promise<{ deleted: number; more: number }> {
  const before = new Date(now.getTime() - SAMPLE_RETENTION_DAYS * 86_400_000).toISOString();
  const { results } = await env.DB.prepare(`SELECT installation_id AS id FROM event_settings ORDER BY installation_id LIMIT 200`).all<{ id: string }>();
  let deleted = 0;
  let more = 0;
  for (const { id } of results) {
    const result = await env.DB.prepare(`DELETE FROM event_samples WHERE rowid IN (SELECT rowid FROM event_samples WHERE installation_id = ?1 AND occurred_at < ?2 LIMIT ${EXPIRED_SLICE})`).bind(id, before).run();
    const changes = result.meta.changes ?? 0;
    deleted += changes;
    if (changes === EXPIRED_SLICE) more = 1;
  }
  return { deleted, more };
}
