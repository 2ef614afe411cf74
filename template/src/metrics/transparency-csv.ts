// The transparency report as CSV, for the Commission's CSV/XLSX template: one row per figure
// (template section, article, section, figure path, value, note), flattened from the JSON report so both
// always say the same; a figure the platform does not hold has an empty value and its reason.
import type { Actor } from "../auth";
import { transparencyReport, type TransparencyReport } from "./transparency";

export const TRANSPARENCY_COLUMNS = ["template_section", "article", "section", "figure", "value", "note"] as const;

type Cell = string | number | null;

/** A text cell a spreadsheet would not run as a formula. */
function field(value: Cell): string {
  if (value === null) return "";
  if (typeof value !== "string") return String(value);
  const text = /^[=+\-@\t\r]/u.test(value) ? `'${value}` : value;
  return /[",\r\n]/u.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Leaves of one section as [path, value, note]; a not-known figure is one row with its reason. */
function leaves(value: unknown, path: string, out: Array<[string, Cell, Cell]>): void {
  if (isRecord(value) && value.known === false) {
    out.push([path, null, `${value.notRecordedYet ? "not recorded yet" : "not known"}: ${String(value.reason)}`]);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      const key = isRecord(item) && typeof item.workflowVersionId === "string" ? item.workflowVersionId : String(index);
      leaves(item, `${path}[${key}]`, out);
    });
    return;
  }
  if (isRecord(value)) {
    for (const [key, child] of Object.entries(value)) leaves(child, path ? `${path}.${key}` : key, out);
    return;
  }
  if (typeof value === "string" && /(^|\.)(article|templateSection)$/u.test(path)) return;
  out.push([path, typeof value === "boolean" ? String(value) : ((value ?? null) as Cell), null]);
}

/** The CSV text of a report: the period first, then every section's figures. */
export function transparencyCsv(report: TransparencyReport): string {
  const rows: Cell[][] = [
    ["1.1", "", "identification", "installationId", report.installationId, null],
    ["1.1", "", "identification", "period.from", report.period.from, "included"],
    ["1.1", "", "identification", "period.to", report.period.to, "excluded"],
    ["1.1", "", "identification", "template", report.template, null],
  ];
  for (const [name, section] of Object.entries(report.sections)) {
    const out: Array<[string, Cell, Cell]> = [];
    leaves(section, "", out);
    const templateSection = (section as { templateSection?: string }).templateSection ?? "";
    const article = (section as { article?: string }).article ?? "";
    for (const [path, value, note] of out) rows.push([templateSection, article, name, path, value, note]);
  }
  return `${[TRANSPARENCY_COLUMNS, ...rows].map((cells) => cells.map(field).join(",")).join("\r\n")}\r\n`;
}

/** GET /transparency-report.csv (and ?format=csv): the report as a CSV download. */
export async function transparencyReportCsv(env: Env, actor: Actor, query: { from?: string | undefined; to?: string | undefined }): Promise<Response> {
  const report = await transparencyReport(env, actor, query);
  const name = `transparency-report-${report.period.from.slice(0, 10)}-${report.period.to.slice(0, 10)}.csv`;
  return new Response(transparencyCsv(report), {
    headers: { "content-type": "text/csv; charset=utf-8", "content-disposition": `attachment; filename="${name}"`, "cache-control": "no-store" },
  });
}
