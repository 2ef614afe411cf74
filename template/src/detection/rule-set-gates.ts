// A rule set's promotion gate and its shadow agreement. A version's rules record, in shadow (and
// in assisted, for labels), what they would have done; once a person labels or negates the same
// value on the same entity after the rule's first hit on it, that is a comparison: a label is an
// agreement, a negation a disagreement. (What a person decides is the entity's person label as it
// stands: a later decision replaces an earlier one.) A report outcome's shadow hit is compared with
// the latest decision about its subject made after the rule's first hit on it: a decision that
// restricts is an agreement, a decision not to act (no_action, no restriction) a disagreement.
// Decisions name their subject in the clear and hits by key, so the latest MAX_DECISIONS_READ
// decisions since the version's first such hit are read and keyed here. Run outcomes are not
// compared: their hits count, their agreement does not.
//
// Deploying a version in `autonomous` passes the gate over that version's comparisons, through the
// requirements triggers use (enforcement's agreementRequirements, Wilson's interval): at least
// minComparedHits comparisons and agreement's lower bound ≥ minAgreementLow. Refused with 409
// promotion.gate_not_met and the figures; met, the evidence and its digest go into the deployment's
// audit event. A gate of 0 and 0 (set on purpose, audited) asks for nothing.
import { auditStatement, canonicalJson } from "../audit";
import type { Actor } from "../auth";
import { wilson } from "../automation";
import { agreementRequirements, type GateRequirement } from "../enforcement";
import { AppError } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { entityKey } from "../lib/person-keys";
import { OUTCOME_ENTITY_KINDS } from "./rules-language";

export interface RuleSetGate {
  minComparedHits: number;
  minAgreementLow: number;
}

/** As a trigger's default gate: 100 comparisons with agreement's lower bound ≥ 0.9 (96 of 100 agreeing). */
export const RULE_SET_GATE_DEFAULTS: Readonly<RuleSetGate> = { minComparedHits: 100, minAgreementLow: 0.9 };

export function ruleSetGateOf(gateJson: string | null): { gate: RuleSetGate; source: "set" | "default" } {
  if (gateJson === null) return { gate: { ...RULE_SET_GATE_DEFAULTS }, source: "default" };
  return { gate: { ...RULE_SET_GATE_DEFAULTS, ...(JSON.parse(gateJson) as Partial<RuleSetGate>) }, source: "set" };
}

export interface RuleFigures {
  ruleId: string;
  /** Hits of the version's rule, all modes. */
  hits: number;
  /** Of those, in the last 24 hours: the rule's hit rate. */
  hits24h: number;
  /** Hits that did nothing but record (shadow, or a label in assisted). */
  recordedOnly: number;
  compared: number;
  agreements: number;
  agreement: { value: number | null; low: number | null; high: number | null };
}

/** Decisions read to compare a version's report hits with (the latest, since its first such hit). */
export const MAX_DECISIONS_READ = 5_000;

