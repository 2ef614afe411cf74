// The reported content as automation may see it (`content` in expressions): the report's snapshot,
// description, subject URL and owner, and evidence, plus an appeal's reason. Never the reporter.
// Opened by the host for one node at a time; the caller records the read (report.content_read).
import { openPersonalDataOr } from "./report-crypto";
import { ERASED_REPORT, type ReportPersonalData } from "./reports-queries";

export interface RunContentRow {
  reportId: string | null;
  reportSealed: string | null;
  appealId: string | null;
  appealSealed: string | null;
}

export interface ContentView {
  snapshot: unknown;
  description: string | null;
  url: string | null;
  ownerId: string | null;
  evidence: unknown[];
  appealReason?: string | null;
}

/** The sealed content of a run's report and appeal, by run id (host-internal: the caller authorized the run). */
export function runContentStatementUnsafe(db: D1Database, runId: string): D1PreparedStatement {
  return db
    .prepare(`
    SELECT r.id AS reportId, r.personal_data AS reportSealed, a.id AS appealId, a.personal_data AS appealSealed
    FROM workflow_runs w
      LEFT JOIN reports r ON r.id = w.report_id AND r.installation_id = w.installation_id
      LEFT JOIN appeals a ON a.id = w.appeal_id AND a.installation_id = w.installation_id
    WHERE w.id = ?1`)
    .bind(runId);
}

/** The content of a report's sealed personal data: everything but the reporter. */
export function contentOf(personal: ReportPersonalData): ContentView {
  return {
    snapshot: personal.snapshot ?? null,
    description: personal.description ?? null,
    url: personal.subjectUrl ?? null,
    ownerId: personal.subjectOwnerId ?? null,
    evidence: personal.evidence ?? [],
  };
}

/** Opens the content of a run's report (and appeal); null when the run has neither. */
export async function openRunContent(env: Env, installationId: string, row: RunContentRow | undefined): Promise<ContentView | null> {
  if (!row?.reportSealed && !row?.appealSealed) return null;
  const report = row.reportSealed && row.reportId ? contentOf(await openPersonalDataOr<ReportPersonalData>(env, installationId, `report:${row.reportId}`, row.reportSealed, ERASED_REPORT)) : null;
  const view: ContentView = report ?? { snapshot: null, description: null, url: null, ownerId: null, evidence: [] };
  if (row.appealSealed && row.appealId) {
    const appeal = await openPersonalDataOr<{ reason?: string }>(env, installationId, `appeal:${row.appealId}`, row.appealSealed, { reason: undefined });
    view.appealReason = appeal.reason ?? null;
  }
  return view;
}
