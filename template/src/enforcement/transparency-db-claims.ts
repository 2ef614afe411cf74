// The claim (lease) on a batch of `tdb_submissions` rows and every write to those rows and to
// `tdb_settings`' call record while the batch is sent (transparency-db-submit.ts sends it). A claim
// holds up to 100 pending rows for a lease from the clock, renewed before every request; every write
// is guarded on the claim id, so a row another run took is neither sent nor written by this one.
// Rows end submitted (with their audit event) or rejected (with theirs), stay in doubt until a
// definite answer, or are released; a failed call pauses the installation (retry-after, else backoff).
import { auditStatement } from "../audit";
import { decisionReversalUuidStatement } from "../cases";
import type { TdbSettingsRow } from "./transparency-db";
import { parseRetryAfter } from "./webhooks";

export const TDB_BATCH_LIMIT = 100;
/** 422 rounds within one batch (each removes the statements the errors named). */
export const MAX_ROUNDS = 4;
const MAX_BACKOFF_MS = 3600_000;
const BASE_BACKOFF_MS = 30_000;
const CLAIM_MARGIN_MS = 60_000;

export function timeoutMs(env: Env): number {
  const configured = Number((env as { TRANSPARENCY_DB_TIMEOUT_SECONDS?: string; WEBHOOK_TIMEOUT_SECONDS?: string }).TRANSPARENCY_DB_TIMEOUT_SECONDS ?? (env as { WEBHOOK_TIMEOUT_SECONDS?: string }).WEBHOOK_TIMEOUT_SECONDS);
  return (Number.isFinite(configured) && configured >= 1 && configured <= 60 ? configured : 30) * 1000;
}

export interface SubmitSummary {
  batches: number;
  submitted: number;
  alreadyThere: number;
  rejected: number;
  deferred: number;
  failedCalls: number;
  /** Rows a batch found taken by another claim before a request (not sent, not written by it). */
  lostClaims: number;
}

export const emptySummary = (): SubmitSummary => ({ batches: 0, submitted: 0, alreadyThere: 0, rejected: 0, deferred: 0, failedCalls: 0, lostClaims: 0 });

export interface Claimed {
  decisionId: string;
  puid: string;
  inDoubt: number;
  overridesJson: string | null;
  reportId: string | null;
}

export interface Context {
  env: Env;
  installationId: string;
  baseUrl: string;
  token: string;
  claimId: string;
  now: Date;
  summary: SubmitSummary;
}

/**
 * How long a claim holds: every request of a batch (4 rounds, plus lookups) fits in it, and it is
 * renewed before each request (`holdClaim`), so a batch never sends or writes on a lapsed lease.
 */
const leaseMs = (env: Env) => timeoutMs(env) * (MAX_ROUNDS + 2) + CLAIM_MARGIN_MS;

/**
 * Claims up to 100 pending rows. The lease runs from now by the clock, not from the sweep's
 * scheduled time: a batch that starts late in a long sweep would otherwise hold a lease that
 * already lapsed, and a second sweep would take and send the same rows while this one's POST is
 * in flight.
 */
export async function claim(env: Env, installationId: string, claimId: string): Promise<Claimed[]> {
  const start = Date.now();
  const { results } = await env.DB.prepare(`
    UPDATE tdb_submissions SET claim_id = ?2, claimed_until = ?3
    WHERE decision_id IN (
      SELECT decision_id FROM tdb_submissions WHERE installation_id = ?1 AND state = 'pending' AND (claimed_until IS NULL OR claimed_until <= ?4)
      ORDER BY queued_at, decision_id LIMIT ?5)
    RETURNING decision_id AS decisionId, puid, in_doubt AS inDoubt, overrides_json AS overridesJson,
      (SELECT report_id FROM decisions d WHERE d.id = tdb_submissions.decision_id) AS reportId`)
    .bind(installationId, claimId, new Date(start + leaseMs(env)).toISOString(), new Date(start).toISOString(), TDB_BATCH_LIMIT)
    .all<Claimed>();
  return results;
}

