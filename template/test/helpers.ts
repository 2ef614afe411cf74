// Test helpers: the API through the Worker's own fetch handler, tenants, graphs, run polling.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import { deliveryStatement, enqueueDeliveries } from "../src/enforcement/webhooks";
import { outputRowsSql, STEP_OUTPUT } from "../src/workflows/step-output";

export const ADMIN_TOKEN = "test-admin-token";

export async function api<T = any>(path: string, options: { method?: string; body?: unknown; key?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; body: T; headers: Headers }> {
  const response = await exports.default.fetch(
    new Request(`http://safest.test${path}`, {
      method: options.method ?? (options.body === undefined ? "GET" : "POST"),
      headers: {
        "content-type": "application/json",
        ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }),
    }),
  );
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : null) as T, headers: response.headers };
}

export async function newInstallation(name = "test"): Promise<{ id: string; apiKey: string }> {
  const { status, body } = await api("/api/v1/installations", { body: { name }, key: ADMIN_TOKEN });
  expect(status).toBe(201);
  return body;
}

export async function publish(key: string, graph: unknown, name = `wf-${crypto.randomUUID()}`): Promise<{ id: string; version: number; artifact: { id: string; digest: string } }> {
  const workflow = await api("/api/v1/workflows", { body: { name }, key });
  expect(workflow.status).toBe(201);
  const version = await api(`/api/v1/workflows/${workflow.body.id}/versions`, { body: { graph }, key });
  if (version.status !== 201) throw new Error(`publish failed: ${JSON.stringify(version.body)}`);
  return version.body;
}

export async function startRun(key: string, workflowVersionId: string, options: { authorityMode?: string; input?: unknown; idempotencyKey?: string } = {}) {
  const response = await api("/api/v1/runs", {
    key,
    body: { workflowVersionId, authorityMode: options.authorityMode ?? "autonomous", input: options.input ?? {} },
    ...(options.idempotencyKey ? { headers: { "idempotency-key": options.idempotencyKey } } : {}),
  });
  if (response.status !== 201 && response.status !== 200) throw new Error(`run failed: ${JSON.stringify(response.body)}`);
  return response.body as { id: string; state: string };
}

/** Polls the run until its state is one of `states` (the Workflows engine runs asynchronously). */
export async function waitForRun(key: string, runId: string, states: string[] = ["succeeded", "failed", "repair_required", "terminated"], timeoutMs = 20_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api(`/api/v1/runs/${runId}`, { key });
    if (states.includes(body.state)) return body;
    if (Date.now() > deadline) throw new Error(`run ${runId} stayed ${body.state}: ${JSON.stringify(body).slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Polls until the run has a waiting wait (for event tests). */
export async function waitForWait(key: string, runId: string, timeoutMs = 20_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api(`/api/v1/runs/${runId}`, { key });
    const wait = body.waits?.find((w: any) => w.state === "waiting");
    if (wait) return { run: body, wait };
    if (Date.now() > deadline) throw new Error(`run ${runId} never waited: ${JSON.stringify(body).slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const edge = (from: string, port: string, to: string) => ({ from: { nodeId: from, port }, to: { nodeId: to } });

/** The smallest graph: start, then an end ("done"). */
export const startEndGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "done", kind: "end", config: { terminal_code: "done" } },
  ],
  edges: [edge("start", "success", "done")],
};

/** A message.send delivery of `data` committed and queued as a batch leaves it, then waited for until it was delivered; its id. */
export async function deliverMessage(installationId: string, endpointId: string, data: Record<string, unknown>): Promise<string> {
  const delivery = await deliveryStatement(env, { installationId, endpointId, eventType: "message.send", sourceType: "message", sourceId: `msg-${crypto.randomUUID()}`, data, at: new Date().toISOString() });
  await env.DB.batch([delivery.statement]);
  await enqueueDeliveries(env, [delivery.id]);
  await until(async () => (await env.DB.prepare("SELECT state FROM webhook_deliveries WHERE id = ?1").bind(delivery.id).first<{ state: string }>())?.state === "delivered", `delivery ${delivery.id} delivered`);
  return delivery.id;
}

