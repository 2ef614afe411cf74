// Erasures re-applied after a restore. A backup taken before a person's erasure holds their keys
// (person-data-keys.ts: written back to R2 by the restore) and their rows as they were; the erasure's tombstone (the person's keyed index,
// which roles were erased up to when and whether their keys went: erasure_tombstones, and its copy
// in R2) is not the installation's data, so it outlives the installation's removal and is not
// replaced by a restore. Restoring therefore ends with this: for every tombstone, the erasure is
// done again as the request did it — their reports in the roles erased made up to then (those in a
// case with pending work held back, as the request holds them back), their appeals, their account's
// signals and (once none of their reports as owner is held back) its strikes and sanctions unlinked,
// and the keys made up to their destruction deleted — so a backup never brings an erased person
// back. Someone the installation saw again after their erasure keeps what came after.
// The work is in bulk (a statement per chunk of people, a page of rows per erasure batch), so an
// installation with many erasures behind it restores within a Worker's query budget.
import { auditStatement } from "../../audit";
import { newId } from "../../lib/crypto";
import { tombstonesOf, tombstonesStatement, type Tombstone } from "../reports/erasure-tombstones";
import { deletePeopleKeyObjects, forgetPersonSealingKeys, peopleKeysUntil, personKeyObjectsUntil } from "../reports/person-data-keys";
import { forgetOpeningKeys } from "../reports/report-crypto";
import { caseBusySql } from "./retention";
import { eraseReports, type ErasureCounts } from "./retention-erase";
import { indexPersonKeys } from "./retention-people";

/** Reports or appeals erased per batch. */
const PAGE = 100;
/** People per key statement (the list is one bound JSON value). */
const PEOPLE_CHUNK = 500;
const INDEX_ROUNDS = 50;

export interface ReappliedErasures {
  people: number;
  keys: number;
  reports: number;
  appeals: number;
}

/**
 * Re-applies every erasure of the installation recorded in a tombstone (idempotent: what is
 * erased already is not written again). One `personal_data.erasure_reapplied` event per chunk of
 * people (how many, and how many keys went) and one `personal_data.erased` per page of rows erased,
 * actor `system:restore`; neither names anyone.
 */
