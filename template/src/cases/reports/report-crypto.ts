// report-crypto: personal data (reports, appeals, task contexts, step outputs derived from
// content, delivery payloads) is sealed with AES-256-GCM under a data key scoped to its
// installation and period: the calendar month (UTC) it was sealed in, its key created on first use.
// A report's and an appeal's personal data is sealed, in layers, under the key of each person it is
// about as well (person-data-keys.ts): a person's erasure destroys their keys, so every copy of what
// was sealed for them stops opening while everyone else's still does.
// Retention erases a period by destroying its keys (destroyPeriodKeys): the wrapped material goes,
// the row stays as a tombstone, and every copy of what they sealed — hot rows, archived runs,
// backups, Time Travel — is ciphertext nobody can open. Secrets the installation configured
// (webhook and connector credentials, provider API keys) and records outside retention are sealed
// under a per-installation key (`scope: "installation"`), which is never destroyed; so is
// everything sealed before period keys existed. One envelope for all: `v1.<keyIds>.<iv>.<ct>`,
// the key ids (`+`-joined, outermost first) say which keys. Data keys are stored wrapped by the
// REPORT_MASTER_KEY secret; people's keys by their installation's data key.
// Rotation: a new data key version seals new data while old versions still open old data; a new
// master key (with the old one kept as REPORT_MASTER_KEY_PREVIOUS) is rolled over by rewrapping.
import { auditStatement, type AuditEventInput } from "../../audit";
import { AppError } from "../../errors";
import { newId } from "../../lib/crypto";
import { currentMaster, fromBase64, type MasterKey, masterById, toBase64, unwrap, wrap } from "./master-keys";
import { deletePeriodPersonKeys, destroyPersonKeys, forgetPersonSealingKeys, isPersonKeyId, openPersonKey, personSealingKey } from "./person-data-keys";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const SEAL_VERSION = "v1";

interface DataKeyRow {
  id: string;
  version: number;
  masterKeyId: string;
  wrappedKey: string;
  state: string;
  period: string | null;
  destroyedAt: string | null;
}

const KEY_COLUMNS = `id, version, master_key_id AS masterKeyId, wrapped_key AS wrappedKey, state, period, destroyed_at AS destroyedAt`;

