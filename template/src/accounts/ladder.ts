// The strike ladder of an account: settling it after its strikes changed (a rung reached starts a
// sanction; an appeal that reversed a strike it counted walks it back), DSA Art. 23(1) (a
// suspension for manifestly illegal content needs a prior warning on record, standing for the
// policy's warning period), and starting a sanction's action as a run of its ladder workflow, in
// the policy's authority mode. Settling is idempotent: a rung has one live sanction (a unique
// index), so concurrent settles of one account cannot start a rung twice.
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError, errorCode } from "../errors";
import { newId } from "../lib/crypto";
import { createRun } from "../workflows";
import { carrierVersionId, kindOf, readStrikePolicy, type SanctionKind, type StrikePolicy } from "./strike-policy";

export const ART23_WARNING_REQUIRED = "account.art23_warning_required";

interface StrikeRow {
  id: string;
  decisionId: string;
  points: number;
  manifestlyIllegal: number;
  createdAt: string;
  expiresAt: string;
  reversedAt: string | null;
}

export interface SanctionRow {
  id: string;
  source: "ladder" | "manual";
  threshold: number | null;
  kind: SanctionKind;
  actionTypeKey: string;
  art23: number;
  decisionId: string | null;
  reportId: string | null;
  state: "pending" | "started" | "refused" | "reversed";
  refusalCode: string | null;
  runId: string | null;
  createdAt: string;
  updatedAt: string;
}

export const SANCTION_COLUMNS = `id, source, threshold, kind, action_type_key AS actionTypeKey, art23, decision_id AS decisionId, report_id AS reportId, state,
  refusal_code AS refusalCode, run_id AS runId, created_at AS createdAt, updated_at AS updatedAt`;

const SYSTEM = { type: "system", id: "strike-ladder" } as const;

/** Points that count at `at`: strikes not reversed and not expired by then (created by then). */
export function pointsAt(strikes: StrikeRow[], at: string): number {
  return strikes.filter((s) => s.reversedAt === null && s.createdAt <= at && s.expiresAt > at).reduce((sum, s) => sum + s.points, 0);
}

function accountRows(db: D1Database, installationId: string, accountKey: string) {
  return db.batch<Record<string, unknown>>([
    db
      .prepare(`SELECT id, decision_id AS decisionId, points, manifestly_illegal AS manifestlyIllegal, created_at AS createdAt, expires_at AS expiresAt, reversed_at AS reversedAt
        FROM strikes WHERE installation_id = ?1 AND account_key = ?2 ORDER BY created_at DESC LIMIT 1000`)
      .bind(installationId, accountKey),
    db.prepare(`SELECT ${SANCTION_COLUMNS} FROM account_sanctions WHERE installation_id = ?1 AND account_key = ?2 ORDER BY created_at DESC LIMIT 1000`).bind(installationId, accountKey),
  ]);
}

/**
 * The warning on record that lets an Art. 23(1) suspension go ahead at `at`: started, its run
 * succeeded (a warning waiting for approval, rejected, expired or failed was never given), and
 * standing for the warning period.
 */
async function priorWarning(db: D1Database, installationId: string, sanctions: SanctionRow[], policy: Pick<StrikePolicy, "warningPeriodHours"> | null, at: string): Promise<SanctionRow | undefined> {
  const by = new Date(Date.parse(at) - (policy?.warningPeriodHours ?? 0) * 3_600_000).toISOString();
  const candidates = sanctions.filter((s) => s.kind === "warning" && s.state === "started" && s.runId !== null && s.createdAt < at && s.createdAt <= by);
  if (candidates.length === 0) return undefined;
  const { results } = await db
    .prepare(`SELECT id FROM workflow_runs WHERE installation_id = ?1 AND state = 'succeeded' AND id IN (SELECT value FROM json_each(?2))`)
    .bind(installationId, JSON.stringify(candidates.map((s) => s.runId)))
    .all<{ id: string }>();
  const succeeded = new Set(results.map((r) => r.id));
  return candidates.find((s) => succeeded.has(s.runId!));
}

