// Automation: sandboxed components and their egress, built-in banks, AI proposals through an
// OpenAI-compatible endpoint served by a separate Worker, shadow reports and backtests.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { globMatch } from "../src/automation/builtins";
import { api, edge, newInstallation, personKey, publish, startRun, waitForRun } from "./helpers";

function enrichGraph(config: Record<string, unknown>, inputMapping: Record<string, string> = { text: "input.text" }) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "lookup", kind: "enrichment", errorPort: "error", timeoutPolicy: { retries: 0 }, config, inputMapping },
      { id: "done", kind: "end", config: { terminal_code: "enriched" } },
      { id: "failed", kind: "end", config: { terminal_code: "failed" } },
    ],
    edges: [edge("start", "success", "lookup"), edge("lookup", "success", "done"), edge("lookup", "error", "failed")],
  };
}

async function component(apiKey: string, source: string, allowedHosts: string[] = [], extra: Record<string, unknown> = {}) {
  const created = await api("/api/v1/components", { key: apiKey, body: { name: `c-${crypto.randomUUID()}` } });
  const version = await api(`/api/v1/components/${created.body.id}/versions`, { key: apiKey, body: { source, allowedHosts, maxSubrequests: 2, ...extra } });
  expect(version.status).toBe(201);
  expect(version.body.digest).toMatch(/^sha256:/u);
  return version.body.id as string;
}

const fetcher = (host: string) => `export async function run(input) {
  const response = await fetch("https://${host}/lookup?q=" + encodeURIComponent(input.text));
  if (!response.ok) return { status: response.status };
  return { status: response.status, body: await response.json(), words: input.text.split(" ").length };
}`;

describe("components", () => {
  it("a declared host works; an undeclared host is refused even if the component swallows the refusal", async () => {
    const { apiKey } = await newInstallation();
    const allowed = await component(apiKey, fetcher("allowed.test"), ["allowed.test"]);
    const ok = await waitForRun(apiKey, (await startRun(apiKey, (await publish(apiKey, enrichGraph({ component_version_id: allowed }))).id, { input: { text: "hello there" } })).id);
    expect(ok.output.terminalCode).toBe("enriched");
    expect(ok.steps.find((s: any) => s.nodeId === "lookup").output).toMatchObject({ data: { status: 200, body: { reachedAs: "allowed.test" }, words: 2 }, subrequests: 1 });

    const sneaky = await component(apiKey, fetcher("forbidden.test"), ["allowed.test"]);
    const refused = await waitForRun(apiKey, (await startRun(apiKey, (await publish(apiKey, enrichGraph({ component_version_id: sneaky }))).id, { input: { text: "x" } })).id);
    expect(refused.output.terminalCode).toBe("failed");
    expect(refused.steps.find((s: any) => s.nodeId === "lookup").errorCode).toBe("component.egress_denied");
  });

  it("a component sees only its mapped input and cannot reach bindings", async () => {
    const { apiKey } = await newInstallation();
    const probe = await component(apiKey, `export function run(input, context) { return { keys: Object.keys(input), context, hasDb: typeof globalThis.DB !== "undefined" }; }`);
    const run = await waitForRun(apiKey, (await startRun(apiKey, (await publish(apiKey, enrichGraph({ component_version_id: probe }, { only: "input.a" }))).id, { input: { a: 1, secret: "x" } })).id);
    expect(run.steps.find((s: any) => s.nodeId === "lookup").output.data).toEqual({ keys: ["only"], context: { nodeId: "lookup", authorityMode: "autonomous" }, hasDb: false });
  });

  it("component errors route to the error port with a stable code; retryable ones are retried first", async () => {
    const { apiKey } = await newInstallation();
    const broken = await component(apiKey, `export function run() { throw new Error("boom"); }`);
    const run = await waitForRun(apiKey, (await startRun(apiKey, (await publish(apiKey, enrichGraph({ component_version_id: broken }))).id, { input: { text: "x" } })).id);
    expect(run.output.terminalCode).toBe("failed");
    expect(run.steps.find((s: any) => s.nodeId === "lookup")).toMatchObject({ state: "failed", errorCode: "component.failed" });
    const missing = await component(apiKey, `export const nothing = 1;`);
    const run2 = await waitForRun(apiKey, (await startRun(apiKey, (await publish(apiKey, enrichGraph({ component_version_id: missing }))).id, { input: { text: "x" } })).id);
    expect(run2.steps.find((s: any) => s.nodeId === "lookup").errorCode).toBe("component_run_missing");
    // A tampered source is refused before it is loaded.
    await env.DB.prepare("UPDATE component_versions SET source_text = 'export function run() { return { owned: true }; }' WHERE id = ?").bind(broken).run();
    const run3 = await waitForRun(apiKey, (await startRun(apiKey, (await publish(apiKey, enrichGraph({ component_version_id: broken }))).id, { input: { text: "x" } })).id);
    expect(run3.steps.find((s: any) => s.nodeId === "lookup").errorCode).toBe("component.digest_mismatch");
  });
});

