// Trusted flaggers (DSA Art. 22): reporters an installation registered, each with its area
// (categories) and active period, matched by the keyed hash of the reporter id. Their notices in
// their area become `trusted_flagger` (statements say SOURCE_TRUSTED_FLAGGER, tasks take the
// priority lane), and the precision of their notices is tracked.
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { wilson } from "../../automation";
import { AppError, conflict, notFound } from "../../errors";
import { newId } from "../../lib/crypto";
import { isUniqueViolation } from "../../lib/d1";
import { notifierHashes } from "./notifier-keys";
import { normalizeCategory, type PolicyCategory } from "../taxonomy";

interface FlaggerRow {
  id: string;
  name: string;
  categoriesJson: string;
  activeFrom: string;
  activeUntil: string | null;
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = `id, name, categories_json AS categoriesJson, active_from AS activeFrom, active_until AS activeUntil, created_at AS createdAt, updated_at AS updatedAt`;

function categoriesOf(input: readonly string[]): PolicyCategory[] {
  const categories = input.map((c) => normalizeCategory(c));
  const unknown = input.filter((_c, i) => !categories[i]);
  if (unknown.length > 0) throw new AppError("trusted_flagger.category_unknown", "A category of the flagger's area is unknown; use DSA statement categories (e.g. scams_and_fraud).", { status: 422, details: { count: unknown.length } });
  return [...new Set(categories as PolicyCategory[])].sort();
}

function period(from: string | undefined, until: string | null | undefined, at: string): { from: string; until: string | null } {
  const start = from ? new Date(from) : new Date(at);
  const end = until ? new Date(until) : null;
  if (Number.isNaN(start.getTime()) || (end && Number.isNaN(end.getTime()))) throw new AppError("trusted_flagger.period_invalid", "activeFrom and activeUntil must be ISO 8601 times.", { status: 422 });
  if (end && end <= start) throw new AppError("trusted_flagger.period_invalid", "activeUntil must be after activeFrom.", { status: 422 });
  return { from: start.toISOString(), until: end?.toISOString() ?? null };
}

async function flaggerRow(env: Env, installationId: string, id: string): Promise<FlaggerRow> {
  const row = await env.DB.prepare(`SELECT ${COLUMNS} FROM trusted_flaggers WHERE installation_id = ?1 AND id = ?2`).bind(installationId, id).first<FlaggerRow>();
  if (!row) throw notFound("trusted_flagger");
  return row;
}

/** Registers a reporter as a trusted flagger. The reporter id is kept only as its keyed hash and never answered. */
export async function registerTrustedFlagger(env: Env, actor: Actor, input: { name: string; reporter: { id: string }; categories: string[]; activeFrom?: string; activeUntil?: string | null }) {
  const at = new Date().toISOString();
  const categories = categoriesOf(input.categories);
  const active = period(input.activeFrom, input.activeUntil, at);
  const id = newId("tfl");
  const hashes = notifierHashes(env, actor.installationId, input.reporter.id);
  const hash = hashes.current;
  // The unique key sees the form written now; a flagger registered with the whole 64-digit hash
  // (before hashes were cut to 32) is found by every form.
  const existing = await env.DB.prepare(`SELECT 1 FROM trusted_flaggers WHERE installation_id = ?1 AND notifier_hash IN (SELECT value FROM json_each(?2))`).bind(actor.installationId, JSON.stringify(hashes.all)).first();
  if (existing) throw conflict("trusted_flagger.exists", "This reporter, or a flagger of this name, is already registered; change the existing flagger instead.");
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO trusted_flaggers (id, installation_id, name, notifier_hash, categories_json, active_from, active_until, created_at, updated_at)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)`).bind(id, actor.installationId, input.name, hash, JSON.stringify(categories), active.from, active.until, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `trusted_flagger:${id}:registered`,
        action: "trusted_flagger.registered",
        actor: actor.audit,
        target: { type: "trusted_flagger", id },
        details: { name: input.name, categories, activeFrom: active.from, activeUntil: active.until },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("trusted_flagger.exists", "This reporter, or a flagger of this name, is already registered; change the existing flagger instead.");
    throw error;
  }
  return getTrustedFlagger(env, actor, id);
}

/** Changes a flagger's name, area or period (ending it early: `activeUntil` now). */
export async function updateTrustedFlagger(env: Env, actor: Actor, id: string, input: { name?: string; categories?: string[]; activeFrom?: string; activeUntil?: string | null }) {
  const row = await flaggerRow(env, actor.installationId, id);
  const at = new Date().toISOString();
  const categories = input.categories ? categoriesOf(input.categories) : (JSON.parse(row.categoriesJson) as string[]);
  const active = period(input.activeFrom ?? row.activeFrom, input.activeUntil === undefined ? row.activeUntil : input.activeUntil, at);
  const name = input.name ?? row.name;
  try {
    await env.DB.batch([
      env.DB.prepare(`UPDATE trusted_flaggers SET name = ?3, categories_json = ?4, active_from = ?5, active_until = ?6, updated_at = ?7 WHERE installation_id = ?1 AND id = ?2`).bind(
        actor.installationId,
        id,
        name,
        JSON.stringify(categories),
        active.from,
        active.until,
        at,
      ),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `trusted_flagger:${id}:updated:${at}`,
        action: "trusted_flagger.updated",
        actor: actor.audit,
        target: { type: "trusted_flagger", id },
        details: { name, categories, activeFrom: active.from, activeUntil: active.until },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("trusted_flagger.exists", "Another flagger of this installation has this name.");
    throw error;
  }
  return getTrustedFlagger(env, actor, id);
}

interface PrecisionRow {
  flaggerId: string;
  notices: number;
  decided: number;
  restricted: number;
}

/**
 * Per flagger: their notices (received in [from, to)), those with a decision, and those whose
 * latest decision restricted. Precision = restricted / decided with its 95% Wilson interval
 * (null over no decided notice).
 */
async function precisionRows(env: Env, installationId: string, window: { from?: string; to?: string }, flaggerId?: string): Promise<Map<string, PrecisionRow>> {
  const { results } = await env.DB.prepare(`
    SELECT flaggerId, COUNT(*) AS notices, COUNT(restrictions) AS decided, COALESCE(SUM(restrictions <> '{}'), 0) AS restricted FROM (
      SELECT n.trusted_flagger_id AS flaggerId,
        (SELECT d.restrictions_json FROM decisions d WHERE d.installation_id = n.installation_id AND d.report_id = n.report_id ORDER BY d.decided_at DESC, d.id DESC LIMIT 1) AS restrictions
      FROM notifier_notices n
      WHERE n.installation_id = ?1 AND n.trusted_flagger_id IS NOT NULL AND (?2 IS NULL OR n.trusted_flagger_id = ?2)
        AND (?3 IS NULL OR n.created_at >= ?3) AND (?4 IS NULL OR n.created_at < ?4)
    ) GROUP BY flaggerId
  `)
    .bind(installationId, flaggerId ?? null, window.from ?? null, window.to ?? null)
    .all<PrecisionRow>();
  return new Map(results.map((r) => [r.flaggerId, r]));
}

function view(row: FlaggerRow, figures: PrecisionRow | undefined, at: string) {
  const decided = figures?.decided ?? 0;
  const restricted = figures?.restricted ?? 0;
  return {
    id: row.id,
    name: row.name,
    categories: JSON.parse(row.categoriesJson) as string[],
    activeFrom: row.activeFrom,
    activeUntil: row.activeUntil,
    active: row.activeFrom <= at && (row.activeUntil === null || row.activeUntil > at),
    notices: { received: figures?.notices ?? 0, decided, restricted, notActedOn: decided - restricted },
    /** Share of decided notices whose latest decision restricted, with its 95% Wilson interval. */
    precision: wilson(restricted, decided),
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

function windowOf(query: { from?: string; to?: string }): { from?: string; to?: string } {
  const out: { from?: string; to?: string } = {};
  for (const key of ["from", "to"] as const) {
    const text = query[key];
    if (text === undefined) continue;
    const time = new Date(text);
    if (Number.isNaN(time.getTime())) throw new AppError("request.invalid_query", `${key} must be an ISO 8601 time.`, { status: 400, details: { parameter: key } });
    out[key] = time.toISOString();
  }
  return out;
}

export async function getTrustedFlagger(env: Env, actor: Actor, id: string, query: { from?: string; to?: string } = {}) {
  const row = await flaggerRow(env, actor.installationId, id);
  const figures = await precisionRows(env, actor.installationId, windowOf(query), id);
  return view(row, figures.get(id), new Date().toISOString());
}

/** The installation's trusted flaggers with their figures over the notices received in [from, to). */
export async function listTrustedFlaggers(env: Env, actor: Actor, query: { from?: string; to?: string } = {}) {
  const window = windowOf(query);
  const [{ results }, figures] = await Promise.all([
    env.DB.prepare(`SELECT ${COLUMNS} FROM trusted_flaggers WHERE installation_id = ?1 ORDER BY name LIMIT 1000`).bind(actor.installationId).all<FlaggerRow>(),
    precisionRows(env, actor.installationId, window),
  ]);
  const at = new Date().toISOString();
  return { items: results.map((row) => view(row, figures.get(row.id), at)), from: window.from ?? null, to: window.to ?? null };
}

/** For intake: the active flagger among `hashes` whose area holds `category`, if any. Host-internal. */
/** The active flaggers among notifier hashes (a JSON array) for a category at a time, as SQL over the given parameters. */
export function activeFlaggerCondition(installation: string, hashes: string, category: string, at: string): string {
  return `SELECT id, name FROM trusted_flaggers
      WHERE installation_id = ${installation} AND notifier_hash IN (SELECT value FROM json_each(${hashes})) AND active_from <= ${at} AND (active_until IS NULL OR active_until > ${at})
        AND EXISTS (SELECT 1 FROM json_each(categories_json) WHERE value = ${category})`;
}

export function activeFlaggerStatement(db: D1Database, installationId: string, hashes: readonly string[], category: string, at: string): D1PreparedStatement {
  return db.prepare(`${activeFlaggerCondition("?1", "?2", "?3", "?4")} ORDER BY id LIMIT 1`).bind(installationId, JSON.stringify(hashes), category, at);
}
