// The first-run checklist: each step is read from the installation's own rows in D1,
// never from a flag someone sets, so it is checked off by doing the thing. Read-only; one batch.

/** The steps in the order a new desk does them. */
export const ONBOARDING_STEPS = ["connect_product", "publish_workflow", "send_report", "review_report", "see_action"] as const;
export type OnboardingStep = (typeof ONBOARDING_STEPS)[number];

/**
 * One `EXISTS` per step (and per hint), each bound to the installation (`?1`). "Connect your
 * product" counts a webhook endpoint (a Mastodon connector writes one, `connector://<id>`).
 */
const STEP_SQL: Record<OnboardingStep, string> = {
  connect_product: `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE installation_id = ?1) AS done`,
  publish_workflow: `SELECT EXISTS (SELECT 1 FROM workflow_versions WHERE installation_id = ?1 AND retired_at IS NULL) AS done`,
  send_report: `SELECT EXISTS (SELECT 1 FROM reports WHERE installation_id = ?1) AS done`,
  review_report: `SELECT EXISTS (SELECT 1 FROM human_tasks WHERE installation_id = ?1 AND state = 'completed') AS done`,
  see_action: `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE installation_id = ?1 AND source_type = 'action' AND state = 'delivered') AS done`,
};

/** What the console says next to an open step (a trigger to connect the workflow, a task waiting…). */
const HINT_SQL = {
  triggerEnabled: `SELECT EXISTS (SELECT 1 FROM triggers WHERE installation_id = ?1 AND enabled = 1) AS done`,
  taskWaiting: `SELECT EXISTS (SELECT 1 FROM human_tasks WHERE installation_id = ?1 AND state IN ('open', 'claimed')) AS done`,
  actionTypeExists: `SELECT EXISTS (SELECT 1 FROM action_types WHERE installation_id = ?1) AS done`,
  actionDeliveryPending: `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE installation_id = ?1 AND source_type = 'action' AND state = 'pending') AS done`,
  actionDeliveryDead: `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE installation_id = ?1 AND source_type = 'action' AND state = 'dead') AS done`,
} as const;

/** The installation's checklist: each step done or not, how many are, and hints for the open ones. */
export async function onboardingChecklist(db: D1Database, installationId: string) {
  const hintNames = Object.keys(HINT_SQL) as Array<keyof typeof HINT_SQL>;
  const results = await db.batch<{ done: number }>([...ONBOARDING_STEPS.map((step) => STEP_SQL[step]), ...hintNames.map((hint) => HINT_SQL[hint])].map((sql) => db.prepare(sql).bind(installationId)));
  const flag = (i: number) => results[i]?.results[0]?.done === 1;
  const steps = ONBOARDING_STEPS.map((id, i) => ({ id, done: flag(i) }));
  const completed = steps.filter((s) => s.done).length;
  return {
    steps,
    completed,
    total: steps.length,
    allDone: completed === steps.length,
    hints: Object.fromEntries(hintNames.map((hint, i) => [hint, flag(ONBOARDING_STEPS.length + i)])) as Record<keyof typeof HINT_SQL, boolean>,
  };
}
