// Tenancy: every operation of the route definitions (apiRoutes, the same list app.ts mounts and
// openapi.json describes) refuses another installation's ids with 404 and no data. The operations
// are enumerated, not listed here: a new route, path parameter, body schema or body reference
// without a fixture fails this file. A second walk reads the served /openapi.json: path, query and
// nested body ids, as an API key and as a console session of every role, and every list read by
// each of them. A third walks the same document for scopes: every operation, as a console session
// of every role (ROLE_SCOPES, the server's own mapping) and as a key of each single scope, is
// refused with 403 exactly where the caller's scopes open none of its `x-scopes` (nor `read` its
// `x-read-opens`), and admin-token operations refuse every key and session.
import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ROLE_SCOPES, SCOPES, type Scope } from "../src/auth";
import { reportSummaryByRunStatementUnsafe } from "../src/cases/reports/reports-queries";
import { apiRoutes } from "../src/http/api";
import type { OperationSpec, SchemaName } from "../src/http/route";
import { schemas } from "../src/http/schemas";
import type { ConfigReference } from "../src/workflows/kinds/descriptor";
import { kindOf, nodePorts } from "../src/workflows/kinds/descriptors";
import { ADMIN_TOKEN, api, edge, newInstallation, publish, until, waitForRun } from "./helpers";

const OPERATIONS: OperationSpec[] = apiRoutes.flatMap((r) => r.operations);

/** What one installation holds: a row of every resource type an operation can name. */
interface Fixtures {
  installationId: string;
  key: string;
  marker: string;
  report: string;
  case: string;
  queue: string;
  task: string;
  workflow: string;
  version: string;
  trivialVersion: string;
  run: string;
  trigger: string;
  decision: string;
  appeal: string;
  endpoint: string;
  delivery: string;
  actionTypeKey: string;
  actionType: string;
  proposal: string;
  component: string;
  componentVersion: string;
  provider: string;
  policy: string;
  policyVersion: string;
  backtest: string;
  runOperation: string;
  consoleUser: string;
  apiKey: string;
  trustedFlagger: string;
  notifierSanction: string;
  connector: string;
  account: string;
  ruleSet: string;
  ruleSetVersion: string;
  hashBank: string;
  bulkAction: string;
  hold: string;
}

/** `<segment>/:<param>` of a route path → the fixture it names. A path not here fails the test. */
const PATH_FIXTURES: Record<string, keyof Fixtures> = {
  "reports/:id": "report",
  "cases/:id": "case",
  "queues/:id": "queue",
  "tasks/:id": "task",
  "accounts/:id": "account",
  "bulk-actions/:id": "bulkAction",
  "workflows/:id": "workflow",
  "workflow-versions/:id": "version",
  "runs/:id": "run",
  "triggers/:id": "trigger",
  "action-types/:id": "actionType",
  "decisions/:id": "decision",
  "appeals/:id": "appeal",
  "webhook-endpoints/:id": "endpoint",
  "webhook-deliveries/:id": "delivery",
  "action-proposals/:id": "proposal",
  "components/:id": "component",
  "ai-providers/:id": "provider",
  "policies/:id": "policy",
  "policy-versions/:id": "policyVersion",
  "backtests/:id": "backtest",
  "run-operations/:id": "runOperation",
  "console-users/:id": "consoleUser",
  "api-keys/:id": "apiKey",
  "trusted-flaggers/:id": "trustedFlagger",
  "notifier-sanctions/:id": "notifierSanction",
  "submissions/:decisionId": "decision",
  "connectors/:id": "connector",
  "rule-sets/:id": "ruleSet",
  "rule-set-versions/:id": "ruleSetVersion",
  "hash-banks/:id": "hashBank",
  "preservation-holds/:id": "hold",
  "installations/:id": "installationId",
};

/** Body properties that name a row (`…Id`, `…Ids`) → the fixture, and the 404 a foreign one gets. */
const BODY_REFERENCES: Record<string, { fixture: keyof Fixtures; notFound: string }> = {
  workflowVersionId: { fixture: "trivialVersion", notFound: "workflow_version.not_found" },
  reportId: { fixture: "report", notFound: "report.not_found" },
  reportIds: { fixture: "report", notFound: "report.not_found" },
  decisionId: { fixture: "decision", notFound: "decision.not_found" },
  endpointId: { fixture: "endpoint", notFound: "webhook_endpoint.not_found" },
  versionId: { fixture: "ruleSetVersion", notFound: "rule_set_version.not_found" },
  queueIds: { fixture: "queue", notFound: "queue.not_found" },
  queueId: { fixture: "queue", notFound: "queue.not_found" },
  qaQueueId: { fixture: "queue", notFound: "queue.not_found" },
  sourceTaskId: { fixture: "task", notFound: "task.not_found" },
  installationId: { fixture: "installationId", notFound: "installation.not_found" },
};

const trivialGraph = {
  schemaVersion: 1,
  nodes: [
    { id: "start", kind: "start" },
    { id: "done", kind: "end" },
  ],
  edges: [edge("start", "success", "done")],
};

