// Promoting a trigger to the next authority mode through its gate, and lowering it by hand.
// A promotion writes the new mode and its evidence (the gate, every requirement's figures) with a
// digest — sha-256 of the evidence's canonical JSON, so anyone holding the audit event can check
// the figures were not edited — in one batch; the audit event is written only if the mode changed.
import { auditStatement, canonicalJson } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, notFound } from "../../errors";
import { sha256Hex } from "../../lib/crypto";
import type { WorkflowAuthorityMode } from "../../workflows";
import { evaluateTriggerPromotion, MODE_ORDER, nextMode } from "./promotion-gates";
import { getTrigger, serialize as serializeTrigger } from "../triggers/triggers";

/** `sha256:<hex>` of the canonical JSON of a promotion's or a demotion's evidence. */
export async function evidenceDigest(evidence: unknown): Promise<string> {
  return `sha256:${await sha256Hex(canonicalJson(evidence))}`;
}

/**
 * POST /triggers/:id/promote { to }: `to` must be the next mode (no skipping); its gate must be
 * met, else 409 promotion.gate_not_met with each requirement (required, actual, met) in details.
 */
export async function promoteTrigger(env: Env, actor: Actor, id: string, to: WorkflowAuthorityMode) {
  const trigger = await getTrigger(env.DB, actor.installationId, id);
  if (!trigger) throw notFound("trigger");
  const next = nextMode(trigger.authorityMode);
  if (to !== next) {
    throw new AppError(
      "promotion.not_next_mode",
      next ? `Trigger ${trigger.name} is ${trigger.authorityMode}: it can be promoted to ${next} only (one step at a time); PATCH authorityMode lowers it.` : `Trigger ${trigger.name} is already autonomous; PATCH authorityMode lowers it.`,
      { status: 409, details: { from: trigger.authorityMode, to, next } },
    );
  }
  const evaluation = await evaluateTriggerPromotion(env, actor, trigger, to);
  const at = new Date().toISOString();
  const evidence = { subject: { type: "trigger", id: trigger.id, name: trigger.name }, ...evaluation, evaluatedAt: at };
  if (!evaluation.met) {
    throw new AppError("promotion.gate_not_met", `Trigger ${trigger.name} does not meet its gate for ${to}: see details.requirements (required, actual, met).`, { status: 409, details: evidence });
  }
  const digest = await evidenceDigest(evidence);
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE triggers SET authority_mode = ?3, authority_changed_at = ?4, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2 AND authority_mode = ?5`).bind(actor.installationId, id, to, at, trigger.authorityMode),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `trigger:${id}:promoted:${to}:${at}`,
        action: "trigger.promoted",
        actor: actor.audit,
        target: { type: "trigger", id },
        details: { from: trigger.authorityMode, to, digest, evidence },
        at,
      },
      { table: "triggers", id, where: { authority_mode: to, authority_changed_at: at } },
    ),
  ]);
  if ((update?.meta.changes ?? 0) === 0) throw new AppError("promotion.not_next_mode", `Trigger ${trigger.name} changed mode concurrently; read it and try again.`, { status: 409 });
  return { trigger: serializeTrigger((await getTrigger(env.DB, actor.installationId, id))!), digest, evidence };
}

/**
 * PATCH /triggers/:id { authorityMode }: a lower mode (a demotion, needs no gate) or the same (no
 * change). A higher one is refused with promotion.requires_gate: it goes through promote.
 */
export async function updateTriggerMode(env: Env, actor: Actor, id: string, authorityMode: WorkflowAuthorityMode) {
  const trigger = await getTrigger(env.DB, actor.installationId, id);
  if (!trigger) throw notFound("trigger");
  if (MODE_ORDER.indexOf(authorityMode) > MODE_ORDER.indexOf(trigger.authorityMode)) {
    throw new AppError("promotion.requires_gate", `Raising trigger ${trigger.name} to ${authorityMode} needs its gate: POST /api/v1/triggers/${id}/promote { "to": "${nextMode(trigger.authorityMode)}" }.`, {
      status: 409,
      details: { from: trigger.authorityMode, to: authorityMode },
    });
  }
  if (authorityMode !== trigger.authorityMode) {
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE triggers SET authority_mode = ?3, authority_changed_at = ?4, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id, authorityMode, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `trigger:${id}:demoted:${at}:${crypto.randomUUID()}`,
        action: "trigger.demoted",
        actor: actor.audit,
        target: { type: "trigger", id },
        details: { name: trigger.name, from: trigger.authorityMode, to: authorityMode, automatic: false },
        at,
      }),
    ]);
  }
  return serializeTrigger((await getTrigger(env.DB, actor.installationId, id))!);
}
