// Sending statements of reasons to the Transparency Database: batches of at most 100 through
// `POST /api/v1/statements`, by a bounded, idempotent sweep (schedule.ts) and on demand.
//
// A batch is all-or-nothing at the database. The sweep claims up to 100 pending rows (a lease from
// the clock, renewed before every request; a concurrent run takes others, and a row another run
// took is neither sent nor written by this one) and marks them `in_doubt` before the request leaves: only a
// definite answer clears it. 201 → submitted with uuid and permalink. 422 → the statements the
// errors name (`statement_<i>`) are rejected with their errors; `existing_puids` are checked with
// `GET /api/v1/statement/existing-puid/{puid}` (302: there → submitted); the rest is sent again at
// once. 429, 5xx, a timeout or a lost connection → the installation waits (retry-after honoured,
// else exponential); after a 5xx or a lost response the rows stay in doubt, so before any of them
// is sent again it is looked up by its puid, and what the database already holds is never sent twice.
import { Validator, type Schema } from "@cfworker/json-schema";
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { openPersonalData } from "../cases";
import { AppError, errorCode } from "../errors";
import sorSchema from "../lib/dsa-statement-of-reasons.schema.json";
import { decisionRowsByIds, statementOfReasons, statementOfReasonsOf, type DecisionRow } from "./decisions";
import { tdbSettingsRow, tokenContext, type StatementOverrides, type TdbSettingsRow } from "./transparency-db";
import { knownPersonalValuesOf, personalDataFindings, type KnownPersonalValues } from "./transparency-db-privacy";
import { parseRetryAfter } from "./webhooks";

export const TDB_BATCH_LIMIT = 100;
/** Batches per scheduled run, over all installations (the next run goes on). */
// Five batches keep a run within a Worker invocation's D1 query and subrequest limits (about ten
// queries and one POST per batch, plus one lookup per statement left in doubt).
const SWEEP_BATCHES = 5;
const SWEEP_INSTALLATIONS = 20;
/** 422 rounds within one batch (each removes the statements the errors named). */
const MAX_ROUNDS = 4;
const MAX_BACKOFF_MS = 3600_000;
const BASE_BACKOFF_MS = 30_000;
const CLAIM_MARGIN_MS = 60_000;
const validator = new Validator(sorSchema as unknown as Schema, "2020-12", false);

