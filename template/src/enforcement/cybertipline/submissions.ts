// CyberTipline submissions: the exactly-once record of one report to NCMEC (created by
// submission-create.ts after a person's confirmation). Advancing it walks the API's protocol — open (`/submit`), upload each file (`/upload`), each
// file's details (`/fileinfo`), `/finish` — writing each step's result (NCMEC's report id, each
// file id, each details flag) before the next step starts. A pass that stops halfway leaves the
// row where it stopped; the next pass (the workflow step's retry, the sweep, an admin's resume)
// continues from there, and a row that has a report id never sends `/submit` again. One pass at a
// time holds a row (lease_until).
import { auditStatement, type AuditEventInput } from "../../audit";
import { openPersonalData } from "../../cases";
import { AppError, notFound } from "../../errors";
import { reviewerAuditId } from "../../lib/person-keys";
import { callStep, type CallResult } from "./client";
import { openPreservedFile } from "./evidence";
import { openRegistration } from "./settings";
import { fileDetailsXml, type ServiceAnswer } from "./xml";

export const SUBMISSION_STATES = ["pending", "opened", "finished", "rejected"] as const;
const LEASE_MS = 120_000;
const MAX_BACKOFF_SECONDS = 3_600;
/** NCMEC's response code for a report id it does not hold. */
const RESPONSE_NO_SUCH_REPORT = 5001;

export interface FileState {
  fileId: string | null;
  details: 0 | 1;
  sha256: string;
}

export interface Payload {
  xml: string;
  /** `viewed`: the evidence named the file's SHA-256 and the preserved bytes match it, so they are the ones the reviewer was shown. */
  files: Array<{ name: string; locationOfFile: string | null; sha256: string; pdq: string | null; viewed?: boolean }>;
}

export interface SubmissionRow {
  id: string;
  installationId: string;
  caseId: string;
  reportId: string;
  runId: string | null;
  stepRunId: string | null;
  state: (typeof SUBMISSION_STATES)[number];
  ncmecReportId: string | null;
  filesJson: string;
  payloadSealed: string;
  xmlDigest: string;
  confirmedBy: string;
  confirmationTaskId: string | null;
  holdId: string;
  attempts: number;
  leaseUntil: string | null;
  nextAttemptAt: string | null;
  lastErrorCode: string | null;
  lastResponseCode: number | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
  evidenceErasedAt: string | null;
  /** When a /submit request was sent and no report id came back yet (an unknown outcome once it fails). */
  submitSentAt: string | null;
  /** When the report opened at NCMEC was cancelled there (`/retract`) before it was finished. */
  retractedAt: string | null;
}

export const SUBMISSION_COLUMNS = `id, installation_id AS installationId, case_id AS caseId, report_id AS reportId, run_id AS runId, step_run_id AS stepRunId, state,
  ncmec_report_id AS ncmecReportId, files_json AS filesJson, payload_sealed AS payloadSealed, xml_digest AS xmlDigest, confirmed_by AS confirmedBy,
  confirmation_task_id AS confirmationTaskId, hold_id AS holdId, attempts, lease_until AS leaseUntil, next_attempt_at AS nextAttemptAt,
  last_error_code AS lastErrorCode, last_response_code AS lastResponseCode, created_at AS createdAt, updated_at AS updatedAt, finished_at AS finishedAt,
  evidence_erased_at AS evidenceErasedAt, submit_sent_at AS submitSentAt, retracted_at AS retractedAt`;

export const payloadContext = (id: string) => `cybertipline:${id}`;

export function submissionRow(db: D1Database, installationId: string, id: string) {
  return db.prepare(`SELECT ${SUBMISSION_COLUMNS} FROM cybertipline_submissions WHERE id = ?1 AND installation_id = ?2`).bind(id, installationId).first<SubmissionRow>();
}

