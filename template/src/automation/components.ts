// Components: versioned, read-only code (an ES module exporting `run(input, context)`) executed in
// a Worker Loader sandbox. Its only egress is ComponentEgress, a host-side proxy that allows the
// hosts the version declares and counts subrequests; it has no bindings, so no database access.
import { WorkerEntrypoint } from "cloudflare:workers";
import { auditStatement } from "../audit";
import type { Actor } from "../auth";
import { AppError, conflict, notFound } from "../errors";
import { byteLength, newId, sha256Hex } from "../lib/crypto";
import { allowLocalEgress, egressRefusal } from "../lib/egress";
import { isUniqueViolation } from "../lib/d1";
import type { JsonValue } from "../workflows";

export const MAX_COMPONENT_SOURCE_BYTES = 262_144;
const COMPATIBILITY_DATE = "2026-04-01";
const INVOCATION_HEADER = "x-safest-invocation";

/** A component failure with a stable code; `retryable` decides between retries and the error port. */
export class ComponentExecutionError extends AppError {
  constructor(code: string, retryable: boolean, message = `Component execution failed (${code}).`) {
    super(code, message, { status: 422, retryable });
    this.name = "ComponentExecutionError";
  }
}

interface Invocation {
  allowedHosts: string[];
  maxSubrequests: number;
  subrequests: number;
  refusals: Array<{ host: string; reason: "host_not_allowed" | "redirect_not_allowed" | "address_not_allowed" | "subrequest_limit" }>;
}

// Live invocations, keyed by a random token the sandbox's fetch carries. Egress without a live
// token is refused, so a component cannot reach the network outside its own invocation.
const invocations = new Map<string, Invocation>();

function hostAllowed(host: string, allowed: string[]): boolean {
  return allowed.some((pattern) => pattern === host || (pattern.startsWith("*.") && host.endsWith(pattern.slice(1))));
}

const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/**
 * The sandbox's globalOutbound: every fetch() a component makes arrives here first. Each request
 * and each redirect hop must go to a host the version declares and pass the egress checker (no
 * loopback, private, link-local or metadata address, https unless ALLOW_LOCAL_EGRESS), and counts
 * as a subrequest. Redirects are followed here (at most MAX_REDIRECTS), never by fetch() itself,
 * so that a declared host cannot bounce the request elsewhere; a component that asks for
 * `redirect: "manual"` gets the 3xx itself, and its next request is checked like any other.
 */
export class ComponentEgress extends WorkerEntrypoint<Env> {
  override async fetch(request: Request): Promise<Response> {
    const token = request.headers.get(INVOCATION_HEADER) ?? "";
    const invocation = invocations.get(token);
    if (!invocation) return new Response("egress refused: no live invocation", { status: 403 });
    const allowLocal = allowLocalEgress(this.env);
    const headers = new Headers(request.headers);
    headers.delete(INVOCATION_HEADER);
    // The body is read once so that a 307/308 hop can send it again.
    let body: ArrayBuffer | null = request.body ? await request.arrayBuffer() : null;
    let method = request.method;
    let url = new URL(request.url);
    for (let hop = 0; ; hop++) {
      if (!hostAllowed(url.hostname, invocation.allowedHosts)) {
        invocation.refusals.push({ host: url.hostname, reason: hop === 0 ? "host_not_allowed" : "redirect_not_allowed" });
        return new Response(`egress refused: ${hop === 0 ? "host" : "redirect to a host"} not declared by this component version`, { status: 403 });
      }
      if (egressRefusal(url, { allowLocal })) {
        invocation.refusals.push({ host: url.hostname, reason: "address_not_allowed" });
        return new Response("egress refused: the address is loopback, private, link-local or metadata, or not https", { status: 403 });
      }
      invocation.subrequests += 1;
      if (invocation.subrequests > invocation.maxSubrequests) {
        invocation.refusals.push({ host: url.hostname, reason: "subrequest_limit" });
        return new Response("egress refused: subrequest limit reached", { status: 429 });
      }
      const response = await fetch(url, { method, headers, body, redirect: "manual", signal: request.signal });
      const location = response.headers.get("location");
      if (!REDIRECT_STATUSES.has(response.status) || location === null || request.redirect === "manual") return response;
      if (request.redirect === "error" || hop >= MAX_REDIRECTS) {
        await response.body?.cancel();
        return new Response("egress refused: too many redirects", { status: 502 });
      }
      await response.body?.cancel();
      const next = new URL(location, url);
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === "POST")) {
        method = method === "HEAD" ? "HEAD" : "GET";
        body = null;
        headers.delete("content-type");
        headers.delete("content-length");
      }
      // As fetch() does across origins: credentials stay with the origin they were meant for.
      if (next.origin !== url.origin) for (const name of ["authorization", "cookie", "proxy-authorization"]) headers.delete(name);
      url = next;
    }
  }
}

