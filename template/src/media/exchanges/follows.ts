// A bank following an exchange: the follow's row (hash_exchange_follows), set, read and ended by
// admins of the bank's installation. The credentials are sealed at rest under the installation's
// data key and never leave: not in an answer, an audit event, a log line or an error. A bank of
// another installation is a 404 (bankOf reads by id and installation); so is a follow of one.
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { openPersonalData, sealPersonalData } from "../../cases";
import { AppError } from "../../errors";
import { assertEgressAllowed } from "../../lib/egress";
import { newId } from "../../lib/crypto";
import { isUniqueViolation } from "../../lib/d1";
import { bankOf } from "../hash-banks";
import { EXCHANGES } from "./registry";
import type { HashExchangeKind } from "./types";

export const DEFAULT_INTERVAL_MINUTES = 15;

export interface FollowRow {
  id: string;
  installationId: string;
  bankId: string;
  state: "active" | "ended";
  kind: HashExchangeKind;
  baseUrl: string;
  credentialsSealed: string;
  filtersJson: string;
  intervalMinutes: number;
  contribute: number;
  cursorJson: string | null;
  leaseUntil: string | null;
  nextSyncAt: string;
  lastSyncAt: string | null;
  lastSuccessAt: string | null;
  failures: number;
  lastErrorCode: string | null;
  lastErrorStatus: number | null;
  lastErrorAt: string | null;
  pages: number;
  upserts: number;
  deletes: number;
  createdAt: string;
  updatedAt: string;
}

export const FOLLOW_COLUMNS = `id, installation_id AS installationId, bank_id AS bankId, state, kind, base_url AS baseUrl, credentials_sealed AS credentialsSealed,
  filters_json AS filtersJson, interval_minutes AS intervalMinutes, contribute, cursor_json AS cursorJson, lease_until AS leaseUntil, next_sync_at AS nextSyncAt,
  last_sync_at AS lastSyncAt, last_success_at AS lastSuccessAt, failures, last_error_code AS lastErrorCode, last_error_status AS lastErrorStatus,
  last_error_at AS lastErrorAt, pages, upserts, deletes, created_at AS createdAt, updated_at AS updatedAt`;

/** The sealing context of a follow's credentials (bound to the follow, so a sealed value cannot be moved to another). */
export const credentialsContext = (followId: string) => `hash_exchange:${followId}:credentials`;

/** The bank's active follow, or null. */
export function activeFollowOf(db: D1Database, installationId: string, bankId: string): Promise<FollowRow | null> {
  return db.prepare(`SELECT ${FOLLOW_COLUMNS} FROM hash_exchange_follows WHERE bank_id = ?1 AND installation_id = ?2 AND state = 'active'`).bind(bankId, installationId).first<FollowRow>();
}

/** The bank's active follow; 404 hash_bank.not_found for a bank not of the installation, 404 hash_exchange.not_found when it follows none. */
export async function followOrThrow(env: Env, actor: Actor, bankId: string): Promise<FollowRow> {
  await bankOf(env, actor.installationId, bankId);
  const row = await activeFollowOf(env.DB, actor.installationId, bankId);
  if (!row) throw new AppError("hash_exchange.not_found", "This hash bank follows no exchange; POST /hash-banks/:id/exchange to follow one.", { status: 404 });
  return row;
}

export function openCredentials(env: Env, row: FollowRow): Promise<Record<string, string>> {
  return openPersonalData<Record<string, string>>(env, row.installationId, credentialsContext(row.id), row.credentialsSealed);
}

