// Contributing back: a confirmed match's hash sent to the exchange the bank follows, where the
// exchange takes it (ThreatExchange: a descriptor submitted to the follow's privacy group;
// NCMEC: an upvote on the matched entry; StopNCII: "Blocked" feedback on the matched hash) and only when the follow opted in. "Confirmed"
// means an admin sends it and it matches the bank now (within its threshold, its quality over the
// floor). Every contribution, and every one the exchange refused, is audited with the admin as
// actor; the credentials are in neither.
import { auditStatement } from "../../audit";
import type { Actor } from "../../auth";
import { AppError, errorCode } from "../../errors";
import { matchHashBank } from "../hash-banks";
import { followOrThrow, openCredentials } from "./follows";
import { EXCHANGES } from "./registry";

export async function contributeMatch(env: Env, actor: Actor, bankId: string, input: { hash: string; quality: number; tags?: string[] }) {
  const follow = await followOrThrow(env, actor, bankId);
  const exchange = EXCHANGES[follow.kind];
  if (!exchange.contribute) {
    throw new AppError("hash_exchange.contribution_unsupported", exchange.contributionRefusal ?? "This exchange takes no contributions.", { status: 422, details: { kind: follow.kind } });
  }
  if (follow.contribute !== 1) {
    throw new AppError("hash_exchange.contribution_not_enabled", "This bank's follow has not opted in to contributing; POST the follow again with contribute: true.", { status: 422, details: { kind: follow.kind } });
  }
  const hash = input.hash.toLowerCase();
  const match = await matchHashBank(env, actor.installationId, bankId, { hashes: [hash], quality: input.quality });
  const best = match.matches[0];
  if (!best) {
    throw new AppError(
      "hash_exchange.not_a_match",
      match.belowQualityFloor ? "The hash's quality is under the bank's floor; only a confirmed match is contributed." : "The hash matches no entry of this bank within its threshold; only a confirmed match is contributed.",
      {
        status: 422,
      },
    );
  }
  // Feedback (NCMEC, StopNCII) is about the exchange's own entry, so its hash; a submission (ThreatExchange) is the confirmed media's.
  const sent = exchange.contributeEntryHash ? best.hash : hash;
  const { results: held } = await env.DB.prepare(`SELECT external_id AS id, ref FROM hash_exchange_entries WHERE bank_id = ?1 AND kind = ?2 AND hash = ?3 ORDER BY external_id LIMIT 5`)
    .bind(follow.bankId, follow.kind, best.hash)
    .all<{ id: string; ref: string | null }>();
  const tags = input.tags ?? best.tags;
  const at = new Date().toISOString();
  const audit = (action: string, details: Record<string, unknown>) =>
    auditStatement(env.DB, {
      installationId: follow.installationId,
      idempotencyKey: `hash_exchange:${follow.id}:${action}:${crypto.randomUUID()}`,
      action,
      actor: actor.audit,
      target: { type: "hash_bank", id: follow.bankId },
      details: { kind: follow.kind, hash: sent, distance: best.distance, entry: best.entry, ...details },
      at,
    }).run();
  let reference: string | null;
  try {
    const credentials = await openCredentials(env, follow);
    ({ reference } = await exchange.contribute(
      { baseUrl: follow.baseUrl, credentials, filters: JSON.parse(follow.filtersJson) as Record<string, string>, env, now: Math.floor(Date.now() / 1000) },
      { hash: sent, tags, entries: held, distance: best.distance },
    ));
  } catch (error) {
    await audit("hash_exchange.contribution_failed", { error: errorCode(error) });
    throw error;
  }
  await audit("hash_exchange.contributed", { reference, tags });
  return { contributed: true as const, kind: follow.kind, hash: sent, distance: best.distance, reference };
}