/** A valid body of every schema, naming the caller's own rows (the type makes a new schema need one). */
const BODIES: Record<SchemaName, (f: Fixtures) => Record<string, unknown>> = {
  CreateInstallation: () => ({ name: "tenancy" }),
  StrikePolicy: (f) => ({ categories: { scams_and_fraud: { points: 1 } }, expiryDays: 30, ladder: [{ points: 3, actionType: f.actionTypeKey }] }),
  SanctionAccount: (f) => ({ actionType: f.actionTypeKey, reason: "tenancy check" }),
  BulkAction: (f) => ({ subjects: [{ kind: "account", id: `acct-${f.marker}` }], actionType: f.actionTypeKey, reason: "tenancy check", dryRun: true }),
  ImportInstallation: () => ({ manifest: { format: "safest-tools.installation-backup/1", installationId: "inst_tenancy", digest: "sha256:0" }, tables: {}, objects: [] }),
  CreateApiKey: () => ({ name: "tenancy", scopes: ["read"] }),
  CreateWorkflow: () => ({ name: `wf-${crypto.randomUUID()}` }),
  PublishVersion: () => ({ graph: trivialGraph }),
  UseWorkflowTemplate: () => ({ template: "triage", name: `wf-${crypto.randomUUID()}` }),
  ValidateGraph: () => ({ graph: trivialGraph }),
  CreateRun: (f) => ({ workflowVersionId: f.trivialVersion, authorityMode: "shadow", input: {}, reportId: f.report }),
  RollupMetrics: () => ({}),
  SendEvent: () => ({ type: "tenancy.poke", payload: {} }),
  RepairRun: (f) => ({ action: "migrate", workflowVersionId: f.trivialVersion, reason: "tenancy check" }),
  CreateRunOperation: (f) => ({ action: "migrate", filter: { state: "repair_required" }, workflowVersionId: f.trivialVersion, reason: "tenancy check", dryRun: true }),
  CreateReport: () => ({ subject: { kind: "account", id: "acct-tenancy" }, category: "scams_and_fraud" }),
  CreateTrigger: (f) => ({ event: "report.created", when: "false", workflowVersionId: f.trivialVersion, authorityMode: "shadow", enabled: false }),
  UpdateTrigger: () => ({ authorityMode: "off" }),
  PromoteTrigger: () => ({ to: "assisted" }),
  TriggerGate: () => ({ minComparedRuns: 1 }),
  CreateQueue: () => ({ name: `q-${crypto.randomUUID()}`, slaSeconds: 60 }),
  ClaimTask: () => ({ reviewer: "mallory" }),
  ReleaseTask: () => ({ reviewer: "mallory" }),
  SetExposureCaps: () => ({ defaultMinutes: 60, categories: { self_harm: 30 } }),
  CompleteTask: () => ({ reviewer: "mallory", response: {} }),
  RevealReporter: () => ({ reason: "tenancy check" }),
  CreateAppeal: (f) => ({ reportId: f.report, decisionId: f.decision, reason: "tenancy check" }),
  ResolveAppeal: () => ({ outcome: "overturned", reason: "tenancy check" }),
  CreateWebhookEndpoint: () => ({ url: "https://hooks.product.test/ok/tenancy-new" }),
  AlertSettings: (f) => ({ endpointId: f.endpoint }),
  CreateActionType: (f) => ({ key: `k-${crypto.randomUUID()}`, name: "Tenancy", endpointId: f.endpoint }),
  UpdateActionType: () => ({ autonomy: "assisted" }),
  PromoteActionType: () => ({ to: "autonomous" }),
  ActionTypeGate: () => ({ minDecidedProposals: 1 }),
  DecideProposal: () => ({ approver: "mallory" }),
  RejectProposal: () => ({ reason: "tenancy check" }),
  CreateComponent: () => ({ name: `c-${crypto.randomUUID()}` }),
  PublishComponentVersion: () => ({ source: "export async function run() { return { ok: true }; }" }),
  CreateAiProvider: () => ({ kind: "workers-ai", model: "@cf/meta/llama-3.1-8b-instruct" }),
  UpdateAiProvider: () => ({ contentAllowed: true }),
  CreatePolicy: () => ({ name: `p-${crypto.randomUUID()}` }),
  PublishPolicyVersion: () => ({ text: "Tenancy policy, version 2." }),
  StartBacktest: (f) => ({ reportIds: [f.report] }),
  RecordDecision: (f) => ({ reportId: f.report, outcome: "no_action" }),
  Preferences: () => ({ blurMedia: true }),
  TransparencyDatabaseSettings: () => ({ preset: "sandbox", enabled: false }),
  ResubmitStatement: () => ({}),
  CreateSigninLink: (f) => ({ installationId: f.installationId, email: `${crypto.randomUUID()}@example.org` }),
  CreateConsoleUser: (f) => ({ email: `${crypto.randomUUID()}@example.org`, role: "moderator", queueIds: [f.queue] }),
  UpdateConsoleUser: (f) => ({ queueIds: [f.queue] }),
  SetQaSettings: (f) => ({ qaQueueId: f.queue, rate: 0.05 }),
  CreateGoldenItem: (f) => ({ sourceTaskId: f.task, queueId: f.queue, answer: {} }),
  RedressSettings: () => ({ statementsEnabled: true }),
  CreateTrustedFlagger: () => ({ name: `tf-${crypto.randomUUID()}`, reporter: { id: `tf-${crypto.randomUUID()}` }, categories: ["scams_and_fraud"] }),
  UpdateTrustedFlagger: () => ({ categories: ["violence"] }),
  NotifierLookup: () => ({ reporter: { id: "tenancy-notifier" } }),
  WarnNotifier: () => ({ reporter: { id: "tenancy-notifier" }, reason: "tenancy check" }),
  SuspendNotifier: () => ({ reporter: { id: "tenancy-notifier" }, reason: "tenancy check", until: new Date(Date.now() + 86_400_000).toISOString() }),
  LiftSuspension: () => ({ reason: "tenancy check" }),
  RetentionSettings: () => ({ personalDataDays: 400 }),
  StorageSettings: () => ({ hotDays: 30 }),
  PersonalDataRequest: () => ({ reporter: { id: "tenancy-reporter" } }),
  CreateConnector: () => ({ kind: "mastodon", name: `m-${crypto.randomUUID()}`, baseUrl: "https://mastodon.test", accessToken: "tenancy-token-0123" }),
  UpdateConnector: () => ({ notifyByEmail: true }),
  CreateRuleSet: () => ({ name: `rs-${crypto.randomUUID()}` }),
  PublishRuleSetVersion: () => ({ rules: [{ id: "r1", when: "false", outcome: { label: { entity: "account", value: "tenancy" } } }] }),
  DeployRuleSet: (f) => ({ versionId: f.ruleSetVersion, authorityMode: "shadow" }),
  IngestEvents: () => ({ events: [{ id: `ev-${crypto.randomUUID()}`, type: "post.created", occurredAt: new Date().toISOString(), entities: { account: "tenancy" } }] }),
  PutEventSettings: () => ({ sampleRate: 0 }),
  BacktestRuleSetVersion: () => ({}),
  TestRules: () => ({
    rules: [{ id: "r1", when: "false", outcome: { label: { entity: "account", value: "tenancy" } } }],
    events: [{ id: "e1", type: "post.created", occurredAt: new Date().toISOString(), entities: { account: "tenancy" } }],
  }),
  PutLabel: () => ({ entity: "account", value: "tenancy", label: "tenancy" }),
  PutLabeler: () => ({ did: "did:web:labels.tenancy.test", publicKinds: ["account"] }),
  RuleSetGate: () => ({ minComparedHits: 10 }),
  CreateHashBank: () => ({ name: `hb-${crypto.randomUUID()}`, kind: "pdq" }),
  UpdateHashBank: () => ({ threshold: 20 }),
  AddHashBankEntries: () => ({ entries: [{ hash: "0f".repeat(32), tags: ["tenancy"] }] }),
  RemoveHashBankEntries: () => ({ hashes: ["0f".repeat(32)] }),
  MatchHashBank: () => ({ hash: "0f".repeat(32) }),
  FollowHashExchange: () => ({ kind: "stopncii", baseUrl: "https://stopncii.test/v1", credentials: { subscriptionKey: "tenancy-sub", fetchFunctionKey: "tenancy-fetch" } }),
  ContributeHashExchange: () => ({ hash: "a5".repeat(32), quality: 100 }),
  PlacePreservationHold: () => ({ reason: "tenancy check", days: 1 }),
  ReleasePreservationHold: () => ({ reason: "tenancy check" }),
  CyberTiplineSettings: () => ({ preset: "test", username: "esp-tenancy", password: "esp-password", reporter: { email: "reports@example.org" }, enabled: false }),
  ConfirmCyberTiplineReport: (f) => ({ reportId: f.report }),
  ReconcileCyberTiplineReport: () => ({ resend: true }),
  RetractCyberTiplineReport: () => ({ reason: "filed in error" }),
};

