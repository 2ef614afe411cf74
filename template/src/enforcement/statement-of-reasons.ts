// A decision as an EU DSA statement of reasons (Transparency Database API v1 shape), checked
// against the database's own schema before it leaves. No personal data (DSA Art. 24(5)): the facts
// are the decision's own text.
import { Validator, type Schema } from "@cfworker/json-schema";
import { dsaCategory, type PolicyCategory } from "../cases";
import { AppError } from "../errors";
import { restrictsAnything, type Restrictions } from "../lib/dsa-vocabulary";
import sorSchema from "../lib/dsa-statement-of-reasons.schema.json";
import type { DecisionRow } from "./decisions";

// The Transparency Database's own rules (../shared/formats): every statement is checked before it leaves.
const sorValidator = new Validator(sorSchema as unknown as Schema, "2020-12", false);

const SOURCE_TYPES: Record<string, string> = {
  notice: "SOURCE_ARTICLE_16",
  trusted_flagger: "SOURCE_TRUSTED_FLAGGER",
  other_notification: "SOURCE_TYPE_OTHER_NOTIFICATION",
  voluntary: "SOURCE_VOLUNTARY",
};

const upper = (prefix: string, value: string) => `${prefix}_${value.toUpperCase()}`;

/**
 * A statement as the Transparency Database reads it before validating: every text trimmed and an
 * empty one taken as absent (null), in lists too. A present null is then refused by the schema
 * unless the field is nullable, as there.
 */
export function normalizedStatement(statement: Record<string, unknown>): Record<string, unknown> {
  const norm = (value: unknown): unknown => {
    if (typeof value === "string") {
      const text = value.trim();
      return text === "" ? null : text;
    }
    if (Array.isArray(value)) return value.map(norm);
    return value;
  };
  return Object.fromEntries(Object.entries(statement).map(([key, value]) => [key, norm(value)]));
}

/** Why a statement would be refused by the database's rules (none: it would be accepted), after normalising it. */
export function statementProblems(statement: Record<string, unknown>): { statement: Record<string, unknown>; errors: Array<{ path: string; code: string; message: string }> } {
  const normal = normalizedStatement(statement);
  const check = sorValidator.validate(normal);
  return { statement: normal, errors: check.valid ? [] : check.errors.slice(0, 10).map((e) => ({ path: e.instanceLocation, code: e.keyword, message: e.error })) };
}

/** The statement of reasons of a restricting decision row, not yet checked (redactions may still apply). */
export function statementDraftOf(row: DecisionRow): Record<string, unknown> {
  const r = JSON.parse(row.restrictionsJson) as Restrictions;
  if (!restrictsAnything(r)) {
    throw new AppError(
      "statement_of_reasons.not_applicable",
      `Decision ${row.id} (${row.outcome}) restricts nothing: it is a decision not to act, and DSA Art. 17 asks for a statement of reasons only for restrictions. Nothing is submitted to the Transparency Database for it.`,
      { status: 409 },
    );
  }
  return sorFields(row);
}

/** The statement of reasons of a decision row, checked by the database's rules (throws as statementOfReasons does). */
export function statementOfReasonsOf(row: DecisionRow): Record<string, unknown> {
  const { statement, errors } = statementProblems(statementDraftOf(row));
  if (errors.length > 0) {
    // E.g. an explanation longer than the database's 2,000 characters: its submission is rejected
    // by the platform and resubmitted with a shorter explanation (POST .../resubmit).
    throw new AppError("statement_of_reasons.invalid", "The decision cannot be expressed as a valid statement of reasons as it stands; see details, and resubmit its Transparency Database submission with the fields redacted or shortened.", {
      status: 409,
      details: errors,
    });
  }
  return statement;
}

/**
 * The clause of the terms and conditions relied on (Art. 17(3)(e)) when the decision named none:
 * the terms' rules on its category, never an outcome code.
 */
export function contractualGroundOf(row: { legalGround: string | null; policyCategory: string }): string {
  return row.legalGround ?? `The service's terms and conditions on ${row.policyCategory.replace(/_/gu, " ")}.`;
}

type SorRow = Pick<
  DecisionRow,
  | "id"
  | "ground"
  | "contentTypeJson"
  | "categorySpecificationJson"
  | "restrictionsJson"
  | "policyCategory"
  | "contentDate"
  | "decidedAt"
  | "statementText"
  | "sourceType"
  | "automatedDetection"
  | "automatedDecision"
  | "legalGround"
  | "explanation"
  | "outcome"
  | "territorialScopeJson"
>;

/** The statement of reasons' fields from a decision's row (not yet checked against the schema). */
export function sorFields(row: SorRow): Record<string, unknown> {
  const r = JSON.parse(row.restrictionsJson) as Restrictions;
  const contentTypes = JSON.parse(row.contentTypeJson) as string[];
  const specification = JSON.parse(row.categorySpecificationJson) as string[];
  const sor: Record<string, unknown> = {
    decision_ground: upper("DECISION_GROUND", row.ground),
    content_type: contentTypes.map((t) => upper("CONTENT_TYPE", t)),
    category: dsaCategory(row.policyCategory as PolicyCategory),
    content_date: row.contentDate,
    application_date: row.decidedAt.slice(0, 10),
    decision_facts: row.statementText,
    source_type: SOURCE_TYPES[row.sourceType] ?? "SOURCE_VOLUNTARY",
    automated_detection: row.automatedDetection === 1 ? "Yes" : "No",
    automated_decision: upper("AUTOMATED_DECISION", row.automatedDecision === "not_automated" ? "not_automated" : row.automatedDecision),
    puid: row.id,
  };
  if (contentTypes.includes("other")) sor.content_type_other = "Other content";
  if (r.visibility?.length) sor.decision_visibility = r.visibility.map((v) => upper("DECISION_VISIBILITY", v));
  if (r.visibility_other) sor.decision_visibility_other = r.visibility_other;
  if (r.account) sor.decision_account = upper("DECISION_ACCOUNT", r.account);
  if (r.monetary) sor.decision_monetary = upper("DECISION_MONETARY", r.monetary);
  if (r.monetary_other) sor.decision_monetary_other = r.monetary_other;
  if (r.provision) sor.decision_provision = upper("DECISION_PROVISION", r.provision);
  if (row.ground === "illegal_content") {
    sor.illegal_content_legal_ground = row.legalGround;
    sor.illegal_content_explanation = row.explanation;
  } else {
    sor.incompatible_content_ground = contractualGroundOf(row);
    sor.incompatible_content_explanation = row.explanation;
  }
  if (specification.length) sor.category_specification = specification;
  if (row.territorialScopeJson) sor.territorial_scope = JSON.parse(row.territorialScopeJson) as string[];
  return sor;
}
