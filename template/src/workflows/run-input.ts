// How a run's input and output are stored. A trigger's run starts with the summary of the report it runs for
// (`{"report":{caseId, category, categorySpecification, createdAt, evidenceCount, id, source,
// subject:{id, kind}}}`), about 270 bytes of which a third are key names and the report's id, which
// the run's report_id holds again. Such an input is stored as `@r` and a JSON list of the values
// alone (the id left out, null, where it is the run's report), about 150 bytes less a run. Any
// other input, and every row of an earlier release, is stored as its canonical JSON; a reader
// takes either (runInputJson) and always answers the canonical JSON the run was created with.
//
// A run that ended at an end node without a mapped result has the output
// `{"port":"terminal","terminalCode":<code>}` (workflows/kinds/executors.ts); it is stored as `@t`
// and the code (about 35 bytes less a run). Readers take either form (runOutputJson).
import { canonicalJson } from "../audit";

/** The stored form's mark: no JSON text starts with `@`. */
const REPORT_SUMMARY = "@r";

type Summary = [string, string, unknown, string, number, string | null, string, string, string];

function expand(values: Summary, reportId: string | null): string {
  const [caseId, category, categorySpecification, createdAt, evidenceCount, id, source, subjectId, subjectKind] = values;
  return canonicalJson({ report: { caseId, category, categorySpecification, createdAt, evidenceCount, id: id ?? reportId, source, subject: { id: subjectId, kind: subjectKind } } });
}

/**
 * The form a run's canonical input JSON is stored in: the compact report summary where the input
 * is exactly one (it reads back to the same text, checked here), else the canonical JSON itself.
 */
export function storedRunInput(inputJson: string, reportId: string | null): string {
  if (!inputJson.startsWith('{"report":{')) return inputJson;
  const report = (JSON.parse(inputJson) as { report?: Record<string, unknown> }).report;
  if (!report || typeof report !== "object" || Array.isArray(report)) return inputJson;
  const subject = (report.subject ?? {}) as Record<string, unknown>;
  const values = [report.caseId, report.category, report.categorySpecification, report.createdAt, report.evidenceCount, reportId !== null && report.id === reportId ? null : report.id, report.source, subject.id, subject.kind] as Summary;
  if (!values.every((value, i) => (i === 2 ? value !== undefined : i === 4 ? typeof value === "number" : typeof value === "string" || (i === 5 && value === null)))) return inputJson;
  // Only a form that reads back to the very same text is kept (key sets, order, numbers, escapes).
  return expand(values, reportId) === inputJson ? `${REPORT_SUMMARY}${JSON.stringify(values)}` : inputJson;
}

/** A run's input as canonical JSON, from either stored form (the run's report_id completes the compact one). */
export function runInputJson(stored: string, reportId: string | null): string {
  if (!stored.startsWith(REPORT_SUMMARY)) return stored;
  return expand(JSON.parse(stored.slice(REPORT_SUMMARY.length)) as Summary, reportId);
}

/** The stored form's mark of an end node's plain output. */
const TERMINAL = "@t";

function terminalOutput(terminalCode: string): string {
  return canonicalJson({ port: "terminal", terminalCode });
}

/** The form a run's canonical output JSON is stored in: `@t` and the code for an end node's plain output (read back to the same text, checked), else the JSON itself. */
export function storedRunOutput(outputJson: string): string {
  if (!outputJson.startsWith('{"port":"terminal","terminalCode":')) return outputJson;
  const output = JSON.parse(outputJson) as Record<string, unknown>;
  const code = output.terminalCode;
  return typeof code === "string" && terminalOutput(code) === outputJson ? `${TERMINAL}${code}` : outputJson;
}

/** A run's output as canonical JSON (or null: none yet), from either stored form. */
export function runOutputJson(stored: string | null): string | null {
  return stored?.startsWith(TERMINAL) ? terminalOutput(stored.slice(TERMINAL.length)) : stored;
}
