// NCMEC's hash sharing API (v2, XML) as a peer Worker for tests (host ncmec.test, base path
// /hashsharing), speaking what NCMEC documents and python-threatexchange reads:
// - GET /hashsharing/v2/entries?from=&to= (HTTP Basic) → <queryResult xmlns=…/hashsharing/v2>
//   with <images count maxTimestamp> of <image> (member, timestamp, id, classification,
//   fingerprints: md5, sha1, pdq) and <deletedImage> (member, id, timestamp), <videos> likewise
//   (video entries carry md5 only), and <paging><next> — the next page's path, relative to the base,
//   with from, to, start (1-based), size and max, its ampersands escaped — while pages are left.
//   Entries changed in [from, to] (seconds, inclusive).
// - GET /hashsharing/v2/status → <status> with the member.
// - PUT /hashsharing/v2/entries/<member>/<id>/<fingerprint type>/feedback with a
//   <feedbackSubmission> holding <affirmative/> (or <negative> with reasonIds) → <submissionResult>;
//   404 for an entry it does not hold, 400 for a body that is not a feedbackSubmission.
// - Wrong or no credentials: 401 with a WWW-Authenticate challenge.
// Test controls: exchange-state.ts (key = the username; setup takes username and password; an
// entry of type "video" is a video).
import { changedSince, control, plannedFailure, tenantBy } from "./exchange-state";

const NS = "https://hashsharing.ncmec.org/hashsharing/v2";
const iso = (seconds: number) => new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/u, "Z");
const xmlText = (text: string) => text.replace(/&/gu, "&amp;").replace(/</gu, "&lt;").replace(/>/gu, "&gt;");
const xml = (body: string) => new Response(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n${body}`, { headers: { "content-type": "application/xml" } });

export default {
  async fetch(request: Request): Promise<Response> {
    const controlled = await control(request);
    if (controlled) return controlled;
    const url = new URL(request.url);
    const [user, password] = atob((request.headers.get("authorization") ?? "").replace(/^Basic /u, "")).split(":");
    const tenant = tenantBy((c) => c.username === user && c.password === password);
    if (!tenant) return new Response("Unauthorized", { status: 401, headers: { "www-authenticate": 'Basic realm="hashsharing"' } });
    if (url.pathname === "/hashsharing/v2/status") return xml(`<status xmlns="${NS}"><ipAddress>127.0.0.1</ipAddress><username>${xmlText(user!)}</username><member id="7">Test ESP</member></status>`);
    const feedback = /^\/hashsharing\/v2\/entries\/([^/]+)\/([^/]+)\/([A-Z_]+)\/feedback$/u.exec(url.pathname);
    if (request.method === "PUT" && feedback) {
      const [, member, id, type] = feedback.map((part) => decodeURIComponent(part));
      const known = tenant.entries.get(id!);
      if (member !== "42" || !known || known.deleted) return new Response("Entry not found", { status: 404 });
      const body = await request.text();
      const vote = /<feedbackSubmission[^>]*>\s*<(affirmative|negative)\b/u.exec(body)?.[1];
      if (!vote) return new Response("Not a feedbackSubmission", { status: 400 });
      tenant.contributions.push({ member, id, type, vote });
      return xml(`<submissionResult xmlns="${NS}"/>`);
    }
    if (url.pathname !== "/hashsharing/v2/entries") return new Response("Not found", { status: 404 });
    const from = Date.parse(url.searchParams.get("from") ?? "");
    const to = Date.parse(url.searchParams.get("to") ?? "");
    if (Number.isNaN(from) || Number.isNaN(to)) return new Response("from and to are required", { status: 400 });
    const size = Math.min(Number(url.searchParams.get("size") ?? "1000"), tenant.pageSize);
    const start = Number(url.searchParams.get("start") ?? "1");
    const page = Math.floor((start - 1) / size) + 1;
    const failed = plannedFailure(tenant, page);
    if (failed) return failed;
    const all = changedSince(tenant, Math.floor(from / 1000), Math.floor(to / 1000));
    const slice = all.slice(start - 1, start - 1 + size);
    tenant.requests.push({ method: "GET", page, status: 200 });
    const entry = (e: (typeof all)[number], kind: "image" | "video") =>
      e.deleted
        ? `<deleted${kind === "image" ? "Image" : "Video"}><member id="42">Example Member</member><id>${xmlText(e.id)}</id><timestamp>${iso(e.updated)}</timestamp></deleted${kind === "image" ? "Image" : "Video"}>`
        : `<${kind}><member id="42">Example Member</member><timestamp>${iso(e.updated)}</timestamp><id>${xmlText(e.id)}</id>${e.tags[0] ? `<classification>${xmlText(e.tags[0])}</classification>` : ""}<fingerprints><md5>${"ab".repeat(16)}</md5>${kind === "image" ? `<pdq>${e.hash}</pdq>` : ""}</fingerprints><feedback /></${kind}>`;
    const group = (kind: "image" | "video") => {
      const entries = slice.filter((e) => (e.type === "video" ? "video" : "image") === kind);
      if (entries.length === 0) return "";
      const max = Math.max(...entries.map((e) => e.updated));
      return `<${kind}s count="${entries.length}" maxTimestamp="${iso(max)}">${entries.map((e) => entry(e, kind)).join("")}</${kind}s>`;
    };
    const nextStart = start + size;
    const next =
      nextStart <= all.length
        ? `<paging><next>${xmlText(`/v2/entries?from=${encodeURIComponent(url.searchParams.get("from")!)}&to=${encodeURIComponent(url.searchParams.get("to")!)}&start=${nextStart}&size=${size}&max=${nextStart + size - 1}`)}</next></paging>`
        : "";
    return xml(`<queryResult xmlns="${NS}">${group("image")}${group("video")}${next}</queryResult>`);
  },
};
