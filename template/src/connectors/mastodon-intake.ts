// A Mastodon server's admin webhooks at a connector's own URL. Mastodon cannot send our bearer
// key, so each delivery is authenticated by `X-Hub-Signature: sha256=<hex HMAC-SHA256 of the
// body>` under the connector's secret (checked with WebCrypto's verify, in constant time).
// `report.created` becomes one report of the installation; `report.updated` of a report it took
// in resolves (or reopens) ours as Mastodon did (mastodon-resolution.ts); other events are
// acknowledged. Every lookup of a Mastodon report is within the connector's own installation: a
// row that names this connector but another installation (e.g. from a crafted backup) is not ours.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { openPersonalData } from "../cases";
// Intake fires triggers (which start runs), so it is not in the cases index (that would cycle).
import { intakeReport } from "../cases/reports/reports";
// Ending a run is not in the workflows index (run-end.ts reaches enforcement, which imports it).
import { terminateRun } from "../workflows/run-end";
import { AppError, errorCode, notFound } from "../errors";
import { configOf, connectorRowByIdUnsafe, webhookSecretContext, type ConnectorRow } from "./connector-rows";
import { mastodonIntake, type AdminReport } from "./mastodon-mapping";
import { reopenConnectorReport, resolveConnectorReports } from "./mastodon-resolution";

const decoder = new TextDecoder();

function hexBytes(hex: string): Uint8Array | null {
  if (!/^(?:[0-9a-fA-F]{2}){1,64}$/u.test(hex)) return null;
  return Uint8Array.from(hex.match(/../gu)!, (pair) => Number.parseInt(pair, 16));
}

/** Whether `header` is `sha256=<hex>` of the body's HMAC-SHA256 under `secret`. */
export async function validHubSignature(secret: string, body: ArrayBuffer, header: string | undefined): Promise<boolean> {
  const match = /^sha256=([0-9a-fA-F]+)$/u.exec(header?.trim() ?? "");
  const signature = match ? hexBytes(match[1]!) : null;
  if (signature?.length !== 32) return false;
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  return crypto.subtle.verify("HMAC", key, signature, body);
}

const badSignature = () =>
  new AppError("connector.bad_signature", "X-Hub-Signature is missing or is not the HMAC-SHA256 of the body under this connector's webhook secret; paste the secret shown at creation into Mastodon's webhook.", {
    status: 401,
  });

export interface WebhookOutcome {
  /** The connector's installation acts (audit, logs). */
  actor: Actor;
  status: 200 | 201;
  body: { accepted: true; event: string | null; reportId: string | null; replayed: boolean; ignored: boolean; runs: number; resolved?: number };
}

/**
 * Takes in one admin webhook. Unknown (or deleted) connector: 404; bad or missing signature: 401
 * `connector.bad_signature`, before the body is read as JSON. A Mastodon report already taken in
 * by this connector is answered with the same report (200, `replayed`), whatever the body.
 */
export async function takeMastodonWebhook(env: Env, ctx: ExecutionContext, input: { connectorId: string; body: ArrayBuffer; signature: string | undefined }): Promise<WebhookOutcome> {
  const row = await connectorRowByIdUnsafe(env.DB, input.connectorId);
  if (!row?.webhookSecretSealed) throw notFound("connector");
  const { secret } = await openPersonalData<{ secret: string }>(env, row.installationId, webhookSecretContext(row.id), row.webhookSecretSealed);
  if (!(await validHubSignature(secret, input.body, input.signature))) throw badSignature();
  const actor: Actor = { installationId: row.installationId, scopes: ["reports:write"], audit: { type: "system", id: `connector:${row.id}` } };
  let event: { event?: unknown; object?: unknown };
  try {
    event = JSON.parse(decoder.decode(input.body)) as typeof event;
  } catch {
    throw new AppError("connector.payload_invalid", "The webhook body is not JSON.", { status: 422 });
  }
  const name = typeof event?.event === "string" ? event.event.slice(0, 100) : null;
  if (name === "report.updated") return reportUpdated(env, row, actor, event.object);
  if (name !== "report.created") return { actor, status: 200, body: { accepted: true, event: name, reportId: null, replayed: false, ignored: true, runs: 0 } };
  if (typeof event.object !== "object" || event.object === null) throw new AppError("connector.payload_invalid", "report.created carries no report object.", { status: 422 });
  const intake = mastodonIntake(new URL(row.baseUrl).host, configOf(row), event.object as AdminReport);
  const known = await ownRemoteReport(env, row, intake.remoteReportId);
  if (known) return { actor, status: 200, body: { accepted: true, event: name, reportId: known.reportId, replayed: true, ignored: false, runs: 0 } };
  // '#' is outside the Idempotency-Key header's alphabet (http/validate.ts): no API client can take this key first.
  const key = `#connector:${row.id}:${intake.remoteReportId}`;
  const taken = await intakeOnce(env, ctx, actor, intake.report, key);
  await recordRemoteReport(env, row, { remoteReportId: intake.remoteReportId, targetAccountId: intake.targetAccountId, reportId: taken.reportId, subjectKind: intake.report.subject.kind, statuses: statusCount(event.object) });
  return { actor, status: taken.replayed ? 200 : 201, body: { accepted: true, event: name, reportId: taken.reportId, replayed: taken.replayed, ignored: false, runs: taken.runs } };
}

