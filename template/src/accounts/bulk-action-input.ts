// What a bulk action acts on and what it decides: its input, the subjects it names (an id list, a
// search's reports, or the reported subjects of some accounts, each read only within the
// installation) and the decision each subject's run records. bulk-actions.ts records and runs it.
import { auditStatement } from "../audit";
import { search, type SearchQuery } from "../cases";
import { actsAsPerson, canReadPersonalData, type Actor } from "../auth";
import { AppError } from "../errors";
import { decisionConfigProblems } from "../lib/dsa-vocabulary";
import { searchTerm } from "../lib/person-keys";
import { accountKeyOf } from "./accounts";
import { kindOf } from "./strike-policy";

export const MAX_BULK_SUBJECTS = 10_000;
/**
 * Pages of a search (200 reports each) read for a bulk action's subjects: enough for 10,000
 * subjects with one report each. A search that still has reports past them (many reports about
 * few subjects) is refused rather than read to its end: one request must not walk the whole
 * installation.
 */
export const MAX_SEARCH_PAGES = 60;

export interface BulkActionInput {
  subjects?: Array<{ kind?: unknown; id?: unknown }>;
  search?: Record<string, unknown>;
  /** Accounts (the product's ids of owners, or keys as related accounts are listed): the subjects of their reports. */
  accounts?: string[];
  actionType: string;
  reason: string;
  decision?: { outcome?: string; restrictions?: Record<string, unknown>; ground?: string; legalGround?: string; contractualGround?: string; policyCategory?: string };
  dryRun?: boolean;
}

const BODY_FIELDS: Record<string, string> = { legal_ground: "legalGround", contractual_ground: "contractualGround", policy_category: "policyCategory", statement: "reason" };

/**
 * The decision each subject's run records (a decision node's config, without its statement: the
 * reason is). What the caller names, else what the action type's key says (kindOf): a suspension
 * or termination restricts the account, a warning is a decision not to act, anything else removes
 * the content. Whether a person decided: a person's list is a person's decision; a person's search
 * is partly automated (a query chose the subjects); an automation key's, fully automated.
 * Checked as POST /decisions checks a decision (422 bulk_action.decision_invalid).
 */
export function bulkDecisionConfig(actor: Actor, input: BulkActionInput): Record<string, unknown> {
  const kind = kindOf(input.actionType);
  const defaults: Record<string, { outcome: string; restrictions: Record<string, unknown> }> = {
    suspension: { outcome: "account_suspended", restrictions: { account: "suspended" } },
    termination: { outcome: "account_terminated", restrictions: { account: "terminated" } },
    warning: { outcome: "warning", restrictions: {} },
    restriction: { outcome: "content_removed", restrictions: { visibility: ["content_removed"] } },
  };
  const given = input.decision ?? {};
  const config: Record<string, unknown> = {
    outcome: given.outcome ?? (given.restrictions === undefined ? defaults[kind]!.outcome : "restricted"),
    restrictions: given.restrictions ?? defaults[kind]!.restrictions,
    ground: given.ground ?? "incompatible_content",
    ...(given.legalGround === undefined ? {} : { legal_ground: given.legalGround }),
    ...(given.contractualGround === undefined ? {} : { contractual_ground: given.contractualGround }),
    ...(given.policyCategory === undefined ? {} : { policy_category: given.policyCategory }),
    automated_decision: !actsAsPerson(actor) ? "fully" : input.search ? "partially" : "not_automated",
  };
  const problems = decisionConfigProblems({ ...config, statement: input.reason });
  if (problems.length > 0) {
    throw new AppError("bulk_action.decision_invalid", `The subjects' decision: ${problems.map((p) => p.message).join(" ")}`, {
      status: 422,
      details: problems.map((p) => {
        const field = p.path.replace(/^config\./u, "");
        const top = field.replace(/^[a-z_]+/u, (name) => BODY_FIELDS[name] ?? name);
        return { path: top === "reason" ? "$.reason" : `$.decision.${top}`, code: "invalid", message: p.message };
      }),
    });
  }
  return config;
}

export function invalid(message: string, path: string): AppError {
  return new AppError("bulk_action.invalid", message, { status: 422, details: [{ path, code: "invalid", message }] });
}

/**
 * The subjects named: the id list as given (each once), the subjects of a search's reports, or the
 * subjects of the reports about some accounts (an account and the ones related to it: a spam
 * ring), up to 10,000, newest first. Only this installation's reports are read.
 */
