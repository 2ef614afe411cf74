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
// The claim and every write to the claimed rows are transparency-db-claims.ts; this file renders,
// checks and sends.
import type { Actor } from "../auth";
import { openPersonalData } from "../cases";
import { AppError, errorCode, notFound } from "../errors";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { decisionRowAnywhere, decisionRowsByIds, type DecisionRow } from "./decisions";
import { statementDraftOf, statementProblems } from "./statement-of-reasons";
import { tdbSettingsRow, tokenContext, type StatementOverrides, type TdbSettingsRow } from "./transparency-db";
import { claim, clearDoubt, emptySummary, fail, holdClaim, leaveInDoubt, markRejected, markSubmitted, MAX_ROUNDS, recordCall, release, timeoutMs, type Claimed, type Context, type SubmitSummary } from "./transparency-db-claims";
import { knownPersonalValuesOf, personalDataFindings, type KnownPersonalValues } from "./transparency-db-privacy";

/** Batches per scheduled run, over all installations (the next run goes on). */
// Five batches keep a run within a Worker invocation's D1 query and subrequest limits (about ten
// queries and one POST per batch, plus one lookup per statement left in doubt).
const SWEEP_BATCHES = 5;
const SWEEP_INSTALLATIONS = 20;

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
  // The batch budget ran out, or more installations were due than one run takes: another slice now has work.
  const more = budget <= 0 || results.length === SWEEP_INSTALLATIONS ? 1 : 0;
  return { ...total, more };
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
  if (settings?.enabled !== 1 || !settings.tokenSealed) return summary;
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
 * The statement as it will be sent, or why it may not be: rendered, redactions applied, then
 * checked by the database's rules (texts trimmed, empty ones absent, the schema) and for personal
 * data. The redactions come before the check, so a statement refused for its length is fixed by
 * resubmitting it with a shorter explanation.
 */
async function prepare(env: Env, installationId: string, row: Claimed, decision: DecisionRow | undefined, known: KnownPersonalValues): Promise<{ statement: Record<string, unknown> } | { code: string; errors: unknown }> {
  let statement: Record<string, unknown>;
  try {
    const found = decision ?? (await decisionRowAnywhere(env, installationId, row.decisionId));
    if (!found) throw notFound("decision");
    statement = statementDraftOf(found);
  } catch (error) {
    const details = error instanceof AppError ? error.details : undefined;
    return { code: "transparency_db.statement_invalid", errors: details ?? [{ code: errorCode(error) }] };
  }
  const overrides = row.overridesJson ? (JSON.parse(row.overridesJson) as StatementOverrides) : {};
  const explanationField = "illegal_content_explanation" in statement ? "illegal_content_explanation" : "incompatible_content_explanation";
  // A decision's explanation defaults to its statement: redacted facts redact that copy too.
  if (overrides.decisionFacts && statement[explanationField] === statement.decision_facts) statement[explanationField] = overrides.decisionFacts;
  if (overrides.decisionFacts) statement.decision_facts = overrides.decisionFacts;
  if (overrides.explanation !== undefined) statement[explanationField] = overrides.explanation;
  const checked = statementProblems(statement);
  if (checked.errors.length > 0) return { code: "transparency_db.statement_invalid", errors: checked.errors };
  statement = checked.statement;
  const findings = personalDataFindings(statement, known);
  if (findings.length > 0) return { code: "transparency_db.personal_data", errors: findings };
  return { statement };
}

function request(ctx: Context, path: string, init: { method: string; body?: string }): Promise<Response> {
  // Checked again at call time (a base URL stored before the check, or ALLOW_LOCAL_EGRESS turned off since): nothing leaves, the call fails as unreachable.
  const refusal = egressRefusal(ctx.baseUrl, { allowLocal: allowLocalEgress(ctx.env) });
  if (refusal) return Promise.reject(new Error(`egress refused: ${refusal.reason}`));
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
    // Every lookup answered: the database is reachable again, so the failure count starts over
    // even when the lookups settled the whole batch and nothing else is sent.
    await recordCall(ctx, 302, null, true);
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
      else await leaveInDoubt(ctx, item.row.puid);
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
