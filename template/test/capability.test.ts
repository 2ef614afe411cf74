// The sandbox boundary: every runtime call authorized, idempotent, and refused when it should be.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { auditEventId } from "../src/audit/stored";
import { api, edge, newInstallation, publish, startRun, waitForRun, waitForWait, STEP_OUTPUT } from "./helpers";

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

type Capability = ReturnType<typeof capability>;
function capability(props: { artifactId: string; workflowVersionId: string }) {
  return (exports as any).WorkflowRuntimeCapability({ props }) as {
    executeNode(input: unknown): Promise<any>;
    prepareWait(input: unknown): Promise<any>;
    completeWait(input: unknown): Promise<any>;
    prepareAction(input: unknown): Promise<any>;
    failNode(input: unknown): Promise<any>;
  };
}

/** The entrypoint every code-first artifact needs: it creates the run's Workflows instance. */
const CODE_FIRST_STARTER = `
      import { WorkerEntrypoint, WorkflowEntrypoint } from "cloudflare:workers";
      export default class extends WorkerEntrypoint {
        async start(p) { const i = await this.env.WORKFLOWS.create({ id: p.instanceId, params: { runId: p.runId, authorityMode: p.authorityMode } }); return { id: await i.id }; }
      }`;

/** Replaces a version's artifact with hand-written source and its true digest (a code-first artifact). */
async function installCodeFirstArtifact(artifactId: string, source: string): Promise<void> {
  const bytes = new TextEncoder().encode(source);
  const digest = [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
  await env.DB.prepare("UPDATE workflow_artifacts SET inline_source_text = ?2, bundle_digest = ?3, size_bytes = ?4 WHERE id = ?1").bind(artifactId, source, `sha256:${digest}`, bytes.byteLength).run();
}

async function count(sql: string, ...binds: unknown[]): Promise<number> {
  const row = await env.DB.prepare(sql)
    .bind(...binds)
    .first<{ n: number }>();
  return row?.n ?? -1;
}

async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error("expected the call to be refused");
}

