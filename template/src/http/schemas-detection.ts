// Request bodies of detection: rule sets, their versions and deployments, events, labels.
import { AUTHORITY_MODES, EXPRESSION_SEMANTICS } from "../workflows";
import { identifier, name } from "./schema-fields";

const entityKind = { type: "string", pattern: "^[a-z][a-z0-9_]{0,31}$" } as const;

const ruleList = {
  type: "array",
  maxItems: 200,
  items: {
    type: "object",
    required: ["id", "when", "outcome"],
    additionalProperties: false,
    properties: {
      id: { type: "string", minLength: 1, maxLength: 64 },
      when: { type: "string", minLength: 1, maxLength: 4096, description: "CEL over event, entity and labels, with count(type, entity.<kind>, window) and distinct(kind, entity.<kind>, window)." },
      outcome: {
        type: "object",
        minProperties: 1,
        maxProperties: 1,
        additionalProperties: false,
        properties: {
          label: {
            type: "object",
            required: ["entity", "value"],
            additionalProperties: false,
            properties: { entity: entityKind, value: { type: "string", minLength: 1, maxLength: 64 }, expiresIn: { type: "string", maxLength: 16 } },
          },
          report: {
            type: "object",
            required: ["entity", "category"],
            additionalProperties: false,
            properties: { entity: entityKind, category: { type: "string", minLength: 1, maxLength: 200 }, description: { type: "string", maxLength: 2000 } },
          },
          run: { type: "object", required: ["workflowVersionId"], additionalProperties: false, properties: { workflowVersionId: identifier, entity: entityKind } },
          action: { type: "object", description: "Not supported yet (rule_set.outcome_unsupported): use a run whose workflow proposes the action." },
        },
      },
    },
  },
} as const;

export const detectionSchemas = {
  CreateRuleSet: { type: "object", required: ["name"], additionalProperties: false, properties: { name } },
  PublishRuleSetVersion: {
    type: "object",
    required: ["rules"],
    additionalProperties: false,
    properties: {
      expressionSemantics: { enum: EXPRESSION_SEMANTICS, description: "How CEL's numbers meet JSON's; default json-numbers-1, written into the version." },
      rules: ruleList,
    },
  },
  TestRules: {
    type: "object",
    required: ["rules", "events"],
    additionalProperties: false,
    properties: {
      expressionSemantics: { enum: EXPRESSION_SEMANTICS },
      rules: ruleList,
      events: { type: "array", minItems: 1, maxItems: 100, items: { type: "object" }, description: "Events as POST /events takes them; nothing is counted or applied." },
    },
  },
  DeployRuleSet: {
    type: "object",
    required: ["versionId", "authorityMode"],
    additionalProperties: false,
    properties: { versionId: identifier, authorityMode: { enum: AUTHORITY_MODES } },
  },
  IngestEvents: {
    type: "object",
    required: ["events"],
    additionalProperties: false,
    properties: {
      events: {
        type: "array",
        minItems: 1,
        maxItems: 1000,
        description: "Each {id, type, occurredAt, entities, data}; each is checked on its own (a bad one is rejected in its result).",
        items: { type: "object" },
      },
    },
  },
  BacktestRuleSetVersion: {
    type: "object",
    additionalProperties: false,
    properties: {
      source: { enum: ["samples", "reports"], description: "samples (default): the sampled events; reports: the stored reports, each replayed as a report.created event." },
      from: { type: "string", maxLength: 40, description: "Events (or reports) from this time (default: 7 days ago)." },
      to: { type: "string", maxLength: 40, description: "Up to this time (default: now)." },
      limit: { type: "integer", minimum: 1, maximum: 2000 },
    },
  },
  PutEventSettings: { type: "object", required: ["sampleRate"], additionalProperties: false, properties: { sampleRate: { type: "number", minimum: 0, maximum: 1 } } },
  RuleSetGate: {
    type: "object",
    additionalProperties: false,
    minProperties: 1,
    properties: {
      minComparedHits: { type: "integer", minimum: 0, maximum: 100000, description: "Comparisons of the version's shadow hits with people's later labels needed for autonomous." },
      minAgreementLow: { type: "number", minimum: 0, maximum: 1, description: "Agreement's lower bound (95% Wilson) needed for autonomous." },
    },
  },
  PutLabeler: {
    type: "object",
    required: ["did", "publicKinds"],
    additionalProperties: false,
    properties: {
      did: { type: "string", minLength: 8, maxLength: 2048, description: "The labeler's DID: the src of every label it serves." },
      publicKinds: { type: "array", maxItems: 16, uniqueItems: true, items: entityKind, description: "Entity kinds whose labels are public: account and content kinds only." },
      publicValues: { type: ["array", "null"], maxItems: 200, uniqueItems: true, items: { type: "string", minLength: 1, maxLength: 64 }, description: "Only these label values are public (absent or null: every value)." },
      signingKey: { enum: ["generate", "keep", "remove"], description: "generate a new secp256k1 key (its did:key is shown, never the key), keep the current one (the default), or remove it (labels unsigned)." },
    },
  },
  PutLabel: {
    type: "object",
    required: ["entity", "value", "label"],
    additionalProperties: false,
    properties: {
      entity: entityKind,
      value: { type: "string", minLength: 1, maxLength: 512 },
      label: { type: "string", minLength: 1, maxLength: 64 },
      negate: { type: "boolean" },
      expiresIn: { type: "string", maxLength: 16 },
    },
  },
} as const;
