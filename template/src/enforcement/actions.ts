// Action proposals as people and deliveries see them (their types: action-types.ts): the proposal
// record (list/get), a person's approve or reject (decideProposal), and the signed-webhook delivery
// of an approved or autonomous action — its row, its first attempt from this host, its send-time
// gate, and its end (applied or failed) waking the run (DELIVERY_SOURCES). The workflow runtime's
// prepare/complete are action-runtime.ts; cancelling proposals, proposal-cancellation.ts.
import { auditStatement } from "../audit";
import { ownIdentitySql, queueLimitOf, reviewerIdentity, runInQueuesSql, type Actor } from "../auth";
import { hotOrArchived, TASK_COMPLETED_BY_SQL } from "../cases";
import { AppError, conflict, notFound } from "../errors";
import { sha256HexSync } from "../lib/crypto";
import type { RowGuard } from "../lib/d1";
import { signalRun } from "../workflows";
import { deliverInline, deliverLeased, reserveInline, type Defer, type DeliverySource, type InlineSlot, type OutcomeTaker } from "./delivery-inline";
import { attemptEndpointJsonSql, deliveryStatement, type AttemptEndpoint, type NewDelivery } from "./webhooks";
import { reviewerAuditId } from "../lib/person-keys";
import { TYPE_COLUMNS, type ActionTypeRow } from "./action-types";
import { cancelLeftover, LEFT_STEP_STATES_SQL, nodeLeft, runFinished, standingOf, TERMINAL_STATES_SQL, type ProposalStanding } from "./proposal-cancellation";
import { proposalStepSql } from "./proposal-ids";

export interface ProposalRow {
  id: string;
  installationId: string;
  runId: string;
  stepRunId: string;
  nodeId: string;
  actionTypeId: string;
  actionTypeKey: string;
  reportId: string | null;
  authorityMode: string;
  state: string;
  paramsJson: string;
  decidedBy: string | null;
  decidedAt: string | null;
  decisionReason: string | null;
  deliveryId: string | null;
  approvalSignal: string;
  deliverySignal: string;
  expiresAt: string;
  createdAt: string;
  cancelReason: string | null;
}

/**
 * The event a run waits on for a proposal's approval or delivery: a digest of the proposal id and
 * the phase, so it is never stored (rows written before it was computed hold it; rows since, '').
 */
export function proposalSignal(row: Pick<ProposalRow, "id" | "approvalSignal" | "deliverySignal">, phase: "approval" | "delivery"): string {
  const stored = phase === "approval" ? row.approvalSignal : row.deliverySignal;
  return stored || `p_${sha256HexSync(`${row.id}:${phase}`).slice(0, 40)}`;
}

/** A proposal's columns as ProposalRow names them: [SQL expression, name] (the step: proposalStepSql). */
const PROPOSAL_FIELDS: ReadonlyArray<readonly [string, keyof ProposalRow]> = [
  ["id", "id"],
  ["installation_id", "installationId"],
  ["run_id", "runId"],
  [proposalStepSql(), "stepRunId"],
  ["node_id", "nodeId"],
  ["action_type_id", "actionTypeId"],
  ["action_type_key", "actionTypeKey"],
  ["report_id", "reportId"],
  ["authority_mode", "authorityMode"],
  ["state", "state"],
  ["params_json", "paramsJson"],
  ["decided_by", "decidedBy"],
  ["decided_at", "decidedAt"],
  ["decision_reason", "decisionReason"],
  ["delivery_id", "deliveryId"],
  ["approval_signal", "approvalSignal"],
  ["delivery_signal", "deliverySignal"],
  ["expires_at", "expiresAt"],
  ["created_at", "createdAt"],
  ["cancel_reason", "cancelReason"],
];

/** The select list of a ProposalRow, from `action_proposals` (not aliased). */
export const PROPOSAL_COLUMNS = PROPOSAL_FIELDS.map(([sql, name]) => (sql === name ? sql : `${sql} AS ${name}`)).join(", ");

