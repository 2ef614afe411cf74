// A report's timeline: everything that happened because of it, oldest first, without personal data.
import { notFound } from "../errors";
import type { Actor } from "../auth";

export async function reportTimeline(env: Env, actor: Actor, reportId: string) {
  const report = await env.DB.prepare(`SELECT id, case_id AS caseId, category, created_at AS createdAt FROM reports WHERE installation_id = ?1 AND id = ?2`)
    .bind(actor.installationId, reportId)
    .first<{ id: string; caseId: string; category: string; createdAt: string }>();
  if (!report) throw notFound("report");
  const q1 = env.DB.prepare(`
    SELECT created_at AS at, 'run' AS kind, id, state, authority_mode || ' run of ' || workflow_version_id AS summary FROM workflow_runs WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'task', id, state, task_type || ' task in ' || COALESCE(queue_id, '-') FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT decided_at, 'decision', id, automated_decision, outcome || ' (' || policy_category || ')' || CASE WHEN restrictions_json = '{}' THEN ': decision not to act, no statement of reasons' ELSE '' END FROM decisions WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'action', id, state, action_type_key FROM action_proposals WHERE installation_id = ?1 AND report_id = ?2`).bind(actor.installationId, reportId);
  const q2 = env.DB.prepare(`
    SELECT created_at AS at, 'message' AS kind, id, NULL AS state, 'message to ' || recipient_kind AS summary FROM messages WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'appeal', id, state, 'appeal' FROM appeals WHERE installation_id = ?1 AND report_id = ?2
    UNION ALL SELECT created_at, 'handoff', id, NULL, 'handoff to ' || target_kind FROM handoffs WHERE installation_id = ?1 AND report_id = ?2`).bind(actor.installationId, reportId);
  const [a, b] = await env.DB.batch<{ at: string; kind: string; id: string; state: string | null; summary: string }>([q1, q2]);
  const results = [...a!.results, ...b!.results].sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : 0)).slice(0, 500);
  return {
    reportId,
    caseId: report.caseId,
    items: [{ at: report.createdAt, kind: "report", id: report.id, state: null, summary: `report (${report.category})` }, ...results],
  };
}
