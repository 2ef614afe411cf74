// The host trusts nothing the sandbox claims: the sandbox's WORKFLOWS binding
// creates its own run's instance and nothing else; branch keys, timeouts and the order of nodes
// are checked against the graph's plan, the recorded deadline and what the run has recorded.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { edge, newInstallation, publish, startRun, waitForWait, STEP_OUTPUT } from "./helpers";

const parkedGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", errorPort: "error", config: { cases: [{ port: "hit", when: "input.flag == true" }], case_ports: ["hit"], default_port: "miss" } },
    { id: "await", kind: "wait_for_event", config: { event_type: "review.done", timeout_seconds: 3600 } },
    { id: "done", kind: "end" },
    { id: "failed", kind: "end", config: { terminal_code: "failed" } },
  ],
  edges: [edge("start", "success", "route"), edge("route", "hit", "await"), edge("route", "miss", "await"), edge("route", "error", "failed"), edge("await", "received", "done"), edge("await", "timeout", "done")],
};

function capability(props: { artifactId: string; workflowVersionId: string }) {
  return (exports as any).WorkflowRuntimeCapability({ props }) as Record<"executeNode" | "completeWait" | "failNode" | "prepareWait", (input: unknown) => Promise<any>>;
}

async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("expected the call to be refused");
}

async function installCodeFirstArtifact(artifactId: string, source: string): Promise<void> {
  const bytes = new TextEncoder().encode(source);
  const digest = [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
  await env.DB.prepare("UPDATE workflow_artifacts SET inline_source_text = ?2, bundle_digest = ?3, size_bytes = ?4 WHERE id = ?1").bind(artifactId, source, `sha256:${digest}`, bytes.byteLength).run();
}

describe("the sandbox's control flow is checked", () => {
  let apiKey: string;
  let version: { id: string; artifact: { id: string } };
  let runId: string;
  let runtime: ReturnType<typeof capability>;
  const base = () => ({ runId, authorityMode: "autonomous" });

  beforeAll(async () => {
    ({ apiKey } = await newInstallation());
    version = await publish(apiKey, parkedGraph);
    runId = (await startRun(apiKey, version.id, { input: { flag: true } })).id;
    await waitForWait(apiKey, runId);
    runtime = capability({ artifactId: version.artifact.id, workflowVersionId: version.id });
  });

  it("an end executed before the wait that leads to it is refused, and the run keeps waiting", async () => {
    expect(await rejection(runtime.executeNode({ ...base(), nodeId: "done", nodeKind: "end" }))).toBe("runtime.node_not_reached");
    const run = await env.DB.prepare("SELECT state FROM workflow_runs WHERE id = ?1").bind(runId).first<{ state: string }>();
    expect(run?.state).toBe("waiting");
  });

  it("a timeout claimed before the recorded deadline is refused (and may be retried)", async () => {
    expect(await rejection(runtime.completeWait({ ...base(), nodeId: "await", eventResult: { status: "timed_out" } }))).toBe("retryable:runtime.wait_not_due");
    const wait = await env.DB.prepare("SELECT state FROM workflow_waits WHERE run_id = ?1").bind(runId).first<{ state: string }>();
    expect(wait?.state).toBe("waiting");
  });

  it("a node under a branch key the graph's plan does not give it is refused (no repeated effect under invented keys)", async () => {
    expect(await rejection(runtime.executeNode({ ...base(), nodeId: "route", nodeKind: "condition", branchKey: "invented" }))).toBe("runtime.branch_denied");
    expect(await rejection(runtime.prepareWait({ ...base(), nodeId: "await", nodeKind: "wait_for_event", branchKey: "await" }))).toBe("runtime.branch_denied");
  });

  it("a finished step is never rewritten as failed; a retry gets the port it took", async () => {
    const stepId = `${runId}:route:main:1`;
    const before = await env.DB.prepare(`SELECT s.state, ${STEP_OUTPUT.json} AS json FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.id = ?1`).bind(stepId).first();
    expect(await runtime.failNode({ ...base(), nodeId: "route", nodeKind: "condition", errorCode: "forged_failure" })).toEqual({ port: "hit" });
    expect(await runtime.executeNode({ ...base(), nodeId: "route", nodeKind: "condition" })).toEqual({ port: "hit" });
    const after = await env.DB.prepare(`SELECT s.state, ${STEP_OUTPUT.json} AS json FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.id = ?1`).bind(stepId).first();
    expect(after).toEqual(before);
  });
});

describe("the sandbox's WORKFLOWS binding", () => {
  it("a sandbox cannot reach another run's instance (get, terminate) nor create one for another run", async () => {
    const { apiKey } = await newInstallation();
    const victimVersion = await publish(apiKey, parkedGraph);
    const victim = (await startRun(apiKey, victimVersion.id, { input: { flag: true } })).id;
    await waitForWait(apiKey, victim);
    const attacker = await publish(apiKey, parkedGraph);
    const source = `
      import { WorkerEntrypoint, WorkflowEntrypoint } from "cloudflare:workers";
      export default class extends WorkerEntrypoint {
        async start(p) {
          try { const other = await this.env.WORKFLOWS.get(${JSON.stringify(victim)}); await other.terminate(); } catch {}
          try { await this.env.WORKFLOWS.create({ id: "forged-" + p.runId, params: { runId: ${JSON.stringify(victim)}, authorityMode: "autonomous" } }); } catch {}
          try { await this.env.WORKFLOWS.create({ id: ${JSON.stringify(victim)}, params: { runId: ${JSON.stringify(victim)}, authorityMode: "autonomous" } }); } catch {}
          const own = await this.env.WORKFLOWS.create({ id: p.instanceId, params: { runId: p.runId, authorityMode: p.authorityMode } });
          return { id: await own.id };
        }
      }
      export class TenantWorkflow extends WorkflowEntrypoint { async run() { return null; } }`;
    await installCodeFirstArtifact(attacker.artifact.id, source);
    const attack = await startRun(apiKey, attacker.id, { input: {} });
    // Its own instance was created (the one thing the binding does)…
    expect(attack.id).toMatch(/^run_/u);
    expect(["queued", "running", "succeeded"]).toContain(attack.state);
    // …and the victim is untouched: still waiting, its instance not terminated, nothing forged.
    const victimRow = await env.DB.prepare("SELECT state FROM workflow_runs WHERE id = ?1").bind(victim).first<{ state: string }>();
    expect(victimRow?.state).toBe("waiting");
    expect((await (await env.WORKFLOWS.get(victim)).status()).status).not.toBe("terminated");
    await expect(env.WORKFLOWS.get(`forged-${attack.id}`)).rejects.toThrow();
  });
});
