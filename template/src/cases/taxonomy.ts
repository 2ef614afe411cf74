// The case vocabulary. The policy taxonomy: the EU DSA statement-of-reasons categories, plus the
// ATProto / Ozone reason types some products already send, mapped onto them; and the events
// triggers listen to and the outcomes of an appeal.
import sorSchema from "../lib/dsa-statement-of-reasons.schema.json";

export { normalizeCategory, POLICY_CATEGORIES, type PolicyCategory } from "../lib/policy-categories";
import type { PolicyCategory } from "../lib/policy-categories";

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

/** The DSA Transparency Database constant of a category. */
export function dsaCategory(category: PolicyCategory): string {
  return `STATEMENT_CATEGORY_${category.toUpperCase()}`;
}

/**
 * A queue's wellness profile: `strict` (a child-safety desk's) shows its tasks' media blurred and in
 * greyscale whatever the reviewer's preference, and counts its work against the shortest exposure cap.
 */
export const QUEUE_WELLNESS = ["standard", "strict"] as const;
export type QueueWellness = (typeof QUEUE_WELLNESS)[number];
