// Keys per data subject (crypto-shredding). Each person a report or appeal is about — its reporter,
// its subject's owner, its appellant — gets a key of their own per period, named by 32 hex digits of
// their keyed index (lib/person-keys.ts: `pk1_…`, so the key names nobody) and wrapped by the
// installation's own data key. report-crypto seals their data under it (and the period's key) in
// layers; erasing the person (destroyPersonKeys) deletes their keys, so every copy of what was sealed
// for them — hot rows, case archives in R2, exported backups — stops opening, without rewriting any
// of them, while another person's data in the same case still opens.
//
// Where a key lives: one R2 object per (installation, period, person) in AUDIT_ANCHORS, at
// `keys/<installation>/<period>/<person>`, its wrapped material and generation in the object's
// custom metadata (so a listing carries whole keys). Named by ids alone, it needs no D1 row to be
// found, and deleting it destroys it: D1 keeps nothing per person for the retention window, so a
// lifecycle whose case and run are archived leaves no key bytes behind in D1. Made with a
// create-if-absent put (one round trip for a person new this month; two isolates making it at once
// both read the one that won), opened with a head, cached per isolate. Keys made before they moved
// to R2 stay rows of `person_data_keys` (their generation has 8 hex digits, an R2 key's 12), read,
// destroyed and backed up as before until retention ends their period.
//
// Destroying a person's keys leaves a tombstone (erasure-tombstones.ts).
import { auditStatement, type AuditEventInput } from "../../audit";
import { AppError } from "../../errors";
import { copyTombstones, tombstonesStatement } from "./erasure-tombstones";

const encoder = new TextEncoder();
const PREFIX = "psk_";
const ACTIVE_TTL_MS = 30_000;
/** Sealing keys an isolate keeps (least recently made first out). */
const SEALING_CACHE_LIMIT = 10_000;
/** Up to this many people, their keys are found by name (a head per period); more, by listing the installation's keys. */
const FEW_PEOPLE = 4;
/** Keys one R2 delete call takes. */
const DELETE_CHUNK = 1_000;

/** True for the id of a person's key (as it appears in a sealed envelope). */
export function isPersonKeyId(id: string): boolean {
  return id.startsWith(PREFIX);
}

/**
 * How a key names its person: 32 hex digits (128 bits) of their keyed index, enough to keep
 * people apart within an installation and a period, and short.
 */
export function personHandle(personIndex: string): string {
  return personIndex.slice(4, 36);
}

/** The R2 object (AUDIT_ANCHORS) of a person's key of a period. */
export const personKeyObject = (installationId: string, period: string, person: string) => `keys/${installationId}/${period}/${person}`;
/** Every person key object of an installation, or of one of its periods. */
export const personKeysPrefix = (installationId: string, period?: string) => (period ? `keys/${installationId}/${period}/` : `keys/${installationId}/`);

/**
 * A person's key id: `psk_<period>_<handle>_<generation>` (with the installation, where the key
 * is, and the random generation drawn when the key was made): a key made again for the same person
 * and period after an erasure has another id, so what was sealed under the destroyed one reads as
 * erased rather than failing to open under the new one. 12 hex digits: an R2 object; 8: a row of
 * `person_data_keys` (a key made before keys moved to R2).
 */
const keyId = (period: string, person: string, generation: string) => `${PREFIX}${period}_${person}_${generation}`;

function parseKeyId(id: string): { period: string; person: string; generation: string } | null {
  const match = /^psk_(\d{4}-\d{2})_([0-9a-f]{32})_([0-9a-f]{12}|[0-9a-f]{8})$/u.exec(id);
  return match ? { period: match[1]!, person: match[2]!, generation: match[3]! } : null;
}

const isLegacyGeneration = (generation: string) => generation.length === 8;