/** Whether the account has a counting strike (not reversed, not expired at `at`) for manifestly illegal content. */
function manifestlyIllegalAt(strikes: StrikeRow[], at: string): boolean {
  return strikes.some((s) => s.reversedAt === null && s.expiresAt > at && s.manifestlyIllegal === 1);
}

function sanctionAudit(db: D1Database, installationId: string, sanctionId: string, action: string, details: Record<string, unknown>, at: string, actor: Actor["audit"] = SYSTEM) {
  return auditStatement(db, { installationId, idempotencyKey: `account_sanction:${sanctionId}:${action}`, action, actor, target: { type: "account_sanction", id: sanctionId }, details, at });
}

/**
 * Settles an account's ladder against its strikes now: walks back the rungs whose strikes an
 * appeal reversed (the points they counted when reached, less the reversed ones, no longer reach
 * them), then starts a sanction for each rung the current points reach that has none live. A
 * suspension for manifestly illegal content without a prior warning is recorded `refused`
 * (account.art23_warning_required). Marks the account's strikes settled. Answers the sanctions
 * created (pending ones still need their run: startSanctions).
 */
export async function settleAccount(env: Env, installationId: string, accountKey: string, now = new Date()): Promise<{ created: string[]; reversed: string[]; refused: string[] }> {
  const at = now.toISOString();
  const policy = await readStrikePolicy(env.DB, installationId);
  const [strikeRead, sanctionRead] = await accountRows(env.DB, installationId, accountKey);
  const strikes = strikeRead!.results as unknown as StrikeRow[];
  const sanctions = sanctionRead!.results as unknown as SanctionRow[];
  const statements: D1PreparedStatement[] = [];
  const reversed: string[] = [];
  const live = sanctions.filter((s) => s.source === "ladder" && s.state !== "reversed");
  for (const sanction of live) {
    if (sanction.threshold === null || pointsAt(strikes, sanction.createdAt) >= sanction.threshold) continue;
    reversed.push(sanction.id);
    statements.push(
      env.DB.prepare(`UPDATE account_sanctions SET state = 'reversed', updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND state <> 'reversed'`).bind(installationId, sanction.id, at),
      sanctionAudit(env.DB, installationId, sanction.id, "account.sanction_reversed", { kind: sanction.kind, threshold: sanction.threshold, actionType: sanction.actionTypeKey, reason: "strike_reversed" }, at),
    );
  }
  const created: string[] = [];
  const refused: string[] = [];
  const points = pointsAt(strikes, at);
  const counting = strikes.filter((s) => s.reversedAt === null && s.expiresAt > at);
  const latest = counting[0];
  const manifest = manifestlyIllegalAt(strikes, at);
  const warned = manifest && (policy?.ladder ?? []).some((rung) => rung.kind === "suspension") ? await priorWarning(env.DB, installationId, sanctions, policy, at) : undefined;
  for (const rung of policy?.ladder ?? []) {
    if (rung.points > points || !latest) continue;
    if (live.some((s) => s.threshold === rung.points && !reversed.includes(s.id))) continue;
    const art23 = rung.kind === "suspension" && manifest;
    const refusal = art23 && !warned ? ART23_WARNING_REQUIRED : null;
    const id = newId("snc");
    (refusal ? refused : created).push(id);
    statements.push(
      env.DB.prepare(`INSERT OR IGNORE INTO account_sanctions (id, installation_id, account_key, source, threshold, kind, action_type_key, art23, decision_id, report_id, state, refusal_code, created_at, updated_at)
        SELECT ?1, ?2, ?3, 'ladder', ?4, ?5, ?6, ?7, d.id, d.report_id, ?8, ?9, ?10, ?10 FROM decisions d WHERE d.installation_id = ?2 AND d.id = ?11`).bind(
        id,
        installationId,
        accountKey,
        rung.points,
        rung.kind,
        rung.actionType,
        art23 ? 1 : 0,
        refusal ? "refused" : "pending",
        refusal,
        at,
        latest.decisionId,
      ),
      sanctionAudit(env.DB, installationId, id, refusal ? "account.sanction_refused" : "account.sanction_reached", { kind: rung.kind, threshold: rung.points, points, actionType: rung.actionType, art23, refusalCode: refusal }, at),
    );
  }
  statements.push(env.DB.prepare(`UPDATE strikes SET settled_at = ?3 WHERE installation_id = ?1 AND account_key = ?2 AND settled_at IS NULL`).bind(installationId, accountKey, at));
  await env.DB.batch(statements);
  return { created, reversed, refused };
}

