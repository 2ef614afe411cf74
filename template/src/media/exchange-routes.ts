// /api/v1/hash-banks/:id/exchange: a bank follows an exchange (admin): set or replace the follow,
// read its status, end it, sync it now, and contribute a confirmed match back.
import { routes, withStatus } from "../http/route";
import { contributeMatch } from "./exchanges/contribute";
import { followExchange, followOrThrow, followView, unfollowExchange } from "./exchanges/follows";
import { followById, MANUAL_PAGES, syncFollow } from "./exchanges/sync";
import { AppError } from "../errors";

export const exchangeRoutes = routes()
  .op(
    {
      method: "post",
      path: "/hash-banks/:id/exchange",
      summary:
        "Follow an exchange { kind: threatexchange | ncmec | stopncii, baseUrl?, credentials, filters? (threatexchange: privacyGroup), intervalMinutes? (default 15), contribute? (default false) }, or replace the follow. Credentials are sealed and never returned; the base URL is checked by the egress rules",
      auth: ["admin"],
      body: "FollowHashExchange",
      ok: 201,
      errors: [404, 409, 422],
    },
    async (c, { body }) => {
      const { created, view } = await followExchange(c.env, c.get("actor"), c.req.param("id"), body);
      return created ? view : withStatus(view, 200);
    },
  )
  .op({ method: "get", path: "/hash-banks/:id/exchange", summary: "The bank's follow: kind, base URL, filters, cursor, last sync, counts, last error (never its credentials)", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    followView(await followOrThrow(c.env, c.get("actor"), c.req.param("id"))),
  )
  .op({ method: "delete", path: "/hash-banks/:id/exchange", summary: "Stop following (the entries it brought stay in the bank)", auth: ["admin"], ok: 200, errors: [404] }, async (c) =>
    unfollowExchange(c.env, c.get("actor"), c.req.param("id")),
  )
  .op(
    {
      method: "post",
      path: "/hash-banks/:id/exchange/sync",
      summary: "Pull the exchange now: up to 20 pages from the persisted cursor (the schedule continues from there); an exchange's failure is in the answer's error and the status. 429 while the exchange's Retry-After lasts",
      auth: ["admin"],
      ok: 200,
      errors: [404, 409, 429],
    },
    async (c) => {
      const follow = await followOrThrow(c.env, c.get("actor"), c.req.param("id"));
      // The exchange asked for quiet (429 Retry-After): an admin's sync waits it out like the schedule does.
      if (follow.failures > 0 && follow.lastErrorCode === "hash_exchange.rate_limited" && follow.nextSyncAt > new Date().toISOString()) {
        throw new AppError("hash_exchange.rate_limited", "The exchange asked this follow to wait; sync again after nextSyncAt.", { status: 429, details: { nextSyncAt: follow.nextSyncAt } });
      }
      const result = await syncFollow(c.env, follow, { maxPages: MANUAL_PAGES, actor: c.get("actor").audit });
      if (!result) throw new AppError("hash_exchange.sync_running", "A sync of this follow is running; read its status and try again later.", { status: 409 });
      const row = await followById(c.env.DB, follow.id);
      return { ...result, status: row ? followView(row) : null };
    },
  )
  .op(
    {
      method: "post",
      path: "/hash-banks/:id/exchange/contribute",
      summary:
        "Send a confirmed match's hash { hash, quality, tags? } to the exchange (ThreatExchange: a descriptor in the privacy group; NCMEC: an upvote on the matched entry; StopNCII: Blocked feedback on the matched hash). Only for a follow that opted in (422 hash_exchange.contribution_not_enabled), an exchange that takes it (422 hash_exchange.contribution_unsupported, hash_exchange.not_from_exchange) and a hash that matches the bank (422 hash_exchange.not_a_match); audited",
      auth: ["admin"],
      body: "ContributeHashExchange",
      ok: 200,
      errors: [404, 422, 502],
    },
    async (c, { body }) => contributeMatch(c.env, c.get("actor"), c.req.param("id"), body),
  );