/**
 * Before a request: renews the lease of the batch's rows among `puids` that it still holds (its
 * claim id, lease not lapsed) and returns those. A row another sweep took is not sent by this
 * batch, and its results are not written (every write is guarded on this claim id).
 */
export async function holdClaim(ctx: Context, puids: string[], mark?: "in_doubt"): Promise<Set<string>> {
  if (puids.length === 0) return new Set();
  const start = Date.now();
  const { results } = await ctx.env.DB.prepare(`
    UPDATE tdb_submissions SET claimed_until = ?3${mark ? ", in_doubt = 1, attempts = attempts + 1, updated_at = ?5" : ""}
    WHERE claim_id = ?1 AND claimed_until > ?4 AND puid IN (SELECT value FROM json_each(?2)) RETURNING puid`)
    .bind(ctx.claimId, JSON.stringify(puids), new Date(start + leaseMs(ctx.env)).toISOString(), new Date(start).toISOString(), ...(mark ? [ctx.now.toISOString()] : []))
    .all<{ puid: string }>();
  const held = new Set(results.map((row) => row.puid));
  ctx.summary.lostClaims += puids.length - held.size;
  return held;
}

export async function clearDoubt(ctx: Context, puids: string[]) {
  await ctx.env.DB.prepare(`UPDATE tdb_submissions SET in_doubt = 0 WHERE claim_id = ?1 AND puid IN (SELECT value FROM json_each(?2))`).bind(ctx.claimId, JSON.stringify(puids)).run();
}

export async function release(ctx: Context, puids: string[]) {
  await ctx.env.DB.prepare(`UPDATE tdb_submissions SET claim_id = NULL, claimed_until = NULL WHERE claim_id = ?1 AND puid IN (SELECT value FROM json_each(?2))`).bind(ctx.claimId, JSON.stringify(puids)).run();
}

/** Said to exist but not found (yet): left pending and in doubt, released, looked up again next time. */
export async function leaveInDoubt(ctx: Context, puid: string) {
  await ctx.env.DB.prepare(`UPDATE tdb_submissions SET in_doubt = 1, claim_id = NULL, claimed_until = NULL WHERE claim_id = ?1 AND puid = ?2`).bind(ctx.claimId, puid).run();
}

export async function markSubmitted(ctx: Context, items: Array<{ puid: string; uuid: string | null; permalink: string | null }>, by: "created" | "existing_puid", status: number) {
  if (items.length === 0) return;
  const at = ctx.now.toISOString();
  const json = JSON.stringify(items);
  await ctx.env.DB.batch([
    ctx.env.DB.prepare(`
      UPDATE tdb_submissions SET state = 'submitted', in_doubt = 0, claim_id = NULL, claimed_until = NULL, confirmed_by = ?3, last_status = ?4, submitted_at = ?5, updated_at = ?5,
        uuid = (SELECT json_extract(j.value, '$.uuid') FROM json_each(?2) j WHERE json_extract(j.value, '$.puid') = tdb_submissions.puid),
        permalink = (SELECT json_extract(j.value, '$.permalink') FROM json_each(?2) j WHERE json_extract(j.value, '$.puid') = tdb_submissions.puid)
      WHERE claim_id = ?1 AND state = 'pending' AND puid IN (SELECT json_extract(value, '$.puid') FROM json_each(?2))`).bind(ctx.claimId, json, by, status, at),
    auditStatement(ctx.env.DB, {
      installationId: ctx.installationId,
      idempotencyKey: `tdb_batch:${ctx.claimId}:${by}:${items[0]!.puid}`,
      action: "transparency_db.statements_submitted",
      actor: { type: "system", id: "transparency-db" },
      target: { type: "tdb_batch", id: ctx.claimId },
      details: { confirmedBy: by, count: items.length, decisionIds: items.map((item) => item.puid) },
      at,
    }),
    // A decision already reversed on appeal gets its statement's uuid now (the transparency report counts it).
    ...items.flatMap((item) => (item.uuid ? [decisionReversalUuidStatement(ctx.env.DB, { installationId: ctx.installationId, decisionId: item.puid, statementUuid: item.uuid })] : [])),
  ]);
}

