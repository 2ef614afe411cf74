// Bench-only (bench/worker.ts): POST /bench/tdb-seed writes restricting decisions with their
// pending submission rows straight into D1 (as decisions.ts does in the decision's batch), for the
// Transparency Database submission section (bench/sections/tdb.mjs, whose peer runs in node).
/** `count` restricting decisions (ids dec_bench_<from + i>) of an installation, each with its pending submission. */
export async function seedTdbDecisions(env: Env, input: { installationId?: unknown; from?: unknown; count?: unknown }): Promise<Response> {
  const installationId = String(input.installationId ?? "");
  const from = Number(input.from ?? 0);
  const count = Math.min(Number(input.count ?? 0), 10_000);
  const at = new Date().toISOString();
  const [decisions, submissions] = await env.DB.batch([
    env.DB.prepare(`
      WITH RECURSIVE n(i) AS (SELECT ?2 UNION ALL SELECT i + 1 FROM n WHERE i < ?2 + ?3 - 1)
      INSERT INTO decisions (id, installation_id, policy_category, category_specification_json, outcome, ground, explanation, restrictions_json, content_type_json,
        statement_text, source_type, automated_detection, automated_decision, content_date, decided_at, created_at)
      SELECT 'dec_bench_' || CAST(i AS INTEGER), ?1, 'scams_and_fraud', '["KEYWORD_PHISHING"]', 'removed_scam', 'incompatible_content',
        'The post advertised a fraudulent investment scheme, contrary to our terms on scams (' || CAST(i AS INTEGER) || ').', '{"visibility":["content_removed"]}', '["text"]',
        'The post advertised a fraudulent investment scheme, contrary to our terms on scams (' || CAST(i AS INTEGER) || ').', 'notice', 0, 'fully', substr(?4, 1, 10), ?4, ?4 FROM n`).bind(installationId, from, count, at),
    env.DB.prepare(`INSERT INTO tdb_submissions (decision_id, installation_id, puid, state, queued_at, updated_at)
      SELECT id, installation_id, id, 'pending', ?2, ?2 FROM decisions WHERE installation_id = ?1 AND id LIKE 'dec_bench_%' ON CONFLICT(decision_id) DO NOTHING`).bind(installationId, at),
  ]);
  return Response.json({ decisions: decisions?.meta.changes ?? 0, submissions: submissions?.meta.changes ?? 0 });
}