describe("WorkflowRuntimeCapability", () => {
  let apiKey: string;
  let installationId: string;
  let version: { id: string; artifact: { id: string } };
  let runId: string;
  let runtime: Capability;
  const base = () => ({ runId, authorityMode: "autonomous" });

  beforeAll(async () => {
    ({ apiKey, id: installationId } = await newInstallation());
    version = await publish(apiKey, parkedGraph);
    runId = (await startRun(apiKey, version.id, { input: { flag: true } })).id;
    await waitForWait(apiKey, runId);
    runtime = capability({ artifactId: version.artifact.id, workflowVersionId: version.id });
  });

  it("executeNode twice leaves one step row, one output, one audit event", async () => {
    const first = await runtime.executeNode({ ...base(), nodeId: "route", nodeKind: "condition" });
    const second = await runtime.executeNode({ ...base(), nodeId: "route", nodeKind: "condition" });
    expect(second).toEqual(first);
    expect(first.port).toBe("hit");
    const stepId = `${runId}:route:main:1`;
    expect(await count("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE id = ?", stepId)).toBe(1);
    expect(await count(`SELECT COUNT(*) AS n FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.id = ? AND ${STEP_OUTPUT.json} IS NOT NULL`, stepId)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM workflow_step_outputs WHERE step_run_id = ?", stepId)).toBe(0);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE id = ?", auditEventId(installationId, `step:${stepId}:succeeded`))).toBe(1);
  });

  it("prepareWait twice leaves one wait, one step row, one audit event", async () => {
    const first = await runtime.prepareWait({ ...base(), nodeId: "await", nodeKind: "wait_for_event" });
    const second = await runtime.prepareWait({ ...base(), nodeId: "await", nodeKind: "wait_for_event" });
    expect(second.eventType).toBe(first.eventType);
    expect(first.eventType).toMatch(/^w_[0-9a-f]{40}$/u);
    expect(await count("SELECT COUNT(*) AS n FROM workflow_waits WHERE run_id = ?", runId)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM workflow_step_runs WHERE id = ?", `${runId}:await:main:1`)).toBe(1);
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.wait_prepared' AND target_id = ?", runId)).toBe(1);
  });

  it("failNode on a step that already finished keeps it as it finished (boundary.test.ts covers the rest)", async () => {
    const stepId = `${runId}:route:main:1`;
    const first = await runtime.failNode({ ...base(), nodeId: "route", nodeKind: "condition", errorCode: "probe_failure" });
    const second = await runtime.failNode({ ...base(), nodeId: "route", nodeKind: "condition", errorCode: "probe_failure" });
    expect(first).toEqual({ port: "hit" });
    expect(second).toEqual(first);
    const recorded = await env.DB.prepare(`SELECT s.state, ${STEP_OUTPUT.json} AS json FROM workflow_step_runs s ${STEP_OUTPUT.join} WHERE s.id = ?`).bind(stepId).first<{ state: string; json: string }>();
    expect(recorded?.state).toBe("succeeded");
    expect(JSON.parse(recorded!.json).port).toBe("hit");
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE id = ?", auditEventId(installationId, `step:${stepId}:failed`))).toBe(0);
  });

  it("completeWait refuses an event that was never recorded, and one recorded completion is replayed", async () => {
    expect(await rejection(runtime.completeWait({ ...base(), nodeId: "await", eventResult: { status: "received", event: { eventId: "evt_forged" } } }))).toBe("runtime.wait_event_denied");
    expect(await rejection(runtime.completeWait({ ...base(), nodeId: "route", eventResult: { status: "timed_out" } }))).toBe("runtime.wait_node_denied");
    const sent = await api(`/api/v1/runs/${runId}/events`, { key: apiKey, body: { type: "review.done", payload: { ok: true } } });
    expect(sent.status).toBe(202);
    const done = await waitForRun(apiKey, runId);
    expect(done.state).toBe("succeeded");
    expect(await count("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'workflow.wait_satisfied' AND target_id = ?", runId)).toBe(1);
  });

  it("refuses every call on a terminal run", async () => {
    expect(await rejection(runtime.executeNode({ ...base(), nodeId: "route", nodeKind: "condition" }))).toBe("runtime.run_terminal");
  });
});

describe("capability denials", () => {
  let apiKey: string;
  let version: { id: string; artifact: { id: string } };
  let other: { id: string; artifact: { id: string } };
  let runId: string;

  beforeAll(async () => {
    ({ apiKey } = await newInstallation());
    version = await publish(apiKey, parkedGraph);
    other = await publish(apiKey, parkedGraph);
    runId = (await startRun(apiKey, version.id, { input: { flag: false } })).id;
    await waitForWait(apiKey, runId);
  });

  const call = (props: { artifactId: string; workflowVersionId: string }, input: Record<string, unknown>) => rejection(capability(props).executeNode({ runId, authorityMode: "autonomous", nodeId: "route", nodeKind: "condition", ...input }));

  it("refuses a capability bound to another version or artifact", async () => {
    expect(await call({ artifactId: other.artifact.id, workflowVersionId: other.id }, {})).toBe("runtime.capability_denied");
    expect(await call({ artifactId: other.artifact.id, workflowVersionId: version.id }, {})).toBe("runtime.capability_denied");
    expect(await call({ artifactId: version.artifact.id, workflowVersionId: other.id }, {})).toBe("runtime.capability_denied");
  });

  it("refuses nodes outside the graph, wrong kinds and wrong methods", async () => {
    const props = { artifactId: version.artifact.id, workflowVersionId: version.id };
    expect(await call(props, { nodeId: "not-in-graph" })).toBe("runtime.node_denied");
    expect(await call(props, { nodeKind: "end" })).toBe("runtime.node_denied");
    expect(await call(props, { nodeId: "await", nodeKind: "wait_for_event" })).toBe("runtime.method_denied");
    expect(await rejection(capability(props).prepareAction({ runId, authorityMode: "autonomous", nodeId: "route", nodeKind: "action" }))).toBe("runtime.node_denied");
  });

  it("refuses an authority mode other than the run's", async () => {
    const props = { artifactId: version.artifact.id, workflowVersionId: version.id };
    expect(await call(props, { authorityMode: "shadow" })).toBe("runtime.authority_mismatch");
  });

  it("refuses malformed identifiers", async () => {
    const props = { artifactId: version.artifact.id, workflowVersionId: version.id };
    expect(await call(props, { runId: "run'; DROP TABLE workflow_runs;--" })).toBe("runtime.invalid_run_id");
    expect(await call(props, { runId: 42 })).toBe("runtime.invalid_run_id");
    expect(await call(props, { nodeId: "a".repeat(101) })).toBe("runtime.invalid_node_id");
    expect(await call(props, { branchKey: "../../etc" })).toBe("runtime.invalid_branch_key");
    expect(await rejection(capability(props).failNode({ runId, authorityMode: "autonomous", nodeId: "route", nodeKind: "condition", errorCode: "bad code!" }))).toBe("runtime.invalid_error_code");
  });
});

