// The DSA Transparency Database (Art. 24(5)): per installation, where statements of reasons go
// (the Commission's production or sandbox host, or another base URL), its bearer token (sealed,
// never returned or logged) and on/off; per restricting decision, its submission — `pending`,
// `submitted` (with the database's uuid and permalink) or `rejected` (with the errors) — read,
// listed and re-submitted here. The sending itself is transparency-db-submit.ts.
//
// Hosts: production https://transparency.dsa.ec.europa.eu (the API documentation in
// digital-services-act/transparency-database, resources/markdown/api-documentation*.md, and its
// vapor-prod.yml `domain`); sandbox https://sandbox.sor.dsa.ec.europa.eu (vapor-sandbox.yml
// `domain` in the same repository, the last version before its deployment files were removed in
// June 2026). Paths: routes/api_v1.php (`statements`, `statement/existing-puid/{puid}`).
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { sealPersonalData } from "../cases";
import { AppError, conflict, notFound } from "../errors";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { knownPersonalValues, personalDataFindings } from "./transparency-db-privacy";

export const TDB_PRESETS = {
  production: "https://transparency.dsa.ec.europa.eu",
  sandbox: "https://sandbox.sor.dsa.ec.europa.eu",
} as const;
export type TdbPreset = keyof typeof TDB_PRESETS;
export const TDB_PRESET_NAMES = Object.keys(TDB_PRESETS) as TdbPreset[];
export const TDB_STATES = ["pending", "submitted", "rejected"] as const;

/** The statement's fields a compliance officer may replace with redacted text on resubmit. */
export interface StatementOverrides {
  decisionFacts?: string;
  explanation?: string;
}

