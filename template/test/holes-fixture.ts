// Shared setup of the holes-*.test.ts files: an installation with a work queue, a QA queue, a
// workflow whose human_task opens a task per report, and keys for intake and review.
import { expect } from "vitest";
import { api, edge, newInstallation, publish } from "./helpers";

export const responseSchema = {
  type: "object",
  required: ["outcome"],
  additionalProperties: false,
  properties: { outcome: { enum: ["remove", "keep"] } },
};

export const reviewGraph = (queue: string) => ({
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "review", kind: "human_task", config: { queue_id: queue, response_schema: responseSchema, timeout_seconds: 3600 }, inputMapping: { category: "report.category" } },
    { id: "done", kind: "end", config: { terminal_code: "reviewed" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
  ],
  edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "expired")],
});

export async function holesSetup(name: string) {
  const installation = await newInstallation(name);
  const apiKey = installation.apiKey;
  const work = await api("/api/v1/queues", { key: apiKey, body: { name: "work", slaSeconds: 3600 } });
  const qa = await api("/api/v1/queues", { key: apiKey, body: { name: "second-look", slaSeconds: 3600 } });
  const version = await publish(apiKey, reviewGraph("work"));
  const trigger = await api("/api/v1/triggers", { key: apiKey, body: { event: "report.created", workflowVersionId: version.id, authorityMode: "autonomous" } });
  expect(trigger.status, JSON.stringify(trigger.body)).toBe(201);
  const intake = await api("/api/v1/api-keys", { key: apiKey, body: { name: "product", scopes: ["reports:write"] } });
  const reviewer = await api("/api/v1/api-keys", { key: apiKey, body: { name: "review-tool", scopes: ["review", "read", "personal_data:read"] } });
  const other = await api("/api/v1/api-keys", { key: apiKey, body: { name: "other-tool", scopes: ["review", "read", "personal_data:read"] } });
  return {
    installationId: installation.id,
    apiKey,
    workQueue: work.body.id as string,
    qaQueue: qa.body.id as string,
    versionId: version.id,
    intakeKey: intake.body.apiKey as string,
    reviewKey: reviewer.body.apiKey as string,
    otherKey: other.body.apiKey as string,
  };
}

export type HolesSetup = Awaited<ReturnType<typeof holesSetup>>;

/** Files a report and waits for its open task in the work queue. */
export async function openTask(s: HolesSetup, category = "scams_and_fraud"): Promise<any> {
  const intake = await api("/api/v1/reports", { key: s.intakeKey, body: { subject: { kind: "content", id: `post-${crypto.randomUUID()}`, snapshot: { text: "x" } }, category } });
  expect(intake.status, JSON.stringify(intake.body)).toBe(201);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { body } = await api(`/api/v1/queues/${s.workQueue}/tasks?limit=200`, { key: s.reviewKey });
    const task = body.items.find((t: any) => t.reportId === intake.body.id);
    if (task) return task;
    if (Date.now() > deadline) throw new Error("the task did not appear");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function answer(key: string, taskId: string, reviewer: string | undefined, response: unknown = { outcome: "remove" }) {
  const claimed = await api(`/api/v1/tasks/${taskId}/claim`, { key, body: reviewer ? { reviewer } : {} });
  expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
  const done = await api(`/api/v1/tasks/${taskId}/complete`, { key, body: { ...(reviewer ? { reviewer } : {}), response } });
  expect(done.status, JSON.stringify(done.body)).toBe(200);
  return done.body;
}

/** Every completed task of the work queue is sampled into the QA queue. */
export async function sampleEverything(s: HolesSetup) {
  const set = await api(`/api/v1/queues/${s.workQueue}/qa-settings`, { method: "PUT", key: s.apiKey, body: { qaQueueId: s.qaQueue, rate: 1 } });
  expect(set.status, JSON.stringify(set.body)).toBe(200);
}

export const openIn = async (key: string, queueId: string) => (await api(`/api/v1/queues/${queueId}/tasks?limit=200`, { key })).body.items as any[];