/** Per rule: report-outcome shadow hits compared with the latest later decision about their subject. */
async function reportComparisons(env: Env, installationId: string, versionId: string): Promise<Map<string, { compared: number; agreements: number }>> {
  const { results: hits } = await env.DB.prepare(`
      SELECT rule_id AS ruleId, entity_key AS entityKey, outcome_json ->> '$.report.entity' AS kind, MIN(created_at) AS firstAt
      FROM rule_hits WHERE installation_id = ?1 AND rule_set_version_id = ?2 AND applied = 0 AND entity_key IS NOT NULL AND outcome_json ->> '$.report.entity' IS NOT NULL
      GROUP BY rule_id, entity_key`)
    .bind(installationId, versionId)
    .all<{ ruleId: string; entityKey: string; kind: string; firstAt: string }>();
  const out = new Map<string, { compared: number; agreements: number }>();
  if (hits.length === 0) return out;
  const since = hits.map((hit) => hit.firstAt).sort()[0]!;
  const { results: decisions } = await env.DB.prepare(`
      SELECT subject_kind AS subjectKind, subject_id AS subjectId, created_at AS createdAt,
        CASE WHEN outcome = 'no_action' OR restrictions_json IN ('{}', '[]', 'null') THEN 0 ELSE 1 END AS restricts
      FROM decisions WHERE installation_id = ?1 AND subject_id IS NOT NULL AND created_at >= ?2 ORDER BY created_at DESC LIMIT ${MAX_DECISIONS_READ}`)
    .bind(installationId, since)
    .all<{ subjectKind: string; subjectId: string; createdAt: string; restricts: number }>();
  // The latest decision per (entity kind, subject) key: every entity kind that becomes this subject kind.
  const latest = new Map<string, { createdAt: string; restricts: boolean }>();
  for (const decision of decisions)
    for (const [kind, subjectKind] of Object.entries(OUTCOME_ENTITY_KINDS)) {
      if (subjectKind !== decision.subjectKind) continue;
      const key = entityKey(installationId, kind, decision.subjectId, env);
      if (!latest.has(key)) latest.set(key, { createdAt: decision.createdAt, restricts: decision.restricts === 1 });
    }
  for (const hit of hits) {
    const decision = latest.get(hit.entityKey);
    if (!decision || decision.createdAt < hit.firstAt) continue;
    const figures = out.get(hit.ruleId) ?? { compared: 0, agreements: 0 };
    figures.compared += 1;
    if (decision.restricts) figures.agreements += 1;
    out.set(hit.ruleId, figures);
  }
  return out;
}

/** Per rule of a version: its hits and its shadow record's agreement with people's later labels and decisions. */
export async function versionFigures(env: Env, installationId: string, versionId: string, ruleIds: readonly string[]): Promise<RuleFigures[]> {
  const db = env.DB;
  const dayAgo = new Date(Date.now() - 86_400_000).toISOString();
  const reports = await reportComparisons(env, installationId, versionId);
  const [hits, compared] = await db.batch([
    db
      .prepare(`
        SELECT rule_id AS ruleId, COUNT(*) AS hits, SUM(CASE WHEN created_at >= ?3 THEN 1 ELSE 0 END) AS hits24h, SUM(CASE WHEN applied = 0 THEN 1 ELSE 0 END) AS recordedOnly
        FROM rule_hits WHERE installation_id = ?1 AND rule_set_version_id = ?2 GROUP BY rule_id`)
      .bind(installationId, versionId, dayAgo),
    db
      .prepare(`
        SELECT h.ruleId, COUNT(*) AS compared, SUM(CASE WHEN l.negated = 0 THEN 1 ELSE 0 END) AS agreements
        FROM (SELECT rule_id AS ruleId, entity_key AS entityKey, outcome_json ->> '$.label.value' AS value, MIN(created_at) AS firstAt
              FROM rule_hits WHERE installation_id = ?1 AND rule_set_version_id = ?2 AND applied = 0 AND entity_key IS NOT NULL AND outcome_json ->> '$.label.value' IS NOT NULL
              GROUP BY rule_id, entity_key, value) h
        JOIN entity_labels l ON l.installation_id = ?1 AND l.entity_key = h.entityKey AND l.value = h.value AND l.source_type = 'person' AND l.created_at >= h.firstAt
        GROUP BY h.ruleId`)
      .bind(installationId, versionId),
  ]);
  const hitRows = new Map((hits!.results as Array<{ ruleId: string; hits: number; hits24h: number; recordedOnly: number }>).map((row) => [row.ruleId, row]));
  const comparedRows = new Map((compared!.results as Array<{ ruleId: string; compared: number; agreements: number }>).map((row) => [row.ruleId, row]));
  return ruleIds.map((ruleId) => {
    const hit = hitRows.get(ruleId);
    const comparison = comparedRows.get(ruleId);
    const reported = reports.get(ruleId);
    const agreements = Number(comparison?.agreements ?? 0) + (reported?.agreements ?? 0);
    const comparedCount = Number(comparison?.compared ?? 0) + (reported?.compared ?? 0);
    const { value, low, high } = wilson(agreements, comparedCount);
    return {
      ruleId,
      hits: Number(hit?.hits ?? 0),
      hits24h: Number(hit?.hits24h ?? 0),
      recordedOnly: Number(hit?.recordedOnly ?? 0),
      compared: comparedCount,
      agreements,
      agreement: { value, low, high },
    };
  });
}

