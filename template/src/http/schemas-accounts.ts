// Request bodies of accounts: the strike policy, a person's sanction on an account, bulk actions (see schemas.ts).
import type { JSONSchema } from "json-schema-to-ts";
import { LADDER_AUTHORITY_MODES, SANCTION_KINDS } from "../accounts";

const actionTypeKey = { type: "string", pattern: "^[A-Za-z0-9._:-]{1,100}$" } as const;

export const accountSchemas = {
  StrikePolicy: {
    type: "object",
    required: ["categories", "expiryDays", "ladder"],
    additionalProperties: false,
    properties: {
      categories: {
        type: "object",
        maxProperties: 100,
        description: "A policy category (DSA statement category) → the strike points a restricting decision in it gives; manifestlyIllegal: false keeps its illegal-content decisions out of DSA Art. 23(1).",
        additionalProperties: {
          type: "object",
          required: ["points"],
          additionalProperties: false,
          properties: { points: { type: "integer", minimum: 0, maximum: 1000 }, manifestlyIllegal: { type: "boolean" } },
        },
      },
      expiryDays: { type: "integer", minimum: 1, maximum: 3650, description: "How long a strike counts." },
      warningPeriodHours: { type: "integer", minimum: 0, maximum: 8760, description: "How long a warning must stand before a suspension for manifestly illegal content may follow (DSA Art. 23(1)); default 0." },
      authorityMode: { enum: LADDER_AUTHORITY_MODES, description: "assisted (default): every ladder action waits for approval; autonomous: delivered unless its action type is assisted." },
      ladder: {
        type: "array",
        maxItems: 20,
        items: {
          type: "object",
          required: ["points", "actionType"],
          additionalProperties: false,
          properties: {
            points: { type: "integer", minimum: 1, maximum: 100000, description: "The threshold: reached when the account's counting points are at least this." },
            actionType: { ...actionTypeKey, description: "The key of an action type of this installation." },
            kind: { enum: SANCTION_KINDS, description: "What the action does; default read from the key (warn…, suspend…, ban/terminate…, else restriction)." },
          },
        },
      },
    },
  },
  SanctionAccount: {
    type: "object",
    required: ["actionType", "reason"],
    additionalProperties: false,
    properties: {
      actionType: actionTypeKey,
      kind: { enum: SANCTION_KINDS, description: "Default read from the action type's key." },
      manifestlyIllegal: { type: "boolean", description: "A suspension for manifestly illegal content (DSA Art. 23(1)): refused (409) without a prior warning on record." },
      reportId: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,200}$", description: "The account's report the action names (its subject goes to the product); default its latest." },
      reason: { type: "string", minLength: 1, maxLength: 2000 },
    },
  },
  BulkAction: {
    type: "object",
    required: ["actionType", "reason"],
    additionalProperties: false,
    properties: {
      subjects: {
        type: "array",
        minItems: 1,
        maxItems: 10000,
        description: "The subjects to act on (each once); or `search`.",
        items: { type: "object", required: ["kind", "id"], additionalProperties: false, properties: { kind: { type: "string", minLength: 1, maxLength: 100 }, id: { type: "string", minLength: 1, maxLength: 500 } } },
      },
      search: {
        type: "object",
        additionalProperties: false,
        description: "The filters of GET /search (type report): the subjects of the reports it finds, up to 10,000, newest first.",
        properties: Object.fromEntries(["q", "category", "state", "queue", "from", "to", "decision", "automation"].map((name) => [name, { type: "string", minLength: 1, maxLength: 500 }])) as Record<
          "q" | "category" | "state" | "queue" | "from" | "to" | "decision" | "automation",
          { type: "string"; minLength: 1; maxLength: 500 }
        >,
      },
      accounts: {
        type: "array",
        minItems: 1,
        maxItems: 1000,
        uniqueItems: true,
        description:
          "Accounts (the product's ids of subject owners, or pk1_ keys as related accounts are listed): the subjects of their reports here, up to 10,000, newest first; or `subjects`, or `search`. A search of personal data: audited (search.personal_data_searched), a dry run too.",
        items: { type: "string", minLength: 1, maxLength: 500 },
      },
      actionType: actionTypeKey,
      reason: { type: "string", minLength: 1, maxLength: 2000, description: "Why: the statement of reasons of each subject's decision (the facts and circumstances relied on)." },
      decision: {
        type: "object",
        additionalProperties: false,
        description:
          "The decision each subject gets once its action is applied (its statement of reasons is `reason`; queued for the Transparency Database like any restricting decision); a decision not to act only for a subject with a report. Default from the action type's key: suspend… → the account suspended, ban…/terminate… → terminated, warn… → a decision not to act, otherwise the content removed; ground incompatible_content.",
        properties: {
          outcome: { type: "string", minLength: 1, maxLength: 100 },
          restrictions: { type: "object", description: "{ visibility: [content_removed…], account: suspended|terminated, monetary, provision }; {} records a decision not to act." },
          ground: { type: "string", enum: ["illegal_content", "incompatible_content"] },
          legalGround: { type: "string", minLength: 1, maxLength: 500 },
          contractualGround: { type: "string", minLength: 1, maxLength: 500 },
          policyCategory: {
            type: "string",
            minLength: 1,
            maxLength: 100,
            description: "The DSA category, where it is not the report's; required when the decision restricts and a subject has no report here (422 bulk_action.policy_category_required).",
          },
        },
      },
      dryRun: { type: "boolean", description: "Answer the counts (subjects, with and without a case here) and write nothing." },
    },
  },
} as const satisfies Record<string, JSONSchema>;
