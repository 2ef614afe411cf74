// Reading and looking after CyberTipline submissions: the installation's list and one submission,
// an admin's resume of one that stopped, an admin's retraction of one opened and not finished, an admin's audited read of a preserved file, and the
// scheduled sweep — it resumes submissions that are due (a failed pass's backoff ended) and erases
// the preserved copies of those whose preservation hold is over (it ran out, or an admin released
// it with a reason; retention never ends a hold).
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, notFound } from "../../errors";
import { erasePreservedFiles, openPreservedFile } from "./evidence";
import { advanceSubmission, retractSubmission, SUBMISSION_COLUMNS, submissionRow, submissionView, type SubmissionRow } from "./submissions";

/** Submissions resumed per scheduled run (each is a handful of requests to NCMEC). */
const SWEEP_RESUMES = 10;
/** Ended submissions whose preserved copies are checked per run. */
const SWEEP_ERASES = 50;

export async function listCyberTiplineReports(env: Env, actor: Actor, options: { limit: number; state?: string }) {
  const { results } = await env.DB.prepare(`SELECT ${SUBMISSION_COLUMNS} FROM cybertipline_submissions WHERE installation_id = ?1 AND (?2 IS NULL OR state = ?2) ORDER BY created_at DESC LIMIT ?3`)
    .bind(actor.installationId, options.state ?? null, options.limit)
    .all<SubmissionRow>();
  return { items: results.map(submissionView) };
}

export async function getCyberTiplineReport(env: Env, actor: Actor, id: string) {
  const row = await submissionRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("cybertipline_submission");
  return submissionView(row);
}

/** An admin's resume of a submission that stopped (now, whatever its backoff); audited. Finished: returned as it is. */
export async function resumeCyberTiplineReport(env: Env, actor: Actor, id: string) {
  const row = await submissionRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("cybertipline_submission");
  const at = new Date().toISOString();
  await env.DB.batch([
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `cybertipline:${id}:resumed:${at}:${crypto.randomUUID()}`,
      action: "cybertipline.submission_resumed",
      actor: actor.audit,
      target: { type: "cybertipline_submission", id },
      details: { state: row.state, ncmecReportId: row.ncmecReportId },
      at,
    }),
  ]);
  return submissionView(await advanceSubmission(env, actor.installationId, id));
}

/**
 * An admin settles a submission whose /submit outcome is unknown (`cybertipline.submit_outcome_unknown`):
 * NCMEC's report id found in NCMEC's records (the submission goes on from the file uploads), or
 * `resend` when NCMEC holds no report (the next pass sends /submit once more). Audited; 409 for a
 * submission that is not waiting for this.
 */
export async function reconcileCyberTiplineReport(env: Env, actor: Actor, id: string, body: { ncmecReportId?: string; resend?: boolean }) {
  const row = await submissionRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("cybertipline_submission");
  if (row.ncmecReportId !== null || row.submitSentAt === null || row.state !== "pending") {
    throw new AppError("cybertipline.not_unknown", "This submission is not waiting for an admin to say what became of its /submit request; resume it instead (POST /cybertipline/reports/:id/resume).", { status: 409 });
  }
  if ((body.ncmecReportId === undefined) === (body.resend !== true)) {
    throw new AppError("cybertipline.reconcile_invalid", 'Send exactly one of {"ncmecReportId": "<NCMEC\'s report id>"} or {"resend": true}.', { status: 422 });
  }
  const at = new Date().toISOString();
  const update = body.ncmecReportId
    ? env.DB.prepare(`UPDATE cybertipline_submissions SET ncmec_report_id = ?3, state = 'opened', next_attempt_at = ?4, last_error_code = NULL, updated_at = ?4
        WHERE id = ?1 AND installation_id = ?2 AND ncmec_report_id IS NULL AND state = 'pending'`).bind(id, actor.installationId, body.ncmecReportId, at)
    : env.DB.prepare(`UPDATE cybertipline_submissions SET submit_sent_at = NULL, next_attempt_at = ?3, last_error_code = NULL, updated_at = ?3
        WHERE id = ?1 AND installation_id = ?2 AND ncmec_report_id IS NULL AND state = 'pending'`).bind(id, actor.installationId, at);
  await env.DB.batch([
    update,
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `cybertipline:${id}:reconciled:${at}:${crypto.randomUUID()}`,
      action: "cybertipline.submission_reconciled",
      actor: actor.audit,
      target: { type: "cybertipline_submission", id },
      details: body.ncmecReportId ? { ncmecReportId: body.ncmecReportId } : { resend: true },
      at,
    }),
  ]);
  return submissionView((await submissionRow(env.DB, actor.installationId, id))!);
}

