// JSON Schemas of request bodies: used for validation, published in the OpenAPI document, and (with
// json-schema-to-ts's FromSchema, types only) the type of the body a route's handler receives.
// The bodies of cases, enforcement and media are in schemas-cases.ts, schemas-enforcement.ts and schemas-media.ts; `schemas` is all of them.
import type { JSONSchema } from "json-schema-to-ts";
import { AI_OUTPUT_FORMATS, AI_PROVIDER_KINDS } from "../automation";
import { CONSOLE_ROLES } from "../console";
import { AUTHORITY_MODES, RUN_STATES } from "../workflows";
import { SCOPES } from "./auth";
import { accountSchemas } from "./schemas-accounts";
import { caseSchemas } from "./schemas-cases";
import { detectionSchemas } from "./schemas-detection";
import { enforcementSchemas } from "./schemas-enforcement";
import { exchangeSchemas } from "./schemas-exchanges";
import { mediaSchemas } from "./schemas-media";
import { identifier, name } from "./schema-fields";

const coreSchemas = {
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
    properties: {
      name,
      scopes: { type: "array", minItems: 1, uniqueItems: true, items: { enum: SCOPES } },
      reviewer: {
        type: "string",
        minLength: 1,
        maxLength: 200,
        description: "Makes this a reviewer's key: the person it belongs to. Its task answers and appeal outcomes are a person's; a key without one is automation.",
      },
    },
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
  // POST /workflow-templates/use: a template of GET /workflow-templates; the new workflow's name defaults to its title.
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
        // An empty filter would select every run of the installation: name at least one condition.
        minProperties: 1,
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
  StorageSettings: {
    type: "object",
    required: ["hotDays"],
    additionalProperties: false,
    properties: { hotDays: { type: "integer", description: "Days an ended run keeps its steps, outputs, waits, events and repairs in D1 before they move to R2 (0 to 3650; default 7)." } },
  },
  SendEvent: {
    type: "object",
    required: ["type"],
    additionalProperties: false,
    properties: { type: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" }, payload: { type: "object" } },
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
} as const satisfies Record<string, JSONSchema>;

export const schemas = { ...coreSchemas, ...caseSchemas, ...enforcementSchemas, ...accountSchemas, ...detectionSchemas, ...mediaSchemas, ...exchangeSchemas } as const satisfies Record<string, JSONSchema>;
