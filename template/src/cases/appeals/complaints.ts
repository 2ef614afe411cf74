// Complaints (DSA Art. 20): the six-month period from a decision's notice, appeals decided by
// automation, and the decisions an appeal reversed (recorded with the statement's Transparency
// Database uuid, since the database has no update endpoint). Imports nothing from workflows, so
// cases/index.ts can export it to enforcement and the transparency report.
import { auditStatement } from "../../audit";
import { actsAsPerson, type Actor } from "../../auth";
import { AppError } from "../../errors";
import { newId } from "../../lib/crypto";

/** Art. 20(1): complaints are accepted for at least six months after the decision is notified. */
export const COMPLAINT_PERIOD_MONTHS = 6;

/** The last moment a complaint is accepted: six calendar months after the notice (clamped at a month's end). */
export function complaintDeadline(noticeAt: string): string {
  const notice = new Date(noticeAt);
  const deadline = new Date(notice);
  deadline.setUTCDate(1);
  deadline.setUTCMonth(deadline.getUTCMonth() + COMPLAINT_PERIOD_MONTHS);
  const lastDay = new Date(Date.UTC(deadline.getUTCFullYear(), deadline.getUTCMonth() + 1, 0)).getUTCDate();
  deadline.setUTCDate(Math.min(notice.getUTCDate(), lastDay));
  return deadline.toISOString();
}

/**
 * The decision an appeal contests (the one named, or else the report's newest) and when its notice
 * was given: the statement sent to the affected user, or the decision itself when none was sent.
 * Null when the report has no decision yet (an appeal of its handling has no deadline).
 */
async function contestedNotice(db: D1Database, installationId: string, input: { decisionId: string | null; reportId: string }) {
  return db
    .prepare(`
      SELECT d.id AS decisionId, COALESCE(
        (SELECT m.notice_at FROM redress_messages m WHERE m.installation_id = d.installation_id AND m.kind = 'statement_of_reasons' AND m.source_id = d.id),
        d.decided_at) AS noticeAt
      FROM decisions d
      WHERE d.installation_id = ?1 AND (d.id = ?2 OR (?2 IS NULL AND d.report_id = ?3))
      ORDER BY d.decided_at DESC, d.id DESC LIMIT 1`)
    .bind(installationId, input.decisionId, input.reportId)
    .first<{ decisionId: string; noticeAt: string }>();
}

/** 422 `appeal.deadline_passed` when the complaint period of the contested decision is over. */
export async function assertWithinComplaintPeriod(db: D1Database, installationId: string, input: { decisionId: string | null; reportId: string; at: string }): Promise<void> {
  const notice = await contestedNotice(db, installationId, input);
  if (!notice) return;
  const deadline = complaintDeadline(notice.noticeAt);
  if (input.at > deadline) {
    throw new AppError(
      "appeal.deadline_passed",
      `Complaints against decision ${notice.decisionId} were accepted until ${deadline} (${COMPLAINT_PERIOD_MONTHS} months after its notice of ${notice.noticeAt}); the appellant can still turn to an out-of-court dispute settlement body or the courts.`,
      { status: 422, details: [{ path: "$.decisionId", code: "deadline_passed", decisionId: notice.decisionId, noticeAt: notice.noticeAt, deadline }] },
    );
  }
}

/** Whether the actor who resolves an appeal is automation: anything but a person (a console user or a reviewer's key). */
export function resolvesByAutomation(actor: Pick<Actor, "user" | "reviewer">): boolean {
  return !actsAsPerson(actor);
}

/**
 * For a batch: automation proposes an appeal's outcome (written only while the appeal is open with
 * no proposal, and, with `eventId`, only if that workflow event was recorded in the same batch).
 * The appeal stays open; a person confirms it (appeals.ts confirmAppeal) before the appellant is told.
 */
export function proposedOutcomeStatements(
  db: D1Database,
  input: { installationId: string; appealId: string; outcome: string; reason: string | null; proposedBy: string; at: string; actor: Actor["audit"]; eventId?: string; taskId?: string },
): D1PreparedStatement[] {
  const guard = input.eventId ? "AND EXISTS (SELECT 1 FROM workflow_events WHERE installation_id = ?1 AND id = ?7)" : "AND ?7 IS NULL";
  return [
    db
      .prepare(`UPDATE appeals SET proposed_outcome = ?3, outcome_reason = COALESCE(?4, outcome_reason), proposed_by = ?5, proposed_at = ?6, updated_at = ?6
        WHERE installation_id = ?1 AND id = ?2 AND state = 'open' AND proposed_outcome IS NULL ${guard}`)
      .bind(input.installationId, input.appealId, input.outcome, input.reason, input.proposedBy, input.at, input.eventId ?? null),
    auditStatement(
      db,
      {
        installationId: input.installationId,
        idempotencyKey: `appeal:${input.appealId}:outcome_proposed`,
        action: "appeal.outcome_proposed",
        actor: input.actor,
        target: { type: "appeal", id: input.appealId },
        details: { outcome: input.outcome, ...(input.taskId ? { taskId: input.taskId } : {}) },
        at: input.at,
      },
      { table: "appeals", id: input.appealId, where: { installation_id: input.installationId, proposed_at: input.at } },
    ),
  ];
}

/**
 * For the batch that decides an appeal: when it overturned a decision, the reversal, with the
 * decision's Transparency Database uuid if the statement has one by then (else NULL until
 * `decisionReversalUuidStatement`), audited as `decision.reversed`. Written only if the appeal is
 * overturned by then in the batch; idempotent per decision.
 */
