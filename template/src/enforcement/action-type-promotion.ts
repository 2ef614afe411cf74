// An action type earns autonomy. Its `autonomy` is 'assisted' (every action of the
// type is a proposal a person approves, even in an autonomous run) or 'autonomous' (the run's
// authority decides: today's behaviour, the default). Promoting assisted → autonomous passes the
// type's gate: at least M decided proposals of the type among the last M, and the lower bound of
// precision's 95% Wilson interval ≥ Y. A demotion (PATCH autonomy: assisted) needs no gate.
import { auditStatement, canonicalJson } from "../audit";
import type { Actor } from "../auth";
import { wilson } from "../automation";
import { AppError, notFound } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { decidedProposals, precisionRequirements, type ActionTypeAutonomy, type GateRequirement } from "./proposal-figures";

/** The gate when none is set: the last 100 decided proposals, precision's lower bound ≥ 0.9 (96 of them approved). */
export const ACTION_TYPE_GATE_DEFAULTS = { minDecidedProposals: 100, minPrecisionLow: 0.9 } as const;

export interface ActionTypeGate {
  minDecidedProposals: number;
  minPrecisionLow: number;
}

interface TypeRow {
  id: string;
  key: string;
  name: string;
  autonomy: ActionTypeAutonomy;
  updatedAt: string;
}

function typeRow(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT id, key, name, autonomy, updated_at AS updatedAt FROM action_types WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<TypeRow>();
}

async function gateOf(db: D1Database, installationId: string, actionTypeId: string): Promise<{ gate: ActionTypeGate; source: "set" | "default"; updatedAt: string | null }> {
  const row = await db
    .prepare(`SELECT min_decided_proposals AS minDecidedProposals, min_precision_low AS minPrecisionLow, updated_at AS updatedAt FROM action_type_gates WHERE installation_id = ?1 AND action_type_id = ?2`)
    .bind(installationId, actionTypeId)
    .first<ActionTypeGate & { updatedAt: string }>();
  if (!row) return { gate: { ...ACTION_TYPE_GATE_DEFAULTS }, source: "default", updatedAt: null };
  return { gate: { minDecidedProposals: row.minDecidedProposals, minPrecisionLow: row.minPrecisionLow }, source: "set", updatedAt: row.updatedAt };
}

async function evaluate(env: Env, installationId: string, type: TypeRow, gate: ActionTypeGate) {
  const figures = await decidedProposals(env.DB, installationId, type.key, { last: gate.minDecidedProposals });
  const requirements: GateRequirement[] = precisionRequirements(figures, gate, wilson);
  return { requirements, met: requirements.every((r) => r.met) };
}

/** The type's gate (set, or the defaults) and, while it is assisted, where it stands against it. */
export async function getActionTypeGate(env: Env, actor: Actor, id: string) {
  const type = await typeRow(env.DB, actor.installationId, id);
  if (!type) throw notFound("action_type");
  const { gate, source, updatedAt } = await gateOf(env.DB, actor.installationId, id);
  const next = type.autonomy === "assisted" ? { to: "autonomous" as const, ...(await evaluate(env, actor.installationId, type, gate)) } : null;
  return { actionTypeId: type.id, actionType: type.key, autonomy: type.autonomy, gate, source, updatedAt, next };
}