export interface TdbSettingsRow {
  installationId: string;
  baseUrl: string;
  tokenSealed: string | null;
  enabled: number;
  pausedUntil: string | null;
  failures: number;
  lastStatus: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export const SETTINGS_COLUMNS = `installation_id AS installationId, base_url AS baseUrl, token_sealed AS tokenSealed, enabled, paused_until AS pausedUntil, failures,
  last_status AS lastStatus, last_error AS lastError, last_attempt_at AS lastAttemptAt, created_at AS createdAt, updated_at AS updatedAt`;

export function tdbSettingsRow(db: D1Database, installationId: string): Promise<TdbSettingsRow | null> {
  return db.prepare(`SELECT ${SETTINGS_COLUMNS} FROM tdb_settings WHERE installation_id = ?1`).bind(installationId).first<TdbSettingsRow>();
}

/** Sealing context of an installation's token. */
export const tokenContext = (installationId: string) => `tdb_settings:${installationId}`;

/**
 * The decision hook (decisions.ts): queues a restricting decision for submission, in the
 * decision's own batch. It inserts only if the decision row exists by then (a replayed step's
 * decision, skipped by ON CONFLICT, queues nothing).
 */
export function queueSubmissionStatement(db: D1Database, decisionId: string, at: string): D1PreparedStatement {
  return db
    .prepare(`INSERT INTO tdb_submissions (decision_id, installation_id, puid, state, queued_at, updated_at)
      SELECT id, installation_id, id, 'pending', ?2, ?2 FROM decisions WHERE id = ?1
      ON CONFLICT(decision_id) DO NOTHING`)
    .bind(decisionId, at);
}

function checkBaseUrl(env: Env, baseUrl: string): string {
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new AppError("transparency_db.base_url_invalid", "baseUrl must be an absolute https URL (e.g. https://transparency.dsa.ec.europa.eu).", { status: 422 });
  }
  if ((parsed.protocol !== "https:" && parsed.protocol !== "http:") || parsed.username || parsed.password || parsed.search || parsed.hash) {
    throw new AppError("transparency_db.base_url_invalid", "baseUrl must be an https URL without credentials, query or fragment; the token authenticates the calls.", { status: 422 });
  }
  const refusal = egressRefusal(parsed, { allowLocal: allowLocalEgress(env) });
  if (refusal) throw new AppError("transparency_db.base_url_not_allowed", `baseUrl: ${refusal.message}`, { status: 422, details: { field: "baseUrl", reason: refusal.reason, host: refusal.host } });
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/u, "")}`;
}

async function stateCounts(db: D1Database, installationId: string): Promise<Record<(typeof TDB_STATES)[number], number>> {
  const { results } = await db.prepare(`SELECT state, COUNT(*) AS n FROM tdb_submissions WHERE installation_id = ?1 GROUP BY state`).bind(installationId).all<{ state: string; n: number }>();
  const counts = { pending: 0, submitted: 0, rejected: 0 };
  for (const row of results) counts[row.state as keyof typeof counts] = row.n;
  return counts;
}

/** The settings as the API shows them: whether a token is set, never the token. */
export async function getTdbSettings(env: Env, actor: Actor) {
  const row = await tdbSettingsRow(env.DB, actor.installationId);
  const preset = row ? (TDB_PRESET_NAMES.find((name) => TDB_PRESETS[name] === row.baseUrl) ?? null) : null;
  return {
    enabled: row?.enabled === 1,
    baseUrl: row?.baseUrl ?? null,
    preset,
    tokenSet: Boolean(row?.tokenSealed),
    presets: TDB_PRESETS,
    pausedUntil: row?.pausedUntil ?? null,
    lastStatus: row?.lastStatus ?? null,
    lastError: row?.lastError ?? null,
    lastAttemptAt: row?.lastAttemptAt ?? null,
    updatedAt: row?.updatedAt ?? null,
    submissions: await stateCounts(env.DB, actor.installationId),
  };
}

/** Sets the base URL (a preset or a URL), the token (sealed; omitted: kept) and on/off. Audited without the token. */
export async function putTdbSettings(env: Env, actor: Actor, input: { preset?: TdbPreset; baseUrl?: string; token?: string; enabled: boolean }) {
  if (input.preset && input.baseUrl) throw new AppError("transparency_db.base_url_ambiguous", "Give either preset or baseUrl, not both.", { status: 422 });
  const existing = await tdbSettingsRow(env.DB, actor.installationId);
  const baseUrl = input.preset ? TDB_PRESETS[input.preset] : input.baseUrl ? checkBaseUrl(env, input.baseUrl) : existing?.baseUrl;
  if (!baseUrl) throw new AppError("transparency_db.base_url_missing", "Give preset (production or sandbox) or baseUrl.", { status: 422 });
  // The sealed token only ever goes to the host it was given for: a new host needs its token again.
  if (!input.token && existing?.tokenSealed && baseUrl !== existing.baseUrl) {
    throw new AppError("transparency_db.token_required", "Changing the base URL needs the token again (token): a stored token is only sent to the host it was given for.", { status: 422 });
  }
  const tokenSealed = input.token ? (await sealPersonalData(env, actor.installationId, tokenContext(actor.installationId), { token: input.token }, { scope: "installation" })).sealed : (existing?.tokenSealed ?? null);
  if (input.enabled && !tokenSealed) throw new AppError("transparency_db.token_missing", "Submission cannot be enabled without the token the Transparency Database issued (token).", { status: 422 });
  const at = new Date().toISOString();
  // A new token or URL is a fresh start: the backoff and the last error are cleared.
  const fresh = Boolean(input.token) || baseUrl !== existing?.baseUrl;
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO tdb_settings (installation_id, base_url, token_sealed, enabled, failures, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)
      ON CONFLICT(installation_id) DO UPDATE SET base_url = excluded.base_url, token_sealed = excluded.token_sealed, enabled = excluded.enabled, updated_at = excluded.updated_at,
        paused_until = CASE WHEN ?6 THEN NULL ELSE paused_until END, failures = CASE WHEN ?6 THEN 0 ELSE failures END,
        last_error = CASE WHEN ?6 THEN NULL ELSE last_error END
    `).bind(actor.installationId, baseUrl, tokenSealed, input.enabled ? 1 : 0, at, fresh ? 1 : 0),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `tdb_settings:${actor.installationId}:updated:${at}:${crypto.randomUUID()}`,
      action: "transparency_db.settings_updated",
      actor: actor.audit,
      target: { type: "tdb_settings", id: actor.installationId },
      details: { baseUrl, enabled: input.enabled, tokenChanged: Boolean(input.token) },
      at,
    }),
  ]);
  return getTdbSettings(env, actor);
}

interface SubmissionRow {
  decisionId: string;
  puid: string;
  state: string;
  attempts: number;
  inDoubt: number;
  uuid: string | null;
  permalink: string | null;
  confirmedBy: string | null;
  rejectedBy: string | null;
  errorCode: string | null;
  errorsJson: string | null;
  overridesJson: string | null;
  lastStatus: number | null;
  queuedAt: string;
  submittedAt: string | null;
  rejectedAt: string | null;
  updatedAt: string;
}

const SUBMISSION_COLUMNS = `decision_id AS decisionId, puid, state, attempts, in_doubt AS inDoubt, uuid, permalink, confirmed_by AS confirmedBy, rejected_by AS rejectedBy,
  error_code AS errorCode, errors_json AS errorsJson, overrides_json AS overridesJson, last_status AS lastStatus, queued_at AS queuedAt, submitted_at AS submittedAt,
  rejected_at AS rejectedAt, updated_at AS updatedAt`;