describe("built-in components", () => {
  it("keyword, pattern, domain and hash banks match", async () => {
    const { apiKey } = await newInstallation();
    const hash = "a".repeat(64);
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "words", kind: "enrichment", config: { component: "keyword_bank", keywords: ["free crypto"], patterns: ["bit*coin", "w?llet"] }, inputMapping: { text: "input.text" } },
        { id: "links", kind: "enrichment", config: { component: "domain_list", domains: ["scam.example"] }, inputMapping: { text: "input.text" } },
        { id: "media", kind: "enrichment", config: { component: "hash_bank", hashes: [hash] }, inputMapping: { hashes: "input.hashes" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "words"), edge("words", "success", "links"), edge("links", "success", "media"), edge("media", "success", "done")],
    };
    const run = await waitForRun(
      apiKey,
      (
        await startRun(apiKey, (await publish(apiKey, graph)).id, {
          input: { text: "Get FREE CRYPTO now: send bitXXcoin to my wallet at https://pay.scam.example/now", hashes: [hash.toUpperCase(), "b".repeat(64)] },
        })
      ).id,
    );
    const out = Object.fromEntries(run.steps.map((s: any) => [s.nodeId, s.output.data]));
    expect(out.words).toEqual({ matched: true, keywords: ["free crypto"], patterns: ["bit*coin", "w?llet"], count: 3 });
    expect(out.links).toEqual({ matched: true, matches: ["pay.scam.example"], checked: 1 });
    expect(out.media).toEqual({ matched: true, matches: [hash] });
  });

  it("a pathological pattern against a long input finishes, with the right answer", async () => {
    const text = "a".repeat(200_000);
    expect(globMatch(text, `${"*a".repeat(30)}*b`)).toBe(false);
    expect(globMatch(`${text}b`, `${"*a".repeat(30)}*b`)).toBe(true);
    const { apiKey } = await newInstallation();
    const run = await waitForRun(
      apiKey,
      (
        await startRun(apiKey, (await publish(apiKey, enrichGraph({ component: "keyword_bank", patterns: [`${"*a".repeat(40)}*!`, "(a+)+$"] }))).id, {
          input: { text: `${"a".repeat(150_000)} aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa` },
        })
      ).id,
    );
    expect(run.state).toBe("succeeded");
    expect(run.steps.find((s: any) => s.nodeId === "lookup").output.data).toMatchObject({ matched: false, count: 0 });
  });

  it("subject_history counts the subject's reports and decisions", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, enrichGraph({ component: "subject_history" }, {}));
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous", when: "report.category == 'violence'" } });
    const subject = { kind: "account", id: "acct-hist" };
    const first = await api("/api/v1/reports", { key: apiKey, body: { subject, category: "scams_and_fraud" } });
    await api("/api/v1/decisions", { key: apiKey, body: { reportId: first.body.id, outcome: "warned", restrictions: { visibility: ["content_labelled"] }, statement: "Warned." } });
    await api("/api/v1/reports", { key: apiKey, body: { subject, category: "scams_and_fraud" } });
    const third = await api("/api/v1/reports", { key: apiKey, body: { subject, category: "violence" } });
    const run = await waitForRun(apiKey, third.body.runs[0].runId);
    expect(run.steps.find((s: any) => s.nodeId === "lookup").output.data).toMatchObject({
      reportCount: 3,
      decisionCount: 1,
      decisions: [{ outcome: "warned" }],
      reportsByCategory: expect.arrayContaining([expect.objectContaining({ category: "scams_and_fraud", count: 2 }), expect.objectContaining({ category: "violence", count: 1 })]),
    });
  });
});

function aiGraph(providerId: string) {
  return {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      {
        id: "propose",
        kind: "ai_proposal",
        errorPort: "error",
        timeoutPolicy: { retries: 0 },
        config: { provider_id: providerId, instructions: "Classify this post.", result_ports: ["remove", "keep"] },
        inputMapping: { text: "input.text" },
      },
      { id: "remove", kind: "end", config: { terminal_code: "remove" } },
      { id: "keep", kind: "end", config: { terminal_code: "keep" } },
      { id: "error", kind: "end", config: { terminal_code: "error" } },
    ],
    edges: [edge("start", "success", "propose"), edge("propose", "remove", "remove"), edge("propose", "keep", "keep"), edge("propose", "error", "error")],
  };
}

