// Hole: a Transparency Database batch could outlive its claim. The lease was computed from the
// sweep's start time, so a batch that began late in a long sweep held a lease that had already
// lapsed; another sweep then claimed the same rows while the first batch's POST was still in
// flight, and both sent them. A batch's lease runs from when it claims, is renewed before every
// request, and only rows it still holds are sent and written.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { runSchedule, SWEEPS } from "../src/schedule";
import { api, newInstallation, until } from "./helpers";

const SWEEP = SWEEPS.filter((sweep) => sweep.name === "enforcement.transparency_db");
const peerLog = async (token: string) => (await (await env.TDB_PEER.fetch(`http://tdb/_control/log?token=${token}`)).json()) as Array<{ path: string; puids: string[]; status: number }>;
const peerStore = async (token: string) => (await (await env.TDB_PEER.fetch(`http://tdb/_control/statements?token=${token}`)).json()) as { statements: unknown[]; received: Record<string, number> };

describe("Transparency Database claim lease", () => {
  it("a batch that started late in a long sweep keeps its rows: a second sweep does not send them while its POST is in flight", async () => {
    const { id: installationId, apiKey } = await newInstallation("holes-tdb-lease");
    const token = `tdb-${crypto.randomUUID()}`;
    expect((await api("/api/v1/transparency-database/settings", { method: "PUT", key: apiKey, body: { baseUrl: "https://tdb.test", token, enabled: true } })).status).toBe(200);
    const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID().slice(0, 8)}` }, category: "scams_and_fraud" } });
    const decisionIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const decision = await api("/api/v1/decisions", { key: apiKey, body: { reportId: report.body.id, outcome: "removed_scam", restrictions: { visibility: ["content_removed"] }, statement: `Scam advert ${i}.` } });
      expect(decision.status).toBe(201);
      decisionIds.push(decision.body.id);
    }
    await env.TDB_PEER.fetch("http://tdb/_control/plan", { method: "POST", body: JSON.stringify({ token, plan: [{ hold: token }] }) });

    // Sweep A's run began 20 minutes ago (a long run over many installations); its batch for this
    // installation starts now and its POST hangs at the database. (60 s timeout: the hold, not the
    // platform's abort, decides when it answers.)
    const slowEnv = { ...env, TRANSPARENCY_DB_TIMEOUT_SECONDS: "60" } as unknown as Env;
    const a = runSchedule(slowEnv, { cron: "* * * * *", scheduledTime: Date.now() - 20 * 60_000 }, SWEEP);
    await until(async () => (await peerLog(token)).some((call) => call.path === "/api/v1/statements"), "sweep A's POST reaching the database");

    // Sweep B runs now, while A's POST is in flight.
    const b = await runSchedule(env, { cron: "* * * * *", scheduledTime: Date.now() }, SWEEP);
    expect(b.sweeps[0]).toMatchObject({ ok: true });

    await env.TDB_PEER.fetch("http://tdb/_control/release", { method: "POST", body: JSON.stringify({ name: token }) });
    const done = await a;
    expect(done.sweeps[0], JSON.stringify(done)).toMatchObject({ ok: true });

    const store = await peerStore(token);
    expect(store.statements).toHaveLength(3);
    // Each statement reached the database once.
    expect(decisionIds.map((id) => store.received[id])).toEqual([1, 1, 1]);
    const posts = (await peerLog(token)).filter((call) => call.path === "/api/v1/statements");
    expect(posts.map((call) => call.status)).toEqual([201]);
    const rows = await env.DB.prepare("SELECT state, claim_id AS claimId FROM tdb_submissions WHERE installation_id = ?1").bind(installationId).all<{ state: string; claimId: string | null }>();
    expect(rows.results.map((row) => [row.state, row.claimId])).toEqual([
      ["submitted", null],
      ["submitted", null],
      ["submitted", null],
    ]);
  });
});