function newGeneration(): string {
  return [...crypto.getRandomValues(new Uint8Array(6))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

const wrapAad = (installationId: string, id: string) => encoder.encode(`${installationId}:person:${id}`);

/** What opening data sealed for an erased person fails with (the same as a destroyed period key: it is erased). */
function personKeyDestroyed(): AppError {
  return new AppError("crypto.data_key_destroyed", "The data key this was sealed under has been destroyed: the data is erased.", { status: 410 });
}

/** A person's key as stored: a row of person_data_keys, or an R2 object's custom metadata. */
export interface PersonKeyRow {
  generation: string;
  wrappingKeyId: string;
  wrappedKey: string;
  createdAt: string;
}

/** The custom metadata of a key object (short names: a listing page carries them for every key). */
function keyMetadata(row: PersonKeyRow): Record<string, string> {
  return { g: row.generation, w: row.wrappingKeyId, k: row.wrappedKey, at: row.createdAt };
}

function keyOfMetadata(metadata: Record<string, string> | undefined): PersonKeyRow | null {
  const m = metadata ?? {};
  if (!m.g || !/^[0-9a-f]{12}$/u.test(m.g) || !m.w || !m.k || !m.at) return null;
  return { generation: m.g, wrappingKeyId: m.w, wrappedKey: m.k, createdAt: m.at };
}

// A person's sealing key of a period, briefly cached: an erasure in another isolate is seen within
// the TTL (a value sealed meanwhile under the deleted key names that key's generation, so it reads
// as erased, as it should once the person asked for erasure, even after a new key is made). The
// promise is cached at once, so reports about the same person arriving together make one key.
const sealing = new Map<string, { value: Promise<{ id: string; key: CryptoKey }>; until: number }>();

/** Forgets this isolate's cached sealing keys of an installation (after an erasure or a period's end). */
export function forgetPersonSealingKeys(installationId: string): void {
  for (const key of sealing.keys()) if (key.startsWith(`${installationId}:`)) sealing.delete(key);
}

async function unwrapPersonKey(installationId: string, id: string, row: Pick<PersonKeyRow, "wrappedKey">, wrappingKey: CryptoKey): Promise<CryptoKey> {
  const [iv, sealed] = row.wrappedKey.split(".");
  if (!iv || !sealed) throw new AppError("crypto.data_key_corrupt", "A stored person key is malformed.", { status: 500 });
  const raw = new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: wrapAad(installationId, id) }, wrappingKey, fromBase64(sealed)));
  return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
}

const SELECT_KEY = `SELECT generation, wrapping_key_id AS wrappingKeyId, wrapped_key AS wrappedKey, created_at AS createdAt FROM person_data_keys WHERE installation_id = ?1 AND period = ?2 AND person = ?3`;

type KeyAccess = { wrapping: () => Promise<{ id: string; key: CryptoKey }>; open: (dataKeyId: string) => Promise<CryptoKey> };

/**
 * The key `personIndex` (a keyed index) seals with in `period`, created on first use, wrapped by
 * the installation's key (`keys.wrapping`; `keys.open` opens a data key by id). A person new this
 * period costs one R2 put (create-if-absent; the key made here is used as it is, not read back); a
 * person this isolate sealed for before, one head; a person sealed for within the last 30 s in this
 * isolate, nothing; one who has a key this isolate does not know of, the put refused and a head.
 */
export async function personSealingKey(env: Env, installationId: string, personIndex: string, period: string, keys: KeyAccess): Promise<{ id: string; key: CryptoKey }> {
  const person = personHandle(personIndex);
  const cacheKey = `${installationId}:${period}:${person}`;
  const cached = sealing.get(cacheKey);
  if (cached && cached.until > Date.now()) return cached.value;
  // An entry past its time still says the key existed: read it first (one head), rather than try to make it.
  const value = makeOrReadKey(env, installationId, person, period, keys, cached !== undefined);
  sealing.delete(cacheKey);
  if (sealing.size >= SEALING_CACHE_LIMIT) sealing.delete(sealing.keys().next().value!);
  sealing.set(cacheKey, { value, until: Date.now() + ACTIVE_TTL_MS });
  value.catch(() => sealing.delete(cacheKey));
  return value;
}

