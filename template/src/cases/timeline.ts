// A report's timeline: everything that happened because of it, oldest first, without personal data.
import { notFound } from "../errors";
import type { Actor } from "../http/auth";

export async function reportTimeline(env: Env, actor: Actor, reportId: string) {
  const report = await env.DB.prepare(`SELECT id, case_id AS caseId, category, created_at AS createdAt FROM reports WHERE installation_id = ?1 AND id = ?2`)
    .bind(actor.installationId, reportId).first<{ id: string; caseId: string; category: string; createdAt: string }>();
  if (!report) throw notFound("report");
  const { results } = await env.DB.prepare(`
    SELECT created_at AS at, 'run' AS kind, id, state, authority_mode || ' run of ' || workflow_version_id AS summary FROM workflow_runs WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'task', id, state, task_type || ' task in ' || COALESCE(queue_id, '-') FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT decided_at, 'decision', id, automated_decision, outcome || ' (' || policy_category || ')' FROM decisions WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'action', id, state, action_type_key FROM action_proposals WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'message', id, NULL, 'message to ' || recipient_kind FROM messages WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'appeal', id, state, 'appeal' FROM appeals WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'handoff', id, NULL, 'handoff to ' || target_kind FROM handoffs WHERE installation_id = ?1 AND report_id = ?2
    ORDER BY at LIMIT 500
  `).bind(actor.installationId, reportId).all<{ at: string; kind: string; id: string; state: string | null; summary: string }>();
  return {
    reportId, caseId: report.caseId,
    items: [{ at: report.createdAt, kind: "report", id: report.id, state: null, summary: `report (${report.category})` }, ...results],
  };
}