export async function markRejected(ctx: Context, items: Array<{ row: Claimed; code: string; errors: unknown }>, by: "database" | "platform", status: number | null) {
  if (items.length === 0) return;
  const at = ctx.now.toISOString();
  ctx.summary.rejected += items.length;
  await ctx.env.DB.batch(
    items.flatMap((item) => [
      ctx.env.DB.prepare(`UPDATE tdb_submissions SET state = 'rejected', in_doubt = 0, claim_id = NULL, claimed_until = NULL, rejected_by = ?3, error_code = ?4, errors_json = ?5,
        last_status = COALESCE(?6, last_status), rejected_at = ?7, updated_at = ?7 WHERE claim_id = ?1 AND decision_id = ?2`).bind(ctx.claimId, item.row.decisionId, by, item.code, JSON.stringify(item.errors ?? null), status, at),
      auditStatement(ctx.env.DB, {
        installationId: ctx.installationId,
        idempotencyKey: `tdb_submission:${item.row.decisionId}:rejected:${ctx.claimId}`,
        action: "transparency_db.statement_rejected",
        actor: { type: "system", id: "transparency-db" },
        target: { type: "decision", id: item.row.decisionId },
        // Field names and kinds only: the errors themselves stay on the submission row.
        details: { code: item.code, rejectedBy: by, fields: errorFields(item.errors) },
        at,
      }),
    ]),
  );
}

function errorFields(errors: unknown): string[] {
  if (Array.isArray(errors)) return [...new Set(errors.map((e) => String((e as { field?: string; path?: string }).field ?? (e as { path?: string }).path ?? "")).filter(Boolean))].slice(0, 20);
  if (errors && typeof errors === "object") return Object.keys(errors).slice(0, 20);
  return [];
}

export async function recordCall(ctx: Context, status: number | null, error: string | null, ok: boolean, pausedUntil: string | null = null) {
  await ctx.env.DB.prepare(`UPDATE tdb_settings SET last_status = ?2, last_error = ?3, last_attempt_at = ?4, failures = CASE WHEN ?5 THEN 0 ELSE failures + 1 END,
      paused_until = ?6 WHERE installation_id = ?1`)
    .bind(ctx.installationId, status, error, ctx.now.toISOString(), ok ? 1 : 0, pausedUntil)
    .run();
}

/**
 * The call failed: the installation waits (retry-after, else 30 s doubling up to an hour) and the
 * batch's claim is released. `maybeStored`: the rows stay in doubt (a 5xx, a timeout, a lost
 * response); otherwise the database definitely stored nothing.
 */
export async function fail(ctx: Context, settings: TdbSettingsRow, status: number | null, retryAfter: string | null, error: string, puids: string[], maybeStored = false): Promise<false> {
  const seconds = parseRetryAfter(retryAfter, ctx.now.getTime());
  const delay = seconds !== null ? Math.min(seconds * 1000, MAX_BACKOFF_MS) : Math.min(BASE_BACKOFF_MS * 2 ** Math.min(settings.failures, 10), MAX_BACKOFF_MS);
  const pausedUntil = new Date(ctx.now.getTime() + delay).toISOString();
  if (!maybeStored && puids.length > 0) await clearDoubt(ctx, puids);
  await ctx.env.DB.prepare(`UPDATE tdb_submissions SET claim_id = NULL, claimed_until = NULL, last_status = ?2 WHERE claim_id = ?1`).bind(ctx.claimId, status).run();
  await recordCall(ctx, status, error, false, pausedUntil);
  ctx.summary.failedCalls++;
  ctx.summary.deferred += puids.length;
  return false;
}
