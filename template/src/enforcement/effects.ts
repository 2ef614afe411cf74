// The effect nodes other than actions: send_message (signed message.send webhooks), decision
// (recorded with what a DSA statement of reasons needs), handoff (a task in another queue, or a
// signed report.handoff with an evidence bundle and its digest).
import { auditStatement, canonicalJson, type AuditEventInput } from "../audit";
import { contentOf, findQueueRow, openPersonalData, openTaskStatements, TASK_COMPLETED_BY_SQL, taskIdOf, type ReportPersonalData } from "../cases";
import { AppError } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { contentReadStatement, evaluateInputMapping, type AuthorizedRun, type ExpressionContext, type WorkflowNodeV1 } from "../workflows";
import { decisionRecord } from "./decisions";
import { renderTemplate } from "./templates";
import { findEndpointRow, subscribedEndpoints } from "./webhook-endpoints";
import { deliveryStatement } from "./webhooks";
import { reviewerAuditId } from "../lib/person-keys";

export interface EffectCall {
  env: Env;
  run: AuthorizedRun;
  node: WorkflowNodeV1;
  stepId: string;
  context: ExpressionContext;
}

/** What an effect executor hands back: its output, the statements for the step's batch, and deliveries to enqueue after it. */
export interface EffectResult {
  output: Record<string, unknown>;
  statements: D1PreparedStatement[];
  deliveryIds: string[];
}

async function reportPersonalData(env: Env, run: AuthorizedRun): Promise<ReportPersonalData | null> {
  if (!run.reportId) return null;
  const row = await env.DB.prepare(`SELECT personal_data AS sealed FROM reports WHERE id = ?1 AND installation_id = ?2`).bind(run.reportId, run.installationId).first<{ sealed: string }>();
  return row ? openPersonalData<ReportPersonalData>(env, run.installationId, `report:${run.reportId}`, row.sealed) : null;
}

/**
 * send_message: to the reporter, the subject's owner, or a given address. The recipient's
 * personal data is opened here only to go into the sealed delivery payload.
 */
export async function sendWorkflowMessage(call: EffectCall): Promise<EffectResult> {
  const { env, run, node, stepId } = call;
  const values = evaluateInputMapping(node.inputMapping, call.context, node.id);
  const body = renderTemplate(String(node.config.template ?? ""), values, node.id);
  const recipientKind = String(node.config.recipient);
  let recipient: Record<string, unknown>;
  if (recipientKind === "reporter" || recipientKind === "subject_owner") {
    const personal = await reportPersonalData(env, run);
    if (!personal) throw new AppError("message.recipient_unknown", `${node.id} writes to the ${recipientKind}, but the run has no report.`);
    recipient = recipientKind === "reporter" ? { kind: "reporter", id: personal.reporter?.id ?? null, contact: personal.reporter?.contact ?? null } : { kind: "subject_owner", id: personal.subjectOwnerId };
    if (recipientKind === "reporter" && !personal.reporter?.contact && !personal.reporter?.id) throw new AppError("message.recipient_unknown", "The report has no reporter to write to.");
  } else {
    recipient = { kind: "address", contact: recipientKind };
  }
  const endpoints = await subscribedEndpoints(env.DB, run.installationId, "message.send");
  if (endpoints.length === 0) throw new AppError("message.endpoint_missing", "No enabled webhook endpoint subscribes to message.send.");
  const messageId = `${stepId}:message`;
  const at = new Date().toISOString();
  const deliveries = await Promise.all(
    endpoints.map((endpoint) =>
      deliveryStatement(env, {
        installationId: run.installationId,
        endpointId: endpoint.id,
        eventType: "message.send",
        sourceType: "message",
        sourceId: `${messageId}:${endpoint.id}`,
        at,
        data: { messageId, runId: run.id, reportId: run.reportId, recipient, body, templateKey: node.config.template_key ?? null },
      }),
    ),
  );
  return {
    output: { port: "sent", messageId, recipientKind, deliveryIds: deliveries.map((d) => d.id) },
    statements: [
      env.DB.prepare(`INSERT OR IGNORE INTO messages (id, installation_id, run_id, step_run_id, report_id, recipient_kind, template_key, delivery_id, created_at)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`).bind(messageId, run.installationId, run.id, stepId, run.reportId, recipientKind, typeof node.config.template_key === "string" ? node.config.template_key : null, deliveries[0]!.id, at),
      ...deliveries.map((d) => d.statement),
      auditStatement(env.DB, {
        installationId: run.installationId,
        idempotencyKey: `message:${messageId}:queued`,
        action: "message.queued",
        actor: { type: "system", id: "workflow-runtime" },
        target: { type: "message", id: messageId },
        details: { runId: run.id, recipientKind, deliveries: deliveries.map((d) => d.id), bodyDigest: `sha256:${await sha256Hex(body)}` },
        at,
      }),
    ],
    deliveryIds: deliveries.map((d) => d.id),
  };
}

