// `related.count('<kind>')` in a workflow condition: the host counts, from account_signals (keyed
// hashes only), the other accounts of the installation that share a signal of that kind with the
// owner of the run's report subject, and a real run takes each branch on it. Another
// installation's accounts with the very same signals never count.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, until, waitForRun } from "./helpers";

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
  const step = await env.DB.prepare(`SELECT o.inline_json AS json FROM workflow_step_runs s JOIN workflow_step_outputs o ON o.step_run_id = s.id WHERE s.run_id = ?1 AND s.node_id = 'route'`).bind(runId).first<{ json: string }>();
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
});
