// What authority a run may take that the platform did not start for itself: a run started by hand
// (POST /runs) or by a detection rule stays at or below the highest mode a trigger runs its version
// in, the mode the workflow's promotion gate has earned; and the Idempotency-Key prefixes the
// platform names its own runs with are not a client's to use.
import type { Actor } from "../auth";
import { AppError } from "../errors";
import type { WorkflowAuthorityMode } from "./types";

/** Idempotency-Key prefixes the platform gives its own runs: a trigger's, a backtest's, a linked workflow's, an account sanction's, a bulk action's, a detection rule's. */
export const RESERVED_RUN_KEY_PREFIXES = ["trigger:", "backtest:", "linked:", "account_sanction:", "bulk_action:", "rule:"] as const;
const MODE_ORDER = ["off", "shadow", "assisted", "autonomous"] as const;

/**
 * What `POST /runs` may not do that the platform's own runs do: use a reserved Idempotency-Key
 * prefix (422 `run.idempotency_key_reserved`: the overturn figures count `trigger:<id>:` runs as the
 * trigger's), or run a version that a trigger starts in a mode above that trigger's (403
 * `run.authority_above_trigger`: a promotion gate stands where it stands, whoever starts the run).
 */
export async function assertManualRunAllowed(db: D1Database, actor: Actor, input: { workflowVersionId: string; authorityMode: string; idempotencyKey?: string }): Promise<void> {
  const reserved = RESERVED_RUN_KEY_PREFIXES.find((prefix) => input.idempotencyKey?.startsWith(prefix));
  if (reserved) {
    throw new AppError("run.idempotency_key_reserved", `Idempotency-Key may not start with "${reserved}": the platform names its own runs so. Use a key of your own.`, {
      status: 422,
      details: [{ path: "$headers.idempotency-key", code: "reserved" }],
    });
  }
  const highest = await triggerCeiling(db, actor.installationId, input.workflowVersionId);
  const asked = MODE_ORDER.indexOf(input.authorityMode as (typeof MODE_ORDER)[number]);
  if (highest !== null && asked > highest) {
    throw new AppError(
      "run.authority_above_trigger",
      `A trigger runs this version at most in ${MODE_ORDER[highest]} mode (its promotion gate); a run started by hand may not go above that. Start it in ${MODE_ORDER[highest]} mode or lower, or promote the trigger.`,
      { status: 403, details: [{ path: "$.authorityMode", code: "authority_above_trigger", highest: MODE_ORDER[highest] }] },
    );
  }
}

/** The highest mode a trigger runs the version in (as an index of MODE_ORDER), or null when no trigger runs it: no run the platform starts for anyone else goes above it. */
async function triggerCeiling(db: D1Database, installationId: string, workflowVersionId: string): Promise<number | null> {
  const row = await db
    .prepare(`SELECT MAX(CASE authority_mode WHEN 'off' THEN 0 WHEN 'shadow' THEN 1 WHEN 'assisted' THEN 2 ELSE 3 END) AS highest FROM triggers WHERE installation_id = ?1 AND workflow_version_id = ?2`)
    .bind(installationId, workflowVersionId)
    .first<{ highest: number | null }>();
  return row?.highest ?? null;
}

/**
 * `mode`, lowered to the highest mode a trigger runs the version in, if a trigger runs it: the
 * mode a detection rule's run takes (a rule set's autonomy is measured on its own hits, not on the
 * workflow's, whose promotion gate stands where it stands, whoever starts the run).
 */
export async function modeUnderTriggers(db: D1Database, installationId: string, workflowVersionId: string, mode: WorkflowAuthorityMode): Promise<WorkflowAuthorityMode> {
  const highest = await triggerCeiling(db, installationId, workflowVersionId);
  const asked = MODE_ORDER.indexOf(mode);
  return highest !== null && asked > highest ? MODE_ORDER[highest]! : mode;
}