/** proposalRow as one scalar JSON value (a ProposalRow, or NULL), for a statement the caller sends anyway; `id` is an SQL expression. */
export function proposalJsonSql(id: string): string {
  return `(SELECT json_object(${PROPOSAL_FIELDS.map(([sql, name]) => `'${name}', ${sql}`).join(", ")}) FROM action_proposals WHERE id = ${id})`;
}

export function proposalRow(db: D1Database, id: string) {
  return db.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE id = ?1`).bind(id).first<ProposalRow>();
}

export function serializeProposal(row: ProposalRow) {
  return {
    id: row.id,
    runId: row.runId,
    nodeId: row.nodeId,
    actionType: row.actionTypeKey,
    reportId: row.reportId,
    authorityMode: row.authorityMode,
    state: row.state,
    params: JSON.parse(row.paramsJson) as unknown,
    decidedBy: row.decidedBy,
    decidedAt: row.decidedAt,
    reason: row.decisionReason,
    deliveryId: row.deliveryId,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    cancelReason: row.cancelReason,
  };
}

/** The webhook delivery of an approved (or autonomous) proposal, for the caller's batch. */
export async function actionDelivery(
  env: Env,
  row: { id: string; installationId: string; runId: string; actionTypeKey: string; reportId: string | null; authorityMode: string; paramsJson: string },
  typeRow: { endpointId: string; reversible: number },
  approvedBy: string | null,
  at: string,
  onlyIf?: RowGuard,
  /** The report's subject when the caller read it already (null: none); otherwise it is read here. */
  known?: unknown,
  /** Written leased to an inline attempt this host reserved (reserveInline). */
  slot?: InlineSlot | null,
) {
  let subject: unknown = known ?? null;
  if (known === undefined && row.reportId) {
    const report = await env.DB.prepare(`SELECT subject_kind AS kind, subject_id AS id FROM reports WHERE installation_id = ?1 AND id = ?2`).bind(row.installationId, row.reportId).first();
    subject = report ?? null;
  }
  return deliveryStatement(
    env,
    {
      installationId: row.installationId,
      endpointId: typeRow.endpointId,
      eventType: "action.execute",
      sourceType: "action",
      sourceId: row.id,
      at,
      ...(slot ? { leaseUntil: slot.leaseUntil } : {}),
      data: {
        proposalId: row.id,
        actionType: row.actionTypeKey,
        params: JSON.parse(row.paramsJson) as unknown,
        runId: row.runId,
        reportId: row.reportId,
        subject,
        authorityMode: row.authorityMode,
        approvedBy,
        reversible: typeRow.reversible === 1,
      },
    },
    onlyIf,
  );
}

/** The endpoint an action type's read carried (attemptEndpointJsonSql), or null. */
export function endpointOf(typeRow: { endpointJson?: string | null }): AttemptEndpoint | null {
  return typeRow.endpointJson ? (JSON.parse(typeRow.endpointJson) as AttemptEndpoint) : null;
}

/** The first attempt of an action delivery this host just committed leased to itself (delivery-inline.ts deliverLeased). */
export function sendLeased(env: Env, input: { delivery: NewDelivery; endpoint: AttemptEndpoint; installationId: string; proposalId: string; at: string }, slot: InlineSlot, defer?: Defer, take?: OutcomeTaker): void {
  deliverLeased(
    env,
    { delivery: input.delivery, installationId: input.installationId, endpoint: input.endpoint, eventType: "action.execute", sourceType: "action", sourceId: input.proposalId, at: input.at },
    slot,
    DELIVERY_SOURCES,
    defer,
    take,
  );
}

/**
 * Approve (→ delivery) or reject a proposal that waits for a person. A second decision is a 409;
 * so is a decision on a proposal whose run is finished (`action_proposal.run_finished`) or whose
 * node has left (`action_proposal.cancelled`), and then nothing is queued. The update is
 * conditional on the run and the step still being live, and the delivery row on that update, so
 * a run that ends concurrently leaves no delivery behind.
 */
export async function decideProposal(env: Env, actor: Actor, proposalId: string, input: { approve: boolean; reason?: string; approver?: string }, defer?: Defer) {
  const row = await hotOrArchived(env, actor.installationId, "proposal", proposalId, () => visibleProposalRow(env.DB, actor, proposalId));
  if (!row) throw notFound("action_proposal");
  const standing = await standingOf(env.DB, row);
  if (runFinished(standing)) {
    await cancelLeftover(env.DB, row, standing);
    throw conflict("action_proposal.run_finished", `The proposal's run is ${standing?.runState ?? "gone"}; nothing is delivered for it.`);
  }
  if (row.state === "cancelled") throw conflict("action_proposal.cancelled", "The proposal was cancelled; nothing is delivered for it.");
  if (row.state !== "approval_required") throw conflict("action_proposal.already_decided", `The proposal is already ${row.state}.`);
  const now = new Date();
  const at = now.toISOString();
  if (nodeLeft(standing)) {
    await cancelLeftover(env.DB, row, standing);
    throw conflict("action_proposal.cancelled", "The proposal's node has left; the proposal is cancelled and nothing is delivered for it.");
  }
  if (row.expiresAt <= at) throw conflict("action_proposal.expired", "The proposal expired before it was decided.");
  // A console user approves as themself; an API key's approver name is a label of that key.
  const who = actor.user ? actor.user.email : (input.approver ?? actor.audit.id);
  // Four eyes: whoever answered a review task of this run (the same console user, or the same API
  // key under any reviewer name) does not also approve the action it led to; so no self-approval
  // counts toward the trigger's promotion gates either.
  if (input.approve) await assertNotOwnReview(env.DB, actor, row.runId);
  const typeRow = await env.DB.prepare(`SELECT ${TYPE_COLUMNS}, ${attemptEndpointJsonSql("?1", "action_types.endpoint_id")} AS endpointJson FROM action_types WHERE installation_id = ?1 AND id = ?2`)
    .bind(actor.installationId, row.actionTypeId)
    .first<ActionTypeRow & { endpointJson: string | null }>();
  if (!typeRow) throw notFound("action_type");
  const endpoint = endpointOf(typeRow);
  const slot = input.approve && endpoint ? reserveInline(env) : null;
  let handed = false;
  try {
    const delivery = input.approve ? await actionDelivery(env, row, typeRow, who, at, { table: "action_proposals", id: proposalId, where: { state: "delivery_pending", decided_at: at } }, undefined, slot) : null;
    const next = input.approve ? "delivery_pending" : "rejected";
    const [update] = await env.DB.batch([
      env.DB.prepare(`UPDATE action_proposals SET state = ?3, decided_by = ?4, decided_at = ?5, decision_reason = ?6, delivery_id = ?7, updated_at = ?5
      WHERE installation_id = ?1 AND id = ?2 AND state = 'approval_required'
        AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?8 AND state NOT IN (${TERMINAL_STATES_SQL}))
        AND NOT EXISTS (SELECT 1 FROM workflow_step_runs WHERE id = ?9 AND state IN (${LEFT_STEP_STATES_SQL}))`).bind(actor.installationId, proposalId, next, who, at, input.reason ?? null, delivery?.id ?? null, row.runId, row.stepRunId),
      // One delivery per proposal: a racing second approval's insert is ignored on (source_type, source_id);
      // and none at all unless this very update approved it.
      ...(delivery ? [delivery.statement] : []),
      auditStatement(
        env.DB,
        {
          installationId: actor.installationId,
          idempotencyKey: `action_proposal:${proposalId}:decided`,
          action: input.approve ? "action.approved" : "action.rejected",
          actor: actor.audit,
          target: { type: "action_proposal", id: proposalId },
          details: { approverId: reviewerAuditId(actor.installationId, who), reason: input.reason ?? null, runId: row.runId },
          at,
        },
        { table: "action_proposals", id: proposalId, where: { state: next, decided_at: at } },
      ),
    ]);
    if ((update!.meta.changes ?? 0) === 0) {
      const after = await standingOf(env.DB, row);
      if (runFinished(after)) throw conflict("action_proposal.run_finished", `The proposal's run is ${after?.runState ?? "gone"}; nothing is delivered for it.`);
      if (nodeLeft(after)) throw conflict("action_proposal.cancelled", "The proposal's node has left; nothing is delivered for it.");
      throw conflict("action_proposal.already_decided", "The proposal was decided concurrently.");
    }
    // The first attempt now, off the response path (`defer`: the request's waitUntil by default).
    if (delivery && slot && endpoint) {
      sendLeased(env, { delivery, endpoint, installationId: actor.installationId, proposalId, at }, slot, defer);
      handed = true;
    } else if (delivery) {
      deliverInline(env, [delivery.id], DELIVERY_SOURCES, defer);
    }
  } finally {
    if (!handed) slot?.release();
  }
  await signalProposal(env, row.runId, proposalSignal(row, "approval"), proposalId);
  return serializeProposal((await proposalRow(env.DB, proposalId))!);
}