async function makeOrReadKey(env: Env, installationId: string, person: string, period: string, keys: KeyAccess, likelyExists: boolean): Promise<{ id: string; key: CryptoKey }> {
  const name = personKeyObject(installationId, period, person);
  const read = async (head: R2Object | null, outer?: { id: string; key: CryptoKey }) => {
    const existing = keyOfMetadata(head?.customMetadata);
    if (!existing) return null; // none (never made, or deleted by an erasure): make one
    const existingId = keyId(period, person, existing.generation);
    // Unwrapped with the installation key that wrapped it (an older, decrypt-only version after a rotation).
    const wrapping = outer && existing.wrappingKeyId === outer.id ? outer.key : await keys.open(existing.wrappingKeyId);
    return { id: existingId, key: await unwrapPersonKey(installationId, existingId, existing, wrapping) };
  };
  if (likelyExists) {
    const found = await read(await env.AUDIT_ANCHORS.head(name));
    if (found) return found;
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    const outer = await keys.wrapping();
    const generation = newGeneration();
    const id = keyId(period, person, generation);
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const raw = crypto.getRandomValues(new Uint8Array(32));
    const wrapped = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: wrapAad(installationId, id) }, outer.key, raw));
    const made: PersonKeyRow = { generation, wrappingKeyId: outer.id, wrappedKey: `${toBase64(iv)}.${toBase64(wrapped)}`, createdAt: new Date().toISOString() };
    // Written only if the person has no key of this period yet (any etag refuses the put).
    const put = await env.AUDIT_ANCHORS.put(name, "", { customMetadata: keyMetadata(made), onlyIf: { etagDoesNotMatch: "*" } });
    if (put) return { id, key: await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]) };
    // The key that is there: the one another isolate (or an earlier report) made first; none if
    // deleted in between (an erasure): make one again.
    const found = await read(await env.AUDIT_ANCHORS.head(name), outer);
    if (found) return found;
  }
  throw new AppError("crypto.data_key_unavailable", "No key could be created for this person; retry.", { status: 503, retryable: true });
}

/**
 * Opens a person's key by id for reading: unwrapped with the installation key it names (`open`
 * gives the opening key of a data key id). A key that is gone was destroyed: the data is erased.
 */
export async function openPersonKey(env: Env, installationId: string, id: string, open: (dataKeyId: string) => Promise<CryptoKey>): Promise<CryptoKey> {
  const parsed = parseKeyId(id);
  if (!parsed) throw new AppError("crypto.open_failed", "Sealed data names a malformed person key.", { status: 500 });
  const row = isLegacyGeneration(parsed.generation)
    ? await env.DB.prepare(SELECT_KEY).bind(installationId, parsed.period, parsed.person).first<PersonKeyRow>()
    : keyOfMetadata((await env.AUDIT_ANCHORS.head(personKeyObject(installationId, parsed.period, parsed.person)))?.customMetadata);
  // Gone, or made again since (another generation): the key this was sealed under was destroyed.
  if (!row || row.generation !== parsed.generation) throw personKeyDestroyed();
  return unwrapPersonKey(installationId, id, row, await open(row.wrappingKeyId));
}

/** Lists every key object under `prefix` (custom metadata included), a page at a time. */
async function eachKeyObject(env: Env, prefix: string, visit: (page: { name: string; key: PersonKeyRow | null }[]) => Promise<void> | void): Promise<void> {
  let cursor: string | undefined;
  do {
    const listed = await env.AUDIT_ANCHORS.list({ prefix, cursor, include: ["customMetadata"] });
    await visit(listed.objects.map((object) => ({ name: object.key, key: keyOfMetadata(object.customMetadata) })));
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor);
}

/** Deletes key objects, up to a thousand a call. */
async function deleteKeyObjects(env: Env, names: readonly string[]): Promise<void> {
  for (let i = 0; i < names.length; i += DELETE_CHUNK) await env.AUDIT_ANCHORS.delete(names.slice(i, i + DELETE_CHUNK));
}

/**
 * Deletes an installation's people's keys of a period — the R2 objects (a listing page at a time)
 * and the rows made before keys moved to R2 — and answers their ids. Called when the period's
 * keys are destroyed (what they sealed needed the period's key as well); R2 first, so a period whose
 * keys D1 records as destroyed has no person key left.
 */
export async function deletePeriodPersonKeys(env: Env, installationId: string, period: string): Promise<{ ids: string[]; deleteStatement: D1PreparedStatement }> {
  const ids: string[] = [];
  await eachKeyObject(env, personKeysPrefix(installationId, period), async (page) => {
    for (const { name, key } of page) if (key) ids.push(keyId(period, name.slice(name.lastIndexOf("/") + 1), key.generation));
    await deleteKeyObjects(
      env,
      page.map((o) => o.name),
    );
  });
  const { results } = await env.DB.prepare(`SELECT person, generation FROM person_data_keys WHERE installation_id = ?1 AND period = ?2`).bind(installationId, period).all<{ person: string; generation: string }>();
  ids.push(...results.map((r) => keyId(period, r.person, r.generation)));
  return { ids, deleteStatement: env.DB.prepare(`DELETE FROM person_data_keys WHERE installation_id = ?1 AND period = ?2`).bind(installationId, period) };
}

