// Retention and erasure, the workflows side: the sealed step outputs (content a node
// read) of the runs of given reports and appeals, in either form a step keeps its output in
// (step-output.ts). The open view stays: it is what the runs API shows and carries no content.
// Called by cases/retention/retention-erase.ts.
import { STEP_OUTPUT as OUTPUT } from "./step-output";

/** The runs of these reports or appeals, and their step outputs that still hold a sealed copy. */
export async function sealedOutputsOfUnsafe(db: D1Database, installationId: string, input: { reportIds: string[]; appealIds: string[] }): Promise<{ runIds: string[]; stepRunIds: string[] }> {
  const { results } = await db
    .prepare(`
    WITH runs AS (
      SELECT w.id FROM json_each(?2) j CROSS JOIN workflow_runs w ON w.report_id = j.value WHERE w.installation_id = ?1
      UNION SELECT w.id FROM json_each(?3) j CROSS JOIN workflow_runs w ON w.appeal_id = j.value WHERE w.installation_id = ?1
    )
    SELECT runs.id AS runId, CASE WHEN ${OUTPUT.storesSealed} THEN s.id END AS stepRunId FROM runs
      LEFT JOIN workflow_step_runs s ON s.run_id = runs.id
      ${OUTPUT.join}`)
    .bind(installationId, JSON.stringify(input.reportIds), JSON.stringify(input.appealIds))
    .all<{ runId: string; stepRunId: string | null }>();
  return { runIds: [...new Set(results.map((r) => r.runId))], stepRunIds: results.flatMap((r) => (r.stepRunId ? [r.stepRunId] : [])) };
}

const OWNED_STEPS = `SELECT s.id FROM json_each(?2) j CROSS JOIN workflow_step_runs s ON s.id = j.value CROSS JOIN workflow_runs w ON w.id = s.run_id WHERE w.installation_id = ?1`;

/**
 * Drops the sealed copies of these step outputs, in both forms (idempotent: a dropped one stays
 * NULL). Two statements for one batch: the step rows' own outputs, and the outputs rows of steps
 * written before migration 0070.
 */
export function eraseSealedOutputsStatements(db: D1Database, installationId: string, stepRunIds: string[]): D1PreparedStatement[] {
  const ids = JSON.stringify(stepRunIds);
  return [
    db.prepare(`UPDATE workflow_step_runs SET output_sealed = NULL WHERE output_sealed IS NOT NULL AND id IN (${OWNED_STEPS})`).bind(installationId, ids),
    db.prepare(`UPDATE workflow_step_outputs SET sealed_json = NULL WHERE sealed_json IS NOT NULL AND step_run_id IN (${OWNED_STEPS})`).bind(installationId, ids),
  ];
}

/**
 * For runs already archived (run-archive.ts): their sealed outputs sit in an immutable R2 object,
 * so erasure marks the run and the archive's readers serve those outputs as dropped from then on.
 * What the object keeps is ciphertext under the installation's data key.
 */
export function eraseArchivedSealedOutputsStatement(db: D1Database, installationId: string, runIds: string[], at: string): D1PreparedStatement {
  return db
    .prepare(`
    UPDATE workflow_runs SET archive_sealed_erased_at = ?3
    WHERE installation_id = ?1 AND archived_at IS NOT NULL AND archive_sealed_erased_at IS NULL AND id IN (SELECT value FROM json_each(?2))`)
    .bind(installationId, JSON.stringify(runIds), at);
}
