// Pulling a follow's exchange: page by page from its persisted cursor, each page applied to the
// bank and then — in one D1 batch with the mirror's index rows — the cursor that follows it. So the
// cursor never runs ahead of what the bank holds: a sync killed anywhere resumes at the page it
// had not finished, and applying a page twice changes nothing (shard adds and removes are
// idempotent; index rows are upserts and deletes). The mirror's index rows are the bank's (per
// exchange kind), not one follow's, so a bank that follows the same exchange again still knows,
// and can withdraw, the entries it holds. An exchange only ever adds or drops its own hold on a
// hash (applyExchangeChanges): a hash the bank curated itself stays. One sync per follow at a time:
// a lease with a token, renewed before every page, every write of the sync conditional on it (a
// killed sync's successor waits out the lease; a sync that lost it stops, and neither moves the
// cursor back nor clears the lease of the sync that took it). A page of more than twice the
// entries asked for is refused (hash_exchange.page_too_large, in the status). Failures back off: 429 waits its Retry-After, 401/403 an
// hour (new credentials make it due again), 5xx and timeouts 1, 2, 4 … minutes up to 6 hours; the
// status shows the last error's code and HTTP status, never a URL or a credential.
import { auditStatement } from "../../audit";
import type { AuditEventInput } from "../../audit";
import { AppError, errorCode } from "../../errors";
import { bankOf, applyExchangeChanges, type HashBankRow } from "../hash-banks";
import type { ExchangeFailureDetails } from "./http";
import { FOLLOW_COLUMNS, openCredentials, type FollowRow } from "./follows";
import { EXCHANGES } from "./registry";
import type { ExchangePage } from "./types";

/** How long a sync holds its follow; a killed sync's follow is free again after it. */
const LEASE_SECONDS = 300;
/**
 * Pages one scheduled slice reads, over all follows (a page of 1,000 entries costs about 25 D1
 * queries, and an invocation has 1,000), and follows a slice takes at most.
 */
export const SWEEP_PAGES = 5;
export const SWEEP_FOLLOWS = 5;
/** Pages a manual sync reads at most (the schedule continues from there). */
export const MANUAL_PAGES = 20;
/** Index rows of deleted banks deleted per slice. */
const CLEANUP_ROWS = 5_000;
/** D1 takes at most 100 bound parameters a statement. */
const ROWS_PER_INSERT = 24;
const IDS_PER_STATEMENT = 98;

const SYNC_ACTOR = { type: "system", id: "hash-exchange-sync" } as const;

export interface SyncResult {
  pages: number;
  upserts: number;
  deletes: number;
  skipped: number;
  /** The exchange had no further page for now. */
  done: boolean;
  error: { code: string; status: number | null } | null;
}

const chunks = <T>(list: T[], size: number) => Array.from({ length: Math.ceil(list.length / size) }, (_, i) => list.slice(i * size, (i + 1) * size));

/** The shard source an exchange's entries are held under (pdq-index-shard.ts). */
export const exchangeSource = (kind: string) => `exchange:${kind}`;

/** The index rows of these entry ids: which hash each put in the bank. */
async function priorHashes(db: D1Database, follow: FollowRow, ids: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const batch of chunks(ids, IDS_PER_STATEMENT)) {
    const { results } = await db
      .prepare(`SELECT external_id AS id, hash FROM hash_exchange_entries WHERE bank_id = ?1 AND kind = ?2 AND external_id IN (${batch.map((_, i) => `?${i + 3}`).join(",")})`)
      .bind(follow.bankId, follow.kind, ...batch)
      .all<{ id: string; hash: string }>();
    for (const row of results) out.set(row.id, row.hash);
  }
  return out;
}

/** Of these hashes, those an entry other than `except` still holds. */
async function heldElsewhere(db: D1Database, follow: FollowRow, hashes: string[], except: Set<string>): Promise<Set<string>> {
  const out = new Set<string>();
  for (const batch of chunks(hashes, IDS_PER_STATEMENT)) {
    const { results } = await db
      .prepare(`SELECT external_id AS id, hash FROM hash_exchange_entries WHERE bank_id = ?1 AND kind = ?2 AND hash IN (${batch.map((_, i) => `?${i + 3}`).join(",")})`)
      .bind(follow.bankId, follow.kind, ...batch)
      .all<{ id: string; hash: string }>();
    for (const row of results) if (!except.has(row.id)) out.add(row.hash);
  }
  return out;
}

/**
 * Applies one page and persists the cursor after it, while the sync holds the follow's lease
 * (`token`): the index rows and the cursor are written only then (one batch). An id both deleted
 * and upserted in the page ends present (its upsert is the later state). The exchange lets go of a
 * hash only when no other of its entries holds it, and the hash leaves the bank only when no other
 * source (the bank's own curation) holds it; a hash the exchange never put in the bank is never
 * removed by it.
 */