/** Deletes every person key object of an installation (a restore that failed, an installation removed). */
export async function deleteInstallationPersonKeys(env: Env, installationId: string): Promise<void> {
  await eachKeyObject(env, personKeysPrefix(installationId), (page) =>
    deleteKeyObjects(
      env,
      page.map((o) => o.name),
    ),
  );
}

/**
 * The key objects of people, each made up to their own time (`[{ person: keyed index, until }]`):
 * their ids and R2 names, by person. A few people are looked up by name (a head per period the
 * installation has a live key of); more, by listing the installation's key objects once (a page per
 * ~1,000 keys), so a restore re-applying every erasure at once costs listing pages, not a read per
 * person.
 */
export async function personKeyObjectsUntil(env: Env, installationId: string, people: ReadonlyArray<{ person: string; until: string }>): Promise<Map<string, { ids: string[]; objects: string[] }>> {
  const until = new Map(people.map((p) => [personHandle(p.person), p.until]));
  const found = new Map<string, { ids: string[]; objects: string[] }>();
  const note = (name: string, key: PersonKeyRow | null) => {
    const [, , period, person] = name.split("/");
    const at = person ? until.get(person) : undefined;
    if (!key || !period || !person || at === undefined || key.createdAt > at) return;
    const of = found.get(person) ?? { ids: [], objects: [] };
    of.ids.push(keyId(period, person, key.generation));
    of.objects.push(name);
    found.set(person, of);
  };
  if (until.size > 0 && until.size <= FEW_PEOPLE) {
    const { results } = await env.DB.prepare(`SELECT DISTINCT period FROM data_keys WHERE installation_id = ?1 AND period IS NOT NULL AND destroyed_at IS NULL`).bind(installationId).all<{ period: string }>();
    const names = results.flatMap((r) => [...until.keys()].map((person) => personKeyObject(installationId, r.period, person)));
    const heads = await Promise.all(names.map((name) => env.AUDIT_ANCHORS.head(name)));
    for (const [i, head] of heads.entries()) if (head) note(names[i]!, keyOfMetadata(head.customMetadata));
  } else if (until.size > 0) {
    await eachKeyObject(env, personKeysPrefix(installationId), (page) => {
      for (const { name, key } of page) note(name, key);
    });
  }
  return found;
}

/**
 * The keys of people, each made up to their own time: their ids, the R2 objects to delete (found
 * by personKeyObjectsUntil, or given as `objects` when the caller found them for more people at
 * once), and the statement that deletes the rows made before keys moved to R2 (for the caller's
 * batch, with tombstones and audit): one statement whatever the number of people, one seek per
 * person and period (the primary key leads with the period).
 */
export async function peopleKeysUntil(
  env: Env,
  installationId: string,
  people: ReadonlyArray<{ person: string; until: string }>,
  objects?: Map<string, { ids: string[]; objects: string[] }>,
): Promise<{ ids: string[]; objects: string[]; deleteStatement: D1PreparedStatement }> {
  const inR2 = objects ?? (await personKeyObjectsUntil(env, installationId, people));
  const mine = people.map((p) => inR2.get(personHandle(p.person))).filter((o): o is { ids: string[]; objects: string[] } => o !== undefined);
  const list = JSON.stringify(people.map((p) => ({ h: personHandle(p.person), at: p.until })));
  const { results } = await env.DB.prepare(`
    SELECT k.period, k.person, k.generation FROM json_each(?2) t
      CROSS JOIN (SELECT DISTINCT period FROM data_keys WHERE installation_id = ?1 AND period IS NOT NULL) d
      CROSS JOIN person_data_keys k ON k.installation_id = ?1 AND k.period = d.period AND k.person = json_extract(t.value, '$.h')
    WHERE k.created_at <= json_extract(t.value, '$.at')`)
    .bind(installationId, list)
    .all<{ period: string; person: string; generation: string }>();
  const found = JSON.stringify(results.map((r) => [r.period, r.person]));
  return {
    ids: [...mine.flatMap((o) => o.ids), ...results.map((r) => keyId(r.period, r.person, r.generation))],
    objects: mine.flatMap((o) => o.objects),
    deleteStatement: env.DB.prepare(`DELETE FROM person_data_keys WHERE installation_id = ?1 AND (period, person) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?2))`).bind(installationId, found),
  };
}

/** Deletes the key objects peopleKeysUntil found (after the batch that records their destruction). */
export const deletePeopleKeyObjects = deleteKeyObjects;

/** A key as a backup carries it: a row of person_data_keys, whether it lives in D1 or in R2. */
export type PersonKeyBackupRow = { installation_id: string; period: string; person: string; generation: string; wrapping_key_id: string; wrapped_key: string; created_at: string };

