// End-to-end runs through Workflows + Worker Loader: branches, conditions, waits, delays, links.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, startRun, waitForRun, waitForWait } from "./helpers";

describe("fork and join", () => {
  it("runs both branches concurrently, each on its own path, and joins once", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "triage", kind: "condition", config: { cases: [{ port: "urgent", when: "input.priority > 5" }], case_ports: ["urgent"], default_port: "normal" } },
        { id: "urgent-check", kind: "condition", config: { cases: [], case_ports: [], default_port: "done" } },
        { id: "normal-check", kind: "condition", config: { cases: [], case_ports: [], default_port: "done" } },
        { id: "history", kind: "condition", config: { cases: [{ port: "known", when: "input.repeat == true" }], case_ports: ["known"], default_port: "new" } },
        { id: "meet", kind: "join" },
        { id: "decide", kind: "condition", config: { cases: [{ port: "both", when: "steps.triage.port == 'urgent' && steps.history.port == 'known'" }], case_ports: ["both"], default_port: "other" } },
        { id: "escalate", kind: "end", config: { terminal_code: "escalated" } },
        { id: "close", kind: "end", config: { terminal_code: "closed" } },
      ],
      edges: [
        edge("start", "success", "triage"),
        edge("start", "success", "history"),
        edge("triage", "urgent", "urgent-check"),
        edge("triage", "normal", "normal-check"),
        edge("urgent-check", "done", "meet"),
        edge("normal-check", "done", "meet"),
        edge("history", "known", "meet"),
        edge("history", "new", "meet"),
        edge("meet", "success", "decide"),
        edge("decide", "both", "escalate"),
        edge("decide", "other", "close"),
      ],
    };
    const version = await publish(apiKey, graph);
    const run = await startRun(apiKey, version.id, { input: { priority: 9, repeat: true } });
    const done = await waitForRun(apiKey, run.id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("escalated");
    const byNode = Object.fromEntries(done.steps.map((s: any) => [s.nodeId, s]));
    expect(byNode.triage.branchKey).toBe("triage");
    expect(byNode["urgent-check"].branchKey).toBe("triage");
    expect(byNode["normal-check"]).toBeUndefined();
    expect(byNode.history.branchKey).toBe("history");
    expect(byNode.meet.branchKey).toBe("main");
    expect(done.steps.filter((s: any) => s.nodeId === "meet")).toHaveLength(1);
    // The other input takes the other path inside the first branch.
    const second = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { priority: 1, repeat: false } })).id);
    expect(second.output.terminalCode).toBe("closed");
    expect(second.steps.map((s: any) => s.nodeId)).toContain("normal-check");
    expect(second.steps.map((s: any) => s.nodeId)).not.toContain("urgent-check");
  });
});

describe("condition", () => {
  const graph = (errorPort: boolean) => ({
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      {
        id: "route",
        kind: "condition",
        ...(errorPort ? { errorPort: "error" } : {}),
        timeoutPolicy: { retries: 0 },
        config: {
          cases: [
            { port: "a", when: "input.n > 1" },
            { port: "b", when: "input.n > 2" },
          ],
          case_ports: ["a", "b"],
          default_port: "none",
        },
      },
      { id: "end-a", kind: "end", config: { terminal_code: "a" } },
      { id: "end-b", kind: "end", config: { terminal_code: "b" } },
      { id: "end-none", kind: "end", config: { terminal_code: "none" } },
      ...(errorPort ? [{ id: "end-error", kind: "end", config: { terminal_code: "error" } }] : []),
    ],
    edges: [edge("start", "success", "route"), edge("route", "a", "end-a"), edge("route", "b", "end-b"), edge("route", "none", "end-none"), ...(errorPort ? [edge("route", "error", "end-error")] : [])],
  });

  it("takes the default port when no case holds and the one true case otherwise", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, graph(true));
    const none = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { n: 0 } })).id);
    const a = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { n: 2 } })).id);
    expect(none.output.terminalCode).toBe("none");
    expect(a.output.terminalCode).toBe("a");
  });

  it("refuses two true cases: to the error port when there is one, else repair_required", async () => {
    const { apiKey } = await newInstallation();
    const withPort = await publish(apiKey, graph(true));
    const routed = await waitForRun(apiKey, (await startRun(apiKey, withPort.id, { input: { n: 5 } })).id);
    expect(routed.state).toBe("succeeded");
    expect(routed.output.terminalCode).toBe("error");
    const failed = routed.steps.find((s: any) => s.nodeId === "route");
    expect(failed.state).toBe("failed");
    expect(failed.output).toMatchObject({ port: "error", errorCode: "condition.not_mutually_exclusive" });

    const withoutPort = await publish(apiKey, graph(false));
    const stuck = await waitForRun(apiKey, (await startRun(apiKey, withoutPort.id, { input: { n: 5 } })).id);
    expect(stuck.state).toBe("repair_required");
    expect(stuck.error.code).toBe("condition.not_mutually_exclusive");
  });
});

