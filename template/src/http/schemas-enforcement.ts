// Request bodies of enforcement: webhook endpoints, alerts, action types, proposals, decisions, the Transparency Database, redress, connectors (see schemas.ts).
import type { JSONSchema } from "json-schema-to-ts";
import { CONNECTOR_KINDS, MASTODON_ACTIONS } from "../connectors";
import { ACTION_TYPE_AUTONOMY, CYBERTIPLINE_PRESET_NAMES, INCIDENT_TYPES, TDB_PRESET_NAMES, WEBHOOK_EVENT_TYPES } from "../enforcement";
import { ALERT_KINDS } from "../operations";
import { identifier, name } from "./schema-fields";

const connectorToken = { type: "string", minLength: 8, maxLength: 4096, description: "An access token with admin:write:accounts and admin:write:reports; stored sealed, never returned." } as const;
// Mastodon's own minimum for a webhook secret is 12 characters (Webhook model validation).
const connectorSecret = {
  type: "string",
  minLength: 12,
  maxLength: 512,
  description: "The secret Mastodon signs its webhooks with (X-Hub-Signature), at least 12 characters as Mastodon asks; generated and shown once when omitted.",
} as const;
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

export const enforcementSchemas = {
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
      legalGround: { type: "string", maxLength: 500, description: "illegal_content: the law the content breaks (e.g. § 263 StGB)." },
      contractualGround: { type: "string", maxLength: 500, description: "incompatible_content: the clause of the terms and conditions relied on (DSA Art. 17(3)(e)), e.g. 'Terms § 4.2: no fraudulent offers'." },
      contentDate: { type: "string", pattern: "^\\d{4}-\\d{2}-\\d{2}$", description: "The day the content was published, where known (else the report's day)." },
      automatedDetection: { type: "boolean", description: "Whether automation detected the content (DSA Art. 17(3)(c)); absent: false, a person decided." },
      policyCategory: { type: "string", maxLength: 200 },
      contentType: { type: "array", minItems: 1, items: { type: "string" } },
      territorialScope: { type: "array", items: { type: "string" } },
      decidedBy: { type: "string", minLength: 1, maxLength: 200, description: "A name recorded beside the authenticated caller (stated, not verified); never the audit actor." },
    },
  },
  // The DSA Transparency Database (enforcement/transparency-db*.ts).
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
  // NCMEC's CyberTipline (enforcement/cybertipline/).
  CyberTiplineSettings: {
    type: "object",
    required: ["username", "password", "reporter", "enabled"],
    additionalProperties: false,
    properties: {
      preset: { enum: CYBERTIPLINE_PRESET_NAMES, description: "production: https://report.cybertip.org/ispws; test: https://exttest.cybertip.org/ispws." },
      baseUrl: { type: "string", minLength: 8, maxLength: 2048, description: "Another https base URL (instead of preset)." },
      username: { type: "string", minLength: 1, maxLength: 200, description: "The ESP username NCMEC issued; stored sealed, never returned." },
      password: { type: "string", minLength: 1, maxLength: 500, description: "Its password; stored sealed, never returned." },
      reporter: {
        type: "object",
        required: ["email"],
        additionalProperties: false,
        description: "The reporting person NCMEC and law enforcement contact about reports (sealed).",
        properties: {
          firstName: { type: "string", minLength: 1, maxLength: 100 },
          lastName: { type: "string", minLength: 1, maxLength: 100 },
          email: { type: "string", minLength: 3, maxLength: 300, pattern: "^[^@\\s]+@[^@\\s]+$" },
          phone: { type: "string", minLength: 3, maxLength: 50 },
          companyTemplate: { type: "string", minLength: 1, maxLength: 5000, description: "Text on every report: how to serve legal process, data retention, an emergency contact." },
        },
      },
      espService: { type: "string", minLength: 1, maxLength: 200, description: "The product the reported people use, as NCMEC should name it." },
      enabled: { type: "boolean" },
    },
  },
  RetractCyberTiplineReport: {
    type: "object",
    required: ["reason"],
    additionalProperties: false,
    properties: { reason: { type: "string", minLength: 1, maxLength: 2000, description: "Why the report is cancelled at NCMEC; kept in the audit trail." } },
  },
  ReconcileCyberTiplineReport: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    maxProperties: 1,
    properties: {
      ncmecReportId: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$", description: "NCMEC's report id, as found in NCMEC's records." },
      resend: { const: true, description: "NCMEC holds no report for this submission: send /submit again." },
    },
  },
  ConfirmCyberTiplineReport: {
    type: "object",
    required: ["reportId"],
    additionalProperties: false,
    properties: {
      reportId: identifier,
      incidentType: { enum: INCIDENT_TYPES, description: "NCMEC's incident type; default Child Pornography (possession, manufacture, and distribution)." },
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
  RedressSettings: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    description: "Fields left out keep their current value; at least one is set.",
    properties: {
      statementsEnabled: { type: "boolean", description: "Send the affected user a statement of reasons after every restricting decision (DSA Art. 17); default true." },
      automatedComplaints: {
        type: "boolean",
        description: "Let automation (an API key that is not a reviewer's) propose a complaint's outcome, which a person confirms (POST /appeals/:id/confirm) before the appellant is told (DSA Art. 20(6)); default false.",
      },
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
  // Connectors (src/connectors/, docs/mastodon.md).
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