/** An installation's key objects as backup rows (one listing page per ~1,000 keys). */
export async function personKeyObjectRows(env: Env, installationId: string): Promise<PersonKeyBackupRow[]> {
  const rows: PersonKeyBackupRow[] = [];
  await eachKeyObject(env, personKeysPrefix(installationId), (page) => {
    for (const { name, key } of page) {
      const [, , period, person] = name.split("/");
      if (!key || !period || !person) continue;
      rows.push({ installation_id: installationId, period, person, generation: key.generation, wrapping_key_id: key.wrappingKeyId, wrapped_key: key.wrappedKey, created_at: key.createdAt });
    }
  });
  return rows;
}

/** True for a backup row of a key that lives in R2 (its 12-digit generation); false for one of D1's rows. */
export function isObjectKeyRow(row: Record<string, unknown>): boolean {
  return typeof row.generation === "string" && !isLegacyGeneration(row.generation);
}

/**
 * Writes the key objects a backup carries back into R2: each checked for the shape a key has (a
 * restore writes what the file says only where a key belongs), written whatever is there (the
 * backup's generation is what its sealed data names). Erasures since the backup are re-applied
 * after (erasure-reapply.ts), which deletes the erased people's keys again.
 */
export async function restorePersonKeyObjects(env: Env, installationId: string, rows: ReadonlyArray<Record<string, unknown>>): Promise<number> {
  let written = 0;
  for (const row of rows) {
    const ok =
      row.installation_id === installationId &&
      typeof row.period === "string" &&
      /^\d{4}-\d{2}$/u.test(row.period) &&
      typeof row.person === "string" &&
      /^[0-9a-f]{32}$/u.test(row.person) &&
      typeof row.generation === "string" &&
      /^[0-9a-f]{12}$/u.test(row.generation) &&
      typeof row.wrapping_key_id === "string" &&
      /^[A-Za-z0-9_-]{1,100}$/u.test(row.wrapping_key_id) &&
      typeof row.wrapped_key === "string" &&
      /^[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]+$/u.test(row.wrapped_key) &&
      typeof row.created_at === "string" &&
      !Number.isNaN(Date.parse(row.created_at));
    if (!ok) throw new AppError("installation_import.invalid", `A person key of the backup (person_data_keys, period ${String(row.period)}) is malformed; restore an untouched export.`, { status: 422 });
    const key: PersonKeyRow = { generation: row.generation as string, wrappingKeyId: row.wrapping_key_id as string, wrappedKey: row.wrapped_key as string, createdAt: row.created_at as string };
    await env.AUDIT_ANCHORS.put(personKeyObject(installationId, row.period as string, row.person as string), "", { customMetadata: keyMetadata(key) });
    written++;
  }
  return written;
}

/**
 * Destroys a person's keys (those made up to `at`): their tombstone records it (`keysUntil`) and one
 * `person_data_key.destroyed` event records how many (not which: a key id carries part of the
 * person's keyed index), with the deletion of any key row made before keys moved to R2, in one D1
 * batch; then the key objects are deleted from R2 (deletion is destruction: nothing else holds the
 * material) and the tombstone's R2 copy written. The tombstone goes first, so an R2 failure leaves
 * a record that a retry, or any restore, completes. Idempotent: a person with no key left still
 * gets their tombstone (a later restore needs it). Answers the ids destroyed.
 */
export async function destroyPersonKeys(env: Env, installationId: string, person: string, input: { at: string; actor: AuditEventInput["actor"]; requestId: string }): Promise<string[]> {
  const { ids, objects, deleteStatement } = await peopleKeysUntil(env, installationId, [{ person, until: input.at }]);
  await env.DB.batch([
    deleteStatement,
    tombstonesStatement(env.DB, installationId, [{ person, erasedAt: input.at, reporterUntil: null, ownerUntil: null, keysUntil: input.at }]),
    auditStatement(env.DB, {
      installationId,
      idempotencyKey: `personal_data_request:${input.requestId}:keys_destroyed:${personHandle(person)}`,
      action: "person_data_key.destroyed",
      actor: input.actor,
      target: { type: "personal_data_request", id: input.requestId },
      details: { keys: ids.length },
      at: input.at,
    }),
  ]);
  await deleteKeyObjects(env, objects);
  await copyTombstones(env, installationId, [person]);
  forgetPersonSealingKeys(installationId);
  return ids;
}
