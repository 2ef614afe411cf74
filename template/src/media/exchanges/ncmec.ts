// NCMEC's hash sharing API (v2, XML; the documentation is NCMEC's, python-threatexchange's
// `ncmec/hash_api.py` reads it): GET <base>/v2/entries?from=&to= with HTTP Basic credentials
// answers a <queryResult> of <images> and <videos> (each with maxTimestamp), whose children are
// <image>/<video> entries (id, member, timestamp, classification, fingerprints: md5, sha1, pdna,
// pdq) and <deletedImage>/<deletedVideo> tombstones (id only), and <paging><next> with the path of
// the next page (relative to the base, start/size/max in its query). Entries are not in time
// order, so the pass's `from` moves only once every page of it was read: to the largest
// maxTimestamp seen (entries at it are read again, harmlessly). Only PDQ fingerprints are kept;
// a tombstone names no hash, so the sync finds it by the entry's id. An entry is known by its
// member (the ESP that submitted it) and its id there: `<member id>/<id>`. Contributing is an
// upvote (affirmative feedback) on the matched entry's PDQ fingerprint:
// PUT <base>/v2/entries/<member>/<id>/PDQ/feedback with <feedbackSubmission><affirmative/>; NCMEC
// takes no new hashes through this API (they come through its members' reviewed submissions).
import { AppError } from "../../errors";
import { badResponse, exchangeRequest } from "./http";
import type { ExchangeContext, ExchangeDelete, ExchangePage, ExchangeUpsert, HashExchange } from "./types";
import { pdqHashOf, tagsOf } from "./types";
import { child, parseXml } from "./xml";

interface Cursor {
  /** Start of the pass (Unix seconds, inclusive). */
  from: number;
  /** End of the pass, fixed when its first page was asked for. */
  to?: number;
  /** The largest maxTimestamp the pass saw. */
  seen?: number;
  /** The next page of the pass: a path relative to the base URL. */
  next?: string;
}

const basic = (ctx: ExchangeContext) => `Basic ${btoa(`${ctx.credentials.username}:${ctx.credentials.password}`)}`;
const iso = (seconds: number) => new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/u, "Z");

function cursorOf(value: unknown): Cursor {
  const c = (value ?? {}) as Partial<Cursor>;
  return {
    from: typeof c.from === "number" ? c.from : 0,
    ...(typeof c.to === "number" ? { to: c.to } : {}),
    ...(typeof c.seen === "number" ? { seen: c.seen } : {}),
    ...(typeof c.next === "string" ? { next: c.next } : {}),
  };
}

export const ncmecHashSharing: HashExchange = {
  kind: "ncmec",
  defaultBaseUrl: "https://report.cybertip.org/hashsharing",
  // The request names no size; NCMEC answers pages of up to 1,000 entries (its next link carries size=1000).
  pageSize: 1_000,
  credentials: ["username", "password"],
  filters: [],
  contributeEntryHash: true,

  async fetchPage(ctx: ExchangeContext, raw: unknown): Promise<ExchangePage> {
    const cursor = cursorOf(raw);
    const to = cursor.to ?? ctx.now;
    const base = ctx.baseUrl.replace(/\/+$/u, "");
    let url: URL;
    if (cursor.next) url = new URL(`${base}${cursor.next.startsWith("/") ? "" : "/"}${cursor.next}`);
    else {
      url = new URL(`${base}/v2/entries`);
      url.searchParams.set("from", iso(cursor.from));
      url.searchParams.set("to", iso(to));
    }
    const root = parseXml(await exchangeRequest(ctx.env, ctx.baseUrl, url, { headers: { authorization: basic(ctx), accept: "application/xml" } }));
    if (root?.name !== "queryResult") throw badResponse("not a queryResult document");
    const upserts: ExchangeUpsert[] = [];
    const deletes: ExchangeDelete[] = [];
    let skipped = 0;
    let seen = cursor.seen ?? cursor.from;
    for (const group of [child(root, "images"), child(root, "videos")]) {
      if (!group) continue;
      const max = Date.parse(group.attrs.maxTimestamp ?? "");
      if (!Number.isNaN(max) && group.children.length > 0) seen = Math.max(seen, Math.floor(max / 1000));
      for (const entry of group.children) {
        const entryId = child(entry, "id")?.text.trim();
        const member = child(entry, "member")?.attrs.id?.trim();
        const id = entryId && member ? `${member}/${entryId}` : null;
        if (!id) {
          skipped += 1;
          continue;
        }
        if (entry.name === "deletedImage" || entry.name === "deletedVideo") {
          deletes.push({ id });
          continue;
        }
        const hash = pdqHashOf(child(child(entry, "fingerprints"), "pdq")?.text.trim());
        if ((entry.name !== "image" && entry.name !== "video") || !hash) {
          skipped += 1;
          continue;
        }
        const classification = child(entry, "classification")?.text.trim();
        upserts.push({ id, hash, tags: tagsOf(["ncmec", ...(classification ? [`ncmec:${classification}`] : [])]) });
      }
    }
    const next = child(child(root, "paging"), "next")?.text.trim();
    if (next) {
      // The next link is a path under the base; anything else is not followed.
      if (!next.startsWith("/") || next.startsWith("//")) throw badResponse("a next link that is not a path");
      return { upserts, deletes, skipped, nextCursor: { from: cursor.from, to, seen, next } satisfies Cursor, done: false };
    }
    return { upserts, deletes, skipped, nextCursor: { from: Math.max(cursor.from, seen) } satisfies Cursor, done: true };
  },

  async contribute(ctx, input) {
    // Feedback is on an entry of the exchange: a hash put in the bank by hand has none to upvote.
    const entry = input.entries[0]?.id;
    if (!entry) throw new AppError("hash_exchange.not_from_exchange", "The matched entry did not come from NCMEC (it was added by hand), so there is no NCMEC entry to give feedback on.", { status: 422 });
    const [member, id] = entry.split("/");
    const url = new URL(`${ctx.baseUrl.replace(/\/+$/u, "")}/v2/entries/${encodeURIComponent(member!)}/${encodeURIComponent(id!)}/PDQ/feedback`);
    const body = `<?xml version="1.0" encoding="UTF-8"?><feedbackSubmission xmlns="https://hashsharing.ncmec.org/hashsharing/v2"><affirmative/></feedbackSubmission>`;
    await exchangeRequest(ctx.env, ctx.baseUrl, url, { method: "PUT", headers: { authorization: basic(ctx), "content-type": "application/xml; charset=utf-8" }, body });
    return { reference: entry };
  },
};
