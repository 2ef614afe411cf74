// The demo product: a stand-in for the product a team plugs in, served under /demo/product by
// `npm start` (DEMO_PEERS="on"). It receives the platform's Standard Webhooks on
// /demo/product/webhooks/:hook, verifies each signature with that hook's secret (registered by the
// demo seed with the admin token, as a product stores the secret it was shown once), and keeps
// what it received — verified or not — in the local R2 bucket under `demo-product/`, to show
// on its page and as JSON. Nothing here is part of the platform: it only plays the product.
import { Webhook } from "standardwebhooks";
import { AppError } from "../errors";
import { timingSafeEqual } from "../lib/crypto";

const PREFIX = "demo-product/";
const HOOK = /^[a-z0-9-]{1,40}$/u;
/** Received deliveries kept for the page; older ones are still in R2, just not listed. */
export const RECEIVED_LIMIT = 200;
const MAX_TS = 9_999_999_999_999;

export interface Received {
  hook: string;
  webhookId: string;
  receivedAt: string;
  verified: boolean;
  /** Why the signature did not verify (no secret registered, a bad signature…); null when it did. */
  problem: string | null;
  type: string | null;
  data: unknown;
}

function bucket(env: Env): R2Bucket {
  return env.WORKFLOW_ARTIFACTS;
}

function checkHook(hook: string): void {
  if (!HOOK.test(hook)) throw new AppError("demo_product.hook_invalid", "A demo product hook is 1-40 characters of a-z, 0-9 and -.", { status: 404 });
}

/** The admin token guards the secret registry (the seed holds it; a browser does not). */
export function assertAdmin(env: Env, authorization: string | undefined): void {
  const token = /^Bearer (.+)$/u.exec(authorization ?? "")?.[1];
  if (!token || !env.ADMIN_TOKEN || !timingSafeEqual(token, env.ADMIN_TOKEN)) {
    throw new AppError("demo_product.unauthorized", "Registering a demo product secret needs the admin token (Authorization: Bearer <ADMIN_TOKEN>).", { status: 401 });
  }
}

/** Stores the signing secret of a hook (the whsec_… the platform showed once). */
export async function registerSecret(env: Env, hook: string, secret: unknown): Promise<{ hook: string; registered: true }> {
  checkHook(hook);
  if (typeof secret !== "string" || !/^whsec_[A-Za-z0-9+/=]{16,200}$/u.test(secret)) {
    throw new AppError("demo_product.secret_invalid", "secret must be the endpoint's whsec_… signing secret.", { status: 422 });
  }
  await bucket(env).put(`${PREFIX}secrets/${hook}`, secret);
  return { hook, registered: true };
}

/** Whether a hook has its secret (the seed checks before it relies on the hook). */
export async function hasSecret(env: Env, hook: string): Promise<boolean> {
  checkHook(hook);
  return (await bucket(env).head(`${PREFIX}secrets/${hook}`)) !== null;
}

/** Takes one delivery: verifies it, keeps it, and answers as a product would (401 when it does not verify). */
export async function receive(env: Env, hook: string, body: string, headers: Record<string, string>): Promise<{ status: 200 | 401; received: Received }> {
  checkHook(hook);
  const secret = await (await bucket(env).get(`${PREFIX}secrets/${hook}`))?.text();
  let payload: { type?: unknown; data?: unknown } | null = null;
  let problem: string | null = null;
  if (!secret) problem = "no secret registered for this hook";
  else {
    try {
      payload = new Webhook(secret).verify(body, headers) as { type?: unknown; data?: unknown };
    } catch (error) {
      problem = `signature did not verify: ${error instanceof Error ? error.message : "invalid"}`;
    }
  }
  if (!payload) {
    // An unverified body is shown as received, never trusted: keep its type only if it parses.
    try {
      const parsed = JSON.parse(body) as { type?: unknown };
      payload = { type: parsed?.type, data: null };
    } catch {
      payload = { type: null, data: null };
    }
  }
  const now = Date.now();
  const received: Received = {
    hook,
    webhookId: headers["webhook-id"] ?? "",
    receivedAt: new Date(now).toISOString(),
    verified: problem === null,
    problem,
    type: typeof payload.type === "string" ? payload.type : null,
    data: problem === null ? (payload.data ?? null) : null,
  };
  // Newest first in key order: the key starts with the time counted down.
  const key = `${PREFIX}received/${String(MAX_TS - now).padStart(13, "0")}-${crypto.randomUUID()}`;
  await bucket(env).put(key, JSON.stringify(received), { httpMetadata: { contentType: "application/json" } });
  return { status: received.verified ? 200 : 401, received };
}

/** What the product received, newest first. */
export async function listReceived(env: Env, limit = RECEIVED_LIMIT): Promise<Received[]> {
  const listed = await bucket(env).list({ prefix: `${PREFIX}received/`, limit: Math.min(limit, 1000) });
  const items = await Promise.all(listed.objects.map(async (object) => (await (await bucket(env).get(object.key))?.json()) as Received | null));
  return items.filter((item): item is Received => item !== null);
}