/** decision: records the outcome with everything its DSA statement of reasons needs. */
export async function recordWorkflowDecision(call: EffectCall): Promise<EffectResult> {
  const { env, run, node, stepId } = call;
  const record = await decisionRecord(env, { run, node, stepId, context: call.context });
  // The notifier's message (if any) is delivered after the step's batch; a replay re-queues it (deliveryIds in the output).
  const notified = record.deliveryIds.length > 0 ? { deliveryIds: record.deliveryIds } : {};
  return { output: { port: "recorded", decisionId: record.id, outcome: record.outcome, automatedDecision: record.automatedDecision, ...notified }, statements: record.statements, deliveryIds: record.deliveryIds };
}

/** handoff: a task in another queue, or a signed report.handoff to an external recipient. */
export async function handoffWorkflowReport(call: EffectCall): Promise<EffectResult> {
  const { env, run, node, stepId } = call;
  const handoffId = `${stepId}:handoff`;
  const at = new Date().toISOString();
  const values = evaluateInputMapping(node.inputMapping, call.context, node.id);
  if (typeof node.config.queue_id === "string") {
    const queue = await findQueueRow(env.DB, run.installationId, node.config.queue_id);
    if (!queue) throw new AppError("handoff.queue_unknown", `The handoff queue of ${node.id} does not exist.`);
    const taskId = taskIdOf(stepId);
    return {
      output: { port: "handed_off", handoffId, targetKind: "queue", queueId: queue.id, taskId },
      statements: [
        ...(await openTaskStatements(env, {
          installationId: run.installationId,
          taskId,
          stepId,
          runId: run.id,
          taskType: "handoff",
          queue,
          priority: queue.priority,
          context: { handoffFrom: run.id, note: node.config.note ?? null, ...values },
          responseSchema: node.config.response_schema ?? { type: "object" },
          at,
          expiresAt: null,
        })),
        env.DB.prepare(`INSERT OR IGNORE INTO handoffs (id, installation_id, run_id, step_run_id, report_id, target_kind, queue_id, task_id, created_at)
          VALUES (?1, ?2, ?3, ?4, ?5, 'queue', ?6, ?7, ?8)`).bind(handoffId, run.installationId, run.id, stepId, run.reportId, queue.id, taskId, at),
        auditStatement(env.DB, {
          installationId: run.installationId,
          idempotencyKey: `handoff:${handoffId}:created`,
          action: "report.handed_off",
          actor: { type: "system", id: "workflow-runtime" },
          target: { type: "handoff", id: handoffId },
          details: { runId: run.id, queueId: queue.id, queueName: queue.name, taskId },
          at,
        }),
      ],
      deliveryIds: [],
    };
  }
  const endpointId = String(node.config.endpoint_id ?? node.config.recipient ?? "");
  const endpoint = await findEndpointRow(env.DB, run.installationId, endpointId);
  if (endpoint?.state !== "enabled") throw new AppError("handoff.recipient_unknown", `The handoff recipient of ${node.id} is not an enabled webhook endpoint.`);
  const summary = run.reportId
    ? await env.DB.prepare(`SELECT id, case_id AS caseId, category, subject_kind AS subjectKind, subject_id AS subjectId, created_at AS createdAt FROM reports WHERE id = ?1 AND installation_id = ?2`)
        .bind(run.reportId, run.installationId)
        .first()
    : null;
  // The bundle: the report's summary and what the mapping chose; the whole content only when the
  // handoff asks (include_content), the reporter only when it says so (include_reporter).
  const includeContent = node.config.include_content === true;
  const includeReporter = node.config.include_reporter === true;
  const personal = includeContent || includeReporter ? await reportPersonalData(env, run) : null;
  const evidence = {
    report: summary,
    notes: values,
    runId: run.id,
    ...(includeContent ? { content: personal ? contentOf(personal) : null } : {}),
    ...(includeReporter ? { reporter: personal?.reporter ?? null } : {}),
  };
  const evidenceDigest = `sha256:${await sha256Hex(canonicalJson(evidence))}`;
  const disclosure: D1PreparedStatement[] = [];
  if (personal) disclosure.push(contentReadStatement(env.DB, run, node));
  if (includeReporter && personal?.reporter) {
    disclosure.push(
      auditStatement(env.DB, {
        installationId: run.installationId,
        idempotencyKey: `handoff:${handoffId}:reporter_disclosed`,
        action: "report.reporter_disclosed",
        actor: { type: "system", id: "workflow-runtime" },
        target: { type: "report", id: run.reportId ?? run.id },
        details: { runId: run.id, nodeId: node.id, endpointId: endpoint.id },
        at,
      }),
    );
  }
  const delivery = await deliveryStatement(env, {
    installationId: run.installationId,
    endpointId: endpoint.id,
    eventType: "report.handoff",
    sourceType: "handoff",
    sourceId: handoffId,
    at,
    data: { handoffId, evidence, evidenceDigest },
  });
  return {
    output: { port: "handed_off", handoffId, targetKind: "external", endpointId: endpoint.id, deliveryId: delivery.id, evidenceDigest },
    statements: [
      delivery.statement,
      env.DB.prepare(`INSERT OR IGNORE INTO handoffs (id, installation_id, run_id, step_run_id, report_id, target_kind, delivery_id, evidence_digest, created_at)
        VALUES (?1, ?2, ?3, ?4, ?5, 'external', ?6, ?7, ?8)`).bind(handoffId, run.installationId, run.id, stepId, run.reportId, delivery.id, evidenceDigest, at),
      auditStatement(env.DB, {
        installationId: run.installationId,
        idempotencyKey: `handoff:${handoffId}:created`,
        action: "report.handed_off",
        actor: { type: "system", id: "workflow-runtime" },
        target: { type: "handoff", id: handoffId },
        details: { runId: run.id, endpointId: endpoint.id, evidenceDigest, includesContent: includeContent, includesReporter: includeReporter },
        at,
      }),
      ...disclosure,
    ],
    deliveryIds: [delivery.id],
  };
}

