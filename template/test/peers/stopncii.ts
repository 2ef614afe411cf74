// StopNCII.org's hash API as a peer Worker for tests (host stopncii.test, base path /v1),
// speaking what python-threatexchange's stopncii/api.py sends and reads:
// - GET /v1/FetchHashes?startTimestamp=&pageSize=&nextPageToken= with `Ocp-Apim-Subscription-Key`
//   and the FetchHashes `x-functions-key` → { count, hashRecords: [{ lastModtimestamp, signalType,
//   hashValue, hashStatus (Active, or Withdrawn once withdrawn), caseNumbers, CSPFeedbacks }],
//   nextPageToken, nextSetTimestamp, hasMoreRecords }: records changed at or after startTimestamp.
// - POST /v1/SubmitFeedback with the SubmitFeedback function key and { count, hashFeedbacks:
//   [{ hashValue, feedbackValue, tags }] } → {}.
// - A wrong subscription key is a 401 (Azure API Management's answer); a wrong function key a 401.
// Test controls: exchange-state.ts (key = the subscription key; setup takes subscriptionKey,
// fetchFunctionKey and feedbackFunctionKey; an entry's type "md5" is a VideoMD5 record).
import { changedSince, control, plannedFailure, plannedHold, tenantBy } from "./exchange-state";

const denied = () => Response.json({ statusCode: 401, message: "Access denied due to invalid subscription key. Make sure to provide a valid key for an active subscription." }, { status: 401 });

export default {
  async fetch(request: Request): Promise<Response> {
    const controlled = await control(request);
    if (controlled) return controlled;
    const url = new URL(request.url);
    const tenant = tenantBy((c) => c.subscriptionKey === request.headers.get("ocp-apim-subscription-key"));
    if (!tenant) return denied();
    const functionKey = request.headers.get("x-functions-key");
    if (request.method === "GET" && url.pathname === "/v1/FetchHashes") {
      if (functionKey !== tenant.credentials.fetchFunctionKey) return denied();
      const size = tenant.overPage ?? Math.min(Number(url.searchParams.get("pageSize") ?? "800"), tenant.pageSize);
      const offset = Number(atob(url.searchParams.get("nextPageToken") ?? btoa("0")));
      const page = offset / size + 1;
      await plannedHold(tenant, page);
      const failed = plannedFailure(tenant, page);
      if (failed) return failed;
      const all = changedSince(tenant, Number(url.searchParams.get("startTimestamp") ?? "10"));
      const slice = all.slice(offset, offset + size);
      tenant.requests.push({ method: "GET", page, status: 200 });
      const more = offset + size < all.length;
      return Response.json({
        count: slice.length,
        hashRecords: slice.map((e) => ({
          lastModtimestamp: e.updated,
          signalType: e.type === "md5" ? "VideoMD5" : "ImagePDQ",
          hashValue: e.hash,
          hashStatus: e.deleted ? "Withdrawn" : "Active",
          caseNumbers: { [`case-${e.id}`]: e.deleted ? "Withdrawn" : "Active" },
          CSPFeedbacks: [],
        })),
        nextPageToken: more ? btoa(String(offset + size)) : "",
        nextSetTimestamp: all.length ? Math.max(...all.map((e) => e.updated)) : Number(url.searchParams.get("startTimestamp") ?? "10"),
        hasMoreRecords: more,
      });
    }
    if (request.method === "POST" && url.pathname === "/v1/SubmitFeedback") {
      if (!tenant.credentials.feedbackFunctionKey || functionKey !== tenant.credentials.feedbackFunctionKey) return denied();
      const body = (await request.json()) as { count?: number; hashFeedbacks?: { hashValue?: string; feedbackValue?: string; tags?: string[] }[] };
      if (!Array.isArray(body.hashFeedbacks) || body.count !== body.hashFeedbacks.length || body.hashFeedbacks.some((f) => !f.hashValue || !f.feedbackValue)) return Response.json({ message: "Invalid feedback" }, { status: 400 });
      tenant.contributions.push(...body.hashFeedbacks);
      return Response.json({});
    }
    return Response.json({ message: "Resource not found" }, { status: 404 });
  },
};