async function created(path: string, key: string, body: unknown, status = 201): Promise<any> {
  const response = await api(path, { key, body });
  if (response.status !== status) throw new Error(`${path}: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

/** One installation with a row of every kind, each reachable through its routes. */
async function setup(label: string): Promise<Fixtures> {
  const installation = await newInstallation(`tenancy-${label}`);
  const key = installation.apiKey;
  const marker = `marker-${label}-${crypto.randomUUID()}`;
  const actionTypeKey = `remove_${label}`;
  const [queue, endpoint, component, provider, policy, consoleUser, extraKey, report] = await Promise.all([
    created("/api/v1/queues", key, { name: `queue-${label}`, slaSeconds: 3600 }),
    created("/api/v1/webhook-endpoints", key, { url: `https://hooks.product.test/ok/tenancy-${label}`, retryBaseSeconds: 0, maxAttempts: 5 }),
    created("/api/v1/components", key, { name: `component-${label}` }),
    created("/api/v1/ai-providers", key, { kind: "openai-compatible", name: `provider-${label}`, baseUrl: "https://model.test/v1", model: "tenancy-model", apiKey: "sk-test-model-key" }),
    created("/api/v1/policies", key, { name: `policy-${label}`, text: `Policy of ${label}: ${marker}` }),
    created("/api/v1/console-users", key, { email: `${label}-${crypto.randomUUID()}@example.org`, role: "moderator" }),
    created("/api/v1/api-keys", key, { name: `extra-${label}`, scopes: ["read"] }),
    created("/api/v1/reports", key, { subject: { kind: "account", id: `acct-${marker}`, ownerId: `owner-${marker}` }, category: "scams_and_fraud", description: `described ${marker}`, reporter: { contact: `${marker}@example.org` } }),
  ]);
  const ruleSet = await created("/api/v1/rule-sets", key, { name: `rules-${label}` });
  const ruleSetVersion = await created(`/api/v1/rule-sets/${ruleSet.id}/versions`, key, { rules: [{ id: "r1", when: "false", outcome: { label: { entity: "account", value: "tenancy" } } }] });
  const [componentVersion, actionType, trustedFlagger, warning, connector, hashBank] = await Promise.all([
    created(`/api/v1/components/${component.id}/versions`, key, { source: "export async function run() { return { ok: true }; }" }),
    created("/api/v1/action-types", key, { key: actionTypeKey, name: "Remove", endpointId: endpoint.id }),
    created("/api/v1/trusted-flaggers", key, { name: `flagger-${label}`, reporter: { id: `flagger-${marker}` }, categories: ["scams_and_fraud"] }),
    created("/api/v1/notifiers/warnings", key, { reporter: { id: `notifier-${marker}` }, reason: `warned ${marker}` }),
    created("/api/v1/connectors", key, { kind: "mastodon", name: `mastodon-${label}`, baseUrl: "https://mastodon.test", accessToken: `token-${marker}` }),
    created("/api/v1/hash-banks", key, { name: `bank-${label}`, kind: "pdq", shards: 2 }),
  ]);
  await created(`/api/v1/hash-banks/${hashBank.id}/entries`, key, { entries: [{ hash: "a5".repeat(32), tags: [marker] }] }, 200);
  const hold = await created(`/api/v1/cases/${report.caseId}/preservation-holds`, key, { reason: `held ${marker}` });
  const review = await publish(key, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "review", kind: "human_task", config: { queue_id: queue.id, timeout_seconds: 3600 }, inputMapping: { category: "report.category" } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "review"), edge("review", "completed", "done"), edge("review", "timeout", "done")],
  });
  const action = await publish(key, {
    schemaVersion: 1,
    nodes: [
      { id: "start", kind: "start" },
      { id: "act", kind: "action", errorPort: "failed", config: { action_type: actionTypeKey, approval_timeout_seconds: 3600 }, inputMapping: { subject: "report.subject.id" } },
      { id: "done", kind: "end" },
    ],
    edges: [edge("start", "success", "act"), edge("act", "applied", "done"), edge("act", "rejected", "done"), edge("act", "expired", "done"), edge("act", "failed", "done")],
  });
  const trivial = await publish(key, trivialGraph);
  const run = await created("/api/v1/runs", key, { workflowVersionId: review.id, authorityMode: "autonomous", reportId: report.id });
  const assisted = await created("/api/v1/runs", key, { workflowVersionId: action.id, authorityMode: "assisted", reportId: report.id });
  await created("/api/v1/runs", key, { workflowVersionId: action.id, authorityMode: "autonomous", reportId: report.id });
  const decision = await created("/api/v1/decisions", key, { reportId: report.id, outcome: "removed", restrictions: { visibility: ["content_removed"] }, statement: `Removed: ${marker}` });
  const [appeal, trigger, backtest] = await Promise.all([
    created("/api/v1/appeals", key, { decisionId: decision.id, reason: `appealed ${marker}` }),
    created("/api/v1/triggers", key, { event: "report.created", when: "false", workflowVersionId: trivial.id, authorityMode: "shadow" }),
    created(`/api/v1/workflow-versions/${trivial.id}/backtests`, key, { reportIds: [report.id] }, 202),
  ]);
  // No strike policy: assisted, so it waits for approval and starts nothing.
  const bulkAction = await created("/api/v1/bulk-actions", key, { subjects: [{ kind: "account", id: `acct-${marker}` }], actionType: actionTypeKey, reason: `bulk ${marker}`, decision: { policyCategory: "scams_and_fraud" } });
  // Matches no run (the trivial version's runs all succeed): completes at once.
  const runOperation = await created("/api/v1/run-operations", key, { action: "retry", filter: { workflowVersionId: trivial.id }, reason: "tenancy fixture" }, 202);
  const task = await until(async () => (await api(`/api/v1/queues/${queue.id}/tasks`, { key })).body.items?.[0], "a task");
  const proposal = await until(async () => (await api("/api/v1/action-proposals?state=approval_required", { key })).body.items?.find((p: any) => p.runId === assisted.id), "a proposal");
  const delivery = await until(async () => (await api("/api/v1/webhook-deliveries", { key })).body.items?.[0], "a delivery");
  return {
    installationId: installation.id,
    key,
    marker,
    report: report.id,
    case: report.caseId,
    queue: queue.id,
    task: task.id,
    workflow: (review as unknown as { workflowId: string }).workflowId,
    version: review.id,
    trivialVersion: trivial.id,
    run: run.id,
    trigger: trigger.id,
    decision: decision.id,
    appeal: appeal.id,
    endpoint: endpoint.id,
    delivery: delivery.id,
    actionTypeKey,
    actionType: actionType.id,
    proposal: proposal.id,
    component: component.id,
    componentVersion: componentVersion.id,
    provider: provider.id,
    policy: policy.id,
    policyVersion: policy.versions[0].id,
    backtest: backtest.id,
    runOperation: runOperation.id,
    consoleUser: consoleUser.id,
    apiKey: extraKey.id,
    trustedFlagger: trustedFlagger.id,
    notifierSanction: warning.id,
    connector: connector.id,
    account: `owner-${marker}`,
    ruleSet: ruleSet.id,
    ruleSetVersion: ruleSetVersion.id,
    hashBank: hashBank.id,
    bulkAction: bulkAction.id,
    hold: hold.id,
  };
}

