// Erasures re-applied after a restore. A backup taken before a person's erasure holds their keys
// (person_data_keys) and their rows as they were; the erasure's tombstone (the person's keyed index
// and when: erasure_tombstones, and its copy in R2) is not the installation's data, so it outlives
// the installation's removal and is not replaced by a restore. Restoring therefore ends with this:
// for every tombstone, the person's keys made up to the erasure are deleted again and their reports
// and appeals made up to then erased as the erasure erased them, so a backup never brings an erased
// person back. Someone the installation saw again after their erasure keeps what came after.
import { auditStatement } from "../../audit";
import { newId } from "../../lib/crypto";
import { forgetPersonSealingKeys, personKeysUntil, tombstonesOf, tombstoneStatement } from "../reports/person-data-keys";
import { forgetOpeningKeys } from "../reports/report-crypto";
import { eraseReports, type ErasureCounts } from "./retention-erase";
import { indexPersonKeys } from "./retention-people";

const PAGE = 100;
const INDEX_ROUNDS = 50;

export interface ReappliedErasures {
  people: number;
  keys: number;
  reports: number;
  appeals: number;
}

/**
 * Re-applies every erasure of the installation recorded in a tombstone (idempotent: what is
 * erased already is not written again). One `personal_data.erasure_reapplied` event per person
 * (the number of keys deleted) and one `personal_data.erased` per page of rows erased, actor
 * `system:restore`; neither names the person.
 */
export async function reapplyErasures(env: Env, installationId: string): Promise<ReappliedErasures> {
  const tombstones = await tombstonesOf(env, installationId);
  const summary: ReappliedErasures = { people: tombstones.size, keys: 0, reports: 0, appeals: 0 };
  if (tombstones.size === 0) return summary;
  // Rows restored from before the person index existed are found by it once indexed.
  for (let round = 0; round < INDEX_ROUNDS; round++) {
    const indexed = await indexPersonKeys(env, 500, installationId);
    if (indexed.reports + indexed.appeals === 0) break;
  }
  const actor = { type: "system", id: "restore" } as const;
  for (const [person, erasedAt] of tombstones) {
    const at = new Date().toISOString();
    const requestId = newId("pdr");
    const { ids, deleteStatement } = await personKeysUntil(env.DB, installationId, person, erasedAt);
    await env.DB.batch([
      deleteStatement,
      // A tombstone known from R2 alone is written back to D1.
      tombstoneStatement(env.DB, installationId, person, erasedAt),
      auditStatement(env.DB, {
        installationId,
        idempotencyKey: `personal_data_request:${requestId}:reapplied`,
        action: "personal_data.erasure_reapplied",
        actor,
        target: { type: "personal_data_request", id: requestId },
        details: { erasedAt, keys: ids.length },
        at,
      }),
    ]);
    summary.keys += ids.length;
    forgetOpeningKeys(installationId, ids);
    for (;;) {
      const [reports, appeals] = await env.DB.batch<{ id: string }>([
        env.DB.prepare(`
          SELECT id FROM reports WHERE installation_id = ?1 AND reporter_key = ?2 AND created_at <= ?3 AND personal_data_erased_at IS NULL
          UNION SELECT id FROM reports WHERE installation_id = ?1 AND subject_owner_key = ?2 AND created_at <= ?3 AND personal_data_erased_at IS NULL LIMIT ?4`).bind(installationId, person, erasedAt, PAGE),
        env.DB.prepare(`SELECT id FROM appeals WHERE installation_id = ?1 AND appellant_key = ?2 AND created_at <= ?3 AND personal_data_erased_at IS NULL LIMIT ?4`).bind(installationId, person, erasedAt, PAGE),
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
          idempotencyKey: `personal_data_request:${requestId}:erased:${reportIds[0] ?? appealIds[0]}`,
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
  }
  forgetPersonSealingKeys(installationId);
  return summary;
}
