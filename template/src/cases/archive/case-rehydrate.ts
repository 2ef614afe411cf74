// Archived cases back to D1: a read by id that misses in D1, a new report about an archived
// subject, or a named person's request brings the case back exactly as it was archived (one batch,
// all or nothing) and removes its object, so D1 is its only truth again (case-archive.ts says why).
import { canonicalJson } from "../../audit";
import { AppError } from "../../errors";
import { byteLength } from "../../lib/crypto";
import { caseArchiveKey, caseRefKey, type CaseRefKind, COLUMN, ID, PERSON_KEY, PREFIX, readCaseArchive, type Row, subjectKey, subjectRefKey, type TableName, TABLES } from "./case-scope";
import { listTermsOnReports } from "../search/search-terms";

/** Bytes of rows per INSERT statement when a case goes back (D1 takes at most 2 MB in one bound value). */
const REHYDRATE_CHUNK_BYTES = 1_000_000;
/** Tables whose rows carry a caller's Idempotency-Key, unique per installation. */
const KEYED = new Set<TableName>(["reports", "appeals"]);

/**
 * The statements that put a table's archived rows back as they were: one INSERT per chunk of rows
 * (at most REHYDRATE_CHUNK_BYTES of JSON; a larger row alone). A row whose Idempotency-Key another
 * record took while this one was archived comes back without it (the key answers for the newer
 * record now); anything else already there makes the whole batch fail, so nothing comes back halfway.
 */
function insertStatements(db: D1Database, table: TableName, rows: Row[]): D1PreparedStatement[] {
  if (rows.length === 0) return [];
  const columns = Object.keys(rows[0]!);
  if (!columns.every((c) => COLUMN.test(c))) throw new AppError("case_archive.corrupt", `The case archive holds a column name that is not one: ${table}.`, { status: 500 });
  const installation = columns.indexOf("installation_id");
  const values = columns.map((c, j) =>
    KEYED.has(table) && c === "idempotency_key" && installation >= 0
      ? `CASE WHEN EXISTS (SELECT 1 FROM ${table} x WHERE x.installation_id = value ->> ${installation} AND x.idempotency_key = value ->> ${j}) THEN NULL ELSE value ->> ${j} END`
      : `value ->> ${j}`,
  );
  const sql = `INSERT INTO ${table} (${columns.join(", ")}) SELECT ${values.join(", ")} FROM json_each(?1)`;
  const out: D1PreparedStatement[] = [];
  let chunk: string[] = [];
  let bytes = 0;
  const flush = () => {
    if (chunk.length > 0) out.push(db.prepare(sql).bind(`[${chunk.join(",")}]`));
    chunk = [];
    bytes = 0;
  };
  for (const row of rows) {
    const text = JSON.stringify(columns.map((c) => row[c] ?? null));
    if (bytes + text.length > REHYDRATE_CHUNK_BYTES) flush();
    chunk.push(text);
    bytes += text.length;
  }
  flush();
  return out;
}

/**
 * The archived rows of reports and appeals whose data key was destroyed while the case was in R2
 * (retention's key sweep: their personal data no longer opens), made what an erasure leaves: erased
 * at the key's destruction, without the keyed hashes that find a person (reporter, subject owner,
 * appellant) or a description's words, and without their search terms. Without this, a case
 * brought back would make reports whose data is gone findable again by the people and words in them.
 */
