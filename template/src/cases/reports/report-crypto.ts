// report-crypto: personal data in reports and appeals is sealed with AES-256-GCM under a
// per-installation data key; data keys are stored wrapped by the REPORT_MASTER_KEY secret.
// Rotation: a new data key version seals new data while old versions still open old data; a new
// master key (with the old one kept as REPORT_MASTER_KEY_PREVIOUS) is rolled over by rewrapping.
import { auditStatement } from "../../audit";
import { AppError } from "../../errors";
import { newId, sha256Hex } from "../../lib/crypto";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const SEAL_VERSION = "v1";

interface MasterKey {
  id: string;
  key: CryptoKey;
}

interface DataKeyRow {
  id: string;
  version: number;
  masterKeyId: string;
  wrappedKey: string;
  state: string;
}

function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function cryptoUnavailable(): AppError {
  return new AppError("crypto.master_key_missing", "REPORT_MASTER_KEY is not configured; personal data cannot be sealed.", { status: 503 });
}

// Master keys are derived once per isolate; secrets never leave this module.
const masters = new Map<string, Promise<MasterKey>>();

function deriveMaster(secret: string): Promise<MasterKey> {
  let derived = masters.get(secret);
  if (!derived) {
    derived = (async () => {
      if (secret.length < 32) throw new AppError("crypto.master_key_weak", "REPORT_MASTER_KEY must be at least 32 characters.", { status: 503 });
      const material = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"]);
      const key = await crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: encoder.encode("safest-tools/report-crypto"), info: encoder.encode("master-key-wrap/v1") }, material, { name: "AES-GCM", length: 256 }, false, [
        "encrypt",
        "decrypt",
      ]);
      return { id: `mk_${(await sha256Hex(`master-key-id:${secret}`)).slice(0, 16)}`, key };
    })();
    masters.set(secret, derived);
  }
  return derived;
}

async function currentMaster(env: Env): Promise<MasterKey> {
  const secret = (env as { REPORT_MASTER_KEY?: string }).REPORT_MASTER_KEY;
  if (!secret) throw cryptoUnavailable();
  return deriveMaster(secret);
}

async function masterById(env: Env, id: string): Promise<MasterKey> {
  const candidates = [(env as { REPORT_MASTER_KEY?: string }).REPORT_MASTER_KEY, (env as { REPORT_MASTER_KEY_PREVIOUS?: string }).REPORT_MASTER_KEY_PREVIOUS];
  for (const secret of candidates) {
    if (!secret) continue;
    const master = await deriveMaster(secret);
    if (master.id === id) return master;
  }
  throw new AppError("crypto.master_key_unknown", "A data key is wrapped by a master key that is not configured.", { status: 503 });
}

async function wrap(master: MasterKey, raw: Uint8Array, aad: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(aad) }, master.key, raw));
  return `${toBase64(iv)}.${toBase64(sealed)}`;
}

async function unwrap(master: MasterKey, wrapped: string, aad: string): Promise<Uint8Array> {
  const [iv, sealed] = wrapped.split(".");
  if (!iv || !sealed) throw new AppError("crypto.data_key_corrupt", "A stored data key is malformed.", { status: 500 });
  return new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: encoder.encode(aad) }, master.key, fromBase64(sealed)));
}

// Unwrapped data keys, by data key id (ids are never reused).
const dataKeys = new Map<string, Promise<CryptoKey>>();
const DATA_KEY_CACHE_LIMIT = 1_000;

function importDataKey(env: Env, row: DataKeyRow, installationId: string): Promise<CryptoKey> {
  let key = dataKeys.get(row.id);
  if (!key) {
    key = (async () => {
      const raw = await unwrap(await masterById(env, row.masterKeyId), row.wrappedKey, `${installationId}:${row.id}`);
      return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
    })();
    key.catch(() => dataKeys.delete(row.id));
    if (dataKeys.size >= DATA_KEY_CACHE_LIMIT) dataKeys.delete(dataKeys.keys().next().value!);
    dataKeys.set(row.id, key);
  }
  return key;
}

// The active data key per installation, briefly cached: a key that rotated meanwhile still opens
// what it sealed (older versions stay decrypt-only), so a few seconds of staleness is harmless.
const activeKeys = new Map<string, { row: DataKeyRow; until: number }>();
const ACTIVE_KEY_TTL_MS = 30_000;

async function activeDataKey(env: Env, installationId: string): Promise<DataKeyRow | null> {
  const cached = activeKeys.get(installationId);
  if (cached && cached.until > Date.now()) return cached.row;
  const row = await activeDataKeyUncached(env, installationId);
  if (row) {
    if (activeKeys.size > 1_000) activeKeys.clear();
    activeKeys.set(installationId, { row, until: Date.now() + ACTIVE_KEY_TTL_MS });
  }
  return row;
}

async function activeDataKeyUncached(env: Env, installationId: string): Promise<DataKeyRow | null> {
  return env.DB.prepare(`
    SELECT id, version, master_key_id AS masterKeyId, wrapped_key AS wrappedKey, state FROM data_keys
    WHERE installation_id = ?1 AND state = 'active' ORDER BY version DESC LIMIT 1
  `)
    .bind(installationId)
    .first<DataKeyRow>();
}

