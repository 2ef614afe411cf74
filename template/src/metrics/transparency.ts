// The DSA transparency report (Art. 15, 24; Commission Implementing Regulation (EU) 2024/2835,
// Annex I, quantitative template) for one period: the figures the platform holds, counted from its
// own rows, and every other figure of the template listed as not known, with the reason — never
// invented. Read-only: nothing here writes a row.
import { ART23_SUSPENSIONS_SQL } from "../accounts";
import type { Actor } from "../auth";
import { shadowReport, wilson } from "../automation";
import { AppError } from "../errors";
import { ACCOUNT, MONETARY, PROVISION, restrictsAnything, VISIBILITY, type Restrictions } from "../lib/dsa-vocabulary";
import { NOTICE_SOURCES, readTransparencyRows, type TransparencyRows } from "./transparency-queries";
import { readTransparencyRowsFromRollups } from "./transparency-rollup";

/** The longest period one report covers: a calendar year and a margin (annual reports, Art. 15 and 24). */
export const MAX_PERIOD_DAYS = 400;
const DAY_MS = 86_400_000;
/**
 * Periods up to this long (a month and a margin) are counted from the rows (exact medians); longer ones from the daily
 * rollups (transparency-rollup.ts), so a year of a million reports a month reads tens of rows a day.
 */
export const ROWS_MAX_DAYS = 35;

/** A figure of the template the platform does not hold. */
export interface NotKnown {
  known: false;
  reason: string;
  /** The platform does not record it yet; the figure is wired once it does. */
  notRecordedYet?: true;
}

const notKnown = (reason: string): NotKnown => ({ known: false, reason });

type Counts = Record<string, number>;

function parseBound(text: string, parameter: "from" | "to"): number {
  const dateOnly = /^\d{4}-\d{2}-\d{2}$/u.test(text);
  const ms = dateOnly || /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/u.test(text) ? Date.parse(dateOnly ? `${text}T00:00:00Z` : text) : Number.NaN;
  if (!Number.isFinite(ms)) {
    throw new AppError("transparency.invalid_time", `${parameter} must be a date (2026-12-31) or a time with its offset (2026-12-31T23:00:00Z).`, { status: 400, details: { parameter } });
  }
  // A date as `to` is the period's last day, included whole.
  return dateOnly && parameter === "to" ? ms + DAY_MS : ms;
}

/**
 * The period: `from` included, `to` excluded as an instant, or included whole as a date (to=2026-12-31
 * ends at 2027-01-01T00:00:00Z). Defaults: the current calendar year so far.
 */
export function transparencyPeriod(query: { from?: string | undefined; to?: string | undefined }, now = new Date()) {
  const to = query.to === undefined ? now.getTime() : parseBound(query.to, "to");
  const from = query.from === undefined ? Date.UTC(new Date(to - 1).getUTCFullYear(), 0, 1) : parseBound(query.from, "from");
  if (from >= to) throw new AppError("transparency.invalid_range", "from must be before to.", { status: 400, details: { parameter: "from" } });
  if (to - from > MAX_PERIOD_DAYS * DAY_MS) {
    throw new AppError("transparency.range_too_large", `A report covers at most ${MAX_PERIOD_DAYS} days: report per calendar year (or half-year).`, { status: 400, details: { parameter: "from" } });
  }
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

const add = (counts: Counts, key: string, n: number) => {
  counts[key] = (counts[key] ?? 0) + n;
};
const zeros = (keys: readonly string[]): Counts => Object.fromEntries(keys.map((key) => [key, 0]));
const sorted = (counts: Counts): Counts => Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));

/**
 * Actions (decisions that restrict) broken down as the template asks: by restriction type and value
 * (a decision restricting visibility and the account counts once under each; a visibility list under
 * each of its values), category, ground, source, detection and automation; decisions not to act apart.
 */
