// Appeals: a person contests a report's handling or a decision (DSA Art. 20: the notifier, e.g.
// against a decision not to act, or the user a restriction affects); the installation's appeal
// workflow (a trigger on `appeal.created`) takes it from there, and its outcome (upheld or
// overturned) is recorded.
import { auditStatement, canonicalJson } from "../../audit";
import { AppError, conflict, notFound } from "../../errors";
import { canReadPersonalData, queueLimitOf, reviewerIdentity, reviewerLabel, type Actor } from "../../auth";
import { newId, sha256Hex } from "../../lib/crypto";
import { PERSON_KEYS_VERSION, personKey } from "../../lib/person-keys";
import { restrictsAnything } from "../../lib/dsa-vocabulary";
import { readRedressSettings, sendComplaintOutcome } from "../../enforcement";
import { settleOverturnedDecision, strikeReversalStatement } from "../../accounts";
import { assertWithinComplaintPeriod, decisionReversalStatements, proposedOutcomeStatements, resolvesByAutomation } from "./complaints";
import { openPersonalDataOr, sealPersonalData } from "../reports/report-crypto";
import { APPEAL_OUTCOMES, type APPELLANT_ROLES } from "../taxonomy";
import { reportSummary } from "../reports/reports";
import { getReportRow } from "../reports/reports-queries";
import { fireTriggers } from "../triggers/triggers";
import { reviewerAuditId } from "../../lib/person-keys";
import { hotOrArchived } from "../archive/case-rehydrate";

export interface AppealInput {
  reportId?: string;
  decisionId?: string;
  appellantRole?: (typeof APPELLANT_ROLES)[number];
  appellant?: { id?: string; contact?: string };
  reason: string;
}

interface AppealRow {
  id: string;
  reportId: string | null;
  decisionId: string | null;
  caseId: string | null;
  appellantRole: string | null;
  state: string;
  personalData: string;
  outcomeReason: string | null;
  decidedBy: string | null;
  decidedAt: string | null;
  requestDigest: string;
  createdAt: string;
  resolvedByAutomation: number;
  proposedOutcome: string | null;
  proposedBy: string | null;
  proposedAt: string | null;
  confirmedBy: string | null;
}

const COLUMNS = `id, report_id AS reportId, decision_id AS decisionId, case_id AS caseId, appellant_role AS appellantRole, state, personal_data AS personalData,
  outcome_reason AS outcomeReason, decided_by AS decidedBy, decided_at AS decidedAt, request_digest AS requestDigest, created_at AS createdAt,
  resolved_by_automation AS resolvedByAutomation, proposed_outcome AS proposedOutcome, proposed_by AS proposedBy, proposed_at AS proposedAt, confirmed_by AS confirmedBy`;

function getAppealRow(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT ${COLUMNS} FROM appeals WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<AppealRow>();
}

function summary(row: AppealRow) {
  return {
    id: row.id,
    reportId: row.reportId,
    decisionId: row.decisionId,
    caseId: row.caseId,
    appellantRole: row.appellantRole,
    state: row.state,
    outcome: row.state === "open" ? null : row.state,
    decidedBy: row.decidedBy === null ? null : reviewerLabel(row.decidedBy),
    decidedAt: row.decidedAt,
    resolvedByAutomation: row.resolvedByAutomation === 1,
    // An outcome automation proposed, waiting for a person (POST /appeals/:id/confirm); null when none.
    proposal: row.proposedOutcome && row.proposedBy ? { outcome: row.proposedOutcome, proposedBy: reviewerLabel(row.proposedBy), proposedAt: row.proposedAt } : null,
    confirmedBy: row.confirmedBy === null ? null : reviewerLabel(row.confirmedBy),
    createdAt: row.createdAt,
  };
}