/** Creates the next data key version; the previous active one becomes decrypt-only. */
export async function rotateDataKey(env: Env, installationId: string): Promise<{ id: string; version: number }> {
  activeKeys.delete(installationId);
  const master = await currentMaster(env);
  const id = newId("dk");
  const raw = crypto.getRandomValues(new Uint8Array(32));
  const wrapped = await wrap(master, raw, `${installationId}:${id}`);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE data_keys SET state = 'decrypt_only', rotated_at = ?2 WHERE installation_id = ?1 AND state = 'active'`).bind(installationId, at),
    env.DB.prepare(`
      INSERT INTO data_keys (id, installation_id, version, master_key_id, wrapped_key, state, created_at)
      SELECT ?1, ?2, COALESCE(MAX(version), 0) + 1, ?3, ?4, 'active', ?5 FROM data_keys WHERE installation_id = ?2
    `).bind(id, installationId, master.id, wrapped, at),
    auditStatement(env.DB, {
      installationId,
      idempotencyKey: `data_key:${id}:created`,
      action: "data_key.created",
      actor: { type: "system", id: "report-crypto" },
      target: { type: "data_key", id },
      details: { masterKeyId: master.id },
      at,
    }),
  ]);
  const row = await env.DB.prepare(`SELECT version FROM data_keys WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<{ version: number }>();
  activeKeys.delete(installationId);
  return { id, version: row!.version };
}

/** The data key new data is sealed with, created on first use. */
async function sealingKey(env: Env, installationId: string): Promise<{ id: string; key: CryptoKey }> {
  let row = await activeDataKey(env, installationId);
  if (!row) {
    await rotateDataKey(env, installationId);
    row = await activeDataKey(env, installationId);
  }
  return { id: row!.id, key: await importDataKey(env, row!, installationId) };
}

/**
 * Seals a JSON value. `context` (e.g. "report:<id>") is bound as additional data, so a sealed
 * value copied onto another row does not open.
 */
export async function sealPersonalData(env: Env, installationId: string, context: string, value: unknown): Promise<{ sealed: string; dataKeyId: string }> {
  const { id, key } = await sealingKey(env, installationId);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ciphertext = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(`${installationId}:${context}`) }, key, encoder.encode(JSON.stringify(value))));
  return { sealed: `${SEAL_VERSION}.${id}.${toBase64(iv)}.${toBase64(ciphertext)}`, dataKeyId: id };
}

/** Opens a sealed value of this installation; any tampering fails with `crypto.open_failed`. */
export async function openPersonalData<T>(env: Env, installationId: string, context: string, sealed: string): Promise<T> {
  const [version, keyId, iv, ciphertext] = sealed.split(".");
  if (version !== SEAL_VERSION || !keyId || !iv || !ciphertext) throw new AppError("crypto.open_failed", "Sealed data is malformed.", { status: 500 });
  try {
    const key = await openingKey(env, installationId, keyId);
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: encoder.encode(`${installationId}:${context}`) }, key, fromBase64(ciphertext));
    return JSON.parse(decoder.decode(plain)) as T;
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw new AppError("crypto.open_failed", "Sealed data could not be opened.", { status: 500 });
  }
}

// Data keys already opened in this isolate, by installation and id: a data key's material never
// changes (rotation adds versions, a master rollover rewraps the same key), so a cached key spares
// the D1 read on every open. The installation is part of the cache key, so a value sealed for one
// installation never opens with another's key (the AAD binds it as well).
const openingKeys = new Map<string, Promise<CryptoKey>>();

function openingKey(env: Env, installationId: string, keyId: string): Promise<CryptoKey> {
  const cacheKey = `${installationId}:${keyId}`;
  let key = openingKeys.get(cacheKey);
  if (!key) {
    key = (async () => {
      const row = await env.DB.prepare(`
        SELECT id, version, master_key_id AS masterKeyId, wrapped_key AS wrappedKey, state FROM data_keys WHERE id = ?1 AND installation_id = ?2
      `)
        .bind(keyId, installationId)
        .first<DataKeyRow>();
      if (!row) throw new AppError("crypto.open_failed", "The data key of sealed data is missing.", { status: 500 });
      return importDataKey(env, row, installationId);
    })();
    key.catch(() => openingKeys.delete(cacheKey));
    if (openingKeys.size >= DATA_KEY_CACHE_LIMIT) openingKeys.delete(openingKeys.keys().next().value!);
    openingKeys.set(cacheKey, key);
  }
  return key;
}

/** Rewraps every data key wrapped by REPORT_MASTER_KEY_PREVIOUS under REPORT_MASTER_KEY. */
export async function rewrapDataKeys(env: Env): Promise<{ rewrapped: number; masterKeyId: string }> {
  const master = await currentMaster(env);
  const { results } = await env.DB.prepare(`
    SELECT id, installation_id AS installationId, version, master_key_id AS masterKeyId, wrapped_key AS wrappedKey, state
    FROM data_keys WHERE master_key_id != ?1
  `)
    .bind(master.id)
    .all<DataKeyRow & { installationId: string }>();
  const statements: D1PreparedStatement[] = [];
  for (const row of results) {
    const aad = `${row.installationId}:${row.id}`;
    const raw = await unwrap(await masterById(env, row.masterKeyId), row.wrappedKey, aad);
    statements.push(env.DB.prepare(`UPDATE data_keys SET master_key_id = ?2, wrapped_key = ?3 WHERE id = ?1 AND master_key_id = ?4`).bind(row.id, master.id, await wrap(master, raw, aad), row.masterKeyId));
  }
  if (statements.length > 0) await env.DB.batch(statements);
  return { rewrapped: statements.length, masterKeyId: master.id };
}