function submissionView(row: SubmissionRow) {
  return {
    decisionId: row.decisionId,
    puid: row.puid,
    state: row.state,
    attempts: row.attempts,
    /** Sent without a definite answer: checked with existing-puid before it is sent again. */
    inDoubt: row.inDoubt === 1,
    uuid: row.uuid,
    permalink: row.permalink,
    /** `created`: the database answered 201 with it; `existing_puid`: it was found there by its puid. */
    confirmedBy: row.confirmedBy,
    /** `database`: a 422 named it; `platform`: refused before sending (e.g. personal data). */
    rejectedBy: row.rejectedBy,
    errorCode: row.errorCode,
    errors: row.errorsJson ? (JSON.parse(row.errorsJson) as unknown) : null,
    overridden: row.overridesJson ? Object.keys(JSON.parse(row.overridesJson) as object) : [],
    lastStatus: row.lastStatus,
    queuedAt: row.queuedAt,
    submittedAt: row.submittedAt,
    rejectedAt: row.rejectedAt,
    updatedAt: row.updatedAt,
  };
}

function submissionRow(db: D1Database, installationId: string, decisionId: string): Promise<SubmissionRow | null> {
  return db.prepare(`SELECT ${SUBMISSION_COLUMNS} FROM tdb_submissions WHERE installation_id = ?1 AND decision_id = ?2`).bind(installationId, decisionId).first<SubmissionRow>();
}

/** A decision's submission (404 for a decision not to act, or another installation's). */
export async function getSubmission(env: Env, actor: Actor, decisionId: string) {
  const row = await submissionRow(env.DB, actor.installationId, decisionId);
  if (!row) throw notFound("tdb_submission");
  return submissionView(row);
}

/** Submissions, newest first; ?state= to list one state (the rejected ones to fix, say). */
export async function listSubmissions(env: Env, actor: Actor, options: { limit: number; state?: string; before?: string | null }) {
  const { results } = await env.DB.prepare(`
    SELECT ${SUBMISSION_COLUMNS} FROM tdb_submissions
    WHERE installation_id = ?1 AND (?2 IS NULL OR state = ?2)
      AND (?3 IS NULL OR (queued_at, decision_id) < (SELECT queued_at, decision_id FROM tdb_submissions WHERE installation_id = ?1 AND decision_id = ?3))
    ORDER BY queued_at DESC, decision_id DESC LIMIT ?4`)
    .bind(actor.installationId, options.state ?? null, options.before ?? null, options.limit + 1)
    .all<SubmissionRow>();
  const page = results.slice(0, options.limit);
  return { items: page.map(submissionView), nextCursor: results.length > options.limit ? page.at(-1)!.decisionId : null };
}

/**
 * A rejected submission back to `pending` after a fix: the statement is rendered again when it is
 * sent (a corrected mapping applies), with the redacted text given here in place of the facts or
 * the explanation. Redacted text is checked for personal data now (422), and again when sent.
 */
export async function resubmit(env: Env, actor: Actor, decisionId: string, overrides: StatementOverrides) {
  const row = await submissionRow(env.DB, actor.installationId, decisionId);
  if (!row) throw notFound("tdb_submission");
  if (row.state !== "rejected") {
    throw conflict("transparency_db.not_rejected", `The statement of decision ${decisionId} is ${row.state}; only a rejected statement is re-submitted (a submitted one is in the database already).`);
  }
  const given = Object.fromEntries(Object.entries(overrides).filter(([, value]) => typeof value === "string")) as StatementOverrides;
  if (Object.keys(given).length > 0) {
    const decision = await env.DB.prepare(`SELECT report_id AS reportId FROM decisions WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, decisionId).first<{ reportId: string | null }>();
    const findings = personalDataFindings(given as Record<string, unknown>, await knownPersonalValues(env, actor.installationId, decision?.reportId ?? null));
    if (findings.length > 0) {
      throw new AppError("transparency_db.personal_data", "The redacted text still contains personal data; remove it (DSA Art. 24(5)).", {
        status: 422,
        details: findings.map((f) => ({ path: `$.${f.field}`, code: f.kind, message: `${f.kind} in ${f.field}` })),
      });
    }
  }
  const merged = { ...(row.overridesJson ? (JSON.parse(row.overridesJson) as StatementOverrides) : {}), ...given };
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE tdb_submissions SET state = 'pending', rejected_by = NULL, error_code = NULL, errors_json = NULL, rejected_at = NULL, overrides_json = ?3, updated_at = ?4
      WHERE installation_id = ?1 AND decision_id = ?2 AND state = 'rejected'`).bind(actor.installationId, decisionId, Object.keys(merged).length ? JSON.stringify(merged) : null, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `tdb_submission:${decisionId}:resubmitted:${at}:${crypto.randomUUID()}`,
      action: "transparency_db.statement_resubmitted",
      actor: actor.audit,
      target: { type: "decision", id: decisionId },
      details: { previousErrorCode: row.errorCode, overridden: Object.keys(given) },
      at,
    }),
  ]);
  return getSubmission(env, actor, decisionId);
}