/**
 * For the batch that completes a task a handoff put in a queue: the handoff records who completed
 * it, when, the response's digest and its `outcome` (a string field of the response, if it has
 * one), audited as `handoff.completed`. Nothing else follows: the handoff node already left, so no
 * run waits for it. Written only if the task's completion is in the batch before it.
 */
export function completeHandoffStatements(
  db: D1Database,
  input: { installationId: string; handoffId: string; taskId: string; completedBy: string; outcome: string | null; responseDigest: string; at: string; actor: AuditEventInput["actor"] },
): D1PreparedStatement[] {
  return [
    db
      .prepare(`UPDATE handoffs SET completed_at = ?3, completed_by = ?4, outcome = ?5, response_digest = ?6
        WHERE id = ?1 AND task_id = ?2 AND completed_at IS NULL
          AND EXISTS (SELECT 1 FROM human_tasks WHERE id = ?2 AND state = 'completed' AND ${TASK_COMPLETED_BY_SQL()} = ?4 AND completed_at = ?3)`)
      .bind(input.handoffId, input.taskId, input.at, input.completedBy, input.outcome, input.responseDigest),
    auditStatement(
      db,
      {
        installationId: input.installationId,
        idempotencyKey: `handoff:${input.handoffId}:completed`,
        action: "handoff.completed",
        actor: input.actor,
        target: { type: "handoff", id: input.handoffId },
        details: { taskId: input.taskId, reviewerId: reviewerAuditId(input.installationId, input.completedBy), outcome: input.outcome, responseDigest: input.responseDigest },
        at: input.at,
      },
      { table: "handoffs", id: input.handoffId, where: { completed_at: input.at, completed_by: input.completedBy } },
    ),
  ];
}
