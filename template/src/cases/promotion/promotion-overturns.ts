// The live overturn figures of a trigger: of the decisions its runs made since a
// time, how many were overturned. The demotion sweep (promotion-sweep.ts) compares them with the
// trigger's limit; GET /triggers/:id/gate shows them for an autonomous trigger.
import { wilson, type Proportion } from "../../automation";
import { qaDisagreements } from "../qa/qa";

/** The window's start: overturnWindowDays back from `now`, never before the trigger's last mode change. */
export function overturnWindowStart(now: Date, windowDays: number, authorityChangedAt: string | null): string {
  const windowStart = new Date(now.getTime() - windowDays * 86_400_000).toISOString();
  return authorityChangedAt && authorityChangedAt > windowStart ? authorityChangedAt : windowStart;
}

export interface OverturnFigures {
  triggerId: string;
  since: string;
  /** Decisions made by the trigger's runs since `since`. */
  decisions: number;
  /** QA reviews of tasks the trigger's runs created, completed since `since`. */
  qaReviews: number;
  /** decisions + qaReviews: what the rate is over. */
  observations: number;
  /** The sum of every source below. */
  overturned: number;
  sources: { appeals: number; qaDisagreements: number };
  /** overturned / decisions (null with no decisions), with its 95% Wilson interval. */
  rate: number | null;
  interval: Pick<Proportion, "low" | "high">;
}

/** A trigger's runs are those whose idempotency key is `trigger:<id>:…` (triggers/triggers.ts fireTriggers). */
function runKeyRange(triggerId: string): [string, string] {
  return [`trigger:${triggerId}:`, `trigger:${triggerId};`];
}

/**
 * The live overturn figures of a trigger since `since`: decisions made by its runs, and how many
 * were overturned, summed over the sources: appeals overturned, and QA reviews that disagreed.
 */
export async function overturnFigures(env: Env, installationId: string, triggerId: string, since: string): Promise<OverturnFigures> {
  const [from, to] = runKeyRange(triggerId);
  const row = await env.DB.prepare(`
    SELECT COUNT(*) AS decisions,
      COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM appeals a WHERE a.installation_id = ?1 AND a.decision_id = d.id AND a.state = 'overturned') THEN 1 ELSE 0 END), 0) AS overturned
    FROM workflow_runs r JOIN decisions d ON d.run_id = r.id AND d.installation_id = ?1
    WHERE r.installation_id = ?1 AND r.idempotency_key >= ?2 AND r.idempotency_key < ?3 AND d.decided_at >= ?4`)
    .bind(installationId, from, to, since)
    .first<{ decisions: number; overturned: number }>();
  const decisions = Number(row?.decisions ?? 0);
  const appeals = Number(row?.overturned ?? 0);
  // QA: blind second reviews of tasks this trigger's runs created, and how many disagreed with
  // the first answer. Each is one more observation next to the decisions.
  const qa = (await qaDisagreements(env, installationId, since)).filter((row) => row.triggerId === triggerId);
  const qaReviews = qa.reduce((sum, row) => sum + Number(row.reviews ?? 0), 0);
  const qaDisagreed = qa.reduce((sum, row) => sum + Number(row.disagreements ?? 0), 0);
  const observations = decisions + qaReviews;
  const overturned = appeals + qaDisagreed;
  const interval = wilson(Math.min(overturned, observations), observations);
  return {
    triggerId,
    since,
    decisions,
    qaReviews,
    observations,
    overturned,
    sources: { appeals, qaDisagreements: qaDisagreed },
    rate: observations === 0 ? null : overturned / observations,
    interval: { low: interval.low, high: interval.high },
  };
}

/** Past the limit: at least the minimum sample of decisions, and an overturn rate above the maximum. */
export function overturnLimitPassed(figures: OverturnFigures, limit: { maxOverturnRate: number; minOverturnSample: number }): boolean {
  return figures.observations >= limit.minOverturnSample && figures.rate !== null && figures.rate > limit.maxOverturnRate;
}