async function applyPage(env: Env, follow: FollowRow, bank: HashBankRow, page: ExchangePage, at: string, token: string): Promise<{ upserts: number; deletes: number }> {
  const final = new Map<string, { hash: string; tags: string[]; ref: string | null } | null>();
  for (const d of page.deletes) final.set(d.id, null);
  for (const u of page.upserts) final.set(u.id, { hash: u.hash, tags: u.tags, ref: u.ref ?? null });
  const ids = [...final.keys()];
  const prior = await priorHashes(env.DB, follow, ids);
  const kept = new Set([...final.values()].flatMap((v) => (v ? [v.hash] : [])));
  const candidates = [...new Set(ids.flatMap((id) => (prior.has(id) && final.get(id)?.hash !== prior.get(id) ? [prior.get(id)!] : [])))].filter((h) => !kept.has(h));
  const elsewhere = await heldElsewhere(env.DB, follow, candidates, new Set(ids));
  const put = new Map<string, { hash: string; tags: string[]; quality: null }>();
  for (const v of final.values()) if (v) put.set(v.hash, { hash: v.hash, tags: v.tags, quality: null });
  const changes = await applyExchangeChanges(env, bank, exchangeSource(follow.kind), { put: [...put.values()], remove: candidates.filter((h) => !elsewhere.has(h)) });
  const deleted = ids.filter((id) => final.get(id) === null && prior.has(id));
  const upserted = ids.flatMap((id) => (final.get(id) ? [[id, final.get(id)!.hash, final.get(id)!.ref] as const] : []));
  // ?1 the follow, ?2 the lease token, ?3 the bank, ?4 the kind: every statement holds only while the lease does.
  const held = `EXISTS (SELECT 1 FROM hash_exchange_follows WHERE id = ?1 AND lease_token = ?2 AND state = 'active')`;
  await env.DB.batch([
    ...chunks(deleted, IDS_PER_STATEMENT - 2).map((batch) =>
      env.DB.prepare(`DELETE FROM hash_exchange_entries WHERE bank_id = ?3 AND kind = ?4 AND external_id IN (${batch.map((_, i) => `?${i + 5}`).join(",")}) AND ${held}`).bind(follow.id, token, follow.bankId, follow.kind, ...batch),
    ),
    ...chunks(upserted, ROWS_PER_INSERT).map((batch) =>
      env.DB.prepare(
        `INSERT INTO hash_exchange_entries (bank_id, kind, external_id, hash, ref) SELECT ?3, ?4, column1, column2, column3 FROM (VALUES ${batch.map((_, i) => `(?${i * 3 + 5}, ?${i * 3 + 6}, ?${i * 3 + 7})`).join(",")}) WHERE ${held} ON CONFLICT (bank_id, kind, external_id) DO UPDATE SET hash = excluded.hash, ref = excluded.ref`,
      ).bind(follow.id, token, follow.bankId, follow.kind, ...batch.flat()),
    ),
    env.DB.prepare(`UPDATE hash_exchange_follows SET cursor_json = ?3, pages = pages + 1, upserts = upserts + ?4, deletes = deletes + ?5, last_sync_at = ?6, updated_at = ?6 WHERE id = ?1 AND lease_token = ?2 AND state = 'active'`).bind(
      follow.id,
      token,
      JSON.stringify(page.nextCursor),
      changes.added + changes.updated,
      changes.removed,
      at,
    ),
  ]);
  return { upserts: changes.added + changes.updated, deletes: changes.removed };
}

/** Seconds to wait after the `failures`-th failure in a row with this error. */
function backoffSeconds(code: string, failures: number, retryAfter: number | null): number {
  if (code === "hash_exchange.rate_limited") return Math.min(Math.max(retryAfter ?? 60, 1), 86_400);
  if (code === "hash_exchange.unauthorized") return 3_600;
  return Math.min(60 * 2 ** Math.min(failures - 1, 10), 21_600);
}

const plus = (at: Date, seconds: number) => new Date(at.getTime() + seconds * 1000).toISOString();

/** Takes the follow's lease: its token, or null when another sync holds it. */
async function lease(db: D1Database, followId: string, now: Date): Promise<string | null> {
  const token = crypto.randomUUID();
  const result = await db
    .prepare(`UPDATE hash_exchange_follows SET lease_until = ?3, lease_token = ?4 WHERE id = ?1 AND state = 'active' AND (lease_until IS NULL OR lease_until <= ?2)`)
    .bind(followId, now.toISOString(), plus(now, LEASE_SECONDS), token)
    .run();
  return result.meta.changes === 1 ? token : null;
}

