// Creating a CyberTipline submission (after a person's confirmation, see confirmation.ts): the
// report built from the platform's report, the files kept sealed (evidence.ts), the report's XML
// sealed, and a one-year preservation hold placed on the case (18 U.S.C. § 2258A(h) as amended by
// the REPORT Act of 2024), all in one batch. One submission per reported report.
import { auditStatement, type AuditEventInput } from "../../audit";
import { getReportRow, holdStatements, openPersonalData, sealPersonalData, type ReportPersonalData } from "../../cases";
import { AppError, notFound } from "../../errors";
import { newId, sha256Hex, sha256HexSync } from "../../lib/crypto";
import { reviewerAuditId } from "../../lib/person-keys";
import { preserveFile } from "./evidence";
import { openRegistration } from "./settings";
import { type FileState, type Payload, payloadContext, submissionRow, type SubmissionRow } from "./submissions";
import { reportXml, type IncidentType } from "./xml";

/** The most files one report carries (the rest of a larger evidence list is left out, and said so). */
export const MAX_FILES = 20;

export interface NewSubmission {
  installationId: string;
  reportId: string;
  incidentType: IncidentType;
  /** The authenticated principal who confirmed the report (reviewerIdentity), never a name a client sent. */
  confirmedBy: string;
  confirmationTaskId: string | null;
  actor: AuditEventInput["actor"];
  /** The workflow step that asks for it: one submission per step, whatever the retries. */
  step?: { runId: string; stepRunId: string };
}

const fileName = (url: string, index: number) => {
  const last = (() => {
    try {
      return decodeURIComponent(new URL(url).pathname.split("/").pop() ?? "");
    } catch {
      return "";
    }
  })();
  return /^[A-Za-z0-9._-]{1,100}$/u.test(last) ? last : `file-${index + 1}`;
};

/**
 * Records a confirmed report for submission (not yet sent): the files fetched and kept sealed, the
 * XML built and sealed, the hold placed, audited. For a workflow step, a second call returns the
 * first call's row. 404 for another installation's report; 409 `cybertipline.not_configured`
 * without a registration; 422 `cybertipline.no_files` when the report's evidence names no file.
 */