/** 403 `action_proposal.own_review` when the actor completed a task of the proposal's run (human_tasks_run index). */
async function assertNotOwnReview(db: D1Database, actor: Actor, runId: string): Promise<void> {
  const own = await db
    .prepare(`SELECT 1 AS x FROM human_tasks WHERE run_id = ?2 AND installation_id = ?1 AND state = 'completed' AND ${ownIdentitySql(TASK_COMPLETED_BY_SQL(), "?3")} LIMIT 1`)
    .bind(actor.installationId, runId, reviewerIdentity(actor))
    .first();
  if (own) {
    throw new AppError("action_proposal.own_review", "You (this console user or API key) answered a review task of this run; another person approves the action it led to.", { status: 403 });
  }
}

/** Wakes a run on a proposal's signal; a run whose instance is no longer live (e.g. repair_required) reads the proposal when it resumes. */
async function signalProposal(env: Env, runId: string, type: string, proposalId: string): Promise<void> {
  await signalRun(env, runId, { type, payload: { proposalId } });
}

type GateRow = { id: string; installationId: string; runId: string; stepRunId: string; state: string } & ProposalStanding;

/**
 * What the send-time check reads of an action delivery's proposal, run and step (?1 the delivery;
 * exported for the plan tests). The step row is looked up by the proposal's step (its id's, or its
 * stored step_run_id); an archived run's may be gone, and then its run's end answers.
 */
