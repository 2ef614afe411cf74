// StopNCII.org's hash API (as python-threatexchange's `stopncii/api.py` speaks it): GET
// <base>/FetchHashes?startTimestamp=&pageSize=&nextPageToken= with the `Ocp-Apim-Subscription-Key`
// and the endpoint's own `x-functions-key` answers { count, hashRecords: [{ lastModtimestamp,
// signalType, hashValue, hashStatus, caseNumbers, CSPFeedbacks }], nextPageToken, nextSetTimestamp,
// hasMoreRecords }. A record is the hash's whole current state: hashStatus Withdrawn or Deleted
// means the hash must go; any other status means it is (still) in. Only ImagePDQ records are kept.
// Paged by nextPageToken while hasMoreRecords; once the pass is read, nextSetTimestamp is the
// checkpoint the next pass starts from. Contributing is feedback on a hash
// (POST <base>/SubmitFeedback with its own function key: { count, hashFeedbacks: [{ hashValue,
// feedbackValue: "Blocked", tags }] }): a CSP confirms it blocked a match.
import { AppError } from "../../errors";
import { badResponse, exchangeRequest, parseJson } from "./http";
import type { ExchangeContext, ExchangeDelete, ExchangePage, ExchangeUpsert, HashExchange } from "./types";
import { pdqHashOf } from "./types";

/** Records per page; python-threatexchange asks for 800. */
const PAGE_SIZE = 800;
/** Where a first pass starts (the reference client's default). */
const START = 10;

interface Cursor {
  start: number;
  next?: string;
}

function cursorOf(value: unknown): Cursor {
  const c = (value ?? {}) as Partial<Cursor>;
  return { start: typeof c.start === "number" ? c.start : START, ...(typeof c.next === "string" && c.next ? { next: c.next } : {}) };
}

const headers = (ctx: ExchangeContext, functionKey: string) => ({ "x-functions-key": functionKey, "Ocp-Apim-Subscription-Key": ctx.credentials.subscriptionKey!, accept: "application/json" });

export const stopNcii: HashExchange = {
  kind: "stopncii",
  defaultBaseUrl: "https://api.stopncii.org/v1",
  pageSize: PAGE_SIZE,
  credentials: ["subscriptionKey", "fetchFunctionKey"],
  optionalCredentials: ["feedbackFunctionKey"],
  filters: [],
  contributeEntryHash: true,

  async fetchPage(ctx: ExchangeContext, raw: unknown): Promise<ExchangePage> {
    const cursor = cursorOf(raw);
    const url = new URL(`${ctx.baseUrl.replace(/\/+$/u, "")}/FetchHashes`);
    url.searchParams.set("startTimestamp", String(cursor.start));
    url.searchParams.set("pageSize", String(PAGE_SIZE));
    if (cursor.next) url.searchParams.set("nextPageToken", cursor.next);
    const body = parseJson(await exchangeRequest(ctx.env, ctx.baseUrl, url, { headers: headers(ctx, ctx.credentials.fetchFunctionKey!) }));
    if (!Array.isArray(body.hashRecords) || typeof body.hasMoreRecords !== "boolean") throw badResponse("no hashRecords or hasMoreRecords");
    const upserts: ExchangeUpsert[] = [];
    const deletes: ExchangeDelete[] = [];
    let skipped = 0;
    for (const record of body.hashRecords as Record<string, unknown>[]) {
      const hash = pdqHashOf(record?.hashValue);
      if (!hash || record.signalType !== "ImagePDQ") {
        skipped += 1;
        continue;
      }
      if (record.hashStatus === "Withdrawn" || record.hashStatus === "Deleted") deletes.push({ id: hash, hash });
      else upserts.push({ id: hash, hash, tags: ["stopncii"] });
    }
    if (body.hasMoreRecords) {
      if (typeof body.nextPageToken !== "string" || !body.nextPageToken) throw badResponse("hasMoreRecords without a nextPageToken");
      return { upserts, deletes, skipped, nextCursor: { start: cursor.start, next: body.nextPageToken } satisfies Cursor, done: false };
    }
    const checkpoint = typeof body.nextSetTimestamp === "number" && body.nextSetTimestamp >= cursor.start ? body.nextSetTimestamp : cursor.start;
    return { upserts, deletes, skipped, nextCursor: { start: checkpoint } satisfies Cursor, done: true };
  },

  async contribute(ctx, input) {
    const key = ctx.credentials.feedbackFunctionKey;
    if (!key) throw new AppError("hash_exchange.contribution_unsupported", "This StopNCII follow has no feedbackFunctionKey; POST the follow again with one to send feedback.", { status: 422 });
    const url = new URL(`${ctx.baseUrl.replace(/\/+$/u, "")}/SubmitFeedback`);
    const payload = { count: 1, hashFeedbacks: [{ hashValue: input.hash, feedbackValue: "Blocked", tags: input.tags }] };
    await exchangeRequest(ctx.env, ctx.baseUrl, url, { method: "POST", headers: { ...headers(ctx, key), "content-type": "application/json" }, body: JSON.stringify(payload) });
    return { reference: null };
  },
};