export function decisionReversalStatements(
  db: D1Database,
  input: { installationId: string; appealId: string; decisionId: string | null; at: string; actor: { type: "system" | "api_key" | "admin" | "user"; id: string } },
): D1PreparedStatement[] {
  if (!input.decisionId) return [];
  const id = newId("rev");
  return [
    db
      .prepare(`
        INSERT OR IGNORE INTO decision_reversals (id, installation_id, decision_id, appeal_id, statement_uuid, resolved_by_automation, reversed_at)
        SELECT ?1, a.installation_id, a.decision_id, a.id,
          (SELECT s.uuid FROM tdb_submissions s WHERE s.decision_id = a.decision_id AND s.installation_id = a.installation_id), a.resolved_by_automation, ?4
        FROM appeals a WHERE a.installation_id = ?2 AND a.id = ?3 AND a.state = 'overturned' AND a.decision_id IS NOT NULL`)
      .bind(id, input.installationId, input.appealId, input.at),
    auditStatement(
      db,
      {
        installationId: input.installationId,
        idempotencyKey: `decision:${input.decisionId}:reversed`,
        action: "decision.reversed",
        actor: input.actor,
        target: { type: "decision", id: input.decisionId },
        details: { appealId: input.appealId },
        at: input.at,
      },
      { table: "appeals", id: input.appealId, where: { state: "overturned" } },
    ),
  ];
}

/** The decision an appeal contests, if it names one. */
export async function appealDecisionId(db: D1Database, installationId: string, appealId: string): Promise<string | null> {
  const row = await db.prepare(`SELECT decision_id AS decisionId FROM appeals WHERE installation_id = ?1 AND id = ?2`).bind(installationId, appealId).first<{ decisionId: string | null }>();
  return row?.decisionId ?? null;
}

/** Fills in the Transparency Database uuid of a reversed decision's statement once its submission has one. */
export function decisionReversalUuidStatement(db: D1Database, input: { installationId: string; decisionId: string; statementUuid: string }): D1PreparedStatement {
  return db.prepare(`UPDATE decision_reversals SET statement_uuid = ?3 WHERE installation_id = ?1 AND decision_id = ?2 AND statement_uuid IS NULL`).bind(input.installationId, input.decisionId, input.statementUuid);
}

export interface ReversalFigures {
  /** Decisions reversed by an appeal in the period. */
  reversed: number;
  /** Of those, reversed by automation (an API key resolved the appeal). */
  reversedByAutomation: number;
  /** Reversals whose statement has no Transparency Database uuid yet. */
  withoutStatementUuid: number;
}

/** Decisions reversed on appeal in [from, to) (ISO times), for the transparency report. */
export async function decisionReversalFigures(db: D1Database, installationId: string, period: { from: string; to: string }): Promise<ReversalFigures> {
  const row = await db
    .prepare(`SELECT COUNT(*) AS reversed, COALESCE(SUM(resolved_by_automation), 0) AS automated, COALESCE(SUM(CASE WHEN COALESCE(statement_uuid, (SELECT s.uuid FROM tdb_submissions s WHERE s.decision_id = decision_reversals.decision_id AND s.installation_id = decision_reversals.installation_id)) IS NULL THEN 1 ELSE 0 END), 0) AS missing
      FROM decision_reversals WHERE installation_id = ?1 AND reversed_at >= ?2 AND reversed_at < ?3`)
    .bind(installationId, period.from, period.to)
    .first<{ reversed: number; automated: number; missing: number }>();
  return { reversed: Number(row?.reversed ?? 0), reversedByAutomation: Number(row?.automated ?? 0), withoutStatementUuid: Number(row?.missing ?? 0) };
}

/** Complaints decided in [from, to): by outcome, and how many by automation (Art. 20(6); the report counts these). */
export async function complaintResolutionFigures(db: D1Database, installationId: string, period: { from: string; to: string }) {
  const { results } = await db
    .prepare(`SELECT state AS outcome, COUNT(*) AS decided, COALESCE(SUM(resolved_by_automation), 0) AS automated
      FROM appeals WHERE installation_id = ?1 AND state != 'open' AND decided_at >= ?2 AND decided_at < ?3 GROUP BY state ORDER BY state`)
    .bind(installationId, period.from, period.to)
    .all<{ outcome: string; decided: number; automated: number }>();
  return {
    decided: results.reduce((n, r) => n + Number(r.decided), 0),
    decidedByAutomation: results.reduce((n, r) => n + Number(r.automated), 0),
    byOutcome: Object.fromEntries(results.map((r) => [r.outcome, { decided: Number(r.decided), byAutomation: Number(r.automated) }])),
  };
}

/** The reversals of the installation, newest first. */
export async function listDecisionReversals(db: D1Database, installationId: string, limit: number) {
  const { results } = await db
    .prepare(`SELECT id, decision_id AS decisionId, appeal_id AS appealId, COALESCE(statement_uuid, (SELECT s.uuid FROM tdb_submissions s WHERE s.decision_id = decision_reversals.decision_id AND s.installation_id = decision_reversals.installation_id)) AS statementUuid, resolved_by_automation AS automated, reversed_at AS reversedAt
      FROM decision_reversals WHERE installation_id = ?1 ORDER BY reversed_at DESC, id DESC LIMIT ?2`)
    .bind(installationId, limit)
    .all<{ id: string; decisionId: string; appealId: string; statementUuid: string | null; automated: number; reversedAt: string }>();
  return results.map(({ automated, ...row }) => ({ ...row, resolvedByAutomation: automated === 1 }));
}