/** Extends the lease this sync holds (before each page); false when it lapsed and another sync took it, or the follow ended. */
async function renew(db: D1Database, followId: string, token: string): Promise<boolean> {
  const result = await db.prepare(`UPDATE hash_exchange_follows SET lease_until = ?3 WHERE id = ?1 AND lease_token = ?2 AND state = 'active'`).bind(followId, token, plus(new Date(), LEASE_SECONDS)).run();
  return result.meta.changes === 1;
}

/** A page of more entries than twice the exchange's page size: refused before it reaches the bank (its D1 work would pass an invocation's budget, every time). */
function pageTooLarge(entries: number, pageSize: number): AppError {
  return new AppError("hash_exchange.page_too_large", `The exchange answered a page of ${entries} entries, more than twice the ${pageSize} asked for; the sync refuses it and tries again with backoff.`, {
    status: 502,
    details: { status: 200, retryAfter: null } satisfies ExchangeFailureDetails,
  });
}

/**
 * Reads up to `maxPages` pages of the follow's exchange and applies them. Answers null when another
 * sync holds the follow. Audited (hash_exchange.synced, by `actor`) when a page changed the bank.
 */
export async function syncFollow(env: Env, follow: FollowRow, options: { maxPages: number; actor?: AuditEventInput["actor"]; now?: Date }): Promise<SyncResult | null> {
  const started = options.now ?? new Date();
  const token = await lease(env.DB, follow.id, started);
  if (token === null) return null;
  const result: SyncResult = { pages: 0, upserts: 0, deletes: 0, skipped: 0, done: false, error: null };
  const exchange = EXCHANGES[follow.kind];
  let cursor: unknown = follow.cursorJson === null ? null : JSON.parse(follow.cursorJson);
  let failure: { code: string; status: number | null; retryAfter: number | null } | null = null;
  try {
    const bank = await bankOf(env, follow.installationId, follow.bankId);
    const ctx = { baseUrl: follow.baseUrl, credentials: await openCredentials(env, follow), filters: JSON.parse(follow.filtersJson) as Record<string, string>, env, now: Math.floor(started.getTime() / 1000) };
    while (result.pages < options.maxPages && !result.done) {
      let page: ExchangePage;
      try {
        page = await exchange.fetchPage(ctx, cursor);
        const entries = page.upserts.length + page.deletes.length + page.skipped;
        if (entries > 2 * exchange.pageSize) throw pageTooLarge(entries, exchange.pageSize);
      } catch (error) {
        const details = (error instanceof AppError ? error.details : null) as ExchangeFailureDetails | null;
        failure = { code: errorCode(error), status: details?.status ?? null, retryAfter: details?.retryAfter ?? null };
        break;
      }
      // Lost (it lapsed and another sync took it): this sync stops, its writes would all be refused.
      if (!(await renew(env.DB, follow.id, token))) throw new AppError("hash_exchange.lease_lost", "Another sync took this follow over (this one held it too long); it continues from the persisted cursor.", { status: 409 });
      const applied = await applyPage(env, follow, bank, page, new Date().toISOString(), token);
      cursor = page.nextCursor;
      result.pages += 1;
      result.upserts += applied.upserts;
      result.deletes += applied.deletes;
      result.skipped += page.skipped;
      result.done = page.done;
    }
  } catch (error) {
    // Not the exchange's failure (the bank was deleted, a full shard, storage): recorded the same way.
    failure = { code: errorCode(error), status: null, retryAfter: null };
  }
  const at = new Date();
  result.error = failure ? { code: failure.code, status: failure.status } : null;
  const statements: D1PreparedStatement[] = [];
  if (failure) {
    const failures = follow.failures + 1;
    statements.push(
      env.DB.prepare(
        `UPDATE hash_exchange_follows SET lease_until = NULL, lease_token = NULL, failures = ?2, last_error_code = ?3, last_error_status = ?4, last_error_at = ?5, next_sync_at = ?6, last_sync_at = ?5, updated_at = ?5 WHERE id = ?1 AND lease_token = ?7`,
      ).bind(follow.id, failures, failure.code, failure.status, at.toISOString(), plus(at, backoffSeconds(failure.code, failures, failure.retryAfter)), token),
    );
  } else {
    // Done: due again after the interval; stopped at the page bound: due as of the sync's own clock
    // (the schedule's next slice, which selects with that same clock, continues it).
    const next = result.done ? plus(at, follow.intervalMinutes * 60) : started.toISOString();
    statements.push(
      env.DB.prepare(`UPDATE hash_exchange_follows SET lease_until = NULL, lease_token = NULL, failures = 0, next_sync_at = ?2, last_success_at = ?3, last_sync_at = ?3, updated_at = ?3 WHERE id = ?1 AND lease_token = ?4`).bind(
        follow.id,
        next,
        at.toISOString(),
        token,
      ),
    );
  }
  if (result.upserts + result.deletes > 0) {
    statements.push(
      auditStatement(env.DB, {
        installationId: follow.installationId,
        idempotencyKey: `hash_exchange:${follow.id}:synced:${crypto.randomUUID()}`,
        action: "hash_exchange.synced",
        actor: options.actor ?? SYNC_ACTOR,
        target: { type: "hash_bank", id: follow.bankId },
        details: { kind: follow.kind, pages: result.pages, upserts: result.upserts, deletes: result.deletes, skipped: result.skipped, done: result.done, error: result.error?.code ?? null },
        at: at.toISOString(),
      }),
    );
  }
  await env.DB.batch(statements);
  return result;
}

