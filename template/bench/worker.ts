// Bench-only Worker (bench/wrangler.jsonc, used by scripts/bench.mjs; never deployed). It is the
// production Worker unchanged — every export of ../src/index.ts — plus a bare Cloudflare Workflow,
// the baseline the platform runtime is measured against: N `step.do`, each with one D1 write; a
// `Server-Timing: app;dur=<ms>` header on every platform response; /bench routes that time the
// parts of report intake and a D1 round trip; /bench routes that seed a review queue with many
// open tasks and show the query plan of the queue listing; and /bench routes for the costs of an
// action (a bare signed webhook POST; the recorded times of autonomous actions), of a component
// call made directly in the host, and of loading a node's context; /bench/audit-seed appends many
// chained, MAC'd audit events in bulk (for /audit/verify at 10,000 and 100,000 events). GET /bench/floor is the
// platform's own GET / (the console's assets answer / itself), for the HTTP floor. Every D1
// statement the platform sends goes through a counting wrapper (bench/d1-count.ts), read through
// /bench/d1-tally, for the capacity section's queries and rows written per lifecycle.
import { UNFOLDED_TASKS_SQL } from "../src/cases/wellness/exposure-fold";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { canonicalJson } from "../src/audit";
import { type AuditRow, eventHash, GENESIS_HASH, sealAuditChain } from "../src/audit/chain";
import { entryMacText } from "../src/audit/events";
import { auditKeys } from "../src/audit/keys";
import { auditEventId, readHash, storeCreatedAt, storeHash, storeMac } from "../src/audit/stored";
import { expressionBudget } from "./expression-budget";
import { seedTdbDecisions } from "./tdb";
import { seedTransparency, transparencyPlans } from "./treport";
import { seedSearch } from "./search";
import { executeBuiltin } from "../src/automation/builtins";
import { executeComponentVersion, getComponentVersionRow } from "../src/automation/components";
import { sealPersonalData } from "../src/cases/reports/report-crypto";
import { personKey } from "../src/lib/person-keys";
import { LAPSED_LEASES_SQL } from "../src/cases/queues/task-records";
import { SLA_BREACHES_SQL } from "../src/operations/alerts";
import { ARCHIVABLE_RUNS_SQL } from "../src/workflows/run-archive";
import { MOVABLE_DELIVERIES_SQL } from "../src/enforcement/delivery-archive";
import { PENDING_DISPATCH_SQL } from "../src/workflows/run-dispatch";
import { EXPIRED_WAITS_SQL, STALLED_LIVE_SQL, STALLED_WAITING_SQL } from "../src/workflows/sweeps";
import { intakeReport, type ReportInput } from "../src/cases/reports/reports";
import { COUNTER_SHARDS, counterShard } from "../src/detection/counters";
import { fireTriggers } from "../src/cases/triggers/triggers";
import type { Actor } from "../src/http/auth";
import { installationDeleteStatements } from "../src/installations/backup";
import { schemas } from "../src/http/schemas";
import { validateBody } from "../src/http/validate";
import { DAILY_SQL, HOURLY_SQL } from "../src/metrics/query";
import { METRIC_NAMES, rollupDayStatements } from "../src/metrics/rollup";
import platform, {
  ComponentEgress as PlatformComponentEgress,
  DynamicWorkflow as PlatformDynamicWorkflow,
  SandboxWorkflowBinding as PlatformSandboxWorkflowBinding,
  WorkflowRuntimeCapability as PlatformWorkflowRuntimeCapability,
} from "../src/index";
import { closeTally, countedEnv, openTally } from "./d1-count";
import { sha256Hex, timingSafeEqual } from "../src/lib/crypto";
import { loadWorkflowExecutionContext } from "../src/workflows/execution-context";
import type { AuthorizedRun } from "../src/workflows/runtime-authorize";
import type { JsonObject, WorkflowNodeV1 } from "../src/workflows/types";
import { parseWorkflowGraph } from "../src/workflows/validation";

export * from "../src/index";

