// Decisions: recorded by a workflow node or a person (POST /decisions), with what goes out in the
// same batch (the affected user's statement, the notifier's outcome, the Transparency Database queue).
// The statement of reasons itself is statement-of-reasons.ts's.
import { settleDecisionAccount, strikeAccrualStatement } from "../accounts";
import { auditStatement, canonicalJson } from "../audit";
import { actsAsPerson, type Actor } from "../auth";
import { getReportRow, normalizeCategory, reportSummary } from "../cases";
import { AppError, notFound } from "../errors";
import { newId } from "../lib/crypto";
import { decisionConfigProblems, restrictsAnything, type Restrictions } from "../lib/dsa-vocabulary";
import { evaluateInputMapping, type AuthorizedRun, type ExpressionContext, type WorkflowNodeV1 } from "../workflows";
import { affectedUserStatements } from "./affected-user";
import { noticeDecisionStatements } from "./notifier-messages";
import { renderTemplate } from "./templates";
import { enqueueDeliveries } from "./webhooks";
import { reviewerAuditId } from "../lib/person-keys";
import { sorFields, statementOfReasonsOf } from "./statement-of-reasons";
import { queueSubmissionStatement } from "./transparency-db";
import { hotOrArchived } from "../cases";

function invalid(nodeId: string, message: string): AppError {
  return new AppError("decision.config_invalid", `Decision ${nodeId}: ${message}`);
}

interface DecisionSource {
  installationId: string;
  reportId: string | null;
  runId: string | null;
  stepId: string | null;
  /** The run's authority mode; null for a decision a person recorded directly. */
  authorityMode: string | null;
  label: string;
  config: Record<string, unknown>;
  values: Record<string, unknown>;
  actor: { type: "system" | "api_key" | "admin" | "user"; id: string };
  /** Where a config path is in the caller's input (POST /decisions names fields in camelCase at the top). */
  inputPath?: (configPath: string) => string;
  /** A name the caller stated (free text, not authenticated): recorded beside the actor, never as it. */
  statedName?: string;
  /** For a decision recorded directly (no run): whether a person recorded it (a console user or a reviewer's key), not automation. */
  byPerson?: boolean;
}