export const ACTION_GATE_SQL = `
    SELECT p.id, p.installation_id AS installationId, p.run_id AS runId, ${proposalStepSql("p")} AS stepRunId, p.state, r.state AS runState, s.state AS stepState
    FROM webhook_deliveries d JOIN action_proposals p ON p.id = d.source_id JOIN workflow_runs r ON r.id = p.run_id LEFT JOIN workflow_step_runs s ON s.id = ${proposalStepSql("p")}
    WHERE d.id = ?1 AND d.source_type = 'action'`;

/** The send-time check's read (ACTION_GATE_SQL), for the attempt's claim batch. */
function actionGateStatement(db: D1Database, deliveryId: string): D1PreparedStatement {
  return db.prepare(ACTION_GATE_SQL).bind(deliveryId);
}

/**
 * The send-time check of an action delivery (from that read): nothing is sent for a proposal
 * that is no longer open (cancelled), whose run is finished, or whose node has left.
 */
async function actionDeliveryRefusal(env: Env, delivery: { sourceType: string }, found: Record<string, unknown> | undefined): Promise<string | null> {
  if (delivery.sourceType !== "action") return null;
  const row = found as GateRow | undefined;
  if (!row || row.state === "cancelled") return "source_cancelled";
  if (!runFinished(row) && !nodeLeft(row)) return null;
  await cancelLeftover(env.DB, row, row);
  return runFinished(row) ? "run_finished" : "source_cancelled";
}

/**
 * The delivery of a proposal ended: applied or failed, then wake the run. Statements for the
 * delivery batch: the proposal's event. The proposal's state itself moves with the delivery's
 * update in that batch (the `webhook_deliveries_settle_action` trigger, migration 0071: delivered →
 * applied, dead → failed), so the event, guarded on the proposal's new state, follows it and holds
 * once. A proposal cancelled while its request was already in flight and confirmed is recorded as
 * applied: the record follows what the endpoint did.
 */