/** What the API shows: progress, NCMEC's ids, who confirmed (pseudonymous), never the report's contents. */
export function submissionView(row: SubmissionRow) {
  const files = JSON.parse(row.filesJson) as FileState[];
  return {
    id: row.id,
    reportId: row.reportId,
    caseId: row.caseId,
    runId: row.runId,
    state: row.state,
    ncmecReportId: row.ncmecReportId,
    files: files.map((f) => ({ fileId: f.fileId, detailsSent: f.details === 1, sha256: f.sha256 })),
    xmlDigest: row.xmlDigest,
    confirmedById: reviewerAuditId(row.installationId, row.confirmedBy),
    confirmationTaskId: row.confirmationTaskId,
    holdId: row.holdId,
    attempts: row.attempts,
    nextAttemptAt: row.nextAttemptAt,
    lastErrorCode: row.lastErrorCode,
    lastResponseCode: row.lastResponseCode,
    createdAt: row.createdAt,
    finishedAt: row.finishedAt,
    evidenceErasedAt: row.evidenceErasedAt,
    retractedAt: row.retractedAt,
  };
}

/** A /submit whose outcome is unknown: it may have opened a report at NCMEC, so no pass sends it again on its own. */
function submitOutcomeUnknown(id: string, cause: AppError | null): AppError {
  return new AppError(
    "cybertipline.submit_outcome_unknown",
    `A /submit request for this report was sent and its answer was lost or failed${cause ? ` (${cause.code})` : ""}, so NCMEC may already hold the report: it is not sent again automatically. Check NCMEC's records, then POST /cybertipline/reports/${id}/reconcile with {"ncmecReportId": "…"} (it was opened) or {"resend": true} (it was not).`,
    { status: 409, details: { submissionId: id, ...(cause ? { cause: cause.code } : {}) } },
  );
}

function must(result: CallResult): ServiceAnswer {
  if (!result.ok) throw result.error;
  return result.answer;
}

function serviceGap(step: string): AppError {
  return new AppError("cybertipline.unavailable", `NCMEC's answer to the ${step} step carried no id; the submission resumes from there.`, { status: 503, retryable: true, details: { step } });
}

/** Takes the row for one pass; a finished row is returned as it is, a rejected one throws its recorded error. */
async function claim(env: Env, installationId: string, id: string, at: Date): Promise<{ row: SubmissionRow; claimed: boolean }> {
  const now = at.toISOString();
  const update = await env.DB.prepare(`UPDATE cybertipline_submissions SET lease_until = ?3, attempts = attempts + 1, updated_at = ?4
      WHERE id = ?1 AND installation_id = ?2 AND state IN ('pending', 'opened') AND (lease_until IS NULL OR lease_until <= ?4)`)
    .bind(id, installationId, new Date(at.getTime() + LEASE_MS).toISOString(), now)
    .run();
  const row = await submissionRow(env.DB, installationId, id);
  if (!row) throw notFound("cybertipline_submission");
  if ((update.meta.changes ?? 0) === 1) return { row, claimed: true };
  if (row.state === "finished") return { row, claimed: false };
  if (row.state === "rejected") {
    throw new AppError("cybertipline.report_rejected", `NCMEC refused this report (response code ${row.lastResponseCode ?? "unknown"}); it is not sent again.`, { status: 422, details: { responseCode: row.lastResponseCode } });
  }
  throw new AppError("cybertipline.submission_busy", "Another pass is sending this report right now.", { status: 409, retryable: true });
}