/** The period a value sealed at `at` belongs to: its calendar month, UTC (`2026-12`). */
export function dataKeyPeriod(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** What opening data sealed under a destroyed key fails with; read paths answer their erased shape instead. */
export function dataKeyDestroyed(): AppError {
  return new AppError("crypto.data_key_destroyed", "The data key this was sealed under has been destroyed: the data is erased.", { status: 410 });
}

/** True when `error` says the sealed data is erased (its key destroyed). */
export function isDataKeyDestroyed(error: unknown): boolean {
  return error instanceof AppError && error.code === "crypto.data_key_destroyed";
}

// Unwrapped data keys, by data key id (ids are never reused).
const dataKeys = new Map<string, Promise<CryptoKey>>();
const DATA_KEY_CACHE_LIMIT = 1_000;

function importDataKey(env: Env, row: DataKeyRow, installationId: string): Promise<CryptoKey> {
  let key = dataKeys.get(row.id);
  if (!key) {
    key = (async () => {
      if (row.destroyedAt) throw dataKeyDestroyed();
      const raw = await unwrap(await masterById(env, row.masterKeyId), row.wrappedKey, `${installationId}:${row.id}`);
      return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
    })();
    key.catch(() => dataKeys.delete(row.id));
    if (dataKeys.size >= DATA_KEY_CACHE_LIMIT) dataKeys.delete(dataKeys.keys().next().value!);
    dataKeys.set(row.id, key);
  }
  return key;
}

// The active data key per installation (and period), briefly cached: a key that rotated meanwhile
// still opens what it sealed (older versions stay decrypt-only), so a few seconds of staleness is
// harmless. A period's key is destroyed only well after its period ended, so no seal still uses it.
const activeKeys = new Map<string, { row: DataKeyRow; until: number }>();
const ACTIVE_KEY_TTL_MS = 30_000;

async function activeDataKey(env: Env, installationId: string, period: string | null): Promise<DataKeyRow | null> {
  const cacheKey = `${installationId}:${period ?? ""}`;
  const cached = activeKeys.get(cacheKey);
  if (cached && cached.until > Date.now()) return cached.row;
  const row = await activeDataKeyUncached(env, installationId, period);
  if (row) {
    if (activeKeys.size > 1_000) activeKeys.clear();
    activeKeys.set(cacheKey, { row, until: Date.now() + ACTIVE_KEY_TTL_MS });
  }
  return row;
}

async function activeDataKeyUncached(env: Env, installationId: string, period: string | null): Promise<DataKeyRow | null> {
  return env.DB.prepare(`
    SELECT ${KEY_COLUMNS} FROM data_keys
    WHERE installation_id = ?1 AND state = 'active' AND period IS ?2 AND destroyed_at IS NULL ORDER BY version DESC LIMIT 1
  `)
    .bind(installationId, period)
    .first<DataKeyRow>();
}

function forgetActive(installationId: string): void {
  for (const key of activeKeys.keys()) if (key.startsWith(`${installationId}:`)) activeKeys.delete(key);
}

/** Inserts a data key (for `period`, or the installation's when null) with its audit event, in one batch. */
function createKeyStatements(env: Env, installationId: string, master: MasterKey, id: string, wrapped: string, period: string | null, at: string): D1PreparedStatement[] {
  return [
    env.DB.prepare(`
      INSERT INTO data_keys (id, installation_id, version, master_key_id, wrapped_key, state, created_at, period)
      SELECT ?1, ?2, COALESCE(MAX(version), 0) + 1, ?3, ?4, 'active', ?5, ?6 FROM data_keys WHERE installation_id = ?2
    `).bind(id, installationId, master.id, wrapped, at, period),
    auditStatement(env.DB, {
      installationId,
      idempotencyKey: `data_key:${id}:created`,
      action: "data_key.created",
      actor: { type: "system", id: "report-crypto" },
      target: { type: "data_key", id },
      details: period ? { masterKeyId: master.id, period } : { masterKeyId: master.id },
      at,
    }),
  ];
}

/**
 * The sealing key of a period, created on first use. Two isolates creating it at once: the unique
 * index on (installation, period) of active keys lets one batch through; the other reads its key.
 */
async function periodKey(env: Env, installationId: string, period: string): Promise<DataKeyRow> {
  const found = await activeDataKey(env, installationId, period);
  if (found) return found;
  const master = await currentMaster(env);
  let row: DataKeyRow | null = null;
  for (let attempt = 0; attempt < 3 && !row; attempt += 1) {
    const id = newId("dk");
    const wrapped = await wrap(master, crypto.getRandomValues(new Uint8Array(32)), `${installationId}:${id}`);
    try {
      await env.DB.batch(createKeyStatements(env, installationId, master, id, wrapped, period, new Date().toISOString()));
    } catch (error) {
      // A concurrent creation won (this period's key, or the same next version): use it, or try again.
      if (!/UNIQUE/iu.test(String((error as Error)?.message))) throw error;
    }
    // Read back through the isolate's cache (a miss here, so a D1 read that fills it), so the next seal of this period does not read it again.
    row = await activeDataKey(env, installationId, period);
  }
  if (!row) throw new AppError("crypto.data_key_unavailable", "No data key could be created for this period; retry.", { status: 503, retryable: true });
  return row;
}

/**
 * Creates the next data key version of the installation; every active key (the installation's and
 * its periods') becomes decrypt-only, so the next seal of a period creates that period's next key.
 */
export async function rotateDataKey(env: Env, installationId: string): Promise<{ id: string; version: number }> {
  forgetActive(installationId);
  const master = await currentMaster(env);
  const id = newId("dk");
  const raw = crypto.getRandomValues(new Uint8Array(32));
  const wrapped = await wrap(master, raw, `${installationId}:${id}`);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE data_keys SET state = 'decrypt_only', rotated_at = ?2 WHERE installation_id = ?1 AND state = 'active'`).bind(installationId, at),
    ...createKeyStatements(env, installationId, master, id, wrapped, null, at),
  ]);
  const row = await env.DB.prepare(`SELECT version FROM data_keys WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<{ version: number }>();
  forgetActive(installationId);
  return { id, version: row!.version };
}

/** The data key new data is sealed with: the period's (the default), or the installation's; created on first use. */
async function sealingKey(env: Env, installationId: string, scope: SealScope, at: Date): Promise<{ id: string; key: CryptoKey }> {
  let row: DataKeyRow | null;
  if (scope === "period") row = await periodKey(env, installationId, dataKeyPeriod(at));
  else {
    row = await activeDataKey(env, installationId, null);
    if (!row) {
      await rotateDataKey(env, installationId);
      row = await activeDataKey(env, installationId, null);
    }
  }
  return { id: row!.id, key: await importDataKey(env, row!, installationId) };
}

/**
 * Resolves (and caches in this isolate) the key sealPersonalData would seal with now, so a caller
 * that knows it is about to seal can have the key read beside its own reads rather than after them.
 * Best effort: a failure here is left to the seal itself, which reports it.
 */
export function warmSealingKey(env: Env, installationId: string, scope: SealScope = "period", at: Date = new Date()): Promise<void> {
  return sealingKey(env, installationId, scope, at).then(
    () => undefined,
    () => undefined,
  );
}

/**
 * `period` (the default): personal data with a retention, erased with its period's key.
 * `installation`: what must outlive every period — credentials the installation configured and
 * records retention does not erase; sealed under the installation's key, never destroyed.
 */
export type SealScope = "period" | "installation";

/**
 * Seals a JSON value. `context` (e.g. "report:<id>") is bound as additional data, so a sealed
 * value copied onto another row does not open. `at` is when the record was made (now unless it was
 * made earlier): its period's key seals it. `people`: the keyed indexes (lib/person-keys.ts) of the
 * people the value is about; it is sealed under each one's key as well (person-data-keys.ts), in
 * layers, so destroying any of those keys (or the period's) erases it. `dataKeyId` is the period's
 * (or installation's) key, the one a row's `data_key_id` names.
 */
export async function sealPersonalData(
  env: Env,
  installationId: string,
  context: string,
  value: unknown,
  options: { scope?: SealScope; at?: Date; people?: ReadonlyArray<string | null | undefined> } = {},
): Promise<{ sealed: string; dataKeyId: string }> {
  const scope = options.scope ?? "period";
  const at = options.at ?? new Date();
  const base = await sealingKey(env, installationId, scope, at);
  const people = scope === "period" ? [...new Set((options.people ?? []).filter((p): p is string => typeof p === "string" && p.length > 0))] : [];
  const layers = [
    base,
    ...(await Promise.all(people.map((person) => personSealingKey(env, installationId, person, dataKeyPeriod(at), { wrapping: () => installationKey(env, installationId), open: (id) => openingKey(env, installationId, id) })))),
  ];
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const additionalData = encoder.encode(`${installationId}:${context}`);
  // Innermost the last person's key, outermost the period's: each layer under its own key (so one iv serves all).
  let data: Uint8Array = encoder.encode(JSON.stringify(value));
  for (const layer of [...layers].reverse()) data = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData }, layer.key, data));
  return { sealed: `${SEAL_VERSION}.${layers.map((l) => l.id).join("+")}.${toBase64(iv)}.${toBase64(data)}`, dataKeyId: base.id };
}