export async function finishActionDelivery(env: Env, delivery: { sourceId: string; delivered: boolean; at: string; installationId: string }): Promise<D1PreparedStatement[]> {
  const next = delivery.delivered ? "applied" : "failed";
  return [
    auditStatement(
      env.DB,
      {
        installationId: delivery.installationId,
        idempotencyKey: `action_proposal:${delivery.sourceId}:${next}`,
        action: `action.${next}`,
        actor: { type: "system", id: "webhooks" },
        target: { type: "action_proposal", id: delivery.sourceId },
        details: {},
        at: delivery.at,
      },
      { table: "action_proposals", id: delivery.sourceId, where: { state: next, updated_at: delivery.at } },
    ),
  ];
}

/**
 * Wakes the run waiting on a proposal's delivery (after the delivery batch is committed); a
 * cancelled proposal has no one waiting. One read: the proposal with its run's current instance,
 * which the signal goes to (as a task's completion does), so nothing reads the run again.
 */
export async function signalActionDelivery(env: Env, proposalId: string): Promise<void> {
  const row = await env.DB.prepare(`SELECT p.id, p.run_id AS runId, p.state, p.approval_signal AS approvalSignal, p.delivery_signal AS deliverySignal,
      (SELECT COALESCE(r.instance_id, r.id) FROM workflow_runs r WHERE r.id = p.run_id) AS instanceId
    FROM action_proposals p WHERE p.id = ?1`)
    .bind(proposalId)
    .first<Pick<ProposalRow, "id" | "runId" | "state" | "approvalSignal" | "deliverySignal"> & { instanceId: string | null }>();
  // A proposal whose run row is gone has no instance to wake (signalRun answers the same for an unknown run).
  if (row && row.state !== "cancelled" && row.instanceId !== null) await signalRun(env, row.runId, { type: proposalSignal(row, "delivery"), payload: { proposalId } }, row.instanceId);
}

/**
 * What a delivery's source adds to every attempt (inline or from the queue): an action's send-time
 * gate, its proposal's end in the attempt's batch, and the run woken once that committed. Other
 * sources (messages, handoffs, alerts) have none.
 */
export const DELIVERY_SOURCES: DeliverySource = {
  finisher: async (env, delivery) => (delivery.sourceType === "action" ? finishActionDelivery(env, delivery) : []),
  gate: { statement: actionGateStatement, refusal: actionDeliveryRefusal },
  settled: async (env, delivery) => {
    if (delivery.sourceType === "action") await signalActionDelivery(env, delivery.sourceId);
  },
};

/** A proposal's run, for a console user limited to some queues: one those queues hold work of (`runInQueuesSql`). */
const PROPOSAL_RUN_IN_QUEUES = (param: string) =>
  `(${param} IS NULL OR EXISTS (SELECT 1 FROM workflow_runs r WHERE r.id = action_proposals.run_id AND r.installation_id = action_proposals.installation_id AND ${runInQueuesSql("r", param)}))`;

/** The proposal if the actor may see it (another installation's, or one outside a queue-limited user's queues, is null). */
function visibleProposalRow(db: D1Database, actor: Actor, id: string) {
  return db
    .prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE installation_id = ?1 AND id = ?2 AND ${PROPOSAL_RUN_IN_QUEUES("?3")}`)
    .bind(actor.installationId, id, queueLimitOf(actor))
    .first<ProposalRow>();
}

export async function listProposals(env: Env, actor: Actor, options: { state?: string; limit: number }) {
  const { results } = await env.DB.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE installation_id = ?1 AND (?2 IS NULL OR state = ?2) AND ${PROPOSAL_RUN_IN_QUEUES("?4")}
    ORDER BY created_at DESC LIMIT ?3`)
    .bind(actor.installationId, options.state ?? null, options.limit, queueLimitOf(actor))
    .all<ProposalRow>();
  return results.map(serializeProposal);
}

export async function getProposal(env: Env, actor: Actor, id: string) {
  const row = await hotOrArchived(env, actor.installationId, "proposal", id, () => visibleProposalRow(env.DB, actor, id));
  if (!row) throw notFound("action_proposal");
  return serializeProposal(row);
}
