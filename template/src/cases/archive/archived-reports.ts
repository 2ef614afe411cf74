// Archived reports for analysis over history (backtests): found and read straight from R2, never
// brought back to D1. A report of an archived case is found by its id through its ref object
// (`refs/report/<id>`, case-scope.ts) and by its time through a day ref written beside it:
// `archive/v1/<installation>/days/<YYYY-MM-DD>/reports/<createdAt>_<reportId>`, whose body names
// the case. Listing one day's prefix answers that day's archived reports in time order without a
// D1 row; listing the `days/` level with a delimiter answers which days hold any.
import { archivedReportRowsStatement, type ReportRow } from "../reports/reports-queries";
import { caseRefKey, ID, PREFIX, readCaseArchive, type Row } from "./case-scope";

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$/u;
/** R2 reads in flight at once while looking reports up. */
const PARALLEL = 16;
/** Reports read back per statement (their sealed parts keep one bound value well under D1's 2 MB). */
const ROWS_PER_STATEMENT = 200;

/** The day ref of a report archived with its case; null for a creation time that is not ISO 8601 UTC. */
export function reportDayRefKey(installationId: string, createdAt: string, reportId: string): string | null {
  return ISO_TIME.test(createdAt) && ID.test(reportId) ? `${PREFIX}/${installationId}/days/${createdAt.slice(0, 10)}/reports/${createdAt}_${reportId}` : null;
}

async function inParallel<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      out[index] = await work(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, lane));
  return out;
}

/** Which of `ids` are reports of archived cases: report id → case id (ids that are not are left out). */
export async function archivedReportCases(env: Env, installationId: string, ids: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  await inParallel(
    ids.filter((id) => ID.test(id)),
    async (id) => {
      const ref = await env.WORKFLOW_ARTIFACTS.get(caseRefKey(installationId, "report", id));
      const caseId = ref ? await ref.text() : null;
      if (caseId && ID.test(caseId)) found.set(id, caseId);
    },
  );
  return found;
}

/**
 * The installation's archived reports created in [from, to), oldest first (then by id), at most
 * `limit`, leaving out `skip` (reports already found hot). Reads only day refs: one list call per
 * thousand reports of a day in range.
 */
export async function archivedReportsInRange(env: Env, installationId: string, range: { from?: string | null; to?: string | null }, limit: number, skip: ReadonlySet<string> = new Set()): Promise<Array<{ id: string; createdAt: string }>> {
  const bucket = env.WORKFLOW_ARTIFACTS;
  const daysPrefix = `${PREFIX}/${installationId}/days/`;
  const days: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix: daysPrefix, delimiter: "/", cursor });
    for (const prefix of page.delimitedPrefixes) days.push(prefix.slice(daysPrefix.length, -1));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  const fromDay = range.from ? range.from.slice(0, 10) : null;
  const toDay = range.to ? range.to.slice(0, 10) : null;
  const out: Array<{ id: string; createdAt: string }> = [];
  for (const day of days.filter((d) => /^\d{4}-\d{2}-\d{2}$/u.test(d) && (fromDay === null || d >= fromDay) && (toDay === null || d <= toDay)).sort()) {
    const prefix = `${daysPrefix}${day}/reports/`;
    let dayCursor: string | undefined;
    do {
      const page = await bucket.list({ prefix, cursor: dayCursor });
      for (const object of page.objects) {
        const name = object.key.slice(prefix.length);
        const cut = name.indexOf("Z_");
        if (cut < 0) continue;
        const createdAt = name.slice(0, cut + 1);
        const id = name.slice(cut + 2);
        if (!ISO_TIME.test(createdAt) || !ID.test(id) || skip.has(id)) continue;
        if ((range.from && createdAt < range.from) || (range.to && createdAt >= range.to)) continue;
        out.push({ id, createdAt });
      }
      dayCursor = page.truncated ? page.cursor : undefined;
      // Keys list in byte order, which is time order within a day: a day read to `limit` is enough.
    } while (dayCursor && out.length < limit);
    if (out.length >= limit) break;
  }
  out.sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1));
  return out.slice(0, limit);
}

/**
 * The rows of archived reports among `ids`, as the hot rows read (ReportRow), from their case
 * objects in R2; nothing comes back to D1. Ids that are no archived report of the installation are
 * left out.
 */
export async function archivedReportRows(env: Env, installationId: string, ids: readonly string[]): Promise<ReportRow[]> {
  const cases = await archivedReportCases(env, installationId, ids);
  const caseIds = [...new Set(cases.values())];
  const objects = await inParallel(caseIds, (caseId) => readCaseArchive(env, installationId, caseId));
  const reports: Row[] = [];
  const caseRows: Row[] = [];
  for (const object of objects) {
    if (!object) continue;
    caseRows.push(...object.tables.cases);
    reports.push(...object.tables.reports.filter((row) => cases.has(String(row.id))));
  }
  const out: ReportRow[] = [];
  for (let i = 0; i < reports.length; i += ROWS_PER_STATEMENT) {
    const slice = reports.slice(i, i + ROWS_PER_STATEMENT);
    const wanted = slice.map((row) => String(row.id));
    const owners = new Set(slice.map((row) => String(row.case_id)));
    const { results } = await archivedReportRowsStatement(env.DB, installationId, wanted, { reports: slice, cases: caseRows.filter((row) => owners.has(String(row.id))) }).all<ReportRow>();
    out.push(...results);
  }
  return out;
}