/**
 * Opens a sealed value of this installation; any tampering fails with `crypto.open_failed`, a
 * value one of whose keys was destroyed with `crypto.data_key_destroyed` (410: it is erased).
 */
export async function openPersonalData<T>(env: Env, installationId: string, context: string, sealed: string): Promise<T> {
  const [version, keyIds, iv, ciphertext] = sealed.split(".");
  if (version !== SEAL_VERSION || !keyIds || !iv || !ciphertext) throw new AppError("crypto.open_failed", "Sealed data is malformed.", { status: 500 });
  try {
    const keys = await Promise.all(keyIds.split("+").map((keyId) => openingKey(env, installationId, keyId)));
    const additionalData = encoder.encode(`${installationId}:${context}`);
    let data: Uint8Array = fromBase64(ciphertext);
    for (const key of keys) data = new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData }, key, data));
    return JSON.parse(decoder.decode(data)) as T;
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw new AppError("crypto.open_failed", "Sealed data could not be opened.", { status: 500 });
  }
}

/** Opens a sealed value, or answers `erased` when its key was destroyed (what a read of erased data shows). */
export async function openPersonalDataOr<T>(env: Env, installationId: string, context: string, sealed: string, erased: T): Promise<T> {
  try {
    return await openPersonalData<T>(env, installationId, context, sealed);
  } catch (error) {
    if (isDataKeyDestroyed(error)) return erased;
    throw error;
  }
}

