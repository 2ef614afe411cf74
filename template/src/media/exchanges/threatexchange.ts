// ThreatExchange (Meta's Graph API): a privacy group's `threat_updates` edge, as its reference
// documents it and python-threatexchange reads it. GET /<privacy_group>/threat_updates/ with
// access_token (app id|secret, in the query as Graph API takes it), start_time (seconds), limit,
// types=HASH_PDQ and fields; the answer is { data: [{ id, indicator, type, last_updated,
// should_delete, descriptors: { data: [{ tags, ... }] } }], paging: { next } }. A record with
// should_delete (or, as the reference also treats it, without descriptors) is a tombstone; any
// other is the indicator's current state, its tags the union of its descriptors' tags. Paged by
// following `paging.next` (whose access_token is stripped before the cursor is stored, and added
// back at request time). Contributing submits a descriptor to the privacy group
// (POST /threat_descriptors: indicator, type HASH_PDQ, status MALICIOUS, privacy_type
// HAS_PRIVACY_GROUP, privacy_members, share_level, description, tags) or, when the confirmed
// media's hash is the indicator itself, reacts SAW_THIS_TOO to its descriptor (POST /<descriptor>).
import { badResponse, exchangeRequest, parseJson } from "./http";
import type { ExchangeContext, ExchangeDelete, ExchangePage, ExchangeUpsert, HashExchange } from "./types";
import { pdqHashOf, tagsOf } from "./types";

/** Records per page; the Graph API's threat_updates takes up to 1,000. */
const PAGE_SIZE = 500;
const FIELDS = "id,indicator,type,last_updated,should_delete,descriptors{id,tags,status,added_on,owner{id}}";

interface Cursor {
  /** start_time of the pass: the largest last_updated a finished pass saw (records at it are read again, harmlessly). */
  since: number;
  /** The largest last_updated seen so far in this pass. */
  seen?: number;
  /** The next page of this pass: path and query without the access token. */
  next?: string;
}

function cursorOf(value: unknown): Cursor {
  const c = (value ?? {}) as Partial<Cursor>;
  return { since: typeof c.since === "number" ? c.since : 0, ...(typeof c.seen === "number" ? { seen: c.seen } : {}), ...(typeof c.next === "string" ? { next: c.next } : {}) };
}

/** Graph API times are Unix seconds (a number or a digit string) or ISO 8601 with an offset. */
function secondsOf(value: unknown): number | null {
  if (typeof value === "number" && Number.isFinite(value)) return Math.floor(value);
  if (typeof value === "string" && /^\d+$/u.test(value)) return Number(value);
  if (typeof value === "string") {
    const at = Date.parse(value.replace(/([+-]\d{2})(\d{2})$/u, "$1:$2"));
    return Number.isNaN(at) ? null : Math.floor(at / 1000);
  }
  return null;
}

/** A descriptor's tags: a list of texts, or the Graph API's { data: [{ id, text }] }. */
function descriptorTags(descriptor: unknown): string[] {
  const tags = (descriptor as { tags?: unknown } | null)?.tags;
  if (Array.isArray(tags)) return tags.filter((t): t is string => typeof t === "string");
  const data = (tags as { data?: unknown } | null)?.data;
  return Array.isArray(data) ? data.map((t) => (t as { text?: unknown })?.text).filter((t): t is string => typeof t === "string") : [];
}

/** The Graph API's answer to a token it does not take: 400 with an OAuthException of code 190 (invalid or expired token) or 102 (session). */
function oauthFailure(_status: number, body: string): boolean {
  try {
    const error = (JSON.parse(body) as { error?: { type?: unknown; code?: unknown } }).error;
    return error?.type === "OAuthException" && (error.code === 190 || error.code === 102);
  } catch {
    return false;
  }
}

function withToken(url: URL, token: string): URL {
  const out = new URL(url);
  out.searchParams.set("access_token", token);
  return out;
}

