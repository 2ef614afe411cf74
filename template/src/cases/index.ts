// Case management: reports, cases, triggers, queues, tasks, appeals, report-crypto.
// Only modules that do not reach the workflows domain are exported here (workflows imports this
// index, and tasks/triggers import the workflows index): report queries, queues, the human_tasks
// statement builders, the taxonomy and report-crypto.
export { contentOf, openRunContent, runContentStatementUnsafe, type ContentView, type RunContentRow } from "./content";
export {
  COMPLAINT_PERIOD_MONTHS,
  complaintDeadline,
  complaintResolutionFigures,
  decisionReversalFigures,
  decisionReversalUuidStatement,
  type ReversalFigures,
} from "./complaints";
export { findQueueRow } from "./queues";
export {
  getReportRow,
  reportSummary,
  reportRowsStatement,
  reportSummaryByRunStatementUnsafe,
  type ReportPersonalData,
  type ReportRow,
  type ReportSummary,
} from "./reports-queries";
export { openPersonalData, rewrapDataKeys, sealPersonalData } from "./report-crypto";
export { closeStepTaskStatement, openTaskStatement, runEndTaskStatements, sealLegacyTaskContexts, sweepLapsedLeases } from "./task-records";
export {
  APPEAL_OUTCOMES,
  APPELLANT_ROLES,
  DSA_KEYWORDS,
  POLICY_CATEGORIES,
  REPORT_SOURCES,
  SUBJECT_KINDS,
  TRIGGER_EVENTS,
  dsaCategory,
  normalizeCategory,
  type PolicyCategory,
  type TriggerEvent,
} from "./taxonomy";
