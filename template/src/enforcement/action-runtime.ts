// The workflow runtime's side of an action node (assisted or autonomous): prepareWorkflowAction
// writes the node's proposal — waiting for a person, or with its delivery on its way (first attempt
// from this host) — and completeWorkflowAction reads where it stands after the run's wait (expired,
// failed, or the recorded decision and delivery). People's decisions and the delivery's gate and
// end are actions.ts; cancelling proposals when a run ends or a node leaves, proposal-cancellation.ts.
import { auditStatement, canonicalJson } from "../audit";
import { warmSealingKey } from "../cases";
import { AppError } from "../errors";
import { evaluateInputMapping, type ActionProgress, type AuthorizedRun, type ExpressionContext, type WaitResult, type WorkflowNodeV1 } from "../workflows";
import { TYPE_COLUMNS, type ActionTypeRow } from "./action-types";
import { actionDelivery, DELIVERY_SOURCES, endpointOf, PROPOSAL_COLUMNS, proposalRow, proposalSignal, sendLeased, type ProposalRow } from "./actions";
import { proposalIdOf } from "./proposal-ids";
import { deliverInline, reserveInline, type OutcomeTaker } from "./delivery-inline";
import { attemptEndpointJsonSql } from "./webhooks";

const DEFAULT_APPROVAL_SECONDS = 86_400;
/** How long a run waits for its endpoint to confirm a delivery (retries span hours). */
const DELIVERY_WAIT_MS = 7 * 86_400_000;
/**
 * How long prepare waits for the first attempt it sends itself. Delivered by then, the node takes
 * its `applied` port in this call: no wait, no signal, no second call — and the POST is not slowed
 * by the run's own bookkeeping running beside it in the same process. Otherwise (slower, failed,
 * retried) the run waits for the delivery's signal as before.
 */
const FIRST_ATTEMPT_WAIT_MS = 2_000;

