// The webhook transport: one signed request (Standard Webhooks) for one attempt of one delivery.
// attemptDelivery (webhooks.ts) claims, gates and records the attempt around it; another transport
// (e.g. a Mastodon connector) is another function of the same shape beside this one.
import { Webhook } from "standardwebhooks";
import { openPersonalData } from "../cases";

/** `retry-after` as seconds: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); anything else is ignored. */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d{1,10}$/u.test(text)) return Number(text);
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.max(0, (date - now) / 1000);
}

/** What the attempt needs of an endpoint. */
export interface AttemptEndpoint {
  id: string;
  url: string;
  secretSealed: string;
  retryBaseSeconds: number;
  maxAttempts: number;
  state: string;
}

/** What one request to the receiver came to. */
export interface AttemptResult {
  status: number | null;
  error: string | null;
  retryAfter: number | null;
}

// Signers opened in this isolate, by installation, endpoint and sealed secret: a sealed secret is
// immutable (a new secret is a new sealed text), so opening and decoding it once per isolate is
// enough. The secret itself stays inside the signer; it is never logged.
const signers = new Map<string, Promise<Webhook>>();
const SIGNER_CACHE_LIMIT = 1_000;

function signerOf(env: Env, installationId: string, endpoint: AttemptEndpoint): Promise<Webhook> {
  const cacheKey = `${installationId}:${endpoint.id}:${endpoint.secretSealed}`;
  let signer = signers.get(cacheKey);
  if (!signer) {
    signer = openPersonalData<{ secret: string }>(env, installationId, `webhook_endpoint:${endpoint.id}`, endpoint.secretSealed).then(({ secret }) => new Webhook(secret));
    signer.catch(() => signers.delete(cacheKey));
    if (signers.size >= SIGNER_CACHE_LIMIT) signers.delete(signers.keys().next().value!);
    signers.set(cacheKey, signer);
  }
  return signer;
}

/**
 * The transport: one signed request for one attempt of one delivery (Standard Webhooks:
 * `webhook-id` is the delivery id, the same across retries), with a timeout. It opens the
 * endpoint's secret and the sealed payload only here (or takes the payload's text from the host
 * that sealed it a moment ago, `body`), and says what the receiver answered; the caller records
 * it. Another transport (e.g. a Mastodon connector) is another function of this shape.
 */
export async function sendWebhookAttempt(env: Env, endpoint: AttemptEndpoint, delivery: { id: string; installationId: string; payloadSealed: string; body?: string }, input: { started: number; timeoutMs: number }): Promise<AttemptResult> {
  try {
    const [webhook, body] = await Promise.all([
      signerOf(env, delivery.installationId, endpoint),
      delivery.body ?? openPersonalData<unknown>(env, delivery.installationId, `webhook_delivery:${delivery.id}`, delivery.payloadSealed).then((payload) => JSON.stringify(payload)),
    ]);
    const signature = webhook.sign(delivery.id, new Date(input.started), body);
    const response = await fetch(endpoint.url, {
      method: "POST",
      redirect: "manual",
      signal: AbortSignal.timeout(input.timeoutMs),
      headers: {
        "content-type": "application/json",
        "user-agent": "SafestTools-Webhooks/1",
        "webhook-id": delivery.id,
        "webhook-timestamp": String(Math.floor(input.started / 1000)),
        "webhook-signature": signature,
      },
      body,
    });
    const retryAfter = parseRetryAfter(response.headers.get("retry-after"), Date.now());
    await response.body?.cancel();
    return { status: response.status, error: null, retryAfter };
  } catch (failure) {
    return { status: null, error: failure instanceof Error && failure.name === "TimeoutError" ? "timeout" : "network_error", retryAfter: null };
  }
}
