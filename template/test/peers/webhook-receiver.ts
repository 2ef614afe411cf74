// A product's webhook receiver, as a separate Worker for tests: it verifies every delivery with the
// standardwebhooks library and behaves per path: /ok/*, /flaky/*?failures=N (fails the first N
// attempts of each webhook-id), /down/* (always 503). The test reads what arrived at /_control/log.
import { Webhook } from "standardwebhooks";

interface Received {
  path: string;
  webhookId: string;
  type: string | null;
  data: unknown;
  verified: boolean;
  status: number;
}

const secrets = new Map<string, string>();
const attempts = new Map<string, number>();
const log: Received[] = [];

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/_control/secret") {
      const { path, secret } = (await request.json()) as { path: string; secret: string };
      secrets.set(path, secret);
      return new Response("ok");
    }
    if (url.pathname === "/_control/log") {
      const path = url.searchParams.get("path");
      return Response.json(log.filter((entry) => path === null || entry.path === path));
    }
    const body = await request.text();
    const headers = Object.fromEntries(request.headers);
    const secret = secrets.get(url.pathname);
    let payload: { type?: string; data?: unknown } | null = null;
    let verified = false;
    try {
      payload = secret ? (new Webhook(secret).verify(body, headers) as { type?: string; data?: unknown }) : null;
      verified = payload !== null;
    } catch {
      verified = false;
    }
    const webhookId = headers["webhook-id"] ?? "";
    const seen = (attempts.get(webhookId) ?? 0) + 1;
    attempts.set(webhookId, seen);
    let status = verified ? 200 : 401;
    if (verified && url.pathname.startsWith("/down/")) status = 503;
    if (verified && url.pathname.startsWith("/flaky/") && seen <= Number(url.searchParams.get("failures") ?? 3)) status = 500;
    log.push({ path: url.pathname, webhookId, type: payload?.type ?? null, data: payload?.data ?? null, verified, status });
    return new Response(status === 200 ? "accepted" : "no", { status });
  },
};
