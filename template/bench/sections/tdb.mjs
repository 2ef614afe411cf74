// Section "tdb": submission of 10,000 restricting decisions' statements of reasons to a DSA
// Transparency Database peer (an http server on 127.0.0.1 in this process speaking the API's two
// calls: POST /api/v1/statements, 1–100 per call, 201 with a uuid each, a held puid a 422
// existing_puids; GET /api/v1/statement/existing-puid/:puid, 302/404), through POST
// /api/v1/transparency-database/submit (up to 5 batches of 100 per call, the code the scheduled
// sweep runs) until none is pending: statements/s, and every decision stored once. Decisions and
// their pending submission rows are seeded by SQL (/bench/tdb-seed), as the decision hook writes them.
import { createServer } from "node:http";
import { log, results, round } from "./lib.mjs";

const TDB_DECISIONS = 10_000;

function startPeer() {
  const held = new Set();
  let posts = 0;
  let duplicates = 0;
  const server = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const send = (status, body) => {
        response.writeHead(status, { "content-type": "application/json" });
        response.end(JSON.stringify(body));
      };
      if (!/^Bearer tdb-/u.test(request.headers.authorization ?? "")) return send(401, { message: "Unauthenticated." });
      const existing = /^\/api\/v1\/statement\/existing-puid\/(.+)$/u.exec(request.url ?? "");
      if (request.method === "GET" && existing) return send(held.has(decodeURIComponent(existing[1])) ? 302 : 404, { puid: existing[1] });
      if (request.method !== "POST" || request.url !== "/api/v1/statements") return send(404, { message: "Not Found" });
      const statements = JSON.parse(Buffer.concat(chunks).toString("utf8")).statements ?? [];
      posts++;
      if (statements.length < 1 || statements.length > 100) return send(422, { errors: { statements: ["1 to 100 statements."] } });
      const there = statements.map((s) => s.puid).filter((puid) => held.has(puid));
      if (there.length) {
        duplicates += there.length;
        return send(422, { errors: { puid: ["not unique"], existing_puids: there } });
      }
      const created = statements.map((s) => {
        held.add(s.puid);
        const uuid = crypto.randomUUID();
        return { ...s, uuid, permalink: `http://127.0.0.1/statement/${uuid}` };
      });
      return send(201, { statements: created });
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${server.address().port}`, held, stats: () => ({ posts, duplicates }), close: () => new Promise((done) => server.close(done)) }));
  });
}

export async function sectionTdb(api, adminToken) {
  const peer = await startPeer();
  try {
    const installation = await api("/api/v1/installations", { body: { name: "bench-tdb" }, key: adminToken });
    const key = installation.apiKey;
    const seeded = await api("/bench/tdb-seed", { body: { installationId: installation.id, from: 0, count: TDB_DECISIONS }, key: adminToken });
    if (seeded.submissions !== TDB_DECISIONS) throw new Error(`tdb seed: ${seeded.submissions} submissions, expected ${TDB_DECISIONS}`);
    await api("/api/v1/transparency-database/settings", { method: "PUT", body: { baseUrl: peer.url, token: `tdb-bench-${Date.now()}`, enabled: true }, key });
    log(`tdb: submitting ${TDB_DECISIONS} statements of reasons`);
    const began = Date.now();
    let calls = 0;
    let submitted = 0;
    for (;;) {
      const summary = await api("/api/v1/transparency-database/submit", { method: "POST", key });
      calls++;
      submitted += summary.submitted;
      if (summary.failedCalls > 0) throw new Error(`tdb: a call to the peer failed: ${JSON.stringify(summary)}`);
      if (summary.batches === 0 || calls > 100) break;
    }
    const ms = Date.now() - began;
    const settings = await api("/api/v1/transparency-database/settings", { key });
    Object.assign(results, {
      tdbDecisions: TDB_DECISIONS,
      tdbSubmitted: settings.submissions.submitted,
      tdbPending: settings.submissions.pending,
      tdbStoredByPeer: peer.held.size,
      tdbPeerPosts: peer.stats().posts,
      tdbDuplicatesSent: peer.stats().duplicates,
      tdbMs: ms,
      // The schedule (local cron) may submit some of them meanwhile: the rate counts every submitted statement.
      tdbStatementsPerSecond: round((settings.submissions.submitted / ms) * 1000, 0),
      tdbSubmittedBySubmitCalls: submitted,
      tdbSubmitCalls: calls,
    });
    log(`tdb: ${submitted} statements in ${ms} ms (${results.tdbStatementsPerSecond}/s)`);
  } finally {
    await peer.close();
  }
}

export function tdbLines() {
  if (results.tdbMs === undefined) return [];
  return [
    `transparency db:  ${results.tdbStatementsPerSecond} statements/s — ${results.tdbSubmitted} of ${results.tdbDecisions} decisions submitted in ${results.tdbPeerPosts} batches (peer stored ${results.tdbStoredByPeer}, duplicates sent ${results.tdbDuplicatesSent}) in ${results.tdbMs} ms over ${results.tdbSubmitCalls} submit calls of up to 5 batches; ${results.tdbPending} left pending`,
  ];
}
