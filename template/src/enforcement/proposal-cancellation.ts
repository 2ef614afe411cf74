// Cancelling action proposals that can no longer lead to a delivery: every open proposal of a run
// that ends (runEndProposalStatements), the proposal of a node sent to its error port or failed
// (cancelStepProposalStatements), each with its audit event in the caller's batch; and a leftover
// still open under a finished run or a left node, cancelled when a decision or a send finds it
// (cancelLeftover, from the run's and step's standing).
import { auditStatement, type AuditEventInput } from "../audit";
import { TERMINAL_RUN_STATES } from "../workflows";
import { proposalIdOf } from "./proposal-ids";

/** States in which a proposal can still lead to a delivery: waiting for a person, or approved and not yet confirmed. */
const OPEN_PROPOSAL_STATES = ["approval_required", "approved", "delivery_pending"] as const;
const OPEN_STATES_SQL = OPEN_PROPOSAL_STATES.map((state) => `'${state}'`).join(", ");
export const TERMINAL_STATES_SQL = TERMINAL_RUN_STATES.map((state) => `'${state}'`).join(", ");
/** States of a step whose node has left it (its port was taken, or it failed). */
export const LEFT_STEP_STATES_SQL = "'succeeded', 'failed', 'timed_out'";

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
 * The proposal of a step is `${stepId}:proposal` (proposalIdOf); a node that made none writes nothing.
 */
export function cancelStepProposalStatements(db: D1Database, input: { installationId: string; runId: string; stepId: string; reason: "node_error_port" | "node_failed"; at: string }): D1PreparedStatement[] {
  const proposalId = proposalIdOf(input.stepId);
  return [
    db.prepare(`UPDATE action_proposals SET state = 'cancelled', cancel_reason = ?2, updated_at = ?3 WHERE id = ?1 AND state IN (${OPEN_STATES_SQL})`).bind(proposalId, input.reason, input.at),
    cancelAudit(db, { installationId: input.installationId, proposalId, runId: input.runId, reason: input.reason, at: input.at }),
  ];
}

/** The proposals a run's end cancels (?1 the run): what runEndProposalStatements reads when not given `ids`. */
export const RUN_END_PROPOSALS_SQL = `SELECT id FROM action_proposals WHERE run_id = ?1 AND state IN (${OPEN_STATES_SQL})`;

/**
 * For the batch that ends a run (after its state change): every open proposal of the run is
 * cancelled, each with its audit event. The update holds only once the run is terminal in that
 * batch, so the statements are harmless in a batch whose run update did nothing. Not for
 * `repair_required`: a repaired run resumes from its proposals.
 */
export async function runEndProposalStatements(
  db: D1Database,
  input: { installationId: string; runId: string; runState: "terminated" | "failed" | "succeeded" | "superseded"; at: string; actor?: AuditActor; ids?: string[] },
): Promise<D1PreparedStatement[]> {
  const reason = `run_${input.runState}` as ProposalCancelReason;
  const results = input.ids ? input.ids.map((id) => ({ id })) : (await db.prepare(RUN_END_PROPOSALS_SQL).bind(input.runId).all<{ id: string }>()).results;
  if (results.length === 0) return [];
  return [
    db
      .prepare(`UPDATE action_proposals SET state = 'cancelled', cancel_reason = ?2, updated_at = ?3
        WHERE run_id = ?1 AND state IN (${OPEN_STATES_SQL}) AND EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1 AND state IN (${TERMINAL_STATES_SQL}))`)
      .bind(input.runId, reason, input.at),
    ...results.map((row) => cancelAudit(db, { installationId: input.installationId, proposalId: row.id, runId: input.runId, reason, at: input.at, ...(input.actor ? { actor: input.actor } : {}) })),
  ];
}

/**
 * Where a proposal's run and step stand. The step's state matters only while the run is live
 * (runFinished answers first): an ended run's step rows leave D1 with its archive, and a proposal's
 * step row stays only for a proposal of the form before migration 0067 (its foreign key), so for an
 * archived run `stepState` may be null — the run has ended with nothing live, and that is the answer.
 */
export interface ProposalStanding {
  runState: string;
  stepState: string | null;
}

/** The standing of a proposal's run and step (`stepRunId`: the proposal's step, as PROPOSAL_COLUMNS derives it); null when the run is gone. */
export function standingOf(db: D1Database, row: { runId: string; stepRunId: string }): Promise<ProposalStanding | null> {
  return db.prepare(`SELECT r.state AS runState, s.state AS stepState FROM workflow_runs r LEFT JOIN workflow_step_runs s ON s.id = ?2 WHERE r.id = ?1`).bind(row.runId, row.stepRunId).first<ProposalStanding>();
}

/**
 * A proposal still open although its run ended or its node left (a batch that did not cancel it,
 * e.g. the host's `failed`): cancelled, with its audit event, when a decision or a send finds it.
 */
export async function cancelLeftover(db: D1Database, row: { id: string; installationId: string; runId: string; stepRunId: string; state: string }, standing: ProposalStanding | null): Promise<void> {
  if (!standing || !(OPEN_PROPOSAL_STATES as readonly string[]).includes(row.state)) return;
  const at = new Date().toISOString();
  if (runFinished(standing)) {
    await db.batch(await runEndProposalStatements(db, { installationId: row.installationId, runId: row.runId, runState: standing.runState as "terminated" | "failed" | "succeeded" | "superseded", at }));
  } else {
    const reason = standing.runState === "repair_required" ? "node_failed" : "node_error_port";
    await db.batch(cancelStepProposalStatements(db, { installationId: row.installationId, runId: row.runId, stepId: row.stepRunId, reason, at }));
  }
}

export const runFinished = (standing: ProposalStanding | null) => !standing || (TERMINAL_RUN_STATES as readonly string[]).includes(standing.runState);
export const nodeLeft = (standing: ProposalStanding | null) => standing?.stepState === "succeeded" || standing?.stepState === "failed" || standing?.stepState === "timed_out";
