// The EU DSA vocabulary a decision's config uses (our short names for the Transparency Database's
// constants), and the one check of a decision config: at publish (the decision node's descriptor),
// at run time and for decisions people record. Pure data and functions: the console imports it too.

export const VISIBILITY = ["content_removed", "content_disabled", "content_demoted", "content_age_restricted", "content_interaction_restricted", "content_labelled", "other"] as const;
export const ACCOUNT = ["suspended", "terminated"] as const;
export const MONETARY = ["suspension", "termination", "other"] as const;
export const PROVISION = ["partial_suspension", "total_suspension", "partial_termination", "total_termination"] as const;
export const CONTENT_TYPES = ["app", "audio", "image", "product", "synthetic_media", "text", "video", "other"] as const;
export const DECISION_GROUNDS = ["incompatible_content", "illegal_content"] as const;
export const AUTOMATED_DECISIONS = ["fully", "partially", "not_automated"] as const;
export const EEA = ["AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU", "IE", "IS", "IT", "LI", "LT", "LU", "LV", "MT", "NL", "NO", "PL", "PT", "RO", "SE", "SI", "SK"] as const;

/**
 * The outcome of a decision not to act. Any decision that names no restriction at all is a decision
 * not to act (`restricts: false`), whatever its outcome is called; `no_action` is the standard
 * name, and it may not name restrictions. A decision not to act has no DSA statement of reasons
 * (Art. 17 covers restrictions only), but is recorded, audited and appealable by the notifier.
 */
export const NO_ACTION = "no_action";

export interface Restrictions {
  visibility?: string[];
  visibility_other?: string;
  account?: string;
  monetary?: string;
  monetary_other?: string;
  provision?: string;
}