// The platform's entrypoint classes, each handed an env whose DB counts statements while a tally is
// open (bench/d1-count.ts). These local exports take the place of the ones `export *` re-exports,
// so the Workflows engine, ctx.exports and the sandboxes' bindings construct these.
export class DynamicWorkflow extends PlatformDynamicWorkflow {
  constructor(...[ctx, env]: ConstructorParameters<typeof PlatformDynamicWorkflow>) {
    super(ctx, countedEnv(env, "workflow"));
  }
}
export class WorkflowRuntimeCapability extends PlatformWorkflowRuntimeCapability {
  constructor(...[ctx, env]: ConstructorParameters<typeof PlatformWorkflowRuntimeCapability>) {
    super(ctx, countedEnv(env, "capability"));
  }
}
export class SandboxWorkflowBinding extends PlatformSandboxWorkflowBinding {
  constructor(...[ctx, env]: ConstructorParameters<typeof PlatformSandboxWorkflowBinding>) {
    super(ctx, countedEnv(env, "sandbox-binding"));
  }
}
export class ComponentEgress extends PlatformComponentEgress {
  constructor(...[ctx, env]: ConstructorParameters<typeof PlatformComponentEgress>) {
    super(ctx, countedEnv(env, "component-egress"));
  }
}

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
        `)
          .bind(crypto.randomUUID(), `bench:${instanceId}:${index}`, instanceId, new Date(before).toISOString())
          .run();
        return { before, after: Date.now() };
      });
      if (index === 1) startedAt = times.before;
      finishedAt = times.after;
    }
    return { steps, startedAt, finishedAt };
  }
}

// ---------------------------------------------------------------------------------------------
// Queue listing: seeding and the query plan

/**
 * The listing query of listQueueTasks (src/cases/queues/tasks.ts), copied verbatim: COLUMNS and the
 * statement with `${TASK_COLUMNS}` in place. scripts/bench.mjs fails when tasks.ts no longer holds
 * this text (whitespace aside), so the plan shown is the plan of the query the API runs.
 */
const LISTING_COLUMNS = `id, queue_id AS queueId, run_id AS runId, COALESCE(human_tasks.step_run_id, CASE WHEN human_tasks.origin = 'workflow' THEN substr(human_tasks.id, 1, length(human_tasks.id) - 5) END) AS stepRunId, report_id AS reportId, appeal_id AS appealId,
  task_type AS taskType, state, priority, context_json AS contextJson, context_sealed AS contextSealed,
  COALESCE((SELECT s.schema_json FROM task_response_schemas s WHERE s.installation_id = human_tasks.installation_id AND s.number = human_tasks.response_schema_number), human_tasks.response_schema_json) AS responseSchemaJson,
  response_json AS responseJson, due_at AS dueAt, expires_at AS expiresAt, claimed_by AS claimedBy, claimed_at AS claimedAt,
  lease_expires_at AS leaseExpiresAt, (CASE human_tasks.completed_by WHEN '' THEN human_tasks.claimed_by ELSE human_tasks.completed_by END) AS completedBy,
  completed_at AS completedAt, created_at AS createdAt, origin`;
const LISTING_TEMPLATE = `
    SELECT \${TASK_COLUMNS} FROM human_tasks
    WHERE installation_id = ?1 AND queue_id = ?2 AND state = ?3 AND (?3 <> 'claimed' OR lease_expires_at > ?8)
      AND due_at >= ?4 AND (due_at > ?4 OR (due_at = ?4 AND (priority < ?5 OR (priority = ?5 AND id > ?6))))
    UNION ALL
    SELECT \${TASK_COLUMNS} FROM human_tasks
    WHERE installation_id = ?1 AND queue_id = ?2 AND state = 'claimed' AND ?3 = 'open' AND lease_expires_at <= ?8
      AND due_at >= ?4 AND (due_at > ?4 OR (due_at = ?4 AND (priority < ?5 OR (priority = ?5 AND id > ?6))))
    ORDER BY dueAt, priority DESC, id LIMIT ?7
  `;
// biome-ignore lint/suspicious/noTemplateCurlyInString: "${TASK_COLUMNS}" is the placeholder LISTING_TEMPLATE spells out literally, replaced here
const LISTING_SQL = LISTING_TEMPLATE.replaceAll("${TASK_COLUMNS}", LISTING_COLUMNS);

/** The review schema the tasks carry (the one test/cases.test.ts uses), as the runtime stores it. */
const REVIEW_SCHEMA_JSON = JSON.stringify({
  additionalProperties: false,
  properties: { note: { maxLength: 500, type: "string" }, verdict: { enum: ["remove", "keep"] } },
  required: ["verdict"],
  type: "object",
});

const MAX_SEED_CHUNK = 50_000;

interface SeedBody {
  installationId?: unknown;
  queueId?: unknown;
  workflowVersionId?: unknown;
  from?: unknown;
  count?: unknown;
}

/** Whether D1 refuses a human_tasks row whose run and step do not exist (nothing is kept either way). */
async function foreignKeysEnforced(env: BenchEnv, installationId: string, queueId: string): Promise<boolean> {
  const id = `task_bench_fk_probe_${crypto.randomUUID()}`;
  try {
    await env.DB.prepare(`
      INSERT INTO human_tasks (id, installation_id, run_id, step_run_id, task_type, state, queue_id, context_json, context_digest,
        response_schema_json, due_at, created_at, updated_at)
      VALUES (?1, ?2, 'run_bench_missing', ?3, 'review', 'cancelled', ?4, '{}', 'sha256:0', '{}', '2000-01-01T00:00:00.000Z', '2000-01-01T00:00:00.000Z', '2000-01-01T00:00:00.000Z')
    `)
      .bind(id, installationId, `sr_bench_missing_${id}`, queueId)
      .run();
  } catch (error) {
    if (/FOREIGN KEY/iu.test(String(error))) return true;
    throw error;
  }
  await env.DB.prepare(`DELETE FROM human_tasks WHERE id = ?1`).bind(id).run();
  return false;
}

/**
 * Inserts tasks [from, from + count) of a bench queue: one waiting run (first chunk), one waiting
 * step row per task (human_tasks.step_run_id is UNIQUE and REFERENCES workflow_step_runs), and the
 * open task itself. due_at is spread over ~14 days at minute granularity starting 2 days ago (so
 * some are past their SLA and several tasks share a due_at), priority 0-100, ids random as in
 * production. Two INSERT … SELECT over a recursive CTE, in one D1 batch.
 */
async function seedQueue(env: BenchEnv, body: SeedBody): Promise<Response> {
  const { installationId, queueId, workflowVersionId } = body;
  const from = Number(body.from);
  const count = Number(body.count);
  if (typeof installationId !== "string" || typeof queueId !== "string" || typeof workflowVersionId !== "string" || !Number.isInteger(from) || from < 0 || !Number.isInteger(count) || count < 1 || count > MAX_SEED_CHUNK) {
    return json({ error: { code: "bench.seed_invalid" } }, 400);
  }
  const runId = `run_bench_${queueId}`;
  const at = new Date().toISOString();
  const base = Math.floor(Date.now() / 60_000) * 60 - 2 * 86_400; // seconds, on a minute
  const foreignKeys = from === 0 ? await foreignKeysEnforced(env, installationId, queueId) : null;
  const numbers = `WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)`;
  const [, steps, tasks] = await env.DB.batch([
    env.DB.prepare(`
      INSERT OR IGNORE INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, input_json, queue_id, current_node_id,
        created_at, started_at, waiting_at, updated_at)
      VALUES (?1, ?2, ?3, 'autonomous', 'waiting', '{}', ?4, 'review', ?5, ?5, ?5, ?5)
    `).bind(runId, installationId, workflowVersionId, queueId, at),
    env.DB.prepare(`
      INSERT INTO workflow_step_runs (id, run_id, node_id, node_type, branch_key, occurrence, state, started_at, waiting_at, updated_at)
      ${numbers}
      SELECT ?3 || i, ?4, 'review_' || i, 'human_task', '', 1, 'waiting', ?5, ?5, ?5 FROM n
    `).bind(from, from + count - 1, `sr_bench_${queueId}_`, runId, at),
    env.DB.prepare(`
      INSERT INTO human_tasks (id, installation_id, report_id, appeal_id, run_id, step_run_id, task_type, state, queue_id, priority,
        context_json, context_digest, response_schema_json, due_at, expires_at, created_at, updated_at)
      ${numbers}
      SELECT 'task_' || lower(hex(randomblob(16))), ?3, NULL, NULL, ?4, ?5 || i, 'review', 'open', ?6, (i * 37) % 101,
        '{"category":"scams_and_fraud","subject":"post-' || i || '"}', 'sha256:' || lower(hex(randomblob(32))), ?7,
        strftime('%Y-%m-%dT%H:%M:%fZ', ?8 + ((i * 7919) % 20160) * 60, 'unixepoch'),
        strftime('%Y-%m-%dT%H:%M:%fZ', ?8 + 30 * 86400, 'unixepoch'), ?9, ?9
      FROM n
    `).bind(from, from + count - 1, installationId, runId, `sr_bench_${queueId}_`, queueId, REVIEW_SCHEMA_JSON, base, at),
  ]);
  return json({ steps: steps!.meta.changes, tasks: tasks!.meta.changes, foreignKeysEnforced: foreignKeys });
}

/**
 * The scheduled sweep over a seeded queue: POST /bench/sweep-lapse {queueId, count} gives `count`
 * of its open tasks a lease that lapsed an hour ago; POST /bench/sweep-plans {installationId} is
 * EXPLAIN QUERY PLAN of each sweep's selection (the very statements the sweeps run, imported);
 * POST /bench/sweep-runs {since} the sweep_runs rows of the first scheduled run recorded since then.
 */
async function lapseLeases(env: BenchEnv, body: { queueId?: unknown; count?: unknown }): Promise<Response> {
  const count = Number(body.count);
  if (typeof body.queueId !== "string" || !Number.isInteger(count) || count < 1 || count > 10_000) return json({ error: { code: "bench.lapse_invalid" } }, 400);
  const lapsed = new Date(Date.now() - 3_600_000).toISOString();
  const result = await env.DB.prepare(`UPDATE human_tasks SET state = 'claimed', claimed_by = 'bench', claimed_at = ?2, lease_expires_at = ?2
    WHERE id IN (SELECT id FROM human_tasks WHERE queue_id = ?1 AND state = 'open' ORDER BY id LIMIT ?3)`)
    .bind(body.queueId, lapsed, count)
    .run();
  return json({ lapsed: result.meta.changes });
}

const SWEEP_PLANS: Record<string, { sql: string; index: string; binds: (now: string, installationId: string) => unknown[] }> = {
  "cases.lapsed_leases": { sql: LAPSED_LEASES_SQL, index: "human_tasks_lease", binds: (now) => [now, 200] },
  "workflows.redispatch": { sql: PENDING_DISPATCH_SQL, index: "workflow_runs_dispatch", binds: (now) => [now, 25] },
  "workflows.expired_waits": { sql: EXPIRED_WAITS_SQL, index: "workflow_waits_deadline", binds: (now) => [now, 100] },
  "workflows.stalled_runs (live)": { sql: STALLED_LIVE_SQL, index: "workflow_runs_live", binds: (now) => [now, 100] },
  "workflows.stalled_runs (waiting)": { sql: STALLED_WAITING_SQL, index: "workflow_waits_deadline", binds: (now) => [now, 100] },
  "workflows.archive_runs": { sql: ARCHIVABLE_RUNS_SQL, index: "workflow_runs_archivable", binds: (now) => [now, 50, null] },
  "cases.fold_exposure": { sql: UNFOLDED_TASKS_SQL, index: "human_tasks_exposure_unfolded", binds: (now) => [500, now] },
  "enforcement.delivery_archive": { sql: MOVABLE_DELIVERIES_SQL, index: "webhook_deliveries_settled_hot", binds: (now) => [now, 50, null] },
  "operations.alerts (sla)": { sql: SLA_BREACHES_SQL, index: "human_tasks_open_due", binds: (now, installationId) => [installationId, new Date(Date.parse(now) - 60_000).toISOString(), now] },
};

async function sweepPlans(env: BenchEnv, body: { installationId?: unknown }): Promise<Response> {
  if (typeof body.installationId !== "string") return json({ error: { code: "bench.plan_invalid" } }, 400);
  const now = new Date().toISOString();
  const plans: Record<string, { index: string; plan: { id: number; parent: number; detail: string }[] }> = {};
  for (const [name, { sql, index, binds }] of Object.entries(SWEEP_PLANS)) {
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .bind(...binds(now, body.installationId))
      .all<{ id: number; parent: number; detail: string }>();
    plans[name] = { index, plan: results.map((row) => ({ id: row.id, parent: row.parent, detail: row.detail })) };
  }
  return json({ plans });
}

/** The rows of the first scheduled run recorded at or after `since` (the scheduled time the handler got). */
async function sweepRunsAt(env: BenchEnv, body: { since?: unknown }): Promise<Response> {
  if (typeof body.since !== "string") return json({ error: { code: "bench.sweep_runs_invalid" } }, 400);
  const { results } = await env.DB.prepare(`SELECT name, ran_at AS ranAt, ok, counts_json AS counts, ms, error FROM sweep_runs
    WHERE ran_at = (SELECT MIN(ran_at) FROM sweep_runs WHERE ran_at >= ?1) ORDER BY id`)
    .bind(body.since)
    .all();
  return json({ runs: results.map((row) => ({ ...row, counts: JSON.parse(String(row.counts)) as unknown })) });
}

interface CursorInput {
  dueAt: string;
  priority: number;
  id: string;
}

/** EXPLAIN QUERY PLAN of the listing query with the binds listQueueTasks would use. */
async function explainListing(env: BenchEnv, body: { installationId?: unknown; queueId?: unknown; cursor?: CursorInput | null; limit?: unknown }): Promise<Response> {
  const { installationId, queueId } = body;
  if (typeof installationId !== "string" || typeof queueId !== "string") return json({ error: { code: "bench.plan_invalid" } }, 400);
  const after = body.cursor ?? null;
  const limit = Number(body.limit ?? 50);
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${LISTING_SQL}`)
    .bind(installationId, queueId, "open", after?.dueAt ?? "", after?.priority ?? 101, after?.id ?? "", limit + 1, new Date().toISOString())
    .all<{ id: number; parent: number; detail: string }>();
  return json({ plan: results.map((row) => ({ id: row.id, parent: row.parent, detail: row.detail })), columns: LISTING_COLUMNS, template: LISTING_TEMPLATE });
}

