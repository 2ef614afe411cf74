// Promotion gates of triggers: what a trigger's version must have shown before the
// trigger starts it with more authority, and when an autonomous trigger is taken back to assisted.
//
//   shadow → assisted      ≥ minComparedRuns shadow runs of the version compared with a person's
//                          decision (the shadow report), and the lower bound of agreement's 95%
//                          Wilson interval ≥ minAgreementLow
//   assisted → autonomous  per action type the version's action nodes use: ≥ minDecidedProposals
//                          approved-or-rejected proposals of that type from runs of the version
//                          (the last M), and precision's lower bound ≥ minPrecisionLow
//                          (a version without action nodes: the shadow → assisted figures again)
//   off → shadow           nothing to measure: always allowed
//   demotion (sweep)       overturned / decisions over overturnWindowDays > maxOverturnRate, once
//                          at least minOverturnSample decisions were made (promotion-sweep.ts)
//
// No gate set: TRIGGER_GATE_DEFAULTS (docs/ARCHITECTURE.md says why these numbers).
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { shadowReport, wilson } from "../../automation";
import { agreementRequirements, decidedProposals, precisionRequirements, type GateRequirement } from "../../enforcement";
import { notFound } from "../../errors";
import { getVersionRow, type WorkflowAuthorityMode } from "../../workflows";
import { overturnFigures, overturnLimitPassed, overturnWindowStart } from "./promotion-overturns";
import { getTrigger, type TriggerRow } from "../triggers/triggers";

export interface TriggerGate {
  minComparedRuns: number;
  minAgreementLow: number;
  minDecidedProposals: number;
  minPrecisionLow: number;
  maxOverturnRate: number;
  minOverturnSample: number;
  overturnWindowDays: number;
}

/**
 * The gate when none is set: 100 compared runs with agreement's lower bound ≥ 0.9 (96 of 100
 * agreeing; a larger sample needs a lower rate); per action type, precision's lower bound ≥ 0.9
 * over the last 100 decided proposals (96 of them approved); demotion when more than 10% of at
 * least 20 decisions over 30 days were overturned.
 */
export const TRIGGER_GATE_DEFAULTS: Readonly<TriggerGate> = {
  minComparedRuns: 100,
  minAgreementLow: 0.9,
  minDecidedProposals: 100,
  minPrecisionLow: 0.9,
  maxOverturnRate: 0.1,
  minOverturnSample: 20,
  overturnWindowDays: 30,
};

export const MODE_ORDER: readonly WorkflowAuthorityMode[] = ["off", "shadow", "assisted", "autonomous"];
export const nextMode = (mode: WorkflowAuthorityMode): WorkflowAuthorityMode | null => MODE_ORDER[MODE_ORDER.indexOf(mode) + 1] ?? null;

const GATE_COLUMNS = `min_compared_runs AS minComparedRuns, min_agreement_low AS minAgreementLow, min_decided_proposals AS minDecidedProposals,
  min_precision_low AS minPrecisionLow, max_overturn_rate AS maxOverturnRate, min_overturn_sample AS minOverturnSample,
  overturn_window_days AS overturnWindowDays, updated_at AS updatedAt`;

export async function triggerGateOf(db: D1Database, installationId: string, triggerId: string): Promise<{ gate: TriggerGate; source: "set" | "default"; updatedAt: string | null }> {
  const row = await db.prepare(`SELECT ${GATE_COLUMNS} FROM trigger_gates WHERE installation_id = ?1 AND trigger_id = ?2`).bind(installationId, triggerId).first<TriggerGate & { updatedAt: string }>();
  if (!row) return { gate: { ...TRIGGER_GATE_DEFAULTS }, source: "default", updatedAt: null };
  const { updatedAt, ...gate } = row;
  return { gate, source: "set", updatedAt };
}

/** The action types (by key) the version's action nodes name, sorted. */
function actionTypesOf(graphJson: string): string[] {
  const graph = JSON.parse(graphJson) as { nodes?: Array<{ kind?: unknown; config?: { action_type?: unknown } }> };
  const keys = new Set<string>();
  for (const node of graph.nodes ?? []) if (node.kind === "action" && typeof node.config?.action_type === "string") keys.add(node.config.action_type);
  return [...keys].sort();
}

/** shadow → assisted: compared runs, and agreement's lower bound, from the version's shadow report. */
async function versionAgreementRequirements(env: Env, actor: Actor, workflowVersionId: string, gate: TriggerGate): Promise<GateRequirement[]> {
  const report = await shadowReport(env, actor, workflowVersionId);
  return agreementRequirements(
    {
      compared: report.runsCompared,
      agreements: report.agreements,
      comparedFigures: { shadowRuns: report.shadowRuns },
      agreementFigures: { withoutHumanDecision: report.withoutHumanDecision, withoutProposal: report.withoutProposal },
    },
    { minCompared: gate.minComparedRuns, minAgreementLow: gate.minAgreementLow, comparedRequirement: "compared_runs" },
    wilson,
  );
}