/**
 * An admin cancels at NCMEC a report that was opened and not finished (`/retract`): one that stopped
 * for good (a preserved file gone, a refusal the automatic retraction could not cancel), or one the
 * company decides not to file. Audited with the reason; the submission becomes 'rejected' with
 * `retractedAt` (the report may be confirmed again), its files and hold stay. Idempotent once
 * retracted. 409 `cybertipline.not_retractable` for a finished report (NCMEC holds it) or one
 * NCMEC never opened; 409 `cybertipline.submission_busy` while a pass holds it.
 */
export async function retractCyberTiplineReport(env: Env, actor: Actor, id: string, body: { reason: string }) {
  const row = await submissionRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("cybertipline_submission");
  if (row.retractedAt) return submissionView(row);
  if (row.state === "finished") {
    throw new AppError("cybertipline.not_retractable", "This report was finished: NCMEC holds it and it cannot be retracted through the API. Contact NCMEC about a finished report.", { status: 409 });
  }
  if (!row.ncmecReportId) {
    throw new AppError(
      "cybertipline.not_retractable",
      row.submitSentAt
        ? "NCMEC's report id for this submission is not known (its /submit outcome is unknown): reconcile it first (POST /cybertipline/reports/:id/reconcile with the id found in NCMEC's records), then retract."
        : "NCMEC has not opened a report for this submission, so there is nothing to retract there.",
      { status: 409 },
    );
  }
  const now = new Date();
  const lease = new Date(now.getTime() + 120_000).toISOString();
  const taken = await env.DB.prepare(`UPDATE cybertipline_submissions SET lease_until = ?3, updated_at = ?4
      WHERE id = ?1 AND installation_id = ?2 AND retracted_at IS NULL AND state IN ('opened', 'rejected') AND ncmec_report_id IS NOT NULL AND (lease_until IS NULL OR lease_until <= ?4)`)
    .bind(id, actor.installationId, lease, now.toISOString())
    .run();
  if ((taken.meta.changes ?? 0) !== 1) throw new AppError("cybertipline.submission_busy", "Another pass is sending this report right now; retract it once that pass ends.", { status: 409, retryable: true });
  try {
    await retractSubmission(env, row, { actor: actor.audit, reason: body.reason });
  } catch (error) {
    // Only the lease this retraction took (a pass may hold the row again once it lapsed).
    await env.DB.prepare(`UPDATE cybertipline_submissions SET lease_until = NULL WHERE id = ?1 AND installation_id = ?2 AND retracted_at IS NULL AND lease_until = ?3`).bind(id, actor.installationId, lease).run();
    throw error;
  }
  return submissionView((await submissionRow(env.DB, actor.installationId, id))!);
}

/** Content types a preserved file is served as; anything else is served as bytes to download. */
const SERVED_TYPES = new Set(["image/jpeg", "image/png", "image/webp", "image/gif", "video/mp4"]);