/** The listing keys (due_at, priority, id) of the open tasks at the given offsets, to build deep cursors. */
async function listingKeysAt(env: BenchEnv, body: { installationId?: unknown; queueId?: unknown; offsets?: unknown }): Promise<Response> {
  const { installationId, queueId, offsets } = body;
  if (typeof installationId !== "string" || typeof queueId !== "string" || !Array.isArray(offsets) || offsets.length > 100 || !offsets.every((value) => Number.isInteger(value) && value >= 0))
    return json({ error: { code: "bench.offsets_invalid" } }, 400);
  const statement = env.DB.prepare(`
    SELECT due_at AS dueAt, priority, id FROM human_tasks WHERE installation_id = ?1 AND queue_id = ?2 AND state = 'open'
    ORDER BY due_at, priority DESC, id LIMIT 1 OFFSET ?3
  `);
  const rows = await env.DB.batch<CursorInput>((offsets as number[]).map((offset) => statement.bind(installationId, queueId, offset)));
  return json({ keys: rows.map((result) => result.results[0] ?? null) });
}

// ---------------------------------------------------------------------------------------------
// Report intake: where the time goes

const MAX_PROFILE_ROUNDS = 500;

/**
 * The parts of POST /api/v1/reports run one after another, `rounds` times each, in this isolate
 * and without HTTP, auth or Hono: ms per call, by the clock around them. Pure CPU parts are also
 * bracketed by two D1 round trips (one subtracted), so they are right even where the clock only
 * moves across I/O.
 */
async function profileIntake(env: BenchEnv, ctx: ExecutionContext, body: { installationId?: unknown; rounds?: unknown; tag?: unknown; report?: unknown }): Promise<Response> {
  const { installationId, tag } = body;
  const rounds = Number(body.rounds);
  if (typeof installationId !== "string" || typeof tag !== "string" || !Number.isInteger(rounds) || rounds < 1 || rounds > MAX_PROFILE_ROUNDS) {
    return json({ error: { code: "bench.profile_invalid" } }, 400);
  }
  const report = validateBody<ReportInput>(schemas.CreateReport, body.report);
  const actor: Actor = { installationId, scopes: ["reports:write"], audit: { type: "api_key", id: "bench-profile" } };
  const ping = () => env.DB.prepare(`SELECT 1 AS one`).first();
  const timedIo = async (run: (round: number) => Promise<unknown>) => {
    await ping();
    const began = Date.now();
    for (let round = 0; round < rounds; round++) await run(round);
    return (Date.now() - began) / rounds;
  };
  const d1PingMs = await timedIo(() => ping());
  const timedCpu = async (run: (round: number) => unknown) => {
    await ping();
    const began = Date.now();
    for (let round = 0; round < rounds; round++) await run(round);
    await ping();
    return Math.max(0, (Date.now() - began - d1PingMs) / rounds);
  };
  const personal = {
    reporter: report.reporter ?? null,
    description: report.description ?? null,
    subjectUrl: report.subject.url ?? null,
    subjectOwnerId: report.subject.ownerId ?? null,
    snapshot: report.subject.snapshot ?? null,
    evidence: report.evidence ?? [],
  };
  const plain = new TextEncoder().encode(JSON.stringify(personal));
  const aesKey = (await crypto.subtle.generateKey({ name: "AES-GCM", length: 256 }, false, ["encrypt"])) as CryptoKey;
  // JSON text → validated body, as readJson + validateBody do for each request.
  const reportText = JSON.stringify(body.report);
  const validate = await timedCpu(() => validateBody(schemas.CreateReport, JSON.parse(reportText)));
  const digest = await timedCpu(async () => sha256Hex(canonicalJson(report)));
  const aes = await timedCpu(async () => crypto.subtle.encrypt({ name: "AES-GCM", iv: crypto.getRandomValues(new Uint8Array(12)) }, aesKey, plain));
  const sealMs = await timedIo((round) => sealPersonalData(env, installationId, `report:bench_${tag}_${round}`, personal));
  // Sealed for two people as intake seals a report (its reporter and its subject's owner): both new
  // this month (each key made by one R2 put, the two in parallel), then the same two again (cached).
  const people = (round: number) => [personKey(installationId, `bench-${tag}-reporter-${round}`, env), personKey(installationId, `bench-${tag}-owner-${round}`, env)];
  const sealNewPeopleMs = await timedIo((round) => sealPersonalData(env, installationId, `report:bench_${tag}_p${round}`, personal, { people: people(round) }));
  const sealKnownPeopleMs = await timedIo((round) => sealPersonalData(env, installationId, `report:bench_${tag}_k${round}`, personal, { people: people(0) }));
  const summary = {
    id: `rpt_bench_${tag}`,
    caseId: `case_bench_${tag}`,
    category: "scams_and_fraud",
    categorySpecification: [],
    source: "notice",
    subject: { kind: report.subject.kind, id: report.subject.id },
    evidenceCount: 2,
    caseReportCount: 1,
    createdAt: new Date().toISOString(),
  };
  const triggersMs = await timedIo((round) => fireTriggers(env, ctx, actor, { event: "report.created", report: summary, subjectKey: `bench_${tag}_${round}` }));
  const intakeMs = await timedIo(async (round) => {
    const result = await intakeReport(env, ctx, actor, { ...report, subject: { ...report.subject, id: `${tag}-profile-${round}` } }, `bench-${tag}-profile-${round}`);
    if (result.replayed || result.runs.length > 0) throw new Error("profile: unexpected replay or trigger run");
  });
  return json({
    rounds,
    d1PingMs,
    sealMs,
    sealNewPeopleMs,
    sealKnownPeopleMs,
    triggersMs,
    intakeMs,
    validateCpuMs: validate,
    digestCpuMs: digest,
    aesCpuMs: aes,
    plaintextBytes: plain.byteLength,
  });
}