function actionsOf(rows: TransparencyRows["decisions"]) {
  const out = {
    actions: 0,
    decisionsNotToAct: 0,
    byRestrictionType: zeros(["visibility", "monetary", "provision", "account"]),
    byRestriction: { visibility: zeros(VISIBILITY), monetary: zeros(MONETARY), provision: zeros(PROVISION), account: zeros(ACCOUNT) },
    byCategory: {} as Counts,
    byGround: zeros(["illegal_content", "incompatible_content"]),
    bySource: {} as Counts,
    byAutomatedDetection: zeros(["automated", "not_automated"]),
    byAutomatedDecision: zeros(["fully", "partially", "not_automated"]),
  };
  for (const row of rows) {
    const restrictions = JSON.parse(row.restrictions) as Restrictions;
    if (!restrictsAnything(restrictions)) {
      out.decisionsNotToAct += row.n;
      continue;
    }
    out.actions += row.n;
    const visibility = restrictions.visibility ?? [];
    if (visibility.length > 0) add(out.byRestrictionType, "visibility", row.n);
    for (const value of new Set(visibility)) add(out.byRestriction.visibility, value, row.n);
    for (const type of ["monetary", "provision", "account"] as const) {
      const value = restrictions[type];
      if (!value) continue;
      add(out.byRestrictionType, type, row.n);
      add(out.byRestriction[type], value, row.n);
    }
    add(out.byCategory, row.category, row.n);
    add(out.byGround, row.ground, row.n);
    add(out.bySource, row.source, row.n);
    add(out.byAutomatedDetection, row.detection === 1 ? "automated" : "not_automated", row.n);
    add(out.byAutomatedDecision, row.automation, row.n);
  }
  return { ...out, byCategory: sorted(out.byCategory), bySource: sorted(out.bySource) };
}

const seconds = (value: number | null | undefined) => (value === null || value === undefined ? null : Math.round(value * 1000) / 1000);

function noticesSection(rows: TransparencyRows) {
  const received = rows.reports.filter((row) => (NOTICE_SOURCES as readonly string[]).includes(row.source));
  const bySubmitter = zeros(NOTICE_SOURCES);
  const byCategory: Counts = {};
  const byCategoryAndSubmitter: Record<string, Counts> = {};
  for (const row of received) {
    add(bySubmitter, row.source, row.n);
    add(byCategory, row.category, row.n);
    const category = row.category;
    byCategoryAndSubmitter[category] ??= zeros(NOTICE_SOURCES);
    add(byCategoryAndSubmitter[category], row.source, row.n);
  }
  const timeOf = (source: string) => rows.timeToAct.find((row) => row.source === source);
  const actions = actionsOf(rows.decisions.filter((row) => (NOTICE_SOURCES as readonly string[]).includes(row.source)));
  return {
    article: "Art. 15(1)(b), Art. 16",
    templateSection: "1.3",
    received: {
      total: Object.values(bySubmitter).reduce((sum, n) => sum + n, 0),
      bySubmitter,
      byCategory: sorted(byCategory),
      byCategoryAndSubmitter: Object.fromEntries(Object.entries(byCategoryAndSubmitter).sort(([a], [b]) => a.localeCompare(b))),
    },
    otherNotificationsReceived: rows.reports.filter((row) => row.source === "other_notification").reduce((sum, row) => sum + row.n, 0),
    actions,
    processedByAutomatedMeans: actions.byAutomatedDecision.fully! + actions.byAutomatedDecision.partially!,
    timeToAct: {
      actedOn: timeOf("*")?.acted ?? 0,
      medianSeconds: seconds(timeOf("*")?.medianSeconds),
      bySubmitter: Object.fromEntries(NOTICE_SOURCES.map((source) => [source, { actedOn: timeOf(source)?.acted ?? 0, medianSeconds: seconds(timeOf(source)?.medianSeconds) }])),
    },
    actionsOnOtherNotifications: actionsOf(rows.decisions.filter((row) => row.source === "other_notification")),
  };
}

