// What the transparency report counts of account sanctions (metrics/transparency.ts reads it).

/**
 * Suspensions imposed under DSA Art. 23(1) in the period (?1 installation, ?2 from, ?3 to): a
 * suspension for manifestly illegal content that went ahead (its action started), whatever a later
 * appeal did; account_sanctions_art23 serves it. `refused` counts those refused for want of a
 * prior warning.
 */
export const ART23_SUSPENSIONS_SQL = `
  SELECT COALESCE(SUM(CASE WHEN state IN ('started', 'reversed') AND run_id IS NOT NULL THEN 1 ELSE 0 END), 0) AS suspensions,
    COALESCE(SUM(CASE WHEN state = 'refused' THEN 1 ELSE 0 END), 0) AS refused
  FROM account_sanctions WHERE installation_id = ?1 AND art23 = 1 AND created_at >= ?2 AND created_at < ?3`;