/** start → an action `remove_post` (postId from input) → an end per port: applied, rejected, expired, failed (its error port). */
export const removePostGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "remove", kind: "action", errorPort: "failed", config: { action_type: "remove_post", approval_timeout_seconds: 3600 }, inputMapping: { postId: "input.postId" } },
    { id: "applied", kind: "end", config: { terminal_code: "applied" } },
    { id: "rejected", kind: "end", config: { terminal_code: "rejected" } },
    { id: "expired", kind: "end", config: { terminal_code: "expired" } },
    { id: "failed", kind: "end", config: { terminal_code: "failed" } },
  ],
  edges: [edge("start", "success", "remove"), edge("remove", "applied", "applied"), edge("remove", "rejected", "rejected"), edge("remove", "expired", "expired"), edge("remove", "failed", "failed")],
};

export function db(): D1Database {
  return env.DB;
}

/** Polls `probe` every 50 ms until it returns something truthy; fails after `timeoutMs` naming `what`. */
export async function until<T>(probe: () => Promise<T | null | undefined | false>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** One request the webhook receiver peer (test/peers/webhook-receiver.ts) got, as its control log lists it. */
export type ReceiverLogEntry = { path: string; webhookId: string; type: string | null; data: any; verified: boolean; status: number | "hung"; at: number };

/** What the webhook receiver peer logged for `path`. */
export async function receiverLog(path: string): Promise<ReceiverLogEntry[]> {
  return (await (await env.RECEIVER.fetch(`http://receiver/_control/log?path=${encodeURIComponent(path)}`)).json()) as ReceiverLogEntry[];
}

/**
 * A reviewer's key of the installation: made for one named person, so its task answers, decisions
 * and appeal outcomes are that person's (a key without a reviewer is automation).
 */
export async function personKey(adminKey: string, reviewer = "Rita Reviewer", scopes = ["admin", "reports:write", "review", "read", "personal_data:read"]): Promise<string> {
  const created = await api("/api/v1/api-keys", { key: adminKey, body: { name: `person-${crypto.randomUUID().slice(0, 8)}`, scopes, reviewer } });
  expect(created.status).toBe(201);
  return created.body.apiKey as string;
}

/**
 * "The step's output" in SQL, for a step row `s` joined with `${STEP_OUTPUT.join}`: `.json` the open
 * view, `.sealed` the sealed part, in either stored form (src/workflows/step-output.ts).
 */
export { STEP_OUTPUT };

/** Gives a step's output a sealed part, as a content-reading node writes it (its size counts it), in whichever form the step stores its output. */
export async function setSealedOutput(stepId: string, sealed: string): Promise<void> {
  await env.DB.batch([
    env.DB.prepare("UPDATE workflow_step_runs SET output_sealed = ?2, output_size = length(CAST(output_json AS BLOB)) + length(CAST(?2 AS BLOB)) WHERE id = ?1 AND output_json IS NOT NULL").bind(stepId, sealed),
    env.DB.prepare(`UPDATE workflow_step_outputs SET sealed_json = ?2, size_bytes = length(CAST(inline_json AS BLOB)) + length(CAST(?2 AS BLOB)), data_classification_json = '["content"]' WHERE step_run_id = ?1`).bind(stepId, sealed),
  ]);
}

/**
 * Moves the outputs of a run's steps to the form a release before migration 0070 wrote (one
 * workflow_step_outputs row each, nothing in the step row), as steps recorded by that release.
 * Answers how many moved.
 */
export async function asOldFormOutputs(runId: string): Promise<number> {
  const [moved] = await env.DB.batch([
    env.DB.prepare(`INSERT INTO workflow_step_outputs (step_run_id, inline_json, digest, size_bytes, data_classification_json, created_at, sealed_json)
      ${outputRowsSql("s.run_id = ?1 AND s.output_json IS NOT NULL")}`).bind(runId),
    env.DB.prepare("UPDATE workflow_step_runs SET output_json = NULL, output_sealed = NULL, output_size = NULL WHERE run_id = ?1").bind(runId),
  ]);
  return moved?.meta.changes ?? 0;
}
