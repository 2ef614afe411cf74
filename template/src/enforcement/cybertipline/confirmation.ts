// The two ways to a CyberTipline report, each behind a person's confirmation: the `ncmec_report`
// effect node of a workflow (the person is whoever completed the review task its config names,
// with the confirming outcome; an automation key's answer does not count), and
// `POST /cybertipline/reports` (the person is the authenticated caller: a console user or a
// reviewer's key). Both record the authenticated principal, never a name a client sent.
import { actsAsPerson, reviewerIdentity, type Actor } from "../../auth";
import { getReportRow, TASK_COMPLETED_BY_SQL, taskStepSql } from "../../cases";
import { AppError, notFound } from "../../errors";
import type { AuthorizedRun, WorkflowNodeV1 } from "../../workflows";
import type { EffectCall, EffectResult } from "../effects";
import { createSubmission } from "./submission-create";
import { advanceSubmission, submissionRow, submissionView } from "./submissions";
import { INCIDENT_TYPES, type IncidentType } from "./xml";

export const DEFAULT_INCIDENT_TYPE: IncidentType = "Child Pornography (possession, manufacture, and distribution)";
/** The review task's answer that confirms a report, unless the node's config names another. */
export const DEFAULT_CONFIRM_OUTCOME = "report";

function personRequired(): AppError {
  return new AppError(
    "cybertipline.confirmation_required",
    "A CyberTipline report needs a person's confirmation: the review task must be completed by a console user or a reviewer's key (not an automation key) with the confirming outcome.",
    { status: 403 },
  );
}

/**
 * The confirming task of a run: the latest completed task of the node `confirmation_node`, its
 * principal and whether a person answered. The task's step is the stored one or its id's
 * (taskStepSql); the run is live here (its node is running), so its step rows are in D1.
 */
async function confirmationOf(env: Env, run: AuthorizedRun, node: WorkflowNodeV1): Promise<{ taskId: string; by: string }> {
  const confirmationNode = String(node.config.confirmation_node ?? "");
  const outcome = typeof node.config.confirm_outcome === "string" ? node.config.confirm_outcome : DEFAULT_CONFIRM_OUTCOME;
  const task = await env.DB.prepare(`SELECT t.id, ${TASK_COMPLETED_BY_SQL("t")} AS completedBy, t.completed_by_person AS byPerson, t.response_json AS responseJson
      FROM human_tasks t JOIN workflow_step_runs s ON s.id = ${taskStepSql("t")}
      WHERE t.installation_id = ?1 AND t.run_id = ?2 AND s.node_id = ?3 AND t.state = 'completed' ORDER BY t.completed_at DESC LIMIT 1`)
    .bind(run.installationId, run.id, confirmationNode)
    .first<{ id: string; completedBy: string | null; byPerson: number | null; responseJson: string | null }>();
  if (!task?.completedBy || task.byPerson !== 1) throw personRequired();
  const response = task.responseJson ? (JSON.parse(task.responseJson) as { outcome?: unknown } | null) : null;
  if (response?.outcome !== outcome) throw personRequired();
  return { taskId: task.id, by: task.completedBy };
}

function incidentTypeOf(value: unknown): IncidentType {
  if (value === undefined) return DEFAULT_INCIDENT_TYPE;
  if (typeof value === "string" && (INCIDENT_TYPES as readonly string[]).includes(value)) return value as IncidentType;
  throw new AppError("cybertipline.incident_type_invalid", `incident_type must be one of NCMEC's incident types: ${INCIDENT_TYPES.join("; ")}.`, { status: 422 });
}

/**
 * The `ncmec_report` node: once a person confirmed (checked here, whatever the graph), records the
 * submission for this step (exactly once) and sends it. Leaves by `reported` when NCMEC has the
 * finished report; a transient failure is retried by the step (and by the sweep, from where it
 * stopped); a refusal fails the node with `cybertipline.report_rejected`.
 */
export async function reportToCyberTipline(call: EffectCall): Promise<EffectResult> {
  const { env, run, node, stepId } = call;
  if (!run.reportId) throw new AppError("cybertipline.report_missing", `${node.id} reports a report's files, but the run has no report.`);
  const confirmation = await confirmationOf(env, run, node);
  const created = await createSubmission(env, {
    installationId: run.installationId,
    reportId: run.reportId,
    incidentType: incidentTypeOf(node.config.incident_type),
    confirmedBy: confirmation.by,
    confirmationTaskId: confirmation.taskId,
    actor: { type: "system", id: "workflow-runtime" },
    step: { runId: run.id, stepRunId: stepId },
  });
  const row = await advanceSubmission(env, run.installationId, created.id);
  return {
    output: { port: "reported", submissionId: row.id, ncmecReportId: row.ncmecReportId, fileIds: submissionView(row).files.map((f) => f.fileId), holdId: row.holdId },
    statements: [],
    deliveryIds: [],
  };
}

/** `POST /cybertipline/reports`: the caller, a person, confirms and the report is sent at once (a transient failure leaves it pending for the sweep). */
export async function confirmCyberTiplineReport(env: Env, actor: Actor, input: { reportId: string; incidentType?: string }) {
  // Another installation's report, or one outside a queue-limited user's queues, is a 404 whoever
  // asks; then only a person may confirm.
  const report = await getReportRow(env.DB, actor.installationId, input.reportId);
  if (!report) throw notFound("report");
  const queues = actor.user?.queueIds;
  if (queues) {
    const behind = await env.DB.prepare(`SELECT 1 AS x FROM human_tasks WHERE installation_id = ?1 AND report_id = ?2 AND queue_id IN (SELECT value FROM json_each(?3)) LIMIT 1`)
      .bind(actor.installationId, report.id, JSON.stringify(queues))
      .first();
    if (!behind) throw notFound("report");
  }
  if (!actsAsPerson(actor)) throw personRequired();
  const created = await createSubmission(env, {
    installationId: actor.installationId,
    reportId: input.reportId,
    incidentType: incidentTypeOf(input.incidentType),
    confirmedBy: reviewerIdentity(actor),
    confirmationTaskId: null,
    actor: actor.audit,
  });
  try {
    return submissionView(await advanceSubmission(env, actor.installationId, created.id));
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    if (error.retryable) return submissionView((await submissionRow(env.DB, actor.installationId, created.id))!);
    throw new AppError(error.code, error.message, { status: error.status, details: { ...(error.details as Record<string, unknown> | undefined), submissionId: created.id } });
  }
}