/** Builds the decision row and its audit event (for the caller's batch) from a config and template values. */
async function decisionStatements(env: Env, source: DecisionSource) {
  const { config, values, label } = source;
  // The same check the decision node's descriptor runs at publish; here it guards POST /decisions too.
  const problems = decisionConfigProblems(config);
  if (problems.length > 0) {
    throw new AppError("decision.config_invalid", `Decision ${label}: ${problems.map((p) => p.message).join(" ")}`, {
      status: 422,
      details: problems.map((p) => ({ ...p, path: source.inputPath ? source.inputPath(p.path) : p.path, code: "config_invalid" })),
    });
  }
  const outcome = config.outcome as string;
  const reportRow = source.reportId ? await getReportRow(env.DB, source.installationId, source.reportId) : null;
  // A decision is recorded only on a report of its own installation.
  if (source.reportId && !reportRow) throw notFound("report");
  const report = reportRow ? reportSummary(reportRow) : null;
  // The subject decided: the report's; without a report, the one the node names (inputMapping
  // subject_kind and subject_id, as a bulk action's carrier does for a subject nobody reported).
  const named = (key: string) => (typeof values[key] === "string" && (values[key] as string).length > 0 ? (values[key] as string) : null);
  const subject = report?.subject ?? (named("subject_kind") && named("subject_id") ? { kind: named("subject_kind")!, id: named("subject_id")! } : null);
  const category = normalizeCategory(String(config.policy_category ?? report?.category ?? ""));
  if (!category) throw invalid(label, "config.policy_category (or the run's report) must give a DSA category.");
  const ground = config.ground === "illegal_content" ? "illegal_content" : "incompatible_content";
  // No restriction at all: a decision not to act (no statement of reasons; the text is an optional note).
  const restricts = restrictsAnything(config.restrictions);
  const restrictions = (restricts ? config.restrictions : {}) as Restrictions;
  const explanation = renderTemplate(String(config.explanation ?? config.statement ?? ""), values, label);
  const statement = renderTemplate(String(config.statement ?? config.explanation ?? ""), values, label);
  if (restricts && (!explanation.trim() || !statement.trim())) throw invalid(label, "config.statement (the facts and circumstances) is required, and not only blanks.");
  if (statement.length > 5000) throw invalid(label, "the statement exceeds the 5,000 characters a statement of reasons allows.");
  const contentTypes = Array.isArray(config.content_type) ? config.content_type.map(String) : ["text"];
  const scope = Array.isArray(config.territorial_scope) ? config.territorial_scope.map(String) : null;
  let automatedDecision: string;
  if (typeof config.automated_decision === "string" && ["fully", "partially", "not_automated"].includes(config.automated_decision)) automatedDecision = config.automated_decision;
  // Recorded directly: a person's decision, unless an automation key (not a reviewer's) recorded it.
  else if (source.authorityMode === null) automatedDecision = source.byPerson === false ? "fully" : "not_automated";
  else {
    // A person decided if a person (a console user or a reviewer's key, never an automation key)
    // completed a review task of this run; otherwise automation did. (A golden copy of one of its
    // tasks only measures a reviewer: it decides nothing.)
    // The run's tasks through human_tasks_run (the unary + keeps the planner off a walk of the installation's tasks).
    const reviewed = await env.DB.prepare(`SELECT 1 AS x FROM human_tasks WHERE run_id = ?2 AND +installation_id = ?1 AND state = 'completed' AND origin = 'workflow' AND completed_by_person = 1 LIMIT 1`)
      .bind(source.installationId, source.runId)
      .first();
    automatedDecision = reviewed ? "not_automated" : source.authorityMode === "assisted" ? "partially" : "fully";
  }
  const reportSource = report?.source ?? "voluntary";
  const at = new Date().toISOString();
  // Detected by automation (Art. 17(3)(c)): as the config or the caller says; otherwise only an
  // own-initiative report that automation also decided. Whatever a person decided on their own
  // initiative was found by people unless they say otherwise; a notice was found by its notifier.
  const automatedDetection = typeof config.automated_detection === "boolean" ? config.automated_detection : reportSource === "voluntary" && automatedDecision !== "not_automated";
  // The ground relied on: the law (illegal content) or the clause of the terms and conditions
  // (incompatible content, Art. 17(3)(e)), both kept in legal_ground, trimmed.
  const legalGround = ground === "illegal_content" ? trimmed(config.legal_ground) : trimmed(config.contractual_ground);
  // The content's own date where the caller or the graph knows it; else the report's (the content existed by then).
  const contentDate = contentDateOf(config.content_date === undefined ? undefined : renderTemplate(String(config.content_date), values, label), label, report?.createdAt ?? at);
  const id = newId("dec");
  const statements = [
    env.DB.prepare(`
      INSERT INTO decisions (id, installation_id, run_id, step_run_id, report_id, case_id, subject_kind, subject_id, policy_category, category_specification_json,
        outcome, ground, legal_ground, explanation, restrictions_json, content_type_json, territorial_scope_json, statement_text, source_type,
        automated_detection, automated_decision, content_date, decided_at, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?23)
      ON CONFLICT(step_run_id) DO NOTHING
    `).bind(
      id,
      source.installationId,
      source.runId,
      source.stepId,
      source.reportId,
      report?.caseId ?? null,
      subject?.kind ?? null,
      subject?.id ?? null,
      category,
      JSON.stringify(report?.categorySpecification ?? []),
      outcome,
      ground,
      legalGround,
      explanation,
      canonicalJson(restrictions),
      JSON.stringify(contentTypes),
      scope ? JSON.stringify(scope) : null,
      statement,
      reportSource,
      automatedDetection ? 1 : 0,
      automatedDecision,
      contentDate,
      at,
    ),
    auditStatement(env.DB, {
      installationId: source.installationId,
      idempotencyKey: source.stepId ? `decision:${source.stepId}:recorded` : `decision:${id}:recorded`,
      action: "decision.recorded",
      actor: source.actor,
      target: { type: "decision", id },
      details: { runId: source.runId, reportId: source.reportId, outcome, restricts, category, automatedDecision, ...(source.statedName ? { decidedByStatedId: reviewerAuditId(source.installationId, source.statedName) } : {}) },
      at,
    }),
  ];
  // DSA Art. 17: the affected user's statement, in the same batch (written only with the decision).
  const affected = restricts
    ? await affectedUserStatements(env, {
        installationId: source.installationId,
        decisionId: id,
        reportId: source.reportId,
        runId: source.runId,
        policyCategory: category,
        outcome,
        ground,
        legalGround,
        explanation,
        statement,
        restrictions,
        territorialScope: scope,
        automatedDetection,
        automatedDecision,
        decidedAt: at,
        statementOfReasons: sorFields({
          id,
          ground,
          contentTypeJson: JSON.stringify(contentTypes),
          categorySpecificationJson: JSON.stringify(report?.categorySpecification ?? []),
          restrictionsJson: canonicalJson(restrictions),
          policyCategory: category,
          contentDate,
          decidedAt: at,
          statementText: statement,
          sourceType: reportSource,
          automatedDetection: automatedDetection ? 1 : 0,
          automatedDecision,
          legalGround,
          explanation,
          outcome,
          territorialScopeJson: scope ? JSON.stringify(scope) : null,
        }),
      })
    : { statements: [], deliveryIds: [] };
  // DSA Art. 16(5): the decision on a notice is told to its notifier (guarded on this decision's row).
  const notifier = reportRow
    ? await noticeDecisionStatements(env, {
        installationId: source.installationId,
        reportRow,
        decision: { id, outcome, restricts, restrictions, ground, category, automatedDecision, automatedDetection, statement, decidedAt: at },
        actor: source.actor,
      })
    : { statements: [], deliveryIds: [] };
  // A restricting decision's statement of reasons (DSA Art. 24(5)) is queued for the Transparency Database in its own batch.
  if (restricts) statements.push(queueSubmissionStatement(env.DB, id, at));
  // A restricting decision on a subject with an owner gives that account its strike (accounts), in this batch.
  if (restricts) statements.push(strikeAccrualStatement(env.DB, { installationId: source.installationId, decisionId: id, at }));
  return { id, outcome, restricts, automatedDecision, statements: [...statements, ...affected.statements, ...notifier.statements], deliveryIds: [...affected.deliveryIds, ...notifier.deliveryIds] };
}

