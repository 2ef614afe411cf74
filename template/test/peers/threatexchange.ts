// ThreatExchange's Graph API as a peer Worker for tests (host threatexchange.test, any /vN.N
// version prefix), speaking what Meta documents and python-threatexchange reads:
// - GET /<privacy_group>/threat_updates/?access_token=&start_time=&limit=&types=&fields=
//   → { data: [{ id, indicator, type, last_updated, should_delete, descriptors: { data: [{ id,
//   tags: { data: [{ id, text }] }, status, owner: { id }, added_on }] } }], paging: { cursors,
//   next } }: records changed at or after start_time, in change order, `limit` (or the tenant's
//   page size) a page; `next` is the full URL of the next page, access_token included, as the
//   Graph API sends it. A withdrawn indicator is a tombstone: should_delete true, no descriptors.
// - POST /threat_descriptors?access_token= (form: indicator, type, description, share_level,
//   status, privacy_type, privacy_members, tags?) → { success: true, id }.
// - POST /<descriptor_id>?access_token= (form: reactions, e.g. SAW_THIS_TOO) → { success: true }.
// - An unknown access token is a 400 OAuthException (code 190), as the Graph API answers one; a
//   privacy group the token is not in is a 400 (code 100).
// Test controls: exchange-state.ts (key = the access token; setup takes privacyGroup).
import { changedSince, control, plannedFailure, tenantBy } from "./exchange-state";

const oauthError = (code: number, message: string) => Response.json({ error: { message, type: "OAuthException", code } }, { status: 400 });

export default {
  async fetch(request: Request): Promise<Response> {
    const controlled = await control(request);
    if (controlled) return controlled;
    const url = new URL(request.url);
    const path = url.pathname.replace(/^\/v\d+\.\d+/u, "");
    const token = url.searchParams.get("access_token") ?? "";
    const tenant = tenantBy((c) => c.accessToken === token);
    if (!tenant) return oauthError(190, "Invalid OAuth access token.");
    const updates = /^\/([^/]+)\/threat_updates\/?$/u.exec(path);
    if (request.method === "GET" && updates) {
      if (updates[1] !== tenant.credentials.privacyGroup) return oauthError(100, "Unsupported get request. Object does not exist or cannot be loaded due to missing permissions.");
      const size = Math.min(Number(url.searchParams.get("limit") ?? "500"), tenant.pageSize);
      const offset = Number(atob(url.searchParams.get("after") ?? btoa("0")));
      const page = offset / size + 1;
      const failed = plannedFailure(tenant, page);
      if (failed) return failed;
      const types = url.searchParams.get("types")?.split(",");
      const all = changedSince(tenant, Number(url.searchParams.get("start_time") ?? "0")).filter((e) => !types || types.includes(e.type === "pdq" ? "HASH_PDQ" : e.type));
      const slice = all.slice(offset, offset + size);
      tenant.requests.push({ method: "GET", page, status: 200 });
      const data = slice.map((e) => ({
        id: e.id,
        indicator: e.hash,
        type: e.type === "pdq" ? "HASH_PDQ" : e.type,
        last_updated: e.updated,
        should_delete: e.deleted,
        ...(e.deleted ? {} : { descriptors: { data: [{ id: `7${e.id}`, tags: { data: e.tags.map((text, i) => ({ id: `t${i}`, text })) }, status: "MALICIOUS", owner: { id: "1001" }, added_on: new Date(e.updated * 1000).toISOString() }] } }),
      }));
      const paging: Record<string, unknown> = { cursors: { before: btoa(String(offset)), after: btoa(String(offset + slice.length)) } };
      if (offset + size < all.length) {
        const next = new URL(url);
        next.searchParams.set("after", btoa(String(offset + size)));
        paging.next = next.toString();
      }
      return Response.json({ data, paging });
    }
    if (request.method === "POST" && /^\/threat_descriptors\/?$/u.test(path)) {
      const form = new URLSearchParams(new TextDecoder().decode(await request.arrayBuffer()));
      const required = ["indicator", "type", "description", "share_level", "status", "privacy_type", "privacy_members"];
      const missing = required.filter((k) => !form.get(k));
      if (missing.length) return oauthError(100, `Missing fields ${missing.join(",")}`);
      if (form.get("privacy_members") !== tenant.credentials.privacyGroup) return oauthError(100, "Not a member of that privacy group.");
      const id = String(9_000_000 + tenant.contributions.length);
      tenant.contributions.push({ id, ...Object.fromEntries(form) });
      return Response.json({ success: true, id });
    }
    const descriptor = /^\/(\d+)\/?$/u.exec(path);
    if (request.method === "POST" && descriptor) {
      const form = new URLSearchParams(new TextDecoder().decode(await request.arrayBuffer()));
      const known = [...tenant.entries.values()].find((e) => `7${e.id}` === descriptor[1] && !e.deleted);
      if (!known) return oauthError(100, "Unsupported post request. Object does not exist.");
      if (!form.get("reactions") && !form.get("reactions_to_remove")) return oauthError(100, "Nothing to change.");
      tenant.contributions.push({ descriptor: descriptor[1], reactions: form.get("reactions") });
      return Response.json({ success: true });
    }
    return oauthError(100, "Unknown path.");
  },
};
