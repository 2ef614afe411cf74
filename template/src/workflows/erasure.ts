// Retention and erasure, the workflows side: the sealed step outputs (content a node
// read) of the runs of given reports and appeals. The open view (inline_json) stays: it is what
// the runs API shows and carries no content. Called by cases/retention/retention-erase.ts.

/** The runs of these reports or appeals, and their step outputs that still hold a sealed copy. */
export async function sealedOutputsOfUnsafe(db: D1Database, installationId: string, input: { reportIds: string[]; appealIds: string[] }): Promise<{ runIds: string[]; stepRunIds: string[] }> {
  const { results } = await db
    .prepare(`
    WITH runs AS (
      SELECT w.id FROM json_each(?2) j CROSS JOIN workflow_runs w ON w.report_id = j.value WHERE w.installation_id = ?1
      UNION SELECT w.id FROM json_each(?3) j CROSS JOIN workflow_runs w ON w.appeal_id = j.value WHERE w.installation_id = ?1
    )
    SELECT runs.id AS runId, o.step_run_id AS stepRunId FROM runs
      LEFT JOIN workflow_step_runs s ON s.run_id = runs.id
      LEFT JOIN workflow_step_outputs o ON o.step_run_id = s.id AND o.sealed_json IS NOT NULL`)
    .bind(installationId, JSON.stringify(input.reportIds), JSON.stringify(input.appealIds))
    .all<{ runId: string; stepRunId: string | null }>();
  return { runIds: [...new Set(results.map((r) => r.runId))], stepRunIds: results.flatMap((r) => (r.stepRunId ? [r.stepRunId] : [])) };
}

/** Drops the sealed copies of these step outputs (idempotent: a dropped one stays NULL). */
export function eraseSealedOutputsStatement(db: D1Database, installationId: string, stepRunIds: string[]): D1PreparedStatement {
  return db
    .prepare(`
    UPDATE workflow_step_outputs SET sealed_json = NULL
    WHERE sealed_json IS NOT NULL AND step_run_id IN (
      SELECT s.id FROM json_each(?2) j CROSS JOIN workflow_step_runs s ON s.id = j.value CROSS JOIN workflow_runs w ON w.id = s.run_id WHERE w.installation_id = ?1)`)
    .bind(installationId, JSON.stringify(stepRunIds));
}