describe("artifacts", () => {
  it("a tampered artifact is refused and never runs", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, parkedGraph);
    await env.DB.prepare("UPDATE workflow_artifacts SET inline_source_text = inline_source_text || '\n// injected' WHERE id = ?").bind(version.artifact.id).run();
    const response = await api("/api/v1/runs", { key: apiKey, body: { workflowVersionId: version.id, authorityMode: "autonomous", input: {} } });
    expect(response.status).toBe(409);
    expect(response.body.error.code).toBe("workflow_artifact.digest_mismatch");
    const steps = await count("SELECT COUNT(*) AS n FROM workflow_step_runs s JOIN workflow_runs r ON r.id = s.run_id WHERE r.workflow_version_id = ?", version.id);
    expect(steps).toBe(0);
  });

  it("fetch() from inside an artifact is refused", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    });
    // A code-first artifact: it tries the network, then reports what happened through the capability.
    const source = `${CODE_FIRST_STARTER}
      export class TenantWorkflow extends WorkflowEntrypoint {
        async run(event, step) {
          const outcome = await step.do("probe", async () => {
            try { await fetch("https://example.com/"); return "fetch_allowed"; } catch (e) { return /not permitted to access the internet/.test(String(e.message)) ? "fetch_refused" : "fetch_failed_otherwise"; }
          });
          await step.do("report", async () => {
            try { await this.env.RUNTIME.failNode({ runId: event.payload.runId, authorityMode: event.payload.authorityMode, nodeId: "start", nodeKind: "start", errorCode: outcome }); } catch {}
            return outcome;
          });
          return outcome;
        }
      }`;
    await installCodeFirstArtifact(version.artifact.id, source);
    const run = await startRun(apiKey, version.id);
    const done = await waitForRun(apiKey, run.id, ["repair_required", "succeeded", "failed"]);
    expect(done.state).toBe("repair_required");
    // Refused by the sandbox itself (globalOutbound: null), not merely unreachable.
    expect(done.error.code).toBe("fetch_refused");
  });
});

describe("a sandbox that fails", () => {
  it("marks the run failed from the host side when the artifact's run throws", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "done")],
    });
    // A code-first artifact that tries to escalate: it claims a node the graph does not have.
    const source = `${CODE_FIRST_STARTER}
      export class TenantWorkflow extends WorkflowEntrypoint {
        async run(event, step) {
          await step.do("escalate", { retries: { limit: 0, delay: 1 } }, () => this.env.RUNTIME.executeNode({ runId: event.payload.runId, authorityMode: event.payload.authorityMode, nodeId: "grant-admin", nodeKind: "action" }));
        }
      }`;
    await installCodeFirstArtifact(version.artifact.id, source);
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id, ["failed", "succeeded", "repair_required"]);
    expect(done.state).toBe("failed");
    expect(done.error.code).toBe("runtime.node_denied");
    expect(done.steps).toHaveLength(0);
  });
});
