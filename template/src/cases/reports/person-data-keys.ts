// Keys per data subject (crypto-shredding). Each person a report or appeal is about — its reporter,
// its subject's owner, its appellant — gets a key of their own per period, named by 32 hex digits of
// their keyed index (lib/person-keys.ts: `pk1_…`, so the row names nobody) and wrapped by the installation's
// own data key. report-crypto seals their data under it (and the period's key) in layers; erasing
// the person (destroyPersonKeys) deletes their keys, so every copy of what was sealed for them —
// hot rows, case archives in R2, exported backups — stops opening, without rewriting any of them,
// while another person's data in the same case still opens. The erasure leaves a tombstone (the
// index and when, nothing else) that outlives the installation's rows, so a restore of a backup
// taken before it re-applies it (cases/retention/erasure-reapply.ts).
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

/** A person's key id: `psk_<period>_<handle>` (the row's primary key, with the installation). */
const keyId = (period: string, person: string) => `${PREFIX}${period}_${person}`;

function parseKeyId(id: string): { period: string; person: string } | null {
  const match = /^psk_(\d{4}-\d{2})_([0-9a-f]{32})$/u.exec(id);
  return match ? { period: match[1]!, person: match[2]! } : null;
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
  wrappingKeyId: string;
  wrappedKey: string;
}

// A person's sealing key of a period, briefly cached: an erasure in another isolate is seen within
// the TTL (a value sealed meanwhile under the deleted key reads as erased, as it should once the
// person asked for erasure).
const sealing = new Map<string, { key: Promise<CryptoKey>; until: number }>();

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

const SELECT_KEY = `SELECT wrapping_key_id AS wrappingKeyId, wrapped_key AS wrappedKey FROM person_data_keys WHERE installation_id = ?1 AND period = ?2 AND person = ?3`;

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
  const id = keyId(period, person);
  const cacheKey = `${installationId}:${id}`;
  const cached = sealing.get(cacheKey);
  if (cached && cached.until > Date.now()) return { id, key: await cached.key };
  const outer = await keys.wrapping();
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const raw = crypto.getRandomValues(new Uint8Array(32));
  const wrapped = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: wrapAad(installationId, id) }, outer.key, raw));
  const [, read] = await env.DB.batch<PersonKeyRow>([
    env.DB.prepare(`
      INSERT INTO person_data_keys (installation_id, period, person, wrapping_key_id, wrapped_key, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(installation_id, period, person) DO NOTHING`).bind(installationId, period, person, outer.id, `${toBase64(iv)}.${toBase64(wrapped)}`, new Date().toISOString()),
    env.DB.prepare(SELECT_KEY).bind(installationId, period, person),
  ]);
  const row = read!.results[0];
  if (!row) throw new AppError("crypto.data_key_unavailable", "No key could be created for this person; retry.", { status: 503, retryable: true });
  // Unwrapped with the installation key that wrapped it (an older, decrypt-only version after a rotation).
  const key = row.wrappingKeyId === outer.id ? unwrapPersonKey(installationId, id, row, outer.key) : keys.open(row.wrappingKeyId).then((older) => unwrapPersonKey(installationId, id, row, older));
  if (sealing.size > 1_000) sealing.clear();
  sealing.set(cacheKey, { key, until: Date.now() + ACTIVE_TTL_MS });
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
  if (!row) throw personKeyDestroyed();
  return unwrapPersonKey(installationId, id, row, await open(row.wrappingKeyId));
}