function complaintsSection(rows: TransparencyRows) {
  const receivedByAppellant: Counts = zeros(["notifier", "affected", "unknown"]);
  for (const row of rows.complaintsReceived) add(receivedByAppellant, row.role ?? "unknown", row.n);
  const outcomes = zeros(["upheld", "overturned"]);
  const byAppellant: Record<string, Counts> = {};
  for (const row of rows.complaintsDecided) {
    add(outcomes, row.outcome, row.n);
    const role = row.role ?? "unknown";
    byAppellant[role] ??= zeros(["upheld", "overturned"]);
    add(byAppellant[role], row.outcome, row.n);
  }
  const decided = outcomes.upheld! + outcomes.overturned!;
  return {
    article: "Art. 15(1)(d), Art. 20",
    templateSection: "1.5",
    received: { total: Object.values(receivedByAppellant).reduce((sum, n) => sum + n, 0), byAppellant: receivedByAppellant },
    decided: { total: decided, upheld: outcomes.upheld!, overturned: outcomes.overturned!, byAppellant },
    /** An overturned complaint reversed the contested decision. */
    decisionsReversed: outcomes.overturned!,
    medianSecondsToDecide: seconds(rows.complaintTime?.medianSeconds),
    /** Complaints resolved by an API key rather than a person (Art. 20(6): never by automation alone). */
    decidedByAutomation: rows.complaintsDecided.filter((row) => row.byAutomation === 1).reduce((sum, row) => sum + row.n, 0),
    reversalsRecorded: {
      reversed: rows.reversals?.reversed ?? 0,
      byAutomation: rows.reversals?.byAutomation ?? 0,
      /** Reversals whose statement has its Transparency Database uuid (the database has no update endpoint). */
      withStatementUuid: rows.reversals?.withStatement ?? 0,
    },
  };
}

function suspensionsSection(rows: TransparencyRows, actions: ReturnType<typeof actionsOf>, art23: { suspensions: number; refused: number }) {
  const sanctions = (kind: string) => rows.notifierSanctions.find((row) => row.kind === kind)?.n ?? 0;
  return {
    article: "Art. 24(1)(b), Art. 23",
    templateSection: "1.5.1",
    accountRestrictions: { suspended: actions.byRestriction.account.suspended ?? 0, terminated: actions.byRestriction.account.terminated ?? 0 },
    note: "accountRestrictions: decisions restricting an account (restrictions.account) in the period, whatever their source. manifestlyIllegalContent: account suspensions the platform imposed under Art. 23(1) (its strike ladder or a person's sanction, for manifestly illegal content, after a prior warning), counted apart.",
    /** Art. 23(1): suspensions for frequently providing manifestly illegal content, and those refused for want of a prior warning. */
    manifestlyIllegalContent: { suspensions: art23.suspensions, refusedWithoutPriorWarning: art23.refused },
    manifestlyUnfoundedNotices: { suspensions: sanctions("suspension"), warnings: sanctions("warning") },
    manifestlyUnfoundedComplaints: notKnown("The platform does not suspend complainants for manifestly unfounded complaints (Art. 23(2)); such suspensions are not recorded."),
  };
}

async function automatedMeansSection(env: Env, actor: Actor, rows: TransparencyRows, all: ReturnType<typeof actionsOf>) {
  const decided = (automated: boolean) => {
    const matching = rows.complaintsDecided.filter((row) => row.automation !== null && (row.automation !== "not_automated") === automated);
    const total = matching.reduce((sum, row) => sum + row.n, 0);
    const overturned = matching.filter((row) => row.outcome === "overturned").reduce((sum, row) => sum + row.n, 0);
    return { decided: total, overturned, overturnRate: wilson(overturned, total) };
  };
  // The shadow evaluation of each version that decided with automation in the period (its accuracy against people).
  const shadowEvaluations = [];
  for (const version of rows.automatedVersions) {
    const report = await shadowReport(env, actor, version.versionId);
    shadowEvaluations.push({ workflowVersionId: version.versionId, automatedDecisions: version.n, runsCompared: report.runsCompared, agreement: report.agreement, kappa: report.kappa.kappa, truncated: report.truncated });
  }
  const qa = rows.qa ?? { reviewed: 0, agreed: 0 };
  return {
    article: "Art. 15(1)(e), Art. 42(2)(c)",
    templateSection: "1.6",
    actionsByAutomatedDetection: all.byAutomatedDetection,
    actionsByAutomatedDecision: all.byAutomatedDecision,
    complaintsOnAutomatedDecisions: decided(true),
    complaintsOnHumanDecisions: decided(false),
    shadowEvaluations,
    reviewerQa: { reviewed: qa.reviewed, agreement: wilson(qa.agreed, qa.reviewed) },
    definitions: {
      overturnRate: "Of complaints decided in the period on decisions made with automation (fully or partially), the share overturned: a possible rate of error (95% Wilson interval).",
      shadowEvaluations: "Each workflow version that decided with automation in the period (at most 10, most decisions first): its shadow runs against people's decisions on the same reports, over its whole history.",
      reviewerQa: "Blind second reviews completed in the period that agreed with the first answer; golden items are left out.",
    },
  };
}

