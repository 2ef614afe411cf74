// Actions on the team's own product (their types: action-types.ts): proposals that wait for a person (assisted, or
// types that always need approval), and delivery through a signed webhook, confirmed before the
// action counts as applied. The workflow runtime calls prepare/complete; people approve or reject.
import { auditStatement, canonicalJson, type AuditEventInput } from "../audit";
import type { Actor } from "../auth";
import { AppError, conflict, notFound } from "../errors";
import { sha256HexSync } from "../lib/crypto";
import type { RowGuard } from "../lib/d1";
import { evaluateInputMapping, signalRun, TERMINAL_RUN_STATES, type ActionProgress, type AuthorizedRun, type ExpressionContext, type WaitResult, type WorkflowNodeV1 } from "../workflows";
import { deliverInline, deliverLeased, reserveInline, type Defer, type DeliverySource, type InlineSlot } from "./delivery-inline";
import { attemptEndpointJsonSql, deliveryStatement, type AttemptEndpoint, type NewDelivery } from "./webhooks";
import { reviewerAuditId } from "../lib/person-keys";
import { TYPE_COLUMNS, type ActionTypeRow } from "./action-types";

const DEFAULT_APPROVAL_SECONDS = 86_400;
/** How long a run waits for its endpoint to confirm a delivery (retries span hours). */
const DELIVERY_WAIT_MS = 7 * 86_400_000;