/** Reads a follow row again (after a sync) by id. */
export function followById(db: D1Database, id: string): Promise<FollowRow | null> {
  return db.prepare(`SELECT ${FOLLOW_COLUMNS} FROM hash_exchange_follows WHERE id = ?1`).bind(id).first<FollowRow>();
}

/**
 * The schedule's slice: due follows, oldest first, until SWEEP_PAGES pages were read (at most
 * SWEEP_FOLLOWS follows); then the ended follows that are no longer needed. An ended follow of a
 * bank that still exists is kept only while it is the bank's latest follow (the mirror's index rows
 * are the bank's and stay with it); of a deleted bank, up to CLEANUP_ROWS of the bank's index rows
 * go, and once none is left, its follow rows. `more` while a follow stopped at the page bound, the
 * slice took as many follows as it may, or cleanup is left.
 */
export async function sweepHashExchanges(env: Env, now: Date): Promise<Record<string, number>> {
  const { results: due } = await env.DB.prepare(`SELECT ${FOLLOW_COLUMNS} FROM hash_exchange_follows WHERE state = 'active' AND next_sync_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1) ORDER BY next_sync_at LIMIT ?2`)
    .bind(now.toISOString(), SWEEP_FOLLOWS)
    .all<FollowRow>();
  const summary = { follows: 0, pages: 0, upserts: 0, deletes: 0, failures: 0, cleaned: 0, more: 0 };
  let left = due.length === SWEEP_FOLLOWS;
  let pages = SWEEP_PAGES;
  for (const follow of due) {
    if (pages <= 0) {
      left = true;
      break;
    }
    const result = await syncFollow(env, follow, { maxPages: pages, now });
    if (!result) continue;
    // A failed first request still costs a page of the budget: a slice of failing follows stays bounded too.
    pages -= Math.max(result.pages, 1);
    summary.follows += 1;
    summary.pages += result.pages;
    summary.upserts += result.upserts;
    summary.deletes += result.deletes;
    if (result.error) summary.failures += 1;
    else if (!result.done) left = true;
  }
  const ended = await env.DB.prepare(
    `SELECT f.id, f.bank_id AS bankId, EXISTS (SELECT 1 FROM hash_banks b WHERE b.id = f.bank_id) AS bankLives FROM hash_exchange_follows f WHERE f.state = 'ended'
      AND (NOT EXISTS (SELECT 1 FROM hash_banks b WHERE b.id = f.bank_id)
        OR EXISTS (SELECT 1 FROM hash_exchange_follows g WHERE g.bank_id = f.bank_id AND g.id <> f.id AND (g.state = 'active' OR g.created_at > f.created_at OR (g.created_at = f.created_at AND g.id > f.id))))
      LIMIT 5`,
  ).all<{ id: string; bankId: string; bankLives: number }>();
  let budget = CLEANUP_ROWS;
  for (const { id, bankId, bankLives } of ended.results) {
    if (bankLives) {
      await env.DB.prepare(`DELETE FROM hash_exchange_follows WHERE id = ?1 AND state = 'ended'`).bind(id).run();
      continue;
    }
    if (budget <= 0) {
      left = true;
      break;
    }
    const removed = await env.DB.prepare(`DELETE FROM hash_exchange_entries WHERE (bank_id, kind, external_id) IN (SELECT bank_id, kind, external_id FROM hash_exchange_entries WHERE bank_id = ?1 LIMIT ?2)`).bind(bankId, budget).run();
    summary.cleaned += removed.meta.changes;
    const full = removed.meta.changes >= budget;
    budget -= removed.meta.changes;
    if (!full)
      await env.DB.prepare(`DELETE FROM hash_exchange_follows WHERE bank_id = ?1 AND state = 'ended' AND NOT EXISTS (SELECT 1 FROM hash_exchange_entries WHERE bank_id = ?1) AND NOT EXISTS (SELECT 1 FROM hash_banks WHERE id = ?1)`)
        .bind(bankId)
        .run();
    else left = true;
  }
  if (ended.results.length === 5) left = true;
  summary.more = left ? 1 : 0;
  return summary;
}
