// Erasure of the personal data behind given reports, shared by the retention sweep
// and erasure on request: every sealed blob goes, the summaries stay. What goes:
//   reports.personal_data      → sealed tombstone (all fields null), personal_data_erased_at set,
//                                 the person index keys cleared (the column is NOT NULL, so it is
//                                 resealed rather than emptied: every reader keeps working)
//   appeals.personal_data      → the same, for the reports' appeals
//   human_tasks.context_sealed → sealed null, context_digest 'erased' (tasks of the reports and
//                                 appeals, golden copies, and QA copies of those tasks)
//   step outputs' sealed part     → NULL (runs of the reports and appeals; workflow_step_runs.output_sealed,
//                                 or workflow_step_outputs.sealed_json for steps written before migration 0070)
//   webhook_deliveries.payload_sealed → sealed tombstone (finished deliveries of those runs; a
//                                 payload moved to its delivery's R2 object is replaced there)
// What stays: category, subject kind and id, source, counts, dates, decisions, task responses and
// outcomes, appeal outcomes, the audit trail (never modified). One audit event per batch, counts only.
import { eraseReportTermsStatement } from "../search/search-terms";
import { termKeysOfReports } from "../search/terms-listing";
import { auditStatement, type AuditEventInput } from "../../audit";
import { erasableDeliveriesUnsafe, eraseDeliveriesMovedMeanwhile, eraseDeliveriesStatements } from "../../enforcement";
import { eraseArchivedSealedOutputsStatement, eraseSealedOutputsStatements, sealedOutputsOfUnsafe } from "../../workflows";
import { sealPersonalData } from "../reports/report-crypto";
import { ERASED_REPORT } from "../reports/reports-queries";

export { ERASED_REPORT };
/** What an erased appeal's personal data opens to. */
export const ERASED_APPEAL = { appellant: null, reason: null } as const;
const ERASED_DIGEST = "erased";

export interface ErasureCounts {
  reports: number;
  appeals: number;
  tasks: number;
  stepOutputs: number;
  deliveries: number;
}

export const NO_ERASURE: ErasureCounts = { reports: 0, appeals: 0, tasks: 0, stepOutputs: 0, deliveries: 0 };

/** Everything erasable behind these reports (and the extra appeals named, e.g. a person's own), not erased yet. */
async function erasable(db: D1Database, installationId: string, reportIds: string[], extraAppealIds: string[]) {
  const [reports, appeals] = await db.batch<{ id: string }>([
    // CROSS JOINs from the id lists, so each lookup uses its index rather than the installation's rows.
    db.prepare(`SELECT r.id FROM json_each(?2) j CROSS JOIN reports r ON r.id = j.value WHERE r.installation_id = ?1 AND r.personal_data_erased_at IS NULL`).bind(installationId, JSON.stringify(reportIds)),
    db
      .prepare(`
      SELECT a.id FROM json_each(?2) j CROSS JOIN appeals a ON a.installation_id = ?1 AND a.report_id = j.value WHERE a.personal_data_erased_at IS NULL
      UNION SELECT a.id FROM json_each(?3) j CROSS JOIN appeals a ON a.id = j.value WHERE a.installation_id = ?1 AND a.personal_data_erased_at IS NULL`)
      .bind(installationId, JSON.stringify(reportIds), JSON.stringify(extraAppealIds)),
  ]);
  const appealIds = appeals!.results.map((r) => r.id);
  const { results: tasks } = await db
    .prepare(`
    WITH own AS (
      -- Tasks of the reports by human_tasks_report (the unary + keeps the planner off a walk of all tasks of the installation).
      SELECT id FROM human_tasks WHERE +installation_id = ?1 AND report_id IN (SELECT value FROM json_each(?2))
      UNION SELECT id FROM human_tasks WHERE installation_id = ?1 AND appeal_id IN (SELECT value FROM json_each(?3))
    )
    , ids AS (SELECT id FROM own UNION SELECT q.qa_task_id FROM qa_reviews q WHERE q.original_task_id IN (SELECT id FROM own))
    SELECT t.id FROM ids CROSS JOIN human_tasks t ON t.id = ids.id WHERE t.installation_id = ?1 AND t.context_digest <> '${ERASED_DIGEST}'`)
    .bind(installationId, JSON.stringify(reportIds), JSON.stringify(appealIds))
    .all<{ id: string }>();
  const outputs = await sealedOutputsOfUnsafe(db, installationId, { reportIds, appealIds });
  const deliveryIds = await erasableDeliveriesUnsafe(db, installationId, outputs.runIds, reportIds);
  return { reportIds: reports!.results.map((r) => r.id), appealIds, taskIds: tasks.map((t) => t.id), runIds: outputs.runIds, stepRunIds: outputs.stepRunIds, deliveryIds };
}

