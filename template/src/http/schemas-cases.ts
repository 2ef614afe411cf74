// Request bodies of cases: reports, triggers and their gates, queues, tasks, appeals, QA, notifiers, retention (see schemas.ts).
import type { JSONSchema } from "json-schema-to-ts";
import { APPEAL_OUTCOMES, APPELLANT_ROLES, DSA_KEYWORDS, POLICY_CATEGORIES, QUEUE_WELLNESS, REPORT_SOURCES, SUBJECT_KINDS, TRIGGER_EVENTS } from "../cases";
import { AUTHORITY_MODES } from "../workflows";
import { identifier, name } from "./schema-fields";

const notifierReporter = { type: "object", required: ["id"], additionalProperties: false, properties: { id: { type: "string", minLength: 1, maxLength: 300 } } } as const;

export const caseSchemas = {
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
          snapshot: {
            description:
              "The reported content as the reporter saw it (sealed at rest). At most 262,144 bytes as JSON (413 report.snapshot_too_large); strings up to 65,536 characters, lists and maps up to 1,000 entries (422 report.snapshot_over_bounds).",
          },
          signals: {
            type: "object",
            additionalProperties: false,
            description: "What the product knows ties the owner to other accounts; stored only as keyed hashes (never the values), for the account's related accounts.",
            properties: {
              ip: { type: "string", minLength: 1, maxLength: 100 },
              deviceId: { type: "string", minLength: 1, maxLength: 300 },
              email: { type: "string", minLength: 1, maxLength: 320 },
              paymentFingerprint: { type: "string", minLength: 1, maxLength: 300 },
            },
          },
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
            pdq: { type: "string", pattern: "^[0-9a-f]{64}$", description: "The image's PDQ hash (POST /media/hashes), matched against hash banks by the hash_bank enrichment." },
            pdqQuality: { type: "integer", minimum: 0, maximum: 100 },
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
      wellness: {
        enum: QUEUE_WELLNESS,
        description: "standard (default), or strict: media shown blurred and in greyscale whatever the reviewer's preference, and the shortest exposure cap (a child-safety desk).",
      },
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
    // A replacement names what it sets: `{}` would silently lift every cap.
    minProperties: 1,
    description: 'Replaces the installation\'s daily exposure caps (minutes of claimed tasks per reviewer per UTC day). At least one field; to lift every cap send { "defaultMinutes": null, "categories": {} }.',
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
  // Retention and a named person's data (export and erasure on request).
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
  PlacePreservationHold: {
    type: "object",
    required: ["reason"],
    additionalProperties: false,
    properties: {
      reason: { type: "string", minLength: 1, maxLength: 2000, description: "Why the case is held (e.g. CyberTipline report 123456, 18 U.S.C. § 2258A(h))." },
      days: { type: "integer", minimum: 1, maximum: 3650, description: "How long; default 365 (the CyberTipline preservation period)." },
    },
  },
  ReleasePreservationHold: { type: "object", required: ["reason"], additionalProperties: false, properties: { reason: { type: "string", minLength: 1, maxLength: 2000 } } },
} as const satisfies Record<string, JSONSchema>;