/** The path with each `:param` replaced by the fixture its segment names; an unknown one fails here. */
function fill(path: string, f: Fixtures): string {
  return path.replace(/([a-z-]+)\/:([A-Za-z]+)/gu, (whole, segment: string) => {
    const fixture = PATH_FIXTURES[whole];
    if (!fixture) throw new Error(`No fixture for ${whole} in ${path} (segment ${segment}): add the resource to setup() and PATH_FIXTURES in test/tenancy.test.ts.`);
    return `${segment}/${encodeURIComponent(f[fixture])}`;
  });
}

function bodyOf(op: OperationSpec, f: Fixtures): Record<string, unknown> | undefined {
  if (op.body === undefined) return op.method === "get" ? undefined : {};
  const make = BODIES[op.body];
  if (!make) throw new Error(`No sample body for ${op.body}: add one to BODIES in test/tenancy.test.ts.`);
  return make(f);
}

const label = (op: OperationSpec) => `${op.method.toUpperCase()} ${op.path}`;

/** Every id and the marker of an installation: none may appear in what another installation is told. */
function secretsOf(f: Fixtures): string[] {
  return Object.entries(f)
    .filter(([name]) => name !== "key" && name !== "actionTypeKey")
    .map(([, value]) => value);
}

function expectNothingOf(f: Fixtures, body: unknown, where: string) {
  const text = JSON.stringify(body);
  for (const secret of secretsOf(f)) expect(text, `${where} leaked ${secret}`).not.toContain(secret);
}

let A: Fixtures;
let B: Fixtures;

beforeAll(async () => {
  [A, B] = await Promise.all([setup("a"), setup("b")]);
}, 120_000);