async function withDestroyedKeysErased(db: D1Database, installationId: string, tables: Record<string, Row[] | undefined>): Promise<void> {
  const sealed = [...(tables.reports ?? []), ...(tables.appeals ?? [])].filter((row) => row.personal_data_erased_at == null);
  const keyIds = [...new Set(sealed.map((row) => String(row.data_key_id)))];
  if (keyIds.length === 0) return;
  const { results } = await db
    .prepare(`SELECT id, destroyed_at AS destroyedAt FROM data_keys WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2)) AND destroyed_at IS NOT NULL`)
    .bind(installationId, JSON.stringify(keyIds))
    .all<{ id: string; destroyedAt: string }>();
  const destroyedAt = new Map(results.map((key) => [key.id, key.destroyedAt]));
  if (destroyedAt.size === 0) return;
  const erasedReports = new Set<unknown>();
  for (const row of tables.reports ?? []) {
    const at = row.personal_data_erased_at == null ? destroyedAt.get(String(row.data_key_id)) : undefined;
    if (at === undefined) continue;
    Object.assign(row, { personal_data_erased_at: at, reporter_key: null, subject_owner_key: null, search_terms: null, person_keys_version: row.person_keys_version ?? 0 });
    erasedReports.add(row.id);
  }
  for (const row of tables.appeals ?? []) {
    const at = row.personal_data_erased_at == null ? destroyedAt.get(String(row.data_key_id)) : undefined;
    if (at !== undefined) Object.assign(row, { personal_data_erased_at: at, appellant_key: null, person_keys_version: row.person_keys_version ?? 0 });
  }
  if (tables.search_terms) tables.search_terms = tables.search_terms.filter((term) => !erasedReports.has(term.record_id));
}

/**
 * Puts an archived case's rows back in D1 exactly as they were archived (one batch), drops its
 * subject key and counts it out of the totals. The object stays: the sweep archives the case again
 * once the window has passed (the same rows give the same bytes, so R2 is not rewritten). Answers
 * whether the case is in D1 afterwards.
 */
