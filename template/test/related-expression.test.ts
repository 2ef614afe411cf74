// `related.count('<kind>')` in a workflow condition: the host counts, from account_signals (keyed
// hashes only), the other accounts of the installation that share a signal of that kind with the
// owner of the run's report subject, and a real run takes each branch on it. Another
// installation's accounts with the very same signals never count.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { RELATED_COUNT_CAP, relatedAccountsOfReport } from "../src/workflows/execution-context";
import { api, edge, newInstallation, publish, until, waitForRun, STEP_OUTPUT } from "./helpers";

const ringGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", config: { cases: [{ port: "ring", when: "related.count('ip') >= 2 || related.count('device') >= 3" }], case_ports: ["ring"], default_port: "alone" } },
    { id: "ring", kind: "end", config: { terminal_code: "ring" } },
    { id: "alone", kind: "end", config: { terminal_code: "alone" } },
  ],
  edges: [edge("start", "success", "route"), edge("route", "ring", "ring"), edge("route", "alone", "alone")],
};

async function installationWithRingTrigger(name: string) {
  const installation = await newInstallation(name);
  const version = await publish(installation.apiKey, ringGraph);
  expect((await api("/api/v1/triggers", { key: installation.apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
  return installation;
}

/** Files a report on a post of `owner` with its signals; answers where the run it started ended. */
async function fileAndRoute(apiKey: string, owner: string, signals: Record<string, string>) {
  const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}`, ownerId: owner, signals }, category: "scams_and_fraud" } });
  expect(report.status, JSON.stringify(report.body)).toBe(201);
  const runId = await until(async () => (await env.DB.prepare(`SELECT id FROM workflow_runs WHERE report_id = ?1`).bind(report.body.id).first<{ id: string }>())?.id, "the trigger's run");
  const run = await waitForRun(apiKey, runId);
  expect(run.state, JSON.stringify(run).slice(0, 1500)).toBe("succeeded");
  const step = await env.DB.prepare(`SELECT ${STEP_OUTPUT.json} AS json FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.run_id = ?1 AND s.node_id = 'route'`).bind(runId).first<{ json: string }>();
  return { port: (JSON.parse(step!.json) as { port: string }).port, runId };
}

describe("related.count() in a workflow condition", () => {
  it("branches on how many accounts share the subject owner's signals, counted per installation by the host", async () => {
    const ip = `198.51.100.${Math.floor(Math.random() * 200) + 1}`;
    const device = `device-${crypto.randomUUID()}`;
    const other = await installationWithRingTrigger("related-other");
    // Another installation: three accounts with the very same IP and device.
    for (let i = 0; i < 3; i++) expect((await fileAndRoute(other.apiKey, `elsewhere-${i}-${crypto.randomUUID()}`, { ip, deviceId: device })).port).toBe(i < 2 ? "alone" : "ring");

    const { apiKey } = await installationWithRingTrigger("related");
    const [a, b, c] = [`ring-a-${crypto.randomUUID()}`, `ring-b-${crypto.randomUUID()}`, `ring-c-${crypto.randomUUID()}`];
    // The first account shares nothing here, whatever the other installation holds.
    expect((await fileAndRoute(apiKey, a, { ip, deviceId: device })).port).toBe("alone");
    // One other account shares the IP: 1 < 2.
    expect((await fileAndRoute(apiKey, b, { ip })).port).toBe("alone");
    // Two others share it now: the ring branch.
    const ring = await fileAndRoute(apiKey, c, { ip: ` ${ip} ` });
    expect(ring.port).toBe("ring");
    // An account with no signal at all: every count is 0.
    expect((await fileAndRoute(apiKey, `loner-${crypto.randomUUID()}`, {})).port).toBe("alone");
    // The run holds counts, never a signal or an account id.
    const stored = await env.DB.prepare(`SELECT input_json AS input FROM workflow_runs WHERE id = ?1`).bind(ring.runId).first<{ input: string }>();
    for (const value of [ip, device, a, b, c]) expect(stored!.input).not.toContain(value);
  });

  it("refuses at publish what is not a signal count of a known kind", async () => {
    const { apiKey } = await newInstallation("related-invalid");
    const bad = (when: string) =>
      api("/api/v1/workflows", { key: apiKey, body: { name: `wf-${crypto.randomUUID()}` } }).then((wf) =>
        api(`/api/v1/workflows/${wf.body.id}/versions`, { key: apiKey, body: { graph: { ...ringGraph, nodes: ringGraph.nodes.map((n) => (n.id === "route" ? { ...n, config: { ...n.config, cases: [{ port: "ring", when }] } } : n)) } } }),
      );
    for (const when of ["related.count(3) >= 2", "related.count('ip') == 'many'", "related.total('ip') > 1", "related.count('ipv6') > 1"]) {
      const refused = await bad(when);
      expect(refused.status, when).toBe(422);
      expect(JSON.stringify(refused.body), when).toContain("expression.invalid");
    }
    expect(JSON.stringify((await bad("related.count('ipv6') > 1")).body)).toContain("takes a signal kind: ip, device, email, payment");
    expect((await bad("related.count('payment') > 0 && related.count('email') > 0")).status).toBe(201);
  });
  it("saturates a count at RELATED_COUNT_CAP (1000 reads 1000 or more) and reads it once per run", async () => {
    expect(RELATED_COUNT_CAP).toBe(1000);
    const { id: installationId, apiKey } = await newInstallation("related-cap");
    const ip = `203.0.113.${Math.floor(Math.random() * 200) + 1}`;
    const device = `device-${crypto.randomUUID()}`;
    // A spam wave: one account files the IP and device, then 1,004 more hold the same IP and 998 more the device.
    const seed = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: "seed-post", ownerId: "wave-seed", signals: { ip, deviceId: device } }, category: "scams_and_fraud" } });
    expect(seed.status).toBe(201);
    const held = await env.DB.prepare(`SELECT signal, kind, first_seen AS at FROM account_signals WHERE installation_id = ?1 ORDER BY kind`).bind(installationId).all<{ signal: string; kind: string; at: string }>();
    expect(held.results.map((row) => row.kind)).toEqual(["device", "ip"]);
    const holders = (row: { signal: string; kind: string; at: string }, count: number) =>
      env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?5)
          INSERT INTO account_signals (installation_id, signal, account_key, kind, first_seen, last_seen, seen) SELECT ?1, ?2, 'wave-' || ?3 || '-' || i, ?3, ?4, ?4, 1 FROM n`)
        .bind(installationId, row.signal, row.kind, row.at, count)
        .run();
    await holders(held.results.find((row) => row.kind === "ip")!, 1004);
    await holders(held.results.find((row) => row.kind === "device")!, 998);

    // A run of a report on another post of the wave: 1,005 others share the IP (saturated), 999 the device (exact).
    const version = await publish(apiKey, {
      ...ringGraph,
      nodes: ringGraph.nodes.map((n) => (n.id === "route" ? { ...n, config: { ...n.config, cases: [{ port: "ring", when: "related.count('ip') == 1000 && related.count('device') == 999" }] } } : n)),
    });
    expect((await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } })).status).toBe(201);
    const owner = `wave-target-${crypto.randomUUID()}`;
    const routed = await fileAndRoute(apiKey, owner, { ip, deviceId: device });
    expect(routed.port).toBe("ring");

    // The host's read: the same counts, capped; remembered for the run (a later node of it sees the
    // same counts, with no read), while a read for no run counts again.
    const run = await env.DB.prepare(`SELECT report_id AS reportId FROM workflow_runs WHERE id = ?1`).bind(routed.runId).first<{ reportId: string }>();
    const first = await relatedAccountsOfReport(env.DB, installationId, run!.reportId, routed.runId);
    expect(first.counts).toEqual({ ip: 1000, device: 999, email: 0, payment: 0 });
    const ownSignal = await env.DB.prepare(`SELECT signal FROM account_signals WHERE installation_id = ?1 AND kind = 'ip' LIMIT 1`).bind(installationId).first<{ signal: string }>();
    await env.DB.prepare(`DELETE FROM account_signals WHERE installation_id = ?1 AND signal = ?2 AND account_key LIKE 'wave-ip-%' AND CAST(substr(account_key, 9) AS INTEGER) > 10`).bind(installationId, ownSignal!.signal).run();
    expect((await relatedAccountsOfReport(env.DB, installationId, run!.reportId, routed.runId)).counts.ip).toBe(1000);
    expect((await relatedAccountsOfReport(env.DB, installationId, run!.reportId)).counts.ip).toBe(11);
  });
});