/** A follow as its status: what it is, where it stands, what went wrong; never its credentials. */
export function followView(row: FollowRow, now = new Date()) {
  const exchange = EXCHANGES[row.kind];
  return {
    bankId: row.bankId,
    kind: row.kind,
    baseUrl: row.baseUrl,
    filters: JSON.parse(row.filtersJson) as Record<string, string>,
    intervalMinutes: row.intervalMinutes,
    contribute: row.contribute === 1,
    contributionSupported: exchange.contribute !== undefined,
    credentials: "set" as const,
    cursor: row.cursorJson === null ? null : (JSON.parse(row.cursorJson) as unknown),
    syncing: row.leaseUntil !== null && row.leaseUntil > now.toISOString(),
    nextSyncAt: row.nextSyncAt,
    lastSyncAt: row.lastSyncAt,
    lastSuccessAt: row.lastSuccessAt,
    failures: row.failures,
    lastError: row.lastErrorCode ? { code: row.lastErrorCode, status: row.lastErrorStatus, at: row.lastErrorAt } : null,
    counts: { pages: row.pages, upserts: row.upserts, deletes: row.deletes },
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

export interface FollowInput {
  kind: HashExchangeKind;
  baseUrl?: string;
  credentials: Record<string, string>;
  filters?: Record<string, string>;
  intervalMinutes?: number;
  contribute?: boolean;
}

/** What is wrong with the given fields (missing required, unknown), or null. */
function fieldProblem(what: "credentials" | "filters", given: Record<string, string>, allowed: readonly string[], required: readonly string[]) {
  const unknown = Object.keys(given).filter((k) => !allowed.includes(k));
  const missing = required.filter((k) => typeof given[k] !== "string" || given[k] === "");
  if (!unknown.length && !missing.length) return null;
  const optional = allowed.filter((k) => !required.includes(k));
  const message = `${what} must hold ${required.join(", ") || "nothing required"}${optional.length ? ` (optional: ${optional.join(", ")})` : ""}; ${missing.length ? `missing: ${missing.join(", ")}` : `unknown: ${unknown.join(", ")}`}.`;
  return { message, details: { missing, unknown } };
}

/**
 * Makes the bank follow an exchange, or replaces its follow (new credentials, interval, opt-in):
 * audited with the names of what was given, never a credential. The cursor is kept when kind, base
 * URL and filters are unchanged; otherwise the old follow ends and the new one reads the exchange
 * from its beginning. The mirror's index rows are the bank's (per exchange kind), so the new follow
 * knows the entries the old one brought, and the exchange's later tombstones still take them out.
 * Due at once.
 */
export async function followExchange(env: Env, actor: Actor, bankId: string, input: FollowInput): Promise<{ created: boolean; view: ReturnType<typeof followView> }> {
  const bank = await bankOf(env, actor.installationId, bankId);
  const exchange = EXCHANGES[input.kind];
  const credentials = input.credentials;
  const badCredentials = fieldProblem("credentials", credentials, [...exchange.credentials, ...(exchange.optionalCredentials ?? [])], exchange.credentials);
  if (badCredentials) throw new AppError("hash_exchange.credentials_invalid", badCredentials.message, { status: 422, details: badCredentials.details });
  const filters = input.filters ?? {};
  const badFilters = fieldProblem("filters", filters, exchange.filters, exchange.requiredFilters ?? []);
  if (badFilters) throw new AppError("hash_exchange.filters_invalid", badFilters.message, { status: 422, details: badFilters.details });
  const baseUrl = (input.baseUrl ?? exchange.defaultBaseUrl).replace(/\/+$/u, "");
  assertEgressAllowed(baseUrl, env, "hash_exchange.base_url_not_allowed", { field: "baseUrl" });
  const previous = await activeFollowOf(env.DB, bank.installationId, bank.id);
  const filtersJson = JSON.stringify(Object.fromEntries(Object.entries(filters).sort()));
  const keep = previous !== null && previous.kind === input.kind && previous.baseUrl === baseUrl && previous.filtersJson === filtersJson;
  const id = keep ? previous.id : newId("hxf");
  const at = new Date().toISOString();
  const sealed = await sealPersonalData(env, bank.installationId, credentialsContext(id), credentials, { scope: "installation" });
  const intervalMinutes = input.intervalMinutes ?? DEFAULT_INTERVAL_MINUTES;
  const contribute = input.contribute === true ? 1 : 0;
  const details = { kind: input.kind, baseUrl, filters, intervalMinutes, contribute: contribute === 1, credentialFields: Object.keys(credentials).sort(), restarted: !keep && previous !== null };
  const statements = keep
    ? [
        env.DB.prepare(`UPDATE hash_exchange_follows SET credentials_sealed = ?3, interval_minutes = ?4, contribute = ?5, next_sync_at = ?6, failures = 0, updated_at = ?6 WHERE id = ?1 AND installation_id = ?2 AND state = 'active'`).bind(
          id,
          bank.installationId,
          sealed.sealed,
          intervalMinutes,
          contribute,
          at,
        ),
      ]
    : [
        ...(previous ? [env.DB.prepare(`UPDATE hash_exchange_follows SET state = 'ended', updated_at = ?3 WHERE id = ?1 AND installation_id = ?2`).bind(previous.id, bank.installationId, at)] : []),
        env.DB.prepare(`INSERT INTO hash_exchange_follows (id, installation_id, bank_id, state, kind, base_url, credentials_sealed, filters_json, interval_minutes, contribute, next_sync_at, created_at, updated_at)
          VALUES (?1, ?2, ?3, 'active', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?10)`).bind(id, bank.installationId, bank.id, input.kind, baseUrl, sealed.sealed, filtersJson, intervalMinutes, contribute, at),
      ];
  try {
    await env.DB.batch([
      ...statements,
      auditStatement(env.DB, {
        installationId: bank.installationId,
        idempotencyKey: `hash_exchange:${id}:${previous ? "updated" : "followed"}:${at}`,
        action: previous ? "hash_exchange.updated" : "hash_exchange.followed",
        actor: actor.audit,
        target: { type: "hash_bank", id: bank.id },
        details,
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError("hash_exchange.follow_conflict", "Another request set this bank's follow at the same time; read it and try again.", { status: 409 });
    throw error;
  }
  const row = await activeFollowOf(env.DB, bank.installationId, bank.id);
  if (!row) throw new AppError("hash_exchange.follow_conflict", "Another request ended this bank's follow at the same time; read it and try again.", { status: 409 });
  return { created: previous === null, view: followView(row) };
}

/** Ends the bank's follow (audited). The entries it brought stay in the bank, and so do the mirror's index rows (a later follow of the same exchange withdraws them). */
export async function unfollowExchange(env: Env, actor: Actor, bankId: string) {
  const row = await followOrThrow(env, actor, bankId);
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`UPDATE hash_exchange_follows SET state = 'ended', updated_at = ?3 WHERE id = ?1 AND installation_id = ?2 AND state = 'active'`).bind(row.id, row.installationId, at),
    auditStatement(env.DB, {
      installationId: row.installationId,
      idempotencyKey: `hash_exchange:${row.id}:unfollowed`,
      action: "hash_exchange.unfollowed",
      actor: actor.audit,
      target: { type: "hash_bank", id: row.bankId },
      details: { kind: row.kind, baseUrl: row.baseUrl },
      at,
    }),
  ]);
  return { bankId: row.bankId, kind: row.kind, unfollowed: true };
}
