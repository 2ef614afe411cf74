// Mastodon's side of the reports a connector took in: resolved (or reopened) there — in
// Mastodon's own screens (the `report.updated` admin webhook), by the connector resolving the
// report, or by an account action, which in Mastodon resolves every open report about the
// account, not only the one it names. Ours follows: the report's record says so
// (connector_reports.resolved_at / resolved_by, audited as `connector.report_resolved` on the
// report). Ending the runs still waiting for a person's review is the intake's part
// (mastodon-intake.ts, on `report.updated`): this file is also the delivery transport's, which
// enforcement imports, so it cannot reach the workflows' run end without a cycle.
import { auditStatement } from "../audit";

export type ResolutionScope = { remoteReportId: string } | { accountId: string };
export type ResolvedBy = "report" | "account_action";

/** Marks the connector's open reports in scope resolved; returns our reports it resolved. */
export async function resolveConnectorReports(env: Env, connector: { id: string; installationId: string }, scope: ResolutionScope, by: ResolvedBy): Promise<string[]> {
  const at = new Date().toISOString();
  const byAccount = "accountId" in scope;
  const { results } = await env.DB.prepare(`
    UPDATE connector_reports SET resolved_at = ?4, resolved_by = ?5
    WHERE connector_id = ?1 AND installation_id = ?2 AND resolved_at IS NULL AND ${byAccount ? "target_account_id" : "remote_report_id"} = ?3
    RETURNING report_id AS reportId, remote_report_id AS remoteReportId`)
    .bind(connector.id, connector.installationId, byAccount ? scope.accountId : scope.remoteReportId, at, by)
    .all<{ reportId: string; remoteReportId: string }>();
  if (results.length === 0) return [];
  await env.DB.batch(
    results.map((row) =>
      auditStatement(env.DB, {
        installationId: connector.installationId,
        idempotencyKey: `connector:${connector.id}:report:${row.remoteReportId}:resolved:${at}`,
        action: "connector.report_resolved",
        actor: { type: "system", id: `connector:${connector.id}` },
        target: { type: "report", id: row.reportId },
        details: { connectorId: connector.id, remoteReportId: row.remoteReportId, resolvedBy: by },
        at,
      }),
    ),
  );
  return results.map((row) => row.reportId);
}

/** Mastodon reopened the report: ours is open again (runs already ended stay ended). */
export async function reopenConnectorReport(env: Env, connector: { id: string; installationId: string }, remoteReportId: string): Promise<number> {
  const at = new Date().toISOString();
  const { results } = await env.DB.prepare(`
    UPDATE connector_reports SET resolved_at = NULL, resolved_by = NULL
    WHERE connector_id = ?1 AND installation_id = ?2 AND remote_report_id = ?3 AND resolved_at IS NOT NULL
    RETURNING report_id AS reportId`)
    .bind(connector.id, connector.installationId, remoteReportId)
    .all<{ reportId: string }>();
  if (results.length === 0) return 0;
  await auditStatement(env.DB, {
    installationId: connector.installationId,
    idempotencyKey: `connector:${connector.id}:report:${remoteReportId}:reopened:${at}`,
    action: "connector.report_reopened",
    actor: { type: "system", id: `connector:${connector.id}` },
    target: { type: "report", id: results[0]!.reportId },
    details: { connectorId: connector.id, remoteReportId },
    at,
  }).run();
  return 1;
}
