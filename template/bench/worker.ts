// Bench-only Worker (bench/wrangler.jsonc, used by scripts/bench.mjs; never deployed). It is the
// production Worker unchanged — every export of ../src/index.ts — plus a bare Cloudflare Workflow,
// the baseline the platform runtime is measured against: N `step.do`, each with one D1 write.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import platform from "../src/index";
import { timingSafeEqual } from "../src/lib/crypto";

export * from "../src/index";

/** Bindings only the bench config declares (worker-configuration.d.ts covers the production ones). */
interface BenchEnv extends Env {
  BENCH_WORKFLOW: Workflow<BareBenchParams>;
}

interface BareBenchParams {
  steps: number;
}

/** The bare workflow's result: its own clock at the start of step 1 and the end of step N. */
interface BareBenchOutput {
  steps: number;
  startedAt: number;
  finishedAt: number;
}

const MAX_BARE_STEPS = 1_000;

/**
 * N steps, each exactly one D1 write (an audit event; no extra schema). workerd's clock only
 * advances across I/O, so Date.now() is read before the first write and after the last one.
 */
export class BareBenchWorkflow extends WorkflowEntrypoint<BenchEnv, BareBenchParams> {
  override async run(event: Readonly<WorkflowEvent<BareBenchParams>>, step: WorkflowStep): Promise<BareBenchOutput> {
    const steps = event.payload.steps;
    const instanceId = event.instanceId;
    let startedAt = 0;
    let finishedAt = 0;
    for (let index = 1; index <= steps; index++) {
      const times = await step.do(`bench-step-${index}`, async () => {
        const before = Date.now();
        await this.env.DB.prepare(`
          INSERT OR IGNORE INTO audit_events (
            id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at
          ) VALUES (?1, 'bench', ?2, 'bench.step', 'system', 'bench', 'bench_instance', ?3, '{}', ?4)
        `).bind(crypto.randomUUID(), `bench:${instanceId}:${index}`, instanceId, new Date(before).toISOString()).run();
        return { before, after: Date.now() };
      });
      if (index === 1) startedAt = times.before;
      finishedAt = times.after;
    }
    return { steps, startedAt, finishedAt };
  }
}

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

/** POST /bench/bare {steps} creates an instance; GET /bench/bare/:id reports its status and times. */
async function benchRoute(request: Request, env: BenchEnv, url: URL): Promise<Response> {
  const token = /^Bearer\s+(\S+)$/u.exec(request.headers.get("authorization") ?? "")?.[1];
  if (!env.ADMIN_TOKEN || !token || !timingSafeEqual(token, env.ADMIN_TOKEN)) return json({ error: { code: "auth.unauthenticated" } }, 401);
  if (request.method === "POST" && url.pathname === "/bench/bare") {
    const body = (await request.json().catch(() => null)) as { steps?: unknown } | null;
    const steps = Number(body?.steps);
    if (!Number.isInteger(steps) || steps < 1 || steps > MAX_BARE_STEPS) return json({ error: { code: "bench.steps_invalid" } }, 400);
    const instance = await env.BENCH_WORKFLOW.create({ params: { steps } });
    return json({ id: instance.id }, 201);
  }
  const match = /^\/bench\/bare\/([A-Za-z0-9_-]{1,100})$/u.exec(url.pathname);
  if (request.method === "GET" && match) {
    const instance = await env.BENCH_WORKFLOW.get(match[1]!);
    const status = await instance.status();
    return json({ id: instance.id, status: status.status, output: status.output ?? null, error: status.error ?? null });
  }
  return json({ error: { code: "route.not_found" } }, 404);
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/bench" || url.pathname.startsWith("/bench/")) return benchRoute(request, env, url);
    return platform.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<BenchEnv>;
