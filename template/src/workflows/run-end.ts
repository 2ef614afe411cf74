// What ends with a run: its waits (workflows), its tasks (cases) and its open action proposals
// (enforcement), each cancelled and audited in the batch that moves the run to a terminal state.
// Not reachable from the workflows index (enforcement imports that index), so it may import
// enforcement: the run's routes, the end node's executor and the runtime capability use it.
// `repair_required` is not an end: a repaired run resumes from its waits, tasks and proposals.
import { auditStatement, type AuditEventInput } from "../audit";
import type { Actor } from "../auth";
import { RUN_END_TASKS_SQL, runEndTaskStatements } from "../cases";
import { RUN_END_PROPOSALS_SQL, runEndProposalStatements } from "../enforcement";
import { conflict, notFound } from "../errors";
import { stopInstance } from "./instances";
import { isTerminal, serializeRun } from "./runs";
import { getRunRow, RUN_END_WAITS_SQL, runEndWaitStatements } from "./runs-queries";
import { hotOrArchived } from "../cases";

/**
 * What is still open on the run ?1, as one scalar JSON value `{ waits, tasks, proposals }` (each
 * domain's own lookup, as a list of ids): read by runEndStatements, or folded by the caller into a
 * statement it sends anyway (a fused group that may end the run reads it with its authorization).
 * Each list is wrapped in json(): a subquery's value loses its JSON subtype, and json_object would
 * then hold the list as a string.
 */
export const RUN_END_OPEN_SQL = `json_object('waits', json((SELECT json_group_array(id) FROM (${RUN_END_WAITS_SQL}))), 'tasks', json((SELECT json_group_array(id) FROM (${RUN_END_TASKS_SQL}))),
      'proposals', json((SELECT json_group_array(id) FROM (${RUN_END_PROPOSALS_SQL}))))`;

/**
 * The statements to put in a run's batch after the update that makes it terminal: waits, tasks
 * and open proposals of the run cancelled, each audited. Each holds only if the run is terminal
 * by then in the batch, so a batch whose run update did nothing cancels nothing. `open` is the
 * value of RUN_END_OPEN_SQL when the caller read it already (in the same call).
 */
export async function runEndStatements(
  db: D1Database,
  input: { installationId: string; runId: string; runState: "terminated" | "failed" | "succeeded" | "superseded"; at: string; actor?: AuditEventInput["actor"]; open?: string },
): Promise<D1PreparedStatement[]> {
  const openJson = input.open ?? (await db.prepare(`SELECT ${RUN_END_OPEN_SQL} AS open`).bind(input.runId).first<{ open: string }>())?.open;
  const open = JSON.parse(openJson ?? "{}") as Record<"waits" | "tasks" | "proposals", string[] | string | undefined>;
  const ids = (list: string[] | string | undefined): string[] => (typeof list === "string" ? (JSON.parse(list) as string[]) : (list ?? []));
  return [...(await runEndWaitStatements(db, { ...input, ids: ids(open.waits) })), ...(await runEndTaskStatements(db, { ...input, ids: ids(open.tasks) })), ...(await runEndProposalStatements(db, { ...input, ids: ids(open.proposals) }))];
}

/** Marks the run terminated (cancelling its waits, tasks and open proposals) and then stops its instance. */
export async function terminateRun(env: Env, actor: Actor, runId: string) {
  const run = await hotOrArchived(env, actor.installationId, "run", runId, () => getRunRow(env.DB, actor.installationId, runId));
  if (!run) throw notFound("run");
  if (isTerminal(run.state)) throw conflict("run.terminal", `The run is already ${run.state}.`);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE workflow_runs SET state = 'terminated', finished_at = ?2, updated_at = ?2, revision = revision + 1
      WHERE id = ?1 AND state NOT IN ('succeeded', 'failed', 'terminated', 'superseded')`).bind(run.id, at),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `run:${run.id}:terminated`,
        action: "workflow.run_terminated",
        actor: actor.audit,
        target: { type: "workflow_run", id: run.id },
        details: { previousState: run.state },
        at,
      },
      { table: "workflow_runs", id: run.id, where: { state: "terminated", updated_at: at } },
    ),
    ...(await runEndStatements(env.DB, { installationId: actor.installationId, runId: run.id, runState: "terminated", at, actor: actor.audit })),
  ]);
  // The instance may already have ended or never started; the run row is authoritative.
  await stopInstance(env, run.instanceId);
  return serializeRun((await getRunRow(env.DB, actor.installationId, run.id))!);
}