/** Where the run stands on a proposal, in the terms the kernel waits on. */
function progressOf(row: ProposalRow): ActionProgress {
  switch (row.state) {
    case "approval_required":
      return { port: "", status: "approval_required", proposalId: row.id, eventType: proposalSignal(row, "approval"), timeoutMs: Math.max(1_000, Date.parse(row.expiresAt) - Date.now()) };
    case "approved":
    case "delivery_pending":
      return { port: "", status: "delivery_pending", proposalId: row.id, eventType: proposalSignal(row, "delivery"), timeoutMs: DELIVERY_WAIT_MS };
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

/** The action type as prepareWorkflowAction reads it: its row, its run's report's subject and its endpoint (each JSON text or null). */
export type ActionTypeRead = ActionTypeRow & { subjectJson: string | null; endpointJson: string | null };

/**
 * The action type of key `keyParam` for the run `r` (an installation's type, with the subject of
 * the run's report and the type's endpoint), as one JSON value (null: no such type): folded into
 * the run's authorizing statement, so an action's first call reads it in that statement.
 */
export function actionTypeJsonSql(keyParam: string): string {
  return `(SELECT json_object('id', t.id, 'key', t.key, 'name', t.name, 'description', t.description, 'requiresApproval', t.requires_approval,
      'reversible', t.reversible, 'endpointId', t.endpoint_id, 'autonomy', t.autonomy, 'createdAt', t.created_at,
      'subjectJson', (SELECT json_object('kind', p.subject_kind, 'id', p.subject_id) FROM reports p WHERE p.installation_id = r.installation_id AND p.id = r.report_id),
      'endpointJson', ${attemptEndpointJsonSql("r.installation_id", "t.endpoint_id")})
    FROM action_types t WHERE t.installation_id = r.installation_id AND t.key = ${keyParam})`;
}

/** actionTypeJsonSql's value as the row prepareWorkflowAction reads (null: no such type). */
export function foldedActionType(json: string | null): ActionTypeRead | null {
  if (json === null) return null;
  const row = JSON.parse(json) as Omit<ActionTypeRead, "subjectJson" | "endpointJson"> & { subjectJson: unknown; endpointJson: unknown };
  // A nested object arrives as JSON, or as its text where SQLite passed it on as text: the row keeps text.
  const text = (value: unknown) => (value === null || value === undefined ? null : typeof value === "string" ? value : JSON.stringify(value));
  return { ...row, subjectJson: text(row.subjectJson), endpointJson: text(row.endpointJson) };
}

/**
 * Prepares the action of a node (assisted or autonomous): a proposal that waits for approval, or
 * a delivery on its way. Repeating the call returns the proposal's current progress.
 * `typeRead`: the action type as the caller read it in the run's own statement (actionTypeJsonSql),
 * used when the step had no row yet (with one, the proposal is read first, and the type with it).
 */
export async function prepareWorkflowAction(
  env: Env,
  input: {
    run: AuthorizedRun;
    node: WorkflowNodeV1;
    stepId: string;
    context: ExpressionContext;
    /** Whether the step had a row before this call: a proposal is written only with its step's row, so without one there is none to look for. */
    stepRecorded: boolean;
    /** The runtime's statements that write the step's row (which the proposal's id names) and park step and run while the proposal waits, ahead of the proposal in its batch. */
    park: D1PreparedStatement[];
    /**
     * The run's move to waiting, ahead of the proposal too, except while this host awaits the
     * delivery's first attempt: the run then waits only if that attempt is not confirmed in time
     * (a delivery confirmed at once never parks the run).
     */
    parkRun?: D1PreparedStatement[];
    typeRead?: ActionTypeRead | null;
    /** Called once the proposal's batch (with `park`) is written. */
    onCommitted?: () => void;
  },
): Promise<{ progress: ActionProgress; parked: boolean }> {
  const { run, node, stepId } = input;
  const proposalId = proposalIdOf(stepId);
  // The delivery's sealing key is resolved while the reads are in flight (a cache hit in a warm isolate), so sealing after them is CPU only.
  const sealing = run.authorityMode === "autonomous" ? warmSealingKey(env, run.installationId) : undefined;
  // One round trip: the proposal if the step already made it, the action type and the report's subject (for the delivery);
  // none when the step has no row yet and the type was read with the run.
  const folded = !input.stepRecorded && input.typeRead !== undefined;
  const reads = folded
    ? []
    : await env.DB.batch<Record<string, unknown>>([
        ...(input.stepRecorded ? [env.DB.prepare(`SELECT ${PROPOSAL_COLUMNS} FROM action_proposals WHERE id = ?1`).bind(proposalId)] : []),
        env.DB.prepare(`SELECT ${TYPE_COLUMNS}, (SELECT json_object('kind', subject_kind, 'id', subject_id) FROM reports WHERE installation_id = ?1 AND id = ?3) AS subjectJson,
        ${attemptEndpointJsonSql("?1", "action_types.endpoint_id")} AS endpointJson
      FROM action_types WHERE installation_id = ?1 AND key = ?2`).bind(run.installationId, String(node.config.action_type), run.reportId),
      ]);
  await sealing;
  const existing = input.stepRecorded ? (reads[0]!.results[0] as ProposalRow | undefined) : undefined;
  if (existing) return { progress: progressOf(existing), parked: false };
  const typeRow = folded ? (input.typeRead ?? undefined) : (reads.at(-1)!.results[0] as ActionTypeRead | undefined);
  if (!typeRow) throw new AppError("action_type.unknown", `Action type ${String(node.config.action_type)} does not exist in this installation.`);
  // A type read for another node never stands in for this one's.
  if (typeRow.key !== String(node.config.action_type)) throw new AppError("action_type.mismatch", `The action type read is ${typeRow.key}, not the node's ${String(node.config.action_type)}.`);
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
    const expiresAt = new Date(Date.parse(at) + approvalSeconds * 1_000).toISOString();
    const state = needsApproval ? "approval_required" : "delivery_pending";
    // No step_run_id: the id names the step (proposal-ids.ts), so the step row is not kept as an
    // anchor once the run is archived. The id is a function of the step, so its primary key keeps
    // one proposal per step, a row of the earlier form (step_run_id set, same id) included.
    // The run waits from this batch on, unless the first attempt is awaited below.
    const leading = [...input.park, ...(slot ? [] : (input.parkRun ?? []))];
    const [inserted] = await env.DB.batch([
      ...leading,
      env.DB.prepare(`
      INSERT INTO action_proposals (id, installation_id, run_id, node_id, action_type_id, action_type_key, report_id, authority_mode, state,
        params_json, delivery_id, approval_signal, delivery_signal, expires_at, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15)
      ON CONFLICT(id) DO NOTHING
    `).bind(proposalId, run.installationId, run.id, node.id, typeRow.id, typeRow.key, run.reportId, run.authorityMode, state, row.paramsJson, delivery?.id ?? null, "", "", expiresAt, at),
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
    ]).then((written) => written.slice(leading.length));
    input.onCommitted?.();
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
            // Computed from the id (proposalSignal), not stored.
            approvalSignal: "",
            deliverySignal: "",
            expiresAt,
            createdAt: at,
            cancelReason: null,
          }
        : (await proposalRow(env.DB, proposalId))!;
    // The first attempt now, from this host (off the capability's answer); the queue carries retries.
    if (stored.deliveryId && stored.state === "delivery_pending") {
      if (slot && endpoint && delivery && delivery.id === stored.deliveryId) {
        const first = firstAttempt();
        sendLeased(env, { delivery, endpoint, installationId: run.installationId, proposalId, at }, slot, undefined, first.take);
        handed = true;
        if (await first.delivered) return { progress: { port: "applied", status: "applied", proposalId, deliveryId: stored.deliveryId, approvedBy: null }, parked: input.park.length > 0 };
      } else {
        deliverInline(env, [stored.deliveryId], DELIVERY_SOURCES);
      }
    }
    // Not confirmed at once (or not awaited): the run waits for the proposal now.
    if (slot && input.parkRun?.length) await env.DB.batch(input.parkRun);
    return { progress: progressOf(stored), parked: input.park.length > 0 };
  } finally {
    if (!handed) slot?.release();
  }
}

