// Case management: reports, cases, triggers, queues, tasks, appeals, report-crypto.
export { reportSummary } from "./reports";
export { findQueueRow } from "./queues";
export { rewrapDataKeys } from "./report-crypto";
