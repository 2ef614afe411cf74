// JSON Schemas of request bodies: used for validation, published in the OpenAPI document, and (with
// json-schema-to-ts's FromSchema, types only) the type of the body a route's handler receives.
import type { JSONSchema } from "json-schema-to-ts";
import { AI_OUTPUT_FORMATS, AI_PROVIDER_KINDS } from "../automation";
import { APPEAL_OUTCOMES, APPELLANT_ROLES, DSA_KEYWORDS, POLICY_CATEGORIES, REPORT_SOURCES, SUBJECT_KINDS, TRIGGER_EVENTS } from "../cases";
import { CONNECTOR_KINDS, MASTODON_ACTIONS } from "../connectors";
import { CONSOLE_ROLES } from "../console";
import { ACTION_TYPE_AUTONOMY, TDB_PRESET_NAMES, WEBHOOK_EVENT_TYPES } from "../enforcement";
import { ALERT_KINDS } from "../operations";
import { AUTHORITY_MODES, RUN_STATES } from "../workflows";
import { SCOPES } from "./auth";

const name = { type: "string", minLength: 1, maxLength: 200 } as const;
const identifier = { type: "string", pattern: "^[A-Za-z0-9._:-]{1,200}$" } as const;
const connectorToken = { type: "string", minLength: 8, maxLength: 4096, description: "An access token with admin:write:accounts and admin:write:reports; stored sealed, never returned." } as const;
const connectorSecret = { type: "string", minLength: 16, maxLength: 512, description: "The secret Mastodon signs its webhooks with (X-Hub-Signature); generated and shown once when omitted." } as const;
const connectorRules = {
  type: "object",
  maxProperties: 200,
  additionalProperties: { type: "string", minLength: 1, maxLength: 200 },
  description: "A server rule's id → our category; a report naming a mapped rule takes its category.",
} as const;
const connectorActions = {
  type: "object",
  maxProperties: 200,
  additionalProperties: { enum: MASTODON_ACTIONS },
  description: "An action type's key → what it does on the server (defaults: mastodon.silence, mastodon.suspend, mastodon.sensitive, mastodon.disable, mastodon.warn, mastodon.resolve).",
} as const;
const connectorTellReporters = { type: "boolean", description: "Tell reporters of this server the decision on their report as a direct message (the token then needs write:statuses); default false." } as const;
const categoryName = { type: "string", minLength: 1, maxLength: 200 } as const;
const connectorCategories = {
  type: "object",
  additionalProperties: false,
  properties: { spam: categoryName, legal: categoryName, violation: categoryName, other: categoryName },
  description: "Mastodon's category → our category (defaults: spam scams_and_fraud, legal not_specified_notice, violation and other other_violation_tc).",
} as const;
const notifierReporter = { type: "object", required: ["id"], additionalProperties: false, properties: { id: { type: "string", minLength: 1, maxLength: 300 } } } as const;