/** A preserved file, opened for an admin who may read personal data; the read is audited before the bytes leave. */
export async function readPreservedFile(env: Env, actor: Actor, id: string, index: number): Promise<Response> {
  const row = await submissionRow(env.DB, actor.installationId, id);
  if (!row) throw notFound("cybertipline_submission");
  if (row.evidenceErasedAt) throw new AppError("cybertipline.evidence_erased", "The preservation hold ended and the preserved files were erased.", { status: 410 });
  const count = (JSON.parse(row.filesJson) as unknown[]).length;
  if (!Number.isInteger(index) || index < 0 || index >= count) throw notFound("cybertipline_file");
  const at = new Date().toISOString();
  await env.DB.batch([
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `cybertipline:${id}:file_read:${index}:${at}:${crypto.randomUUID()}`,
      action: "cybertipline.file_read",
      actor: actor.audit,
      target: { type: "cybertipline_submission", id },
      details: { index, reportId: row.reportId },
      at,
    }),
  ]);
  const file = await openPreservedFile(env, actor.installationId, id, index);
  if (!file) throw new AppError("cybertipline.evidence_erased", "The preserved file is gone.", { status: 410 });
  // The type the evidence host answered is a claim: only known media types, always as an
  // attachment, never sniffed, sandboxed — a preserved file never runs as a page of this origin.
  const type = SERVED_TYPES.has(file.contentType.split(";")[0]!.trim().toLowerCase()) ? file.contentType.split(";")[0]!.trim().toLowerCase() : "application/octet-stream";
  return new Response(file.bytes, {
    headers: {
      "content-type": type,
      "content-disposition": `attachment; filename="${id}-${index}"`,
      "x-content-type-options": "nosniff",
      "content-security-policy": "sandbox; default-src 'none'",
      "cache-control": "no-store",
    },
  });
}

/** The scheduled sweep: resumes due submissions, erases preserved copies whose hold is over. Bounded, idempotent. */
export async function sweepCyberTipline(env: Env, now: Date): Promise<Record<string, number>> {
  const at = now.toISOString();
  const due = await env.DB.prepare(`SELECT id, installation_id AS installationId FROM cybertipline_submissions WHERE next_attempt_at <= ?1 AND state IN ('pending', 'opened') ORDER BY next_attempt_at LIMIT ?2`)
    .bind(at, SWEEP_RESUMES)
    .all<{ id: string; installationId: string }>();
  let finished = 0;
  let failed = 0;
  for (const row of due.results) {
    try {
      await advanceSubmission(env, row.installationId, row.id, now);
      finished += 1;
    } catch {
      // Recorded on the row (its error code, the next attempt); the next run goes on with the others.
      failed += 1;
    }
  }
  // Only those whose hold is over and whose case no other active hold keeps (a counsel's or law
  // enforcement's hold on the case keeps the preserved files too): held rows are never read here.
  const ended = await env.DB.prepare(`SELECT ${SUBMISSION_COLUMNS} FROM cybertipline_submissions s WHERE evidence_erased_at IS NULL AND state IN ('finished', 'rejected')
      AND NOT EXISTS (SELECT 1 FROM preservation_holds h WHERE h.installation_id = s.installation_id AND (h.id = s.hold_id OR h.case_id = s.case_id) AND h.released_at IS NULL AND h.held_until > ?2) LIMIT ?1`)
    .bind(SWEEP_ERASES, at)
    .all<SubmissionRow>();
  let erased = 0;
  for (const row of ended.results) {
    await erasePreservedFiles(env, row.installationId, row.id, (JSON.parse(row.filesJson) as unknown[]).length);
    await env.DB.batch([
      env.DB.prepare(`UPDATE cybertipline_submissions SET payload_sealed = '', evidence_erased_at = ?2, updated_at = ?2 WHERE id = ?1 AND evidence_erased_at IS NULL`).bind(row.id, at),
      auditStatement(env.DB, {
        installationId: row.installationId,
        idempotencyKey: `cybertipline:${row.id}:evidence_erased`,
        action: "cybertipline.evidence_erased",
        actor: { type: "system", id: "cybertipline" },
        target: { type: "cybertipline_submission", id: row.id },
        details: { holdId: row.holdId },
        at,
      }),
    ]);
    erased += 1;
  }
  return { resumed: due.results.length, finished, failed, erased, more: due.results.length === SWEEP_RESUMES ? 1 : 0 };
}
