// Case management: reports, cases, triggers, queues, tasks, appeals, report-crypto. One folder per
// capability: reports/ (intake, queries, sealing, content, timeline), triggers/, queues/ (queues,
// tasks, leases, task records), qa/ (QA and golden items), wellness/, promotion/, retention/,
// notices/ (trusted flaggers, notifiers), appeals/ (appeals, complaints); taxonomy.ts is the
// vocabulary every folder shares, routes.ts the domain's HTTP routes.
// Only modules that do not reach the workflows domain are exported here (workflows imports this
// index, and tasks/triggers import the workflows index): report queries, queues, the human_tasks
// statement builders, the taxonomy and report-crypto.
export { contentOf, openRunContent, runContentStatementUnsafe, type ContentView, type RunContentRow } from "./reports/content";
export {
  COMPLAINT_PERIOD_MONTHS,
  complaintDeadline,
  complaintResolutionFigures,
  decisionReversalFigures,
  decisionReversalUuidStatement,
  type ReversalFigures,
} from "./appeals/complaints";
export { archiveCaseOrHold, archivedCaseObjects, caseArchiveTotals } from "./archive/case-archive";
export { archivedReportCases, archivedReportRows, archivedReportsInRange } from "./archive/archived-reports";
export { hotOrArchived } from "./archive/case-rehydrate";
export { findQueueJsonSql, findQueueRow, type QueueRow } from "./queues/queues";
export { DEFAULT_HOLD_DAYS, holdStatements } from "./retention/preservation-holds";
export { search, type SearchQuery } from "./search/search";
export { listTermsOnReports } from "./search/search-terms";
export {
  getReportRow,
  reportSummary,
  reportRowsStatement,
  REPORT_SUMMARY_BY_RUN_JSON_SQL,
  reportSummaryByRunStatementUnsafe,
  type ReportPersonalData,
  type ReportRow,
  type ReportSummary,
  type ReportSummaryRow,
} from "./reports/reports-queries";
export { isDataKeyDestroyed, openPersonalData, openPersonalDataOr, rewrapDataKeys, sealPersonalData, warmSealingKey } from "./reports/report-crypto";
// People's keys as a backup carries them (rows), restores them (R2 objects) and a failed restore removes them.
export { deleteInstallationPersonKeys, isObjectKeyRow, personKeyObjectRows, restorePersonKeyObjects } from "./reports/person-data-keys";
export { taskIdOf, taskStepSql } from "./queues/task-ids";
export { closeStepTaskStatement, openTaskStatements, RUN_END_TASKS_SQL, TASK_COMPLETED_BY_SQL, runEndTaskStatements, sealLegacyTaskContexts, sweepLapsedLeases } from "./queues/task-records";
export {
  APPEAL_OUTCOMES,
  APPELLANT_ROLES,
  DSA_KEYWORDS,
  POLICY_CATEGORIES,
  QUEUE_WELLNESS,
  REPORT_SOURCES,
  SUBJECT_KINDS,
  TRIGGER_EVENTS,
  dsaCategory,
  normalizeCategory,
  type PolicyCategory,
  type TriggerEvent,
} from "./taxonomy";