export interface RuleSetPromotion {
  versionId: string;
  gate: RuleSetGate;
  gateSource: "set" | "default";
  rules: RuleFigures[];
  requirements: GateRequirement[];
  met: boolean;
}

/** Where a version stands against its rule set's gate for autonomous (all its rules' comparisons together). */
export async function evaluateRuleSetPromotion(env: Env, installationId: string, input: { gateJson: string | null; versionId: string; ruleIds: readonly string[] }): Promise<RuleSetPromotion> {
  const { gate, source } = ruleSetGateOf(input.gateJson);
  const rules = await versionFigures(env, installationId, input.versionId, input.ruleIds);
  const compared = rules.reduce((sum, rule) => sum + rule.compared, 0);
  const agreements = rules.reduce((sum, rule) => sum + rule.agreements, 0);
  const requirements = agreementRequirements(
    { compared, agreements, comparedFigures: { recordedOnly: rules.reduce((sum, rule) => sum + rule.recordedOnly, 0) } },
    { minCompared: gate.minComparedHits, minAgreementLow: gate.minAgreementLow, comparedRequirement: "compared_hits" },
    wilson,
  );
  return { versionId: input.versionId, gate, gateSource: source, rules, requirements, met: requirements.every((requirement) => requirement.met) };
}

/**
 * Checks the gate for deploying `versionId` in autonomous (the caller decided the deployment is a
 * promotion: the mode or the version changes to an autonomous one). Answers the evidence and its
 * digest for the audit event, or throws promotion.gate_not_met (409) with them.
 */
export async function checkAutonomousGate(env: Env, installationId: string, ruleSet: { id: string; name: string; authorityMode: string; gateJson: string | null }, versionId: string, ruleIds: readonly string[]) {
  const evaluation = await evaluateRuleSetPromotion(env, installationId, { gateJson: ruleSet.gateJson, versionId, ruleIds });
  const evidence = { subject: { type: "rule_set", id: ruleSet.id, name: ruleSet.name }, from: ruleSet.authorityMode, to: "autonomous", ...evaluation, evaluatedAt: new Date().toISOString() };
  if (!evaluation.met)
    throw new AppError("promotion.gate_not_met", `Rule set ${ruleSet.name} does not meet its gate for autonomous with this version: see details.requirements (required, actual, met); deploy it in shadow to gather comparisons.`, {
      status: 409,
      details: evidence,
    });
  return { evidence, digest: `sha256:${await sha256Hex(canonicalJson(evidence))}` };
}

/** Sets a rule set's gate (fields left out keep their value); audited. */
export function ruleSetGateStatements(db: D1Database, actor: Actor, ruleSet: { id: string; name: string }, gate: RuleSetGate, at: string): D1PreparedStatement[] {
  return [
    db.prepare(`UPDATE rule_sets SET gate_json = ?3, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, ruleSet.id, JSON.stringify(gate), at),
    auditStatement(db, {
      installationId: actor.installationId,
      idempotencyKey: `rule_set:${ruleSet.id}:gate_set:${at}:${crypto.randomUUID()}`,
      action: "rule_set.gate_set",
      actor: actor.audit,
      target: { type: "rule_set", id: ruleSet.id },
      details: { name: ruleSet.name, gate },
      at,
    }),
  ];
}