/**
 * The first attempt's outcome, taken while prepare still waits for it (FIRST_ATTEMPT_WAIT_MS):
 * `delivered` resolves true if the delivery was confirmed in time (the outcome is then prepare's,
 * and nobody is signalled), false otherwise (the source is settled as usual: the run is woken).
 */
function firstAttempt(): { take: OutcomeTaker; delivered: Promise<boolean> } {
  let open = true;
  let finish: (delivered: boolean) => void = () => undefined;
  const delivered = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      open = false;
      resolve(false);
    }, FIRST_ATTEMPT_WAIT_MS);
    finish = (value) => {
      clearTimeout(timer);
      resolve(value);
    };
  });
  const take: OutcomeTaker = (outcome) => {
    if (!open) return false;
    open = false;
    finish(outcome.kind === "delivered");
    return outcome.kind === "delivered";
  };
  return { take, delivered };
}

/**
 * After a wait: an approval wait that timed out expires the proposal; a delivery wait that timed
 * out fails it. Otherwise the proposal's recorded state decides (the event only wakes the run).
 */
export async function completeWorkflowAction(env: Env, input: { proposalId: string; eventResult: WaitResult; prefetched?: ProposalRow | null }): Promise<ActionProgress> {
  // The proposal as the caller read it in this call (proposalJsonSql), or read here.
  let row = input.prefetched !== undefined ? input.prefetched : await proposalRow(env.DB, input.proposalId);
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
