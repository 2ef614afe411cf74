// Keys per data subject (crypto-shredding). Each person a report or appeal is about — its reporter,
// its subject's owner, its appellant — gets a key of their own per period, named by 32 hex digits of
// their keyed index (lib/person-keys.ts: `pk1_…`, so the row names nobody) and wrapped by the installation's
// own data key. report-crypto seals their data under it (and the period's key) in layers; erasing
// the person (destroyPersonKeys) deletes their keys, so every copy of what was sealed for them —
// hot rows, case archives in R2, exported backups — stops opening, without rewriting any of them,
// while another person's data in the same case still opens. Every erasure leaves a tombstone (the
// index, which roles were erased up to when, whether the keys went; nothing else) that outlives the
// installation's rows, so a restore of a backup taken before it re-applies it
// (cases/retention/erasure-reapply.ts).
import { auditStatement, type AuditEventInput } from "../../audit";
import { AppError } from "../../errors";

const encoder = new TextEncoder();
const PREFIX = "psk_";
const ACTIVE_TTL_MS = 30_000;

/** True for the id of a person's key (as it appears in a sealed envelope). */
export function isPersonKeyId(id: string): boolean {
  return id.startsWith(PREFIX);
}

/**
 * How a key row names its person: 32 hex digits (128 bits) of their keyed index, enough to keep
 * people apart within an installation and a period, and short, since a row per person and period
 * stays in D1 for the retention window.
 */
export function personHandle(personIndex: string): string {
  return personIndex.slice(4, 36);
}

/**
 * A person's key id: `psk_<period>_<handle>_<generation>` (the row's primary key, with the
 * installation, and the random generation drawn when the key was made): a key made again for the
 * same person and period after an erasure has another id, so what was sealed under the destroyed
 * one reads as erased rather than failing to open under the new one.
 */
const keyId = (period: string, person: string, generation: string) => `${PREFIX}${period}_${person}_${generation}`;

function parseKeyId(id: string): { period: string; person: string; generation: string } | null {
  const match = /^psk_(\d{4}-\d{2})_([0-9a-f]{32})_([0-9a-f]{8})$/u.exec(id);
  return match ? { period: match[1]!, person: match[2]!, generation: match[3]! } : null;
}

function newGeneration(): string {
  return [...crypto.getRandomValues(new Uint8Array(4))].map((b) => b.toString(16).padStart(2, "0")).join("");
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

interface PersonKeyRow {
  generation: string;
  wrappingKeyId: string;
  wrappedKey: string;
}

// A person's sealing key of a period, briefly cached: an erasure in another isolate is seen within
// the TTL (a value sealed meanwhile under the deleted key names that key's generation, so it reads
// as erased, as it should once the person asked for erasure, even after a new key is made).
const sealing = new Map<string, { id: Promise<string>; key: Promise<CryptoKey>; until: number }>();

/** Forgets this isolate's cached sealing keys of an installation (after an erasure or a period's end). */
export function forgetPersonSealingKeys(installationId: string): void {
  for (const key of sealing.keys()) if (key.startsWith(`${installationId}:`)) sealing.delete(key);
}

async function unwrapPersonKey(installationId: string, id: string, row: PersonKeyRow, wrappingKey: CryptoKey): Promise<CryptoKey> {
  const [iv, sealed] = row.wrappedKey.split(".");
  if (!iv || !sealed) throw new AppError("crypto.data_key_corrupt", "A stored person key is malformed.", { status: 500 });
  const raw = new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(iv), additionalData: wrapAad(installationId, id) }, wrappingKey, fromBase64(sealed)));
  return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
}

const SELECT_KEY = `SELECT generation, wrapping_key_id AS wrappingKeyId, wrapped_key AS wrappedKey FROM person_data_keys WHERE installation_id = ?1 AND period = ?2 AND person = ?3`;