export async function rehydrateCase(env: Env, installationId: string, caseId: string, now: Date = new Date()): Promise<boolean> {
  const object = await readCaseArchive(env, installationId, caseId);
  if (!object) return false;
  const db = env.DB;
  const caseRow = object.tables.cases[0];
  if (!caseRow) return false;
  const subject = subjectKey(installationId, String(caseRow.subject_kind), String(caseRow.subject_id));
  const bytes = byteLength(canonicalJson(object));
  await withDestroyedKeysErased(db, installationId, object.tables);
  // A case archived before reports listed their search terms: the lists, from the term rows it holds.
  listTermsOnReports(object.tables.reports, object.tables.search_terms);
  const statements = TABLES.flatMap((t) => insertStatements(db, t.name, object.tables[t.name]));
  try {
    await db.batch([
      db.prepare(`UPDATE case_archive_totals SET cases = MAX(0, cases - 1), bytes = MAX(0, bytes - ?2) WHERE installation_id = ?1`).bind(installationId, bytes),
      ...statements,
      db.prepare(`DELETE FROM archived_subjects WHERE key = ?1`).bind(subject),
      db.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, rehydrated_at) VALUES (?1, ?2, ?3) ON CONFLICT (case_id) DO UPDATE SET rehydrated_at = excluded.rehydrated_at`).bind(caseId, installationId, now.toISOString()),
    ]);
  } catch (error) {
    // Another reader brought it back first (its rows are there now): nothing to do.
    if (await db.prepare(`SELECT 1 AS x FROM cases WHERE id = ?1 AND installation_id = ?2`).bind(caseId, installationId).first()) return true;
    console.error(JSON.stringify({ event: "case.rehydrate_failed", caseId, installationId, code: error instanceof AppError ? error.code : "d1.error" }));
    throw new AppError("case_archive.rehydrate_failed", `The archived case ${caseId} could not be brought back to D1; nothing of it was written, and it stays archived.`, { status: 500, retryable: true });
  }
  // D1 holds the case again and is its only truth: the object goes, so no stale copy outlives an
  // erasure of the hot rows. Archived again, the case gets a new object (its refs stay valid).
  await env.WORKFLOW_ARTIFACTS.delete(caseArchiveKey(installationId, caseId));
  return true;
}

/** The case a ref object names, or null (no such archived record, or an id that cannot be one). */
async function caseOfRef(env: Env, installationId: string, kind: CaseRefKind, id: string): Promise<string | null> {
  if (!ID.test(id)) return null;
  const ref = await env.WORKFLOW_ARTIFACTS.get(caseRefKey(installationId, kind, id));
  if (!ref) return null;
  const caseId = await ref.text();
  return ID.test(caseId) ? caseId : null;
}

/** Brings back the archived case that holds this record, if one does. Answers whether it did. */
export async function rehydrateRef(env: Env, installationId: string, kind: CaseRefKind | "case", id: string): Promise<boolean> {
  const caseId = kind === "case" ? (ID.test(id) ? id : null) : await caseOfRef(env, installationId, kind, id);
  return caseId ? rehydrateCase(env, installationId, caseId) : false;
}

/** Brings back the archived case of a subject, if its key says there is one. Answers whether it did. */
export async function rehydrateSubject(env: Env, installationId: string, kind: string, id: string): Promise<boolean> {
  const key = subjectKey(installationId, kind, id);
  const held = await env.DB.prepare(`SELECT 1 AS x FROM archived_subjects WHERE key = ?1`).bind(key).first();
  if (!held) return false;
  const ref = await env.WORKFLOW_ARTIFACTS.get(subjectRefKey(installationId, key));
  const caseId = ref ? await ref.text() : null;
  return caseId && ID.test(caseId) ? rehydrateCase(env, installationId, caseId) : false;
}

/** Most archived cases a personal-data request brings back at once (the response says to ask again). */
export const PERSON_REHYDRATE_LIMIT = 50;

/**
 * Brings back the archived cases that hold rows of a person (by their person keys), so a request
 * for their data (export, erasure) finds them in D1 as it finds hot ones. Answers how many came
 * back and whether more are left (at most PERSON_REHYDRATE_LIMIT a call).
 */
export async function rehydratePerson(env: Env, installationId: string, personKeys: ReadonlyArray<string | null>): Promise<{ cases: number; more: boolean }> {
  let cases = 0;
  for (const person of personKeys) {
    if (!person || !PERSON_KEY.test(person)) continue;
    const prefix = `${PREFIX}/${installationId}/refs/person/${person}/`;
    const page = await env.WORKFLOW_ARTIFACTS.list({ prefix, limit: PERSON_REHYDRATE_LIMIT - cases });
    for (const listed of page.objects) {
      const caseId = listed.key.slice(prefix.length);
      if (ID.test(caseId)) {
        const hot = await env.DB.prepare(`SELECT 1 AS x FROM cases WHERE id = ?1 AND installation_id = ?2`).bind(caseId, installationId).first();
        if (hot) {
          // Hot, maybe with an archive pass in flight that wrote this ref: held as a brought-back case,
          // so that pass cannot commit and the request finds the person's rows in D1.
          await env.DB.prepare(`INSERT INTO case_archive_holds (case_id, installation_id, rehydrated_at) VALUES (?1, ?2, ?3) ON CONFLICT (case_id) DO UPDATE SET rehydrated_at = excluded.rehydrated_at`)
            .bind(caseId, installationId, new Date().toISOString())
            .run();
        } else await rehydrateCase(env, installationId, caseId);
      }
      // In D1 now: the ref is written again when the case is archived again with the person's rows.
      await env.WORKFLOW_ARTIFACTS.delete(listed.key);
      cases += 1;
    }
    if (page.truncated || cases >= PERSON_REHYDRATE_LIMIT) return { cases, more: true };
  }
  return { cases, more: false };
}

/**
 * A read by id that serves archived records as hot ones: `read` from D1; on a miss, the case that
 * holds the record is brought back and `read` asked again.
 */
export async function hotOrArchived<T>(env: Env, installationId: string, kind: CaseRefKind | "case", id: string, read: () => Promise<T | null>): Promise<T | null> {
  const hot = await read();
  if (hot !== null && hot !== undefined) return hot;
  // Read again whether or not this call brought it back: another reader may have (and removed the object).
  await rehydrateRef(env, installationId, kind, id);
  return read();
}