describe("every operation of the route definitions", () => {
  it("is enumerated: each has a fixture for its path and a sample body for its schema", () => {
    expect(OPERATIONS.length).toBeGreaterThan(80);
    for (const op of OPERATIONS) {
      expect(() => fill(op.path, A), label(op)).not.toThrow();
      expect(fill(op.path, A), `${label(op)}: a path parameter the fixtures do not fill`).not.toContain(":");
      if (op.body !== undefined) expect(BODIES[op.body], `${label(op)} body ${op.body}`).toBeTypeOf("function");
    }
  });

  it("answers another installation's path ids with 404 for an API key, with none of its data, and changes nothing of it", async () => {
    const before = await snapshot(A);
    const withParams = OPERATIONS.filter((op) => op.path.includes(":") && op.auth !== "none" && op.auth !== "admin_token");
    expect(withParams.length).toBeGreaterThan(40);
    for (const op of withParams) {
      const response = await api(`/api/v1${fill(op.path, A)}`, { method: op.method.toUpperCase(), key: B.key, body: bodyOf(op, B) });
      expect(response.status, `${label(op)} with B's key on A's ids: ${JSON.stringify(response.body)}`).toBe(404);
      expect(response.body.error.code, label(op)).toMatch(/\.not_found$/u);
      expectNothingOf(A, response.body, label(op));
    }
    expect(await snapshot(A)).toEqual(before);
  });

  it("answers a body naming another installation's row with 404 (every …Id and …Ids property of every schema)", async () => {
    let checked = 0;
    for (const op of OPERATIONS) {
      if (op.body === undefined || op.auth === "none") continue;
      const properties = Object.keys((schemas[op.body] as { properties?: object }).properties ?? {}).filter((name) => /Ids?$/u.test(name));
      for (const property of properties) {
        if (property in EXTERNAL_IDS) continue;
        const reference = BODY_REFERENCES[property];
        if (!reference) throw new Error(`${label(op)}: body property ${property} names a row but has no fixture in BODY_REFERENCES.`);
        // The admin token is trusted with every installation: it names one on purpose.
        if (op.auth === "admin_token") continue;
        const body = bodyOf(op, B)!;
        body[property] = Array.isArray(body[property]) ? [A[reference.fixture]] : A[reference.fixture];
        const response = await api(`/api/v1${fill(op.path, B)}`, { method: op.method.toUpperCase(), key: B.key, body });
        expect(response.status, `${label(op)} with ${property} of A: ${JSON.stringify(response.body)}`).toBe(404);
        expect(response.body.error.code, `${label(op)} ${property}`).toBe(reference.notFound);
        expectNothingOf(A, response.body, `${label(op)} ${property}`);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(10);
  });

  it("refuses to publish a graph naming another installation's rows (every reference type)", async () => {
    // One node per reference type, naming A's row; the descriptor must declare it as that type.
    const nodes: Record<ConfigReference["type"], (f: Fixtures) => { kind: string; config: Record<string, unknown> }> = {
      queue: (f) => ({ kind: "human_task", config: { queue_id: f.queue } }),
      action_type: (f) => ({ kind: "action", config: { action_type: f.actionTypeKey } }),
      ai_provider: (f) => ({ kind: "ai_proposal", config: { provider_id: f.provider, instructions: "Classify.", result_ports: ["ok"] } }),
      policy_version: (f) => ({ kind: "ai_proposal", config: { provider_id: B.provider, policy_version_id: f.policyVersion, instructions: "Classify.", result_ports: ["ok"] } }),
      component_version: (f) => ({ kind: "enrichment", config: { component_version_id: f.componentVersion } }),
      webhook_endpoint: (f) => ({ kind: "handoff", config: { endpoint_id: f.endpoint } }),
      workflow_version: (f) => ({ kind: "start_linked_workflow", config: { workflow_version_id: f.trivialVersion } }),
    };
    for (const [type, make] of Object.entries(nodes)) {
      const node = { id: "ref", ...make(A) };
      const declared = (kindOf(node.kind)?.references?.(node.config as never) ?? []).filter((r) => r.type === type);
      expect(declared.length, type).toBe(1);
      const graph = { schemaVersion: 1, nodes: [{ id: "start", kind: "start" }, node, { id: "done", kind: "end" }], edges: [edge("start", "success", "ref"), ...nodePorts(node as never).map((port) => edge("ref", port, "done"))] };
      const workflow = await created("/api/v1/workflows", B.key, { name: `refs-${type}-${crypto.randomUUID()}` });
      const refused = await api(`/api/v1/workflows/${workflow.id}/versions`, { key: B.key, body: { graph } });
      expect(refused.status, `${type}: ${JSON.stringify(refused.body)}`).toBe(422);
      expect(refused.body.error.details, type).toContainEqual(expect.objectContaining({ path: `$.nodes[1].${declared[0]!.path}`, code: "reference_not_found" }));
      expect(JSON.stringify(refused.body), type).not.toContain(A.marker);
    }
  });
});

describe("attacks across installations", () => {
  it("a key cannot start a run on another installation's report to read it through `report`", async () => {
    const thief = await publish(B.key, {
      schemaVersion: 1,
      nodes: [
        { id: "start", kind: "start" },
        { id: "done", kind: "end", inputMapping: { stolen: "report" } },
      ],
      edges: [edge("start", "success", "done")],
    });
    const started = await api("/api/v1/runs", { key: B.key, body: { workflowVersionId: thief.id, authorityMode: "autonomous", reportId: A.report } });
    if (started.status === 201) {
      // Before the check: the run read A's report summary (subject id, category) into its output.
      const done = await waitForRun(B.key, started.body.id);
      expect(JSON.stringify(done.output), "the run read the other installation's report").not.toContain(A.marker);
    }
    expect(started.status, JSON.stringify(started.body)).toBe(404);
    expect(started.body.error.code).toBe("report.not_found");
    const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM workflow_runs WHERE installation_id = ?1 AND report_id = ?2").bind(B.installationId, A.report).first<{ n: number }>();
    expect(stored?.n).toBe(0);
  });

  it("a run row naming another installation's report (written before the check) reads no report", async () => {
    const runId = `run_legacy_${crypto.randomUUID()}`;
    const at = new Date().toISOString();
    await env.DB.prepare(`INSERT INTO workflow_runs (id, installation_id, workflow_version_id, authority_mode, state, report_id, created_at, updated_at)
      VALUES (?1, ?2, ?3, 'shadow', 'waiting', ?4, ?5, ?5)`)
      .bind(runId, B.installationId, B.trivialVersion, A.report, at)
      .run();
    const { results } = await reportSummaryByRunStatementUnsafe(env.DB, runId).all();
    expect(results).toEqual([]);
    // The crafted row names A's report id itself; it goes, so the list checks below see only real rows.
    await env.DB.prepare("DELETE FROM workflow_runs WHERE id = ?1").bind(runId).run();
  });
});

/** What A's key reads of A's rows that the refused calls would have changed. */
async function snapshot(f: Fixtures) {
  const read = async (path: string) => (await api(path, { key: f.key })).body;
  const [task, version, proposal, policy, provider, keys, endpoints, triggers, users, appeal, run] = await Promise.all([
    read(`/api/v1/tasks/${f.task}`),
    read(`/api/v1/workflow-versions/${f.version}`),
    read(`/api/v1/action-proposals/${f.proposal}`),
    read(`/api/v1/policies/${f.policy}`),
    read(`/api/v1/ai-providers/${f.provider}`),
    read("/api/v1/api-keys"),
    read("/api/v1/webhook-endpoints"),
    read("/api/v1/triggers"),
    read("/api/v1/console-users"),
    read(`/api/v1/appeals/${f.appeal}`),
    read(`/api/v1/runs/${f.run}`),
  ]);
  const stable = (items: any[]) => items.map(({ lastUsedAt: _used, ...rest }) => rest);
  return {
    task: { state: task.state, claimedBy: task.claimedBy ?? null },
    version: version.retiredAt,
    proposal: proposal.state,
    policy: { retiredAt: policy.retiredAt, versions: policy.versions.length },
    provider: provider.contentAllowed,
    keys: stable(keys.items),
    endpoints: endpoints.items.map((e: any) => e.state),
    triggers: triggers.items.map((t: any) => t.enabled),
    users: users.items,
    appeal: appeal.state,
    run: { state: run.state, waits: run.waits.length },
  };
}

// The walk over the served document: every path parameter, query parameter and (recursively) body
// property that names an id, as an API key and as a console session of every role, with another
// installation's ids; and every list, read by each of them, holds none of the other's rows.
type DocSchema = { $ref?: string; type?: string | string[]; properties?: Record<string, DocSchema>; items?: DocSchema };
type DocOperation = {
  security?: Array<Record<string, unknown>>;
  "x-scopes"?: Scope[];
  "x-read-opens"?: boolean;
  parameters?: Array<{ name: string; in: string }>;
  requestBody?: { content: Record<string, { schema: DocSchema }> };
};
interface Caller {
  name: string;
  /** The request options that authenticate as it (a key, or a session cookie with its CSRF token). */
  as: { key?: string; headers?: Record<string, string> };
}

/** Query parameters that name a row or a subject → what of A's to send. A new one without an entry fails. */
const QUERY_REFERENCES: Record<string, (f: Fixtures) => string> = {
  endpointId: (f) => f.endpoint,
  reportId: (f) => f.report,
  caseId: (f) => f.case,
  subjectId: (f) => `acct-${f.marker}`,
  queueId: (f) => f.queue,
  targetId: (f) => f.report,
  workflowVersionId: (f) => f.version,
  versionId: (f) => f.ruleSetVersion,
};

/** Body properties named like ids that name no row here: ids in the product's own id space. */
/** A refusal for want of a scope or role: the generic one, or a route's own (personal data, a queue-limited user). */
const SCOPE_REFUSAL = /^(auth\.scope_missing|[a-z_]+\.(personal_data_scope|queue_limited))$/u;

const EXTERNAL_IDS: Record<string, string> = {
  "subject.ownerId": "the product's id of the account that owns the subject",
  "subject.signals.deviceId": "the product's id of the device the owner used (stored only as a keyed hash)",
  ncmecReportId: "NCMEC's number for a CyberTipline report, as an admin found it in NCMEC's records",
};

let served: { paths: Record<string, Record<string, DocOperation>>; components: { schemas: Record<string, DocSchema> } };
let callers: Caller[];

async function consoleSession(installationId: string, role: string): Promise<Caller> {
  const link = await api("/api/v1/console-signin-links", { key: ADMIN_TOKEN, body: { installationId, email: `${role}-${crypto.randomUUID()}@example.org`, role } });
  expect(link.status, JSON.stringify(link.body)).toBe(201);
  const signedIn = await exports.default.fetch(new Request(`http://safest.test${link.body.path}`, { redirect: "manual" }));
  const cookie = signedIn.headers.get("set-cookie")!.split(";")[0]!;
  const session = await api("/api/v1/session", { headers: { cookie } });
  return { name: `console ${role}`, as: { headers: { cookie, "x-csrf-token": session.body.csrfToken } } };
}

const docPath = (path: string) => path.replace(/^\/api\/v1/u, "").replace(/\{(\w+)\}/gu, ":$1");
const apiOperations = () =>
  Object.entries(served.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([, op]) => (op.security?.length ?? 0) > 0 && !op.security!.some((s) => "adminToken" in s))
      .map(([method, op]) => ({ method, path: docPath(path), op })),
  );

function resolveDoc(schema: DocSchema): DocSchema {
  return schema.$ref ? resolveDoc(served.components.schemas[schema.$ref.replace("#/components/schemas/", "")]!) : schema;
}

/** Every property path (`filter.workflowVersionId`) of a body schema, nested objects and list items included, whose name ends in Id or Ids. */
function idPaths(schema: DocSchema, prefix: string[] = [], depth = 0): string[][] {
  const resolved = resolveDoc(schema);
  if (depth > 6) return [];
  const out: string[][] = [];
  for (const [name, property] of Object.entries(resolved.properties ?? {})) {
    const path = [...prefix, name];
    if (/Ids?$/u.test(name)) out.push(path);
    const inner = resolveDoc(property);
    if (inner.properties) out.push(...idPaths(inner, path, depth + 1));
    if (inner.items && resolveDoc(inner.items).properties) out.push(...idPaths(inner.items, path, depth + 1));
  }
  return out;
}

beforeAll(async () => {
  served = (await api("/api/v1/openapi.json")).body;
  callers = [{ name: "API key", as: { key: B.key } }, ...(await Promise.all(["admin", "moderator", "viewer"].map((role) => consoleSession(B.installationId, role))))];
}, 60_000);

describe("every id the served /openapi.json names, as an API key and as a console session of every role", () => {
  it("answers another installation's path ids with 404 (or a role's 403) and none of its data", async () => {
    const withParams = apiOperations().filter(({ path }) => path.includes(":"));
    expect(withParams.length).toBeGreaterThan(40);
    for (const caller of callers.slice(1)) {
      for (const { method, path } of withParams) {
        const op = OPERATIONS.find((o) => o.method === method && o.path === path)!;
        const response = await api(`/api/v1${fill(path, A)}`, { method: method.toUpperCase(), ...caller.as, body: bodyOf(op, B) });
        const where = `${caller.name}: ${method.toUpperCase()} ${path} on A's ids`;
        if (response.status === 403) expect(response.body.error.code, where).toMatch(SCOPE_REFUSAL);
        else {
          expect(response.status, `${where}: ${JSON.stringify(response.body)}`).toBe(404);
          expect(response.body.error.code, where).toMatch(/\.not_found$/u);
        }
        expectNothingOf(A, response.body, where);
      }
    }
  });

  it("answers another installation's ids in query strings with an empty list or 404, for every caller", async () => {
    let checked = 0;
    let ownFound = 0;
    for (const { method, path, op } of apiOperations()) {
      for (const parameter of (op.parameters ?? []).filter((p) => p.in === "query" && /Id$/u.test(p.name))) {
        const value = QUERY_REFERENCES[parameter.name];
        if (!value) throw new Error(`${method.toUpperCase()} ${path}: query parameter ${parameter.name} names an id but has no entry in QUERY_REFERENCES.`);
        const target = `/api/v1${fill(path, B)}?${parameter.name}=${encodeURIComponent(value(A))}`;
        // The same query with B's own id finds B's rows where B has some, so an empty answer with A's id is tenancy, not a filter that matches nothing.
        const own = await api(`/api/v1${fill(path, B)}?${parameter.name}=${encodeURIComponent(value(B))}`, { method: method.toUpperCase(), key: B.key });
        if (own.status === 200 && (own.body.items?.length ?? 0) > 0) ownFound += 1;
        for (const caller of callers) {
          const response = await api(target, { method: method.toUpperCase(), ...caller.as });
          const where = `${caller.name}: ${method.toUpperCase()} ${path}?${parameter.name}= A's`;
          if (response.status === 403) expect(response.body.error.code, where).toMatch(SCOPE_REFUSAL);
          else if (response.status === 404) expect(response.body.error.code, where).toMatch(/\.not_found$/u);
          else {
            expect(response.status, `${where}: ${JSON.stringify(response.body)}`).toBe(200);
            expect(response.body.items ?? [], where).toEqual([]);
          }
          expectNothingOf(A, response.body, where);
        }
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(6);
    expect(ownFound, "queries that find the caller's own rows by the same parameter").toBeGreaterThanOrEqual(4);
  });

  it("answers a body naming another installation's row at any depth with 404, for every caller that may call it", async () => {
    let nested = 0;
    for (const { method, path, op } of apiOperations()) {
      const schema = op.requestBody?.content["application/json"]?.schema;
      const spec = OPERATIONS.find((o) => o.method === method && o.path === path)!;
      if (!schema || spec.body === undefined) continue;
      for (const propertyPath of idPaths(schema)) {
        const name = propertyPath.at(-1)!;
        if (propertyPath.join(".") in EXTERNAL_IDS) continue;
        const reference = BODY_REFERENCES[name];
        if (!reference) throw new Error(`${method.toUpperCase()} ${path}: body property ${propertyPath.join(".")} names a row but has no fixture in BODY_REFERENCES.`);
        if (propertyPath.length > 1) nested += 1;
        for (const caller of callers) {
          const body = structuredClone(bodyOf(spec, B)!);
          let holder: Record<string, unknown> = body;
          let at: DocSchema | undefined = resolveDoc(schema);
          for (const step of propertyPath.slice(0, -1)) {
            const next = holder[step];
            const stepSchema: DocSchema | undefined = at?.properties?.[step] ? resolveDoc(at.properties[step]!) : undefined;
            const objectSchema: DocSchema | undefined = stepSchema?.items ? resolveDoc(stepSchema.items) : stepSchema;
            // An object of one property among several (an outcome: label, report or run) holds only the one tried.
            const fresh = (value: unknown) => ((objectSchema as { maxProperties?: number } | undefined)?.maxProperties === 1 ? {} : (value ?? {})) as Record<string, unknown>;
            if (Array.isArray(next)) {
              // A list of items: one item, holding the id (the list stays a list).
              const item = fresh(next[0]);
              holder[step] = [item];
              holder = item;
            } else {
              holder[step] = fresh(next);
              holder = holder[step] as Record<string, unknown>;
            }
            at = objectSchema;
          }
          holder[name] = name.endsWith("Ids") ? [A[reference.fixture]] : A[reference.fixture];
          const response = await api(`/api/v1${fill(path, B)}`, { method: method.toUpperCase(), ...caller.as, body });
          const where = `${caller.name}: ${method.toUpperCase()} ${path} with ${propertyPath.join(".")} of A`;
          if (response.status === 403) expect(response.body.error.code, where).toMatch(SCOPE_REFUSAL);
          else if (response.status === 422) {
            // A document checked whole (a rule set's rules) lists each problem with its path: the foreign id is one not found.
            expect(response.body.error.details, `${where}: ${JSON.stringify(response.body)}`).toEqual(expect.arrayContaining([expect.objectContaining({ code: reference.notFound })]));
          } else {
            expect(response.status, `${where}: ${JSON.stringify(response.body)}`).toBe(404);
            expect(response.body.error.code, where).toBe(reference.notFound);
          }
          expectNothingOf(A, response.body, where);
        }
      }
    }
    expect(nested, "ids nested in bodies (filter.workflowVersionId)").toBeGreaterThanOrEqual(1);
  });

  it("lists none of another installation's rows, for every caller, while each list of the caller's own holds its own", async () => {
    const lists = apiOperations().filter(({ method, path }) => method === "get" && !path.includes(":"));
    expect(lists.length).toBeGreaterThan(20);
    let ownRowsSeen = 0;
    for (const caller of callers) {
      for (const { path } of lists) {
        // Read as text: some lists answer CSV.
        const response = await exports.default.fetch(new Request(`http://safest.test/api/v1${path}`, { headers: { ...caller.as.headers, ...(caller.as.key ? { authorization: `Bearer ${caller.as.key}` } : {}) } }));
        const text = await response.text();
        const where = `${caller.name}: GET ${path}`;
        // A capability not built yet answers 501 with its typed code, and lists nothing.
        if (response.status === 501) {
          expect(JSON.parse(text).error.code, where).toMatch(/(unavailable|not_implemented)$/u);
          continue;
        }
        expect(response.status, `${where}: ${text.slice(0, 300)}`).toBeLessThan(500);
        expectNothingOf(A, text, where);
        if (response.status === 200 && secretsOf(B).some((secret) => text.includes(secret))) ownRowsSeen += 1;
      }
    }
    // The lists are not trivially empty: B's own rows show up in many of them.
    expect(ownRowsSeen).toBeGreaterThan(20);
  });
});

/** Whether the document says `held` opens the operation: one of its `x-scopes`, or `read` where it reads `x-read-opens`. */
function documentOpens(held: readonly Scope[], op: DocOperation): boolean {
  return op["x-scopes"]!.some((scope) => held.includes(scope)) || (op["x-read-opens"] === true && held.includes("read"));
}

/** The caller's own request for an operation of the served document: A's ids in the path (so a permitted call ends in a 404 and changes nothing), a valid body of its schema. */
async function call(method: string, path: string, op: DocOperation, as: Caller["as"]) {
  const ref = op.requestBody?.content["application/json"]?.schema.$ref;
  const name = ref?.replace("#/components/schemas/", "") as SchemaName | undefined;
  const body = name ? BODIES[name]!(A) : method === "get" ? undefined : {};
  const response = await exports.default.fetch(
    new Request(`http://safest.test/api/v1${fill(path, A)}`, {
      method: method.toUpperCase(),
      headers: { "content-type": "application/json", ...as.headers, ...(as.key ? { authorization: `Bearer ${as.key}` } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
  // Some operations answer CSV: only JSON answers carry an error code.
  const text = await response.text();
  const json = (response.headers.get("content-type") ?? "").includes("json") && text ? JSON.parse(text) : null;
  return { status: response.status, code: json?.error?.code as string | undefined, required: json?.error?.details?.required as unknown };
}

describe("every scope's refusals, from the served /openapi.json", () => {
  // The callers act in an installation of their own: what a permitted call writes (a queue, a
  // setting) lands there, never in A or B. Paths name A's rows, so a permitted call is a 404.
  let own: { id: string; apiKey: string };
  beforeAll(async () => {
    own = await newInstallation("tenancy-scopes");
  });

  /** Walks every operation of the document as `caller` holding `held`; returns how many it was refused and allowed. */
  async function walk(caller: Caller, held: readonly Scope[]) {
    let refused = 0;
    let allowed = 0;
    for (const [docPathName, methods] of Object.entries(served.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        if ((op.security?.length ?? 0) === 0) continue;
        const path = docPath(docPathName);
        const where = `${caller.name}: ${method.toUpperCase()} ${path}`;
        const response = await call(method, path, op, caller.as);
        if (op.security!.some((s) => "adminToken" in s)) {
          expect(response.status, `${where} (admin token only)`).toBe(401);
          expect(response.code, where).toBe("auth.unauthenticated");
          continue;
        }
        expect(op["x-scopes"]?.length, `${where}: the document names the operation's scopes`).toBeGreaterThan(0);
        if (documentOpens(held, op)) {
          allowed += 1;
          expect(response.status === 403 && SCOPE_REFUSAL.test(response.code ?? ""), `${where} is open to ${held.join(", ")} (x-scopes ${op["x-scopes"]!.join(", ")}), refused with ${response.code}`).toBe(false);
          expect(response.status, `${where}: ${response.code}`).toBeLessThan(500);
        } else {
          refused += 1;
          expect(response.status, `${where} with ${held.join(", ")} (x-scopes ${op["x-scopes"]!.join(", ")}): ${response.code}`).toBe(403);
          expect(response.code, where).toBe("auth.scope_missing");
          expect(response.required, where).toEqual(op["x-scopes"]);
        }
      }
    }
    return { refused, allowed };
  }

  it("the document says which scopes open each operation, and read opens no write and nothing that names personal_data:read", () => {
    let operations = 0;
    for (const [path, methods] of Object.entries(served.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        if ((op.security?.length ?? 0) === 0 || op.security!.some((s) => "adminToken" in s)) continue;
        operations += 1;
        const where = `${method.toUpperCase()} ${path}`;
        expect(
          op["x-scopes"]!.every((scope) => (SCOPES as readonly string[]).includes(scope)),
          where,
        ).toBe(true);
        expect(typeof op["x-read-opens"], where).toBe("boolean");
        if (method !== "get" || op["x-scopes"]!.includes("personal_data:read")) expect(op["x-read-opens"], where).toBe(false);
      }
    }
    expect(operations).toBeGreaterThan(150);
  });

  it("refuses a console session of each role with 403 auth.scope_missing exactly where its role's scopes open none of an operation's, and never where they do; admin-token operations refuse every session", async () => {
    const roles = Object.keys(ROLE_SCOPES) as Array<keyof typeof ROLE_SCOPES>;
    expect(roles.sort()).toEqual(["admin", "moderator", "viewer"]);
    const counts: Record<string, { refused: number; allowed: number }> = {};
    for (const role of roles) counts[role] = await walk(await consoleSession(own.id, role), ROLE_SCOPES[role]);
    // Neither branch is vacuous: every role is let through somewhere, and refused somewhere unless it holds every scope.
    for (const role of roles) {
      expect(counts[role]!.allowed, role).toBeGreaterThan(10);
      if (SCOPES.some((scope) => !ROLE_SCOPES[role].includes(scope))) expect(counts[role]!.refused, role).toBeGreaterThan(10);
      else expect(counts[role]!.refused, role).toBe(0);
    }
  }, 240_000);

  it("refuses an API key of each single scope with 403 auth.scope_missing exactly where that scope opens none of an operation's, and never where it does; admin-token operations refuse every key", async () => {
    for (const scope of SCOPES) {
      const made = await api("/api/v1/api-keys", { key: own.apiKey, body: { name: `only-${scope}`, scopes: [scope] } });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const { refused, allowed } = await walk({ name: `key of ${scope}`, as: { key: made.body.apiKey } }, [scope]);
      expect(allowed, scope).toBeGreaterThan(0);
      if (scope !== "admin") expect(refused, scope).toBeGreaterThan(10);
    }
  }, 360_000);
});