interface ProposalRow {
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

const PROPOSAL_COLUMNS = `id, installation_id AS installationId, run_id AS runId, step_run_id AS stepRunId, node_id AS nodeId, action_type_id AS actionTypeId,
  action_type_key AS actionTypeKey, report_id AS reportId, authority_mode AS authorityMode, state, params_json AS paramsJson,
  decided_by AS decidedBy, decided_at AS decidedAt, decision_reason AS decisionReason, delivery_id AS deliveryId,
  approval_signal AS approvalSignal, delivery_signal AS deliverySignal, expires_at AS expiresAt, created_at AS createdAt, cancel_reason AS cancelReason`;

function proposalRow(db: D1Database, id: string) {
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

function signal(proposalId: string, phase: "approval" | "delivery"): string {
  return `p_${sha256HexSync(`${proposalId}:${phase}`).slice(0, 40)}`;
}

/** Where the run stands on a proposal, in the terms the kernel waits on. */
function progressOf(row: ProposalRow): ActionProgress {
  switch (row.state) {
    case "approval_required":
      return { port: "", status: "approval_required", proposalId: row.id, eventType: row.approvalSignal, timeoutMs: Math.max(1_000, Date.parse(row.expiresAt) - Date.now()) };
    case "approved":
    case "delivery_pending":
      return { port: "", status: "delivery_pending", proposalId: row.id, eventType: row.deliverySignal, timeoutMs: DELIVERY_WAIT_MS };
    case "applied":
      return { port: "applied", status: "applied", proposalId: row.id, deliveryId: row.deliveryId, approvedBy: row.decidedBy };
    case "rejected":
      return { port: "rejected", status: "rejected", proposalId: row.id, rejectedBy: row.decidedBy, reason: row.decisionReason };
    case "expired":
      return { port: "expired", status: "expired", proposalId: row.id };
    case "cancelled":
      throw new AppError("action_proposal.cancelled", "The action proposal was cancelled: its node left or its run ended.");
    default:
      throw new AppError("action.delivery_failed", "The action's webhook delivery was dead-lettered.");
  }
}

/** The webhook delivery of an approved (or autonomous) proposal, for the caller's batch. */
async function actionDelivery(
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

/**
 * Prepares the action of a node (assisted or autonomous): a proposal that waits for approval, or
 * a delivery on its way. Repeating the call returns the proposal's current progress.
 */
export async function prepareWorkflowAction(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; stepId: string; context: ExpressionContext }): Promise<ActionProgress> {
  const { run, node, stepId } = input;
  const proposalId = `${stepId}:proposal`;
  // One round trip: the proposal if the step already made it, else the action type and the report's subject (for the delivery).
  const [existingRead, typeRead] = await env.DB.batch<Record<string, unknown>>([
    env.DB.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE id = ?1`).bind(proposalId),
    env.DB.prepare(`SELECT ${TYPE_COLUMNS}, (SELECT json_object('kind', subject_kind, 'id', subject_id) FROM reports WHERE installation_id = ?1 AND id = ?3) AS subjectJson,
        ${attemptEndpointJsonSql("?1", "action_types.endpoint_id")} AS endpointJson
      FROM action_types WHERE installation_id = ?1 AND key = ?2`).bind(run.installationId, String(node.config.action_type), run.reportId),
  ]);
  const existing = existingRead!.results[0] as ProposalRow | undefined;
  if (existing) return progressOf(existing);
  const typeRow = typeRead!.results[0] as (ActionTypeRow & { subjectJson: string | null; endpointJson: string | null }) | undefined;
  if (!typeRow) throw new AppError("action_type.unknown", `Action type ${String(node.config.action_type)} does not exist in this installation.`);
  const params = evaluateInputMapping(node.inputMapping, input.context, node.id);
  // An action type whose autonomy is still assisted (not yet promoted) waits for a person even in an autonomous run.
  const needsApproval = run.authorityMode === "assisted" || typeRow.requiresApproval === 1 || typeRow.autonomy === "assisted";
  const at = new Date().toISOString();
  const approvalSeconds = Number.isInteger(node.config.approval_timeout_seconds) ? Number(node.config.approval_timeout_seconds) : DEFAULT_APPROVAL_SECONDS;
  const row = {
    id: proposalId,
    installationId: run.installationId,
    runId: run.id,
    actionTypeKey: typeRow.key,
    reportId: run.reportId,
    authorityMode: run.authorityMode,
    paramsJson: canonicalJson(params),
  };
  const subject = typeRow.subjectJson === null ? null : (JSON.parse(typeRow.subjectJson) as unknown);
  const endpoint = endpointOf(typeRow);
  // The first attempt is reserved now, so its delivery is written leased to this host (no claim round trip after the commit).
  const slot = !needsApproval && endpoint ? reserveInline(env) : null;
  let handed = false;
  try {
    const delivery = needsApproval ? null : await actionDelivery(env, row, typeRow, null, at, undefined, subject, slot);
    const approvalSignal = signal(proposalId, "approval");
    const deliverySignal = signal(proposalId, "delivery");
    const expiresAt = new Date(Date.parse(at) + approvalSeconds * 1_000).toISOString();
    const state = needsApproval ? "approval_required" : "delivery_pending";
    const [inserted] = await env.DB.batch([
      env.DB.prepare(`
      INSERT INTO action_proposals (id, installation_id, run_id, step_run_id, node_id, action_type_id, action_type_key, report_id, authority_mode, state,
        params_json, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16)
      ON CONFLICT(step_run_id) DO NOTHING
    `).bind(proposalId, run.installationId, run.id, stepId, node.id, typeRow.id, typeRow.key, run.reportId, run.authorityMode, state, row.paramsJson, delivery?.id ?? null, approvalSignal, deliverySignal, expiresAt, at),
      ...(delivery ? [delivery.statement] : []),
      auditStatement(env.DB, {
        installationId: run.installationId,
        idempotencyKey: `action_proposal:${proposalId}:created`,
        action: needsApproval ? "action.proposed" : "action.dispatched",
        actor: { type: "system", id: "workflow-runtime" },
        target: { type: "action_proposal", id: proposalId },
        details: { runId: run.id, nodeId: node.id, actionType: typeRow.key, authorityMode: run.authorityMode, params },
        at,
      }),
    ]);
    // Ours, as written; or, if another call for the step wrote first, that one.
    const stored: ProposalRow =
      (inserted!.meta.changes ?? 0) === 1
        ? {
            ...row,
            stepRunId: stepId,
            nodeId: node.id,
            actionTypeId: typeRow.id,
            state,
            decidedBy: null,
            decidedAt: null,
            decisionReason: null,
            deliveryId: delivery?.id ?? null,
            approvalSignal,
            deliverySignal,
            expiresAt,
            createdAt: at,
            cancelReason: null,
          }
        : (await proposalRow(env.DB, proposalId))!;
    // The first attempt now, from this host (off the capability's answer); the queue carries retries.
    if (stored.deliveryId && stored.state === "delivery_pending") {
      if (slot && endpoint && delivery && delivery.id === stored.deliveryId) {
        sendLeased(env, { delivery, endpoint, installationId: run.installationId, proposalId, at }, slot);
        handed = true;
      } else {
        deliverInline(env, [stored.deliveryId], DELIVERY_SOURCES);
      }
    }
    return progressOf(stored);
  } finally {
    if (!handed) slot?.release();
  }
}

/** The endpoint an action type's read carried (attemptEndpointJsonSql), or null. */
function endpointOf(typeRow: { endpointJson?: string | null }): AttemptEndpoint | null {
  return typeRow.endpointJson ? (JSON.parse(typeRow.endpointJson) as AttemptEndpoint) : null;
}

/** The first attempt of an action delivery this host just committed leased to itself (delivery-inline.ts deliverLeased). */
function sendLeased(env: Env, input: { delivery: NewDelivery; endpoint: AttemptEndpoint; installationId: string; proposalId: string; at: string }, slot: InlineSlot, defer?: Defer): void {
  deliverLeased(env, { delivery: input.delivery, installationId: input.installationId, endpoint: input.endpoint, eventType: "action.execute", sourceType: "action", sourceId: input.proposalId, at: input.at }, slot, DELIVERY_SOURCES, defer);
}

/**
 * After a wait: an approval wait that timed out expires the proposal; a delivery wait that timed
 * out fails it. Otherwise the proposal's recorded state decides (the event only wakes the run).
 */
export async function completeWorkflowAction(env: Env, input: { proposalId: string; eventResult: WaitResult }): Promise<ActionProgress> {
  let row = await proposalRow(env.DB, input.proposalId);
  if (!row) throw new AppError("action_proposal.missing", "The action proposal does not exist.");
  if (input.eventResult.status === "timed_out" && (row.state === "approval_required" || row.state === "delivery_pending")) {
    const at = new Date().toISOString();
    const next = row.state === "approval_required" ? "expired" : "failed";
    await env.DB.batch([
      env.DB.prepare(`UPDATE action_proposals SET state = ?2, updated_at = ?3 WHERE id = ?1 AND state = ?4`).bind(row.id, next, at, row.state),
      auditStatement(env.DB, {
        installationId: row.installationId,
        idempotencyKey: `action_proposal:${row.id}:${next}`,
        action: `action.${next}`,
        actor: { type: "system", id: "workflow-runtime" },
        target: { type: "action_proposal", id: row.id },
        details: { runId: row.runId },
        at,
      }),
    ]);
    row = (await proposalRow(env.DB, row.id))!;
  }
  return progressOf(row);
}

/** States in which a proposal can still lead to a delivery: waiting for a person, or approved and not yet confirmed. */
const OPEN_PROPOSAL_STATES = ["approval_required", "approved", "delivery_pending"] as const;
const OPEN_STATES_SQL = OPEN_PROPOSAL_STATES.map((state) => `'${state}'`).join(", ");
const TERMINAL_STATES_SQL = TERMINAL_RUN_STATES.map((state) => `'${state}'`).join(", ");
/** States of a step whose node has left it (its port was taken, or it failed). */
const LEFT_STEP_STATES_SQL = "'succeeded', 'failed', 'timed_out'";

export type ProposalCancelReason = "run_terminated" | "run_failed" | "run_succeeded" | "run_superseded" | "node_error_port" | "node_failed";

type AuditActor = AuditEventInput["actor"];

function cancelAudit(db: D1Database, input: { installationId: string; proposalId: string; runId: string; reason: ProposalCancelReason; at: string; actor?: AuditActor }): D1PreparedStatement {
  return auditStatement(
    db,
    {
      installationId: input.installationId,
      idempotencyKey: `action_proposal:${input.proposalId}:cancelled`,
      action: "action.cancelled",
      actor: input.actor ?? { type: "system", id: "workflow-runtime" },
      target: { type: "action_proposal", id: input.proposalId },
      details: { runId: input.runId, reason: input.reason },
      at: input.at,
    },
    // Written only if this batch cancelled it (a proposal decided or delivered first is not).
    { table: "action_proposals", id: input.proposalId, where: { state: "cancelled", cancel_reason: input.reason, updated_at: input.at } },
  );
}

/**
 * For the batch that sends a node to its error port (or fails it): the node's proposal, if still
 * open, is cancelled and audited, so it can no longer be approved and its delivery is never sent.
 * The proposal of a step is `${stepId}:proposal`; a node that made none writes nothing.
 */
export function cancelStepProposalStatements(db: D1Database, input: { installationId: string; runId: string; stepId: string; reason: "node_error_port" | "node_failed"; at: string }): D1PreparedStatement[] {
  const proposalId = `${input.stepId}:proposal`;
  return [
    db.prepare(`UPDATE action_proposals SET state = 'cancelled', cancel_reason = ?2, updated_at = ?3 WHERE id = ?1 AND state IN (${OPEN_STATES_SQL})`).bind(proposalId, input.reason, input.at),
    cancelAudit(db, { installationId: input.installationId, proposalId, runId: input.runId, reason: input.reason, at: input.at }),
  ];
}

/**
 * For the batch that ends a run (after its state change): every open proposal of the run is
 * cancelled, each with its audit event. The update holds only once the run is terminal in that
 * batch, so the statements are harmless in a batch whose run update did nothing. Not for
 * `repair_required`: a repaired run resumes from its proposals.
 */
export async function runEndProposalStatements(
  db: D1Database,
  input: { installationId: string; runId: string; runState: "terminated" | "failed" | "succeeded" | "superseded"; at: string; actor?: AuditActor },
): Promise<D1PreparedStatement[]> {
  const reason = `run_${input.runState}` as ProposalCancelReason;
  const { results } = await db.prepare(`SELECT id FROM action_proposals WHERE run_id = ?1 AND state IN (${OPEN_STATES_SQL})`).bind(input.runId).all<{ id: string }>();
  if (results.length === 0) return [];
  return [
    db
      .prepare(`UPDATE action_proposals SET state = 'cancelled', cancel_reason = ?2, updated_at = ?3
        WHERE run_id = ?1 AND state IN (${OPEN_STATES_SQL}) AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND state IN (${TERMINAL_STATES_SQL}))`)
      .bind(input.runId, reason, input.at),
    ...results.map((row) => cancelAudit(db, { installationId: input.installationId, proposalId: row.id, runId: input.runId, reason, at: input.at, ...(input.actor ? { actor: input.actor } : {}) })),
  ];
}

interface ProposalStanding {
  runState: string;
  stepState: string | null;
}

function standingOf(db: D1Database, row: ProposalRow): Promise<ProposalStanding | null> {
  return db.prepare(`SELECT r.state AS runState, s.state AS stepState FROM workflow_runs r LEFT JOIN workflow_step_runs s ON s.id = ?2 WHERE r.id = ?1`).bind(row.runId, row.stepRunId).first<ProposalStanding>();
}

/**
 * A proposal still open although its run ended or its node left (a batch that did not cancel it,
 * e.g. the host's `failed`): cancelled, with its audit event, when a decision or a send finds it.
 */
async function cancelLeftover(db: D1Database, row: { id: string; installationId: string; runId: string; stepRunId: string; state: string }, standing: ProposalStanding | null): Promise<void> {
  if (!standing || !(OPEN_PROPOSAL_STATES as readonly string[]).includes(row.state)) return;
  const at = new Date().toISOString();
  if (runFinished(standing)) {
    await db.batch(await runEndProposalStatements(db, { installationId: row.installationId, runId: row.runId, runState: standing.runState as "terminated" | "failed" | "succeeded" | "superseded", at }));
  } else {
    const reason = standing.runState === "repair_required" ? "node_failed" : "node_error_port";
    await db.batch(cancelStepProposalStatements(db, { installationId: row.installationId, runId: row.runId, stepId: row.stepRunId, reason, at }));
  }
}

const runFinished = (standing: ProposalStanding | null) => !standing || (TERMINAL_RUN_STATES as readonly string[]).includes(standing.runState);
const nodeLeft = (standing: ProposalStanding | null) => standing?.stepState === "succeeded" || standing?.stepState === "failed" || standing?.stepState === "timed_out";

/**
 * Approve (→ delivery) or reject a proposal that waits for a person. A second decision is a 409;
 * so is a decision on a proposal whose run is finished (`action_proposal.run_finished`) or whose
 * node has left (`action_proposal.cancelled`), and then nothing is queued. The update is
 * conditional on the run and the step still being live, and the delivery row on that update, so
 * a run that ends concurrently leaves no delivery behind.
 */
export async function decideProposal(env: Env, actor: Actor, proposalId: string, input: { approve: boolean; reason?: string; approver?: string }, defer?: Defer) {
  const row = await env.DB.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, proposalId).first<ProposalRow>();
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
  const who = input.approver ?? actor.audit.id;
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
  await signalProposal(env, row.runId, row.approvalSignal, proposalId);
  return serializeProposal((await proposalRow(env.DB, proposalId))!);
}

/** Wakes a run on a proposal's signal; a run whose instance is no longer live (e.g. repair_required) reads the proposal when it resumes. */
async function signalProposal(env: Env, runId: string, type: string, proposalId: string): Promise<void> {
  await signalRun(env, runId, { type, payload: { proposalId } });
}

type GateRow = { id: string; installationId: string; runId: string; stepRunId: string; state: string } & ProposalStanding;

/** What the send-time check reads of an action delivery's proposal, run and step (for the attempt's claim batch). */
function actionGateStatement(db: D1Database, deliveryId: string): D1PreparedStatement {
  return db
    .prepare(`
    SELECT p.id, p.installation_id AS installationId, p.run_id AS runId, p.step_run_id AS stepRunId, p.state, r.state AS runState, s.state AS stepState
    FROM webhook_deliveries d JOIN action_proposals p ON p.id = d.source_id JOIN workflow_runs r ON r.id = p.run_id LEFT JOIN workflow_step_runs s ON s.id = p.step_run_id
    WHERE d.id = ?1 AND d.source_type = 'action'`)
    .bind(deliveryId);
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
 * delivery batch. A proposal cancelled while its request was already in flight and confirmed is
 * recorded as applied: the record follows what the endpoint did.
 */
export async function finishActionDelivery(env: Env, delivery: { sourceId: string; delivered: boolean; at: string; installationId: string }): Promise<D1PreparedStatement[]> {
  const next = delivery.delivered ? "applied" : "failed";
  return [
    env.DB.prepare(`UPDATE action_proposals SET state = ?2, updated_at = ?3 WHERE id = ?1 AND state IN ('delivery_pending', 'approved'${delivery.delivered ? ", 'cancelled'" : ""})`).bind(delivery.sourceId, next, delivery.at),
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

/** Wakes the run waiting on a proposal's delivery (after the delivery batch is committed); a cancelled proposal has no one waiting. */
export async function signalActionDelivery(env: Env, proposalId: string): Promise<void> {
  const row = await proposalRow(env.DB, proposalId);
  if (row && row.state !== "cancelled") await signalProposal(env, row.runId, row.deliverySignal, proposalId);
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

export async function listProposals(env: Env, actor: Actor, options: { state?: string; limit: number }) {
  const { results } = await env.DB.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE installation_id = ?1 AND (?2 IS NULL OR state = ?2)
    ORDER BY created_at DESC LIMIT ?3`)
    .bind(actor.installationId, options.state ?? null, options.limit)
    .all<ProposalRow>();
  return results.map(serializeProposal);
}

export async function getProposal(env: Env, actor: Actor, id: string) {
  const row = await env.DB.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<ProposalRow>();
  if (!row) throw notFound("action_proposal");
  return serializeProposal(row);
}
