// Strikes: the statement that gives a restricting decision its strike (in the decision's own batch)
// and the one that reverses it when an appeal overturns the decision (in the appeal's batch). Both
// are plain SQL over rows their batch writes, so enforcement and cases call them without reading
// anything first; the account's ladder is settled after the batch (ladder.ts, or the sweep).
import { newId } from "../lib/crypto";

/** The JSON path of a category's entry in the stored policy (categories are DSA names: [a-z_]). */
const CATEGORY = `'$.categories."' || d.policy_category || '"'`;

/**
 * For a decision's batch: its strike, when the decision restricts, its report's subject has an
 * owner (the account), and the installation's policy gives its category points. Written with the
 * points and expiry the policy says now; manifestly illegal (DSA Art. 23(1)) when the decision's
 * ground is illegal content and the category does not say otherwise. Idempotent per decision. The
 * decision a sanction's carrier records (a suspension's) gives none: it is the strikes' consequence.
 */
export function strikeAccrualStatement(db: D1Database, input: { installationId: string; decisionId: string; at: string }): D1PreparedStatement {
  return db
    .prepare(`INSERT OR IGNORE INTO strikes (id, installation_id, account_key, decision_id, category, points, manifestly_illegal, created_at, expires_at)
      SELECT ?1, d.installation_id, r.subject_owner_key, d.id, d.policy_category,
        CAST(json_extract(p.policy_json, ${CATEGORY} || '.points') AS INTEGER),
        CASE WHEN d.ground = 'illegal_content' AND COALESCE(json_extract(p.policy_json, ${CATEGORY} || '.manifestlyIllegal'), 1) = 1 THEN 1 ELSE 0 END,
        ?3, strftime('%Y-%m-%dT%H:%M:%fZ', ?3, '+' || CAST(json_extract(p.policy_json, '$.expiryDays') AS INTEGER) || ' days')
      FROM decisions d
        JOIN reports r ON r.id = d.report_id AND r.installation_id = d.installation_id
        JOIN strike_policies p ON p.installation_id = d.installation_id
      WHERE d.installation_id = ?2 AND d.id = ?4 AND r.subject_owner_key IS NOT NULL
        AND CAST(json_extract(p.policy_json, ${CATEGORY} || '.points') AS INTEGER) > 0
        -- A sanction's own decision (its carrier run's, started as account_sanction:<id>) is the consequence of strikes, not one.
        AND (d.run_id IS NULL OR NOT EXISTS (SELECT 1 FROM workflow_runs w WHERE w.id = d.run_id AND w.idempotency_key LIKE 'account_sanction:%'))`)
    .bind(newId("stk"), input.installationId, input.at, input.decisionId);
}

/**
 * For the batch that decides an appeal: the contested decision's strike is reversed when the
 * appeal is overturned by then in the batch, and its account is due to be settled again.
 */
export function strikeReversalStatement(db: D1Database, input: { installationId: string; appealId: string; at: string }): D1PreparedStatement {
  return db
    .prepare(`UPDATE strikes SET reversed_at = ?3, settled_at = NULL
      WHERE installation_id = ?1 AND reversed_at IS NULL
        AND decision_id = (SELECT decision_id FROM appeals WHERE installation_id = ?1 AND id = ?2 AND state = 'overturned')`)
    .bind(input.installationId, input.appealId, input.at);
}

/**
 * For a person's erasure: their account's strikes and sanctions stay (counts, the transparency
 * report, runs under way) but stop naming them: their key is replaced by one of the erasure's own
 * (`erased:<request>`), which no id hashes to, so the account no longer answers.
 */
export function unlinkAccountStatements(db: D1Database, installationId: string, accountKey: string, erasureId: string): D1PreparedStatement[] {
  return ["strikes", "account_sanctions"].map((table) => db.prepare(`UPDATE ${table} SET account_key = ?3 WHERE installation_id = ?1 AND account_key = ?2`).bind(installationId, accountKey, `erased:${erasureId}`));
}

/** For a person's export: their account's strikes and sanctions. */
export async function accountRecordsOf(db: D1Database, installationId: string, accountKey: string) {
  const [strikes, sanctions] = await db.batch<Record<string, unknown>>([
    db
      .prepare(`SELECT id, decision_id AS decisionId, category, points, manifestly_illegal AS manifestlyIllegal, created_at AS createdAt, expires_at AS expiresAt, reversed_at AS reversedAt
        FROM strikes WHERE installation_id = ?1 AND account_key = ?2 ORDER BY created_at LIMIT 1000`)
      .bind(installationId, accountKey),
    db
      .prepare(`SELECT id, source, kind, action_type_key AS actionType, threshold, art23, state, decision_id AS decisionId, report_id AS reportId, created_at AS createdAt
        FROM account_sanctions WHERE installation_id = ?1 AND account_key = ?2 ORDER BY created_at LIMIT 1000`)
      .bind(installationId, accountKey),
  ]);
  return {
    strikes: strikes!.results.map((s) => ({ ...s, manifestlyIllegal: s.manifestlyIllegal === 1 })),
    sanctions: sanctions!.results.map((s) => ({ ...s, art23: s.art23 === 1 })),
  };
}