export async function createSubmission(env: Env, input: NewSubmission): Promise<SubmissionRow> {
  const id = input.step ? `ctr_${sha256HexSync(`${input.installationId}:${input.step.stepRunId}`).slice(0, 26)}` : newId("ctr");
  if (input.step) {
    const existing = await submissionRow(env.DB, input.installationId, id);
    if (existing) return existing;
  }
  // One CyberTipline report per reported report (a unique index holds it under races): a second
  // confirmation, a retried POST or another run's step gets the first submission, never a second report.
  const prior = await priorSubmission(env.DB, input.installationId, input.reportId);
  if (prior) return alreadyReported(env.DB, input, prior);
  const report = await getReportRow(env.DB, input.installationId, input.reportId);
  if (!report) throw notFound("report");
  if (report.personalDataErasedAt) throw new AppError("cybertipline.content_erased", "The report's contents were erased; there is nothing left to report.", { status: 409 });
  const registration = await openRegistration(env, input.installationId);
  const personal = await openPersonalData<ReportPersonalData>(env, input.installationId, `report:${report.id}`, report.personalData);
  const evidence = (personal.evidence ?? []).filter((e): e is typeof e & { url: string } => typeof e.url === "string" && e.url.length > 0).slice(0, MAX_FILES);
  if (evidence.length === 0) throw new AppError("cybertipline.no_files", "The report's evidence names no file (evidence[].url); a CyberTipline report carries the files a person confirmed.", { status: 422 });
  const preserved: Array<{ sha256: string; bytes: number; pdq: string | null }> = [];
  for (const [index, item] of evidence.entries()) {
    preserved.push(await preserveFile(env, { installationId: input.installationId, submissionId: id, index, url: item.url, sha256: typeof item.sha256 === "string" ? item.sha256 : null }));
  }
  const confirmedById = reviewerAuditId(input.installationId, input.confirmedBy);
  const xml = reportXml({
    incidentType: input.incidentType,
    incidentDateTime: report.createdAt,
    reporter: registration.reporter,
    ...(registration.reporter.companyTemplate ? { companyTemplate: registration.reporter.companyTemplate } : {}),
    reported: { espIdentifier: personal.subjectOwnerId, espService: registration.espService, profileUrl: null },
    additionalInfo: `Each file was viewed and the report confirmed by a person of the reporting company (reviewer ${confirmedById}) before it was sent. Reference ${report.caseId}.`,
  });
  const payload: Payload = {
    xml,
    files: evidence.map((item, index) => ({
      name: fileName(item.url, index),
      locationOfFile: item.url,
      sha256: preserved[index]!.sha256,
      pdq: preserved[index]!.pdq,
      viewed: typeof item.sha256 === "string" && item.sha256 === preserved[index]!.sha256,
    })),
  };
  const sealed = await sealPersonalData(env, input.installationId, payloadContext(id), payload, { scope: "installation" });
  const xmlDigest = `sha256:${await sha256Hex(xml)}`;
  const files: FileState[] = preserved.map((p) => ({ fileId: null, details: 0, sha256: p.sha256 }));
  const at = new Date().toISOString();
  const holdId = `hold_${id}`;
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO cybertipline_submissions (id, installation_id, case_id, report_id, run_id, step_run_id, state, files_json, payload_sealed, xml_digest, confirmed_by,
        confirmation_task_id, hold_id, attempts, next_attempt_at, created_at, updated_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ?9, ?10, ?11, ?12, 0, ?13, ?13, ?13) ON CONFLICT DO NOTHING`).bind(
      id,
      input.installationId,
      report.caseId,
      report.id,
      input.step?.runId ?? null,
      input.step?.stepRunId ?? null,
      JSON.stringify(files),
      sealed.sealed,
      xmlDigest,
      input.confirmedBy,
      input.confirmationTaskId,
      holdId,
      at,
    ),
    ...holdStatements(env.DB, {
      installationId: input.installationId,
      holdId,
      caseId: report.caseId,
      reason: "CyberTipline report: its contents are preserved for one year (18 U.S.C. § 2258A(h))",
      createdBy: `system:cybertipline`,
      actor: input.actor,
      at,
      details: { submissionId: id },
    }),
    auditStatement(env.DB, {
      installationId: input.installationId,
      idempotencyKey: `cybertipline:${id}:confirmed`,
      action: "cybertipline.report_confirmed",
      actor: input.actor,
      target: { type: "report", id: report.id },
      details: { submissionId: id, confirmedById, confirmationTaskId: input.confirmationTaskId, incidentType: input.incidentType, files: files.length, xmlDigest, purpose: "cybertipline_report" },
      at,
    }),
  ]);
  const row = await submissionRow(env.DB, input.installationId, id);
  if (row) return row;
  // A concurrent confirmation of the same report inserted first (the unique index refused this one).
  const winner = await priorSubmission(env.DB, input.installationId, input.reportId);
  if (!winner) throw new AppError("cybertipline.unavailable", "The submission could not be recorded; confirm again.", { status: 503, retryable: true });
  return alreadyReported(env.DB, input, winner);
}

/** The submission already filed (or being filed) for a report: any state but rejected. */
function priorSubmission(db: D1Database, installationId: string, reportId: string) {
  return db.prepare(`SELECT id FROM cybertipline_submissions WHERE installation_id = ?1 AND report_id = ?2 AND state <> 'rejected' LIMIT 1`).bind(installationId, reportId).first<{ id: string }>();
}

/** A workflow step takes the report's existing submission as its own outcome; a person confirming again gets a 409 naming it. */
async function alreadyReported(db: D1Database, input: NewSubmission, prior: { id: string }): Promise<SubmissionRow> {
  if (input.step) return (await submissionRow(db, input.installationId, prior.id))!;
  throw new AppError("cybertipline.already_reported", `This report was already confirmed for the CyberTipline (submission ${prior.id}); follow that one (GET /cybertipline/reports/${prior.id}).`, {
    status: 409,
    details: { submissionId: prior.id },
  });
}
