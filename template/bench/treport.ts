// Bench routes of section "treport" (bench/sections/treport.mjs): a year of an installation's
// reports, one decision each and a complaint on one decision in twenty, seeded in bulk SQL from a
// template report (never replayed through the API); and EXPLAIN QUERY PLAN of every statement the
// transparency report runs (the very statements, imported).
import { TRANSPARENCY_QUERIES } from "../src/metrics";

const MAX_CHUNK = 50_000;
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** The restrictions of seeded decision i (i % 6; 2 is a decision not to act), for the section to count by construction. */
export const SEEDED_RESTRICTIONS = ['{"visibility":["content_removed"]}', '{"account":"suspended"}', "{}", '{"monetary":"suspension"}', '{"provision":"partial_suspension"}', '{"visibility":["content_demoted","content_labelled"]}'];

const restrictionCase = `CASE i % 6 ${SEEDED_RESTRICTIONS.map((text, k) => `WHEN ${k} THEN '${text}'`).join(" ")} END`;

/**
 * POST /bench/treport-seed {templateId, from, count, baseMs, spacingMs}: reports i = from … from+count-1
 * at baseMs + i·spacingMs (source by i % 5: voluntary, trusted_flagger, notice, notice, other_notification;
 * category by i % 4), each decided (i % 3600) s later (restrictions by i % 6, ground illegal when
 * i % 7 = 0, automation by i % 3: fully, partially, not), and for i % 20 = 0 a complaint a day later,
 * open (i % 60 = 0), upheld (20) or overturned (40) a day after that.
 */
export async function seedTransparency(env: Env, body: { templateId?: unknown; from?: unknown; count?: unknown; baseMs?: unknown; spacingMs?: unknown }): Promise<Response> {
  const from = Number(body.from);
  const count = Number(body.count);
  const baseMs = Number(body.baseMs);
  const spacingMs = Number(body.spacingMs);
  if (typeof body.templateId !== "string" || !Number.isInteger(from) || from < 0 || !Number.isInteger(count) || count < 1 || count > MAX_CHUNK || !Number.isFinite(baseMs) || !Number.isFinite(spacingMs)) {
    return json({ error: { code: "bench.treport_seed_invalid" } }, 400);
  }
  const range = `WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)`;
  const at = (ms: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', (${ms}) / 1000.0, 'unixepoch')`;
  const started = performance.now();
  const [reports, decisions, appeals] = await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO reports (id, installation_id, case_id, subject_kind, subject_id, category, category_specification_json, source, evidence_count,
        personal_data, data_key_id, idempotency_key, request_digest, created_at)
      ${range}
      SELECT printf('rep_treport_%06d', i), t.installation_id, t.case_id, t.subject_kind, 'treport-' || i,
        CASE i % 4 WHEN 0 THEN 'violence' WHEN 1 THEN 'scams_and_fraud' WHEN 2 THEN 'illegal_or_harmful_speech' ELSE 'protection_of_minors' END,
        '[]', CASE i % 5 WHEN 0 THEN 'voluntary' WHEN 1 THEN 'trusted_flagger' WHEN 4 THEN 'other_notification' ELSE 'notice' END,
        0, t.personal_data, t.data_key_id, NULL, t.request_digest, ${at("?4 + i * ?5")}
      FROM n, reports t WHERE t.id = ?3`).bind(from, from + count - 1, body.templateId, baseMs, spacingMs),
    env.DB.prepare(`
      INSERT INTO decisions (id, installation_id, run_id, step_run_id, report_id, case_id, subject_kind, subject_id, policy_category, category_specification_json,
        outcome, ground, legal_ground, explanation, restrictions_json, content_type_json, territorial_scope_json, statement_text, source_type,
        automated_detection, automated_decision, content_date, decided_at, created_at)
      ${range}, d(i, at) AS (SELECT i, ${at("?4 + i * ?5 + (i % 3600) * 1000")} FROM n)
      SELECT printf('dec_treport_%06d', d.i), r.installation_id, NULL, NULL, r.id, r.case_id, r.subject_kind, r.subject_id, r.category, '[]',
        CASE d.i % 6 WHEN 2 THEN 'no_action' ELSE 'restricted' END,
        CASE WHEN d.i % 7 = 0 THEN 'illegal_content' ELSE 'incompatible_content' END, CASE WHEN d.i % 7 = 0 THEN 'Bench law s. 1' END,
        'Bench explanation.', ${restrictionCase.replaceAll("i % 6", "d.i % 6")}, '["text"]', NULL, 'Bench statement.', r.source,
        CASE r.source WHEN 'voluntary' THEN 1 ELSE 0 END, CASE d.i % 3 WHEN 0 THEN 'fully' WHEN 1 THEN 'partially' ELSE 'not_automated' END,
        substr(r.created_at, 1, 10), d.at, d.at
      FROM d JOIN reports r ON r.id = printf('rep_treport_%06d', d.i) WHERE ?3 IS NOT NULL`).bind(from, from + count - 1, body.templateId, baseMs, spacingMs),
    env.DB.prepare(`
      INSERT INTO appeals (id, installation_id, report_id, decision_id, case_id, appellant_role, state, personal_data, data_key_id, outcome_reason, decided_by,
        decided_at, idempotency_key, request_digest, created_at, updated_at)
      ${range}
      SELECT printf('apl_treport_%06d', i), t.installation_id, printf('rep_treport_%06d', i), printf('dec_treport_%06d', i), t.case_id, 'affected',
        CASE i % 60 WHEN 0 THEN 'open' WHEN 20 THEN 'upheld' ELSE 'overturned' END, t.personal_data, t.data_key_id, NULL,
        CASE WHEN i % 60 <> 0 THEN 'bench' END, CASE WHEN i % 60 <> 0 THEN ${at("?4 + i * ?5 + 172800000")} END, NULL, t.request_digest,
        ${at("?4 + i * ?5 + 86400000")}, ${at("?4 + i * ?5 + 86400000")}
      FROM n, reports t WHERE t.id = ?3 AND i % 20 = 0`).bind(from, from + count - 1, body.templateId, baseMs, spacingMs),
  ]);
  return json({ reports: reports!.meta.changes, decisions: decisions!.meta.changes, appeals: appeals!.meta.changes, seedMs: Math.round(performance.now() - started) });
}

/** POST /bench/treport-plans {installationId, from, to}: the plan of each statement of the report, the indexes it must use, and its time alone (ms). */
export async function transparencyPlans(env: Env, body: { installationId?: unknown; from?: unknown; to?: unknown }): Promise<Response> {
  if (typeof body.installationId !== "string" || typeof body.from !== "string" || typeof body.to !== "string") return json({ error: { code: "bench.treport_plans_invalid" } }, 400);
  const plans: Record<string, { indexes: string[]; plan: Array<{ id: number; parent: number; detail: string }>; ms: number }> = {};
  for (const [name, { sql, indexes }] of Object.entries(TRANSPARENCY_QUERIES)) {
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(body.installationId, body.from, body.to).all<{ id: number; parent: number; detail: string }>();
    // And the statement itself, alone, timed (D1's own duration: the query, not the round trip).
    const run = await env.DB.prepare(sql).bind(body.installationId, body.from, body.to).all();
    plans[name] = { indexes, plan: results.map((row) => ({ id: row.id, parent: row.parent, detail: row.detail })), ms: Math.round(run.meta.duration * 10) / 10 };
  }
  return json({ plans });
}