async function provider(apiKey: string, model: string, timeoutMs = 20_000) {
  const created = await api("/api/v1/ai-providers", { key: apiKey, body: { kind: "openai-compatible", baseUrl: "https://model.test/v1", model, apiKey: "sk-test-model-key", timeoutMs } });
  expect(created.status).toBe(201);
  expect(JSON.stringify(created.body)).not.toContain("sk-test-model-key");
  return created.body.id as string;
}

describe("AI proposals through an OpenAI-compatible endpoint", () => {
  it("a valid answer picks its port and records confidence, rationale, tokens and latency", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, aiGraph(await provider(apiKey, "fixed-remove")));
    const run = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { text: "this is a scam" } })).id);
    expect(run.output.terminalCode).toBe("remove");
    const output = run.steps.find((s: any) => s.nodeId === "propose").output;
    expect(output).toMatchObject({ port: "remove", confidence: 0.92, rationale: "Matches the scam pattern.", provider: { model: "fixed-remove" } });
    expect(output.usage.promptTokens).toBeGreaterThan(0);
    expect(output.usage.completionTokens).toBeGreaterThan(0);
    expect(output.latencyMs).toBeGreaterThanOrEqual(0);
    const stored = JSON.stringify((await env.DB.prepare("SELECT * FROM ai_providers").all()).results);
    expect(stored).not.toContain("sk-test-model-key");
  });

  it("a result outside result_ports, malformed JSON and a timeout go to the error port with their codes", async () => {
    const { apiKey } = await newInstallation();
    const cases: Array<[string, number, string]> = [
      ["wrong-port", 20_000, "ai.result_port_invalid"],
      ["malformed", 20_000, "ai.output_malformed"],
      ["slow", 1_000, "ai.timeout"],
    ];
    for (const [model, timeout, code] of cases) {
      const version = await publish(apiKey, aiGraph(await provider(apiKey, model, timeout)));
      const run = await waitForRun(apiKey, (await startRun(apiKey, version.id, { input: { text: "hello" } })).id);
      expect(run.output.terminalCode, model).toBe("error");
      expect(run.steps.find((s: any) => s.nodeId === "propose").errorCode, model).toBe(code);
    }
  });
});

describe("shadow evaluation and backtests", () => {
  const triage = {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "route", kind: "condition", config: { cases: [{ port: "scam", when: "report.category == 'scams_and_fraud'" }], case_ports: ["scam"], default_port: "other" } },
      { id: "remove", kind: "decision", config: { outcome: "remove", restrictions: { visibility: ["content_removed"] }, statement: "Scam." } },
      { id: "keep", kind: "decision", config: { outcome: "keep", restrictions: { visibility: ["content_labelled"] }, statement: "Kept with a label." } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "route"), edge("route", "scam", "remove"), edge("route", "other", "keep"), edge("remove", "recorded", "done"), edge("keep", "recorded", "done")],
  };

  it("the shadow report compares proposals with people's decisions, as computed by hand", async () => {
    const { apiKey } = await newInstallation();
    const version = await publish(apiKey, triage);
    await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "shadow" } });
    // (category, human outcome): proposals are remove for scams, keep otherwise.
    const plan: Array<[string, string | null]> = [
      ["scams_and_fraud", "remove"],
      ["scams_and_fraud", "remove"],
      ["scams_and_fraud", "keep"],
      ["violence", "keep"],
      ["violence", "remove"],
      ["animal_welfare", "keep"],
      ["animal_welfare", null],
    ];
    const runIds: string[] = [];
    const moderator = await personKey(apiKey);
    for (const [i, [category, human]] of plan.entries()) {
      const report = await api("/api/v1/reports", { key: apiKey, body: { subject: { kind: "content", id: `s-${i}` }, category } });
      runIds.push(report.body.runs[0].runId);
      if (human) await api("/api/v1/decisions", { key: moderator, body: { reportId: report.body.id, outcome: human, restrictions: { visibility: ["content_removed"] }, statement: "Decided by a moderator." } });
    }
    await Promise.all(runIds.map((id) => waitForRun(apiKey, id)));
    const report = await api(`/api/v1/workflow-versions/${version.id}/shadow-report`, { key: apiKey });
    // Hand count: compared 6 (one has no human decision); agreements: remove/remove ×2, keep/keep ×2 → 4.
    expect(report.body).toMatchObject({
      shadowRuns: 7,
      runsCompared: 6,
      agreements: 4,
      agreementRate: 4 / 6,
      withoutHumanDecision: 1,
      confusionMatrix: { remove: { remove: 2, keep: 1 }, keep: { keep: 2, remove: 1 } },
      labels: ["keep", "remove"],
    });
  });

  // The durable engine over 200 reports, next to the fast one on the same reports, is in
  // test/backtests-fast.test.ts (their results agree report by report).
});
