// The case vocabulary. The policy taxonomy: the EU DSA statement-of-reasons categories, plus the
// ATProto / Ozone reason types some products already send, mapped onto them; and the events
// triggers listen to and the outcomes of an appeal.
import sorSchema from "../lib/dsa-statement-of-reasons.schema.json";

export const POLICY_CATEGORIES = [
  "animal_welfare",
  "consumer_information",
  "cyber_violence",
  "cyber_violence_against_women",
  "data_protection_and_privacy_violations",
  "illegal_or_harmful_speech",
  "intellectual_property_infringements",
  "negative_effects_on_civic_discourse_or_elections",
  "not_specified_notice",
  "other_violation_tc",
  "protection_of_minors",
  "risk_for_public_security",
  "scams_and_fraud",
  "self_harm",
  "unsafe_and_prohibited_products",
  "violence",
] as const;
export type PolicyCategory = (typeof POLICY_CATEGORIES)[number];

/** The DSA `category_specification` keywords (KEYWORD_*), straight from the Transparency Database schema. */
export const DSA_KEYWORDS: readonly string[] = (sorSchema.properties.category_specification.items as { enum: string[] }).enum;

export const SUBJECT_KINDS = ["content", "account", "message", "media", "listing", "group", "other"] as const;
export type SubjectKind = (typeof SUBJECT_KINDS)[number];

/** DSA `source_type` of the notice a report is. */
export const REPORT_SOURCES = ["notice", "trusted_flagger", "other_notification", "voluntary"] as const;

export const TRIGGER_EVENTS = ["report.created", "appeal.created"] as const;
export type TriggerEvent = (typeof TRIGGER_EVENTS)[number];

export const APPEAL_OUTCOMES = ["upheld", "overturned"] as const;
/** Who appeals (DSA Art. 20): the notifier (e.g. against a decision not to act) or the user a restriction affects. */
export const APPELLANT_ROLES = ["notifier", "affected"] as const;

const ATPROTO_REASONS: Record<string, PolicyCategory> = {
  reasonSpam: "scams_and_fraud",
  reasonMisleading: "scams_and_fraud",
  reasonSexual: "other_violation_tc",
  reasonRude: "illegal_or_harmful_speech",
  reasonViolation: "other_violation_tc",
  reasonOther: "other_violation_tc",
  reasonAppeal: "not_specified_notice",
};

const ATPROTO_GROUPS: Array<[RegExp, PolicyCategory]> = [
  [/^reasonMisleadingElections/u, "negative_effects_on_civic_discourse_or_elections"],
  [/^reasonMisleading/u, "scams_and_fraud"],
  [/^reasonChildSafety/u, "protection_of_minors"],
  [/^reasonSelfHarm/u, "self_harm"],
  [/^reasonHarassmentHateSpeech/u, "illegal_or_harmful_speech"],
  [/^reasonHarassmentDoxxing/u, "data_protection_and_privacy_violations"],
  [/^reasonHarassment/u, "cyber_violence"],
  [/^reasonViolenceExtremist/u, "risk_for_public_security"],
  [/^reasonViolenceAnimal/u, "animal_welfare"],
  [/^reasonViolence/u, "violence"],
  [/^reasonRule/u, "other_violation_tc"],
  [/^reasonSexual/u, "other_violation_tc"],
  [/^reasonCivic/u, "negative_effects_on_civic_discourse_or_elections"],
];

/**
 * Normalizes a category: our key (`scams_and_fraud`), the DSA constant
 * (`STATEMENT_CATEGORY_SCAMS_AND_FRAUD`) or an ATProto reason (`…defs#reasonMisleadingSpam`).
 */
export function normalizeCategory(input: string): PolicyCategory | null {
  const lowered = input.toLowerCase();
  if ((POLICY_CATEGORIES as readonly string[]).includes(lowered)) return lowered as PolicyCategory;
  const dsa = /^statement_category_([a-z_]+)$/u.exec(lowered);
  if (dsa && (POLICY_CATEGORIES as readonly string[]).includes(dsa[1]!)) return dsa[1] as PolicyCategory;
  const reason = /#(reason[A-Za-z]+)$/u.exec(input)?.[1] ?? (/^reason[A-Z]/u.test(input) ? input : null);
  if (reason) return ATPROTO_REASONS[reason] ?? ATPROTO_GROUPS.find(([pattern]) => pattern.test(reason))?.[1] ?? null;
  return null;
}

/** The DSA Transparency Database constant of a category. */
export function dsaCategory(category: PolicyCategory): string {
  return `STATEMENT_CATEGORY_${category.toUpperCase()}`;
}