// The sandbox's main module: it tags the component's fetch() with the invocation token and calls
// its `run`. Only `invoke` is reachable from the host.
const HOST_MODULE = `
import { WorkerEntrypoint } from "cloudflare:workers";
import * as component from "./component.js";
const baseFetch = globalThis.fetch;
let token = "";
globalThis.fetch = (input, init) => {
  const request = new Request(input, init);
  request.headers.set(${JSON.stringify(INVOCATION_HEADER)}, token);
  return baseFetch(request);
};
export default class ComponentHost extends WorkerEntrypoint {
  async invoke(invocationToken, input, context) {
    if (typeof component.run !== "function") throw new Error("component_run_missing");
    token = invocationToken;
    try {
      return await component.run(input, context);
    } finally {
      token = "";
    }
  }
}`;

export interface ComponentVersionRow {
  id: string;
  componentId: string;
  name: string;
  version: number;
  sourceText: string;
  digest: string;
  allowedHostsJson: string;
  maxSubrequests: number;
  timeoutMs: number;
  createdAt: string;
}

const VERSION_COLUMNS = `v.id, v.component_id AS componentId, c.name, v.version, v.source_text AS sourceText, v.digest,
  v.allowed_hosts_json AS allowedHostsJson, v.max_subrequests AS maxSubrequests, v.timeout_ms AS timeoutMs, v.created_at AS createdAt`;

export function getComponentVersionRow(db: D1Database, installationId: string, versionId: string): Promise<ComponentVersionRow | null> {
  return db.prepare(`SELECT ${VERSION_COLUMNS} FROM component_versions v JOIN components c ON c.id = v.component_id WHERE v.installation_id = ?1 AND v.id = ?2`).bind(installationId, versionId).first<ComponentVersionRow>();
}

export async function createComponent(env: Env, actor: Actor, input: { name: string; description?: string }) {
  const id = newId("cmp");
  const at = new Date().toISOString();
  try {
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO components (id, installation_id, name, description, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)`).bind(id, actor.installationId, input.name, input.description ?? null, at),
      auditStatement(env.DB, {
        installationId: actor.installationId,
        idempotencyKey: `component:${id}:created`,
        action: "component.created",
        actor: actor.audit,
        target: { type: "component", id },
        details: { name: input.name },
        at,
      }),
    ]);
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("component.name_taken", "A component with this name already exists.");
    throw error;
  }
  return { id, name: input.name, description: input.description ?? null, createdAt: at };
}

/** Publishes an immutable version; its digest (sha256 of the exact source) is checked at every load. */
export async function publishComponentVersion(env: Env, actor: Actor, componentId: string, input: { source: string; allowedHosts?: string[]; maxSubrequests?: number; timeoutMs?: number }) {
  const component = await env.DB.prepare(`SELECT id, name FROM components WHERE installation_id = ?1 AND id = ?2`).bind(actor.installationId, componentId).first<{ id: string; name: string }>();
  if (!component) throw notFound("component");
  if (byteLength(input.source) > MAX_COMPONENT_SOURCE_BYTES) throw new AppError("component.source_too_large", "A component's source may be at most 256 KiB.", { status: 413 });
  const hosts = (input.allowedHosts ?? []).map((host) => host.toLowerCase());
  // A declared host that names this machine, a private or link-local network or a metadata service
  // is refused here as it would be at every call (`*.x` is checked as a name under x).
  for (const [index, host] of hosts.entries()) {
    const refusal = egressRefusal(`https://${host.replace(/^\*\./u, "any.")}/`, { allowLocal: allowLocalEgress(env) });
    if (refusal) {
      throw new AppError("component.host_not_allowed", `allowedHosts[${index}]: ${refusal.message}`, { status: 422, details: { field: `allowedHosts[${index}]`, reason: refusal.reason, host: refusal.host } });
    }
  }
  const id = newId("cmv");
  const digest = `sha256:${await sha256Hex(input.source)}`;
  const at = new Date().toISOString();
  await env.DB.batch([
    env.DB.prepare(`
      INSERT INTO component_versions (id, installation_id, component_id, version, source_text, digest, allowed_hosts_json, max_subrequests, timeout_ms, created_at)
      SELECT ?1, ?2, ?3, COALESCE(MAX(version), 0) + 1, ?4, ?5, ?6, ?7, ?8, ?9 FROM component_versions WHERE component_id = ?3
    `).bind(id, actor.installationId, componentId, input.source, digest, JSON.stringify(hosts), input.maxSubrequests ?? 5, input.timeoutMs ?? 5_000, at),
    auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `component_version:${id}:published`,
      action: "component.version_published",
      actor: actor.audit,
      target: { type: "component_version", id },
      details: { componentId, name: component.name, digest, allowedHosts: hosts },
      at,
    }),
  ]);
  const row = (await getComponentVersionRow(env.DB, actor.installationId, id))!;
  return { id: row.id, componentId, version: row.version, digest, allowedHosts: hosts, maxSubrequests: row.maxSubrequests, timeoutMs: row.timeoutMs, createdAt: at };
}

