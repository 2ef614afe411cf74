/// <reference types="vite/client" />
// The first hour: the template gallery lists every example of examples/ (through
// examples/catalog.json) and each publishes as it is; a template naming what the installation lacks
// is a 422 that says what to create and where, with nothing written; and the first-run checklist
// (GET /onboarding) checks each step off from real state, counting only the caller's installation.
// Every graph a user starts from (an example, the demo desk's graph, a gallery template, the
// editor's new graph) declares the current expression semantics and keeps it once published.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import catalog from "../examples/catalog.json";
import { cleanGraph, editorSemantics, newGraph } from "../console/src/graph/new-graph";
import { TEMPLATE_GRAPHS } from "../src/workflows/template-graphs";
import { api, edge, newInstallation, publish, until } from "./helpers";

/** Every example graph in examples/ (Vite's glob: the test sees the folder as it is, catalog aside). */
const EXAMPLE_FILES = import.meta.glob("../examples/*.json", { eager: true, import: "default" });
const examples = Object.fromEntries(
  Object.entries(EXAMPLE_FILES)
    .map(([path, graph]) => [path.replace("../examples/", ""), graph] as const)
    .filter(([file]) => file !== "catalog.json"),
);

/** The demo desk's own graphs (demo/*.json holding nodes; demo/dataset.json is its data, not a graph). */
const DEMO_GRAPHS = Object.fromEntries(
  Object.entries(import.meta.glob("../demo/*.json", { eager: true, import: "default" }))
    .filter(([, value]) => Array.isArray((value as { nodes?: unknown }).nodes))
    .map(([path, graph]) => [path.replace("../", ""), graph] as const),
);

