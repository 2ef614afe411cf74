// A report's timeline: everything that happened because of it, oldest first, without personal data.
// (Golden copies of its tasks are left out: they measure reviewers and did not happen to the report.)
import { notFound } from "../../errors";
import type { Actor } from "../../auth";
import { hotOrArchived } from "../archive/case-rehydrate";

export async function reportTimeline(env: Env, actor: Actor, reportId: string) {
  const report = await hotOrArchived(env, actor.installationId, "report", reportId, () =>
    env.DB.prepare(`SELECT id, case_id AS caseId, category, created_at AS createdAt FROM reports WHERE installation_id = ?1 AND id = ?2`)
      .bind(actor.installationId, reportId)
      .first<{ id: string; caseId: string; category: string; createdAt: string }>(),
  );
  if (!report) throw notFound("report");
  const q1 = env.DB.prepare(`
    SELECT r.created_at AS at, 'run' AS kind, r.id, r.state, r.authority_mode || ' run of ' || COALESCE(w.name || ' v' || v.version, r.workflow_version_id) AS summary
      FROM workflow_runs r LEFT JOIN workflow_versions v ON v.id = r.workflow_version_id AND v.installation_id = r.installation_id LEFT JOIN workflows w ON w.id = v.workflow_id AND w.installation_id = r.installation_id
      WHERE r.installation_id = ?1 AND r.report_id = ?2
    UNION ALL SELECT t.created_at, 'task', t.id, t.state, t.task_type || ' task in ' || COALESCE(q.name, t.queue_id, '-')
      FROM human_tasks t LEFT JOIN queues q ON q.id = t.queue_id AND q.installation_id = t.installation_id WHERE t.installation_id = ?1 AND t.report_id = ?2 AND t.origin <> 'golden'
    UNION ALL SELECT decided_at, 'decision', id, automated_decision, outcome || ' (' || policy_category || ')' || CASE WHEN restrictions_json = '{}' THEN ': decision not to act, no statement of reasons' ELSE '' END FROM decisions WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'action', id, state, action_type_key FROM action_proposals WHERE installation_id = ?1 AND report_id = ?2`).bind(actor.installationId, reportId);
  const q2 = env.DB.prepare(`
    SELECT m.created_at AS at, 'message' AS kind, m.id, COALESCE(d.state, 'not_sent') AS state,
        'message to ' || m.recipient_kind || CASE WHEN m.kind = 'workflow' THEN '' ELSE ' (' || replace(m.kind, '_', ' ') || ')' END AS summary
      FROM messages m LEFT JOIN webhook_deliveries d ON d.id = m.delivery_id AND d.installation_id = m.installation_id WHERE m.installation_id = ?1 AND m.report_id = ?2
    UNION ALL SELECT created_at, 'appeal', id, state, 'appeal' FROM appeals WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT h.created_at, 'handoff', h.id, NULL, 'handoff to ' || CASE WHEN h.target_kind = 'queue' THEN COALESCE(q.name, h.queue_id, 'queue') ELSE h.target_kind END
      FROM handoffs h LEFT JOIN queues q ON q.id = h.queue_id AND q.installation_id = h.installation_id WHERE h.installation_id = ?1 AND h.report_id = ?2`).bind(actor.installationId, reportId);
  const [a, b] = await env.DB.batch<{ at: string; kind: string; id: string; state: string | null; summary: string }>([q1, q2]);
  const results = [...a!.results, ...b!.results].sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : 0)).slice(0, 500);
  return {
    reportId,
    caseId: report.caseId,
    items: [{ at: report.createdAt, kind: "report", id: report.id, state: null, summary: `report (${report.category})` }, ...results],
  };
}
