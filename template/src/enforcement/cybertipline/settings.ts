// An installation's registration with NCMEC's CyberTipline as an electronic service provider: the
// API's base URL (production or NCMEC's test environment), the username and password NCMEC issued
// and the reporting person's contact — both sealed under the installation's key, never returned
// or logged — and on/off. Setting it, and checking it against NCMEC (`/status`), are audited admin
// actions.
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { openPersonalData, sealPersonalData } from "../../cases";
import { AppError } from "../../errors";
import { assertEgressAllowed } from "../../lib/egress";
import { checkStatus } from "./client";
import type { ReportingPerson } from "./xml";

export const CYBERTIPLINE_PRESETS = {
  production: "https://report.cybertip.org/ispws",
  test: "https://exttest.cybertip.org/ispws",
} as const;
export type CyberTiplinePreset = keyof typeof CYBERTIPLINE_PRESETS;
export const CYBERTIPLINE_PRESET_NAMES = Object.keys(CYBERTIPLINE_PRESETS) as CyberTiplinePreset[];

export interface SettingsRow {
  baseUrl: string;
  credentialsSealed: string;
  reporterSealed: string;
  espService: string | null;
  enabled: number;
  updatedAt: string;
}

export interface Registration {
  baseUrl: string;
  username: string;
  password: string;
  reporter: ReportingPerson & { companyTemplate?: string };
  espService: string | null;
}

const credentialsContext = (installationId: string) => `cybertipline_settings:${installationId}:credentials`;
const reporterContext = (installationId: string) => `cybertipline_settings:${installationId}:reporter`;

export function settingsRow(db: D1Database, installationId: string) {
  return db
    .prepare(`SELECT base_url AS baseUrl, credentials_sealed AS credentialsSealed, reporter_sealed AS reporterSealed, esp_service AS espService, enabled, updated_at AS updatedAt FROM cybertipline_settings WHERE installation_id = ?1`)
    .bind(installationId)
    .first<SettingsRow>();
}

/** The registration, opened for a submission; 409 `cybertipline.not_configured` when absent or off. */
export async function openRegistration(env: Env, installationId: string): Promise<Registration> {
  const row = await settingsRow(env.DB, installationId);
  if (row?.enabled !== 1) {
    throw new AppError("cybertipline.not_configured", "CyberTipline reporting is not set up for this installation; PUT /cybertipline/settings with the ESP registration NCMEC issued.", { status: 409 });
  }
  const credentials = await openPersonalData<{ username: string; password: string }>(env, installationId, credentialsContext(installationId), row.credentialsSealed);
  const reporter = await openPersonalData<Registration["reporter"]>(env, installationId, reporterContext(installationId), row.reporterSealed);
  return { baseUrl: row.baseUrl, username: credentials.username, password: credentials.password, reporter, espService: row.espService };
}

/** The settings as the API shows them: whether credentials are set, never them; the reporting person is personal data and stays sealed. */
export async function getCyberTiplineSettings(env: Env, actor: Actor) {
  const row = await settingsRow(env.DB, actor.installationId);
  const preset = row ? (CYBERTIPLINE_PRESET_NAMES.find((name) => CYBERTIPLINE_PRESETS[name] === row.baseUrl) ?? null) : null;
  return { enabled: row?.enabled === 1, baseUrl: row?.baseUrl ?? null, preset, credentialsSet: Boolean(row), espService: row?.espService ?? null, presets: CYBERTIPLINE_PRESETS, updatedAt: row?.updatedAt ?? null };
}

function checkBaseUrl(env: Env, baseUrl: string): string {
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new AppError("cybertipline.base_url_invalid", "baseUrl must be an absolute https URL (e.g. https://exttest.cybertip.org/ispws).", { status: 422 });
  }
  if (parsed.protocol !== "https:" || parsed.username || parsed.password || parsed.search || parsed.hash) {
    throw new AppError("cybertipline.base_url_invalid", "baseUrl must be an https URL without credentials, query or fragment; the username and password authenticate the calls.", { status: 422 });
  }
  assertEgressAllowed(parsed, env, "cybertipline.base_url_not_allowed", { field: "baseUrl" });
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/u, "")}`;
}

/** Sets the registration (audited without the credentials or the reporting person's contact). */
export async function putCyberTiplineSettings(env: Env, actor: Actor, input: { preset?: CyberTiplinePreset; baseUrl?: string; username: string; password: string; reporter: Registration["reporter"]; espService?: string; enabled: boolean }) {
  if (input.preset && input.baseUrl) throw new AppError("cybertipline.base_url_ambiguous", "Give either preset or baseUrl, not both.", { status: 422 });
  const baseUrl = input.preset ? CYBERTIPLINE_PRESETS[input.preset] : input.baseUrl ? checkBaseUrl(env, input.baseUrl) : null;
  if (!baseUrl) throw new AppError("cybertipline.base_url_missing", "Give preset (production or test) or baseUrl.", { status: 422 });
  const options = { scope: "installation" as const };
  const credentials = await sealPersonalData(env, actor.installationId, credentialsContext(actor.installationId), { username: input.username, password: input.password }, options);
  const reporter = await sealPersonalData(env, actor.installationId, reporterContext(actor.installationId), input.reporter, options);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO cybertipline_settings (installation_id, base_url, credentials_sealed, reporter_sealed, esp_service, enabled, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
      ON CONFLICT(installation_id) DO UPDATE SET base_url = excluded.base_url, credentials_sealed = excluded.credentials_sealed, reporter_sealed = excluded.reporter_sealed,
        esp_service = excluded.esp_service, enabled = excluded.enabled, updated_at = excluded.updated_at
    `).bind(actor.installationId, baseUrl, credentials.sealed, reporter.sealed, input.espService ?? null, input.enabled ? 1 : 0, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `cybertipline_settings:${actor.installationId}:updated:${at}:${crypto.randomUUID()}`,
      action: "cybertipline.settings_updated",
      actor: actor.audit,
      target: { type: "cybertipline_settings", id: actor.installationId },
      details: { baseUrl, enabled: input.enabled },
      at,
    }),
  ]);
  return getCyberTiplineSettings(env, actor);
}

/**
 * An admin checks the registration against NCMEC (`GET /status`): whether the service answers and
 * accepts the credentials, before a report depends on them. Audited (no credential in it).
 * 409 `cybertipline.not_configured`; 502 `cybertipline.credentials_refused`; 503 `cybertipline.unavailable`.
 */
export async function checkCyberTiplineSettings(env: Env, actor: Actor) {
  const registration = await openRegistration(env, actor.installationId);
  const result = await checkStatus(env, registration);
  const at = new Date().toISOString();
  await env.DB.batch([
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `cybertipline:status:${at}:${crypto.randomUUID()}`,
      action: "cybertipline.registration_checked",
      actor: actor.audit,
      target: { type: "installation", id: actor.installationId },
      details: { baseUrl: registration.baseUrl, ok: result.ok, ...(result.ok ? {} : { code: result.error.code }) },
      at,
    }),
  ]);
  if (!result.ok) throw result.error;
  return { ok: true, baseUrl: registration.baseUrl, responseCode: result.answer.responseCode, checkedAt: at };
}