/** Sets the type's gate (fields left out keep their current value); audited. */
export async function putActionTypeGate(env: Env, actor: Actor, id: string, input: Partial<ActionTypeGate>) {
  const type = await typeRow(env.DB, actor.installationId, id);
  if (!type) throw notFound("action_type");
  const gate = { ...(await gateOf(env.DB, actor.installationId, id)).gate, ...input };
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO action_type_gates (installation_id, action_type_id, min_decided_proposals, min_precision_low, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?5)
      ON CONFLICT(installation_id, action_type_id) DO UPDATE SET min_decided_proposals = excluded.min_decided_proposals, min_precision_low = excluded.min_precision_low, updated_at = excluded.updated_at`).bind(
      actor.installationId,
      id,
      gate.minDecidedProposals,
      gate.minPrecisionLow,
      at,
    ),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `action_type:${id}:gate_set:${at}:${crypto.randomUUID()}`,
      action: "action_type.gate_set",
      actor: actor.audit,
      target: { type: "action_type", id },
      details: { actionType: type.key, gate },
      at,
    }),
  ]);
  return getActionTypeGate(env, actor, id);
}

/**
 * assisted → autonomous, if the gate is met; the evidence (the figures, the gate) and its digest
 * go into the `action_type.promoted` event, written with the change in one batch. Refused with
 * 409 promotion.gate_not_met (the figures in details) or promotion.not_next_mode.
 */
export async function promoteActionType(env: Env, actor: Actor, id: string, to: ActionTypeAutonomy) {
  const type = await typeRow(env.DB, actor.installationId, id);
  if (!type) throw notFound("action_type");
  if (type.autonomy !== "assisted" || to !== "autonomous") {
    throw new AppError("promotion.not_next_mode", `Action type ${type.key} is ${type.autonomy}; it can be promoted from assisted to autonomous only (PATCH autonomy: assisted demotes it).`, {
      status: 409,
      details: { from: type.autonomy, to, next: type.autonomy === "assisted" ? "autonomous" : null },
    });
  }
  const { gate, source } = await gateOf(env.DB, actor.installationId, id);
  const { requirements, met } = await evaluate(env, actor.installationId, type, gate);
  const at = new Date().toISOString();
  const evidence = { subject: { type: "action_type", id: type.id, key: type.key }, from: type.autonomy, to, gate, gateSource: source, requirements, evaluatedAt: at };
  if (!met) throw new AppError("promotion.gate_not_met", `Action type ${type.key} does not meet its gate for ${to}: see details.requirements (required, actual, met).`, { status: 409, details: evidence });
  const digest = `sha256:${await sha256Hex(canonicalJson(evidence))}`;
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE action_types SET autonomy = 'autonomous', updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND autonomy = 'assisted'`).bind(actor.installationId, id, at),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `action_type:${id}:promoted:${at}`,
        action: "action_type.promoted",
        actor: actor.audit,
        target: { type: "action_type", id },
        details: { from: type.autonomy, to, digest, evidence },
        at,
      },
      { table: "action_types", id, where: { autonomy: "autonomous", updated_at: at } },
    ),
  ]);
  if ((update?.meta.changes ?? 0) === 0) throw new AppError("promotion.not_next_mode", `Action type ${type.key} changed concurrently; read it and try again.`, { status: 409 });
  return { actionTypeId: type.id, actionType: type.key, autonomy: to, digest, evidence };
}

/**
 * PATCH: the autonomy may be lowered to assisted at any time (audited); raising it goes through
 * the gate (POST /action-types/:id/promote), so it is refused here with promotion.requires_gate.
 */
export async function setActionTypeAutonomy(env: Env, actor: Actor, id: string, autonomy: ActionTypeAutonomy) {
  const type = await typeRow(env.DB, actor.installationId, id);
  if (!type) throw notFound("action_type");
  if (autonomy === "autonomous" && type.autonomy !== "autonomous") {
    throw new AppError("promotion.requires_gate", `Raising ${type.key} to autonomous needs its gate: POST /api/v1/action-types/${id}/promote { "to": "autonomous" }.`, { status: 409 });
  }
  if (autonomy !== type.autonomy) {
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE action_types SET autonomy = ?3, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id, autonomy, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `action_type:${id}:demoted:${at}:${crypto.randomUUID()}`,
        action: "action_type.demoted",
        actor: actor.audit,
        target: { type: "action_type", id },
        details: { from: type.autonomy, to: autonomy },
        at,
      }),
    ]);
  }
  return { actionTypeId: type.id, actionType: type.key, autonomy };
}