export async function subjectsOf(env: Env, actor: Actor, input: BulkActionInput, searchPages = { max: MAX_SEARCH_PAGES, size: 200 }): Promise<Array<{ kind: string; id: string }>> {
  if ([input.subjects, input.search, input.accounts].filter((source) => source !== undefined).length !== 1) {
    throw invalid("Name the subjects one way: as a list (subjects), as a search (search), or as the accounts whose reported subjects to act on (accounts).", "$");
  }
  const seen = new Map<string, { kind: string; id: string }>();
  if (input.accounts) {
    // Product account ids are personal identifiers: matching them is a search of personal data, as
    // GET /search?type=account is (its scope, and its audit event, a dry run's too).
    if (!canReadPersonalData(actor)) {
      throw new AppError("bulk_action.personal_data_scope", "Naming subjects by accounts matches personal identifiers; it needs the personal_data:read scope (or admin). Name the subjects as a list or a search instead.", { status: 403 });
    }
    const keys = [...new Set(input.accounts.map((account) => accountKeyOf(actor.installationId, account)))];
    const { results } = await env.DB.prepare(`SELECT subject_kind AS kind, subject_id AS id, MAX(created_at) AS at FROM reports
        WHERE installation_id = ?1 AND subject_owner_key IN (SELECT value FROM json_each(?2)) GROUP BY subject_kind, subject_id ORDER BY at DESC LIMIT ${MAX_BULK_SUBJECTS}`)
      .bind(actor.installationId, JSON.stringify(keys))
      .all<{ kind: string; id: string }>();
    // Who matched which accounts (only as a keyed digest), for what, with how many subjects found.
    await auditStatement(env.DB, {
      installationId: actor.installationId,
      idempotencyKey: `search:${crypto.randomUUID()}`,
      action: "search.personal_data_searched",
      actor: actor.audit,
      target: { type: "search", id: "account" },
      details: {
        type: "account",
        fields: ["account.id"],
        via: "bulk_action",
        dryRun: input.dryRun === true,
        accounts: keys.length,
        results: results.length,
        queryDigest: searchTerm(actor.installationId, "word", `accounts\u0000${[...keys].sort().join(",")}`),
      },
      at: new Date().toISOString(),
    }).run();
    return results.map(({ kind, id }) => ({ kind, id }));
  }
  if (input.subjects) {
    for (const [i, subject] of input.subjects.entries()) {
      if (typeof subject.kind !== "string" || typeof subject.id !== "string" || subject.kind.length === 0 || subject.id.length === 0 || subject.kind.length > 100 || subject.id.length > 500) {
        throw invalid("Each subject is { kind, id }, two non-empty strings.", `$.subjects[${i}]`);
      }
      seen.set(`${subject.kind}\u0000${subject.id}`, { kind: subject.kind, id: subject.id });
    }
    return [...seen.values()];
  }
  const filters = input.search!;
  const text = (name: string) => (typeof filters[name] === "string" ? (filters[name] as string) : undefined);
  const query: SearchQuery = { type: "report", limit: searchPages.size, cursor: null };
  for (const name of ["q", "category", "state", "queue", "from", "to", "decision", "automation"] as const) if (text(name) !== undefined) (query as unknown as Record<string, string>)[name] = text(name)!;
  for (let pages = 1; seen.size < MAX_BULK_SUBJECTS; pages++) {
    const page = await search(env, actor, query);
    for (const item of page.items) seen.set(`${String(item.subjectKind)}\u0000${String(item.subjectId)}`, { kind: String(item.subjectKind), id: String(item.subjectId) });
    if (!page.nextCursor) break;
    if (pages === searchPages.max && seen.size < MAX_BULK_SUBJECTS) {
      throw new AppError(
        "bulk_action.search_too_broad",
        `The search matches more than ${searchPages.max * searchPages.size} reports before naming ${MAX_BULK_SUBJECTS} subjects; narrow it (category, dates, a query) or name the subjects as a list.`,
        { status: 422, details: [{ path: "$.search", code: "too_broad", message: "Narrow the search, or name the subjects as a list." }] },
      );
    }
    const last = page.items.at(-1)!;
    query.cursor = [String(last.at), String(last.id)];
  }
  return [...seen.values()].slice(0, MAX_BULK_SUBJECTS);
}
