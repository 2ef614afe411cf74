// What people said about an action type's proposals: of its last N decided (approved or
// rejected) proposals, how many were approved. A proposal counts once decided, whatever became of
// its delivery (decided_at is written by the approval or rejection only). The promotion gates of
// triggers (cases/) and of action types read it.

/** An action type's autonomy: 'assisted' until promoted through its gate (action-type-promotion.ts). */
export const ACTION_TYPE_AUTONOMY = ["assisted", "autonomous"] as const;
export type ActionTypeAutonomy = (typeof ACTION_TYPE_AUTONOMY)[number];

export interface DecidedProposals {
  actionType: string;
  /** The window asked for: the last `window` decided proposals. */
  window: number;
  decided: number;
  approved: number;
  rejected: number;
  firstDecidedAt: string | null;
  lastDecidedAt: string | null;
}

/** One requirement of a promotion gate, as a refusal or the audit trail shows it. */
export interface GateRequirement {
  requirement: string;
  /** The action type a per-type requirement is about. */
  actionType?: string;
  required: number;
  /** null when there is nothing to measure yet (e.g. an interval over zero cases). */
  actual: number | null;
  met: boolean;
  [figure: string]: unknown;
}

/**
 * The last `last` decided proposals of an action type (by key), optionally only those of runs of
 * one workflow version, with how many were approved and rejected.
 */
export async function decidedProposals(db: D1Database, installationId: string, actionType: string, options: { last: number; workflowVersionId?: string }): Promise<DecidedProposals> {
  const row = await db
    .prepare(`SELECT COUNT(*) AS decided, COALESCE(SUM(CASE WHEN state = 'rejected' THEN 1 ELSE 0 END), 0) AS rejected,
        MIN(decided_at) AS firstDecidedAt, MAX(decided_at) AS lastDecidedAt
      FROM (SELECT p.state, p.decided_at FROM action_proposals p
        WHERE p.installation_id = ?1 AND p.action_type_key = ?2 AND p.decided_at IS NOT NULL
          AND (?3 IS NULL OR EXISTS (SELECT 1 FROM workflow_runs r WHERE r.id = p.run_id AND r.installation_id = ?1 AND r.workflow_version_id = ?3))
        ORDER BY p.decided_at DESC, p.id DESC LIMIT ?4)`)
    .bind(installationId, actionType, options.workflowVersionId ?? null, options.last)
    .first<{ decided: number; rejected: number; firstDecidedAt: string | null; lastDecidedAt: string | null }>();
  const decided = Number(row?.decided ?? 0);
  const rejected = Number(row?.rejected ?? 0);
  return { actionType, window: options.last, decided, approved: decided - rejected, rejected, firstDecidedAt: row?.firstDecidedAt ?? null, lastDecidedAt: row?.lastDecidedAt ?? null };
}

/**
 * The two requirements over an action type's decided proposals: at least `minDecided` of them, and
 * the lower bound of precision's interval (approved / decided) at least `minPrecisionLow`.
 * `interval` is the caller's (automation's Wilson score interval).
 */
export function precisionRequirements(
  figures: DecidedProposals,
  gate: { minDecidedProposals: number; minPrecisionLow: number },
  interval: (successes: number, trials: number) => { value: number | null; low: number | null; high: number | null },
): GateRequirement[] {
  const precision = interval(figures.approved, figures.decided);
  return [
    { requirement: "decided_proposals", actionType: figures.actionType, required: gate.minDecidedProposals, actual: figures.decided, met: figures.decided >= gate.minDecidedProposals },
    {
      requirement: "precision_low",
      actionType: figures.actionType,
      required: gate.minPrecisionLow,
      actual: precision.low,
      met: precision.low !== null && precision.low >= gate.minPrecisionLow,
      precision: { value: precision.value, low: precision.low, high: precision.high, approved: figures.approved, rejected: figures.rejected, decided: figures.decided },
      window: { last: figures.window, firstDecidedAt: figures.firstDecidedAt, lastDecidedAt: figures.lastDecidedAt },
    },
  ];
}

/**
 * The two requirements over a shadow record compared with people's decisions (a trigger's shadow
 * runs, a rule set's shadow hits): at least `minCompared` comparisons (named `comparedRequirement`),
 * and the lower bound of agreement's interval (agreements / compared) at least `minAgreementLow`.
 * A gate of 0 for both asks for nothing: with nothing compared the bound is unknown, and only a
 * required bound of 0 is met by it. `figures` adds what each requirement reports beside its numbers.
 */
export function agreementRequirements(
  figures: { compared: number; agreements: number; comparedFigures?: Record<string, unknown>; agreementFigures?: Record<string, unknown> },
  gate: { minCompared: number; minAgreementLow: number; comparedRequirement: string },
  interval: (successes: number, trials: number) => { value: number | null; low: number | null; high: number | null },
): GateRequirement[] {
  const agreement = interval(figures.agreements, figures.compared);
  return [
    { requirement: gate.comparedRequirement, required: gate.minCompared, actual: figures.compared, met: figures.compared >= gate.minCompared, ...figures.comparedFigures },
    {
      requirement: "agreement_low",
      required: gate.minAgreementLow,
      actual: agreement.low,
      met: agreement.low === null ? gate.minAgreementLow <= 0 : agreement.low >= gate.minAgreementLow,
      agreement: { value: agreement.value, low: agreement.low, high: agreement.high, agreements: figures.agreements, compared: figures.compared },
      ...figures.agreementFigures,
    },
  ];
}