const trimmed = (value: unknown): string | null => (typeof value === "string" && value.trim() !== "" ? value.trim() : null);

/** A content date (YYYY-MM-DD, a real day, not after the decision), or the fallback's day. */
function contentDateOf(given: string | undefined, label: string, fallback: string): string {
  const day = given?.trim();
  if (!day) return fallback.slice(0, 10);
  const parsed = /^\d{4}-\d{2}-\d{2}$/u.test(day) ? new Date(`${day}T00:00:00Z`) : null;
  if (!parsed || Number.isNaN(parsed.getTime()) || parsed.toISOString().slice(0, 10) !== day || day < "2000-01-01" || day > new Date().toISOString().slice(0, 10)) {
    throw new AppError("decision.config_invalid", `Decision ${label}: content_date is the day the content was published, as YYYY-MM-DD between 2000-01-01 and today (got ${JSON.stringify(day.slice(0, 40))}).`, {
      status: 422,
      details: [{ path: "config.content_date", code: "config_invalid" }],
    });
  }
  return day;
}

/** The decision of a workflow's decision node, from its config and evaluated inputMapping. */
export async function decisionRecord(env: Env, input: { run: AuthorizedRun; node: WorkflowNodeV1; stepId: string; context: ExpressionContext }) {
  const { run, node } = input;
  return decisionStatements(env, {
    installationId: run.installationId,
    reportId: run.reportId,
    runId: run.id,
    stepId: input.stepId,
    authorityMode: run.authorityMode,
    label: node.id,
    config: node.config,
    values: evaluateInputMapping(node.inputMapping, input.context, node.id),
    actor: { type: "system", id: "workflow-runtime" },
  });
}

const BODY_FIELDS: Record<string, string> = {
  legal_ground: "legalGround",
  contractual_ground: "contractualGround",
  content_date: "contentDate",
  automated_detection: "automatedDetection",
  policy_category: "policyCategory",
  content_type: "contentType",
  territorial_scope: "territorialScope",
};

/** `config.restrictions.account` → `$.restrictions.account`, `config.legal_ground` → `$.legalGround`. */
function bodyPath(configPath: string): string {
  return `$.${configPath.replace(/^config\./u, "").replace(/^[a-z_]+/u, (field) => BODY_FIELDS[field] ?? field)}`;
}

/** A decision a person made on a report outside any workflow (`not_automated`). */
export async function recordManualDecision(
  env: Env,
  ctx: ExecutionContext | undefined,
  actor: Actor,
  input: {
    reportId: string;
    outcome: string;
    restrictions?: unknown;
    statement?: string;
    ground?: string;
    legalGround?: string;
    contractualGround?: string;
    contentDate?: string;
    automatedDetection?: boolean;
    policyCategory?: string;
    contentType?: string[];
    territorialScope?: string[];
    decidedBy?: string;
  },
) {
  if (!(await hotOrArchived(env, actor.installationId, "report", input.reportId, () => getReportRow(env.DB, actor.installationId, input.reportId)))) throw notFound("report");
  const record = await decisionStatements(env, {
    installationId: actor.installationId,
    reportId: input.reportId,
    runId: null,
    stepId: null,
    authorityMode: null,
    label: "decision",
    config: {
      outcome: input.outcome,
      restrictions: input.restrictions,
      statement: input.statement,
      ground: input.ground,
      legal_ground: input.legalGround,
      contractual_ground: input.contractualGround,
      content_date: input.contentDate,
      policy_category: input.policyCategory,
      content_type: input.contentType,
      territorial_scope: input.territorialScope,
      automated_detection: input.automatedDetection,
    },
    values: {},
    inputPath: bodyPath,
    // The audit actor is always the authenticated caller; decidedBy is only a name it states.
    actor: actor.audit,
    statedName: input.decidedBy,
    byPerson: actsAsPerson(actor),
  });
  await env.DB.batch(record.statements);
  await enqueueDeliveries(env, record.deliveryIds);
  // The account's ladder at once (a rung reached starts its action's run); the schedule settles it otherwise.
  await settleDecisionAccount(env, ctx, actor.installationId, record.id);
  return getDecision(env, actor, record.id);
}