/** Records an appeal and starts the appeal workflow(s) its triggers select. Idempotent by key. */
export async function fileAppeal(env: Env, ctx: ExecutionContext, actor: Actor, input: AppealInput, idempotencyKey?: string) {
  // A decision is read here, not through enforcement (which imports cases): reads cross owners.
  // A decision or report whose case was archived comes back to D1 first (cases/archive).
  const decisionId = input.decisionId;
  const decision = decisionId
    ? await hotOrArchived(env, actor.installationId, "decision", decisionId, () =>
        env.DB.prepare(`SELECT id, report_id AS reportId, restrictions_json AS restrictionsJson FROM decisions WHERE installation_id = ?1 AND id = ?2`)
          .bind(actor.installationId, decisionId)
          .first<{ id: string; reportId: string | null; restrictionsJson: string }>(),
      )
    : null;
  if (input.decisionId && !decision) throw notFound("decision");
  // A report named is checked before it is compared: another installation's is simply not found.
  const namedId = input.reportId;
  const named = namedId ? await hotOrArchived(env, actor.installationId, "report", namedId, () => getReportRow(env.DB, actor.installationId, namedId)) : null;
  if (input.reportId && !named) throw notFound("report");
  if (decision && input.reportId && input.reportId !== decision.reportId) {
    throw new AppError("appeal.report_mismatch", `Decision ${decision.id} was not made on the report named: leave reportId out, or name the decision's own report.`, { status: 422, details: [{ path: "$.reportId" }] });
  }
  const reportId = input.reportId ?? decision?.reportId;
  if (!reportId) throw new AppError("appeal.report_required", "An appeal must name the reportId it contests, or a decisionId of a decision made on a report.", { status: 422 });
  const restricts = decision ? restrictsAnything(JSON.parse(decision.restrictionsJson)) : null;
  // The affected user contests a restriction; a decision not to act restricted no one, so only its notifier may appeal it.
  if (restricts === false && input.appellantRole === "affected") {
    throw new AppError("appeal.role_invalid", `Decision ${decision!.id} restricts nothing (a decision not to act), so there is no restriction for an affected user to contest; its notifier may appeal it (appellantRole notifier).`, {
      status: 422,
      details: [{ path: "$.appellantRole" }],
    });
  }
  const appellantRole = input.appellantRole ?? (restricts === null ? null : restricts ? "affected" : "notifier");
  const report = named ?? (await hotOrArchived(env, actor.installationId, "report", reportId, () => getReportRow(env.DB, actor.installationId, reportId)));
  if (!report) throw notFound("report");
  const requestDigest = `sha256:${await sha256Hex(canonicalJson(input))}`;
  if (idempotencyKey) {
    const existing = await env.DB.prepare(`SELECT ${COLUMNS} FROM appeals WHERE installation_id = ?1 AND idempotency_key = ?2`).bind(actor.installationId, idempotencyKey).first<AppealRow>();
    if (existing) {
      if (existing.requestDigest !== requestDigest) throw conflict("idempotency_key.reused", "This Idempotency-Key was already used for a different appeal.");
      const runs = await fireTriggers(env, ctx, actor, { event: "appeal.created", report: reportSummary(report), appeal: stable(existing), subjectKey: existing.id });
      return { appeal: summary(existing), runs, replayed: true };
    }
  }
  const id = newId("apl");
  const at = new Date().toISOString();
  // DSA Art. 20(1): six months from the contested decision's notice (a replay above is not refused).
  await assertWithinComplaintPeriod(env.DB, actor.installationId, { decisionId: input.decisionId ?? null, reportId: report.id, at });
  const { sealed, dataKeyId } = await sealPersonalData(env, actor.installationId, `appeal:${id}`, { appellant: input.appellant ?? null, reason: input.reason }, { people: [personKey(actor.installationId, input.appellant?.id)] });
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO appeals (id, installation_id, report_id, decision_id, case_id, appellant_role, state, personal_data, data_key_id, idempotency_key, request_digest, created_at, updated_at,
        appellant_key, person_keys_version)
      VALUES (?1, ?2, ?3, ?4, ?5, ?11, 'open', ?6, ?7, ?8, ?9, ?10, ?10, ?12, ?13)
      ON CONFLICT(installation_id, idempotency_key) DO NOTHING
    `).bind(
      id,
      actor.installationId,
      report.id,
      input.decisionId ?? null,
      report.caseId,
      sealed,
      dataKeyId,
      idempotencyKey ?? null,
      requestDigest,
      at,
      appellantRole,
      personKey(actor.installationId, input.appellant?.id),
      PERSON_KEYS_VERSION,
    ),
    auditStatement(
      env.DB,
      {
        installationId: actor.installationId,
        idempotencyKey: `appeal:${id}:filed`,
        action: "appeal.filed",
        actor: actor.audit,
        target: { type: "appeal", id },
        details: { reportId: report.id, caseId: report.caseId, decisionId: input.decisionId ?? null, appellantRole },
        at,
      },
      { table: "appeals", id },
    ),
  ]);
  const row = await getAppealRow(env.DB, actor.installationId, id);
  if (!row) throw new AppError("appeal.conflict", "A concurrent request with the same Idempotency-Key won; retry to read it.", { status: 409, retryable: true });
  const runs = await fireTriggers(env, ctx, actor, { event: "appeal.created", report: reportSummary(report), appeal: stable(row), subjectKey: row.id });
  return { appeal: summary(row), runs, replayed: false };
}

function stable(row: AppealRow) {
  return { id: row.id, reportId: row.reportId, decisionId: row.decisionId, caseId: row.caseId, appellantRole: row.appellantRole, createdAt: row.createdAt };
}

/**
 * The appeal; the appellant's id, contact and reason are opened (and the access audited) only for
 * a caller allowed to read personal data. Others (a `read` key, a viewer) get them as null with
 * `personalDataSealed: true`.
 */
export async function readAppeal(env: Env, actor: Actor, appealId: string) {
  const row = await hotOrArchived(env, actor.installationId, "appeal", appealId, () => getAppealRow(env.DB, actor.installationId, appealId));
  if (!row) throw notFound("appeal");
  await assertAppealInQueues(env.DB, actor, row);
  const { results: runs } = await env.DB.prepare(`SELECT id, state, workflow_version_id AS workflowVersionId FROM workflow_runs WHERE installation_id = ?1 AND appeal_id = ?2 ORDER BY created_at`).bind(actor.installationId, row.id).all();
  if (!canReadPersonalData(actor)) return { ...summary(row), outcomeReason: row.outcomeReason, appellant: null, reason: null, personalDataSealed: true, runs };
  const personal = await openPersonalDataOr<{ appellant: AppealInput["appellant"] | null; reason: string | null }>(env, actor.installationId, `appeal:${row.id}`, row.personalData, { appellant: null, reason: null });
  await auditStatement(env.DB, {
    installationId: actor.installationId,
    idempotencyKey: `appeal:${row.id}:viewed:${crypto.randomUUID()}`,
    action: "appeal.personal_data_viewed",
    actor: actor.audit,
    target: { type: "appeal", id: row.id },
    details: {},
    at: new Date().toISOString(),
  }).run();
  return { ...summary(row), outcomeReason: row.outcomeReason, appellant: personal.appellant, reason: personal.reason, personalDataSealed: false, runs };
}

/** A console user limited to some queues sees an appeal only when a task of it, or of its report, is in them; else a 404. */
async function assertAppealInQueues(db: D1Database, actor: Actor, row: AppealRow): Promise<void> {
  const queues = queueLimitOf(actor);
  if (queues === null) return;
  const seen = await db
    .prepare(`SELECT 1 AS x FROM human_tasks WHERE installation_id = ?1 AND (appeal_id = ?2 OR report_id = ?3) AND queue_id IN (SELECT value FROM json_each(?4)) LIMIT 1`)
    .bind(actor.installationId, row.id, row.reportId, queues)
    .first();
  if (!seen) throw notFound("appeal");
}

/**
 * Records the outcome directly (for appeal workflows that decide without a review task). A person
 * decides (a console user, or a reviewer's key, recorded as its reviewer); automation (any other
 * key) may only propose the outcome, and only where the installation allows it
 * (`automatedComplaints`): the appeal stays open until a person confirms it (`confirmAppeal`), and
 * the appellant is told nothing before. DSA Art. 20(6).
 */
export async function resolveAppeal(env: Env, actor: Actor, appealId: string, input: { outcome: string; reason?: string; reviewer?: string }) {
  if (!(APPEAL_OUTCOMES as readonly string[]).includes(input.outcome)) throw new AppError("appeal.outcome_invalid", "outcome must be upheld or overturned.", { status: 422 });
  // Another installation's appeal is a 404 before anything else is said about it.
  const row = await hotOrArchived(env, actor.installationId, "appeal", appealId, () => getAppealRow(env.DB, actor.installationId, appealId));
  if (!row) throw notFound("appeal");
  await assertAppealInQueues(env.DB, actor, row);
  const automated = resolvesByAutomation(actor);
  if (automated) await assertAutomatedComplaints(env, actor.installationId);
  if (row.state !== "open") throw conflict("appeal.already_decided", `The appeal was already ${row.state}.`);
  const at = new Date().toISOString();
  const who = reviewerIdentity(actor, input.reviewer);
  if (automated) {
    const [update] = await env.DB.batch(proposedOutcomeStatements(env.DB, { installationId: actor.installationId, appealId, outcome: input.outcome, reason: input.reason ?? null, proposedBy: who, at, actor: actor.audit }));
    if ((update!.meta.changes ?? 0) === 0) throw conflict("appeal.already_decided", "The appeal was decided, or an outcome proposed, concurrently.");
    return summary((await getAppealRow(env.DB, actor.installationId, appealId))!);
  }
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE appeals SET state = ?3, outcome_reason = ?4, decided_by = ?5, decided_at = ?6, updated_at = ?6, resolved_by_automation = 0
      WHERE installation_id = ?1 AND id = ?2 AND state = 'open'`).bind(actor.installationId, appealId, input.outcome, input.reason ?? null, who, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `appeal:${appealId}:decided`,
      action: `appeal.${input.outcome}`,
      actor: actor.audit,
      target: { type: "appeal", id: appealId },
      details: { reviewerId: reviewerAuditId(actor.installationId, who), resolvedByAutomation: false },
      at,
    }),
    ...decisionReversalStatements(env.DB, { installationId: actor.installationId, appealId, decisionId: row.decisionId, at, actor: actor.audit }),
    // An overturned decision's strike is reversed with it (accounts), and the account's ladder walks back below.
    strikeReversalStatement(env.DB, { installationId: actor.installationId, appealId, at }),
  ]);
  if ((update!.meta.changes ?? 0) === 0) throw conflict("appeal.already_decided", "The appeal was decided concurrently.");
  await sendComplaintOutcome(env, actor.installationId, appealId);
  if (input.outcome === "overturned") await settleOverturnedDecision(env, actor.installationId, row.decisionId);
  return summary((await getAppealRow(env.DB, actor.installationId, appealId))!);
}

