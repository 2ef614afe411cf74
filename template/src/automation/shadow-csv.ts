// The shadow report as CSV, for a spreadsheet: one row per figure (section, slice, outcome,
// metric, value, interval, counts), or with `?rows=reports` one row per compared report (its id,
// category, source, week, the two outcomes). Report ids and verdicts only, never content.
import type { Actor } from "../auth";
import { notFound } from "../errors";
import { type ComparedItem, reportFigures, SLICE_DIMENSIONS, type SliceFigures, loadEvaluation } from "./shadow-report";
import { backtestSource } from "./shadow-sources";
import type { Proportion } from "./statistics";

export const CSV_ROW_KINDS = ["figures", "reports"] as const;
export type CsvRowKind = (typeof CSV_ROW_KINDS)[number];

export const FIGURE_COLUMNS = ["section", "slice", "outcome", "metric", "value", "low", "high", "successes", "trials"] as const;
export const REPORT_COLUMNS = ["reportId", "category", "source", "week", "proposed", "human", "agreed"] as const;

type Cell = string | number | boolean | null;

/** A text cell a spreadsheet would not run as a formula; numbers as JavaScript prints them. */
function field(value: Cell): string {
  if (value === null) return "";
  if (typeof value !== "string") return String(value);
  const text = /^[=+\-@\t\r]/u.test(value) ? `'${value}` : value;
  return /[",\r\n]/u.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

const line = (cells: readonly Cell[]) => cells.map(field).join(",");

function proportionRow(section: string, slice: string, outcome: string, metric: string, p: Proportion): Cell[] {
  return [section, slice, outcome, metric, p.value, p.low, p.high, p.successes, p.trials];
}

function sliceRows(section: string, figures: SliceFigures): Cell[][] {
  const rows: Cell[][] = [
    [section, figures.key, "", "compared", figures.compared, null, null, null, null],
    proportionRow(section, figures.key, "", "agreement", figures.agreement),
    [section, figures.key, "", "kappa", figures.kappa.kappa, null, null, null, figures.kappa.n],
    [section, figures.key, "", "kappa_observed", figures.kappa.observed, null, null, null, figures.kappa.n],
    [section, figures.key, "", "kappa_expected", figures.kappa.expected, null, null, null, figures.kappa.n],
  ];
  for (const o of figures.outcomes) {
    rows.push(
      proportionRow(section, figures.key, o.outcome, "precision", o.precision),
      proportionRow(section, figures.key, o.outcome, "recall", o.recall),
      // F1 = 2·tp / (2·tp + fp + fn): its successes and trials are those counts.
      [section, figures.key, o.outcome, "f1", o.f1, null, null, 2 * o.truePositives, 2 * o.truePositives + o.falsePositives + o.falseNegatives],
      [section, figures.key, o.outcome, "true_positives", o.truePositives, null, null, null, null],
      [section, figures.key, o.outcome, "false_positives", o.falsePositives, null, null, null, null],
      [section, figures.key, o.outcome, "false_negatives", o.falseNegatives, null, null, null, null],
    );
  }
  return rows;
}

/** The CSV text of a report's figures (overall, then each slice) or of its compared reports. */
export function reportCsv(figures: ReturnType<typeof reportFigures>, kind: CsvRowKind): string {
  if (kind === "reports") {
    const rows = figures.compared.map((item: ComparedItem) => [item.reportId, item.category, item.source, item.week, item.proposed, item.human, item.proposed === item.human]);
    return `${[line(REPORT_COLUMNS), ...rows.map(line)].join("\r\n")}\r\n`;
  }
  const count = (metric: string, value: number): Cell[] => ["overall", "", "", metric, value, null, null, null, null];
  const overall: SliceFigures = { key: "", compared: figures.runsCompared, agreement: figures.agreement, kappa: figures.kappa, outcomes: figures.outcomes };
  const rows: Cell[][] = [
    count("evaluated", figures.shadowRuns + figures.needsReview + figures.failed),
    count("without_human_decision", figures.withoutHumanDecision),
    count("without_proposal", figures.withoutProposal),
    count("needs_review", figures.needsReview),
    count("failed", figures.failed),
    count("truncated", figures.truncated ? 1 : 0),
    ...sliceRows("overall", overall),
  ];
  for (const dimension of SLICE_DIMENSIONS) for (const slice of figures.slices[dimension]) rows.push(...sliceRows(dimension, slice));
  return `${[line(FIGURE_COLUMNS), ...rows.map(line)].join("\r\n")}\r\n`;
}

function csvResponse(text: string, filename: string): Response {
  return new Response(text, {
    headers: { "content-type": "text/csv; charset=utf-8", "content-disposition": `attachment; filename="${filename}"`, "cache-control": "no-store" },
  });
}

/** GET /workflow-versions/:id/shadow-report.csv: the version's shadow runs against people's decisions. */
export async function shadowReportCsv(env: Env, actor: Actor, workflowVersionId: string, kind: CsvRowKind): Promise<Response> {
  const figures = reportFigures(await loadEvaluation(env, actor, workflowVersionId, null));
  return csvResponse(reportCsv(figures, kind), `shadow-report-${workflowVersionId}${kind === "reports" ? "-reports" : ""}.csv`);
}

/** GET /backtests/:id/report.csv: one backtest's figures so far (durable or fast); another installation's is a 404. */
export async function backtestReportCsv(env: Env, actor: Actor, backtestId: string, kind: CsvRowKind): Promise<Response> {
  const backtest = await backtestSource(env.DB, actor.installationId, backtestId);
  if (!backtest) throw notFound("backtest");
  const figures = reportFigures(await loadEvaluation(env, actor, backtest.workflowVersionId, backtestId));
  return csvResponse(reportCsv(figures, kind), `backtest-${backtestId}${kind === "reports" ? "-reports" : ""}.csv`);
}