export async function reapplyErasures(env: Env, installationId: string): Promise<ReappliedErasures> {
  const tombstones = [...(await tombstonesOf(env, installationId)).values()];
  const summary: ReappliedErasures = { people: tombstones.length, keys: 0, reports: 0, appeals: 0 };
  if (tombstones.length === 0) return summary;
  // Rows restored from before the person index existed are found by it once indexed.
  for (let round = 0; round < INDEX_ROUNDS; round++) {
    const indexed = await indexPersonKeys(env, 500, installationId);
    if (indexed.reports + indexed.appeals === 0) break;
  }
  const actor = { type: "system", id: "restore" } as const;
  const requestId = newId("pdr");
  const at = new Date().toISOString();
  // Only the keys an erasure destroyed: one that held something back kept them.
  const shreddedOf = (of: Tombstone[]) => of.filter((t): t is Tombstone & { keysUntil: string } => t.keysUntil !== null).map((t) => ({ person: t.person, until: t.keysUntil }));
  // The erased people's key objects, found once for all of them (one listing of the installation's keys).
  const keyObjects = await personKeyObjectsUntil(env, installationId, shreddedOf(tombstones));
  for (let i = 0; i < tombstones.length; i += PEOPLE_CHUNK) {
    const chunk = tombstones.slice(i, i + PEOPLE_CHUNK);
    const { ids, objects, deleteStatement } = await peopleKeysUntil(env, installationId, shreddedOf(chunk), keyObjects);
    await env.DB.batch([
      deleteStatement,
      // A tombstone known from R2 alone is written back to D1.
      tombstonesStatement(env.DB, installationId, chunk),
      auditStatement(env.DB, {
        installationId,
        idempotencyKey: `personal_data_request:${requestId}:reapplied:${i}`,
        action: "personal_data.erasure_reapplied",
        actor,
        target: { type: "personal_data_request", id: requestId },
        details: { people: chunk.length, keys: ids.length },
        at,
      }),
    ]);
    // The key objects go once the batch recorded it (deletion destroys them).
    await deletePeopleKeyObjects(env, objects);
    summary.keys += ids.length;
    forgetOpeningKeys(installationId, ids);
  }
  forgetPersonSealingKeys(installationId);
  // The people's reports in the roles erased and their appeals, made up to their erasure, a page at
  // a time, for a chunk of people at a time (the list is one bound value); what their keys'
  // destruction covered goes whatever its case (it no longer opens).
  const busy = caseBusySql("?4");
  const reportsOf = (column: "reporter_key" | "subject_owner_key", until: "$.r" | "$.o") => `
    SELECT r.id FROM json_each(?2) t CROSS JOIN reports r ON r.installation_id = ?1 AND r.${column} = json_extract(t.value, '$.p') JOIN cases c ON c.id = r.case_id
      WHERE r.personal_data_erased_at IS NULL
        AND (r.created_at <= json_extract(t.value, '$.k') OR (r.created_at <= json_extract(t.value, '${until}') AND NOT ${busy}))`;
  let page = 0;
  for (let i = 0; i < tombstones.length; i += PEOPLE_CHUNK) {
    const list = JSON.stringify(tombstones.slice(i, i + PEOPLE_CHUNK).map(entry));
    for (; ; page++) {
      const [reports, appeals] = await env.DB.batch<{ id: string }>([
        env.DB.prepare(`${reportsOf("reporter_key", "$.r")} UNION ${reportsOf("subject_owner_key", "$.o")} LIMIT ?3`).bind(installationId, list, PAGE, FAR),
        env.DB.prepare(`
        SELECT a.id FROM json_each(?2) t CROSS JOIN appeals a ON a.installation_id = ?1 AND a.appellant_key = json_extract(t.value, '$.p')
          WHERE a.personal_data_erased_at IS NULL
            AND (a.created_at <= json_extract(t.value, '$.k') OR (a.created_at <= json_extract(t.value, '$.ro') AND a.state <> 'open'
              AND NOT EXISTS (SELECT 1 FROM workflow_runs w WHERE w.appeal_id = a.id AND w.state NOT IN ('succeeded', 'failed', 'terminated', 'superseded'))
              AND NOT EXISTS (SELECT 1 FROM reports r JOIN cases c ON c.id = r.case_id WHERE r.id = a.report_id AND ${busy})))
          LIMIT ?3`).bind(installationId, list, PAGE, FAR),
      ]);
      const reportIds = reports!.results.map((r) => r.id);
      const appealIds = appeals!.results.map((r) => r.id);
      if (reportIds.length + appealIds.length === 0) break;
      const counts = await eraseReports(env, installationId, {
        reportIds,
        appealIds,
        at,
        audit: (erased: ErasureCounts) => ({
          installationId,
          idempotencyKey: `personal_data_request:${requestId}:erased:${page}`,
          action: "personal_data.erased",
          actor,
          target: { type: "personal_data_request", id: requestId },
          details: { ...erased, reapplied: true },
          at,
        }),
      });
      summary.reports += counts.reports;
      summary.appeals += counts.appeals;
      // Nothing erased although rows were found (they changed meanwhile): stop rather than loop.
      if (counts.reports + counts.appeals === 0) break;
    }
    page++;
  }
  // As account owners: their signals seen up to the erasure go; their strikes and sanctions made up
  // to then stop naming them once none of their reports as owner is held back (as on request).
  const owners = tombstones.filter((t) => t.ownerUntil !== null);
  for (let i = 0; i < owners.length; i += PEOPLE_CHUNK) {
    const chunk = JSON.stringify(owners.slice(i, i + PEOPLE_CHUNK).map(entry));
    const ready = `WITH ready AS (SELECT json_extract(t.value, '$.p') AS p, json_extract(t.value, '$.o') AS o FROM json_each(?2) t
      WHERE NOT EXISTS (SELECT 1 FROM reports r WHERE r.installation_id = ?1 AND r.subject_owner_key = json_extract(t.value, '$.p') AND r.personal_data_erased_at IS NULL AND r.created_at <= json_extract(t.value, '$.o')))`;
    const unlink = (table: "strikes" | "account_sanctions") =>
      env.DB.prepare(`${ready} UPDATE ${table} SET account_key = 'erased:' || ?3 WHERE installation_id = ?1 AND account_key IN (SELECT p FROM ready)
        AND created_at <= (SELECT o FROM ready WHERE p = ${table}.account_key)`).bind(installationId, chunk, requestId);
    await env.DB.batch([
      env.DB.prepare(`DELETE FROM account_signals WHERE installation_id = ?1 AND account_key IN (SELECT json_extract(value, '$.p') FROM json_each(?2))
        AND first_seen <= (SELECT json_extract(value, '$.o') FROM json_each(?2) WHERE json_extract(value, '$.p') = account_signals.account_key)`).bind(installationId, chunk),
      unlink("strikes"),
      unlink("account_sanctions"),
    ]);
  }
  return summary;
}

/** "Busy" against a cutoff in the far future is "has pending work" alone, as on request. */
const FAR = "9999-12-31T23:59:59.999Z";

/** A tombstone as bound in a statement's JSON list (`ro`: the later of the two roles' times, for appeals). */
function entry(t: Tombstone) {
  const ro =
    [t.reporterUntil, t.ownerUntil]
      .filter((at): at is string => at !== null)
      .sort()
      .at(-1) ?? null;
  return { p: t.person, r: t.reporterUntil, o: t.ownerUntil, k: t.keysUntil, ro };
}