/** 403 `appeal.person_required` unless the installation lets automation propose complaint outcomes. */
export async function assertAutomatedComplaints(env: Env, installationId: string): Promise<void> {
  if ((await readRedressSettings(env.DB, installationId)).automatedComplaints) return;
  throw new AppError(
    "appeal.person_required",
    "Complaints are decided by people (DSA Art. 20(6)): resolve it as a console user or with a reviewer's key (POST /api-keys with reviewer), or let automation propose outcomes (PUT /redress-settings automatedComplaints) for a person to confirm.",
    { status: 403 },
  );
}

/**
 * A person confirms the outcome automation proposed: the appeal is decided as proposed (counted as
 * resolved by automation, with the confirming person recorded) and the appellant is told.
 */
export async function confirmAppeal(env: Env, actor: Actor, appealId: string) {
  const row = await hotOrArchived(env, actor.installationId, "appeal", appealId, () => getAppealRow(env.DB, actor.installationId, appealId));
  if (!row) throw notFound("appeal");
  await assertAppealInQueues(env.DB, actor, row);
  if (resolvesByAutomation(actor)) {
    throw new AppError("appeal.person_required", "A person confirms a proposed complaint outcome: a console user or a reviewer's key (POST /api-keys with reviewer).", { status: 403 });
  }
  if (row.state !== "open") throw conflict("appeal.already_decided", `The appeal was already ${row.state}.`);
  if (!row.proposedOutcome || !row.proposedBy) throw conflict("appeal.nothing_to_confirm", "No outcome was proposed for this appeal; resolve it (POST /appeals/:id/resolve).");
  const at = new Date().toISOString();
  const who = reviewerIdentity(actor);
  const [update] = await env.DB.batch([
    env.DB.prepare(`UPDATE appeals SET state = proposed_outcome, decided_by = proposed_by, decided_at = ?4, updated_at = ?4, confirmed_by = ?3, resolved_by_automation = 1
      WHERE installation_id = ?1 AND id = ?2 AND state = 'open' AND proposed_outcome = ?5`).bind(actor.installationId, appealId, who, at, row.proposedOutcome),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `appeal:${appealId}:decided`,
      action: `appeal.${row.proposedOutcome}`,
      actor: actor.audit,
      target: { type: "appeal", id: appealId },
      details: { reviewerId: reviewerAuditId(actor.installationId, row.proposedBy), confirmedById: reviewerAuditId(actor.installationId, who), resolvedByAutomation: true },
      at,
    }),
    ...decisionReversalStatements(env.DB, { installationId: actor.installationId, appealId, decisionId: row.decisionId, at, actor: actor.audit }),
    // An overturned decision's strike is reversed with it (accounts), and the account's ladder walks back below.
    strikeReversalStatement(env.DB, { installationId: actor.installationId, appealId, at }),
  ]);
  if ((update!.meta.changes ?? 0) === 0) throw conflict("appeal.already_decided", "The appeal was decided concurrently.");
  await sendComplaintOutcome(env, actor.installationId, appealId);
  if (row.proposedOutcome === "overturned") await settleOverturnedDecision(env, actor.installationId, row.decisionId);
  return summary((await getAppealRow(env.DB, actor.installationId, appealId))!);
}