export const threatExchange: HashExchange = {
  kind: "threatexchange",
  defaultBaseUrl: "https://graph.facebook.com/v21.0",
  pageSize: PAGE_SIZE,
  credentials: ["accessToken"],
  filters: ["privacyGroup"],
  requiredFilters: ["privacyGroup"],

  async fetchPage(ctx: ExchangeContext, raw: unknown): Promise<ExchangePage> {
    const cursor = cursorOf(raw);
    const base = ctx.baseUrl.replace(/\/+$/u, "");
    let url: URL;
    if (cursor.next) url = new URL(cursor.next, `${base}/`);
    else {
      url = new URL(`${base}/${encodeURIComponent(ctx.filters.privacyGroup!)}/threat_updates/`);
      url.searchParams.set("start_time", String(cursor.since));
      url.searchParams.set("limit", String(PAGE_SIZE));
      url.searchParams.set("types", "HASH_PDQ");
      url.searchParams.set("fields", FIELDS);
    }
    const body = parseJson(await exchangeRequest(ctx.env, ctx.baseUrl, withToken(url, ctx.credentials.accessToken!), { authFailure: oauthFailure }));
    if (!Array.isArray(body.data)) throw badResponse("no data list");
    const upserts: ExchangeUpsert[] = [];
    const deletes: ExchangeDelete[] = [];
    let skipped = 0;
    let seen = cursor.seen ?? cursor.since;
    for (const item of body.data as Record<string, unknown>[]) {
      const id = typeof item?.id === "string" || typeof item?.id === "number" ? String(item.id) : null;
      const hash = pdqHashOf(item?.indicator);
      const updated = secondsOf(item?.last_updated);
      if (updated !== null) seen = Math.max(seen, updated);
      if (!id || !hash || item.type !== "HASH_PDQ") {
        skipped += 1;
        continue;
      }
      const descriptors = (item.descriptors as { data?: unknown } | undefined)?.data;
      if (item.should_delete === true || !Array.isArray(descriptors) || descriptors.length === 0) deletes.push({ id, hash });
      else {
        const first = (descriptors[0] as { id?: unknown } | null)?.id;
        upserts.push({ id, hash, tags: tagsOf(descriptors.flatMap(descriptorTags)), ...(typeof first === "string" || typeof first === "number" ? { ref: String(first) } : {}) });
      }
    }
    const nextLink = (body.paging as { next?: unknown } | undefined)?.next;
    if (typeof nextLink === "string" && nextLink) {
      const next = new URL(nextLink, `${base}/`);
      next.searchParams.delete("access_token");
      return { upserts, deletes, skipped, nextCursor: { since: cursor.since, seen, next: `${next.pathname}${next.search}` } satisfies Cursor, done: false };
    }
    return { upserts, deletes, skipped, nextCursor: { since: seen } satisfies Cursor, done: true };
  },

  async contribute(ctx, input) {
    // The same indicator the exchange already holds: a reaction on its descriptor says "we saw
    // this too" (POST /<descriptor_id> reactions=SAW_THIS_TOO), rather than a second descriptor.
    const descriptor = input.distance === 0 ? input.entries.find((e) => e.ref)?.ref : undefined;
    if (descriptor) {
      const url = withToken(new URL(`${ctx.baseUrl.replace(/\/+$/u, "")}/${encodeURIComponent(descriptor)}`), ctx.credentials.accessToken!);
      const form = new URLSearchParams({ reactions: "SAW_THIS_TOO" }).toString();
      const body = parseJson(await exchangeRequest(ctx.env, ctx.baseUrl, url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form, authFailure: oauthFailure }));
      if (body.success !== true) throw badResponse("a reaction without success");
      return { reference: `reaction:${descriptor}` };
    }
    const url = withToken(new URL(`${ctx.baseUrl.replace(/\/+$/u, "")}/threat_descriptors`), ctx.credentials.accessToken!);
    const form = new URLSearchParams({
      indicator: input.hash,
      type: "HASH_PDQ",
      description: "Confirmed match (Safest Tools)",
      share_level: "AMBER",
      status: "MALICIOUS",
      privacy_type: "HAS_PRIVACY_GROUP",
      privacy_members: ctx.filters.privacyGroup!,
      ...(input.tags.length ? { tags: input.tags.join(",") } : {}),
    });
    const body = parseJson(await exchangeRequest(ctx.env, ctx.baseUrl, url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form.toString(), authFailure: oauthFailure }));
    return { reference: typeof body.id === "string" || typeof body.id === "number" ? String(body.id) : null };
  },
};