// ---------------------------------------------------------------------------------------------
// Actions: a bare signed webhook POST, and what D1 recorded for autonomous actions

const MAX_BARE_POSTS = 1_000;

/**
 * `count` webhook POSTs to `url`, one after another, each signed per Standard Webhooks with the
 * same library and headers attemptDelivery uses, with a body shaped like an action's payload. No
 * D1, no queue, no sealing: the floor an action's delivery is compared with. Date.now() is read
 * before signing, before the fetch and after the response is consumed.
 */
async function bareWebhooks(body: { url?: unknown; secret?: unknown; count?: unknown }): Promise<Response> {
  const { url, secret } = body;
  const count = Number(body.count);
  if (typeof url !== "string" || !/^http:\/\/127\.0\.0\.1:\d+\//u.test(url) || typeof secret !== "string" || !secret.startsWith("whsec_") || !Number.isInteger(count) || count < 1 || count > MAX_BARE_POSTS)
    return json({ error: { code: "bench.webhook_invalid" } }, 400);
  const webhook = new Webhook(secret);
  const fetchMs: number[] = [];
  const signAndFetchMs: number[] = [];
  const statuses: number[] = [];
  const began = Date.now();
  for (let index = 0; index < count; index++) {
    const id = `msg_bench_bare_${crypto.randomUUID()}`;
    const signStarted = Date.now();
    const payload = JSON.stringify({
      type: "action.execute",
      timestamp: new Date(signStarted).toISOString(),
      data: {
        proposalId: `run_bench_${index}:act:main:1:proposal`,
        actionType: "bench_remove",
        params: { postId: `post-${index}` },
        runId: `run_bench_${index}`,
        reportId: null,
        subject: null,
        authorityMode: "autonomous",
        approvedBy: null,
        reversible: true,
      },
    });
    const signature = webhook.sign(id, new Date(signStarted), payload);
    const fetchStarted = Date.now();
    const response = await fetch(url, {
      method: "POST",
      redirect: "manual",
      signal: AbortSignal.timeout(15_000),
      headers: {
        "content-type": "application/json",
        "user-agent": "SafestTools-Webhooks/1",
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(signStarted / 1000)),
        "webhook-signature": signature,
      },
      body: payload,
    });
    await response.body?.cancel();
    const done = Date.now();
    statuses.push(response.status);
    fetchMs.push(done - fetchStarted);
    signAndFetchMs.push(done - signStarted);
  }
  return json({ count, totalMs: Date.now() - began, fetchMs, signAndFetchMs, non2xx: statuses.filter((status) => status < 200 || status > 299).length });
}

/**
 * POST /bench/webhook-durable-floor {url, secret, count, endpointId}: the least an exactly-once
 * delivery can cost — a bare signed POST (as /bench/webhook-bare) plus the two D1 batches it
 * needs: before the POST, the delivery row written leased (so a crash leaves it for a retry, never
 * lost); after it, the attempt recorded on the row and the delivery marked delivered (so it is
 * never sent again). Timed by the Worker's clock from the first batch to the end of the second; the rows (real
 * webhook_deliveries / webhook_attempts of the endpoint's installation) are deleted afterwards.
 */
