// The policy categories a report is stored under (the EU DSA statement-of-reasons categories,
// lower-cased) and the normalisation intake applies to what a client sends. Shared: intake stores
// these keys, and expressions that compare `report.category` are checked against them.
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