export const schemas = {
  CreateInstallation: { type: "object", required: ["name"], additionalProperties: false, properties: { name } },
  // The backup document of POST /installation/export; its rows are checked by the restore itself.
  ImportInstallation: {
    type: "object",
    required: ["manifest", "tables", "objects"],
    additionalProperties: false,
    properties: {
      manifest: { type: "object", required: ["format", "installationId", "digest"], properties: { format: { type: "string" }, installationId: { type: "string" }, digest: { type: "string" } } },
      tables: { type: "object", additionalProperties: { type: "array", items: { type: "object" } } },
      objects: { type: "array", items: { type: "object", required: ["bucket", "key", "base64"], properties: { bucket: { enum: ["WORKFLOW_ARTIFACTS", "AUDIT_ANCHORS"] }, key: { type: "string" }, base64: { type: "string" } } } },
    },
  },
  CreateApiKey: {
    type: "object",
    required: ["name", "scopes"],
    additionalProperties: false,
    properties: { name, scopes: { type: "array", minItems: 1, uniqueItems: true, items: { enum: SCOPES } } },
  },
  CreateWorkflow: {
    type: "object",
    required: ["name"],
    additionalProperties: false,
    properties: { name, description: { type: "string", maxLength: 2000 } },
  },
  PublishVersion: {
    type: "object",
    required: ["graph"],
    additionalProperties: false,
    properties: {
      graph: { type: "object", description: "A workflow graph, schemaVersion 1 (see docs/graph-format.md)." },
      steps: { enum: ["fused", "per_node"], description: "fused (default): consecutive nodes that neither wait nor have effects run as one Workflows step; per_node: one step per node." },
    },
  },
  // POST /workflow-templates/use (issue 16 §2): a template of GET /workflow-templates; the new workflow's name defaults to its title.
  UseWorkflowTemplate: { type: "object", required: ["template"], additionalProperties: false, properties: { template: identifier, name } },
  ValidateGraph: {
    type: "object",
    required: ["graph"],
    additionalProperties: false,
    properties: { graph: { description: "A workflow graph to check without publishing it." } },
  },
  CreateRun: {
    type: "object",
    required: ["workflowVersionId", "authorityMode"],
    additionalProperties: false,
    properties: {
      workflowVersionId: identifier,
      authorityMode: { enum: AUTHORITY_MODES },
      input: { type: "object" },
      reportId: identifier,
    },
  },
  RollupMetrics: {
    type: "object",
    additionalProperties: false,
    properties: {
      from: { type: "string", maxLength: 40, description: "The first hour to recompute (ISO 8601); default 23 hours before `to`." },
      to: { type: "string", maxLength: 40, description: "The last hour to recompute (ISO 8601); default the current hour (figures so far)." },
    },
  },
  RepairRun: {
    type: "object",
    required: ["action", "reason"],
    additionalProperties: false,
    properties: {
      action: { enum: ["retry", "route", "migrate"], description: "retry: run the failed node again; route: take `port` of the failed node (a person's decision); migrate: continue on `workflowVersionId`." },
      port: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" },
      workflowVersionId: identifier,
      reason: { type: "string", minLength: 1, maxLength: 1000, description: "Why; recorded in the audit event and the run's repair history." },
    },
  },
  CreateRunOperation: {
    type: "object",
    required: ["action", "filter", "reason"],
    additionalProperties: false,
    properties: {
      action: { enum: ["terminate", "retry", "migrate"] },
      filter: {
        type: "object",
        additionalProperties: false,
        properties: {
          workflowVersionId: identifier,
          state: { enum: RUN_STATES },
          errorCode: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" },
          createdBefore: { type: "string", format: "date-time" },
          createdAfter: { type: "string", format: "date-time" },
        },
      },
      workflowVersionId: identifier,
      reason: { type: "string", minLength: 1, maxLength: 1000 },
      dryRun: { type: "boolean", description: "Answer the count and a sample of the matching runs, and do nothing." },
    },
  },
  SendEvent: {
    type: "object",
    required: ["type"],
    additionalProperties: false,
    properties: { type: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" }, payload: { type: "object" } },
  },
  CreateReport: {
    type: "object",
    required: ["subject", "category"],
    additionalProperties: false,
    properties: {
      subject: {
        type: "object",
        required: ["kind", "id"],
        additionalProperties: false,
        properties: {
          kind: { enum: SUBJECT_KINDS },
          id: { type: "string", minLength: 1, maxLength: 300 },
          url: { type: "string", maxLength: 2048 },
          ownerId: { type: "string", maxLength: 300 },
          snapshot: { description: "The reported content as the reporter saw it (sealed at rest)." },
        },
      },
      category: { type: "string", minLength: 1, maxLength: 200, description: "A DSA statement category (scams_and_fraud or STATEMENT_CATEGORY_SCAMS_AND_FRAUD) or an ATProto reason type." },
      categorySpecification: { type: "array", maxItems: 20, uniqueItems: true, items: { enum: DSA_KEYWORDS } },
      source: { enum: REPORT_SOURCES },
      reporter: {
        type: "object",
        additionalProperties: false,
        properties: { id: { type: "string", maxLength: 300 }, contact: { type: "string", maxLength: 500 } },
      },
      description: { type: "string", maxLength: 10_000 },
      locale: { type: "string", pattern: "^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8}){0,3}$", description: "BCP 47 locale of redress messages (statements, outcomes), e.g. de-AT; templates exist for en and de, others fall back to en." },
      evidence: {
        type: "array",
        maxItems: 50,
        items: {
          type: "object",
          required: ["kind"],
          additionalProperties: false,
          properties: {
            kind: { type: "string", maxLength: 50 },
            url: { type: "string", maxLength: 2048 },
            text: { type: "string", maxLength: 10_000 },
            sha256: { type: "string", pattern: "^[0-9a-f]{64}$" },
          },
        },
      },
    },
  },
  CreateTrigger: {
    type: "object",
    required: ["event", "workflowVersionId", "authorityMode"],
    additionalProperties: false,
    properties: {
      name,
      event: { enum: TRIGGER_EVENTS },
      when: { type: "string", minLength: 1, maxLength: 4096, description: "CEL over report (and appeal); default true." },
      workflowVersionId: identifier,
      authorityMode: { enum: AUTHORITY_MODES },
      enabled: { type: "boolean" },
    },
  },
  UpdateTrigger: {
    type: "object",
    required: ["authorityMode"],
    additionalProperties: false,
    properties: { authorityMode: { enum: AUTHORITY_MODES, description: "A lower mode (demotion) or the same; a higher one goes through POST /triggers/:id/promote." } },
  },
  PromoteTrigger: {
    type: "object",
    required: ["to"],
    additionalProperties: false,
    properties: { to: { enum: AUTHORITY_MODES, description: "The next mode only: off → shadow → assisted → autonomous." } },
  },
  TriggerGate: {
    type: "object",
    additionalProperties: false,
    description: "Fields left out keep their current value (the defaults when no gate is set).",
    properties: {
      minComparedRuns: { type: "integer", minimum: 1, maximum: 100000, description: "shadow → assisted: shadow runs compared with a person's decision; default 100." },
      minAgreementLow: { type: "number", minimum: 0, maximum: 1, description: "shadow → assisted: lower bound of agreement's 95% Wilson interval; default 0.9." },
      minDecidedProposals: { type: "integer", minimum: 1, maximum: 10000, description: "assisted → autonomous, per action type: the last M approved or rejected proposals; default 100." },
      minPrecisionLow: { type: "number", minimum: 0, maximum: 1, description: "assisted → autonomous, per action type: lower bound of precision's interval; default 0.9." },
      maxOverturnRate: { type: "number", minimum: 0, maximum: 1, description: "Autonomous: demoted to assisted when overturned / decisions passes this; default 0.1." },
      minOverturnSample: { type: "integer", minimum: 1, maximum: 100000, description: "Decisions needed before a demotion; default 20." },
      overturnWindowDays: { type: "integer", minimum: 1, maximum: 365, description: "The overturn rate's window (never before the promotion to autonomous); default 30." },
    },
  },
  CreateQueue: {
    type: "object",
    required: ["name", "slaSeconds"],
    additionalProperties: false,
    properties: {
      name,
      description: { type: "string", maxLength: 2000 },
      slaSeconds: { type: "integer", minimum: 60, maximum: 31_536_000 },
      priority: { type: "integer", minimum: 0, maximum: 100 },
    },
  },
  ClaimTask: {
    type: "object",
    additionalProperties: false,
    properties: { reviewer: { type: "string", minLength: 1, maxLength: 200 }, leaseSeconds: { type: "integer", minimum: 30, maximum: 3600 } },
  },
  ReleaseTask: { type: "object", additionalProperties: false, properties: { reviewer: { type: "string", minLength: 1, maxLength: 200 } } },
  SetExposureCaps: {
    type: "object",
    additionalProperties: false,
    description: "Replaces the installation's daily exposure caps (minutes of claimed tasks per reviewer per UTC day).",
    properties: {
      defaultMinutes: { type: ["integer", "null"], minimum: 0, maximum: 1440, description: "The cap of every category without one of its own; null or absent: no default cap." },
      categories: {
        type: "object",
        propertyNames: { enum: POLICY_CATEGORIES },
        additionalProperties: { type: ["integer", "null"], minimum: 0, maximum: 1440 },
        description: "Per category: minutes, or null for no cap (overriding the default). A category left out takes the default.",
      },
    },
  },
  CompleteTask: {
    type: "object",
    required: ["response"],
    additionalProperties: false,
    properties: { reviewer: { type: "string", minLength: 1, maxLength: 200 }, response: { description: "Checked against the task's response_schema." } },
  },
  RevealReporter: {
    type: "object",
    required: ["reason"],
    additionalProperties: false,
    properties: { reason: { type: "string", minLength: 3, maxLength: 500, description: "Why the reporter's identity is needed (recorded in the audit trail)." } },
  },
  CreateAppeal: {
    type: "object",
    required: ["reason"],
    additionalProperties: false,
    properties: {
      reportId: identifier,
      decisionId: identifier,
      appellantRole: { enum: APPELLANT_ROLES, description: "notifier (the reporter, e.g. contesting a decision not to act) or affected (the user restricted); defaults from the decision." },
      appellant: { type: "object", additionalProperties: false, properties: { id: { type: "string", maxLength: 300 }, contact: { type: "string", maxLength: 500 } } },
      reason: { type: "string", minLength: 1, maxLength: 10_000 },
    },
  },
  ResolveAppeal: {
    type: "object",
    required: ["outcome"],
    additionalProperties: false,
    properties: { outcome: { enum: APPEAL_OUTCOMES }, reason: { type: "string", maxLength: 5000 }, reviewer: { type: "string", maxLength: 200 } },
  },
  CreateWebhookEndpoint: {
    type: "object",
    required: ["url"],
    additionalProperties: false,
    properties: {
      url: { type: "string", minLength: 8, maxLength: 2048 },
      name: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$", description: "Unique in the installation; graphs may name the endpoint by it (handoff endpoint_id)." },
      description: { type: "string", maxLength: 2000 },
      eventTypes: { type: "array", uniqueItems: true, items: { enum: WEBHOOK_EVENT_TYPES }, description: "Events delivered without being named (messages, handoffs); action types name their endpoint." },
      retryBaseSeconds: { type: "integer", minimum: 0, maximum: 3600, description: "Base of the exponential backoff, default 5." },
      maxAttempts: { type: "integer", minimum: 5, maximum: 20, description: "Attempts before dead-letter, default 8." },
    },
  },
  AlertSettings: {
    type: "object",
    required: ["endpointId"],
    additionalProperties: false,
    properties: {
      endpointId: { type: "string", minLength: 1, maxLength: 200, description: "A webhook endpoint of this installation: alerts are delivered there as alert.<kind>, signed like every delivery." },
      kinds: { type: "array", uniqueItems: true, items: { enum: ALERT_KINDS }, description: "The alerts to send; default all." },
      repairSpikeThreshold: { type: "integer", minimum: 1, maximum: 100000, description: "Runs entering repair_required within 15 minutes that make a spike; default 10." },
    },
  },
  CreateActionType: {
    type: "object",
    required: ["key", "name", "endpointId"],
    additionalProperties: false,
    properties: {
      key: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" },
      name,
      description: { type: "string", maxLength: 2000 },
      requiresApproval: { type: "boolean" },
      reversible: { type: "boolean" },
      endpointId: identifier,
      autonomy: { enum: ACTION_TYPE_AUTONOMY, description: "assisted: every action of the type waits for approval, even in an autonomous run; default autonomous." },
    },
  },
  UpdateActionType: {
    type: "object",
    required: ["autonomy"],
    additionalProperties: false,
    properties: { autonomy: { enum: ACTION_TYPE_AUTONOMY, description: "assisted (a demotion) at any time; autonomous goes through POST /action-types/:id/promote." } },
  },
  PromoteActionType: { type: "object", required: ["to"], additionalProperties: false, properties: { to: { enum: ACTION_TYPE_AUTONOMY } } },
  ActionTypeGate: {
    type: "object",
    additionalProperties: false,
    description: "Fields left out keep their current value (the defaults when no gate is set).",
    properties: {
      minDecidedProposals: { type: "integer", minimum: 1, maximum: 10000, description: "The last M approved or rejected proposals of the type; default 100." },
      minPrecisionLow: { type: "number", minimum: 0, maximum: 1, description: "Lower bound of precision's 95% Wilson interval over them; default 0.9." },
    },
  },
  DecideProposal: {
    type: "object",
    additionalProperties: false,
    properties: { reason: { type: "string", maxLength: 2000 }, approver: { type: "string", minLength: 1, maxLength: 200 } },
  },
  RejectProposal: {
    type: "object",
    required: ["reason"],
    additionalProperties: false,
    properties: { reason: { type: "string", minLength: 1, maxLength: 2000 }, approver: { type: "string", minLength: 1, maxLength: 200 } },
  },
  CreateComponent: { type: "object", required: ["name"], additionalProperties: false, properties: { name, description: { type: "string", maxLength: 2000 } } },
  PublishComponentVersion: {
    type: "object",
    required: ["source"],
    additionalProperties: false,
    properties: {
      source: { type: "string", minLength: 1, maxLength: 262_144, description: "An ES module exporting run(input, context)." },
      allowedHosts: { type: "array", maxItems: 50, uniqueItems: true, items: { type: "string", pattern: "^(\\*\\.)?[A-Za-z0-9.-]{1,253}$" } },
      maxSubrequests: { type: "integer", minimum: 0, maximum: 50 },
      timeoutMs: { type: "integer", minimum: 100, maximum: 60_000 },
    },
  },
  CreateAiProvider: {
    type: "object",
    required: ["kind", "model"],
    additionalProperties: false,
    properties: {
      name,
      kind: { enum: AI_PROVIDER_KINDS },
      baseUrl: { type: "string", maxLength: 2048 },
      model: { type: "string", minLength: 1, maxLength: 200 },
      apiKey: { type: "string", minLength: 1, maxLength: 4096 },
      timeoutMs: { type: "integer", minimum: 500, maximum: 120_000 },
      contentAllowed: { type: "boolean", description: "Whether nodes may send it reported content; default true for workers-ai, false for openai-compatible." },
      outputFormat: { enum: AI_OUTPUT_FORMATS, description: "How the model answers: json (default) or llama_guard (safe / unsafe + categories)." },
    },
  },
  UpdateAiProvider: {
    type: "object",
    required: ["contentAllowed"],
    additionalProperties: false,
    properties: { contentAllowed: { type: "boolean" } },
  },
  CreatePolicy: {
    type: "object",
    required: ["name"],
    additionalProperties: false,
    properties: {
      name: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$", description: "Unique in the installation; a node may name the policy by it (its newest version at run time)." },
      description: { type: "string", maxLength: 2000 },
      text: { type: "string", minLength: 1, maxLength: 100_000, description: "The text of version 1 (optional)." },
    },
  },
  PublishPolicyVersion: {
    type: "object",
    required: ["text"],
    additionalProperties: false,
    properties: { text: { type: "string", minLength: 1, maxLength: 100_000 } },
  },
  StartBacktest: {
    type: "object",
    additionalProperties: false,
    properties: {
      // Duplicates are dropped by the handler (uniqueItems is quadratic over 100,000 ids).
      reportIds: { type: "array", minItems: 1, maxItems: 100_000, items: identifier },
      from: { type: "string", format: "date-time" },
      to: { type: "string", format: "date-time" },
      limit: { type: "integer", minimum: 1, maximum: 100_000 },
      engine: { type: "string", enum: ["fast", "durable"], description: "fast (default): the host walker, up to 100,000 reports; durable: one shadow run per report, up to 1,000" },
    },
  },
  RecordDecision: {
    type: "object",
    required: ["reportId", "outcome"],
    additionalProperties: false,
    properties: {
      reportId: identifier,
      outcome: { type: "string", minLength: 1, maxLength: 100, description: "no_action (with no restrictions) records a decision not to act." },
      restrictions: { type: "object", description: "Absent or {}: a decision not to act (restricts: false, no statement of reasons)." },
      statement: { type: "string", minLength: 1, maxLength: 5000, description: "The facts relied on; required when the decision restricts." },
      ground: { enum: ["incompatible_content", "illegal_content"] },
      legalGround: { type: "string", maxLength: 500 },
      policyCategory: { type: "string", maxLength: 200 },
      contentType: { type: "array", minItems: 1, items: { type: "string" } },
      territorialScope: { type: "array", items: { type: "string" } },
      decidedBy: { type: "string", minLength: 1, maxLength: 200, description: "A name recorded beside the authenticated caller (stated, not verified); never the audit actor." },
    },
  },
  // Issue 15 §1: the DSA Transparency Database (enforcement/transparency-db*.ts).
  TransparencyDatabaseSettings: {
    type: "object",
    required: ["enabled"],
    additionalProperties: false,
    properties: {
      preset: { enum: TDB_PRESET_NAMES, description: "production: https://transparency.dsa.ec.europa.eu; sandbox: https://sandbox.sor.dsa.ec.europa.eu." },
      baseUrl: { type: "string", minLength: 8, maxLength: 2048, description: "Another base URL (instead of preset), e.g. a local replica." },
      token: { type: "string", minLength: 8, maxLength: 4096, description: "The API token the database issued; stored sealed, never returned. Omitted: the current one is kept." },
      enabled: { type: "boolean" },
    },
  },
  ResubmitStatement: {
    type: "object",
    additionalProperties: false,
    properties: {
      decisionFacts: { type: "string", minLength: 1, maxLength: 5000, description: "Redacted facts sent instead of the decision's statement." },
      explanation: { type: "string", minLength: 1, maxLength: 2000, description: "Redacted explanation sent instead of the decision's." },
    },
  },
  Preferences: { type: "object", required: ["blurMedia"], additionalProperties: false, properties: { blurMedia: { type: "boolean" } } },
  CreateSigninLink: {
    type: "object",
    required: ["installationId", "email"],
    additionalProperties: false,
    properties: {
      installationId: identifier,
      email: { type: "string", minLength: 3, maxLength: 320 },
      name,
      role: { enum: CONSOLE_ROLES },
      accessSignIn: { type: "boolean", description: "For a new user: bind the email's Cloudflare Access sign-in to this installation (default true)." },
    },
  },
  CreateConsoleUser: {
    type: "object",
    required: ["email", "role"],
    additionalProperties: false,
    properties: {
      email: { type: "string", minLength: 3, maxLength: 320 },
      name,
      role: { enum: CONSOLE_ROLES },
      queueIds: { type: ["array", "null"], maxItems: 200, items: identifier, description: "Queues a moderator may work; null or absent: all." },
      accessSignIn: { type: "boolean", description: "Bind this email's Cloudflare Access sign-in to this installation (default true)." },
    },
  },
  UpdateConsoleUser: {
    type: "object",
    additionalProperties: false,
    properties: { name, role: { enum: CONSOLE_ROLES }, queueIds: { type: ["array", "null"], maxItems: 200, items: identifier }, disabled: { type: "boolean" }, accessSignIn: { type: "boolean" } },
  },
  SetQaSettings: {
    type: "object",
    required: ["qaQueueId", "rate"],
    additionalProperties: false,
    properties: {
      qaQueueId: identifier,
      rate: { type: "number", minimum: 0, maximum: 1, description: "Share of completed tasks sampled for a blind second review (0.05 = 5%)." },
      compareField: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]{0,63}$", description: "Response field answers are compared on (default `outcome`); a response without it is compared whole." },
    },
  },
  RedressSettings: {
    type: "object",
    additionalProperties: false,
    description: "Fields left out keep their current value.",
    properties: {
      statementsEnabled: { type: "boolean", description: "Send the affected user a statement of reasons after every restricting decision (DSA Art. 17); default true." },
      settlementBodies: {
        type: "array",
        maxItems: 20,
        description: "Out-of-court dispute settlement bodies (DSA Art. 21) named in statements and complaint outcomes.",
        items: {
          type: "object",
          required: ["name", "url"],
          additionalProperties: false,
          properties: { name, url: { type: "string", pattern: "^https://", maxLength: 2048 }, languages: { type: "array", maxItems: 30, items: { type: "string", pattern: "^[a-z]{2,3}$" } } },
        },
      },
      complaintUrl: { type: ["string", "null"], pattern: "^https://", maxLength: 2048, description: "Where users file a complaint (named in statements)." },
    },
  },
  CreateGoldenItem: {
    type: "object",
    required: ["sourceTaskId", "answer"],
    additionalProperties: false,
    properties: {
      sourceTaskId: { type: "string", minLength: 1, maxLength: 400, description: "A task a workflow created: its run, report, type and schema are copied." },
      queueId: identifier,
      context: { description: "What the reviewer is shown; default the source task's context." },
      answer: { description: "The known right answer, checked against the task's response schema." },
    },
  },
  // Notices and notifiers (DSA Art. 22, 23). A reporter is named as in CreateReport; only a keyed hash of the id is kept.
  CreateTrustedFlagger: {
    type: "object",
    required: ["name", "reporter", "categories"],
    additionalProperties: false,
    properties: {
      name,
      reporter: notifierReporter,
      categories: { type: "array", minItems: 1, maxItems: 40, uniqueItems: true, items: { type: "string", minLength: 1, maxLength: 200 }, description: "The flagger's area: DSA statement categories." },
      activeFrom: { type: "string", format: "date-time" },
      activeUntil: { type: ["string", "null"], format: "date-time" },
    },
  },
  UpdateTrustedFlagger: {
    type: "object",
    additionalProperties: false,
    properties: {
      name,
      categories: { type: "array", minItems: 1, maxItems: 40, uniqueItems: true, items: { type: "string", minLength: 1, maxLength: 200 } },
      activeFrom: { type: "string", format: "date-time" },
      activeUntil: { type: ["string", "null"], format: "date-time", description: "End the flagger's status (now, to end it at once); null: no end." },
    },
  },
  NotifierLookup: { type: "object", required: ["reporter"], additionalProperties: false, properties: { reporter: notifierReporter } },
  WarnNotifier: {
    type: "object",
    required: ["reporter", "reason"],
    additionalProperties: false,
    properties: { reporter: notifierReporter, reason: { type: "string", minLength: 1, maxLength: 2000, description: "Why the notices were manifestly unfounded (sealed; the notifier is not shown it)." } },
  },
  SuspendNotifier: {
    type: "object",
    required: ["reporter", "reason", "until"],
    additionalProperties: false,
    properties: {
      reporter: notifierReporter,
      reason: { type: "string", minLength: 1, maxLength: 2000 },
      until: { type: "string", format: "date-time", description: "End of the suspension (at most 366 days away)." },
    },
  },
  LiftSuspension: { type: "object", required: ["reason"], additionalProperties: false, properties: { reason: { type: "string", minLength: 1, maxLength: 2000 } } },
  // Issue 15 §6: retention and a named person's data.
  RetentionSettings: {
    type: "object",
    required: ["personalDataDays"],
    additionalProperties: false,
    properties: { personalDataDays: { type: "integer", description: "Days the personal data of a closed case is kept after its last activity (184 to 3650; default 365)." } },
  },
  PersonalDataRequest: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      reporter: {
        type: "object",
        required: ["id"],
        additionalProperties: false,
        properties: { id: { type: "string", minLength: 1, maxLength: 300, description: "The reporter id given at intake (reporter.id) or as an appellant." } },
      },
      subjectOwner: {
        type: "object",
        required: ["id"],
        additionalProperties: false,
        properties: { id: { type: "string", minLength: 1, maxLength: 300, description: "The subject owner id given at intake (subject.ownerId) or as an appellant." } },
      },
    },
  },
  // Issue 16 §4: connectors (src/connectors/, docs/mastodon.md).
  CreateConnector: {
    type: "object",
    required: ["kind", "name", "baseUrl", "accessToken"],
    additionalProperties: false,
    properties: {
      kind: { enum: CONNECTOR_KINDS },
      name,
      baseUrl: { type: "string", minLength: 8, maxLength: 2048, description: "The server's https URL, e.g. https://mastodon.example (its origin is kept)." },
      accessToken: connectorToken,
      webhookSecret: connectorSecret,
      categories: connectorCategories,
      rules: connectorRules,
      actions: connectorActions,
      notifyByEmail: { type: "boolean", description: "send_email_notification of account actions (an action's params.notify overrides it); default false." },
      tellReporters: connectorTellReporters,
      retryBaseSeconds: { type: "integer", minimum: 0, maximum: 3600, description: "Base of the delivery backoff, default 5." },
      maxAttempts: { type: "integer", minimum: 5, maximum: 20, description: "Attempts before dead-letter, default 8." },
    },
  },
  UpdateConnector: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      accessToken: connectorToken,
      webhookSecret: connectorSecret,
      rotateWebhookSecret: { type: "boolean", description: "true: a new secret is generated and shown once (paste it into Mastodon's webhook)." },
      categories: connectorCategories,
      rules: connectorRules,
      actions: connectorActions,
      notifyByEmail: { type: "boolean" },
      tellReporters: connectorTellReporters,
    },
  },
} as const satisfies Record<string, JSONSchema>;