export interface ConfigProblem {
  /** Relative to the node, e.g. `config.content_type[0]`. */
  path: string;
  message: string;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Whether a decision's restrictions restrict anything (absent or `{}` → a decision not to act). */
export function restrictsAnything(restrictions: unknown): boolean {
  if (!isRecord(restrictions)) return false;
  const visibility = Array.isArray(restrictions.visibility) ? restrictions.visibility : [];
  return visibility.length > 0 || Boolean(restrictions.account) || Boolean(restrictions.monetary) || Boolean(restrictions.provision);
}

/** "takes a, b, c", plus the short name when the value is the database's own constant for one. */
function takes(field: string, allowed: readonly string[], value: unknown, prefix: string): string {
  const base = `${field} takes ${allowed.join(", ")}.`;
  if (typeof value !== "string") return base;
  const short = value.startsWith(`${prefix}_`) ? value.slice(prefix.length + 1).toLowerCase() : null;
  return short && allowed.includes(short) ? `${base} ${value} is the Transparency Database's constant; write ${short}.` : base;
}

function oneOf(problems: ConfigProblem[], path: string, field: string, allowed: readonly string[], value: unknown, prefix: string): void {
  if (value !== undefined && !(typeof value === "string" && allowed.includes(value))) problems.push({ path, message: takes(field, allowed, value, prefix) });
}

/** Every problem of a decision config that can be known without running it (none → valid). */
export function decisionConfigProblems(config: Record<string, unknown>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  if (typeof config.outcome !== "string" || config.outcome === "") problems.push({ path: "config.outcome", message: "config.outcome is required." });
  const r = config.restrictions;
  const restricts = restrictsAnything(r);
  const text = config.statement ?? config.explanation;
  // A decision not to act has no statement of reasons, so its text is an optional note.
  if (restricts && (typeof text !== "string" || text.trim() === "")) problems.push({ path: "config.statement", message: "config.statement (the facts and circumstances relied on) is required for a decision that restricts." });
  else if (text !== undefined && typeof text !== "string") problems.push({ path: "config.statement", message: "config.statement is text." });
  oneOf(problems, "config.ground", "ground", DECISION_GROUNDS, config.ground, "DECISION_GROUND");
  // The Transparency Database trims every text and takes an empty one as absent: a ground of blanks
  // would be refused there for good, so it is refused here, when it can still be fixed.
  const blank = (value: unknown) => typeof value !== "string" || value.trim() === "";
  if (restricts && config.ground === "illegal_content" && blank(config.legal_ground))
    problems.push({ path: "config.legal_ground", message: "illegal_content needs config.legal_ground: the law the content breaks (e.g. § 263 StGB), not blanks." });
  else if (config.legal_ground !== undefined && (blank(config.legal_ground) || String(config.legal_ground).trim().length > 500))
    problems.push({ path: "config.legal_ground", message: "config.legal_ground is the law relied on, 1 to 500 characters besides blanks." });
  if (config.contractual_ground !== undefined && (blank(config.contractual_ground) || String(config.contractual_ground).trim().length > 500)) {
    problems.push({ path: "config.contractual_ground", message: "config.contractual_ground is the clause of the terms and conditions relied on (DSA Art. 17(3)(e)), 1 to 500 characters besides blanks." });
  }
  if (config.content_date !== undefined && (typeof config.content_date !== "string" || (!/^\d{4}-\d{2}-\d{2}$/u.test(config.content_date) && !/\{\{/u.test(config.content_date)))) {
    problems.push({ path: "config.content_date", message: "config.content_date is the content's date as YYYY-MM-DD (or a template such as {{ content_date }} from inputMapping)." });
  }
  if (config.automated_detection !== undefined && typeof config.automated_detection !== "boolean")
    problems.push({ path: "config.automated_detection", message: "config.automated_detection is true (automation detected the content) or false (a person did)." });
  if (r !== undefined && !isRecord(r)) {
    problems.push({ path: "config.restrictions", message: "config.restrictions must be an object: { visibility?, account?, monetary?, provision? }; leave it out (or {}) for a decision not to act." });
  } else if (isRecord(r)) {
    if (r.visibility !== undefined) {
      if (!Array.isArray(r.visibility)) problems.push({ path: "config.restrictions.visibility", message: `restrictions.visibility is a list; it takes ${VISIBILITY.join(", ")}.` });
      else for (const [i, v] of r.visibility.entries()) oneOf(problems, `config.restrictions.visibility[${i}]`, "restrictions.visibility", VISIBILITY, v, "DECISION_VISIBILITY");
    }
    oneOf(problems, "config.restrictions.account", "restrictions.account", ACCOUNT, r.account, "DECISION_ACCOUNT");
    oneOf(problems, "config.restrictions.monetary", "restrictions.monetary", MONETARY, r.monetary, "DECISION_MONETARY");
    oneOf(problems, "config.restrictions.provision", "restrictions.provision", PROVISION, r.provision, "DECISION_PROVISION");
    const visibility = Array.isArray(r.visibility) ? r.visibility : [];
    if (visibility.includes("other") && !r.visibility_other) problems.push({ path: "config.restrictions.visibility_other", message: "restrictions.visibility_other explains an 'other' visibility restriction." });
    if (r.monetary === "other" && !r.monetary_other) problems.push({ path: "config.restrictions.monetary_other", message: "restrictions.monetary_other explains an 'other' monetary restriction." });
    if (config.outcome === NO_ACTION && restricts) {
      problems.push({ path: "config.restrictions", message: "outcome no_action is a decision not to act, so it cannot name restrictions: remove the restrictions, or name the outcome that restricts (e.g. content_removed)." });
    }
  }
  if (config.content_type !== undefined) {
    if (!Array.isArray(config.content_type) || config.content_type.length === 0) problems.push({ path: "config.content_type", message: `content_type is a non-empty list; it takes ${CONTENT_TYPES.join(", ")}.` });
    else for (const [i, t] of config.content_type.entries()) oneOf(problems, `config.content_type[${i}]`, "content_type", CONTENT_TYPES, t, "CONTENT_TYPE");
  }
  if (config.territorial_scope !== undefined) {
    const scope = config.territorial_scope;
    if (!Array.isArray(scope) || scope.some((c) => !(EEA as readonly unknown[]).includes(c))) problems.push({ path: "config.territorial_scope", message: "territorial_scope takes EU/EEA country codes (e.g. DE, FR)." });
  }
  oneOf(problems, "config.automated_decision", "automated_decision", AUTOMATED_DECISIONS, config.automated_decision, "AUTOMATED_DECISION");
  return problems;
}