function timeoutMs(env: Env): number {
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

const emptySummary = (): SubmitSummary => ({ batches: 0, submitted: 0, alreadyThere: 0, rejected: 0, deferred: 0, failedCalls: 0, lostClaims: 0 });

interface Claimed {
  decisionId: string;
  puid: string;
  inDoubt: number;
  overridesJson: string | null;
  reportId: string | null;
}

interface Context {
  env: Env;
  installationId: string;
  baseUrl: string;
  token: string;
  claimId: string;
  now: Date;
  summary: SubmitSummary;
}

/** The scheduled sweep: every enabled installation with due statements, bounded per run. */
export async function sweepTransparencyDb(env: Env, now: Date): Promise<Record<string, number>> {
  const at = now.toISOString();
  const { results } = await env.DB.prepare(`
    SELECT s.installation_id AS installationId FROM tdb_settings s
    WHERE s.enabled = 1 AND s.token_sealed IS NOT NULL AND (s.paused_until IS NULL OR s.paused_until <= ?1)
      AND EXISTS (SELECT 1 FROM tdb_submissions t WHERE t.installation_id = s.installation_id AND t.state = 'pending' AND (t.claimed_until IS NULL OR t.claimed_until <= ?1))
    ORDER BY s.last_attempt_at IS NOT NULL, s.last_attempt_at LIMIT ?2`)
    .bind(at, SWEEP_INSTALLATIONS)
    .all<{ installationId: string }>();
  const total = { installations: results.length, ...emptySummary() };
  let budget = SWEEP_BATCHES;
  for (const { installationId } of results) {
    if (budget <= 0) break;
    // Least recently served first (ORDER BY above), so one busy installation does not starve the others.
    const summary = await submitPending(env, installationId, now, budget);
    budget -= Math.max(1, summary.batches);
    for (const key of Object.keys(summary) as Array<keyof SubmitSummary>) total[key] += summary[key];
  }
  return total;
}

/** `POST /transparency-database/submit`: up to `maxBatches` batches of this installation now (the backoff still holds). */
export async function submitNow(env: Env, actor: Actor, maxBatches = SWEEP_BATCHES) {
  const settings = await tdbSettingsRow(env.DB, actor.installationId);
  if (!settings?.enabled) throw new AppError("transparency_db.disabled", "Submission to the Transparency Database is off for this installation; PUT /transparency-database/settings with enabled: true.", { status: 409 });
  return submitPending(env, actor.installationId, new Date(), maxBatches);
}

/** Up to `maxBatches` batches of one installation's pending statements. */
export async function submitPending(env: Env, installationId: string, now: Date, maxBatches: number): Promise<SubmitSummary> {
  const summary = emptySummary();
  const settings = await tdbSettingsRow(env.DB, installationId);
  if (!settings || settings.enabled !== 1 || !settings.tokenSealed) return summary;
  if (settings.pausedUntil && settings.pausedUntil > now.toISOString()) return summary;
  const { token } = await openPersonalData<{ token: string }>(env, installationId, tokenContext(installationId), settings.tokenSealed);
  for (let batch = 0; batch < maxBatches; batch++) {
    const claimId = crypto.randomUUID();
    const claimed = await claim(env, installationId, claimId);
    if (claimed.length === 0) break;
    summary.batches++;
    const ctx: Context = { env, installationId, baseUrl: settings.baseUrl, token, claimId, now, summary };
    const ok = await sendBatch(ctx, claimed, settings);
    if (!ok) break;
  }
  return summary;
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
async function claim(env: Env, installationId: string, claimId: string): Promise<Claimed[]> {
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
async function holdClaim(ctx: Context, puids: string[], mark?: "in_doubt"): Promise<Set<string>> {
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

const systemActor = (installationId: string): Actor => ({ installationId, scopes: ["admin"], audit: { type: "system", id: "transparency-db" } });

/** The statement as it will be sent, or why it may not be: rendered, redactions applied, schema- and personal-data-checked. */
async function prepare(env: Env, installationId: string, row: Claimed, decision: DecisionRow | undefined, known: KnownPersonalValues): Promise<{ statement: Record<string, unknown> } | { code: string; errors: unknown }> {
  let statement: Record<string, unknown>;
  try {
    statement = decision ? statementOfReasonsOf(decision) : await statementOfReasons(env, systemActor(installationId), row.decisionId);
  } catch (error) {
    const details = error instanceof AppError ? error.details : undefined;
    return { code: "transparency_db.statement_invalid", errors: details ?? [{ code: errorCode(error) }] };
  }
  const overrides = row.overridesJson ? (JSON.parse(row.overridesJson) as StatementOverrides) : {};
  const explanationField = "illegal_content_explanation" in statement ? "illegal_content_explanation" : "incompatible_content_explanation";
  // A decision's explanation defaults to its statement: redacted facts redact that copy too.
  if (overrides.decisionFacts && statement[explanationField] === statement.decision_facts) statement[explanationField] = overrides.decisionFacts;
  if (overrides.decisionFacts) statement.decision_facts = overrides.decisionFacts;
  if (overrides.explanation) statement[explanationField] = overrides.explanation;
  // statementOfReasons validated the rendered statement; redacted text is validated again.
  const check = row.overridesJson ? validator.validate(statement) : { valid: true, errors: [] };
  if (!check.valid) return { code: "transparency_db.statement_invalid", errors: check.errors.slice(0, 10).map((e) => ({ path: e.instanceLocation, code: e.keyword, message: e.error })) };
  const findings = personalDataFindings(statement, known);
  if (findings.length > 0) return { code: "transparency_db.personal_data", errors: findings };
  return { statement };
}

function request(ctx: Context, path: string, init: { method: string; body?: string }): Promise<Response> {
  return fetch(`${ctx.baseUrl}${path}`, {
    method: init.method,
    headers: { authorization: `Bearer ${ctx.token}`, accept: "application/json", "content-type": "application/json" },
    ...(init.body === undefined ? {} : { body: init.body }),
    redirect: "manual",
    signal: AbortSignal.timeout(timeoutMs(ctx.env)),
  });
}

/** existing-puid: true (302, there), false (404), or the failed response / error. */
async function existsThere(ctx: Context, puid: string): Promise<boolean | { status: number | null; retryAfter: string | null }> {
  try {
    const response = await request(ctx, `/api/v1/statement/existing-puid/${encodeURIComponent(puid)}`, { method: "GET" });
    await response.body?.cancel();
    if (response.status === 302) return true;
    if (response.status === 404) return false;
    return { status: response.status, retryAfter: response.headers.get("retry-after") };
  } catch {
    return { status: null, retryAfter: null };
  }
}

/** Sends one claimed batch; false when the installation must wait (the sweep stops for it). */
async function sendBatch(ctx: Context, claimed: Claimed[], settings: TdbSettingsRow): Promise<boolean> {
  const { env } = ctx;
  let rows = claimed;
  // 1. Rows a previous attempt may have stored: looked up first, never sent twice.
  const doubtful = rows.filter((row) => row.inDoubt === 1);
  if (doubtful.length > 0) {
    const found: Claimed[] = [];
    for (const row of doubtful) {
      if (!(await holdClaim(ctx, [row.puid])).has(row.puid)) {
        rows = rows.filter((other) => other !== row);
        continue;
      }
      const there = await existsThere(ctx, row.puid);
      if (typeof there === "object") return fail(ctx, settings, there.status, there.retryAfter, there.status === null ? "lookup_failed" : `lookup_http_${there.status}`, []);
      if (there) found.push(row);
    }
    await markSubmitted(
      ctx,
      found.map((row) => ({ puid: row.puid, uuid: null, permalink: null })),
      "existing_puid",
      302,
    );
    ctx.summary.alreadyThere += found.length;
    rows = rows.filter((row) => !found.includes(row));
  }
  // 2. Rendered and checked here; what may not leave is rejected before sending.
  let outgoing: Array<{ row: Claimed; statement: Record<string, unknown> }> = [];
  const refused: Array<{ row: Claimed; code: string; errors: unknown }> = [];
  const decisions = new Map(
    (
      await decisionRowsByIds(
        env,
        ctx.installationId,
        rows.map((row) => row.decisionId),
      )
    ).map((decision) => [decision.id, decision]),
  );
  const known = await knownPersonalValuesOf(
    env,
    ctx.installationId,
    rows.flatMap((row) => (row.reportId ? [row.reportId] : [])),
  );
  const none: KnownPersonalValues = { values: [] };
  const prepared = await Promise.all(rows.map((row) => prepare(env, ctx.installationId, row, decisions.get(row.decisionId), (row.reportId && known.get(row.reportId)) || none)));
  rows.forEach((row, index) => {
    const result = prepared[index]!;
    if ("statement" in result) outgoing.push({ row, statement: result.statement });
    else refused.push({ row, ...result });
  });
  await markRejected(ctx, refused, "platform", null);
  // 3. Sent, with the 422 split.
  for (let round = 0; round < MAX_ROUNDS && outgoing.length > 0; round++) {
    // In doubt from here until a definite answer, and sent only if still held (lease renewed).
    const held = await holdClaim(
      ctx,
      outgoing.map((item) => item.row.puid),
      "in_doubt",
    );
    outgoing = outgoing.filter((item) => held.has(item.row.puid));
    if (outgoing.length === 0) return true;
    const puids = outgoing.map((item) => item.row.puid);
    let response: Response;
    try {
      response = await request(ctx, "/api/v1/statements", { method: "POST", body: JSON.stringify({ statements: outgoing.map((item) => item.statement) }) });
    } catch {
      return fail(ctx, settings, null, null, "request_failed", puids, true);
    }
    const text = await response.text();
    let body: { statements?: Array<{ puid?: string; uuid?: string; permalink?: string }>; errors?: Record<string, unknown> } = {};
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = {};
    }
    if (response.status === 201 || response.status === 200) {
      const created = new Map((body.statements ?? []).map((s) => [s.puid, s]));
      await markSubmitted(
        ctx,
        puids.map((puid) => ({ puid, uuid: created.get(puid)?.uuid ?? null, permalink: created.get(puid)?.permalink ?? null })),
        "created",
        response.status,
      );
      ctx.summary.submitted += puids.length;
      await recordCall(ctx, response.status, null, true);
      return true;
    }
    if (response.status !== 422)
      return fail(ctx, settings, response.status, response.headers.get("retry-after"), response.status === 401 || response.status === 403 ? "token_rejected" : `http_${response.status}`, puids, response.status >= 500);
    // 422: nothing was stored. Split out what the errors name.
    await clearDoubt(ctx, puids);
    const errors = body.errors ?? {};
    const named = new Set<number>();
    const rejected: Array<{ row: Claimed; code: string; errors: unknown }> = [];
    for (const [key, value] of Object.entries(errors)) {
      const match = /^statement_(\d+)$/u.exec(key);
      if (match && outgoing[Number(match[1])]) {
        named.add(Number(match[1]));
        rejected.push({ row: outgoing[Number(match[1])]!.row, code: "transparency_db.rejected_by_database", errors: value });
      }
    }
    const existing = Array.isArray(errors.existing_puids) ? (errors.existing_puids as unknown[]).map(String) : [];
    const already: Claimed[] = [];
    for (const [index, item] of outgoing.entries()) {
      if (!existing.includes(item.row.puid) || named.has(index)) continue;
      named.add(index);
      if (!(await holdClaim(ctx, [item.row.puid])).has(item.row.puid)) continue;
      const there = await existsThere(ctx, item.row.puid);
      if (there === true) already.push(item.row);
      // Said to exist but not found (yet): left pending and in doubt, looked up again next time.
      else await env.DB.prepare(`UPDATE tdb_submissions SET in_doubt = 1, claim_id = NULL, claimed_until = NULL WHERE claim_id = ?1 AND puid = ?2`).bind(ctx.claimId, item.row.puid).run();
    }
    if (named.size === 0) return fail(ctx, settings, 422, null, "unexpected_422", [], false);
    await markRejected(ctx, rejected, "database", 422);
    await markSubmitted(
      ctx,
      already.map((row) => ({ puid: row.puid, uuid: null, permalink: null })),
      "existing_puid",
      302,
    );
    ctx.summary.alreadyThere += already.length;
    outgoing = outgoing.filter((_, index) => !named.has(index));
  }
  if (outgoing.length > 0)
    await release(
      ctx,
      outgoing.map((item) => item.row.puid),
    );
  return true;
}

async function clearDoubt(ctx: Context, puids: string[]) {
  await ctx.env.DB.prepare(`UPDATE tdb_submissions SET in_doubt = 0 WHERE claim_id = ?1 AND puid IN (SELECT value FROM json_each(?2))`).bind(ctx.claimId, JSON.stringify(puids)).run();
}

async function release(ctx: Context, puids: string[]) {
  await ctx.env.DB.prepare(`UPDATE tdb_submissions SET claim_id = NULL, claimed_until = NULL WHERE claim_id = ?1 AND puid IN (SELECT value FROM json_each(?2))`).bind(ctx.claimId, JSON.stringify(puids)).run();
}

async function markSubmitted(ctx: Context, items: Array<{ puid: string; uuid: string | null; permalink: string | null }>, by: "created" | "existing_puid", status: number) {
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
  ]);
}

async function markRejected(ctx: Context, items: Array<{ row: Claimed; code: string; errors: unknown }>, by: "database" | "platform", status: number | null) {
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

async function recordCall(ctx: Context, status: number | null, error: string | null, ok: boolean, pausedUntil: string | null = null) {
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
async function fail(ctx: Context, settings: TdbSettingsRow, status: number | null, retryAfter: string | null, error: string, puids: string[], maybeStored = false): Promise<false> {
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