/** Writes a failed pass: rejected for good, waiting for an admin (credentials), or due again after a backoff. */
async function recordFailure(env: Env, row: SubmissionRow, error: unknown, at: Date, options: { keepLease?: boolean } = {}): Promise<void> {
  const code = error instanceof AppError ? error.code : "cybertipline.unavailable";
  const responseCode = error instanceof AppError ? ((error.details as { responseCode?: number | null } | undefined)?.responseCode ?? null) : null;
  const now = at.toISOString();
  const rejected = code === "cybertipline.report_rejected";
  const transient = error instanceof AppError ? error.retryable : true;
  const backoff = Math.min(MAX_BACKOFF_SECONDS, 60 * 2 ** Math.max(0, row.attempts - 1));
  const nextAttemptAt = rejected || !transient ? null : new Date(at.getTime() + backoff * 1_000).toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE cybertipline_submissions SET state = CASE WHEN ?3 THEN 'rejected' ELSE state END, lease_until = CASE WHEN ?8 THEN lease_until END, next_attempt_at = ?4, last_error_code = ?5,
        last_response_code = ?6, updated_at = ?7 WHERE id = ?1 AND installation_id = ?2 AND state IN ('pending', 'opened')`).bind(
      row.id,
      row.installationId,
      rejected ? 1 : 0,
      nextAttemptAt,
      code,
      responseCode,
      now,
      options.keepLease ? 1 : 0,
    ),
    auditStatement(env.DB, {
      installationId: row.installationId,
      idempotencyKey: `cybertipline:${row.id}:failed:${row.attempts}`,
      action: rejected ? "cybertipline.report_rejected" : "cybertipline.submission_failed",
      actor: { type: "system", id: "cybertipline" },
      target: { type: "cybertipline_submission", id: row.id },
      details: { code, responseCode, attempt: row.attempts, nextAttemptAt, ncmecReportId: row.ncmecReportId },
      at: now,
    }),
  ]);
}

/**
 * One pass over a submission: the steps not yet answered, in order, each result written before the
 * next. Returns the row (finished); throws the step's typed error after recording it
 * (`cybertipline.unavailable` retryable, `cybertipline.report_rejected` 422, `cybertipline.credentials_refused`).
 */
export async function advanceSubmission(env: Env, installationId: string, id: string, at = new Date()): Promise<SubmissionRow> {
  const { row, claimed } = await claim(env, installationId, id, at);
  if (!claimed) return row;
  try {
    const registration = await openRegistration(env, installationId);
    const payload = await openPersonalData<Payload>(env, installationId, payloadContext(id), row.payloadSealed);
    const files = JSON.parse(row.filesJson) as FileState[];
    let reportId = row.ncmecReportId;
    if (!reportId) {
      // Written before the request: a pass that finds it with no report id does not know whether
      // NCMEC opened one, and stops for an admin instead of opening a second.
      if (row.submitSentAt) throw submitOutcomeUnknown(id, null);
      await env.DB.prepare(`UPDATE cybertipline_submissions SET submit_sent_at = ?2 WHERE id = ?1 AND ncmec_report_id IS NULL`).bind(id, new Date().toISOString()).run();
      const result = await callStep(env, registration, "submit", { xml: payload.xml });
      if (!result.ok) {
        // NCMEC answered with a refusal code: nothing was opened, so the next pass may send it again.
        if (result.error.code === "cybertipline.report_rejected" || result.error.code === "cybertipline.credentials_refused") {
          await env.DB.prepare(`UPDATE cybertipline_submissions SET submit_sent_at = NULL WHERE id = ?1 AND ncmec_report_id IS NULL`).bind(id).run();
          throw result.error;
        }
        throw submitOutcomeUnknown(id, result.error);
      }
      const opened = result.answer;
      if (!opened.reportId) throw submitOutcomeUnknown(id, serviceGap("submit"));
      reportId = opened.reportId;
      const now = new Date().toISOString();
      await env.DB.batch([
        env.DB.prepare(`UPDATE cybertipline_submissions SET ncmec_report_id = ?2, state = 'opened', updated_at = ?3 WHERE id = ?1 AND ncmec_report_id IS NULL`).bind(id, reportId, now),
        auditStatement(env.DB, {
          installationId,
          idempotencyKey: `cybertipline:${id}:opened`,
          action: "cybertipline.report_opened",
          actor: { type: "system", id: "cybertipline" },
          target: { type: "cybertipline_submission", id },
          details: { ncmecReportId: reportId, xmlDigest: row.xmlDigest },
          at: now,
        }),
      ]);
    }
    for (const [index, file] of files.entries()) {
      if (file.fileId) continue;
      const preserved = await openPreservedFile(env, installationId, id, index);
      if (!preserved) throw new AppError("cybertipline.file_missing", `The preserved copy of file ${index + 1} is gone; the report cannot carry it.`, { status: 409 });
      const form = new FormData();
      form.append("id", reportId);
      form.append("file", new File([preserved.bytes], payload.files[index]!.name, { type: preserved.contentType }));
      const uploaded = must(await callStep(env, registration, "upload", { form }));
      if (!uploaded.fileId) throw serviceGap("upload");
      file.fileId = uploaded.fileId;
      await env.DB.prepare(`UPDATE cybertipline_submissions SET files_json = json_set(files_json, '$[${index}].fileId', ?2), updated_at = ?3 WHERE id = ?1`).bind(id, uploaded.fileId, new Date().toISOString()).run();
    }
    for (const [index, file] of files.entries()) {
      if (file.details === 1) continue;
      const described = payload.files[index]!;
      const xml = fileDetailsXml(reportId, file.fileId!, { originalFileName: described.name, locationOfFile: described.locationOfFile, fileViewedByEsp: described.viewed ?? false, sha256: described.sha256, pdq: described.pdq });
      must(await callStep(env, registration, "fileinfo", { xml }));
      file.details = 1;
      await env.DB.prepare(`UPDATE cybertipline_submissions SET files_json = json_set(files_json, '$[${index}].details', 1), updated_at = ?2 WHERE id = ?1`).bind(id, new Date().toISOString()).run();
    }
    const form = new FormData();
    form.append("id", reportId);
    must(await callStep(env, registration, "finish", { form }));
    const now = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE cybertipline_submissions SET state = 'finished', finished_at = ?2, lease_until = NULL, next_attempt_at = NULL, last_error_code = NULL, last_response_code = NULL, updated_at = ?2
        WHERE id = ?1 AND state = 'opened'`).bind(id, now),
      auditStatement(env.DB, {
        installationId,
        idempotencyKey: `cybertipline:${id}:finished`,
        action: "cybertipline.report_finished",
        actor: { type: "system", id: "cybertipline" },
        target: { type: "cybertipline_submission", id },
        details: { ncmecReportId: reportId, fileIds: files.map((f) => f.fileId), xmlDigest: row.xmlDigest, reportId: row.reportId },
        at: now,
      }),
    ]);
    return (await submissionRow(env.DB, installationId, id))!;
  } catch (error) {
    const current = (await submissionRow(env.DB, installationId, id)) ?? row;
    // NCMEC refused a step of a report it had opened, for good: whatever is sent again is refused
    // again, so the half-made report is cancelled there rather than left open. This pass keeps the
    // row's lease until then (no admin's retraction races it); when the retraction fails, the
    // lease goes and an admin can retract it later (POST /cybertipline/reports/:id/retract).
    const retract = error instanceof AppError && error.code === "cybertipline.report_rejected" && current.ncmecReportId !== null && current.retractedAt === null;
    await recordFailure(env, current, error, at, { keepLease: retract });
    if (retract) {
      try {
        await retractSubmission(env, { ...current, state: "rejected" }, { actor: { type: "system", id: "cybertipline" }, reason: "NCMEC refused a step of the report", automatic: true });
      } catch {
        await env.DB.prepare(`UPDATE cybertipline_submissions SET lease_until = NULL WHERE id = ?1 AND installation_id = ?2 AND retracted_at IS NULL`).bind(id, installationId).run();
      }
    }
    throw error;
  }
}