export interface PromotionEvaluation {
  from: WorkflowAuthorityMode;
  to: WorkflowAuthorityMode;
  workflowVersionId: string;
  gate: TriggerGate;
  gateSource: "set" | "default";
  requirements: GateRequirement[];
  met: boolean;
}

/** Where the trigger stands against its gate for `to` (which the caller checked is the next mode). */
export async function evaluateTriggerPromotion(env: Env, actor: Actor, trigger: TriggerRow, to: WorkflowAuthorityMode): Promise<PromotionEvaluation> {
  const { gate, source } = await triggerGateOf(env.DB, actor.installationId, trigger.id);
  const requirements: GateRequirement[] = [];
  if (to === "assisted") {
    requirements.push(...(await versionAgreementRequirements(env, actor, trigger.workflowVersionId, gate)));
  } else if (to === "autonomous") {
    const version = await getVersionRow(env.DB, actor.installationId, trigger.workflowVersionId);
    if (!version) throw notFound("workflow_version");
    const actionTypes = actionTypesOf(version.graphJson);
    for (const actionType of actionTypes) {
      const figures = await decidedProposals(env.DB, actor.installationId, actionType, { last: gate.minDecidedProposals, workflowVersionId: trigger.workflowVersionId });
      requirements.push(...precisionRequirements(figures, gate, wilson));
    }
    // A version without action nodes has no proposals to measure: its agreement with people is
    // the evidence (checked again, so the promotion records it rather than nothing).
    if (actionTypes.length === 0) requirements.push(...(await versionAgreementRequirements(env, actor, trigger.workflowVersionId, gate)).map((r) => ({ ...r, basis: "no_action_nodes" })));
  }
  return { from: trigger.authorityMode, to, workflowVersionId: trigger.workflowVersionId, gate, gateSource: source, requirements, met: requirements.every((r) => r.met) };
}

/** The trigger's gate (set, or the defaults) and where it stands against it for the next mode. */
export async function getTriggerGate(env: Env, actor: Actor, id: string) {
  const trigger = await getTrigger(env.DB, actor.installationId, id);
  if (!trigger) throw notFound("trigger");
  const { gate, source, updatedAt } = await triggerGateOf(env.DB, actor.installationId, id);
  const to = nextMode(trigger.authorityMode);
  const next = to ? await evaluateTriggerPromotion(env, actor, trigger, to) : null;
  // Autonomous: the live overturn figures the demotion sweep compares with the limit.
  let demotion = null;
  if (trigger.authorityMode === "autonomous") {
    const figures = await overturnFigures(env, actor.installationId, trigger.id, overturnWindowStart(new Date(), gate.overturnWindowDays, trigger.authorityChangedAt));
    demotion = { maxOverturnRate: gate.maxOverturnRate, minOverturnSample: gate.minOverturnSample, figures, limitPassed: overturnLimitPassed(figures, gate) };
  }
  return { triggerId: trigger.id, authorityMode: trigger.authorityMode, gate, source, updatedAt, next: next ? { to, requirements: next.requirements, met: next.met } : null, demotion };
}

/** Sets the trigger's gate (fields left out keep their current value); audited. */
export async function putTriggerGate(env: Env, actor: Actor, id: string, input: Partial<TriggerGate>) {
  const trigger = await getTrigger(env.DB, actor.installationId, id);
  if (!trigger) throw notFound("trigger");
  const gate: TriggerGate = { ...(await triggerGateOf(env.DB, actor.installationId, id)).gate, ...input };
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO trigger_gates (installation_id, trigger_id, min_compared_runs, min_agreement_low, min_decided_proposals, min_precision_low,
        max_overturn_rate, min_overturn_sample, overturn_window_days, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
      ON CONFLICT(installation_id, trigger_id) DO UPDATE SET min_compared_runs = excluded.min_compared_runs, min_agreement_low = excluded.min_agreement_low,
        min_decided_proposals = excluded.min_decided_proposals, min_precision_low = excluded.min_precision_low, max_overturn_rate = excluded.max_overturn_rate,
        min_overturn_sample = excluded.min_overturn_sample, overturn_window_days = excluded.overturn_window_days, updated_at = excluded.updated_at`).bind(
      actor.installationId,
      id,
      gate.minComparedRuns,
      gate.minAgreementLow,
      gate.minDecidedProposals,
      gate.minPrecisionLow,
      gate.maxOverturnRate,
      gate.minOverturnSample,
      gate.overturnWindowDays,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `trigger:${id}:gate_set:${at}:${crypto.randomUUID()}`,
      action: "trigger.gate_set",
      actor: actor.audit,
      target: { type: "trigger", id },
      details: { name: trigger.name, gate },
      at,
    }),
  ]);
  return getTriggerGate(env, actor, id);
}