export interface DecisionRow {
  id: string;
  runId: string | null;
  reportId: string | null;
  caseId: string | null;
  subjectKind: string | null;
  subjectId: string | null;
  policyCategory: string;
  categorySpecificationJson: string;
  outcome: string;
  ground: string;
  legalGround: string | null;
  explanation: string;
  restrictionsJson: string;
  contentTypeJson: string;
  territorialScopeJson: string | null;
  statementText: string;
  sourceType: string;
  automatedDetection: number;
  automatedDecision: string;
  contentDate: string;
  decidedAt: string;
}

const COLUMNS = `id, run_id AS runId, report_id AS reportId, case_id AS caseId, subject_kind AS subjectKind, subject_id AS subjectId,
  policy_category AS policyCategory, category_specification_json AS categorySpecificationJson, outcome, ground, legal_ground AS legalGround,
  explanation, restrictions_json AS restrictionsJson, content_type_json AS contentTypeJson, territorial_scope_json AS territorialScopeJson,
  statement_text AS statementText, source_type AS sourceType, automated_detection AS automatedDetection, automated_decision AS automatedDecision,
  content_date AS contentDate, decided_at AS decidedAt`;

/** A decision's row, from D1 or, once its case is archived, from the archive (null: none of this installation's). */
export function decisionRowAnywhere(env: Env, installationId: string, id: string): Promise<DecisionRow | null> {
  return hotOrArchived(env, installationId, "decision", id, () => env.DB.prepare(`SELECT ${COLUMNS} FROM decisions WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<DecisionRow>());
}

async function decisionRow(env: Env, actor: Actor, id: string): Promise<DecisionRow> {
  const row = await decisionRowAnywhere(env, actor.installationId, id);
  if (!row) throw notFound("decision");
  return row;
}

export async function getDecision(env: Env, actor: Actor, id: string) {
  return decisionView(await decisionRow(env, actor, id));
}

/** The installation's decisions, newest first; optionally those on one report. */
export async function listDecisions(env: Env, actor: Actor, options: { reportId?: string; limit: number }) {
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM decisions WHERE installation_id = ?1 AND (?2 IS NULL OR report_id = ?2) ORDER BY decided_at DESC, id DESC LIMIT ?3`)
    .bind(actor.installationId, options.reportId ?? null, options.limit)
    .all<DecisionRow>();
  return results.map(decisionView);
}

function decisionView(row: DecisionRow) {
  const restrictions = JSON.parse(row.restrictionsJson) as Restrictions;
  return {
    id: row.id,
    runId: row.runId,
    reportId: row.reportId,
    caseId: row.caseId,
    subject: row.subjectKind ? { kind: row.subjectKind, id: row.subjectId } : null,
    policyCategory: row.policyCategory,
    outcome: row.outcome,
    /** false: a decision not to act (no restriction, no statement of reasons). */
    restricts: restrictsAnything(restrictions),
    ground: row.ground,
    restrictions,
    statement: row.statementText === "" ? null : row.statementText,
    automatedDetection: row.automatedDetection === 1,
    automatedDecision: row.automatedDecision,
    decidedAt: row.decidedAt,
  };
}

/** The decision as a DSA Transparency Database statement of reasons (no personal data). */
export async function statementOfReasons(env: Env, actor: Actor, id: string): Promise<Record<string, unknown>> {
  return statementOfReasonsOf(await decisionRow(env, actor, id));
}

/** Decisions of an installation by id, in one query (the Transparency Database renders a batch of statements from it). */
export async function decisionRowsByIds(env: Env, installationId: string, ids: string[]): Promise<DecisionRow[]> {
  const { results } = await env.DB.prepare(`SELECT ${COLUMNS} FROM decisions WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2))`).bind(installationId, JSON.stringify(ids)).all<DecisionRow>();
  return results;
}

export { statementOfReasonsOf };
