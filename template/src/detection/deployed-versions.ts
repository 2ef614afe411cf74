// What the event path loads of rule sets: the versions an installation has deployed (in a mode
// other than `off`), compiled once per isolate and checked against their digest before they run,
// with the installation's sample rate; and one version as if deployed in shadow, for backtests.
import { AppError, notFound } from "../errors";
import { sha256HexSync } from "../lib/crypto";
import type { ExpressionSemantics, WorkflowAuthorityMode } from "../workflows";
import { getRuleSetVersionRow, type LoadedVersion, type StoredRules } from "./rule-sets";
import { DEPLOYED_TTL_MS, type Deployed, deployedCache } from "./deployed-cache";
import { compileRule } from "./rules-language";

// Compiled versions by id (immutable once published, so cached for the isolate's life).
const compiledVersions = new Map<string, { semantics: ExpressionSemantics; rules: LoadedVersion["rules"]; readsLabels: boolean }>();
/** A stored version compiled (cached by id); its rules must match its digest (`rule_set_version.digest_mismatch`). */
function compiledVersion(row: { versionId: string; rulesJson: string; rulesDigest: string }) {
  let compiled = compiledVersions.get(row.versionId);
  if (!compiled) {
    if (`sha256:${sha256HexSync(row.rulesJson)}` !== row.rulesDigest)
      throw new AppError("rule_set_version.digest_mismatch", "A rule set version does not match its digest and was refused; publish and deploy another version.", { status: 409 });
    const stored = JSON.parse(row.rulesJson) as StoredRules;
    const rules = stored.rules.map((rule) => ({ ...rule, ...compileRule(rule.when, stored.expressionSemantics) }));
    compiled = { semantics: stored.expressionSemantics, rules, readsLabels: rules.some((rule) => /\blabels\b/u.test(rule.when)) };
    if (compiledVersions.size > 500) compiledVersions.clear();
    compiledVersions.set(row.versionId, compiled);
  }
  return compiled;
}

/** A version of the installation, compiled, as if deployed in `shadow` (what a backtest runs). */
export async function loadVersionInShadow(env: Env, installationId: string, versionId: string): Promise<LoadedVersion> {
  const row = await getRuleSetVersionRow(env.DB, installationId, versionId);
  if (!row) throw notFound("rule_set_version");
  return { ruleSetId: row.ruleSetId, versionId: row.id, authorityMode: "shadow", ...compiledVersion({ versionId: row.id, rulesJson: row.rulesJson, rulesDigest: row.rulesDigest }) };
}

/**
 * The rule set versions deployed in a mode other than `off`, compiled, and the installation's
 * event sample rate (one D1 round trip, then cached for a moment). A stored version whose rules no
 * longer match its digest is refused (`rule_set_version.digest_mismatch`), never run.
 */
export async function loadDeployed(env: Env, installationId: string): Promise<Deployed> {
  const cached = deployedCache.get(installationId);
  if (cached && cached.until > Date.now()) return cached.deployed;
  const [rows, settings] = await env.DB.batch([
    env.DB.prepare(`
      SELECT s.id AS ruleSetId, s.authority_mode AS authorityMode, v.id AS versionId, v.rules_json AS rulesJson, v.rules_digest AS rulesDigest
      FROM rule_sets s JOIN rule_set_versions v ON v.installation_id = s.installation_id AND v.id = s.deployed_version_id
      WHERE s.installation_id = ?1 AND s.authority_mode != 'off' ORDER BY s.created_at`).bind(installationId),
    env.DB.prepare(`SELECT sample_rate AS sampleRate FROM event_settings WHERE installation_id = ?1`).bind(installationId),
  ]);
  const versions = (rows!.results as Array<{ ruleSetId: string; authorityMode: WorkflowAuthorityMode; versionId: string; rulesJson: string; rulesDigest: string }>).map((row) => {
    return { ruleSetId: row.ruleSetId, versionId: row.versionId, authorityMode: row.authorityMode, ...compiledVersion(row) };
  });
  const deployed = { versions, sampleRate: (settings!.results[0] as { sampleRate?: number } | undefined)?.sampleRate ?? 0 };
  if (deployedCache.size > 1_000) deployedCache.clear();
  deployedCache.set(installationId, { until: Date.now() + DEPLOYED_TTL_MS, deployed });
  return deployed;
}
