// Erasures re-applied after a restore. A backup taken before a person's erasure holds their keys
// (person_data_keys) and their rows as they were; the erasure's tombstone (the person's keyed index
// and when: erasure_tombstones, and its copy in R2) is not the installation's data, so it outlives
// the installation's removal and is not replaced by a restore. Restoring therefore ends with this:
// for every tombstone, the person's keys made up to the erasure are deleted again and their reports
// and appeals made up to then erased as the erasure erased them, so a backup never brings an erased
// person back. Someone the installation saw again after their erasure keeps what came after.
// The work is in bulk (a statement per chunk of people, a page of rows per erasure batch), so an
// installation with many erasures behind it restores within a Worker's query budget.
import { auditStatement } from "../../audit";
import { newId } from "../../lib/crypto";
import { forgetPersonSealingKeys, peopleKeysUntil, tombstonesOf, tombstonesStatement } from "../reports/person-data-keys";
import { forgetOpeningKeys } from "../reports/report-crypto";
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
  const tombstones = [...(await tombstonesOf(env, installationId))].map(([person, until]) => ({ person, until }));
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
  for (let i = 0; i < tombstones.length; i += PEOPLE_CHUNK) {
    const chunk = tombstones.slice(i, i + PEOPLE_CHUNK);
    const { ids, deleteStatement } = await peopleKeysUntil(env.DB, installationId, chunk);
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
    summary.keys += ids.length;
    forgetOpeningKeys(installationId, ids);
  }
  forgetPersonSealingKeys(installationId);
  // The people's reports (in either role) and appeals made up to their erasure, a page at a time.
  const list = JSON.stringify(tombstones.map((t) => ({ p: t.person, at: t.until })));
  for (let page = 0; ; page++) {
    const [reports, appeals] = await env.DB.batch<{ id: string }>([
      env.DB.prepare(`
        SELECT r.id FROM json_each(?2) t CROSS JOIN reports r ON r.installation_id = ?1 AND r.reporter_key = json_extract(t.value, '$.p')
          WHERE r.created_at <= json_extract(t.value, '$.at') AND r.personal_data_erased_at IS NULL
        UNION SELECT r.id FROM json_each(?2) t CROSS JOIN reports r ON r.installation_id = ?1 AND r.subject_owner_key = json_extract(t.value, '$.p')
          WHERE r.created_at <= json_extract(t.value, '$.at') AND r.personal_data_erased_at IS NULL
        LIMIT ?3`).bind(installationId, list, PAGE),
      env.DB.prepare(`
        SELECT a.id FROM json_each(?2) t CROSS JOIN appeals a ON a.installation_id = ?1 AND a.appellant_key = json_extract(t.value, '$.p')
          WHERE a.created_at <= json_extract(t.value, '$.at') AND a.personal_data_erased_at IS NULL LIMIT ?3`).bind(installationId, list, PAGE),
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
  return summary;
}