async function created(path: string, key: string, body: unknown): Promise<any> {
  const response = await api(path, { key, body });
  if (response.status !== 201) throw new Error(`${path}: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

/** An installation with everything the examples name (as examples/README.md lists it). */
async function desk() {
  const { id, apiKey } = await newInstallation("gallery");
  const tag = crypto.randomUUID().slice(0, 8);
  const actions = await created("/api/v1/webhook-endpoints", apiKey, { url: `https://hooks.product.test/ok/gallery-${tag}/actions`, retryBaseSeconds: 0, maxAttempts: 5 });
  await created("/api/v1/webhook-endpoints", apiKey, { url: `https://hooks.product.test/ok/gallery-${tag}/messages`, eventTypes: ["message.send"], retryBaseSeconds: 0, maxAttempts: 5 });
  for (const key of ["remove_content", "suspend_uploader", "restore_content"]) await created("/api/v1/action-types", apiKey, { key, name: key, endpointId: actions.id, reversible: true, requiresApproval: false });
  await created("/api/v1/queues", apiKey, { name: "general-review", slaSeconds: 86_400 });
  await created("/api/v1/queues", apiKey, { name: "urgent", slaSeconds: 14_400 });
  await created("/api/v1/queues", apiKey, { name: "child-safety", slaSeconds: 14_400, wellness: "strict" });
  await created("/api/v1/ai-providers", apiKey, { name: "moderation-model", kind: "openai-compatible", baseUrl: "https://model.test/v1", model: "harassment-judge", apiKey: "sk-test-model-key", contentAllowed: true });
  await created("/api/v1/policies", apiKey, { name: "harassment-policy", text: "Harassment policy\n2.1 Insults aimed at a person are removed." });
  return { id, apiKey };
}

const checklist = async (key: string) => {
  const response = await api("/api/v1/onboarding", { key });
  expect(response.status).toBe(200);
  return response.body as { steps: Array<{ id: string; done: boolean }>; completed: number; total: number; allDone: boolean; hints: Record<string, boolean> };
};
const doneSteps = async (key: string) => (await checklist(key)).steps.filter((s) => s.done).map((s) => s.id);

describe("the template gallery", () => {
  it("the catalog lists every example of examples/, and every entry's graph is bundled and served", async () => {
    const files = Object.keys(examples).sort();
    expect(files.length).toBeGreaterThanOrEqual(4);
    expect(catalog.map((entry) => entry.file).sort(), "examples/catalog.json lists every example file, once").toEqual(files);
    expect(Object.keys(TEMPLATE_GRAPHS).sort(), "src/workflows/template-graphs.ts imports every example file").toEqual(files);
    for (const entry of catalog) {
      expect(entry.title.length, entry.file).toBeGreaterThan(0);
      expect(entry.whenToUse.length, entry.file).toBeGreaterThan(20);
      expect(Array.isArray(entry.needs), entry.file).toBe(true);
    }
    const { apiKey } = await newInstallation("gallery-list");
    const list = await api("/api/v1/workflow-templates", { key: apiKey });
    expect(list.status).toBe(200);
    // Every catalog entry is served (an entry without its import in template-graphs.ts would be missing).
    expect(list.body.items.map((t: any) => t.file)).toEqual(catalog.map((entry) => `examples/${entry.file}`));
    for (const template of list.body.items) {
      expect(template.graph, template.id).toEqual(examples[template.file.replace("examples/", "")]);
      const checked = await api("/api/v1/workflow-graphs/validate", { key: apiKey, body: { graph: template.graph } });
      expect(checked.body, template.id).toMatchObject({ valid: true, errors: [] });
    }
    // A fresh installation has none of what the examples name: each reference says so.
    const spam = list.body.items.find((t: any) => t.id === "spam-triage");
    expect(spam).toMatchObject({ ready: false, references: [{ type: "action_type", name: "remove_content", exists: false }] });
    expect(list.body.items.find((t: any) => t.id === "triage")).toMatchObject({ ready: true, references: [] });
  });

  it("every template publishes into an installation that has what it names, as a new workflow", async () => {
    const { apiKey } = await desk();
    const list = await api("/api/v1/workflow-templates", { key: apiKey });
    for (const template of list.body.items) {
      expect(template.ready, `${template.id}: ${JSON.stringify(template.references)}`).toBe(true);
      const used = await api("/api/v1/workflow-templates/use", { key: apiKey, body: { template: template.id } });
      expect(used.status, `${template.id}: ${JSON.stringify(used.body)}`).toBe(201);
      expect(used.body.workflow.name).toBe(template.title);
      expect(used.body.version).toMatchObject({ workflowId: used.body.workflow.id, version: 1, graph: template.graph });
      const workflow = await api(`/api/v1/workflows/${used.body.workflow.id}`, { key: apiKey });
      expect(workflow.body.versions.map((v: any) => v.id)).toEqual([used.body.version.id]);
    }
    // The same name twice is refused; another name publishes a second copy.
    const again = await api("/api/v1/workflow-templates/use", { key: apiKey, body: { template: "triage" } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("workflow.name_taken");
    expect((await api("/api/v1/workflow-templates/use", { key: apiKey, body: { template: "triage", name: "Triage, second desk" } })).status).toBe(201);
  });

  it("a template naming what is missing is a 422 that lists each missing name and how to create it; nothing is written", async () => {
    const { apiKey } = await newInstallation("gallery-missing");
    const used = await api("/api/v1/workflow-templates/use", { key: apiKey, body: { template: "harassment-review" } });
    expect(used.status).toBe(422);
    expect(used.body.error.code).toBe("workflow_template.references_missing");
    const details = used.body.error.details as Array<{ type: string; name: string; path: string; message: string }>;
    expect(details.map((d) => `${d.type}:${d.name}`).sort()).toEqual(["ai_provider:moderation-model", "policy_version:harassment-policy", "queue:general-review"]);
    expect(details.find((d) => d.type === "queue")!.message).toContain("POST /api/v1/queues");
    expect(details.every((d) => /^\$\.nodes\[\d+\]\.config\./u.test(d.path))).toBe(true);
    expect((await api("/api/v1/workflows", { key: apiKey })).body.items).toEqual([]);
    const unknown = await api("/api/v1/workflow-templates/use", { key: apiKey, body: { template: "no-such-template" } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("workflow_template.not_found");
  });
});

describe("expression semantics of what a user starts from", () => {
  it("every example and demo graph, every gallery template and the editor's new graph declare json-numbers-1, and each published version keeps it in its stored graph", async () => {
    const semanticsOf = (graph: unknown) => (graph as { expressionSemantics?: unknown }).expressionSemantics;
    const start = [
      { id: "start", kind: "start" },
      { id: "done", kind: "end" },
    ];
    // The editor: a new workflow's graph, and what it saves once start and end are placed and joined.
    const editorGraph = cleanGraph(start, [edge("start", "success", "done")], editorSemantics(null));
    const files: Record<string, unknown> = {
      ...Object.fromEntries(Object.entries(examples).map(([file, graph]) => [`examples/${file}`, graph])),
      ...DEMO_GRAPHS,
      ...Object.fromEntries(Object.entries(TEMPLATE_GRAPHS).map(([file, graph]) => [`gallery ${file}`, graph])),
      "the editor's new graph": newGraph(),
      "the editor's graph as saved": editorGraph,
    };
    expect(Object.keys(DEMO_GRAPHS), "the demo desk's graph").toContain("demo/violent-media.json");
    expect(Object.keys(files).length).toBeGreaterThanOrEqual(2 * Object.keys(examples).length + 3);
    for (const [name, graph] of Object.entries(files)) expect(semanticsOf(graph), name).toBe("json-numbers-1");
    // Editing a version keeps its semantics: one stored without the field (published before it existed) stays cel.
    expect(editorSemantics({ graph: {} })).toBe("cel");
    expect(editorSemantics({ graph: { expressionSemantics: "cel" } })).toBe("cel");
    expect(editorSemantics({ graph: { expressionSemantics: "json-numbers-1" } })).toBe("json-numbers-1");

    const { apiKey } = await desk();
    // What the demo desk's graph hands known clips to (demo/violent-media.json).
    await created("/api/v1/webhook-endpoints", apiKey, { url: `https://hooks.product.test/ok/gallery-${crypto.randomUUID().slice(0, 8)}/hotline`, name: "hash-hotline", retryBaseSeconds: 0, maxAttempts: 5 });
    const stored = async (versionId: string) => {
      const version = await api(`/api/v1/workflow-versions/${versionId}`, { key: apiKey });
      expect(version.status, JSON.stringify(version.body)).toBe(200);
      return version.body.graph as unknown;
    };
    // The gallery serves its templates with the field, and "use" publishes it.
    const list = await api("/api/v1/workflow-templates", { key: apiKey });
    expect(list.body.items.length).toBe(Object.keys(TEMPLATE_GRAPHS).length);
    for (const template of list.body.items) {
      expect(semanticsOf(template.graph), `served template ${template.id}`).toBe("json-numbers-1");
      const used = await api("/api/v1/workflow-templates/use", { key: apiKey, body: { template: template.id, name: `semantics ${template.id}` } });
      expect(used.status, `${template.id}: ${JSON.stringify(used.body)}`).toBe(201);
      expect(semanticsOf(await stored(used.body.version.id)), `template ${template.id} as published`).toBe("json-numbers-1");
    }
    // The example and demo files, and the editor's graph, published through the API as the console and the demo seed do.
    for (const [name, graph] of Object.entries({ ...Object.fromEntries(Object.entries(examples).map(([file, graph]) => [`examples/${file}`, graph])), ...DEMO_GRAPHS, "the editor's graph": editorGraph })) {
      const version = await publish(apiKey, graph);
      const back = await stored(version.id);
      expect(semanticsOf(back), `${name} as published`).toBe("json-numbers-1");
      const ids = (g: unknown) => (g as { nodes: Array<{ id: string }> }).nodes.map((node) => node.id);
      expect(ids(back), name).toEqual(ids(graph));
    }
  });
});

describe("the first-run checklist", () => {
  it("checks each step off from real state, and counts only the caller's installation", async () => {
    const a = await newInstallation("onboarding-a");
    const b = await newInstallation("onboarding-b");
    const fresh = await checklist(a.apiKey);
    expect(fresh).toMatchObject({ completed: 0, total: 5, allDone: false });
    expect(fresh.steps.map((s) => s.id)).toEqual(["connect_product", "publish_workflow", "send_report", "review_report", "see_action"]);

    // 1. Connect your product: a webhook endpoint.
    const tag = crypto.randomUUID().slice(0, 8);
    const path = `/ok/onboarding-${tag}`;
    const endpoint = await created("/api/v1/webhook-endpoints", a.apiKey, { url: `https://hooks.product.test${path}`, retryBaseSeconds: 0, maxAttempts: 5 });
    // The test product verifies each delivery's signature with the endpoint's secret, as a real one would.
    await env.RECEIVER.fetch("http://receiver/_control/secret", { method: "POST", body: JSON.stringify({ path, secret: endpoint.secret }) });
    expect(await doneSteps(a.apiKey)).toEqual(["connect_product"]);

    // 2. Publish a workflow (a review, then an action to the product) and bind it to reports.
    await created("/api/v1/queues", a.apiKey, { name: "first-review", slaSeconds: 3600 });
    await created("/api/v1/action-types", a.apiKey, { key: "hide_post", name: "Hide the post", endpointId: endpoint.id, requiresApproval: false });
    const workflow = await created("/api/v1/workflows", a.apiKey, { name: "first workflow" });
    const graph = {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "review", kind: "human_task", config: { queue_id: "first-review", timeout_seconds: 3600, response_schema: { type: "object", required: ["outcome"], properties: { outcome: { enum: ["hide", "keep"] } } } } },
        { id: "hide", kind: "action", errorPort: "failed", config: { action_type: "hide_post", approval_timeout_seconds: 3600 }, inputMapping: { subjectId: "report.subject.id" } },
        { id: "done", kind: "end" },
      ],
      edges: [edge("start", "success", "review"), edge("review", "completed", "hide"), edge("review", "timeout", "done"), ...["applied", "rejected", "expired", "failed"].map((port) => edge("hide", port, "done"))],
    };
    const version = await created(`/api/v1/workflows/${workflow.id}/versions`, a.apiKey, { graph });
    const state = await checklist(a.apiKey);
    expect(state.steps.filter((s) => s.done).map((s) => s.id)).toEqual(["connect_product", "publish_workflow"]);
    expect(state.hints.triggerEnabled).toBe(false);
    await created("/api/v1/triggers", a.apiKey, { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" });
    expect((await checklist(a.apiKey)).hints.triggerEnabled).toBe(true);

    // 3. Send a test report: the trigger starts the run, which opens a task.
    const report = await created("/api/v1/reports", a.apiKey, { subject: { kind: "content", id: `post-${tag}` }, category: "scams_and_fraud" });
    expect(await doneSteps(a.apiKey)).toEqual(["connect_product", "publish_workflow", "send_report"]);
    const queue = (await api("/api/v1/queues", { key: a.apiKey })).body.items.find((q: any) => q.name === "first-review");
    const task = await until(async () => (await api(`/api/v1/queues/${queue.id}/tasks`, { key: a.apiKey })).body.items?.[0], "the review task");
    expect((await checklist(a.apiKey)).hints.taskWaiting).toBe(true);
    expect(await doneSteps(a.apiKey)).not.toContain("review_report");

    // 4. Review it: the task answered. 5. See the action arrive: its delivery confirmed by the product.
    expect((await api(`/api/v1/tasks/${task.id}/claim`, { key: a.apiKey, body: { reviewer: "first-mod" } })).status).toBe(200);
    expect((await api(`/api/v1/tasks/${task.id}/complete`, { key: a.apiKey, body: { reviewer: "first-mod", response: { outcome: "hide" } } })).status).toBe(200);
    expect(await doneSteps(a.apiKey)).toContain("review_report");
    const done = await until(async () => {
      const now = await checklist(a.apiKey);
      return now.allDone ? now : null;
    }, "the action's delivery");
    expect(done).toMatchObject({ completed: 5, allDone: true });
    expect((await api(`/api/v1/reports/${report.id}`, { key: a.apiKey })).status).toBe(200);

    // Another installation: none of A's state counts, and A's workflow is a 404 to it.
    expect(await checklist(b.apiKey)).toMatchObject({ completed: 0, allDone: false, hints: { triggerEnabled: false, taskWaiting: false } });
    const foreign = await api(`/api/v1/workflows/${workflow.id}`, { key: b.apiKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("workflow.not_found");
  });

  it("is for admins: a reviewer's key is refused", async () => {
    const { apiKey } = await newInstallation("onboarding-scopes");
    const reviewer = await created("/api/v1/api-keys", apiKey, { name: "reviewer", scopes: ["review"] });
    const refused = await api("/api/v1/onboarding", { key: reviewer.apiKey });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("auth.scope_missing");
  });
});
