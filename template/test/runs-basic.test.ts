import { describe, expect, it } from "vitest";
import { api, edge, newInstallation, publish, startRun, waitForRun } from "./helpers";

const routing = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "route", kind: "condition", config: { cases: [{ port: "spam", when: "input.category == 'spam'" }], case_ports: ["spam"], default_port: "other" } },
    { id: "spam-end", kind: "end", config: { terminal_code: "spam" } },
    { id: "other-end", kind: "end", config: { terminal_code: "other" } },
  ],
  edges: [edge("start", "success", "route"), edge("route", "spam", "spam-end"), edge("route", "other", "other-end")],
};

describe("a published graph runs end to end", () => {
  it("routes through the matching case and through the default port", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, routing);
    expect(version.artifact.digest).toMatch(/^sha256:[0-9a-f]{64}$/u);
    const spam = await startRun(apiKey, version.id, { input: { category: "spam" } });
    const other = await startRun(apiKey, version.id, { input: { category: "harassment" } });
    const [spamRun, otherRun] = await Promise.all([waitForRun(apiKey, spam.id), waitForRun(apiKey, other.id)]);
    expect(spamRun.state).toBe("succeeded");
    expect(spamRun.output).toMatchObject({ terminalCode: "spam" });
    expect(spamRun.steps.map((s: any) => s.nodeId)).toEqual(["start", "route", "spam-end"]);
    expect(otherRun.output).toMatchObject({ terminalCode: "other" });
    expect(otherRun.steps.find((s: any) => s.nodeId === "route").output).toMatchObject({ port: "other", matched: null });
    const { status } = await api(`/api/v1/runs/${spam.id}`, { key: apiKey });
    expect(status).toBe(200);
  });
});