// Data keys already opened in this isolate, by installation and id: a data key's material never
// changes (rotation adds versions, a master rollover rewraps the same key), so a cached key spares
// the D1 read on every open. The installation is part of the cache key, so a value sealed for one
// installation never opens with another's key (the AAD binds it as well). A period key can be
// destroyed, so it is cached for a minute only: another isolate stops opening with it soon after
// (this one forgets it at once), and its period's hot rows are already erased by then.
const openingKeys = new Map<string, { key: Promise<CryptoKey>; until: number }>();
const PERIOD_KEY_TTL_MS = 60_000;

function openingKey(env: Env, installationId: string, keyId: string): Promise<CryptoKey> {
  const cacheKey = `${installationId}:${keyId}`;
  const cached = openingKeys.get(cacheKey);
  if (cached && cached.until > Date.now()) return cached.key;
  const entry = { until: Number.POSITIVE_INFINITY, key: null as unknown as Promise<CryptoKey> };
  entry.key = (async () => {
    if (isPersonKeyId(keyId)) {
      // A person's key can be destroyed at any time (their erasure): cached as briefly as a period's.
      entry.until = Date.now() + PERIOD_KEY_TTL_MS;
      return openPersonKey(env, installationId, keyId, (id) => openingKey(env, installationId, id));
    }
    const row = await env.DB.prepare(`SELECT ${KEY_COLUMNS} FROM data_keys WHERE id = ?1 AND installation_id = ?2`).bind(keyId, installationId).first<DataKeyRow>();
    if (!row) throw new AppError("crypto.open_failed", "The data key of sealed data is missing.", { status: 500 });
    if (row.period !== null) entry.until = Date.now() + PERIOD_KEY_TTL_MS;
    if (row.destroyedAt) throw dataKeyDestroyed();
    return importDataKey(env, row, installationId);
  })();
  entry.key.catch(() => openingKeys.delete(cacheKey));
  if (openingKeys.size >= DATA_KEY_CACHE_LIMIT) openingKeys.delete(openingKeys.keys().next().value!);
  openingKeys.set(cacheKey, entry);
  return entry.key;
}

/**
 * Destroys every key of an installation's period: the wrapped material is emptied, the rows stay
 * as tombstones (`destroyed_at`; no longer active, so a record of that period sealed later, say a
 * late re-seal, gets a key of its own), one `data_key.destroyed` event each (ids and the period only), in
 * one batch. The caller decides that nothing sealed under them is still needed. Answers the ids.
 */
export async function destroyPeriodKeys(env: Env, installationId: string, period: string, input: { at: string; actor: AuditEventInput["actor"]; details?: Record<string, unknown> }): Promise<string[]> {
  const { results } = await env.DB.prepare(`SELECT id FROM data_keys WHERE installation_id = ?1 AND period = ?2 AND destroyed_at IS NULL`).bind(installationId, period).all<{ id: string }>();
  if (results.length === 0) return [];
  const ids = results.map((r) => r.id);
  // The period's people's keys go too (what they sealed needed the period's key as well): their R2
  // objects first, so a period D1 records as destroyed has none left (a failure here is retried by
  // the next sweep, the period's keys still there); the rows made before keys moved to R2 in the batch.
  const { ids: personKeyIds, deleteStatement } = await deletePeriodPersonKeys(env, installationId, period);
  await env.DB.batch([
    ...ids.map((id) => env.DB.prepare(`UPDATE data_keys SET wrapped_key = '', destroyed_at = ?3, state = 'decrypt_only' WHERE installation_id = ?1 AND id = ?2 AND destroyed_at IS NULL`).bind(installationId, id, input.at)),
    deleteStatement,
    ...ids.map((id) =>
      auditStatement(env.DB, {
        installationId,
        idempotencyKey: `data_key:${id}:destroyed`,
        action: "data_key.destroyed",
        actor: input.actor,
        target: { type: "data_key", id },
        details: { period, ...input.details },
        at: input.at,
      }),
    ),
  ]);
  for (const id of ids) {
    dataKeys.delete(id);
    openingKeys.delete(`${installationId}:${id}`);
  }
  forgetOpeningKeys(installationId, personKeyIds);
  forgetPersonSealingKeys(installationId);
  forgetActive(installationId);
  return ids;
}

