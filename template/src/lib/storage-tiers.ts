// What every archive tier shares (workflows/run-archive.ts, cases/archive/case-archive.ts).

/** Days a closed case stays whole in D1 when the installation has not chosen (workflows/storage.ts). */
export const DEFAULT_HOT_DAYS = 7;

/**
 * Minutes an ended run's step history (steps, outputs, waits, events, repairs) stays in D1 before
 * it moves to its run archive object, when the installation's window is longer; a window of 0 days
 * moves it at once; a failed run keeps it for the whole window (repair). The run row itself stays with its case for the whole window. An hour covers a
 * run's immediate aftermath (the inspector, a repair, a shadow comparison of the same hour); after
 * that every read serves the history from R2 as it served it from D1, and D1 keeps a case's
 * lifecycle for the window without its step-by-step record (most of a lifecycle's bytes).
 */
export const RUN_HISTORY_HOT_MINUTES = 60;

/**
 * Minutes a sealed, checkpointed audit event stays in D1 before it moves to an R2 segment
 * (audit/segment-sweep.ts), when the installation's window is longer. Reads of the trail (the
 * list, by target through the segments' target markers, and full verification) serve archived
 * events as they serve hot ones, so D1 keeps only the trail's last hour and head: the audit trail
 * was the largest part of a lifecycle's bytes in D1 (15 events, about 8 KB) for the whole window.
 */
export const AUDIT_HOT_MINUTES = 60;

/**
 * The fewest events a segment holds when it leaves before the installation's window (after
 * AUDIT_HOT_MINUTES): a quiet installation keeps its few events for the window rather than writing a
 * segment (an index row and an object) every minute.
 */
export const SEGMENT_MIN_EVENTS = 500;

/**
 * SQL: the minutes an ended run's history stays in D1 for an installation whose window is
 * `hotDaysSql` days. A failed run keeps it for the whole window: a repair re-runs from the failed
 * step's record in D1, and an on-call engineer has the window to repair it.
 */
export const runHistoryMinutesSql = (hotDaysSql: string, stateSql: string) =>
  `CASE WHEN ${stateSql} = 'failed' THEN COALESCE(${hotDaysSql}, ${DEFAULT_HOT_DAYS}) * 1440 ELSE MIN(COALESCE(${hotDaysSql}, ${DEFAULT_HOT_DAYS}) * 1440, ${RUN_HISTORY_HOT_MINUTES}) END`;

/**
 * Minutes a settled webhook delivery (delivered or dead) keeps its sealed payload and its attempt
 * rows in D1 before they move to the delivery's archive object (enforcement/delivery-archive.ts),
 * when the installation's window is longer; a window of 0 days moves them at once. The delivery
 * row itself stays in D1 for the window (lists, filters, metrics and the outbox read it), without
 * the payload (two thirds of its bytes) and without its attempts. An hour covers a delivery's
 * aftermath (an operator reading its attempts, a resend); after that every read serves them from
 * R2 as it served them from D1.
 */
export const DELIVERY_PAYLOAD_HOT_MINUTES = 60;

/** SQL: the minutes a settled delivery keeps its payload and attempts in D1 for an installation whose window is `hotDaysSql` days. */
export const deliveryPayloadMinutesSql = (hotDaysSql: string) => `MIN(COALESCE(${hotDaysSql}, ${DEFAULT_HOT_DAYS}) * 1440, ${DELIVERY_PAYLOAD_HOT_MINUTES})`;