/**
 * The key `personIndex` (a keyed index) seals with in `period`, created on first use, wrapped by
 * the installation's key (`keys.wrapping`; `keys.open` opens a data key by id). One round trip:
 * the insert (ignored when the key exists, so two isolates creating it at once get the same one)
 * and the read, in one batch.
 */
export async function personSealingKey(
  env: Env,
  installationId: string,
  personIndex: string,
  period: string,
  keys: { wrapping: () => Promise<{ id: string; key: CryptoKey }>; open: (dataKeyId: string) => Promise<CryptoKey> },
): Promise<{ id: string; key: CryptoKey }> {
  const person = personHandle(personIndex);
  const cacheKey = `${installationId}:${period}:${person}`;
  const cached = sealing.get(cacheKey);
  if (cached && cached.until > Date.now()) return { id: await cached.id, key: await cached.key };
  const outer = await keys.wrapping();
  const generation = newGeneration();
  const made = keyId(period, person, generation);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const raw = crypto.getRandomValues(new Uint8Array(32));
  const wrapped = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: wrapAad(installationId, made) }, outer.key, raw));
  const [, read] = await env.DB.batch<PersonKeyRow>([
    env.DB.prepare(`
      INSERT INTO person_data_keys (installation_id, period, person, generation, wrapping_key_id, wrapped_key, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(installation_id, period, person) DO NOTHING`).bind(installationId, period, person, generation, outer.id, `${toBase64(iv)}.${toBase64(wrapped)}`, new Date().toISOString()),
    env.DB.prepare(SELECT_KEY).bind(installationId, period, person),
  ]);
  const row = read!.results[0];
  if (!row) throw new AppError("crypto.data_key_unavailable", "No key could be created for this person; retry.", { status: 503, retryable: true });
  // The key that is there: this one, or the one another isolate made first (its generation).
  const id = keyId(period, person, row.generation);
  // Unwrapped with the installation key that wrapped it (an older, decrypt-only version after a rotation).
  const key = row.wrappingKeyId === outer.id ? unwrapPersonKey(installationId, id, row, outer.key) : keys.open(row.wrappingKeyId).then((older) => unwrapPersonKey(installationId, id, row, older));
  if (sealing.size > 1_000) sealing.clear();
  sealing.set(cacheKey, { id: Promise.resolve(id), key, until: Date.now() + ACTIVE_TTL_MS });
  key.catch(() => sealing.delete(cacheKey));
  return { id, key: await key };
}

/**
 * Opens a person's key by id for reading: unwrapped with the installation key it names (`open`
 * gives the opening key of a data key id). A key that is gone was destroyed: the data is erased.
 */
export async function openPersonKey(env: Env, installationId: string, id: string, open: (dataKeyId: string) => Promise<CryptoKey>): Promise<CryptoKey> {
  const parsed = parseKeyId(id);
  if (!parsed) throw new AppError("crypto.open_failed", "Sealed data names a malformed person key.", { status: 500 });
  const row = await env.DB.prepare(SELECT_KEY).bind(installationId, parsed.period, parsed.person).first<PersonKeyRow>();
  // Gone, or made again since (another generation): the key this was sealed under was destroyed.
  if (!row || row.generation !== parsed.generation) throw personKeyDestroyed();
  return unwrapPersonKey(installationId, id, row, await open(row.wrappingKeyId));
}

/** The ids of an installation's people's keys of a period (deleted with the period's keys). */
export async function personKeysOfPeriod(db: D1Database, installationId: string, period: string): Promise<string[]> {
  const { results } = await db.prepare(`SELECT person, generation FROM person_data_keys WHERE installation_id = ?1 AND period = ?2`).bind(installationId, period).all<{ person: string; generation: string }>();
  return results.map((r) => keyId(period, r.person, r.generation));
}

/** Deletes an installation's people's keys of a period. */
export function deletePeriodPersonKeysStatement(db: D1Database, installationId: string, period: string): D1PreparedStatement {
  return db.prepare(`DELETE FROM person_data_keys WHERE installation_id = ?1 AND period = ?2`).bind(installationId, period);
}