/**
 * Erases the personal data behind `reportIds` (and `appealIds`) in one D1 batch with `audit`
 * (whose details get the counts). Idempotent: what is already erased is not counted or written
 * again; with nothing left to erase, nothing is written and no event recorded. The caller decides
 * that the reports' cases are closed.
 */
export async function eraseReports(env: Env, installationId: string, input: { reportIds: string[]; appealIds?: string[]; at: string; audit: (counts: ErasureCounts) => AuditEventInput }): Promise<ErasureCounts> {
  const found = await erasable(env.DB, installationId, input.reportIds, input.appealIds ?? []);
  const counts: ErasureCounts = { reports: found.reportIds.length, appeals: found.appealIds.length, tasks: found.taskIds.length, stepOutputs: found.stepRunIds.length, deliveries: found.deliveryIds.length };
  if (Object.values(counts).every((n) => n === 0)) return counts;
  const db = env.DB;
  const statements: D1PreparedStatement[] = [];
  // The reports' term rows, by their whole keys read from the reports' lists (the updates below clear the lists).
  const termKeys = await termKeysOfReports(env, installationId, found.reportIds);
  if (termKeys.length > 0) statements.push(eraseReportTermsStatement(db, installationId, termKeys));
  for (const id of found.reportIds) {
    const { sealed, dataKeyId } = await sealPersonalData(env, installationId, `report:${id}`, ERASED_REPORT);
    statements.push(
      db
        .prepare(`UPDATE reports SET personal_data = ?3, data_key_id = ?4, personal_data_erased_at = ?5, reporter_key = NULL, subject_owner_key = NULL, search_terms = NULL, person_keys_version = COALESCE(person_keys_version, 0)
          WHERE installation_id = ?1 AND id = ?2 AND personal_data_erased_at IS NULL`)
        .bind(installationId, id, sealed, dataKeyId, input.at),
    );
  }
  for (const id of found.appealIds) {
    const { sealed, dataKeyId } = await sealPersonalData(env, installationId, `appeal:${id}`, ERASED_APPEAL);
    statements.push(
      db
        .prepare(`UPDATE appeals SET personal_data = ?3, data_key_id = ?4, personal_data_erased_at = ?5, appellant_key = NULL, person_keys_version = COALESCE(person_keys_version, 0)
          WHERE installation_id = ?1 AND id = ?2 AND personal_data_erased_at IS NULL`)
        .bind(installationId, id, sealed, dataKeyId, input.at),
    );
  }
  for (const id of found.taskIds) {
    const { sealed } = await sealPersonalData(env, installationId, `task:${id}`, null);
    statements.push(
      db.prepare(`UPDATE human_tasks SET context_sealed = ?3, context_json = '{}', context_digest = '${ERASED_DIGEST}' WHERE installation_id = ?1 AND id = ?2 AND context_digest <> '${ERASED_DIGEST}'`).bind(installationId, id, sealed),
    );
  }
  if (found.stepRunIds.length > 0) statements.push(...eraseSealedOutputsStatements(db, installationId, found.stepRunIds));
  // Runs already archived (their outputs are in R2, immutable): their sealed copies are no longer served.
  if (found.runIds.length > 0) statements.push(eraseArchivedSealedOutputsStatement(db, installationId, found.runIds, input.at));
  statements.push(...(await eraseDeliveriesStatements(env, installationId, found.deliveryIds)));
  // A case whose reports are all erased now leaves the sweep's range (intake clears the mark).
  statements.push(
    db
      .prepare(`UPDATE cases SET personal_data_erased_at = ?3 WHERE +installation_id = ?1 AND personal_data_erased_at IS NULL
        AND id IN (SELECT r.case_id FROM json_each(?2) j CROSS JOIN reports r ON r.id = j.value WHERE r.installation_id = ?1)
        AND NOT EXISTS (SELECT 1 FROM reports r WHERE +r.installation_id = ?1 AND r.case_id = cases.id AND r.personal_data_erased_at IS NULL)`)
      .bind(installationId, JSON.stringify(found.reportIds), input.at),
  );
  statements.push(auditStatement(db, input.audit(counts)));
  await db.batch(statements);
  // A delivery whose payload moved to R2 while this erasure was being prepared: erased there now.
  await eraseDeliveriesMovedMeanwhile(env, installationId, found.deliveryIds);
  return counts;
}