/**
 * Walks back the sanctions an overturned decision stands for: a sanction whose own run recorded
 * that decision (the account action's statement of reasons, a manual sanction's or a rung's) is
 * reversed with it, audited, and the notice sweep tells the product (`account.sanction_reversed`,
 * reason `decision_overturned`), as for a rung walked back. A reversed warning no longer counts as
 * the prior warning an Art. 23(1) suspension needs (priorWarning takes started ones only).
 * Call it once the appeal's batch recorded the reversal. Answers the sanctions reversed.
 */
export async function reverseDecisionSanctions(env: Env, installationId: string, decisionId: string | null, now = new Date()): Promise<string[]> {
  if (!decisionId) return [];
  const { results } = await env.DB.prepare(`SELECT s.id, s.kind, s.threshold, s.action_type_key AS actionType FROM account_sanctions s
      WHERE s.run_id = (SELECT d.run_id FROM decisions d WHERE d.installation_id = ?1 AND d.id = ?2
          AND EXISTS (SELECT 1 FROM decision_reversals v WHERE v.installation_id = ?1 AND v.decision_id = d.id))
        AND s.installation_id = ?1 AND s.state <> 'reversed'`)
    .bind(installationId, decisionId)
    .all<{ id: string; kind: string; threshold: number | null; actionType: string }>();
  if (results.length === 0) return [];
  const at = now.toISOString();
  await env.DB.batch(
    results.flatMap((sanction) => [
      env.DB.prepare(`UPDATE account_sanctions SET state = 'reversed', updated_at = ?3 WHERE installation_id = ?1 AND id = ?2 AND state <> 'reversed'`).bind(installationId, sanction.id, at),
      sanctionAudit(env.DB, installationId, sanction.id, "account.sanction_reversed", { kind: sanction.kind, threshold: sanction.threshold, actionType: sanction.actionType, reason: "decision_overturned", decisionId }, at),
    ]),
  );
  return results.map((sanction) => sanction.id);
}

/** After an appeal overturned `decisionId`: the sanctions it stands for walked back, then its account's ladder settled against the reversed strike. */
export async function settleOverturnedDecision(env: Env, installationId: string, decisionId: string | null): Promise<void> {
  await reverseDecisionSanctions(env, installationId, decisionId);
  await settleDecisionAccount(env, undefined, installationId, decisionId);
}

/** Settles the account a decision's strike belongs to (nothing when the decision gave no strike). */
export async function settleDecisionAccount(env: Env, ctx: ExecutionContext | undefined, installationId: string, decisionId: string | null): Promise<void> {
  if (!decisionId) return;
  const strike = await env.DB.prepare(`SELECT account_key AS accountKey FROM strikes WHERE installation_id = ?1 AND decision_id = ?2`).bind(installationId, decisionId).first<{ accountKey: string }>();
  if (!strike) return;
  const { created } = await settleAccount(env, installationId, strike.accountKey);
  if (ctx && created.length > 0) await startSanctions(env, ctx, installationId, created);
}

/**
 * Starts the run of each pending sanction: its ladder workflow's version for the action type, in
 * the policy's authority mode, on the report whose decision reached it (the delivery names its
 * subject; the account's id itself is never in a run's input). Idempotent per sanction (the run's
 * Idempotency-Key), so a retry or the sweep starts it once.
 */
