// The exchanges' HTTP: every request goes through the egress rules (the follow's base URL was
// checked when it was set; a page's own "next" link is checked again and must stay on the base
// URL's origin, so an exchange cannot send the credentials elsewhere), follows no redirect, and
// turns a failure into an AppError whose code, status and Retry-After the sync records. Neither a
// URL (ThreatExchange puts its token in the query) nor a response body ever reaches an error.
import { AppError } from "../../errors";
import { allowLocalEgress, egressRefusal } from "../../lib/egress";

/** Longest wait for one answer. */
const TIMEOUT_MS = 30_000;
/** Largest page body read (an NCMEC page of 1,000 entries is well under a megabyte). */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface ExchangeFailureDetails {
  /** The exchange's HTTP status, or null when no answer came (timeout, network). */
  status: number | null;
  /** Seconds the exchange asked to wait (429 Retry-After), or null. */
  retryAfter: number | null;
}

/** The failure codes a sync records (and a contribution answers, as 502). */
export function exchangeFailure(status: number | null, retryAfter: number | null = null): AppError {
  const details: ExchangeFailureDetails = { status, retryAfter };
  if (status === 401 || status === 403) return new AppError("hash_exchange.unauthorized", "The exchange refused the follow's credentials; set new ones (POST the follow again).", { status: 502, details });
  if (status === 429) return new AppError("hash_exchange.rate_limited", "The exchange is rate limiting this follow; the sync waits as long as it asked.", { status: 502, details, retryable: true });
  if (status === null || status >= 500 || status === 408) return new AppError("hash_exchange.unavailable", "The exchange did not answer, or failed; the sync tries again with backoff.", { status: 502, details, retryable: true });
  return new AppError("hash_exchange.request_refused", `The exchange refused the request (HTTP ${status}); check the follow's base URL and filters.`, { status: 502, details });
}

export function badResponse(what: string): AppError {
  return new AppError("hash_exchange.bad_response", `The exchange's answer is not what its API documents (${what}).`, { status: 502, details: { status: 200, retryAfter: null } satisfies ExchangeFailureDetails, retryable: true });
}

/** Seconds in a Retry-After header (delta seconds or an HTTP date), or null. */
export function retryAfterOf(value: string | null, now = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d{1,7}$/u.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}

/** Whether `url` may be fetched for a follow whose base URL is `baseUrl`: same origin, egress allowed. */
export function assertExchangeUrl(env: Env, baseUrl: string, url: URL): void {
  const base = new URL(baseUrl);
  if (url.origin !== base.origin) throw badResponse("a next link to another origin");
  if (egressRefusal(url, { allowLocal: allowLocalEgress(env) }))
    throw new AppError("hash_exchange.base_url_not_allowed", "The follow's base URL is not one the platform may reach; set another.", { status: 422, details: { status: null, retryAfter: null } });
}

/** One request to the exchange; the answer's body as text when it is 2xx, an AppError otherwise. */
export async function exchangeRequest(env: Env, baseUrl: string, url: URL, init: { method?: string; headers?: Record<string, string>; body?: string; authFailure?: (status: number, body: string) => boolean } = {}): Promise<string> {
  assertExchangeUrl(env, baseUrl, url);
  let response: Response;
  try {
    response = await fetch(url, { method: init.method ?? "GET", headers: { "user-agent": "SafestTools-HashExchange/1", ...init.headers }, body: init.body, redirect: "manual", signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch {
    throw exchangeFailure(null);
  }
  if (response.status < 200 || response.status > 299) {
    // An exchange that says "bad credentials" with another status (the Graph API's 400
    // OAuthException) is told apart by its own rule, over the first few kilobytes of the answer.
    if (init.authFailure && response.status === 400 && init.authFailure(response.status, (await response.text()).slice(0, 4096))) throw exchangeFailure(401);
    await response.body?.cancel();
    throw exchangeFailure(response.status, response.status === 429 ? retryAfterOf(response.headers.get("retry-after")) : null);
  }
  const length = Number(response.headers.get("content-length") ?? "0");
  if (length > MAX_BODY_BYTES) {
    await response.body?.cancel();
    throw badResponse("a page larger than 16 MiB");
  }
  return readLimited(response, MAX_BODY_BYTES);
}

/**
 * The response's body as text, read through a byte count that cancels the stream as soon as it
 * passes `max` bytes (an answer without a content-length, or one that lies, is never held whole).
 */
export async function readLimited(response: Response, max: number): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let bytes = 0;
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > max) {
        await reader.cancel();
        throw badResponse(`a page larger than ${max} bytes`);
      }
      text += decoder.decode(value, { stream: true });
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    // The answer broke off while it was read: as if none came.
    throw exchangeFailure(null);
  }
  return text + decoder.decode();
}

export function parseJson(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    if (value && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // falls through to the typed error
  }
  throw badResponse("not a JSON object");
}