/**
 * The keys of people, each made up to their own time (`[{ person: keyed index, until }]`): their
 * ids and the statement that deletes them (for the caller's batch, with tombstones and audit). One
 * statement each, whatever the number of people (a restore re-applies every erasure at once); one
 * seek per person and period the installation has keys of (the primary key leads with the period).
 */
export async function peopleKeysUntil(db: D1Database, installationId: string, people: ReadonlyArray<{ person: string; until: string }>): Promise<{ ids: string[]; deleteStatement: D1PreparedStatement }> {
  const list = JSON.stringify(people.map((p) => ({ h: personHandle(p.person), at: p.until })));
  const { results } = await db
    .prepare(`
    SELECT k.period, k.person, k.generation FROM json_each(?2) t
      CROSS JOIN (SELECT DISTINCT period FROM data_keys WHERE installation_id = ?1 AND period IS NOT NULL) d
      CROSS JOIN person_data_keys k ON k.installation_id = ?1 AND k.period = d.period AND k.person = json_extract(t.value, '$.h')
    WHERE k.created_at <= json_extract(t.value, '$.at')`)
    .bind(installationId, list)
    .all<{ period: string; person: string; generation: string }>();
  const found = JSON.stringify(results.map((r) => [r.period, r.person]));
  return {
    ids: results.map((r) => keyId(r.period, r.person, r.generation)),
    deleteStatement: db.prepare(`DELETE FROM person_data_keys WHERE installation_id = ?1 AND (period, person) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?2))`).bind(installationId, found),
  };
}

/** The R2 copy of a tombstone (AUDIT_ANCHORS): outlives a database restored whole from elsewhere. */
export const tombstoneKey = (installationId: string, person: string) => `erasure/${installationId}/${person}`;
export const tombstonePrefix = (installationId: string) => `erasure/${installationId}/`;

/**
 * What a person's erasures did, by their keyed index: their reports as reporter (`reporterUntil`)
 * and as subject owner (`ownerUntil`), with their appeals, erased up to then (what pending work held
 * back at the time is erased on re-application if it is no longer pending); their keys made up to
 * `keysUntil` destroyed (null while something of theirs still needed them). `erasedAt` is the latest.
 */
export interface Tombstone {
  person: string;
  erasedAt: string;
  reporterUntil: string | null;
  ownerUntil: string | null;
  keysUntil: string | null;
}

/** The later of two times, either of which may be absent. */
const later = (a: string | null | undefined, b: string | null | undefined): string | null => (!a ? (b ?? null) : !b ? a : a > b ? a : b);
/** SQL for the later of a column and the value being upserted, either NULL. */
const laterSql = (column: string) => `${column} = NULLIF(MAX(COALESCE(${column}, ''), COALESCE(excluded.${column}, '')), '')`;

/** Records (or moves later, field by field) the tombstones of people, in one statement. */
export function tombstonesStatement(db: D1Database, installationId: string, tombstones: ReadonlyArray<Tombstone>): D1PreparedStatement {
  return db
    .prepare(`INSERT INTO erasure_tombstones (installation_id, person_index, erased_at, reporter_until, owner_until, keys_until)
      SELECT ?1, json_extract(value, '$.p'), json_extract(value, '$.at'), json_extract(value, '$.r'), json_extract(value, '$.o'), json_extract(value, '$.k') FROM json_each(?2) WHERE true
      ON CONFLICT(installation_id, person_index) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at), ${laterSql("reporter_until")}, ${laterSql("owner_until")}, ${laterSql("keys_until")}`)
    .bind(installationId, JSON.stringify(tombstones.map((t) => ({ p: t.person, at: t.erasedAt, r: t.reporterUntil, o: t.ownerUntil, k: t.keysUntil }))));
}

const SELECT_TOMBSTONES = `SELECT person_index AS person, erased_at AS erasedAt, reporter_until AS reporterUntil, owner_until AS ownerUntil, keys_until AS keysUntil FROM erasure_tombstones WHERE installation_id = ?1`;

