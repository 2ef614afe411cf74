// A product's webhook receiver, as a separate Worker for tests: it verifies every delivery with the
// standardwebhooks library and behaves per path: /ok/*, /flaky/*?failures=N (fails the first N
// attempts of each webhook-id), /down/* (always 503), /gone/* (410: stop sending), /throttle/*?
// retryAfter=S&times=N (429 with `retry-after: S` for the first N attempts; &date=1 sends it as an
// HTTP-date), /hang/*?times=N (never answers the first N attempts; the sender must time out).
// The test reads what arrived at /_control/log (`at`: when, in ms since the epoch).
import { Webhook } from "standardwebhooks";

interface Received {
  path: string;
  webhookId: string;
  type: string | null;
  data: unknown;
  verified: boolean;
  status: number | "hung";
  at: number;
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
    const times = Number(url.searchParams.get("times") ?? 1);
    const entry: Received = { path: url.pathname, webhookId, type: payload?.type ?? null, data: payload?.data ?? null, verified, status: verified ? 200 : 401, at: Date.now() };
    log.push(entry);
    if (verified && url.pathname.startsWith("/hang/") && seen <= times) {
      entry.status = "hung";
      await new Promise((resolve) => setTimeout(resolve, 120_000)); // the sender aborts long before
      return new Response("too late", { status: 200 });
    }
    const headers_: Record<string, string> = {};
    if (verified && url.pathname.startsWith("/down/")) entry.status = 503;
    if (verified && url.pathname.startsWith("/flaky/") && seen <= Number(url.searchParams.get("failures") ?? 3)) entry.status = 500;
    if (verified && url.pathname.startsWith("/gone/")) entry.status = 410;
    if (verified && url.pathname.startsWith("/throttle/") && seen <= times) {
      entry.status = 429;
      const seconds = Number(url.searchParams.get("retryAfter") ?? 2);
      headers_["retry-after"] = url.searchParams.get("date") === "1" ? new Date(Date.now() + seconds * 1000).toUTCString() : String(seconds);
    }
    return new Response(entry.status === 200 ? "accepted" : "no", { status: entry.status as number, headers: headers_ });
  },
};
