// Automatic demotion: the schedule's `cases.automatic_demotions` sweep looks at each
// enabled autonomous trigger (least recently looked at first, at most 50 per run) and computes its
// live overturn rate: decisions made by its runs since the window's start (overturnWindowDays
// back, never before the trigger last changed mode) that were overturned, over the decisions made.
// When the rate passes the trigger's limit with at least the minimum sample, the trigger drops to
// assisted: the change, a `trigger_demotions` row (figures and digest), its `trigger.demoted`
// audit event and an `automation.demoted` webhook to the endpoint the installation's alert
// settings name (the alerts' delivery path: signed, retried, dead-lettered, source_type 'alert'
// with the demotion's id) are written in one batch. Idempotent: the demotion's id comes from the
// trigger and the mode change it undoes, and every write is guarded on the trigger's change.
//
// Imported by src/schedule.ts directly, not through cases/index.ts: this module reaches
// enforcement (deliveries) and automation, which import cases/index.ts.
import { auditStatement } from "../../audit";
import { deliveryStatement, enqueueDeliveries } from "../../enforcement";
import { notFound } from "../../errors";
import { sha256Hex } from "../../lib/crypto";
import { evidenceDigest } from "./promotion";
import { overturnFigures, overturnLimitPassed, overturnWindowStart } from "./promotion-overturns";
import { triggerGateOf } from "./promotion-gates";
import { getTrigger } from "../triggers/triggers";

export { overturnFigures, type OverturnFigures } from "./promotion-overturns";

/** Autonomous triggers the sweep looks at per run. */
const DEMOTION_SWEEP_TRIGGERS = 50;
export const DEMOTED_EVENT_TYPE = "automation.demoted";

interface AutonomousTrigger {
  id: string;
  installationId: string;
  name: string;
  workflowVersionId: string;
  authorityChangedAt: string | null;
  createdAt: string;
}

/** The sweep's selection (index triggers_autonomous; ?1 the bound); exported for the bench's query plans. */
export const AUTONOMOUS_TRIGGERS_SQL = `SELECT id, installation_id AS installationId, name, workflow_version_id AS workflowVersionId,
  authority_changed_at AS authorityChangedAt, created_at AS createdAt
  FROM triggers WHERE authority_mode = 'autonomous' AND enabled = 1 ORDER BY demotion_checked_at LIMIT ?1`;

/** The sweep (bounded: 50 triggers per run; idempotent). */
export async function sweepAutomaticDemotions(env: Env, now: Date = new Date()): Promise<{ checked: number; demoted: number; notified: number }> {
  const { results } = await env.DB.prepare(AUTONOMOUS_TRIGGERS_SQL).bind(DEMOTION_SWEEP_TRIGGERS).all<AutonomousTrigger>();
  let demoted = 0;
  let notified = 0;
  for (const trigger of results) {
    const outcome = await checkTrigger(env, trigger, now);
    if (outcome.demoted) demoted += 1;
    if (outcome.notified) notified += 1;
  }
  return { checked: results.length, demoted, notified };
}