/** The report for a period: every figure the platform holds for the template, and what it cannot know. */
export async function transparencyReport(env: Env, actor: Actor, query: { from?: string | undefined; to?: string | undefined }) {
  const period = transparencyPeriod(query);
  // An installation whose cases were archived (cases/archive) no longer has their rows in D1; the
  // archive takes a case only once its days are rolled up, so its report reads the rollups whatever
  // the period's length.
  const archivedCases = await env.DB.prepare(`SELECT 1 AS x FROM case_archive_totals WHERE installation_id = ?1`).bind(actor.installationId).first();
  const fromRollups = Date.parse(period.to) - Date.parse(period.from) > ROWS_MAX_DAYS * DAY_MS || archivedCases !== null;
  const rows = fromRollups ? await readTransparencyRowsFromRollups(env.DB, actor.installationId, period.from, period.to) : await readTransparencyRows(env.DB, actor.installationId, period.from, period.to);
  const all = actionsOf(rows.decisions);
  // Art. 23(1) suspensions are few rows on an index of their own (account_sanctions_art23): read directly whatever the period.
  const art23 = (await env.DB.prepare(ART23_SUSPENSIONS_SQL).bind(actor.installationId, period.from, period.to).first<{ suspensions: number; refused: number }>()) ?? { suspensions: 0, refused: 0 };
  const ownInitiative = actionsOf(rows.decisions.filter((row) => row.source === "voluntary"));
  return {
    template: "Commission Implementing Regulation (EU) 2024/2835, Annex I, quantitative template",
    installationId: actor.installationId,
    period: { ...period, note: "from included, to excluded" },
    /**
     * `rows` for periods up to ROWS_MAX_DAYS; `daily_rollups` beyond, and for any period of an
     * installation with archived cases: the same counts, and medians that are the upper bound of
     * their histogram bucket (within a factor of √2).
     */
    computedFrom: fromRollups ? ("daily_rollups" as const) : ("rows" as const),
    generatedAt: new Date().toISOString(),
    sections: {
      orders: {
        article: "Art. 15(1)(a), Art. 9 and 10",
        templateSection: "1.2",
        ordersToAct: notKnown("Orders from Member State authorities to act against illegal content are not recorded on the platform."),
        ordersToProvideInformation: notKnown("Orders from Member State authorities to provide information are not recorded on the platform."),
      },
      notices: noticesSection(rows),
      ownInitiative: {
        article: "Art. 15(1)(c)",
        templateSection: "1.4",
        flagsReceived: rows.reports.filter((row) => row.source === "voluntary").reduce((sum, row) => sum + row.n, 0),
        actions: ownInitiative,
      },
      complaints: complaintsSection(rows),
      outOfCourtDisputes: {
        article: "Art. 24(1)(a), Art. 21",
        templateSection: "1.5.1",
        disputesSubmitted: notKnown("Disputes brought to out-of-court settlement bodies, their outcomes and times are not reported back to the platform."),
      },
      suspensions: suspensionsSection(rows, all, { suspensions: Number(art23.suspensions), refused: Number(art23.refused) }),
      automatedMeans: await automatedMeansSection(env, actor, rows, all),
      humanResources: {
        article: "Art. 42(2)(a) and (b)",
        templateSection: "1.7",
        moderators: notKnown("The number of people moderating, their languages and qualifications are not recorded on the platform."),
      },
      activeRecipients: {
        article: "Art. 24(2), Art. 42(3)",
        templateSection: "1.8",
        averageMonthlyActiveRecipients: notKnown("The platform sees reports and decisions, not the product's users: the product counts its active recipients."),
      },
    },
  };
}

export type TransparencyReport = Awaited<ReturnType<typeof transparencyReport>>;