/** Forgets the cached opening keys of these ids (keys just destroyed), so this isolate stops opening with them at once. */
export function forgetOpeningKeys(installationId: string, keyIds: readonly string[]): void {
  for (const id of keyIds) openingKeys.delete(`${installationId}:${id}`);
}

/**
 * Destroys a person's keys (person-data-keys.ts: R2 objects deleted, tombstone written, audited) and
 * forgets them in this isolate at once; other isolates stop opening with them within a minute.
 */
export async function destroyPersonDataKeys(env: Env, installationId: string, person: string, input: { at: string; actor: AuditEventInput["actor"]; requestId: string }): Promise<string[]> {
  const ids = await destroyPersonKeys(env, installationId, person, input);
  forgetOpeningKeys(installationId, ids);
  return ids;
}

/**
 * The installation's own data key: what wraps its people's keys. Created on first use without a
 * rotation (the period keys stay active); two isolates creating it at once may both succeed, and
 * either key serves (a person's key names the one that wrapped it).
 */
export async function installationKey(env: Env, installationId: string): Promise<{ id: string; key: CryptoKey }> {
  let row = await activeDataKey(env, installationId, null);
  for (let attempt = 0; attempt < 3 && !row; attempt += 1) {
    const master = await currentMaster(env);
    const id = newId("dk");
    const wrapped = await wrap(master, crypto.getRandomValues(new Uint8Array(32)), `${installationId}:${id}`);
    try {
      await env.DB.batch(createKeyStatements(env, installationId, master, id, wrapped, null, new Date().toISOString()));
    } catch (error) {
      // A concurrent creation took this version: read what is there, or try again.
      if (!/UNIQUE/iu.test(String((error as Error)?.message))) throw error;
    }
    row = await activeDataKeyUncached(env, installationId, null);
  }
  if (!row) throw new AppError("crypto.data_key_unavailable", "No installation key could be created; retry.", { status: 503, retryable: true });
  return { id: row.id, key: await importDataKey(env, row, installationId) };
}

/** Rewraps every data key wrapped by REPORT_MASTER_KEY_PREVIOUS under REPORT_MASTER_KEY. */
export async function rewrapDataKeys(env: Env): Promise<{ rewrapped: number; masterKeyId: string }> {
  const master = await currentMaster(env);
  const { results } = await env.DB.prepare(`
    SELECT id, installation_id AS installationId, version, master_key_id AS masterKeyId, wrapped_key AS wrappedKey, state, period, destroyed_at AS destroyedAt
    FROM data_keys WHERE master_key_id != ?1 AND destroyed_at IS NULL
  `)
    .bind(master.id)
    .all<DataKeyRow & { installationId: string }>();
  const statements: D1PreparedStatement[] = [];
  for (const row of results) {
    const aad = `${row.installationId}:${row.id}`;
    const raw = await unwrap(await masterById(env, row.masterKeyId), row.wrappedKey, aad);
    statements.push(env.DB.prepare(`UPDATE data_keys SET master_key_id = ?2, wrapped_key = ?3 WHERE id = ?1 AND master_key_id = ?4 AND destroyed_at IS NULL`).bind(row.id, master.id, await wrap(master, raw, aad), row.masterKeyId));
  }
  if (statements.length > 0) await env.DB.batch(statements);
  return { rewrapped: statements.length, masterKeyId: master.id };
}