async function durableFloor(env: BenchEnv, body: { url?: unknown; secret?: unknown; count?: unknown; endpointId?: unknown }): Promise<Response> {
  const { url, secret, endpointId } = body;
  const count = Number(body.count);
  if (typeof url !== "string" || !/^http:\/\/127\.0\.0\.1:\d+\//u.test(url) || typeof secret !== "string" || !secret.startsWith("whsec_") || typeof endpointId !== "string" || !Number.isInteger(count) || count < 1 || count > MAX_BARE_POSTS)
    return json({ error: { code: "bench.webhook_invalid" } }, 400);
  const endpoint = await env.DB.prepare(`SELECT installation_id AS installationId FROM webhook_endpoints WHERE id = ?1`).bind(endpointId).first<{ installationId: string }>();
  if (!endpoint) return json({ error: { code: "bench.endpoint_invalid" } }, 400);
  const webhook = new Webhook(secret);
  const floorMs: number[] = [];
  const ids: string[] = [];
  const statuses: number[] = [];
  for (let index = 0; index < count; index++) {
    const id = `dlv_bench_floor_${crypto.randomUUID()}`;
    ids.push(id);
    const started = Date.now();
    const at = new Date(started).toISOString();
    const payload = JSON.stringify({
      type: "action.execute",
      timestamp: at,
      data: { proposalId: `bench-floor-${index}`, actionType: "bench_remove", params: { postId: `post-${index}` }, runId: null, reportId: null, subject: null, authorityMode: "autonomous", approvedBy: null, reversible: true },
    });
    await env.DB.batch([
      env.DB.prepare(`INSERT INTO webhook_deliveries (id, installation_id, endpoint_id, event_type, source_type, source_id, payload_sealed, payload_digest, state, attempts, next_attempt_at, created_at, updated_at)
        VALUES (?1, ?2, ?3, 'action.execute', 'resend', ?1, ?4, ?5, 'pending', 0, ?6, ?7, ?7)`).bind(id, endpoint.installationId, endpointId, payload, `sha256:bench`, new Date(started + 120_000).toISOString(), at),
    ]);
    const signature = webhook.sign(id, new Date(started), payload);
    const response = await fetch(url, {
      method: "POST",
      redirect: "manual",
      signal: AbortSignal.timeout(15_000),
      headers: { "content-type": "application/json", "user-agent": "SafestTools-Webhooks/1", "webhook-id": id, "webhook-timestamp": String(Math.floor(started / 1000)), "webhook-signature": signature },
      body: payload,
    });
    await response.body?.cancel();
    statuses.push(response.status);
    const done = new Date().toISOString();
    // The attempt is recorded on the delivery's row, as a first attempt is (lib/delivery-attempts.ts).
    await env.DB.batch([
      env.DB.prepare(`UPDATE webhook_deliveries SET attempts = 1, state = 'delivered', last_status = ?2, updated_at = ?3, delivered_at = ?3, next_attempt_at = NULL,
          first_status_code = ?2, first_duration_ms = ?4, first_started_at = ?5, first_via = 'inline' WHERE id = ?1 AND state = 'pending' AND attempts = 0`).bind(id, response.status, done, Date.now() - started, at),
    ]);
    floorMs.push(Date.now() - started);
  }
  await env.DB.batch([
    env.DB.prepare(`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT value FROM json_each(?1))`).bind(JSON.stringify(ids)),
    env.DB.prepare(`DELETE FROM webhook_deliveries WHERE id IN (SELECT value FROM json_each(?1))`).bind(JSON.stringify(ids)),
  ]);
  return json({ count, floorMs, non2xx: statuses.filter((status) => status < 200 || status > 299).length });
}

/**
 * The recorded times of autonomous action runs: the run, its action step, the proposal, its
 * delivery and the delivery's first attempt — all stamped by the Worker's own clock.
 */
async function actionTimings(env: BenchEnv, body: { runIds?: unknown }): Promise<Response> {
  const { runIds } = body;
  if (!Array.isArray(runIds) || runIds.length < 1 || runIds.length > 500 || !runIds.every((id) => typeof id === "string")) {
    return json({ error: { code: "bench.run_ids_invalid" } }, 400);
  }
  const { results } = await env.DB.prepare(`
    SELECT r.id AS runId, r.state AS runState, r.created_at AS runCreatedAt, r.started_at AS runStartedAt, r.finished_at AS runFinishedAt,
      s.started_at AS stepStartedAt, s.waiting_at AS stepWaitingAt, s.finished_at AS stepFinishedAt,
      p.state AS proposalState, p.created_at AS proposalCreatedAt, p.updated_at AS proposalUpdatedAt,
      d.state AS deliveryState, d.attempts, d.created_at AS deliveryCreatedAt, d.delivered_at AS deliveredAt,
      COALESCE(d.first_started_at, a.started_at) AS attemptStartedAt, COALESCE(d.first_duration_ms, a.duration_ms) AS attemptMs,
      CASE WHEN d.first_started_at IS NOT NULL THEN d.first_status_code ELSE a.status_code END AS attemptStatus
    FROM workflow_runs r
    JOIN action_proposals p ON p.run_id = r.id
    LEFT JOIN workflow_step_runs s ON s.id = p.step_run_id
    LEFT JOIN webhook_deliveries d ON d.id = p.delivery_id
    -- The first attempt on the delivery row (lib/delivery-attempts.ts), or an older attempt row.
    LEFT JOIN webhook_attempts a ON a.delivery_id = d.id AND a.attempt = 1
    WHERE r.id IN (SELECT value FROM json_each(?1))
  `)
    .bind(JSON.stringify(runIds))
    .all();
  return json({ rows: results });
}

// ---------------------------------------------------------------------------------------------
// Components: the same work in the host, in the sandbox, and as a built-in

/** The work of the bench's component (its source is this function's body), done in the host. */
function countWords(input: { text?: unknown }): { words: number } {
  const text = typeof input.text === "string" ? input.text : "";
  return { words: text.split(/\s+/u).filter(Boolean).length };
}

const MAX_DIRECT_CALLS = 1_000;

/**
 * Times, one call after another and without the workflow runtime, as the mean over a loop (the
 * clock has whole milliseconds): countWords in the host (µs, so `calls` × 1,000 calls between two
 * D1 round trips, one subtracted), executeComponentVersion (the node's sandbox call: version row
 * read, digest check, Worker Loader RPC, JSON copy) and, of it, the version-row read alone, and
 * executeBuiltin("keyword_bank") (the built-in node's work), `calls` times each.
 */
async function componentDirect(env: BenchEnv, ctx: ExecutionContext, body: { installationId?: unknown; componentVersionId?: unknown; text?: unknown; calls?: unknown; keywords?: unknown }): Promise<Response> {
  const { installationId, componentVersionId, text, keywords } = body;
  const calls = Number(body.calls);
  if (typeof installationId !== "string" || typeof componentVersionId !== "string" || typeof text !== "string" || !Array.isArray(keywords) || !Number.isInteger(calls) || calls < 1 || calls > MAX_DIRECT_CALLS)
    return json({ error: { code: "bench.component_invalid" } }, 400);
  const ping = () => env.DB.prepare(`SELECT 1 AS one`).first();
  await ping();
  let began = Date.now();
  for (let index = 0; index < calls; index++) await ping();
  const d1PingMs = (Date.now() - began) / calls;
  const hostCalls = calls * 1_000;
  let words = 0;
  await ping();
  began = Date.now();
  for (let index = 0; index < hostCalls; index++) words += countWords({ text }).words;
  await ping();
  const hostFunctionMs = Math.max(0, Date.now() - began - d1PingMs) / hostCalls;
  const expected = countWords({ text }).words;
  const componentInsideMs: number[] = [];
  began = Date.now();
  for (let index = 0; index < calls; index++) {
    const result = await executeComponentVersion(env, ctx, { installationId, componentVersionId, input: { text }, context: { nodeId: "bench", authorityMode: "autonomous" } });
    componentInsideMs.push(result.latencyMs);
    if ((result.data as { words?: unknown } | null)?.words !== expected) throw new Error(`component answered ${JSON.stringify(result.data)}, expected ${expected} words`);
  }
  const componentMs = (Date.now() - began) / calls;
  // The part of executeComponentVersion that is a D1 read: the version row (source, digest, limits).
  began = Date.now();
  for (let index = 0; index < calls; index++) await getComponentVersionRow(env.DB, installationId, componentVersionId);
  const versionReadMs = (Date.now() - began) / calls;
  const run = { id: "run_bench_direct", installationId } as AuthorizedRun; // keyword_bank reads neither
  const config = { component: "keyword_bank", keywords } as JsonObject;
  await ping();
  began = Date.now();
  for (let index = 0; index < calls; index++) await executeBuiltin(env, "keyword_bank", { run, config, input: { text } });
  await ping();
  const builtinMs = Math.max(0, Date.now() - began - d1PingMs) / calls;
  // Each call's own latencyMs (Date.now() around the sandbox RPC) is a whole number of ms; its
  // mean over many calls is still a fair estimate of the RPC's time.
  const invokeMs = componentInsideMs.reduce((sum, value) => sum + value, 0) / calls;
  return json({ calls, hostCalls, d1PingMs, hostFunctionMs, words: words / hostCalls, componentMs, versionReadMs, invokeMs, builtinMs });
}

// ---------------------------------------------------------------------------------------------
// A node's context: loadWorkflowExecutionContext against runs with few and many recorded steps

const MAX_CONTEXT_ROUNDS = 1_000;

/** A condition whose expression reads `steps` as a whole, so its context holds every step output. */
const ALL_STEPS_PROBE: WorkflowNodeV1 = {
  id: "bench_all_steps_probe",
  kind: "condition",
  config: { cases: [{ port: "next", when: "size(steps) > 0" }], case_ports: ["next"], default_port: "other" },
};

/**
 * loadWorkflowExecutionContext for one node of a recorded run (finished runs included: the run is
 * read without the runtime's liveness checks), `rounds` times one after another; with the D1
 * round trip measured in the same request.
 */
async function contextLoad(env: BenchEnv, body: { runId?: unknown; nodeId?: unknown; probe?: unknown; rounds?: unknown }): Promise<Response> {
  const { runId, nodeId, probe } = body;
  const rounds = Number(body.rounds);
  if (typeof runId !== "string" || (typeof nodeId !== "string" && probe !== "all-steps") || !Number.isInteger(rounds) || rounds < 1 || rounds > MAX_CONTEXT_ROUNDS) {
    return json({ error: { code: "bench.context_invalid" } }, 400);
  }
  const row = await env.DB.prepare(`
    SELECT r.id, r.installation_id AS installationId, r.workflow_version_id AS workflowVersionId, r.authority_mode AS authorityMode, r.state,
      r.input_json AS inputJson, r.report_id AS reportId, v.graph_json AS graphJson,
      (SELECT COUNT(*) FROM workflow_step_runs s WHERE s.run_id = r.id) AS recordedSteps
    FROM workflow_runs r JOIN workflow_versions v ON v.id = r.workflow_version_id WHERE r.id = ?1
  `)
    .bind(runId)
    .first<Omit<AuthorizedRun, "graph"> & { graphJson: string; recordedSteps: number }>();
  if (!row) return json({ error: { code: "bench.run_unknown" } }, 404);
  const { graphJson, recordedSteps, ...fields } = row;
  const run: AuthorizedRun = { ...fields, graph: parseWorkflowGraph(JSON.parse(graphJson)) };
  const node = probe === "all-steps" ? ALL_STEPS_PROBE : run.graph.nodes.find((candidate) => candidate.id === nodeId);
  if (!node) return json({ error: { code: "bench.node_unknown" } }, 404);
  const ping = () => env.DB.prepare(`SELECT 1 AS one`).first();
  await ping();
  let began = Date.now();
  for (let index = 0; index < rounds; index++) await ping();
  const d1PingMs = (Date.now() - began) / rounds;
  let stepsLoaded = 0;
  began = Date.now();
  for (let index = 0; index < rounds; index++) {
    const context = await loadWorkflowExecutionContext(env, { run, node, branchKey: "" });
    stepsLoaded = Object.keys(context.steps as object).length;
  }
  const msPerLoad = (Date.now() - began) / rounds;
  return json({ runId, nodeId: node.id, recordedSteps, stepsLoaded, rounds, msPerLoad, d1PingMs });
}

// ---------------------------------------------------------------------------------------------

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

/** POST /bench/bare {steps} creates an instance; GET /bench/bare/:id reports its status and times. */
async function benchRoute(request: Request, env: BenchEnv, ctx: ExecutionContext, url: URL): Promise<Response> {
  // Where the sweep section's alerts go (a signed webhook, so no bearer token): accepted, unread.
  if (request.method === "POST" && url.pathname === "/bench/alert-sink") return new Response(null, { status: 204 });
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
  if (request.method === "POST" && url.pathname === "/bench/intake-profile") return profileIntake(env, ctx, (await request.json().catch(() => ({}))) as Parameters<typeof profileIntake>[2]);
  // N sequential `SELECT 1` through the D1 binding: the price of one round trip.
  if (request.method === "POST" && url.pathname === "/bench/d1-round-trips") {
    const body = (await request.json().catch(() => null)) as { count?: unknown } | null;
    const count = Number(body?.count);
    if (!Number.isInteger(count) || count < 1 || count > 10_000) return json({ error: { code: "bench.count_invalid" } }, 400);
    const began = Date.now();
    for (let index = 0; index < count; index++) await env.DB.prepare(`SELECT 1 AS one`).first();
    return json({ count, msPerRoundTrip: (Date.now() - began) / count });
  }
  if (request.method === "POST" && url.pathname === "/bench/tdb-seed") return seedTdbDecisions(env, (await request.json().catch(() => ({}))) as Parameters<typeof seedTdbDecisions>[1]);
  if (request.method === "POST" && url.pathname === "/bench/audit-seed") return seedAudit(env, (await request.json().catch(() => ({}))) as { installationId?: unknown; upTo?: unknown });
  if (request.method === "POST" && url.pathname === "/bench/queue-seed") return seedQueue(env, (await request.json().catch(() => ({}))) as SeedBody);
  if (request.method === "POST" && url.pathname === "/bench/queue-plan") return explainListing(env, (await request.json().catch(() => ({}))) as Parameters<typeof explainListing>[1]);
  if (request.method === "POST" && url.pathname === "/bench/sweep-lapse") return lapseLeases(env, (await request.json().catch(() => ({}))) as Parameters<typeof lapseLeases>[1]);
  if (request.method === "POST" && url.pathname === "/bench/sweep-plans") return sweepPlans(env, (await request.json().catch(() => ({}))) as Parameters<typeof sweepPlans>[1]);
  // The production scheduled handler at a chosen moment (`at`, ms): wrangler's /__scheduled takes no
  // time, and the archive tiers wait for whole days and hours to be rolled up.
  if (request.method === "POST" && url.pathname === "/bench/schedule-at") {
    const body = (await request.json().catch(() => null)) as { at?: unknown } | null;
    const at = Number(body?.at);
    if (!Number.isFinite(at) || at <= 0) return json({ error: { code: "bench.at_invalid" } }, 400);
    let ok = true;
    await platform.scheduled!({ cron: "* * * * *", scheduledTime: at, noRetry() {} } as ScheduledController, countedEnv(env, "scheduled"), ctx).catch(() => {
      ok = false;
    });
    return json({ ok });
  }
  if (request.method === "POST" && url.pathname === "/bench/sweep-runs") return sweepRunsAt(env, (await request.json().catch(() => ({}))) as Parameters<typeof sweepRunsAt>[1]);
  if (request.method === "POST" && url.pathname === "/bench/queue-keys") return listingKeysAt(env, (await request.json().catch(() => ({}))) as Parameters<typeof listingKeysAt>[1]);
  if (request.method === "POST" && url.pathname === "/bench/webhook-bare") return bareWebhooks((await request.json().catch(() => ({}))) as Parameters<typeof bareWebhooks>[0]);
  if (request.method === "POST" && url.pathname === "/bench/webhook-durable-floor") return durableFloor(env, (await request.json().catch(() => ({}))) as Parameters<typeof durableFloor>[1]);
  if (request.method === "POST" && url.pathname === "/bench/action-timings") return actionTimings(env, (await request.json().catch(() => ({}))) as Parameters<typeof actionTimings>[1]);
  if (request.method === "POST" && url.pathname === "/bench/component-direct") return componentDirect(env, ctx, (await request.json().catch(() => ({}))) as Parameters<typeof componentDirect>[2]);
  if (request.method === "POST" && url.pathname === "/bench/expression-budget") return expressionBudget((await request.json().catch(() => ({}))) as Parameters<typeof expressionBudget>[0]);
  if (request.method === "POST" && url.pathname === "/bench/installation-remove") {
    // The backup section restores into the same deployment, so the exported installation goes first.
    const body = (await request.json().catch(() => null)) as { installationId?: unknown } | null;
    if (typeof body?.installationId !== "string") return json({ error: { code: "bench.installation_invalid" } }, 400);
    await env.DB.batch(installationDeleteStatements(env.DB, body.installationId));
    await env.AUDIT_ANCHORS.delete(`audit/${body.installationId}/head.json`);
    return json({ removed: body.installationId });
  }
  if (request.method === "POST" && url.pathname === "/bench/metrics-seed") return seedMetrics(env, (await request.json().catch(() => ({}))) as Parameters<typeof seedMetrics>[1]);
  if (request.method === "POST" && url.pathname === "/bench/report-clone") return cloneReports(env, (await request.json().catch(() => ({}))) as Parameters<typeof cloneReports>[1]);
  if (request.method === "POST" && url.pathname === "/bench/treport-seed") return seedTransparency(env, (await request.json().catch(() => ({}))) as Parameters<typeof seedTransparency>[1]);
  if (request.method === "POST" && url.pathname === "/bench/search-seed") return seedSearch(env, (await request.json().catch(() => ({}))) as Parameters<typeof seedSearch>[1]);
  if (request.method === "POST" && url.pathname === "/bench/treport-plans") return transparencyPlans(env, (await request.json().catch(() => ({}))) as Parameters<typeof transparencyPlans>[1]);
  // The D1 statement tally (bench/d1-count.ts): {open: true} starts a fresh one, {close: true} ends it and answers its figures.
  if (request.method === "POST" && url.pathname === "/bench/d1-tally") {
    const body = (await request.json().catch(() => null)) as { open?: unknown; close?: unknown } | null;
    if (body?.open === true) {
      openTally();
      return json({ open: true });
    }
    if (body?.close === true) return json(closeTally());
    return json({ error: { code: "bench.tally_invalid" } }, 400);
  }
  if (request.method === "POST" && url.pathname === "/bench/events-storage") return eventsStorage(env, (await request.json().catch(() => ({}))) as { installationId?: unknown });
  if (request.method === "POST" && url.pathname === "/bench/lifecycle-states") return lifecycleStates(env, (await request.json().catch(() => ({}))) as { installationId?: unknown });
  if (request.method === "POST" && url.pathname === "/bench/context-load") return contextLoad(env, (await request.json().catch(() => ({}))) as Parameters<typeof contextLoad>[1]);
  return json({ error: { code: "route.not_found" } }, 404);
}

/**
 * POST /bench/events-storage {installationId}: what detection keeps of an installation — the D1
 * rows of its detection tables and their bytes (every column's length), and the rows and SQLite
 * bytes of its counter shards (Durable Objects). Read with the uncounted binding.
 */
async function eventsStorage(env: BenchEnv, body: { installationId?: unknown }): Promise<Response> {
  if (typeof body.installationId !== "string") return json({ error: { code: "bench.installation_invalid" } }, 400);
  const installationId = body.installationId;
  const tables: Array<[string, string]> = [
    [
      "rule_hits",
      "length(installation_id) + length(rule_set_version_id) + length(rule_id) + length(event_id) + length(rule_set_id) + length(event_type) + length(authority_mode) + 8 + length(outcome_json) + COALESCE(length(result_json), 0) + length(occurred_at) + length(created_at)",
    ],
    ["entity_labels", "length(installation_id) + length(entity_key) + length(value) + length(entity_kind) + 8 + length(source_type) + length(source_id) + length(created_at) + COALESCE(length(expires_at), 0)"],
    ["event_samples", "length(installation_id) + length(event_id) + length(event_type) + length(occurred_at) + length(sealed) + length(data_key_id)"],
  ];
  const rows = await env.DB.batch<{ n: number; bytes: number | null }>(tables.map(([table, bytes]) => env.DB.prepare(`SELECT COUNT(*) AS n, SUM(${bytes}) AS bytes FROM ${table} WHERE installation_id = ?1`).bind(installationId)));
  const shards = await Promise.all(Array.from({ length: COUNTER_SHARDS }, (_, shard) => counterShard(env, installationId, shard).usage()));
  return json({
    d1Rows: rows.reduce((sum, r) => sum + (r.results[0]?.n ?? 0), 0),
    d1Bytes: rows.reduce((sum, r) => sum + (r.results[0]?.bytes ?? 0), 0),
    counterRows: shards.reduce((sum, s) => sum + s.rows, 0),
    counterBytes: shards.reduce((sum, s) => sum + s.bytes, 0),
    shardsUsed: shards.filter((s) => s.rows > 0).length,
  });
}

/**
 * POST /bench/lifecycle-states {installationId}: how many of the installation's runs, tasks, action
 * proposals and webhook deliveries are in each state (and how many audit events are not sealed yet)
 * — whether the capacity section's lifecycles have settled. Read with the uncounted binding.
 */
async function lifecycleStates(env: BenchEnv, body: { installationId?: unknown }): Promise<Response> {
  if (typeof body.installationId !== "string") return json({ error: { code: "bench.installation_invalid" } }, 400);
  const counts = (table: string) => env.DB.prepare(`SELECT state, COUNT(*) AS n FROM ${table} WHERE installation_id = ?1 GROUP BY state`).bind(body.installationId);
  const [runs, tasks, proposals, deliveries, unsealed] = await env.DB.batch<{ state: string; n: number }>([
    counts("workflow_runs"),
    counts("human_tasks"),
    counts("action_proposals"),
    counts("webhook_deliveries"),
    env.DB.prepare(`SELECT 'unsealed' AS state, COUNT(*) AS n FROM audit_events WHERE installation_id = ?1 AND hash IS NULL`).bind(body.installationId),
  ]);
  const byState = (result: D1Result<{ state: string; n: number }> | undefined) => Object.fromEntries((result?.results ?? []).map((row) => [row.state, row.n]));
  return json({ runs: byState(runs), tasks: byState(tasks), proposals: byState(proposals), deliveries: byState(deliveries), unsealedAuditEvents: unsealed?.results[0]?.n ?? 0 });
}

/**
 * POST /bench/report-clone {templateId, from, count, baseMs}: `count` reports copied from one made
 * through the API (same case and sealed data: the backtest graph reads the summary only), ids
 * `rep_bench_<i>`, categories cycling violence / scams_and_fraud / animal_welfare, created 1 ms apart
 * from `baseMs`; one INSERT … SELECT over a recursive CTE.
 */
async function cloneReports(env: BenchEnv, body: { templateId?: unknown; from?: unknown; count?: unknown; baseMs?: unknown }): Promise<Response> {
  const from = Number(body.from);
  const count = Number(body.count);
  const baseMs = Number(body.baseMs);
  if (typeof body.templateId !== "string" || !Number.isInteger(from) || from < 0 || !Number.isInteger(count) || count < 1 || count > MAX_SEED_CHUNK || !Number.isFinite(baseMs)) {
    return json({ error: { code: "bench.clone_invalid" } }, 400);
  }
  const result = await env.DB.prepare(`
    INSERT INTO reports (id, installation_id, case_id, subject_kind, subject_id, category, category_specification_json, source, evidence_count,
      personal_data, data_key_id, idempotency_key, request_digest, created_at)
    WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
    SELECT printf('rep_bench_%06d', i), t.installation_id, t.case_id, t.subject_kind, 'bench-' || i,
      CASE i % 3 WHEN 0 THEN 'violence' WHEN 1 THEN 'scams_and_fraud' ELSE 'animal_welfare' END,
      t.category_specification_json, t.source, t.evidence_count, t.personal_data, t.data_key_id, NULL, t.request_digest,
      strftime('%Y-%m-%dT%H:%M:%fZ', (?4 + i) / 1000.0, 'unixepoch')
    FROM n, reports t WHERE t.id = ?3
  `)
    .bind(from, from + count - 1, body.templateId, baseMs)
    .run();
  return json({ reports: result.meta.changes });
}

const METRICS_SEED_MAX_DAYS = 90;

/**
 * Hourly rollups for `days` days up to the current hour, as the schedule would have written them
 * for a busy installation: every metric with `queues` queues, `versions` workflow versions, six
 * categories × three sources, ten histogram buckets per queue. One INSERT … SELECT per day
 * (hours × series from a recursive CTE and a JSON list), plus the marks of the rolled hours; then
 * the plans of GET /metrics's two queries.
 */
async function seedMetrics(env: BenchEnv, body: { installationId?: unknown; days?: unknown; queues?: unknown; versions?: unknown }): Promise<Response> {
  const days = Number(body.days);
  const queues = Number(body.queues ?? 8);
  const versions = Number(body.versions ?? 4);
  const installationId = body.installationId;
  if (typeof installationId !== "string" || !Number.isInteger(days) || days < 1 || days > METRICS_SEED_MAX_DAYS || !Number.isInteger(queues) || !Number.isInteger(versions)) {
    return json({ error: { code: "bench.metrics_seed_invalid" } }, 400);
  }
  const dims = (d: Record<string, string | null>) =>
    JSON.stringify(
      Object.fromEntries(
        Object.keys(d)
          .sort()
          .map((k) => [k, d[k]]),
      ),
    );
  const series: Array<[string, string, number]> = [];
  const queueIds = Array.from({ length: queues }, (_, i) => `q_bench_metrics_${i}`);
  const versionIds = Array.from({ length: versions }, (_, i) => `wv_bench_metrics_${i}`);
  for (const category of ["scams_and_fraud", "illegal_or_harmful_speech", "animal_welfare", "data_protection_and_privacy_violations", "violence", "other_violation_tc"]) {
    for (const source of ["notice", "trusted_flagger", "voluntary"]) series.push(["reports.received", dims({ category, source }), -1]);
  }
  for (const queue of queueIds) {
    series.push(["queue.depth", dims({ queue }), -1], ["queue.oldest_seconds", dims({ queue }), -1], ["tasks.sla_breaches", dims({ queue }), -1]);
    series.push(["tasks.ended", dims({ queue, state: "completed" }), -1], ["tasks.ended", dims({ queue, state: "expired" }), -1]);
    for (let bucket = 8; bucket < 18; bucket++) series.push(["queue.first_action_seconds", dims({ queue }), bucket]);
  }
  for (const version of versionIds) {
    series.push(["runs.created", dims({ mode: "autonomous", version }), -1], ["runs.created", dims({ mode: "shadow", version }), -1]);
    series.push(["runs.ended", dims({ code: null, state: "succeeded", version }), -1], ["runs.ended", dims({ code: "ai.provider_timeout", state: "repair_required", version }), -1]);
    series.push(["runs.ended", dims({ code: "component.egress_denied", state: "failed", version }), -1], ["runs.ended", dims({ code: null, state: "terminated", version }), -1]);
  }
  series.push(["deliveries.created", "{}", -1], ["deliveries.ended", dims({ state: "delivered" }), -1], ["deliveries.ended", dims({ state: "dead" }), -1], ["deliveries.pending", "{}", -1]);
  for (const automated of ["fully", "partially", "not_automated"]) for (const mode of ["autonomous", "manual"]) series.push(["decisions.made", dims({ automated, mode }), -1]);
  series.push(["appeals.created", "{}", -1], ["appeals.decided", dims({ outcome: "upheld" }), -1], ["appeals.decided", dims({ outcome: "overturned" }), -1]);
  for (const [metric] of series) if (!(METRIC_NAMES as string[]).includes(metric)) return json({ error: { code: "bench.metrics_seed_unknown_metric", metric } }, 500);
  const hour = 3_600_000;
  const last = Math.floor(Date.now() / hour) * hour - hour;
  const first = last - (days * 24 - 1) * hour;
  const started = Date.now();
  const seriesJson = JSON.stringify(series);
  let rows = 0;
  for (let day = 0; day < days; day++) {
    const from = first + day * 24 * hour;
    const inserted = await env.DB.prepare(`
      WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < 23)
      INSERT OR REPLACE INTO metric_rollups (installation_id, hour, metric, dims, bucket, value)
      SELECT ?1, strftime('%Y-%m-%dT%H:00:00.000Z', ?2 + h.n * 3600, 'unixepoch'), s.value ->> '$[0]', s.value ->> '$[1]', s.value ->> '$[2]', abs(random() % 40)
      FROM h CROSS JOIN json_each(?3) s`)
      .bind(installationId, from / 1000, seriesJson)
      .run();
    await env.DB.prepare(`
      WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < 23)
      INSERT OR REPLACE INTO metric_rollup_hours (installation_id, hour, rolled_at) SELECT ?1, strftime('%Y-%m-%dT%H:00:00.000Z', ?2 + h.n * 3600, 'unixepoch'), ?3 FROM h`)
      .bind(installationId, from / 1000, new Date().toISOString())
      .run();
    rows += inserted.meta.changes ?? 0;
  }
  // The daily table, as the rollup keeps it: every day the hours touch.
  for (let day = Math.floor(first / (24 * hour)) * 24 * hour; day <= last; day += 24 * hour) await env.DB.batch(rollupDayStatements(env.DB, installationId, day));
  const seedMs = Date.now() - started;
  const plan = async (sql: string, prefix: number) => {
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .bind(installationId, JSON.stringify(METRIC_NAMES), new Date(first).toISOString(), new Date(last + hour).toISOString(), prefix)
      .all<{ id: number; parent: number; detail: string }>();
    return results;
  };
  return json({
    rows,
    series: series.length,
    hours: days * 24,
    from: new Date(first).toISOString(),
    to: new Date(last + hour).toISOString(),
    seedMs,
    hourlyPlan: await plan(HOURLY_SQL, 13),
    dailyPlan: await plan(DAILY_SQL, 10),
  });
}

const AUDIT_SEED_MAX = 100_000;
const AUDIT_SEED_ROWS_PER_STATEMENT = 1_000;

/**
 * Appends events to an installation's audit trail until it holds `upTo`, exactly as the platform
 * would have written and sealed them (entry MAC under the audit key, chained hashes), inserted in
 * bulk (rows as one JSON parameter per statement), then seals — which checkpoints the new head.
 */
async function seedAudit(env: BenchEnv, body: { installationId?: unknown; upTo?: unknown }): Promise<Response> {
  const upTo = Number(body.upTo);
  const installationId = body.installationId;
  const key = auditKeys(env).current;
  if (typeof installationId !== "string" || !Number.isInteger(upTo) || upTo < 1 || upTo > AUDIT_SEED_MAX || !key) return json({ error: { code: "bench.audit_seed_invalid" } }, 400);
  await sealAuditChain(env, installationId);
  const head = await env.DB.prepare("SELECT seq, hash FROM audit_events WHERE installation_id = ?1 ORDER BY seq DESC LIMIT 1").bind(installationId).first<{ seq: number; hash: string | null }>();
  if (head && head.hash === null) return json({ error: { code: "bench.audit_seed_unsealed" } }, 409);
  let prev = (head ? readHash(head.hash) : null) ?? GENESIS_HASH;
  let seq = head?.seq ?? 0;
  const started = Date.now();
  const createdAt = new Date().toISOString();
  while (seq < upTo) {
    // Rows in the lean (v2) stored form the platform writes (src/audit/stored.ts).
    const rows: Record<string, string | number | null>[] = [];
    for (const last = Math.min(upTo, seq + AUDIT_SEED_ROWS_PER_STATEMENT); seq < last; ) {
      seq += 1;
      const row: AuditRow = {
        id: auditEventId(installationId, `bench:audit:${installationId}:${seq}`),
        seq,
        installationId,
        idempotencyKey: null,
        action: "bench.event",
        actorType: "system",
        actorId: "bench",
        targetType: "bench",
        targetId: `t${seq % 1000}`,
        detailsJson: canonicalJson({ n: seq, category: "spam" }),
        createdAt,
        prevHash: null,
        hash: null,
        entryMac: null,
      };
      const mac = storeMac(key.id, key.mac(entryMacText(row)));
      prev = await eventHash(prev, row);
      rows.push({ ...row, createdAt: storeCreatedAt(createdAt), entryMac: mac, hash: storeHash(prev) });
    }
    await env.DB.prepare(`
      INSERT INTO audit_events (id, installation_id, idempotency_key, action, actor_type, actor_id, target_type, target_id, details_json, created_at, seq, prev_hash, hash, entry_mac)
      SELECT value ->> '$.id', value ->> '$.installationId', value ->> '$.idempotencyKey', value ->> '$.action', value ->> '$.actorType', value ->> '$.actorId',
        value ->> '$.targetType', value ->> '$.targetId', value ->> '$.detailsJson', value ->> '$.createdAt', value ->> '$.seq', value ->> '$.prevHash', value ->> '$.hash', value ->> '$.entryMac'
      FROM json_each(?1)`)
      .bind(JSON.stringify(rows))
      .run();
  }
  await sealAuditChain(env, installationId); // nothing to seal: checkpoints the new head
  return json({ events: seq, seedMs: Date.now() - started });
}

export default {
  ...platform, // every handler of the production Worker; those below with their statements counted (bench/d1-count.ts)
  queue: (batch, env, ctx) => platform.queue(batch, countedEnv(env, "queue"), ctx),
  scheduled: (controller, env, ctx) => platform.scheduled(controller, countedEnv(env, "scheduled"), ctx),
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    // The HTTP floor: the platform's own GET / (Hono, no auth, no D1), reached through /bench/*
    // because the console's assets answer / itself.
    if (request.method === "GET" && url.pathname === "/bench/floor") return timedPlatform(new Request(new URL("/", url), request), env, ctx);
    // The bare POST floor (events section): the body read, then the same GET / (no auth, no D1).
    if (request.method === "POST" && url.pathname === "/bench/floor-post") {
      await request.text();
      return timedPlatform(new Request(new URL("/", url)), env, ctx);
    }
    if (url.pathname === "/bench" || url.pathname.startsWith("/bench/")) return benchRoute(request, env, ctx, url);
    return timedPlatform(request, countedEnv(env, "fetch"), ctx);
  },
} satisfies ExportedHandler<BenchEnv>;

/**
 * Server time of the platform's handler: request arrival → its Response (body serialized), as a
 * `Server-Timing: app;dur=<ms>` header. Under wrangler's local engines workerd's clock is the wall
 * clock, CPU included (deployed Workers only advance it across I/O); the bench also records the
 * round trip its client sees.
 */
async function timedPlatform(request: Request, env: BenchEnv, ctx: ExecutionContext): Promise<Response> {
  const started = Date.now();
  const response = await platform.fetch(request, env, ctx);
  const timed = new Response(response.body, response);
  timed.headers.append("Server-Timing", `app;dur=${Date.now() - started}`);
  return timed;
}
