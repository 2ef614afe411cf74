// Erasure tombstones: every erasure leaves one (the person's keyed index, which roles were erased
// up to when, whether the keys went; nothing else) in D1 and in R2 (AUDIT_ANCHORS), outliving the
// installation's rows, so a restore of a backup taken before it re-applies it
// (cases/retention/erasure-reapply.ts).

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