const waitGraph = (timeoutSeconds: number) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "await", kind: "wait_for_event", config: { event_type: "moderator.decision", timeout_seconds: timeoutSeconds } },
    {
      id: "verdict",
      kind: "condition",
      inputMapping: { verdict: "steps.await.event.payload.verdict" },
      config: { cases: [{ port: "remove", when: "node_input.verdict == 'remove'" }], case_ports: ["remove"], default_port: "keep" },
    },
    { id: "removed", kind: "end", config: { terminal_code: "removed" } },
    { id: "kept", kind: "end", config: { terminal_code: "kept" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "await"), edge("await", "received", "verdict"), edge("await", "timeout", "expired"), edge("verdict", "remove", "removed"), edge("verdict", "keep", "kept")],
});

describe("wait_for_event", () => {
  it("is satisfied by an event sent through the API, recorded before it is sent", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph(3600));
    const run = await startRun(apiKey, version.id);
    const { run: parked, wait } = await waitForWait(apiKey, run.id);
    expect(parked.state).toBe("waiting");
    expect(wait.eventType).toBe("moderator.decision");
    const wrongType = await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "other.event", payload: {} } });
    expect(wrongType.status).toBe(409);
    expect(wrongType.body.error.code).toBe("run.no_matching_wait");
    const sent = await api(`/api/v1/runs/${run.id}/events`, { key: apiKey, body: { type: "moderator.decision", payload: { verdict: "remove" } } });
    expect(sent.status).toBe(202);
    const recorded = await env.DB.prepare("SELECT type, payload_json FROM workflow_events WHERE run_id = ?").bind(run.id).all();
    expect(recorded.results).toHaveLength(1);
    const done = await waitForRun(apiKey, run.id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("removed");
    expect(done.steps.find((s: any) => s.nodeId === "await").output).toMatchObject({ port: "received", event: { type: "moderator.decision", payload: { verdict: "remove" } } });
    expect(done.waits[0].state).toBe("satisfied");
  });

  it("leaves by its timeout port when no event comes", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, waitGraph(1));
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id)).id);
    expect(done.state).toBe("succeeded");
    expect(done.output.terminalCode).toBe("expired");
    expect(done.steps.find((s: any) => s.nodeId === "await")).toMatchObject({ state: "timed_out", output: { port: "timeout" } });
    expect(done.waits[0].state).toBe("timed_out");
  });
});

describe("delays", () => {
  it("delay sleeps for its seconds and delay_until for its mapped time", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "pause", kind: "delay", config: { seconds: 1 } },
        { id: "until", kind: "delay_until", inputMapping: { timestamp: "input.resumeAt" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "pause"), edge("pause", "completed", "until"), edge("until", "completed", "done")],
    };
    const version = await publish(apiKey, graph);
    const resumeAt = new Date(Date.now() + 1_500).toISOString();
    const run = await startRun(apiKey, version.id, { input: { resumeAt } });
    const done = await waitForRun(apiKey, run.id);
    expect(done.state).toBe("succeeded");
    const pause = done.steps.find((s: any) => s.nodeId === "pause");
    const until = done.steps.find((s: any) => s.nodeId === "until");
    expect(Date.parse(pause.finishedAt) - Date.parse(pause.startedAt)).toBeGreaterThanOrEqual(900);
    expect(Date.parse(until.finishedAt)).toBeGreaterThanOrEqual(Date.parse(resumeAt) - 50);
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE target_id = ? AND action = 'workflow.delay_scheduled'").bind(run.id).first<{ n: number }>();
    expect(audit?.n).toBe(2);
  });

  it("refuses a delay_until more than a year ahead", async () => {
    const { apiKey } = await newInstallation();
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "until", kind: "delay_until", inputMapping: { timestamp: "input.resumeAt" }, errorPort: "error" },
        { id: "done", kind: "end" },
        { id: "bad", kind: "end", config: { terminal_code: "bad_time" } },
      ],
      edges: [edge("start", "success", "until"), edge("until", "completed", "done"), edge("until", "error", "bad")],
    };
    const version = await publish(apiKey, graph);
    const done = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { resumeAt: "2999-01-01T00:00:00Z" } })).id);
    expect(done.output.terminalCode).toBe("bad_time");
    expect(done.steps.find((s: any) => s.nodeId === "until").output.errorCode).toBe("delay.timestamp_invalid");
  });
});

describe("start_linked_workflow", () => {
  it("starts one run of the linked version, with the mapped input and a link back", async () => {
    const { apiKey } = await newInstallation();
    const child = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end", config: { terminal_code: "child_done" } },
      ],
      edges: [edge("start", "success", "done")],
    });
    const parent = await publish(apiKey, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "spawn", kind: "start_linked_workflow", config: { workflow_version_id: child.id }, inputMapping: { subject: "input.subject" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "spawn"), edge("spawn", "started", "done")],
    });
    const done = await waitForRun(apiKey, (await startRun(apiKey, parent.id, { input: { subject: "acct-1" } })).id);
    expect(done.state).toBe("succeeded");
    const spawn = done.steps.find((s: any) => s.nodeId === "spawn");
    const childRun = await waitForRun(apiKey, spawn.output.linkedRunId);
    expect(childRun.state).toBe("succeeded");
    expect(childRun.parentRunId).toBe(done.id);
    expect(childRun.input).toEqual({ subject: "acct-1" });
    const children = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs WHERE parent_run_id = ?").bind(done.id).first<{ n: number }>();
    expect(children?.n).toBe(1);
  });
});