/** This connector's record of a Mastodon report, in its own installation only. */
function ownRemoteReport(env: Env, row: ConnectorRow, remoteReportId: string) {
  return env.DB.prepare(`SELECT report_id AS reportId FROM connector_reports WHERE connector_id = ?1 AND remote_report_id = ?2 AND installation_id = ?3`).bind(row.id, remoteReportId, row.installationId).first<{ reportId: string }>();
}

/**
 * `report.updated`: Mastodon resolved the report (action_taken) — in its own screens, or by an
 * account action that resolved every open report about the account — or reopened it. A report
 * this connector did not take in is acknowledged and ignored.
 */
async function reportUpdated(env: Env, row: ConnectorRow, actor: Actor, object: unknown): Promise<WebhookOutcome> {
  const report = object as { id?: unknown; action_taken?: unknown } | null;
  const remoteReportId = typeof report?.id === "string" || typeof report?.id === "number" ? String(report.id).slice(0, 100) : null;
  if (!remoteReportId || typeof report?.action_taken !== "boolean") throw new AppError("connector.payload_invalid", "report.updated carries no Admin::Report with an id and action_taken.", { status: 422 });
  const known = await ownRemoteReport(env, row, remoteReportId);
  const base = { accepted: true as const, event: "report.updated", replayed: false, runs: 0 };
  if (!known) return { actor, status: 200, body: { ...base, reportId: null, ignored: true } };
  if (!report.action_taken) {
    await reopenConnectorReport(env, row, remoteReportId);
    return { actor, status: 200, body: { ...base, reportId: known.reportId, ignored: false, resolved: 0 } };
  }
  // Marked resolved already if our own account action resolved it; its review is ended either way.
  const resolved = await resolveConnectorReports(env, row, { remoteReportId }, "report");
  await endWaitingReviews(env, actor, known.reportId);
  return { actor, status: 200, body: { ...base, reportId: known.reportId, ignored: false, resolved: resolved.length } };
}

/**
 * A report resolved in Mastodon needs no review here: its runs waiting for a person (an open or
 * claimed task of their own) are terminated, which cancels those tasks (audited). Runs doing
 * anything else are left alone (e.g. the run whose action resolved it, waiting for its delivery).
 */
async function endWaitingReviews(env: Env, actor: Actor, reportId: string): Promise<void> {
  const { results } = await env.DB.prepare(`
    SELECT r.id FROM workflow_runs r
    WHERE r.report_id = ?2 AND r.installation_id = ?1 AND r.state = 'waiting'
      AND EXISTS (SELECT 1 FROM human_tasks t WHERE t.run_id = r.id AND t.state IN ('open', 'claimed') AND t.origin = 'workflow')`)
    .bind(actor.installationId, reportId)
    .all<{ id: string }>();
  for (const run of results) await terminateRun(env, actor, run.id).catch(() => undefined);
}

const statusCount = (object: object) => (Array.isArray((object as AdminReport).statuses) ? (object as AdminReport).statuses!.length : 0);

/** Intake under the connector's key; a body that changed since (a resent webhook) is still the first report. */
async function intakeOnce(env: Env, ctx: ExecutionContext, actor: Actor, report: Parameters<typeof intakeReport>[3], key: string): Promise<{ reportId: string; replayed: boolean; runs: number }> {
  try {
    const result = await intakeReport(env, ctx, actor, report, key);
    return { reportId: result.report.id, replayed: result.replayed, runs: result.runs.length };
  } catch (error) {
    if (errorCode(error) !== "idempotency_key.reused") throw error;
    const first = await env.DB.prepare(`SELECT id FROM reports WHERE installation_id = ?1 AND idempotency_key = ?2`).bind(actor.installationId, key).first<{ id: string }>();
    if (!first) throw error;
    return { reportId: first.id, replayed: true, runs: 0 };
  }
}

/** The Mastodon report and account a report of ours stands for, with its audit event (once per Mastodon report). */
async function recordRemoteReport(env: Env, row: ConnectorRow, input: { remoteReportId: string; targetAccountId: string; reportId: string; subjectKind: string; statuses: number }): Promise<void> {
  const at = new Date().toISOString();
  await env.DB.batch([
    // A row under this connector's id that names another installation is not this connector's (it
    // can only come from outside, e.g. a crafted backup): the genuine report takes its place.
    env.DB.prepare(`INSERT INTO connector_reports (connector_id, remote_report_id, installation_id, report_id, target_account_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
      ON CONFLICT (connector_id, remote_report_id) DO UPDATE SET installation_id = excluded.installation_id, report_id = excluded.report_id, target_account_id = excluded.target_account_id,
        created_at = excluded.created_at, resolved_at = NULL, resolved_by = NULL
      WHERE connector_reports.installation_id <> excluded.installation_id`).bind(row.id, input.remoteReportId, row.installationId, input.reportId, input.targetAccountId, at),
    auditStatement(env.DB, {
      installationId: row.installationId,
      idempotencyKey: `connector:${row.id}:report:${input.remoteReportId}`,
      action: "connector.report_received",
      actor: { type: "system", id: `connector:${row.id}` },
      target: { type: "report", id: input.reportId },
      details: { connectorId: row.id, kind: row.kind, remoteReportId: input.remoteReportId, subjectKind: input.subjectKind, statuses: input.statuses },
      at,
    }),
  ]);
}