export async function startSanctions(env: Env, ctx: ExecutionContext, installationId: string, sanctionIds: string[], audit: Actor["audit"] = SYSTEM, reasons: Map<string, string> = new Map()): Promise<number> {
  if (sanctionIds.length === 0) return 0;
  const policy = await readStrikePolicy(env.DB, installationId);
  const { results } = await env.DB.prepare(`SELECT ${SANCTION_COLUMNS} FROM account_sanctions WHERE installation_id = ?1 AND id IN (SELECT value FROM json_each(?2)) AND state = 'pending'`)
    .bind(installationId, JSON.stringify(sanctionIds))
    .all<SanctionRow>();
  const actor: Actor = { installationId, scopes: [], audit };
  let started = 0;
  for (const sanction of results) {
    const versionId = await versionFor(env, actor, policy, sanction);
    const { run } = await createRun(env, ctx, actor, {
      workflowVersionId: versionId,
      authorityMode: policy?.authorityMode ?? "assisted",
      input: {
        sanctionId: sanction.id,
        kind: sanction.kind,
        points: sanction.threshold,
        threshold: sanction.threshold,
        art23: sanction.art23 === 1,
        decisionId: sanction.decisionId,
        reason: reasons.get(sanction.id) ?? ladderReason(sanction),
      },
      ...(sanction.reportId ? { reportId: sanction.reportId } : {}),
      idempotencyKey: `account_sanction:${sanction.id}`,
    });
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(`UPDATE account_sanctions SET state = 'started', run_id = ?3, updated_at = ?4 WHERE installation_id = ?1 AND id = ?2 AND state = 'pending'`).bind(installationId, sanction.id, run.id, at),
      sanctionAudit(env.DB, installationId, sanction.id, "account.sanction_started", { kind: sanction.kind, actionType: sanction.actionTypeKey, runId: run.id, authorityMode: policy?.authorityMode ?? "assisted" }, at, audit),
    ]);
    started += 1;
  }
  return started;
}

/** The statement of a ladder sanction's decision (a suspension's or termination's statement of reasons). */
function ladderReason(sanction: SanctionRow): string {
  return `This account reached ${sanction.threshold} strike points, the threshold of a ${sanction.kind}, from decisions restricting its content${sanction.art23 === 1 ? " that was manifestly illegal, after a prior warning (DSA Art. 23(1))" : ""}.`;
}

/** The carrier version of a sanction: its rung's, or (an Art. 23(1) suspension, a person's sanction) its own, published on first use. */
async function versionFor(env: Env, actor: Actor, policy: StrikePolicy | null, sanction: SanctionRow): Promise<string> {
  const rung = policy?.ladder.find((r) => r.actionType === sanction.actionTypeKey && r.kind === sanction.kind);
  if (rung && sanction.art23 !== 1) return rung.workflowVersionId;
  return carrierVersionId(env, actor, sanction.actionTypeKey, { purpose: "ladder", kind: sanction.kind, art23: sanction.art23 === 1 });
}

/**
 * A sanction a person takes on an account outside the ladder (POST /accounts/:id/sanctions). Its
 * kind is the server's: the policy's rung for the action type, else what the action type's key
 * says (kindOf); the client's kind only names one the key leaves open (a plain restriction). A
 * suspension of an account with a counting strike for manifestly illegal content (or one the
 * client calls so) is an Art. 23(1) suspension, refused with a 409 without a prior warning given;
 * nothing is written then.
 */