/**
 * Cancels at NCMEC (`/retract`) the report a submission opened and did not finish, then records it:
 * the submission is 'rejected' with `retracted_at` (it can be confirmed again as a new report), its
 * files and hold stay; audited. Throws the call's typed error, having written nothing, when NCMEC
 * does not confirm it. The caller holds the row (a pass's failure, or an admin's lease).
 */
export async function retractSubmission(env: Env, row: SubmissionRow, input: { actor: AuditEventInput["actor"]; reason: string; automatic?: boolean }): Promise<void> {
  const registration = await openRegistration(env, row.installationId);
  const form = new FormData();
  form.append("id", row.ncmecReportId!);
  const result = await callStep(env, registration, "retract", { form });
  // 5001 (no such report): NCMEC no longer holds it — an earlier retraction went through and its
  // record here did not — so it is recorded as retracted now.
  const gone = !result.ok && (result.error.details as { responseCode?: number | null } | undefined)?.responseCode === RESPONSE_NO_SUCH_REPORT;
  if (!result.ok && !gone) throw result.error;
  const now = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE cybertipline_submissions SET state = 'rejected', retracted_at = ?3, lease_until = NULL, next_attempt_at = NULL, updated_at = ?3
      WHERE id = ?1 AND installation_id = ?2 AND retracted_at IS NULL AND state <> 'finished'`).bind(row.id, row.installationId, now),
    auditStatement(env.DB, {
      installationId: row.installationId,
      idempotencyKey: `cybertipline:${row.id}:retracted`,
      action: "cybertipline.report_retracted",
      actor: input.actor,
      target: { type: "cybertipline_submission", id: row.id },
      details: { ncmecReportId: row.ncmecReportId, reason: input.reason, automatic: input.automatic === true, stateBefore: row.state, lastErrorCode: row.lastErrorCode },
      at: now,
    }),
  ]);
}