async function checkTrigger(env: Env, trigger: AutonomousTrigger, now: Date): Promise<{ demoted: boolean; notified: boolean }> {
  const at = now.toISOString();
  const { gate } = await triggerGateOf(env.DB, trigger.installationId, trigger.id);
  const since = overturnWindowStart(now, gate.overturnWindowDays, trigger.authorityChangedAt);
  const figures = await overturnFigures(env, trigger.installationId, trigger.id, since);
  if (!overturnLimitPassed(figures, gate)) {
    await env.DB.prepare(`UPDATE triggers SET demotion_checked_at = ?3 WHERE installation_id = ?1 AND id = ?2`).bind(trigger.installationId, trigger.id, at).run();
    return { demoted: false, notified: false };
  }
  // One demotion per mode change it undoes, whichever sweep gets there first.
  const demotionId = `dem_${(await sha256Hex(`${trigger.id}:${trigger.authorityChangedAt ?? trigger.createdAt}`)).slice(0, 32)}`;
  const limit = { maxOverturnRate: gate.maxOverturnRate, minOverturnSample: gate.minOverturnSample, overturnWindowDays: gate.overturnWindowDays };
  const evidence = { subject: { type: "trigger", id: trigger.id, name: trigger.name }, workflowVersionId: trigger.workflowVersionId, from: "autonomous", to: "assisted", limit, figures, evaluatedAt: at };
  const digest = await evidenceDigest(evidence);
  const settings = await env.DB.prepare(`SELECT endpoint_id AS endpointId FROM alert_settings WHERE installation_id = ?1`).bind(trigger.installationId).first<{ endpointId: string }>();
  const written = { table: "trigger_demotions" as const, id: demotionId, where: { created_at: at } };
  // Due now by the consumer's clock (a scheduled time slightly ahead would hold the first attempt back).
  const sendAt = new Date(Math.min(now.getTime(), Date.now())).toISOString();
  const delivery = settings
    ? await deliveryStatement(
        env,
        {
          installationId: trigger.installationId,
          endpointId: settings.endpointId,
          eventType: DEMOTED_EVENT_TYPE,
          sourceType: "alert",
          sourceId: demotionId,
          data: { demotionId, triggerId: trigger.id, triggerName: trigger.name, workflowVersionId: trigger.workflowVersionId, from: "autonomous", to: "assisted", limit, figures, digest, demotedAt: at },
          at: sendAt,
        },
        written,
      )
    : null;
  const results = await env.DB.batch([
    env.DB.prepare(`UPDATE triggers SET authority_mode = 'assisted', authority_changed_at = ?3, demotion_checked_at = ?3, updated_at = ?3
      WHERE installation_id = ?1 AND id = ?2 AND authority_mode = 'autonomous'`).bind(trigger.installationId, trigger.id, at),
    env.DB.prepare(`INSERT OR IGNORE INTO trigger_demotions (id, installation_id, trigger_id, from_mode, to_mode, figures_json, digest, endpoint_id, created_at)
      SELECT ?1, ?2, ?3, 'autonomous', 'assisted', ?4, ?5, ?6, ?7
      WHERE EXISTS (SELECT 1 FROM triggers WHERE id = ?3 AND authority_mode = 'assisted' AND authority_changed_at = ?7)`).bind(
      demotionId,
      trigger.installationId,
      trigger.id,
      JSON.stringify(evidence),
      digest,
      settings?.endpointId ?? null,
      at,
    ),
    auditStatement(
      env.DB,
      {
        installationId: trigger.installationId,
        idempotencyKey: `trigger:${trigger.id}:demoted:${demotionId}`,
        action: "trigger.demoted",
        actor: { type: "system", id: "schedule" },
        target: { type: "trigger", id: trigger.id },
        details: { name: trigger.name, from: "autonomous", to: "assisted", automatic: true, demotionId, digest, evidence, deliveryId: delivery?.id ?? null },
        at,
      },
      written,
    ),
    ...(delivery ? [delivery.statement] : []),
  ]);
  const demoted = results[1]?.meta.changes === 1;
  const notified = demoted && delivery !== null && results[3]?.meta.changes === 1;
  // Queued after the commit; a lost message is the outbox sweep's to re-queue.
  if (notified) await enqueueDeliveries(env, [delivery.id]).catch(() => {});
  return { demoted, notified };
}

/** A trigger's automatic demotions, newest first (another installation's trigger: 404). */
export async function listTriggerDemotions(env: Env, installationId: string, triggerId: string) {
  if (!(await getTrigger(env.DB, installationId, triggerId))) throw notFound("trigger");
  const { results } = await env.DB.prepare(`SELECT id, from_mode AS "from", to_mode AS "to", figures_json AS figuresJson, digest, endpoint_id AS endpointId, created_at AS createdAt
    FROM trigger_demotions WHERE installation_id = ?1 AND trigger_id = ?2 ORDER BY created_at DESC LIMIT 100`)
    .bind(installationId, triggerId)
    .all<{ id: string; from: string; to: string; figuresJson: string; digest: string; endpointId: string | null; createdAt: string }>();
  return results.map(({ figuresJson, ...row }) => ({ ...row, evidence: JSON.parse(figuresJson) as unknown }));
}