export async function sanctionAccount(
  env: Env,
  ctx: ExecutionContext,
  actor: Actor,
  asked: { accountKey: string; actionType: string; kind?: SanctionKind | undefined; manifestlyIllegal?: boolean | undefined; reason: string },
  /**
   * The account's report the sanction is about (accounts.ts accountReport: a 404 when the account
   * was never reported). Looked up only once the action type is known to exist, so a caller who
   * cannot read accounts does not learn from the order of the refusals whether a person was reported.
   */
  reportOf: () => Promise<{ id: string }>,
): Promise<SanctionRow> {
  const type = await env.DB.prepare(`SELECT 1 AS x FROM action_types WHERE installation_id = ?1 AND key = ?2`).bind(actor.installationId, asked.actionType).first();
  if (!type) throw new AppError("action_type.not_found", `This installation has no action type ${JSON.stringify(asked.actionType).slice(0, 100)}; create it first (POST /action-types).`, { status: 404 });
  const requested = { ...asked, reportId: (await reportOf()).id };
  const policy = await readStrikePolicy(env.DB, actor.installationId);
  const named = policy?.ladder.find((rung) => rung.actionType === requested.actionType)?.kind ?? kindOf(requested.actionType);
  const input = { ...requested, kind: named === "restriction" && requested.kind ? requested.kind : named };
  const at = new Date().toISOString();
  const [strikeRead, sanctionRead] = await accountRows(env.DB, actor.installationId, input.accountKey);
  const art23 = input.kind === "suspension" && (requested.manifestlyIllegal === true || manifestlyIllegalAt(strikeRead!.results as unknown as StrikeRow[], at));
  if (art23) {
    if (!(await priorWarning(env.DB, actor.installationId, sanctionRead!.results as unknown as SanctionRow[], policy, at))) {
      throw new AppError(
        ART23_WARNING_REQUIRED,
        `A suspension for manifestly illegal content needs a prior warning on record that has stood for the policy's warning period (${policy?.warningPeriodHours ?? 0} h; DSA Art. 23(1)); warn the account first.`,
        { status: 409 },
      );
    }
  }
  const id = newId("snc");
  await env.DB.batch([
    env.DB.prepare(`INSERT INTO account_sanctions (id, installation_id, account_key, source, threshold, kind, action_type_key, art23, decision_id, report_id, state, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'manual', NULL, ?4, ?5, ?6, NULL, ?7, 'pending', ?8, ?8)`).bind(id, actor.installationId, input.accountKey, input.kind, input.actionType, art23 ? 1 : 0, input.reportId, at),
    sanctionAudit(env.DB, actor.installationId, id, "account.sanction_taken", { kind: input.kind, actionType: input.actionType, art23, reason: input.reason }, at, actor.audit),
  ]);
  await startSanctions(env, ctx, actor.installationId, [id], actor.audit, new Map([[id, input.reason]]));
  const row = await env.DB.prepare(`SELECT ${SANCTION_COLUMNS} FROM account_sanctions WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, id).first<SanctionRow>();
  return row!;
}

/**
 * The schedule's sweep: settles accounts whose strikes changed without a settle (decisions of
 * workflow runs, appeals decided through review tasks) and starts pending sanctions' runs (a run
 * needs the event's ctx). Bounded: 50 accounts and 25 sanctions a run; `more` when a slice was full.
 */
export async function sweepAccountLadders(env: Env, now: Date, ctx?: ExecutionContext): Promise<Record<string, number>> {
  const { results: accounts } = await env.DB.prepare(`SELECT DISTINCT installation_id AS installationId, account_key AS accountKey FROM strikes WHERE settled_at IS NULL ORDER BY created_at LIMIT 50`).all<{
    installationId: string;
    accountKey: string;
  }>();
  for (const account of accounts) await settleAccount(env, account.installationId, account.accountKey, now);
  let started = 0;
  let failed = 0;
  let pending: Array<{ id: string; installationId: string }> = [];
  if (ctx) {
    pending = (await env.DB.prepare(`SELECT id, installation_id AS installationId FROM account_sanctions WHERE state = 'pending' ORDER BY created_at LIMIT 25`).all<{ id: string; installationId: string }>()).results;
    for (const row of pending) {
      try {
        started += await startSanctions(env, ctx, row.installationId, [row.id]);
      } catch (error) {
        // Left pending: the next run tries again (a version retired meanwhile, a dispatch refused for the rate).
        failed += 1;
        console.warn(JSON.stringify({ sweep: "accounts.ladders", sanctionId: row.id, code: errorCode(error) }));
      }
    }
  }
  return { settled: accounts.length, started, failed, more: accounts.length === 50 || pending.length === 25 ? 1 : 0 };
}