export async function listComponents(env: Env, actor: Actor) {
  const { results } = await env.DB.prepare(`
    SELECT c.id, c.name, c.description, c.created_at AS createdAt,
      (SELECT json_group_array(json_object('id', v.id, 'version', v.version, 'digest', v.digest)) FROM component_versions v WHERE v.component_id = c.id) AS versionsJson
    FROM components c WHERE c.installation_id = ?1 ORDER BY c.name`)
    .bind(actor.installationId)
    .all<{ versionsJson: string }>();
  return results.map(({ versionsJson, ...row }) => ({ ...row, versions: JSON.parse(versionsJson) as unknown[] }));
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => {
      if (timer !== undefined) clearTimeout(timer);
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ComponentExecutionError("component.timeout", true, "The component did not answer in time.")), ms);
    }),
  ]);
}

/**
 * Runs a component version on the node's mapped input. The digest is verified before loading;
 * a refused egress fails the call even if the component swallowed the refusal. The timeout is
 * wall-clock: locally a CPU-bound component is not interrupted (Worker Loader limits apply on
 * Cloudflare only).
 */
export async function executeComponentVersion(
  env: Env,
  ctx: ExecutionContext,
  input: { installationId: string; componentVersionId: string; input: JsonValue; context: Record<string, JsonValue> },
): Promise<{ data: JsonValue; subrequests: number; latencyMs: number; componentVersionId: string; digest: string }> {
  const row = await getComponentVersionRow(env.DB, input.installationId, input.componentVersionId);
  if (!row) throw new ComponentExecutionError("component_version.unknown", false, "The component version does not exist in this installation.");
  if (`sha256:${await sha256Hex(row.sourceText)}` !== row.digest) throw new ComponentExecutionError("component.digest_mismatch", false, "The component's source does not match its digest.");
  const allowedHosts = JSON.parse(row.allowedHostsJson) as string[];
  const stub = env.LOADER.get(`component:${row.id}:${row.digest.slice(7, 39)}`, () => ({
    compatibilityDate: COMPATIBILITY_DATE,
    mainModule: "host.js",
    modules: { "host.js": HOST_MODULE, "component.js": row.sourceText },
    env: {},
    globalOutbound: ctx.exports.ComponentEgress({ props: {} }),
    limits: { cpuMs: 5_000, subRequests: row.maxSubrequests },
  }));
  const token = crypto.randomUUID();
  const invocation: Invocation = { allowedHosts, maxSubrequests: row.maxSubrequests, subrequests: 0, refusals: [] };
  invocations.set(token, invocation);
  const started = Date.now();
  let data: unknown;
  try {
    const entry = stub.getEntrypoint() as unknown as { invoke(token: string, input: JsonValue, context: Record<string, JsonValue>): Promise<unknown> };
    data = await withTimeout(entry.invoke(token, input.input, input.context), row.timeoutMs);
  } catch (error) {
    if (error instanceof ComponentExecutionError) throw error;
    if (invocation.refusals.length > 0) throw refusalError(invocation);
    const message = error instanceof Error ? error.message : "";
    if (message.startsWith("retryable:")) throw new ComponentExecutionError("component.failed", true);
    throw new ComponentExecutionError(message === "component_run_missing" ? "component_run_missing" : "component.failed", false);
  } finally {
    invocations.delete(token);
  }
  if (invocation.refusals.length > 0) throw refusalError(invocation);
  let json: JsonValue;
  try {
    json = JSON.parse(JSON.stringify(data ?? null)) as JsonValue;
  } catch {
    throw new ComponentExecutionError("component.output_invalid", false, "The component returned something that is not JSON.");
  }
  return { data: json, subrequests: invocation.subrequests, latencyMs: Date.now() - started, componentVersionId: row.id, digest: row.digest };
}

function refusalError(invocation: Invocation): ComponentExecutionError {
  const first = invocation.refusals[0]!;
  if (first.reason === "host_not_allowed") return new ComponentExecutionError("component.egress_denied", false, "The component tried to reach a host its version does not declare.");
  if (first.reason === "redirect_not_allowed") return new ComponentExecutionError("component.egress_denied", false, "A declared host redirected the component to a host its version does not declare.");
  if (first.reason === "address_not_allowed") return new ComponentExecutionError("component.egress_denied", false, "The component tried to reach a loopback, private, link-local or metadata address, or plain http.");
  return new ComponentExecutionError("component.subrequest_limit", false, "The component made more subrequests than its version allows.");
}