/** The ids of an installation's people's keys of a period (deleted with the period's keys). */
export async function personKeysOfPeriod(db: D1Database, installationId: string, period: string): Promise<string[]> {
  const { results } = await db.prepare(`SELECT person FROM person_data_keys WHERE installation_id = ?1 AND period = ?2`).bind(installationId, period).all<{ person: string }>();
  return results.map((r) => keyId(period, r.person));
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
    SELECT k.period, k.person FROM json_each(?2) t
      CROSS JOIN (SELECT DISTINCT period FROM data_keys WHERE installation_id = ?1 AND period IS NOT NULL) d
      CROSS JOIN person_data_keys k ON k.installation_id = ?1 AND k.period = d.period AND k.person = json_extract(t.value, '$.h')
    WHERE k.created_at <= json_extract(t.value, '$.at')`)
    .bind(installationId, list)
    .all<{ period: string; person: string }>();
  const found = JSON.stringify(results.map((r) => [r.period, r.person]));
  return {
    ids: results.map((r) => keyId(r.period, r.person)),
    deleteStatement: db.prepare(`DELETE FROM person_data_keys WHERE installation_id = ?1 AND (period, person) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?2))`).bind(installationId, found),
  };
}

/** The R2 copy of a tombstone (AUDIT_ANCHORS): outlives a database restored whole from elsewhere. */
export const tombstoneKey = (installationId: string, person: string) => `erasure/${installationId}/${person}`;
export const tombstonePrefix = (installationId: string) => `erasure/${installationId}/`;

/**
 * Destroys a person's keys (those made up to `at`): the rows are deleted, a tombstone (the keyed
 * index and when) is written, in D1 and R2, and one `person_data_key.destroyed` event records how
 * many (not which: a key id carries part of the person's keyed index) — in one D1 batch; then the
 * tombstone's R2 copy. Idempotent: a person with no key left still gets their tombstone (a later
 * restore needs it). Answers the ids destroyed.
 */
export async function destroyPersonKeys(env: Env, installationId: string, person: string, input: { at: string; actor: AuditEventInput["actor"]; requestId: string }): Promise<string[]> {
  const { ids, deleteStatement } = await peopleKeysUntil(env.DB, installationId, [{ person, until: input.at }]);
  await env.DB.batch([
    deleteStatement,
    tombstoneStatement(env.DB, installationId, person, input.at),
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
  // The time is in the object's metadata too, so a restore reads every tombstone from the listing alone.
  await env.AUDIT_ANCHORS.put(tombstoneKey(installationId, person), JSON.stringify({ installationId, person, erasedAt: input.at }), {
    httpMetadata: { contentType: "application/json" },
    customMetadata: { erasedAt: input.at },
  });
  forgetPersonSealingKeys(installationId);
  return ids;
}

/** Records (or moves later) a person's tombstone. */
export function tombstoneStatement(db: D1Database, installationId: string, person: string, at: string): D1PreparedStatement {
  return db
    .prepare(`INSERT INTO erasure_tombstones (installation_id, person_index, erased_at) VALUES (?1, ?2, ?3)
      ON CONFLICT(installation_id, person_index) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at)`)
    .bind(installationId, person, at);
}

/** Records (or moves later) the tombstones of many people (`[{ person, until }]`), in one statement. */
export function tombstonesStatement(db: D1Database, installationId: string, people: ReadonlyArray<{ person: string; until: string }>): D1PreparedStatement {
  return db
    .prepare(`INSERT INTO erasure_tombstones (installation_id, person_index, erased_at)
      SELECT ?1, json_extract(value, '$.p'), json_extract(value, '$.at') FROM json_each(?2) WHERE true
      ON CONFLICT(installation_id, person_index) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at)`)
    .bind(installationId, JSON.stringify(people.map((p) => ({ p: p.person, at: p.until }))));
}

/** Every tombstone of an installation: D1's and R2's copies, the later time of each person. */
export async function tombstonesOf(env: Env, installationId: string): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const note = (person: string, at: string) => {
    if (!/^pk1_[0-9a-f]{64}$/u.test(person) || Number.isNaN(Date.parse(at))) return;
    const known = found.get(person);
    if (!known || known < at) found.set(person, at);
  };
  const { results } = await env.DB.prepare(`SELECT person_index AS person, erased_at AS erasedAt FROM erasure_tombstones WHERE installation_id = ?1`).bind(installationId).all<{ person: string; erasedAt: string }>();
  for (const row of results) note(row.person, row.erasedAt);
  const prefix = tombstonePrefix(installationId);
  let cursor: string | undefined;
  do {
    // The listing carries each tombstone's time (custom metadata): one R2 call per 1,000 people.
    const listed = await env.AUDIT_ANCHORS.list({ prefix, cursor, include: ["customMetadata"] });
    for (const object of listed.objects) {
      const erasedAt = object.customMetadata?.erasedAt;
      if (erasedAt) note(object.key.slice(prefix.length), erasedAt);
    }
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor);
  return found;
}