/**
 * Copies people's tombstones, as D1 now holds them (every erasure of theirs merged), to R2; the
 * times are in the object's metadata too, so a restore reads every tombstone from the listing alone.
 */
export async function copyTombstones(env: Env, installationId: string, people: ReadonlyArray<string>): Promise<void> {
  if (people.length === 0) return;
  const { results } = await env.DB.prepare(`${SELECT_TOMBSTONES} AND person_index IN (SELECT value FROM json_each(?2))`).bind(installationId, JSON.stringify(people)).all<Tombstone>();
  for (const t of results) {
    const metadata: Record<string, string> = { erasedAt: t.erasedAt };
    if (t.reporterUntil) metadata.reporterUntil = t.reporterUntil;
    if (t.ownerUntil) metadata.ownerUntil = t.ownerUntil;
    if (t.keysUntil) metadata.keysUntil = t.keysUntil;
    await env.AUDIT_ANCHORS.put(tombstoneKey(installationId, t.person), JSON.stringify({ installationId, ...t }), { httpMetadata: { contentType: "application/json" }, customMetadata: metadata });
  }
}

/**
 * Destroys a person's keys (those made up to `at`): the rows are deleted, their tombstone records it
 * (`keysUntil`), and one `person_data_key.destroyed` event records how many (not which: a key id
 * carries part of the person's keyed index) — in one D1 batch; then the tombstone's R2 copy.
 * Idempotent: a person with no key left still gets their tombstone (a later restore needs it).
 * Answers the ids destroyed.
 */
export async function destroyPersonKeys(env: Env, installationId: string, person: string, input: { at: string; actor: AuditEventInput["actor"]; requestId: string }): Promise<string[]> {
  const { ids, deleteStatement } = await peopleKeysUntil(env.DB, installationId, [{ person, until: input.at }]);
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
  await copyTombstones(env, installationId, [person]);
  forgetPersonSealingKeys(installationId);
  return ids;
}

/** Every tombstone of an installation: D1's and R2's copies merged, the later time of each field. */
export async function tombstonesOf(env: Env, installationId: string): Promise<Map<string, Tombstone>> {
  const found = new Map<string, Tombstone>();
  const valid = (at: string | null | undefined) => (at && !Number.isNaN(Date.parse(at)) ? at : null);
  const note = (t: Tombstone) => {
    const erasedAt = valid(t.erasedAt);
    if (!/^pk1_[0-9a-f]{64}$/u.test(t.person) || !erasedAt) return;
    const known = found.get(t.person);
    found.set(t.person, {
      person: t.person,
      erasedAt: later(known?.erasedAt, erasedAt)!,
      reporterUntil: later(known?.reporterUntil, valid(t.reporterUntil)),
      ownerUntil: later(known?.ownerUntil, valid(t.ownerUntil)),
      keysUntil: later(known?.keysUntil, valid(t.keysUntil)),
    });
  };
  const { results } = await env.DB.prepare(SELECT_TOMBSTONES).bind(installationId).all<Tombstone>();
  for (const row of results) note(row);
  const prefix = tombstonePrefix(installationId);
  let cursor: string | undefined;
  do {
    // The listing carries each tombstone's times (custom metadata): one R2 call per 1,000 people.
    const listed = await env.AUDIT_ANCHORS.list({ prefix, cursor, include: ["customMetadata"] });
    for (const object of listed.objects) {
      const m = object.customMetadata ?? {};
      // A copy with its time alone was written when an erasure always went all the way (keys and every role).
      const whole = !m.reporterUntil && !m.ownerUntil && !m.keysUntil ? m.erasedAt : undefined;
      if (m.erasedAt) note({ person: object.key.slice(prefix.length), erasedAt: m.erasedAt, reporterUntil: m.reporterUntil ?? whole ?? null, ownerUntil: m.ownerUntil ?? whole ?? null, keysUntil: m.keysUntil ?? whole ?? null });
    }
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor);
  return found;
}
