// What the three hash exchange peers (threatexchange.ts, ncmec-hashes.ts, stopncii.ts) share: each
// test registers a tenant by its credentials and then drives the tenant's entries and failures
// through test control endpoints. Each peer bundles its own copy (its own memory).
//   POST /_control/setup   { key, ...credentials, pageSize?, overPage? }  a tenant (replaces one of that key);
//                          overPage: pages of that many entries whatever size was asked (StopNCII)
//   POST /_control/upsert  { key, entries: [{ id, hash, tags?, type? }] }   add or update entries
//   POST /_control/delete  { key, ids: [...] }                      withdraw entries (tombstones)
//   POST /_control/fail    { key, page, status, retryAfter?, times? }  the next request for that page
//                          (1-based in a pass) answers `status` (with Retry-After when given)
//   POST /_control/hold    { key, page }   the next request for that page waits until released (StopNCII)
//   POST /_control/release { key }         answers the held request
//   GET  /_control/log?key=  { requests: [{ method, page, status }], contributions: [...], waiting }

export interface PeerEntry {
  id: string;
  hash: string;
  tags: string[];
  type: string;
  deleted: boolean;
  /** Unix seconds of the last change (the exchanges filter on it). */
  updated: number;
  seq: number;
}

export interface Tenant {
  credentials: Record<string, string>;
  pageSize: number;
  overPage?: number;
  entries: Map<string, PeerEntry>;
  hold?: { page: number; release?: () => void; released: Promise<void> };
  /** Requests waiting on a hold. */
  waiting: number;
  failures: { page: number; status: number; retryAfter?: number; times: number }[];
  requests: { method: string; page: number; status: number }[];
  contributions: unknown[];
}

export const tenants = new Map<string, Tenant>();
let seq = 0;

/** The tenant's entries changed at or after `since` (and, when given, at or before `until`), in change order. */
export function changedSince(tenant: Tenant, since: number, until = Number.POSITIVE_INFINITY): PeerEntry[] {
  return [...tenant.entries.values()].filter((e) => e.updated >= since && e.updated <= until).sort((a, b) => a.updated - b.updated || a.seq - b.seq);
}

/** A failure planned for this page, consumed; or null. */
export function plannedFailure(tenant: Tenant, page: number): Response | null {
  const planned = tenant.failures.find((f) => f.page === page && f.times > 0);
  if (!planned) return null;
  planned.times -= 1;
  tenant.requests.push({ method: "GET", page, status: planned.status });
  return Response.json({ error: { message: "planned failure" } }, { status: planned.status, headers: planned.retryAfter === undefined ? {} : { "retry-after": String(planned.retryAfter) } });
}

/** Waits while a hold is set for this page (consumed once released). */
export async function plannedHold(tenant: Tenant, page: number): Promise<void> {
  const hold = tenant.hold;
  if (!hold || hold.page !== page) return;
  tenant.waiting += 1;
  await hold.released;
  tenant.waiting -= 1;
  tenant.hold = undefined;
}

/** Answers a /_control/ request, or null when the path is not one. */
export async function control(request: Request): Promise<Response | null> {
  const url = new URL(request.url);
  if (!url.pathname.startsWith("/_control/")) return null;
  if (url.pathname === "/_control/log") {
    const tenant = tenants.get(url.searchParams.get("key") ?? "");
    return Response.json(tenant ? { requests: tenant.requests, contributions: tenant.contributions, waiting: tenant.waiting } : { requests: [], contributions: [], waiting: 0 });
  }
  const body = (await request.json()) as Record<string, any>;
  const key = String(body.key ?? "");
  if (url.pathname === "/_control/setup") {
    const { key: _key, pageSize, overPage, ...credentials } = body;
    tenants.set(key, { credentials, pageSize: pageSize ?? 2, ...(overPage ? { overPage } : {}), entries: new Map(), failures: [], requests: [], contributions: [], waiting: 0 });
    return Response.json({ ok: true });
  }
  const tenant = tenants.get(key);
  if (!tenant) return Response.json({ error: "no such tenant" }, { status: 404 });
  const now = Math.floor(Date.now() / 1000);
  if (url.pathname === "/_control/upsert") {
    for (const e of body.entries as { id: string; hash: string; tags?: string[]; type?: string }[]) {
      seq += 1;
      tenant.entries.set(e.id, { id: e.id, hash: e.hash, tags: e.tags ?? [], type: e.type ?? "pdq", deleted: false, updated: now, seq });
    }
    return Response.json({ ok: true });
  }
  if (url.pathname === "/_control/delete") {
    for (const id of body.ids as string[]) {
      const known = tenant.entries.get(id);
      if (!known) continue;
      seq += 1;
      tenant.entries.set(id, { ...known, deleted: true, updated: now, seq });
    }
    return Response.json({ ok: true });
  }
  if (url.pathname === "/_control/hold") {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    tenant.hold = { page: body.page, release, released };
    return Response.json({ ok: true });
  }
  if (url.pathname === "/_control/release") {
    tenant.hold?.release?.();
    return Response.json({ ok: true });
  }
  if (url.pathname === "/_control/fail") {
    tenant.failures.push({ page: body.page, status: body.status, ...(body.retryAfter === undefined ? {} : { retryAfter: body.retryAfter }), times: body.times ?? 1 });
    return Response.json({ ok: true });
  }
  return Response.json({ error: "unknown control" }, { status: 404 });
}

/** The tenant whose credentials these are (every field equal), or null. */
export function tenantBy(match: (credentials: Record<string, string>) => boolean): Tenant | null {
  for (const tenant of tenants.values()) if (match(tenant.credentials)) return tenant;
  return null;
}
